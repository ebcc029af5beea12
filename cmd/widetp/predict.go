package main

import (
	"context"
	"time"

	"github.com/widetp/widetp/check"
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/scenarios"
	"github.com/widetp/widetp/vllm"
)

// predict derives every process record of s from the vLLM model, as a run's processes would
// report them.
func predict(s *scenarios.Scenario) ([]report.Process, error) {
	return vllm.Predict(s.Deployment())
}

// predictWith is predict over the plans of any planner.
func predictWith(ctx context.Context, pl vllm.Planner, s *scenarios.Scenario) ([]report.Process, error) {
	d := s.Deployment()
	plans, err := pl.PlanDeployment(ctx, d)
	if err != nil {
		return nil, err
	}
	return vllm.PredictPlans(d, plans)
}

// prediction is what the model says a run of a scenario shows: its records after the timeline
// (after start-up when it has none), every violation found at any point, and the timeline.
type prediction struct {
	procs      []report.Process
	violations []report.Violation
	steps      []report.Step
	// checking is the time the checks took.
	checking time.Duration
}

// predictChecked predicts s with pl's plans and runs the checks once the deployment settled and
// again after every fault step, as a run does.
func predictChecked(ctx context.Context, pl vllm.Planner, s *scenarios.Scenario) (*prediction, error) {
	if len(s.Faults) == 0 {
		procs, err := predictWith(ctx, pl, s)
		if err != nil {
			return nil, err
		}
		t0 := time.Now()
		vs := check.Run(procs)
		return &prediction{procs: procs, violations: vs, checking: time.Since(t0)}, nil
	}
	d := s.Deployment()
	plans, err := pl.PlanDeployment(ctx, d)
	if err != nil {
		return nil, err
	}
	t, err := vllm.PredictTimeline(d, plans, s.FaultSteps())
	if err != nil {
		return nil, err
	}
	// What steal-port steps did, they did during start-up: the start-up without them tells which
	// of the settled deployment's violations are theirs.
	var stolen []report.Violation
	if hasSteal(s) {
		plain, err := vllm.PredictPlans(d, plans)
		if err != nil {
			return nil, err
		}
		stolen = check.New(check.Run(plain), check.Run(t.Settled))
	}
	t0 := time.Now()
	prev := check.Run(t.Settled)
	out := &prediction{procs: t.Settled, violations: prev}
	defer func() { out.checking = time.Since(t0) }()
	for i, sp := range t.Steps {
		vs := check.Run(sp.Processes)
		st := s.Faults[i]
		found := check.New(prev, vs)
		if st.Action == scenarios.ActStealPort {
			found, stolen = stolen, []report.Violation{}
		}
		out.steps = append(out.steps, report.Step{Name: st.Name, Action: st.Describe(), After: st.After.String(),
			Effects: sp.Effects, Violations: found})
		out.violations = check.Union(out.violations, vs)
		out.procs, prev = sp.Processes, vs
	}
	return out, nil
}

// reportPlanner is a planner's source as a report records it.
func reportPlanner(pl vllm.Planner) *report.Planner {
	src := pl.Source()
	return &report.Planner{Name: pl.Name(), Version: src.Version, Commit: src.Commit, Path: src.Path, Digest: src.Digest}
}

func hasSteal(s *scenarios.Scenario) bool {
	for _, st := range s.Faults {
		if st.Action == scenarios.ActStealPort {
			return true
		}
	}
	return false
}
