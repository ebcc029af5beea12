package main

import (
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/scenarios"
	"github.com/widetp/widetp/vllm"
)

// predict derives every process record of s from the vLLM model, as a run's processes would
// report them.
func predict(s *scenarios.Scenario) ([]report.Process, error) {
	return vllm.Predict(s.Deployment())
}

// reportPlanner is a planner's source as a report records it.
func reportPlanner(pl vllm.Planner) *report.Planner {
	src := pl.Source()
	return &report.Planner{Name: pl.Name(), Version: src.Version, Commit: src.Commit, Path: src.Path, Digest: src.Digest}
}
