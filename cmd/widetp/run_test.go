package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/widetp/widetp/report"
)

// runWidetp runs `widetp run ARGS` and returns its streams and exit code.
func runWidetp(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(append([]string{"run"}, args...), &out, &errOut)
	return out.String(), errOut.String(), code
}

// Bad input exits 2 before anything starts, naming what and where; a Docker engine that does not
// answer is an infrastructure failure (3) whose message says how to fix it or to run locally.
func TestRunBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const serve = "vllm serve org/moe --tensor-parallel-size 8"
	tooManyGPUs := write("gpus.yaml", "name: gpus\ndescription: d\nprofile: main\nmodel: {name: org/moe, moe: true}\ngpus_per_node: 4\nnodes:\n  - host: a\n    command: "+serve+"\nstore: {flavor: cpp}\n")
	repeated := write("hosts.yaml", "name: hosts\ndescription: d\nprofile: main\nmodel: {name: org/moe, moe: true}\nnodes:\n  - host: a\n    command: "+serve+"\n  - host: a\n    command: "+serve+"\nstore: {flavor: cpp}\n")
	storeName := write("store.yaml", "name: store\ndescription: d\nprofile: main\nmodel: {name: org/moe, moe: true}\nnodes:\n  - host: widetp-store\n    command: "+serve+"\nstore: {flavor: cpp}\n")
	rows := []struct {
		name    string
		args    []string
		mention string
	}{
		{"no file", nil, "want one scenario FILE"},
		{"missing file", []string{filepath.Join(dir, "nope.yaml")}, "nope.yaml"},
		{"unknown runtime", []string{"--runtime", "podman", tooManyGPUs}, `--runtime "podman": want docker or local`},
		{"unknown flag", []string{"--nope", tooManyGPUs}, "flag provided but not defined: -nope"},
		{"bad profile", []string{"--profile", "main,bogus", tooManyGPUs}, "--profile"},
		{"more GPUs than the node has", []string{tooManyGPUs}, "gpus.yaml:"},
		{"a host twice", []string{repeated}, "hosts.yaml:"},
		{"a node named as the store", []string{storeName}, `store.yaml:6: nodes[0].host: "widetp-store" is the fake store's host in every run`},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			out, errOut, code := runWidetp(t, r.args...)
			if code != exitBadInput || !strings.Contains(errOut, r.mention) || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 mentioning %q", code, out, errOut, r.mention)
			}
		})
	}

	t.Run("no Docker engine", func(t *testing.T) {
		t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(dir, "no-engine.sock"))
		_, errOut, code := runWidetp(t, "--runtime", "docker", filepath.Join(scenarioDir, "vllm48061-external-lb-colocated-buggy.yaml"))
		if code != exitInfra || !strings.Contains(errOut, "no reachable Docker engine") || !strings.Contains(errOut, "--runtime local") {
			t.Errorf("exit %d, stderr %q; want 3 saying how to fix it or to use --runtime local", code, errOut)
		}
	})
}

