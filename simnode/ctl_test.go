package simnode_test

import (
	"context"
	"strings"
	"testing"

	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/simnode"
)

func ctl(t *testing.T, n *node, op, id string) simnode.CtlReply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testBound)
	defer cancel()
	rep, err := simnode.Ctl(ctx, n.root, simnode.CtlRequest{Op: op, Process: id})
	if err != nil {
		t.Fatalf("%s %s: %v", op, id, err)
	}
	return rep
}

// A kill through the control socket is a SIGKILL of that one process: what follows is the node's
// simulation of vLLM (the executor fails its engine when a worker dies:
// vllm/v1/executor/multiproc_executor.py start_worker_monitor). The node answers once the process
// exited, counts the request in its status, and stays up, as a machine does, until its teardown.
func TestCtlKillsOneProcessAndTheNodeStaysUp(t *testing.T) {
	s := newStore(t)
	n := oneEngine(t, s, hostEnv{name: "c0", ip: "127.0.0.9"}, 2, nil)
	before := s.waitRecords(t, "3 ready", readyCount(3))
	rep := ctl(t, n, simnode.CtlKill, "c0/0/engine-core-0/worker-1")
	if !rep.OK || rep.Acts != 1 {
		t.Fatalf("kill: %+v, want OK with Acts 1", rep)
	}
	recs := s.waitRecords(t, "every exit", func(m map[string]report.Process) bool {
		for _, r := range m {
			if r.Exit == nil {
				return false
			}
		}
		return len(m) == 3
	})
	if w := recs["c0/0/engine-core-0/worker-1"]; w.Exit.Signal != "SIGKILL" || w.PID != before["c0/0/engine-core-0/worker-1"].PID {
		t.Errorf("the victim's exit: %+v (pid %d), want its SIGKILL", w.Exit, w.PID)
	}
	select {
	case <-n.done:
		t.Fatalf("the node program ended (exit %d) when its processes did; it must stay up until its teardown", n.code)
	default:
	}
	// Nothing is left to kill: the node says so, naming the process.
	if rep := ctl(t, n, simnode.CtlKill, "c0/0/engine-core-0/worker-1"); rep.OK || !strings.Contains(rep.Error, "already exited") {
		t.Errorf("a second kill: %+v, want a refusal saying it exited", rep)
	}
	if code := n.stop(); code != simnode.ExitCrashed {
		t.Errorf("the node's exit after its teardown: %d, want %d (a process was SIGKILLed)", code, simnode.ExitCrashed)
	}
}

// A restart names a command's top process: its tree is killed and the command starts again, with
// the same identities and new pids.
func TestCtlRestartsOneCommand(t *testing.T) {
	s := newStore(t)
	n := oneEngine(t, s, hostEnv{name: "c1", ip: "127.0.0.10"}, 2, nil)
	before := s.waitRecords(t, "3 ready", readyCount(3))
	top := "c1/0/engine-core-0"
	if rep := ctl(t, n, simnode.CtlRestart, top+"/worker-0"); rep.OK || !strings.Contains(rep.Error, "not the top process") || !strings.Contains(rep.Error, top) {
		t.Errorf("restart of a worker: %+v, want a refusal naming the top process %s", rep, top)
	}
	rep := ctl(t, n, simnode.CtlRestart, top)
	if !rep.OK || rep.Acts != 1 {
		t.Fatalf("restart: %+v, want OK with Acts 1", rep)
	}
	after := s.waitRecords(t, "3 ready again", func(m map[string]report.Process) bool {
		ready := 0
		for id, r := range m {
			if r.Ready && r.Exit == nil && r.PID != before[id].PID {
				ready++
			}
		}
		return ready == 3
	})
	for id, r := range after {
		if b := before[id]; report.IdentityOf(b).Diff(report.IdentityOf(r)) != nil {
			t.Errorf("%s came back as another process: %v", id, report.IdentityOf(b).Diff(report.IdentityOf(r)))
		}
	}
}

// Requests the node cannot carry out are refused with what is wrong, never half done.
func TestCtlRefusesBadRequests(t *testing.T) {
	s := newStore(t)
	n := oneEngine(t, s, hostEnv{name: "c2", ip: "127.0.0.11"}, 1, nil)
	s.waitRecords(t, "2 ready", readyCount(2))
	for _, c := range []struct{ op, id, want string }{
		{"freeze", "c2/0/engine-core-0", `unknown control operation "freeze"`},
		{simnode.CtlKill, "c2/0/engine-core-0/worker-9", "has no process c2/0/engine-core-0/worker-9"},
		{simnode.CtlRestart, "c2/1/api-server-0", "not the top process"},
	} {
		if rep := ctl(t, n, c.op, c.id); rep.OK || !strings.Contains(rep.Error, c.want) {
			t.Errorf("%s %s: %+v, want a refusal containing %q", c.op, c.id, rep, c.want)
		}
	}
	if _, err := simnode.Ctl(context.Background(), t.TempDir(), simnode.CtlRequest{Op: simnode.CtlKill, Process: "x/0/y"}); err == nil || !strings.Contains(err.Error(), "no node program's control socket") {
		t.Errorf("no node under the root: %v, want an error saying so", err)
	}
}
