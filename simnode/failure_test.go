package simnode_test

import (
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/simnode"
	"github.com/widetp/widetp/vllm"
	"golang.org/x/sys/unix"
)

func oneEngine(t *testing.T, s *store, h hostEnv, workers int, edit func(ec *vllm.ProcessPlan)) *node {
	t.Helper()
	addr := net.JoinHostPort(h.ip, strconv.Itoa(freePort(t, h.ip)))
	ec := enginePlan(h.name, 0, 0, addr, "ipc:///tmp/lookup_rpc_port_0_host_"+h.name+"_dp_rank0", workers)
	if edit != nil {
		edit(ec)
	}
	cfg := s.config(h.name)
	cfg.Plan = &vllm.NodePlan{Host: h.name, Commands: []*vllm.ProcessPlan{ec}}
	return startNode(t, h, cfg)
}

func readyCount(n int) func(map[string]report.Process) bool {
	return func(m map[string]report.Process) bool {
		ready := 0
		for _, r := range m {
			if r.Ready {
				ready++
			}
		}
		return ready == n
	}
}

// TestKilledWorker: a worker killed outside any fault (the OOM killer, say) cannot report; its
// parent reports the signal, and the engine core fails as vLLM's does when a worker dies
// (MultiprocExecutor's worker monitor), naming the dead process in its placeholder.
func TestKilledWorker(t *testing.T) {
	s := newStore(t)
	n := oneEngine(t, s, hostEnv{name: "k0", ip: "127.0.0.8"}, 2, nil)
	recs := s.waitRecords(t, "3 ready", readyCount(3))
	victim := recs["k0/0/engine-core-0/worker-1"]
	if err := syscall.Kill(victim.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	recs = s.waitRecords(t, "every exit", func(m map[string]report.Process) bool {
		for _, r := range m {
			if r.Exit == nil {
				return false
			}
		}
		return true
	})
	w1 := recs["k0/0/engine-core-0/worker-1"]
	if e := w1.Exit; e.Signal != "SIGKILL" || e.Code != -9 || e.Expected || !w1.Crashed() {
		t.Errorf("killed worker exit %+v", e)
	}
	if w1.Segment != victim.Segment || w1.PID != victim.PID {
		t.Errorf("the parent's exit record lost the worker's identity: %+v", w1)
	}
	ec := recs["k0/0/engine-core-0"]
	want := "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'VllmWorker-1': -9}"
	if ec.Exit.Error != want || ec.Exit.Code != 1 {
		t.Errorf("engine core exit %+v, want %q", ec.Exit, want)
	}
	if w0 := recs["k0/0/engine-core-0/worker-0"]; w0.Exit.Code != 0 || w0.Crashed() {
		t.Errorf("surviving worker exit %+v, want a clean shutdown by its engine", w0.Exit)
	}
	if code := n.wait(); code != simnode.ExitCrashed {
		t.Errorf("node exit %d, want %d", code, simnode.ExitCrashed)
	}
}

// TestConfigCrashStartsNoChildren: an exception in config validation (vllm.StageConfig) ends the
// process before it starts any child; engine-init crashes also come before the workers.
func TestConfigCrashStartsNoChildren(t *testing.T) {
	for i, stage := range []vllm.Stage{vllm.StageConfig, vllm.StageEngineInit} {
		t.Run(string(stage), func(t *testing.T) {
			s := newStore(t)
			h := hostEnv{name: "c" + strconv.Itoa(i), ip: "127.0.0.9"}
			n := oneEngine(t, s, h, 2, func(ec *vllm.ProcessPlan) {
				ec.Crash = &vllm.Crash{Stage: stage, Error: "ZeroDivisionError: integer division or modulo by zero"}
			})
			if code := n.wait(); code != simnode.ExitCrashed {
				t.Fatalf("node exit %d", code)
			}
			recs := s.srv.Reports()
			if len(recs) != 1 || recs[0].Exit == nil || recs[0].Exit.Error != "ZeroDivisionError: integer division or modulo by zero" {
				t.Fatalf("records %+v, want only the engine core's crash", recs)
			}
			if !strings.Contains(n.stderr.String(), "Traceback (most recent call last):") {
				t.Errorf("no traceback on stderr:\n%s", n.stderr.String())
			}
		})
	}
}

// TestStopsOnChildFailure: vLLM's headless engine manager shuts its other children down and
// exits cleanly when one fails (vllm.ProcessPlan.StopsOnChildFailure).
func TestStopsOnChildFailure(t *testing.T) {
	s := newStore(t)
	n := oneEngine(t, s, hostEnv{name: "s0", ip: "127.0.0.10"}, 2, func(ec *vllm.ProcessPlan) {
		ec.ChildFailure = ""
		ec.StopsOnChildFailure = true
		ec.ConnectsLookup = false
		ec.Children[1].Crash = &vllm.Crash{Stage: vllm.StageConnectorInit, Error: "AssertionError"}
	})
	if code := n.wait(); code != simnode.ExitCrashed {
		t.Fatalf("node exit %d", code)
	}
	recs := map[string]report.Process{}
	for _, r := range s.srv.Reports() {
		recs[r.ID] = r
	}
	if e := recs["s0/0/engine-core-0"].Exit; e == nil || e.Code != 0 || e.Error != "" {
		t.Errorf("parent exit %+v, want a clean stop", e)
	}
	if e := recs["s0/0/engine-core-0/worker-1"].Exit; e == nil || e.Error != "AssertionError" {
		t.Errorf("failing worker exit %+v", e)
	}
	if e := recs["s0/0/engine-core-0/worker-0"].Exit; e == nil || e.Code != 0 || e.Error != "" {
		t.Errorf("sibling exit %+v, want shut down cleanly", e)
	}
}

// TestTeardownDuringStartUp: SIGTERM while workers wait in a rendezvous that cannot complete
// ends everything at once, every exit marked as asked for, well before the rendezvous bound.
func TestTeardownDuringStartUp(t *testing.T) {
	s := newStore(t)
	start := time.Now()
	n := oneEngine(t, s, hostEnv{name: "t0", ip: "127.0.0.11"}, 2, func(ec *vllm.ProcessPlan) {
		ec.Children = ec.Children[1:] // rank 0 never comes: the barrier cannot complete
	})
	s.waitRecords(t, "the worker waiting", func(m map[string]report.Process) bool { return len(m) == 2 })
	if code := n.stop(); code != simnode.ExitOK {
		t.Fatalf("node exit %d after SIGTERM", code)
	}
	if took := time.Since(start); took > 8*time.Second {
		t.Errorf("teardown took %v; the rendezvous bound is 10s", took)
	}
	for _, r := range s.srv.Reports() {
		if r.Exit == nil || !r.Exit.Expected || r.Exit.Signal != "SIGTERM" || r.Crashed() {
			t.Errorf("%s: exit %+v, want an expected SIGTERM exit", r.ID, r.Exit)
		}
	}
}

// TestNoProcessOutlivesItsSupervisor: a supervisor killed outright (no teardown) takes every
// simulated process with it, through the Pdeathsig chain supervisor → engine core → workers.
func TestNoProcessOutlivesItsSupervisor(t *testing.T) {
	s := newStore(t)
	n := oneEngine(t, s, hostEnv{name: "o0", ip: "127.0.0.14"}, 2, nil)
	recs := s.waitRecords(t, "3 ready", readyCount(3))
	var fds []int
	for _, r := range recs {
		// A pidfd becomes readable when its process exits, whoever's child it is.
		fd, err := unix.PidfdOpen(r.PID, 0)
		if err != nil {
			t.Fatalf("pidfd of %s (%d): %v", r.ID, r.PID, err)
		}
		defer unix.Close(fd)
		fds = append(fds, fd)
	}
	if err := n.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-n.done
	deadline := time.Now().Add(testBound)
	for _, fd := range fds {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			left := time.Until(deadline)
			if left <= 0 {
				t.Fatal("a simulated process outlived its killed supervisor")
			}
			k, err := unix.Poll(pfd, int(left.Milliseconds()))
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if k == 1 {
				break
			}
		}
	}
}

