package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/widetp/widetp/check"
	"github.com/widetp/widetp/harness"
	"github.com/widetp/widetp/internal/nodeapi"
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/vllm"
)

// The series is a healthy deployment at every size: a benchmark of failing runs would time the
// failure path.
func TestWideTPIsHealthyAtEverySize(t *testing.T) {
	for _, n := range []int{2, 4, 8, 64} {
		s, err := WideTP(n)
		if err != nil {
			t.Fatalf("%d nodes: %v", n, err)
		}
		if len(s.Nodes) != n {
			t.Fatalf("%d nodes: got %d", n, len(s.Nodes))
		}
		procs, err := vllm.Predict(s.Deployment())
		if err != nil {
			t.Fatalf("%d nodes: %v", n, err)
		}
		if vs := check.Run(procs); len(vs) != 0 {
			t.Errorf("%d nodes: predicted %v", n, vs)
		}
		if len(procs) < 8*n {
			t.Errorf("%d nodes: %d processes, want a worker per GPU at least", n, len(procs))
		}
	}
	for _, n := range []int{0, 3} {
		if _, err := WideTP(n); err == nil || !strings.Contains(err.Error(), "even") {
			t.Errorf("WideTP(%d) = %v, want it refused", n, err)
		}
	}
}

// A run that did not observe what its scenario expects is refused, naming what it saw: its time
// is the time to a wrong verdict, not a measurement.
func TestUnexpectedRunsAreRefused(t *testing.T) {
	proc := []report.Process{{ID: "n0/0/api-server-0"}}
	healthy := &harness.Result{Match: true, Report: &report.Report{Processes: proc, Violations: []report.Violation{}}}
	if err := unexpected(healthy); err != nil {
		t.Errorf("a matching run: %v", err)
	}
	timedOut := &harness.Result{Artifacts: "/tmp/widetp-artifacts/wide-tp-64-bench1-3", Report: &report.Report{Processes: proc, Violations: []report.Violation{
		{Kind: report.LookupUnreachable, Message: "n36/0/engine-core-18 got no answer: timeout after 2s"}}}}
	err := unexpected(timedOut)
	if err == nil || !strings.Contains(err.Error(), string(report.LookupUnreachable)) || !strings.Contains(err.Error(), "timeout after 2s") {
		t.Errorf("a healthy deployment that observed a violation: %v, want it refused naming the kind and the message", err)
	}
	if err == nil || !strings.Contains(err.Error(), "its artifacts: /tmp/widetp-artifacts/wide-tp-64-bench1-3") {
		t.Errorf("a refused run: %v, want it to name where its artifacts are", err)
	}
	for _, res := range []*harness.Result{nil, {Match: true}, {Match: true, Report: &report.Report{}}} {
		if err := unexpected(res); err == nil || !strings.Contains(err.Error(), "no process") {
			t.Errorf("a run without records: %v", err)
		}
	}
}

// The sampler counts exactly the processes carrying the run's id in their environment.
func TestSamplerSeesTheRunsProcessesOnly(t *testing.T) {
	if _, err := os.Stat("/proc/self/smaps_rollup"); err != nil {
		t.Skipf("no /proc/PID/smaps_rollup here: %v", err)
	}
	start := func(run string) {
		cmd := exec.Command("sleep", "30")
		cmd.Env = append(os.Environ(), nodeapi.EnvRun+"="+run)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
	run := fmt.Sprintf("samplertest%d", os.Getpid())
	start(run)
	start(run)
	start(run + "-other")
	s := startSampler(run)
	mib, n := s.stop()
	if n != 2 || mib <= 0 {
		t.Fatalf("sampler over two processes of run %s: %.2f MiB over %d processes", run, mib, n)
	}
}

// A measurement whose teardown met a network the engine kept (moby/moby#42119) counts, and the
// benchmark's error names the network at the end; any other failure, or a stale network with no
// time measured, stops it as before.
func TestStaleNetworksDoNotStopTheBenchmark(t *testing.T) {
	var progress strings.Builder
	s := &staleNetworks{progress: &progress}
	stale := fmt.Errorf("floor: remove network widetp-floor-1-65: has active endpoints; %w", harness.ErrStaleNetwork)
	if err := s.keep(nil, time.Second); err != nil {
		t.Fatalf("keep(nil) = %v", err)
	}
	if err := s.join(nil); err != nil {
		t.Fatalf("join with nothing kept = %v", err)
	}
	if err := s.keep(stale, 0); err != stale {
		t.Errorf("a stale network with no time measured: %v, want it returned", err)
	}
	other := errors.New("the run reported no process")
	if err := s.keep(other, time.Second); err != other {
		t.Errorf("another failure: %v, want it returned", err)
	}
	if err := s.keep(stale, 12*time.Second); err != nil {
		t.Fatalf("a measured floor whose network the engine kept: %v, want it kept", err)
	}
	if !strings.Contains(progress.String(), "widetp-floor-1-65") {
		t.Errorf("progress %q does not name the network", progress.String())
	}
	err := s.join(nil)
	if !errors.Is(err, harness.ErrStaleNetwork) || !strings.Contains(err.Error(), "widetp-floor-1-65") {
		t.Errorf("the benchmark's error %v does not name the kept network", err)
	}
	if err := s.join(other); !errors.Is(err, other) || !errors.Is(err, harness.ErrStaleNetwork) {
		t.Errorf("join(other) = %v, want both", err)
	}
}

// The memory run sees the settled deployment whole: every simulated process the model predicts,
// every host's node program and the store, however short the run (a local 2-node run settles in
// a tenth of a second) — the sweep once the run has settled (harness.WithSettled).
func TestTheMemoryRunSeesTheSettledDeployment(t *testing.T) {
	if _, err := os.Stat("/proc/self/smaps_rollup"); err != nil {
		t.Skipf("no /proc/PID/smaps_rollup here: %v", err)
	}
	bin := os.Getenv("WIDETP_BIN")
	if bin == "" {
		t.Skip("WIDETP_BIN names no widetp binary to run hosts with (make test sets it)")
	}
	s, err := WideTP(2)
	if err != nil {
		t.Fatal(err)
	}
	procs, err := vllm.Predict(s.Deployment())
	if err != nil {
		t.Fatal(err)
	}
	_, peak, n, err := runOnce(context.Background(), harness.RuntimeLocal, s, []harness.Option{harness.WithBinary(bin)}, true)
	if err != nil {
		t.Fatal(err)
	}
	// A process between its fork and its exec carries the run's id too: a sweep may count one more.
	if want := len(procs) + len(s.Nodes) + 1; n < want || peak <= 0 {
		t.Errorf("peak %.1f MiB, at most %d processes in a sweep, want %d (%d simulated, %d node programs, the store)", peak, n, want, len(procs), len(s.Nodes))
	}
}
