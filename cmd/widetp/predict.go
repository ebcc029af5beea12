package main

import (
	"context"

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

// reportPlanner is a planner's source as a report records it.
func reportPlanner(pl vllm.Planner) *report.Planner {
	src := pl.Source()
	return &report.Planner{Name: pl.Name(), Version: src.Version, Commit: src.Commit, Path: src.Path, Digest: src.Digest}
}
