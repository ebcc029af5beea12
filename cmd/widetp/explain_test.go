package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/widetp/widetp/report"
)

const scenarioDir = "../../scenarios"

// explainJSON runs `widetp explain --json` and decodes its one report object.
func explainJSON(t *testing.T, args ...string) (report.Report, int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(append([]string{"explain", "--json"}, args...), &out, &errOut)
	var rep report.Report
	if code == exitMatch || code == exitDiffer {
		dec := json.NewDecoder(&out)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rep); err != nil {
			t.Fatalf("explain %v: stdout is not one report object: %v\n%s", args, err, out.String())
		}
		if dec.More() {
			t.Fatalf("explain %v: stdout holds more than one JSON value", args)
		}
	}
	return rep, code, errOut.String()
}

// Every shipped scenario explains with exit 0: its predicted violation kinds are its expect.
func TestExplainEveryScenario(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(scenarioDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios in %s: %v", scenarioDir, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			rep, code, stderr := explainJSON(t, f)
			if code != exitMatch {
				t.Fatalf("exit %d, want 0; stderr %s; predicted %v, expected %v\n%s", code, stderr, report.KindSet(rep.Violations), rep.Expected, messages(rep))
			}
			if !slices.Equal(report.KindSet(rep.Violations), rep.Expected) {
				t.Errorf("exit 0 but predicted %v != expected %v", report.KindSet(rep.Violations), rep.Expected)
			}
			if rep.Runtime != "none" || rep.Scenario == "" || rep.Profile == "" || len(rep.Processes) == 0 {
				t.Errorf("report header: scenario %q profile %q runtime %q, %d processes", rep.Scenario, rep.Profile, rep.Runtime, len(rep.Processes))
			}
			if want := map[bool]string{true: "pass", false: "fail"}[len(rep.Violations) == 0]; rep.Verdict != want {
				t.Errorf("verdict %q with %d violations, want %q", rep.Verdict, len(rep.Violations), want)
			}
			for _, p := range rep.Processes {
				if p.PID != 0 {
					t.Errorf("%s: a prediction has no PID, got %d", p.ID, p.PID)
				}
			}
			// The human form of the same scenario agrees on the exit code.
			var out, errOut bytes.Buffer
			if code := run([]string{"explain", f}, &out, &errOut); code != exitMatch {
				t.Errorf("human explain: exit %d, stderr %s", code, errOut.String())
			}
			for _, want := range []string{"scenario " + rep.Scenario, "PROCESS", "replicas", "violations (", "as expected"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("human output lacks %q", want)
				}
			}
		})
	}
}

