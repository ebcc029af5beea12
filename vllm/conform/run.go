package conform

import (
	"context"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/widetp/widetp/report"

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
	var (
		got      []*vllm.NodePlan
		verdicts map[string]string
		err      error
	)
	if vp, ok := vllmPlanner.(verdictPlanner); ok {
		got, verdicts, err = vp.PlanWithVerdicts(ctx, d)
	} else {
		got, err = vllmPlanner.PlanDeployment(ctx, d)
	}
	if err != nil {
		return nil, err
	}
	// The model plans for the installation vLLM's code ran from (where envs.py looks for the
	// Rust front end's binary, and whether it is there).
	d.Install = vllmPlanner.Source().Install
	want, err := vllm.ModelPlanner{}.PlanDeployment(ctx, d)
	if err != nil {
		return nil, err
	}
	out := Compare(d.Name, got, want, c)
	if verdicts != nil {
		out = append(out, CompareHandshakes(d, got, verdicts, c)...)
	}
	return out, nil
}

// verdictPlanner is a planner that also reports vLLM's own handshake verdicts (vllm/probe).
type verdictPlanner interface {
	PlanWithVerdicts(ctx context.Context, d vllm.Deployment) ([]*vllm.NodePlan, map[string]string, error)
}

// CompareHandshakes checks vllm.HandshakeExpect.Refuse and RefuseReady against vLLM's
// wait_for_engine_startup: for every front end of the plans that serves a handshake, the refusals
// they find among the HELLOs its barrier's members carry must contain the one vLLM raised, and be
// empty when vLLM raised none. The parallel config hashes a refusal quotes are each planner's own
// (the model's digest, vLLM's compute_hash): they compare as "<hash>". A front end that never serves
// its handshake, because binding it failed (another command of its host bound the address first;
// the model's paper execution of the plans, vllm.PredictPlans, says which), refuses nothing, and
// an engine that front end would have started sends no HELLO anywhere.
func CompareHandshakes(d vllm.Deployment, plans []*vllm.NodePlan, verdicts map[string]string, c *Counts) []Disagreement {
	scenario := d.Name
	// started is nil when the paper execution fails: every member then counts.
	var started map[string]bool
	exits := map[string]string{}
	if recs, err := vllm.PredictPlans(d, plans); err == nil {
		started = map[string]bool{}
		for _, r := range recs {
			started[r.ID] = true
			if r.Exit != nil {
				exits[r.ID] = r.Exit.Error
			}
		}
	}
	procs := flatten(plans)
	type member struct {
		id, host string
		r        vllm.RendezvousPlan
	}
	byKey := map[string][]member{}
	ids := make([]string, 0, len(procs))
	for id, p := range procs {
		ids = append(ids, id)
		for _, r := range p.Rendezvous {
			k := report.BarrierKey(p.Identity.Host, r.Address)
			byKey[k] = append(byKey[k], member{id, p.Identity.Host, r})
		}
	}
	sort.Strings(ids)
	var out []Disagreement
	for _, id := range ids {
		p := procs[id]
		for _, r := range p.Rendezvous {
			if !r.BindsEarly || r.Expect == nil {
				continue
			}
			c.Fields++
			refusals := map[string]bool{}
			var list []string
			// The handshake is a ROUTER socket without handover: a second peer that connects with
			// an engine index (its identity) already in use is rejected, and its HELLO never
			// arrives. Which one comes first is a race; the probe feeds the front end's own engines
			// first, then the others (vllm/probe conventions.feed_front_end), and so does this.
			members := byKey[report.BarrierKey(p.Identity.Host, r.Address)]
			own := func(m member) bool { return strings.HasPrefix(m.id, p.Identity.ID+"/") }
			sort.SliceStable(members, func(i, j int) bool {
				if own(members[i]) != own(members[j]) {
					return own(members[i])
				}
				return members[i].id < members[j].id
			})
			claimed := map[int]bool{}
			if exits[id] == vllm.ZMQBindError(r.Address, vllm.AddressInUse) {
				members = nil
			}
			for _, m := range members {
				if started != nil && !started[m.id] {
					continue // its front end failed before starting it: no HELLO
				}
				if m.r.Hello == nil || claimed[m.r.Hello.Index] {
					continue
				}
				claimed[m.r.Hello.Index] = true
				for _, t := range []string{r.Expect.Refuse(*m.r.Hello), maskHashes(r.Expect.RefuseReady(*m.r.Hello))} {
					if t != "" && !refusals[t] {
						refusals[t] = true
						list = append(list, t)
					}
				}
			}
			v := maskHashes(verdicts[id])
			if (v == "") == (len(list) == 0) && (v == "" || refusals[v]) {
				continue
			}
			out = append(out, Disagreement{Scenario: scenario, Process: id, Field: "handshake_refusal",
				VLLM: v, Model: strings.Join(list, " | "), Area: "rendezvous"})
		}
	}
	return out
}

var hashValue = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(Worker|Expected) hash: [^,. ]+`) })

// maskHashes names the hash values of a configuration-mismatch refusal by their place.
func maskHashes(s string) string { return hashValue().ReplaceAllString(s, "$1 hash: <hash>") }
