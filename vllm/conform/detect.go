package conform

import (
	"context"

	"github.com/widetp/widetp/vllm"
)

// Finding is how DetectProfile chose one change's value.
type Finding struct {
	Change string `json:"change"`
	Value  string `json:"value"`
	// Witnesses are the deployments the model plans differently under the change's values, each
	// planned with vLLM; none: no deployment of the pool tells the values apart, and the base
	// profile's value is kept.
	Witnesses []string `json:"witnesses,omitempty"`
	// Disagreements counts, for each value, the fields on which the model under that value
	// disagrees with vLLM over the witnesses.
	Disagreements map[string]int `json:"disagreements,omitempty"`
}

// Told reports whether a witness decided the value (else it is the base profile's).
func (f Finding) Told() bool { return len(f.Witnesses) > 0 }

// DetectionPool is the deployments DetectProfile looks for witnesses among: every launch path
// several times over, from a seed of their own.
func DetectionPool(base vllm.Profile) []vllm.Deployment {
	return Generate(4*len(launchPaths), "profile-detection", base)
}

// maxWitnesses bounds the deployments one change is told by; enoughCandidates is how many
// deployments that tell the values apart pickWitnesses looks at (once every pair of values is
// among them) before it picks the cheapest.
const (
	maxWitnesses     = 3
	enoughCandidates = 6
)