// The PR #48061 deployment before the fix: the followers' workers assert, replica 1's head
// processes use index 0 against the replica's global index 1 (vllm-identity.md §4 (e2), §5).
func TestExplainPre48061Details(t *testing.T) {
	rep, code, stderr := explainJSON(t, filepath.Join(scenarioDir, "vllm48061-external-lb-wide-tp-buggy.yaml"))
	if code != exitMatch {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	byID := map[string]report.Process{}
	for _, p := range rep.Processes {
		byID[p.ID] = p
	}
	for _, v := range rep.Violations {
		switch v.Kind {
		case report.ProcessCrashed:
			if !strings.Contains(v.Processes[0], "follower") {
				t.Errorf("crash on a head: %s", v.Message)
			}
		case report.DPIndexMismatch:
			for _, id := range v.Processes {
				if p := byID[id]; p.Host != "r1-head" {
					t.Errorf("mismatch involves %s on %s, want only replica 1's head: %s", id, p.Host, v.Message)
				}
			}
			if !strings.Contains(v.Message, "Mooncake DP index 0") || !strings.Contains(v.Message, "is 1") && !strings.Contains(v.Message, "data_parallel_index 1") {
				t.Errorf("mismatch message lacks the values: %s", v.Message)
			}
		}
	}
	asserted := false
	for _, p := range rep.Processes {
		if p.Role == report.RoleWorker && p.Host == "r0-follower" {
			if p.DataParallelRankLocal != nil {
				t.Errorf("%s: headless follower worker has data_parallel_rank_local %d, want None", p.ID, *p.DataParallelRankLocal)
			}
			if p.Exit != nil && p.Exit.Error == "AssertionError" {
				asserted = true
			}
		}
	}
	if !asserted {
		t.Error("no r0-follower worker died of a bare AssertionError")
	}
	// None reaches the JSON as null, not 0.
	var out bytes.Buffer
	run([]string{"explain", "--json", filepath.Join(scenarioDir, "vllm48061-external-lb-wide-tp-buggy.yaml")}, &out, &bytes.Buffer{})
	if !strings.Contains(out.String(), `"data_parallel_rank_local":null`) {
		t.Error(`JSON lacks "data_parallel_rank_local": null for the followers`)
	}
}

func TestExplainProfileOverride(t *testing.T) {
	pre := filepath.Join(scenarioDir, "vllm48061-external-lb-wide-tp-buggy.yaml")
	fixed := filepath.Join(scenarioDir, "vllm48061-external-lb-wide-tp-fixed.yaml")
	rows := []struct {
		file, profile string
		code          int
		kinds         []report.Kind
	}{
		{pre, "main", exitDiffer, []report.Kind{}},
		{fixed, "pre-48061", exitDiffer, []report.Kind{report.DPIndexMismatch, report.ProcessCrashed}},
		{fixed, "main,mooncake_dp_index=legacy", exitDiffer, []report.Kind{report.DPIndexMismatch, report.ProcessCrashed}},
		{pre, "pre-48061,mooncake_dp_index=global", exitDiffer, []report.Kind{}},
		{fixed, "main", exitMatch, []report.Kind{}},
	}
	for _, r := range rows {
		t.Run(filepath.Base(r.file)+" as "+r.profile, func(t *testing.T) {
			// The flag may come after the file.
			rep, code, stderr := explainJSON(t, r.file, "--profile", r.profile)
			if code != r.code {
				t.Fatalf("exit %d, want %d (stderr %s)", code, r.code, stderr)
			}
			if rep.Profile != r.profile {
				t.Errorf("report profile %q, want %q", rep.Profile, r.profile)
			}
			if got := report.KindSet(rep.Violations); !slices.Equal(got, r.kinds) {
				t.Errorf("predicted %v, want %v", got, r.kinds)
			}
		})
	}
}

func TestExplainBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("name: t\ndescription: x\nprofile: main\nmodel: {name: org/X}\nnodes:\n  - host: R0\n    command: vllm serve org/X\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(scenarioDir, "vllm48061-external-lb-wide-tp-fixed.yaml")
	rows := []struct {
		name string
		args []string
		// stderr must contain every fragment: what was wrong and where.
		says []string
	}{
		{"no file", []string{"explain"}, []string{"want one scenario FILE, got 0", "Usage: widetp explain"}},
		{"two files", []string{"explain", good, good}, []string{"got 2 arguments"}},
		{"missing file", []string{"explain", filepath.Join(dir, "nope.yaml")}, []string{"nope.yaml: read scenario: no such file or directory"}},
		{"invalid file", []string{"explain", bad}, []string{bad + ":4: model.moe: required", bad + `:6: nodes[0].host: "R0" is not a DNS label`}},
		{"unknown flag", []string{"explain", good, "--jsn"}, []string{"flag provided but not defined: -jsn", "Usage: widetp explain"}},
		{"unknown profile", []string{"explain", good, "--profile", "nightly"}, []string{`--profile nightly: unknown profile "nightly"`}},
		{"unknown profile change", []string{"explain", good, "--profile", "main,lookup=x"}, []string{`unknown change "lookup"`}},
		{"malformed profile", []string{"explain", good, "--profile", "main,legacy"}, []string{`--profile: profile "main,legacy": "legacy" is not change=value`}},
		{"profile without value", []string{"explain", good, "--profile"}, []string{"flag needs an argument: -profile"}},
		{"unknown command", []string{"explian", good}, []string{`unknown command "explian"`, "Commands:"}},
		{"no command", nil, []string{"Usage:"}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(r.args, &out, &errOut); code != exitBadInput {
				t.Errorf("exit %d, want %d", code, exitBadInput)
			}
			if out.Len() != 0 {
				t.Errorf("bad input wrote to stdout: %q", out.String())
			}
			for _, s := range r.says {
				if !strings.Contains(errOut.String(), s) {
					t.Errorf("stderr lacks %q:\n%s", s, errOut.String())
				}
			}
		})
	}
}

