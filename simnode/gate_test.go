package simnode_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/widetp/widetp/simnode"
)

var (
	gate0 = hostEnv{name: "gate0", ip: "127.0.0.26", hosts: "gate0=127.0.0.26"}
	gate1 = hostEnv{name: "gate1", ip: "127.0.0.27", hosts: "gate1=127.0.0.27"}
)

// gatedNode is benchNode told to wait at the start gate, as a harness's nodes are.
func gatedNode(s *store, h hostEnv) simnode.Config {
	cfg := benchNode(s, h)
	cfg.Gate = true
	return cfg
}

// A node told to wait at the start gate is up (its ready line) but starts no process until the
// harness opens the gate: while it waits there, no process has reported to the store and the
// node has posted no status; once the gate opens, its processes start and become ready as
// without a gate (harness.StartCluster opens it once every host is up).
func TestNodeStartsNothingBeforeTheGateOpens(t *testing.T) {
	s := newStore(t)
	n := startNode(t, gate0, gatedNode(s, gate0))
	deadline := time.Now().Add(testBound)
	for s.srv.GateWaiters() < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the node never waited at the start gate:\n%s", n.stderr.String())
		}
		runtime.Gosched()
	}
	if r := s.srv.Reports(); len(r) != 0 {
		t.Fatalf("%d process(es) reported before the gate opened: %+v", len(r), r)
	}
	if st := s.srv.Nodes(); len(st) != 0 {
		t.Fatalf("the node posted a status before the gate opened: %+v", st)
	}
	s.srv.OpenGate()
	s.waitRecords(t, "10 processes ready", allReady(10))
	if code := n.stop(); code != simnode.ExitOK {
		t.Errorf("node exit %d after SIGTERM", code)
	}
}

// A node torn down while it waits at the gate ends at once and cleanly (it started nothing); a
// gate that no harness opens within the node's gate bound is an error that says so.
func TestNodeAtAShutGate(t *testing.T) {
	s := newStore(t)
	cfg := gatedNode(s, gate1)
	n := startNode(t, gate1, cfg)
	if code := n.stop(); code != simnode.ExitOK {
		t.Errorf("node stopped at the gate: exit %d, want %d:\n%s", code, simnode.ExitOK, n.stderr.String())
	}
	cfg.Timeouts.Gate = simnode.Duration(300 * time.Millisecond)
	n = startNode(t, gate1, cfg)
	if code := n.wait(); code != simnode.ExitInfra {
		t.Errorf("node at a gate nobody opens: exit %d, want %d", code, simnode.ExitInfra)
	}
	if err := n.stderr.String(); !strings.Contains(err, "the start gate stayed shut for 300ms") {
		t.Errorf("node at a gate nobody opens says:\n%s", err)
	}
	if r := s.srv.Reports(); len(r) != 0 {
		t.Errorf("%d process(es) started although the gate never opened", len(r))
	}
}
