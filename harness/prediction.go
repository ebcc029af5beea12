package harness

import (
	"context"
	"time"

	"github.com/widetp/widetp/check"
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/scenarios"
	"github.com/widetp/widetp/vllm"
)

// Prediction is what the model says a run of a scenario shows: its records after the timeline
// (after start-up when it has none), every violation found at any point, and the timeline.
type Prediction struct {
	Processes  []report.Process
	Violations []report.Violation
	Steps      []report.Step
	// Checking is the time the checks took.
	Checking time.Duration
}

// Predict is what the model says a run of s shows, with pl's plans: the checks run once the
// deployment settled and again after every fault step, as RunTimeline does, and a steal-port
// step is credited with what start-up showed because of it.
func Predict(ctx context.Context, pl vllm.Planner, s *scenarios.Scenario) (*Prediction, error) {
	d := s.Deployment()
	plans, err := pl.PlanDeployment(ctx, d)
	if err != nil {
		return nil, err
	}
	if len(s.Faults) == 0 {
		procs, err := vllm.PredictPlans(d, plans)
		if err != nil {
			return nil, err
		}
		t0 := time.Now()
		vs := check.Run(procs)
		return &Prediction{Processes: procs, Violations: vs, Checking: time.Since(t0)}, nil
	}
	t, err := vllm.PredictTimeline(d, plans, s.FaultSteps())
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	prev := check.Run(t.Settled)
	out := &Prediction{Processes: t.Settled, Violations: prev}
	// What a steal-port step did, it did during start-up: the settled deployment's violations are
	// credited to it (RunTimeline does the same).
	stolen := prev
	defer func() { out.Checking = time.Since(t0) }()
	for i, sp := range t.Steps {
		vs := check.Run(sp.Processes)
		st := s.Faults[i]
		found := check.New(prev, vs)
		if st.Action == scenarios.ActStealPort {
			found, stolen = stolen, []report.Violation{}
		}
		out.Steps = append(out.Steps, report.Step{Name: st.Name, Action: st.Describe(), After: st.After.String(),
			Effects: sp.Effects, Violations: found})
		out.Violations = check.Union(out.Violations, vs)
		out.Processes, prev = sp.Processes, vs
	}
	return out, nil
}