func TestHelp(t *testing.T) {
	rows := []struct {
		args []string
		says []string
	}{
		{[]string{"--help"}, []string{"Usage:", "explain", "Exit codes"}},
		{[]string{"-h"}, []string{"Commands:"}},
		{[]string{"help", "explain"}, []string{"Usage: widetp explain FILE [--profile P] [--planner model|vllm[:PATH]] [--json]", "-profile", "-planner", "-json", "--planner picks who"}},
		{[]string{"explain", "--help"}, []string{"Usage: widetp explain FILE", "base,change=value", "Profiles: main, main-455edc0, pre-48061", "mooncake_dp_index=legacy|global"}},
		{[]string{"explain", "-h"}, []string{"Usage: widetp explain FILE"}},
	}
	for _, r := range rows {
		var out, errOut bytes.Buffer
		if code := run(r.args, &out, &errOut); code != exitMatch {
			t.Errorf("%v: exit %d, want 0", r.args, code)
		}
		for _, s := range r.says {
			if !strings.Contains(out.String(), s) {
				t.Errorf("%v: stdout lacks %q:\n%s", r.args, s, out.String())
			}
		}
		if errOut.Len() != 0 {
			t.Errorf("%v: help wrote to stderr: %q", r.args, errOut.String())
		}
	}
}

// Flags and the file in any order, and "--" ending the flags.
func TestExplainArgumentOrder(t *testing.T) {
	f := filepath.Join(scenarioDir, "vllm48061-hybrid-lb-two-hosts-buggy.yaml")
	var first string
	for _, args := range [][]string{{"explain", "--json", f}, {"explain", f, "--json"}, {"explain", "--json", "--", f}} {
		var out bytes.Buffer
		if code := run(args, &out, &bytes.Buffer{}); code != exitMatch {
			t.Fatalf("%v: exit %d", args, code)
		}
		var rep report.Report
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		rep.Timings = nil
		b, _ := json.Marshal(rep)
		if first == "" {
			first = string(b)
		} else if string(b) != first {
			t.Errorf("%v: a different report than with the flags first", args)
		}
	}
}

// The human table shows Python's None as None and the crash of each process.
func TestExplainHumanTable(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"explain", filepath.Join(scenarioDir, "vllm48061-external-lb-wide-tp-buggy.yaml")}, &out, &bytes.Buffer{}); code != exitMatch {
		t.Fatalf("exit %d", code)
	}
	text := out.String()
	for _, want := range []string{
		"node r0-follower: 8 GPUs, 1 command(s)",
		"AssertionError",
		"server ipc:///tmp/lookup_rpc_port_0_host_r1-head_dp_rank0",
		"expected [dp-index-mismatch, process-crashed], predicted [dp-index-mismatch, process-crashed]: as expected",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	var followerRow string
	for _, line := range strings.Split(text, "\n") {
		// The table row starts with the process ID; violation lines name it later.
		if strings.HasPrefix(strings.TrimSpace(line), "r0-follower/0/headless-0/worker-1 ") {
			followerRow = line
			break
		}
	}
	if fields := strings.Fields(followerRow); len(fields) < 5 || fields[4] != "None" {
		t.Errorf("follower worker row %q: want RANK_LOCAL None", followerRow)
	}
}

func messages(rep report.Report) string {
	var b strings.Builder
	for _, v := range rep.Violations {
		fmt.Fprintln(&b, v.Message)
	}
	return b.String()
}

// Each buggy scenario of the bug library and its fixed twin are one deployment under two profiles
// (scenarios' tests check the files agree): explained under its twin's profile, each predicts the
// other's violations. So the bug is exactly the profile change, not something else in the file.
func TestExplainBugTwinsDifferOnlyByProfile(t *testing.T) {
	buggy, err := filepath.Glob(filepath.Join(scenarioDir, "*-buggy.yaml"))
	if err != nil || len(buggy) == 0 {
		t.Fatalf("no buggy scenarios in %s: %v", scenarioDir, err)
	}
	for _, b := range buggy {
		f := strings.TrimSuffix(b, "-buggy.yaml") + "-fixed.yaml"
		t.Run(filepath.Base(b), func(t *testing.T) {
			bugRep, code, stderr := explainJSON(t, b)
			if code != exitMatch {
				t.Fatalf("%s: exit %d: %s", b, code, stderr)
			}
			fixRep, code, stderr := explainJSON(t, f)
			if code != exitMatch {
				t.Fatalf("%s: exit %d: %s", f, code, stderr)
			}
			asBuggy, code, stderr := explainJSON(t, f, "--profile", bugRep.Profile)
			if code != exitDiffer || !slices.Equal(report.KindSet(asBuggy.Violations), bugRep.Expected) {
				t.Errorf("fixed twin under %s: exit %d (%s), predicted %v, want the buggy twin's %v",
					bugRep.Profile, code, stderr, report.KindSet(asBuggy.Violations), bugRep.Expected)
			}
			asFixed, code, stderr := explainJSON(t, b, "--profile", fixRep.Profile)
			if code != exitDiffer || len(asFixed.Violations) != 0 {
				t.Errorf("buggy twin under %s: exit %d (%s), predicted %v, want healthy",
					fixRep.Profile, code, stderr, report.KindSet(asFixed.Violations))
			}
		})
	}
}

