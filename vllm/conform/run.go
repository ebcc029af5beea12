package conform

import (
	"context"

	"github.com/widetp/widetp/vllm"
)

// PlannerFailed is a deployment one planner could not plan at all (not a vLLM refusal: those are
// crashes, compared like any field).
type PlannerFailed struct {
	Scenario string `json:"scenario"`
	Error    string `json:"error"`
}

// Deployment plans d with the vllm planner and with the model (under d.Profile) and compares
// them. An error is a planner that failed.
func Deployment(ctx context.Context, d vllm.Deployment, vllmPlanner vllm.Planner, c *Counts) ([]Disagreement, error) {
	got, err := vllmPlanner.PlanDeployment(ctx, d)
	if err != nil {
		return nil, err
	}
	want, err := vllm.ModelPlanner{}.PlanDeployment(ctx, d)
	if err != nil {
		return nil, err
	}
	return Compare(d.Name, got, want, c), nil
}