// A local run of vLLM#48061's co-located launch: exit 0 when the observed kinds are the expected
// ones, one JSON report of live processes (PIDs), and exit 1 with artifacts when they differ
// (the same file under main is healthy, but expects the bug).
func TestRunLocal(t *testing.T) {
	file := filepath.Join(scenarioDir, "vllm48061-external-lb-colocated-buggy.yaml")
	out, errOut, code := runWidetp(t, "--runtime", "local", "--json", file)
	if code != exitMatch {
		t.Fatalf("exit %d; stderr:\n%s\nstdout:\n%s", code, errOut, out)
	}
	var rep report.Report
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("stdout is not one report: %v\n%s", err, out)
	}
	want := []report.Kind{report.DPIndexMismatch, report.LookupMisrouted, report.LookupPathCollision}
	if rep.Runtime != "local" || rep.Verdict != "fail" || !slices.Equal(report.KindSet(rep.Violations), want) || len(rep.Processes) != 12 {
		t.Errorf("report: runtime %q verdict %q kinds %v, %d processes", rep.Runtime, rep.Verdict, report.KindSet(rep.Violations), len(rep.Processes))
	}
	for _, p := range rep.Processes {
		if p.PID == 0 {
			t.Errorf("%s: a live process has a PID", p.ID)
		}
	}
	for _, phase := range []string{"start", "settle", "check", "teardown", "total"} {
		if _, ok := rep.Timings[phase]; !ok {
			t.Errorf("timings lack %s: %v", phase, rep.Timings)
		}
	}
	for _, step := range []string{"starting the fake store", "node node0 up", "node node0 settled: 12 process(es)", "running the checks"} {
		if !strings.Contains(errOut, step) {
			t.Errorf("progress lacks %q:\n%s", step, errOut)
		}
	}

	dir := filepath.Join(t.TempDir(), "artifacts")
	out, errOut, code = runWidetp(t, "--runtime", "local", "--profile", "main", "--artifacts", dir, file)
	if code != exitDiffer {
		t.Fatalf("exit %d under main, want 1 (healthy, expect says buggy); stderr:\n%s", code, errOut)
	}
	if !strings.Contains(out, "observed [] (healthy): NOT as expected") || !strings.Contains(out, "runtime  local") {
		t.Errorf("human report:\n%s", out)
	}
	for _, f := range []string{"report.json", "store-snapshot.json", "node0/logs.txt", "node0/ipc.json", "node0/inspect.json", "widetp-store/logs.txt"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("artifact %s: %v", f, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "node0/ipc.json")); err != nil || !strings.Contains(string(b), "lookup_rpc_port_0_host_node0_dp_rank") {
		t.Errorf("node0's ipc listing lacks the lookup sockets: %s %v", b, err)
	}
}

// A run that stops short of its verdict (here a fault step that cannot act: it kills a worker
// that the step before it killed) exits 3 with a report whose verdict is "error" and whose error
// says why, not a "pass" over the records it got as far as; the human report says NO VERDICT.
func TestRunThatStopsShortHasNoVerdict(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "e2e", "testdata", "faults", "fault-kill-follower.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	twice := "  - kill: follower/0/headless-0/worker-0\n  - kill: follower/0/headless-0/worker-0\n"
	text := strings.Replace(string(src), "  - kill: follower\n", twice, 1)
	if text == string(src) {
		t.Fatal("the fault scenario no longer has the step this test replaces")
	}
	file := filepath.Join(t.TempDir(), "kill-twice.yaml")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runWidetp(t, "--runtime", "local", "--json", file)
	if code != exitInfra {
		t.Fatalf("exit %d, want 3; stderr:\n%s", code, errOut)
	}
	var rep report.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("stdout is not one report: %v\n%s", err, out)
	}
	const why = "process follower/0/headless-0/worker-0 on host follower has already exited"
	if rep.Verdict != "error" || !strings.Contains(rep.Error, why) || len(rep.Violations) != 0 {
		t.Errorf("report: verdict %q, error %q, %d violations; want verdict error saying %q", rep.Verdict, rep.Error, len(rep.Violations), why)
	}
	out, _, code = runWidetp(t, "--runtime", "local", file)
	if code != exitInfra || !strings.Contains(out, "before the run stopped: NO VERDICT: ") || strings.Contains(out, "as expected") {
		t.Errorf("exit %d, human report:\n%s", code, out)
	}
}

// clean and images need a Docker engine: without one they exit 3 saying how to get one; with
// arguments they exit 2.
func TestCleanAndImagesWithoutEngine(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "no-engine.sock"))
	// clean also removes every partition's nftables table on the machine, whoever made it: with
	// no nft on PATH that part fails instead of cutting the partitions of runs in flight beside
	// this test (a make e2e lost one that way, mid-scenario).
	t.Setenv("PATH", t.TempDir())
	for _, cmd := range []string{"clean", "images"} {
		var out, errOut bytes.Buffer
		if code := run([]string{cmd}, &out, &errOut); code != exitInfra || !strings.Contains(errOut.String(), "no reachable Docker engine") {
			t.Errorf("%s: exit %d, stderr %q; want 3 naming the missing engine", cmd, code, errOut.String())
		}
		errOut.Reset()
		if code := run([]string{cmd, "extra"}, &out, &errOut); code != exitBadInput || !strings.Contains(errOut.String(), "takes no arguments") {
			t.Errorf("%s extra: exit %d, stderr %q; want 2", cmd, code, errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"run", "--help"}, &out, &errOut); code != exitMatch || !strings.Contains(out.String(), "--runtime") || !strings.Contains(out.String(), "--artifacts") {
		t.Errorf("run --help: exit %d:\n%s", code, out.String())
	}
}