// What the new bugs look like in the prediction: the process and the exception or value each
// report names (vLLM source in each row).
func TestExplainBugDetails(t *testing.T) {
	rows := []struct {
		file, source string
		kind         report.Kind
		// says are fragments one violation of kind must contain.
		says []string
	}{
		{"vllm20399-headless-internal-lb-buggy.yaml", "vllm/entrypoints/cli/serve.py run_headless (PR #19790)", report.ProcessCrashed,
			[]string{"vllm-inference-pytorchjob-final-worker-0/0/headless-0", "ValueError: data_parallel_rank is not applicable in headless mode"}},
		{"vllm53743-external-lb-shared-nodes-buggy.yaml", "vllm/config/parallel.py nnodes_within_dp before PR #53743", report.ProcessCrashed,
			[]string{"node1/1/engine-core-2", "ZeroDivisionError: integer modulo by zero"}},
		{"vllm53743-explicit-rank-overwritten-buggy.yaml", "vllm/engine/arg_utils.py create_engine_config before PR #53743", report.DPIndexDuplicate,
			[]string{"4 replicas of one deployment have global DP index 4", "[node1/3/engine-core-4]"}},
		{"vllm46628-dp-supervisor-pd-buggy.yaml", "vllm/v1/engine/core.py run_engine_core before PR #46628", report.EngineIDCollision,
			[]string{"_dp0\" is held by the engines of 8 replicas", "prefill-0/0/engine-core-7"}},
		{"vllm39907-pd-multinode-tp-buggy.yaml", "vllm/config/kv_transfer.py engine_id = uuid4() per CLI parse, before PR #39907", report.EngineIDMismatch,
			[]string{"replica prefill-0:29500/dp0 holds 2 engine_ids", "prefill-1/0/headless-0/worker-0"}},
		{"vllm48061-hybrid-lb-one-host-buggy.yaml", "mooncake_utils.py get_mooncake_dp_engine_index before PR #48061", report.LookupMisrouted,
			[]string{"node0/0/engine-core-0", "answered by node0/1/engine-core-2/worker-0"}},
	}
	for _, r := range rows {
		t.Run(r.file, func(t *testing.T) {
			rep, code, stderr := explainJSON(t, filepath.Join(scenarioDir, r.file))
			if code != exitMatch {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			for _, v := range rep.Violations {
				if v.Kind != r.kind {
					continue
				}
				all := true
				for _, s := range r.says {
					all = all && strings.Contains(v.Message, s)
				}
				if all {
					return
				}
			}
			t.Errorf("[%s] no %s violation says %q:\n%s", r.source, r.kind, r.says, messages(rep))
		})
	}
}

// The human replicas table groups records as the checks do: the engines that claim one DP slot
// are listed as replicas of their own (vLLM#53743). node1's four engines all claim DP rank 4 (on
// node0 the later three front ends fail to bind the shared DP handshake and start no engine).
func TestExplainHumanReplicasSplitClaimedSlots(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"explain", filepath.Join(scenarioDir, "vllm53743-explicit-rank-overwritten-buggy.yaml")}, &out, &bytes.Buffer{}); code != exitMatch {
		t.Fatalf("exit %d", code)
	}
	rows := 0
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); len(f) >= 4 && f[0] == "node0:29500/dp4" && strings.HasPrefix(f[1], "[node1/") {
			rows++
			if f[2] != "4" || f[4] != "2" {
				t.Errorf("replica row %q: want DP index 4 and 2 workers", line)
			}
		}
	}
	if rows != 4 {
		t.Errorf("%d replica rows for slot node0:29500/dp4, want the 4 engines that claim it:\n%s", rows, out.String())
	}
}
