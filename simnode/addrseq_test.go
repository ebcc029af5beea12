package simnode

import (
	"context"
	"testing"

	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/vllm"
)

func addrBinder(id string, st vllm.Stage, children ...*vllm.ProcessPlan) *vllm.ProcessPlan {
	return &vllm.ProcessPlan{Identity: report.Process{ID: id}, Children: children,
		Addresses: []vllm.AddressPlan{{Address: report.Address{Channel: "x", Role: report.AddressBind, Endpoint: "tcp://h:1", Exercised: true}, Stage: st}}}
}

// TestAddressBindsFollowStepOrder: a stage's binds of one host come in vllm.StepOrder — at
// connector init a worker before its engine core (EngineCore.__init__ builds the scheduler's
// connector after the executor's workers), commands in order — whatever order they ask in, and a
// process that died or hung does not hold the later ones.
func TestAddressBindsFollowStepOrder(t *testing.T) {
	st := vllm.StageConnectorInit
	plan := &vllm.NodePlan{Host: "h", Commands: []*vllm.ProcessPlan{
		plain("a", addrBinder("a/ec", st, addrBinder("a/ec/w0", st))),
		plain("b", addrBinder("b/ec", st)),
	}}
	if got := vllm.StepOrder(plan, st); len(got) != 3 || got[0] != "a/ec/w0" || got[1] != "a/ec" || got[2] != "b/ec" {
		t.Fatalf("step order %v", got)
	}
	s := startSequencer(t, plan)
	w0, ec, b := hello(t, s, "a/ec/w0"), hello(t, s, "a/ec"), hello(t, s, "b/ec")
	turn := func(c *seqClient) <-chan int {
		ch := make(chan int, 1)
		go func() {
			n, err := c.AddrTurn(context.Background(), st, seqBound)
			if err != nil {
				n = -1
			}
			ch <- n
		}()
		return ch
	}
	held := func(id string) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.addr[st].turns[id] != nil
	}
	tb := turn(b)
	if !s.await(func() bool { return s.addr[st].turns["b/ec"] != nil }, seqBound) {
		t.Fatal("b's turn request never arrived")
	}
	tec := turn(ec)
	if !s.await(func() bool { return s.addr[st].turns["a/ec"] != nil }, seqBound) {
		t.Fatal("a/ec's turn request never arrived")
	}
	if !held("b/ec") || !held("a/ec") {
		t.Fatal("a turn was granted before the worker that comes first bound")
	}
	tw := turn(w0)
	expectTurn(t, tw, 1)
	if err := w0.AddrBound(st); err != nil {
		t.Fatal(err)
	}
	expectTurn(t, tec, 2)
	// a/ec hangs (a spinning allocator): it says so, and b goes next.
	if err := ec.Exited("a/ec"); err != nil {
		t.Fatal(err)
	}
	expectTurn(t, tb, 3)
	// A stage where the plan binds nothing refuses the request.
	if _, err := b.AddrTurn(context.Background(), vllm.StageConfig, seqBound); err == nil {
		t.Error("a turn at a stage where the plan binds nothing was granted")
	}
}

// TestHostBoundWaitsForEveryStage: HostBound answers once every address step of the host, at
// every stage, happened or its process died — not before a later stage's binder bound.
func TestHostBoundWaitsForEveryStage(t *testing.T) {
	plan := &vllm.NodePlan{Host: "h", Commands: []*vllm.ProcessPlan{
		plain("a", addrBinder("a/ec", vllm.StageConnectorInit, addrBinder("a/ec/w0", vllm.StageEngineInit))),
		plain("b", addrBinder("b/ec", vllm.StageConnectorInit)),
	}}
	s := startSequencer(t, plan)
	w0, ec, b := hello(t, s, "a/ec/w0"), hello(t, s, "a/ec"), hello(t, s, "b/ec")
	done := make(chan error, 1)
	go func() { done <- w0.HostBound(context.Background(), seqBound) }()
	if !s.await(func() bool { return len(s.hostBound) == 1 }, seqBound) {
		t.Fatal("the HostBound request never arrived")
	}
	step := func(c *seqClient, st vllm.Stage) {
		t.Helper()
		if _, err := c.AddrTurn(context.Background(), st, seqBound); err != nil {
			t.Fatal(err)
		}
		if err := c.AddrBound(st); err != nil {
			t.Fatal(err)
		}
	}
	step(w0, vllm.StageEngineInit)
	step(ec, vllm.StageConnectorInit)
	if !s.await(func() bool { return s.addr[vllm.StageConnectorInit].next == 1 }, seqBound) {
		t.Fatal("a/ec's bind was not recorded")
	}
	select {
	case err := <-done:
		t.Fatalf("HostBound answered (%v) before b/ec bound", err)
	default:
	}
	// b/ec dies before its bind: nothing is left to wait for.
	if err := b.Exited("b/ec"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("HostBound: %v", err)
	}
}
