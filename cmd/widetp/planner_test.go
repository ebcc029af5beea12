package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
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
