package scenarios

import (
	"fmt"
	"sort"
	"strings"

	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/vllm"
)

// validate checks what needs the vLLM model: the profile resolves, every command parses as vLLM's
// argument parser would and serves the scenario's model. It fills s.Resolved and each node's Args.
func validate(s *Scenario, o options) error {
	p := &parser{file: s.File}
	// The file's own profile must resolve even when overridden: the file is still what is loaded.
	if prof, err := resolve(s.Profile); err != nil {
		p.errorAt(s.profileLine, "profile", "%v", err)
	} else {
		s.Resolved = prof
	}
	if o.profile != nil {
		prof, err := resolve(*o.profile)
		if err != nil {
			return fmt.Errorf("--profile %s: %w", o.profile, err)
		}
		s.Profile, s.Resolved = *o.profile, prof
	}
	for i := range s.Nodes {
		n := &s.Nodes[i]
		n.Args = make([]*vllm.ServeArgs, len(n.Commands))
		for j, c := range n.Commands {
			field := commandField(i, j, n.viaCommand)
			a, err := vllm.ParseServe(c)
			if err != nil {
				p.errorAt(n.CommandLines[j], field, "%v", err)
				continue
			}
			if a.Model != s.Model.Name {
				p.errorAt(n.CommandLines[j], field, "serves %q, but the scenario's model.name is %q", a.Model, s.Model.Name)
				continue
			}
			n.Args[j] = a
		}
	}
	if len(p.errs) == 0 {
		p.checkGPUs(s)
	}
	if len(p.errs) == 0 && len(s.Faults) > 0 {
		p.checkFaults(s)
	}
	return p.err()
}

// checkGPUs rejects a node whose commands together start more GPU workers than it has GPUs. vLLM
// checks each command alone against the devices it sees (ParallelConfig: "World size (N) is larger
// than the number of available GPUs"); co-located commands oversubscribing one node are caught
// nowhere until CUDA runs out of memory, so the loader catches them. A command's GPUs on a node are
// the workers the model plans there: its local world size times its local engines.
func (p *parser) checkGPUs(s *Scenario) {
	opts := vllm.Options{Model: s.Model, Profile: s.Resolved, Seed: s.Name}
	type use struct{ node, cmd int }
	perHost := map[string]map[use]int{}
	d := s.Deployment()
	for i, vn := range d.Nodes {
		plan, err := vllm.PlanNode(vn, opts)
		if err != nil {
			p.errorAt(s.Nodes[i].Line, fmt.Sprintf("nodes[%d]", i), "%v", err)
			continue
		}
		for j, top := range plan.Commands {
			if c := top.Crash; c != nil && c.Stage == vllm.StageConfig && strings.Contains(c.Error, vllmTooFewGPUs) {
				p.errorAt(s.Nodes[i].CommandLines[j], commandField(i, j, s.Nodes[i].viaCommand),
					"needs more GPUs than %s has (%d); vLLM would refuse it: %s", s.Nodes[i].Host, s.Nodes[i].GPUs, c.Error)
				continue
			}
			walk(top, func(pp *vllm.ProcessPlan) {
				if pp.Identity.Role != report.RoleWorker {
					return
				}
				if perHost[pp.Identity.Host] == nil {
					perHost[pp.Identity.Host] = map[use]int{}
				}
				perHost[pp.Identity.Host][use{i, j}]++
			})
		}
	}
	for i, n := range s.Nodes {
		uses := perHost[n.Host]
		total := 0
		var parts []string
		for j := range n.Commands {
			if c := uses[use{i, j}]; c > 0 {
				total += c
				parts = append(parts, fmt.Sprintf("%s: %d", commandField(i, j, n.viaCommand), c))
			}
		}
		for u, c := range uses {
			if u.node != i {
				total += c
				parts = append(parts, fmt.Sprintf("nodes[%d].commands[%d]: %d", u.node, u.cmd, c))
			}
		}
		if total > n.GPUs {
			sort.Strings(parts)
			p.errorAt(n.Line, fmt.Sprintf("nodes[%d]", i), "%s has %d GPUs but its commands start %d GPU workers on it (%s)",
				n.Host, n.GPUs, total, strings.Join(parts, ", "))
		}
	}
}

// vllmTooFewGPUs is how vLLM's ParallelConfig refuses one command whose world does not fit the
// node (vllm/config/parallel.py: "World size (N) is larger than the number of available GPUs (M)
// in this node"); the model raises it verbatim, and a test pins that this loader sees it.
const vllmTooFewGPUs = "is larger than the number of available GPUs"

func commandField(node, cmd int, viaCommand bool) string {
	if viaCommand {
		return fmt.Sprintf("nodes[%d].command", node)
	}
	return fmt.Sprintf("nodes[%d].commands[%d]", node, cmd)
}

func walk(pp *vllm.ProcessPlan, fn func(*vllm.ProcessPlan)) {
	fn(pp)
	for _, c := range pp.Children {
		walk(c, fn)
	}
}

// resolve turns a profile spec into the model's profile.
func resolve(spec ProfileSpec) (vllm.Profile, error) {
	if len(spec.Changes) == 0 {
		return vllm.ProfileNamed(spec.Base)
	}
	return vllm.ResolveProfile(spec.Base, spec.Changes)
}