// TestSchedulerCrashAfterWorkersUp: an engine core whose scheduler side fails (a KV event
// publisher vLLM cannot offset, say: a crash at vllm.StageConnectorInit with no address step)
// fails only once its workers are up, as vLLM's EngineCore builds its Scheduler after the
// executor (vllm/v1/engine/core.py); the workers are then shut down by their engine, not killed
// on the way up, so a rendezvous they share with other engines' workers completes.
func TestSchedulerCrashAfterWorkersUp(t *testing.T) {
	s := newStore(t)
	const msg = "ValueError: Invalid endpoint: must contain 'inproc' or 'tcp'"
	n := oneEngine(t, s, hostEnv{name: "u0", ip: "127.0.0.31"}, 2, func(ec *vllm.ProcessPlan) {
		ec.Crash = &vllm.Crash{Stage: vllm.StageConnectorInit, Error: msg}
	})
	if code := n.wait(); code != simnode.ExitCrashed {
		t.Fatalf("node exit %d, want %d", code, simnode.ExitCrashed)
	}
	recs := map[string]report.Process{}
	for _, r := range s.srv.Reports() {
		recs[r.ID] = r
	}
	if e := recs["u0/0/engine-core-0"].Exit; e == nil || e.Error != msg {
		t.Errorf("engine core exit %+v, want %q", e, msg)
	}
	for _, id := range []string{"u0/0/engine-core-0/worker-0", "u0/0/engine-core-0/worker-1"} {
		w := recs[id]
		if !w.Ready {
			t.Errorf("%s never came up before its engine failed: %+v", id, w)
		}
		if w.Exit == nil || w.Crashed() {
			t.Errorf("%s exit %+v, want shut down by its engine", id, w.Exit)
		}
	}
}
