package scenarios

import "github.com/widetp/widetp/vllm"

// Deployment is the scenario as the vLLM model takes it: every node with its environment layered
// (scenario env, then node env), under the resolved profile, seeded with the scenario name so that
// the engine_ids vLLM draws at random come out the same on every run of one scenario.
func (s *Scenario) Deployment() vllm.Deployment {
	d := vllm.Deployment{Name: s.Name, Model: s.Model, Profile: s.Resolved, Seed: s.Name}
	for _, n := range s.Nodes {
		d.Nodes = append(d.Nodes, vllm.Node{
			Host:     n.Host,
			GPUs:     n.GPUs,
			Env:      s.Environ(n),
			Commands: append([]string(nil), n.Commands...),
		})
	}
	return d
}
