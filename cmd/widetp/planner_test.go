package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/vllm/probe/probetest"
)

// A --planner the tool cannot honour is bad input (exit 2) with a message saying what is missing,
// and the model planner needs nothing.
func TestPlannerFlagErrors(t *testing.T) {
	file := filepath.Join(scenarioDir, "vllm48061-hybrid-lb-one-host-fixed.yaml")
	missing := filepath.Join(t.TempDir(), "no-vllm-here")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"explain", file, "--planner", "bogus"}, `--planner "bogus": want model, vllm or vllm:PATH`},
		{[]string{"explain", file, "--planner", "model:/x"}, "--planner model takes no path"},
		{[]string{"explain", file, "--planner", "vllm:" + missing}, "no vLLM at " + missing},
		{[]string{"conform", "--vllm", missing, file}, "no vLLM at " + missing},
		{[]string{"conform", "--generate", "-1"}, "--generate must be >= 0"},
		{[]string{"conform", "--profile", "nope", file}, `unknown profile "nope"`},
	} {
		var out, errOut bytes.Buffer
		code := run(tc.args, &out, &errOut)
		if code != exitBadInput || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("widetp %v: exit %d, stderr %q; want exit 2 saying %q", tc.args, code, errOut.String(), tc.want)
		}
	}
}

func TestExplainNamesTheModelPlanner(t *testing.T) {
	rep, code, stderr := explainJSON(t, filepath.Join(scenarioDir, "vllm48061-hybrid-lb-one-host-fixed.yaml"), "--planner", "model")
	if code != exitMatch {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if rep.Planner == nil || rep.Planner.Name != "model" || rep.Planner.Version != "" {
		t.Errorf("report planner = %+v, want the model", rep.Planner)
	}
}

// `widetp run --planner vllm` hands every node the plan vLLM's own launch code made (simnode's
// Config.Plan) and runs it: the vLLM#47692 breakage, planned by the snapshot, fails on the local
// runtime exactly as the scenario expects, and the report names the planner.
func TestRunWithTheVLLMPlanner(t *testing.T) {
	dir, cleanup, skip := probetest.Unpack()
	if skip != "" {
		t.Skip(skip)
	}
	t.Cleanup(cleanup)
	file := filepath.Join(scenarioDir, "vllm47692-dp-only-headless-followers-buggy.yaml")
	out, errOut, code := runWidetp(t, "--runtime", "local", "--json", "--planner", "vllm:"+dir, file)
	if code != exitMatch {
		t.Fatalf("exit %d; stderr:\n%s", code, errOut)
	}
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("stdout is not one report: %v\n%s", err, out)
	}
	if rep.Planner == nil || rep.Planner.Name != "vllm" || rep.Planner.Path == "" || rep.Planner.Digest == "" {
		t.Errorf("report planner = %+v, want vLLM with its path and digest", rep.Planner)
	}
	refused := false
	for _, p := range rep.Processes {
		refused = refused || p.ID == "dp-leader/0/api-server-0" && p.Exit != nil && strings.Contains(p.Exit.Error, "must not use --headless")
	}
	if !refused {
		t.Errorf("the leader's front end did not refuse the headless follower's engine:\n%s", out)
	}
}
