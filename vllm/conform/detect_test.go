package conform_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/widetp/widetp/vllm"
	"github.com/widetp/widetp/vllm/conform"
	"github.com/widetp/widetp/vllm/probe/probetest"
)

// behavesAs is a planner that plans every deployment as the model does under one fixed profile,
// whatever the deployment pins: a vLLM of that profile's behaviour, as far as the model knows it.
type behavesAs struct{ prof vllm.Profile }

func (b behavesAs) Name() string               { return "vllm" }
func (b behavesAs) Source() vllm.PlannerSource { return vllm.PlannerSource{Name: "vllm"} }
func (b behavesAs) PlanDeployment(ctx context.Context, d vllm.Deployment) ([]*vllm.NodePlan, error) {
	d.Profile = b.prof
	return vllm.ModelPlanner{}.PlanDeployment(ctx, d)
}

// disagreementsOn counts the fields on which the model under prof disagrees with pl over deps.
func disagreementsOn(t *testing.T, pl vllm.Planner, prof vllm.Profile, deps []vllm.Deployment) int {
	t.Helper()
	n := 0
	for _, d := range deps {
		d.Profile = prof
		var c conform.Counts
		ds, err := conform.Deployment(context.Background(), d, pl, &c)
		if err != nil {
			t.Fatalf("%s: %v", d.Name, err)
		}
		n += len(ds)
	}
	return n
}

// The profile --profile auto finds for a vLLM is one the model cannot tell from that vLLM's
// behaviour on any deployment of the pool, whatever mix of old and new behaviours that vLLM has;
// a named profile is found by its name; and a change the pool cannot tell apart keeps main's value.
// The snapshot's profile is looked for in --profile auto's own pool, the others (to keep the
// race-detector run short) in two deployments of each launch path.
func TestDetectProfileFindsWhatThePlannerBehavesAs(t *testing.T) {
	main, _ := vllm.ProfileNamed("main")
	snap := snapshotProfile(t)
	small := conform.Generate(2*len(conform.LaunchPaths()), "profile-detection-test", main)
	r := rand.New(rand.NewPCG(7, 11))
	type tc struct {
		name string
		prof vllm.Profile
	}
	var cases []tc
	for _, n := range vllm.ProfileNames() {
		p, _ := vllm.ProfileNamed(n)
		cases = append(cases, tc{n, p})
	}
	for i := 0; i < 1; i++ {
		p := main
		for _, ch := range vllm.Changes() {
			var err error
			if p, err = p.With(ch.Name, ch.Values[r.IntN(len(ch.Values))]); err != nil {
				t.Fatal(err)
			}
		}
		cases = append(cases, tc{fmt.Sprintf("mix-%d", i), p.Canonical()})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pool := small
			if c.name == snap.Name {
				pool = conform.DetectionPool(main)
			}
			pl := behavesAs{c.prof}
			got, findings, err := conform.DetectProfile(context.Background(), pl, main, pool)
			if err != nil {
				t.Fatal(err)
			}
			if n := disagreementsOn(t, pl, got, pool); n != 0 {
				t.Errorf("found %s for a vLLM that behaves as %s: %d disagreements on the pool", got.Name, c.prof.Name, n)
			}
			if _, named := vllm.ProfileNamed(c.name); named == nil && got.Name != c.name {
				t.Errorf("found %s for a vLLM that behaves as the named profile %s", got.Name, c.name)
			}
			if len(findings) != len(vllm.Changes()) {
				t.Fatalf("%d findings for %d changes", len(findings), len(vllm.Changes()))
			}
			for _, fd := range findings {
				v, _ := got.Value(fd.Change)
				// The changes that tell vLLM main of 2026-08 from main today (vLLM PRs #53743
				// and #55844) have witnesses in the pool: without them --profile auto could not
				// find the snapshot's profile.
				m, _ := main.Value(fd.Change)
				if s, _ := snap.Value(fd.Change); c.name == snap.Name && s != m && !fd.Told() {
					t.Errorf("%s (%s on main, %s on %s): no deployment of the pool tells them apart", fd.Change, m, s, snap.Name)
				}
				if fd.Value != v {
					t.Errorf("finding %s=%s, but the profile found has %s", fd.Change, fd.Value, v)
				}
				if !fd.Told() && v != m {
					t.Errorf("%s: no witness, but the value is %s, not main's %s", fd.Change, v, m)
				}
			}
		})
	}
}

// On the snapshot itself, vLLM's own launch code, --profile auto finds the snapshot's profile.
func TestProfileDetectionFindsTheSnapshotsProfile(t *testing.T) {
	pl := planner(t)
	main, _ := vllm.ProfileNamed("main")
	got, findings, err := conform.DetectProfile(context.Background(), pl, main, conform.DetectionPool(main))
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != probetest.SnapshotProfile {
		t.Errorf("found profile %s on the snapshot, want %s", got.Name, probetest.SnapshotProfile)
		for _, fd := range findings {
			t.Logf("%s=%s, witnesses %v, disagreements %v", fd.Change, fd.Value, fd.Witnesses, fd.Disagreements)
		}
	}
}