// DetectProfile finds the profile the vLLM behind pl behaves as. For every change the profiles
// pin, it takes from pool the deployments whose model plans differ between the change's values
// (first those that tell the most pairs of values apart, at most maxWitnesses), plans them with
// vLLM, and keeps the value under which the model disagrees with vLLM on the fewest fields (on a
// tie, the base's value when it is among the best, else the newest of them). A change no
// deployment of the pool tells apart keeps the base's value. The changes are decided against the
// values found so far, again until nothing moves, so one change's witness is not misread through
// another change's wrong value. A vLLM plan that fails (a launch path the planner does not run)
// drops that witness.
func DetectProfile(ctx context.Context, pl vllm.Planner, base vllm.Profile, pool []vllm.Deployment) (vllm.Profile, []Finding, error) {
	install := pl.Source().Install
	vplans := map[string][]*vllm.NodePlan{}
	failed := map[string]bool{}
	vllmPlan := func(d vllm.Deployment) ([]*vllm.NodePlan, bool, error) {
		if failed[d.Name] {
			return nil, false, nil
		}
		if p, ok := vplans[d.Name]; ok {
			return p, true, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		p, err := pl.PlanDeployment(ctx, d)
		if err != nil {
			if ctx.Err() != nil {
				return nil, false, ctx.Err()
			}
			failed[d.Name] = true
			return nil, false, nil
		}
		vplans[d.Name] = p
		return p, true, nil
	}
	// The model's plans by deployment and profile: every change asks again for the plans under
	// the values found so far.
	type planKey struct {
		name string
		prof vllm.Profile
	}
	mplans := map[planKey][]*vllm.NodePlan{}
	modelPlan := func(d vllm.Deployment, prof vllm.Profile) []*vllm.NodePlan {
		prof.Name = ""
		k := planKey{d.Name, prof}
		if p, ok := mplans[k]; ok {
			return p
		}
		d.Profile = prof
		d.Install = install
		p, err := vllm.ModelPlanner{}.PlanDeployment(ctx, d)
		if err != nil {
			p = nil
		}
		mplans[k] = p
		return p
	}
	cur := base
	var findings []Finding
	for round := 0; round < len(vllm.Changes()); round++ {
		next := cur
		findings = findings[:0]
		for _, ch := range vllm.Changes() {
			have, _ := cur.Value(ch.Name)
			under := make([]vllm.Profile, len(ch.Values))
			for i, v := range ch.Values {
				p, err := cur.With(ch.Name, v)
				if err != nil {
					return vllm.Profile{}, nil, err
				}
				under[i] = p
			}
			fd := Finding{Change: ch.Name, Value: have}
			witnesses, models := pickWitnesses(pool, under, modelPlan)
			scores := make([]int, len(ch.Values))
			for wi, d := range witnesses {
				got, ok, err := vllmPlan(d)
				if err != nil {
					return vllm.Profile{}, nil, err
				}
				if !ok {
					continue
				}
				fd.Witnesses = append(fd.Witnesses, d.Name)
				for i := range ch.Values {
					var c Counts
					scores[i] += len(Compare(d.Name, got, models[wi][i], &c))
				}
			}
			if fd.Told() {
				fd.Disagreements = map[string]int{}
				best := -1
				for i, v := range ch.Values {
					fd.Disagreements[v] = scores[i]
					if best < 0 || scores[i] <= scores[best] {
						best = i // the newest of the fewest
					}
				}
				fd.Value = ch.Values[best]
				for i, v := range ch.Values {
					if v == have && scores[i] == scores[best] {
						fd.Value = have
					}
				}
			}
			if fd.Value != have {
				var err error
				if next, err = next.With(ch.Name, fd.Value); err != nil {
					return vllm.Profile{}, nil, err
				}
			}
			findings = append(findings, fd)
		}
		if next == cur {
			break
		}
		cur = next
	}
	return cur.Canonical(), findings, nil
}

// pickWitnesses returns the deployments of pool whose model plans differ between the profiles
// under (one per value of a change), those that tell the most pairs of values apart first (of
// those, the one with the fewest processes, the cheapest to plan with vLLM), at most maxWitnesses,
// stopping once every pair is told apart; and for each, its model plans under each profile.
func pickWitnesses(pool []vllm.Deployment, under []vllm.Profile, modelPlan func(vllm.Deployment, vllm.Profile) []*vllm.NodePlan) ([]vllm.Deployment, [][][]*vllm.NodePlan) {
	type cand struct {
		d     vllm.Deployment
		plans [][]*vllm.NodePlan
		pairs map[[2]int]bool
		size  int // processes: what planning it with vLLM costs
	}
	n := len(under)
	want := n * (n - 1) / 2
	var cands []cand
	covered := map[[2]int]bool{}
	for _, d := range pool {
		c := cand{d: d, pairs: map[[2]int]bool{}}
		for _, p := range under {
			c.plans = append(c.plans, modelPlan(d, p))
		}
		for i := 0; i < n; i++ {
			for j := i + 1; j < n; j++ {
				if plansDiffer(d.Name, c.plans[i], c.plans[j]) {
					c.pairs[[2]int{i, j}] = true
				}
			}
		}
		if len(c.pairs) > 0 {
			for _, pl := range c.plans {
				c.size = max(c.size, len(flatten(pl)))
			}
			for pr := range c.pairs {
				covered[pr] = true
			}
			cands = append(cands, c)
		}
		if len(cands) >= enoughCandidates && len(covered) == want {
			break
		}
	}
	var (
		out    []vllm.Deployment
		plans  [][][]*vllm.NodePlan
		shown  = map[[2]int]bool{}
		chosen = map[int]bool{}
	)
	for len(out) < maxWitnesses && len(shown) < want {
		best, gain := -1, 0
		for i, c := range cands {
			if chosen[i] {
				continue
			}
			g := 0
			for pr := range c.pairs {
				if !shown[pr] {
					g++
				}
			}
			if g > gain || g == gain && g > 0 && c.size < cands[best].size {
				best, gain = i, g
			}
		}
		if best < 0 {
			break
		}
		chosen[best] = true
		for pr := range cands[best].pairs {
			shown[pr] = true
		}
		out = append(out, cands[best].d)
		plans = append(plans, cands[best].plans)
	}
	return out, plans
}

// plansDiffer reports whether two model plans of one deployment differ in any compared field (a
// plan the model could not make differs from one it could).
func plansDiffer(name string, a, b []*vllm.NodePlan) bool {
	if (a == nil) != (b == nil) {
		return true
	}
	var c Counts
	return len(Compare(name, a, b, &c)) > 0
}
