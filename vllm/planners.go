package vllm

import (
	"context"
	"fmt"
)

// A Planner turns a deployment's `vllm serve` lines into the process plans of its nodes
// (plan.go): the step between a scenario and its execution, on paper (PredictPlans) or for real
// (simnode). Two exist: the model (ModelPlanner: this package's Go rules, no Python) and vLLM's
// own launch code run by widetp's probe (package vllm/probe). Both emit the same contract, so a
// plan runs unchanged whoever made it.
type Planner interface {
	// Name is "model" or "vllm".
	Name() string
	// Source says what planned: for the model, this package under the deployment's profile; for
	// vLLM, the installation or source tree it ran.
	Source() PlannerSource
	// PlanDeployment returns one NodePlan per node of d, in d's node order. Errors are input the
	// planner cannot plan (see PlanNode) or a planner that failed, never a vLLM refusal: those are
	// crashes in the plans.
	PlanDeployment(ctx context.Context, d Deployment) ([]*NodePlan, error)
}

// PlannerSource describes who made a plan, for reports.
type PlannerSource struct {
	// Name is the planner's name ("model", "vllm").
	Name string `json:"name"`
	// Version is vLLM's version string (vllm.version.__version__) for the vllm planner; "" for
	// the model.
	Version string `json:"version,omitempty"`
	// Commit is the vLLM commit when it can be told (a git checkout, or a version that carries
	// one); "" otherwise.
	Commit string `json:"commit,omitempty"`
	// Path is where vLLM was imported from.
	Path string `json:"path,omitempty"`
	// Digest is a SHA-256 over the vLLM modules the probe imported, so two runs over the same
	// code can be told apart from two over different code even without a commit.
	Digest string `json:"digest,omitempty"`
	// Install is what the vllm planner's installation holds that its launch code reads (the
	// model plans for it in widetp conform); the zero value for the model.
	Install Install `json:"install,omitzero"`
}

// ModelPlanner is the Go model: PlanDeployment over every node, under the deployment's profile.
type ModelPlanner struct{}

// Name implements Planner.
func (ModelPlanner) Name() string { return "model" }

// Source implements Planner.
func (ModelPlanner) Source() PlannerSource { return PlannerSource{Name: "model"} }

// PlanDeployment implements Planner.
func (ModelPlanner) PlanDeployment(ctx context.Context, d Deployment) ([]*NodePlan, error) {
	if err := checkDeployment(d); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("predict %s: %w", d.Name, err)
	}
	plans, err := PlanDeployment(d.Nodes, Options{Model: d.Model, Profile: d.Profile, Seed: d.Seed, Install: d.Install})
	if err != nil {
		return nil, fmt.Errorf("predict %s: %w", d.Name, err)
	}
	return plans, nil
}

// checkDeployment rejects what no planner can plan: no nodes, a host twice.
func checkDeployment(d Deployment) error {
	if len(d.Nodes) == 0 {
		return fmt.Errorf("predict %s: deployment has no nodes", d.Name)
	}
	hosts := map[string]bool{}
	for _, n := range d.Nodes {
		if hosts[n.Host] {
			return fmt.Errorf("predict %s: host %q appears twice", d.Name, n.Host)
		}
		hosts[n.Host] = true
	}
	return nil
}

// CheckDeployment is what every Planner checks before planning (no nodes, a host twice), for
// planners outside this package.
func CheckDeployment(d Deployment) error { return checkDeployment(d) }
