package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/widetp/widetp/scenarios"
	"github.com/widetp/widetp/vllm"
	"github.com/widetp/widetp/vllm/probe/probetest"
)

// asProfile plans as the model under a fixed profile: a vLLM with that profile's behaviour.
type asProfile struct {
	prof vllm.Profile
	src  vllm.PlannerSource
	fail bool
}

func (a asProfile) Name() string               { return "vllm" }
func (a asProfile) Source() vllm.PlannerSource { return a.src }
func (a asProfile) PlanDeployment(ctx context.Context, d vllm.Deployment) ([]*vllm.NodePlan, error) {
	if a.fail {
		return nil, errors.New("this planner plans nothing")
	}
	d.Profile = a.prof
	return vllm.ModelPlanner{}.PlanDeployment(ctx, d)
}

// --profile auto's finding is kept per vLLM source: a second run over the same vLLM reads it
// (a planner that can plan nothing still gets the profile), another vLLM gets its own.
func TestProfileDetectionIsCachedPerVLLM(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	main, _ := vllm.ProfileNamed("main")
	old, _ := vllm.ProfileNamed("pre-48061")
	src := vllm.PlannerSource{Name: "vllm", Path: "/src/vllm", Digest: "d1"}

	got, findings, err := detectProfile(context.Background(), asProfile{prof: old, src: src}, main)
	if err != nil || got.Name != "pre-48061" || len(findings) != len(vllm.Changes()) {
		t.Fatalf("first detection: %s, %d findings, %v; want pre-48061", got.Name, len(findings), err)
	}
	files, _ := filepath.Glob(filepath.Join(os.Getenv("XDG_CACHE_HOME"), "widetp", "profile-detection", "*.json"))
	if len(files) != 1 {
		t.Fatalf("cache files %v, want one", files)
	}
	got, _, err = detectProfile(context.Background(), asProfile{src: src, fail: true}, main)
	if err != nil || got.Name != "pre-48061" {
		t.Errorf("second detection over the same vLLM: %s, %v; want the cached pre-48061", got.Name, err)
	}
	other := src
	other.Digest = "d2"
	got, _, err = detectProfile(context.Background(), asProfile{prof: main, src: other}, main)
	if err != nil || got.Name != "main" {
		t.Errorf("detection over another vLLM: %s, %v; want main, found anew", got.Name, err)
	}
}

// The profile found is written into generated scenarios in a form that reads back as the same
// values: a named profile by its name, any other as main with the changes where it differs.
func TestProfileSpecOfReadsBack(t *testing.T) {
	var mixed []vllm.Profile
	for _, set := range []map[string]string{
		{"mooncake_dp_index": "legacy"},
		{"external_lb_rank": "infer", "zmq_port_alloc": "probe"},
	} {
		p, err := vllm.ResolveProfile("main-455edc0", set)
		if err != nil {
			t.Fatal(err)
		}
		mixed = append(mixed, p.Canonical())
	}
	for _, p := range mixed {
		spec := profileSpecOf(p)
		back, err := scenarios.ParseProfileSpec(spec.String())
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		r, err := vllm.ResolveProfile(back.Base, back.Changes)
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		for _, c := range vllm.Changes() {
			a, _ := p.Value(c.Name)
			b, _ := r.Value(c.Name)
			if a != b {
				t.Errorf("%s: %s reads back as %s, was %s", spec, c.Name, b, a)
			}
		}
	}
	for _, n := range vllm.ProfileNames() {
		p, _ := vllm.ProfileNamed(n)
		if spec := profileSpecOf(p.Canonical()); spec.String() != n {
			t.Errorf("named profile %s is written as %q", n, spec)
		}
	}
}

// `widetp conform` against the snapshot, with no --profile: the JSON names the profile it found
// (main-455edc0: vLLM main of 2026-08, without PR #53743), how each change was told, and an empty
// list of disagreements for a shipped scenario.
func TestConformFindsTheSnapshotsProfile(t *testing.T) {
	dir, cleanup, skip := probetest.Unpack()
	if skip != "" {
		t.Skip(skip)
	}
	t.Cleanup(cleanup)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	var out, errOut bytes.Buffer
	code := run([]string{"conform", "--vllm", dir, "--json", filepath.Join(scenarioDir, "vllm53743-external-lb-shared-nodes-fixed.yaml")}, &out, &errOut)
	var rep conformReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("exit %d, stdout is not one report: %v\n%s\n%s", code, err, out.String(), errOut.String())
	}
	if code != exitMatch || rep.Profile != probetest.SnapshotProfile || rep.Disagreements == nil || len(rep.Disagreements) != 0 {
		t.Errorf("exit %d, profile %s, disagreements %v; want 0, %s, []", code, rep.Profile, rep.Disagreements, probetest.SnapshotProfile)
	}
	told := map[string]string{}
	for _, fd := range rep.Detection {
		if fd.Told() {
			told[fd.Change] = fd.Value
		}
	}
	if told["nnodes_within_dp"] != "floor" || told["external_lb_rank"] != "infer" {
		t.Errorf("changes told %v; want nnodes_within_dp=floor and external_lb_rank=infer among them", told)
	}
	if !bytes.Contains(out.Bytes(), []byte(`"disagreements":[]`)) {
		t.Errorf("no disagreements must read as an empty list: %s", out.String())
	}
}
