package simnode

import (
	"context"
	"testing"
	"time"

	"github.com/widetp/widetp/vllm"
)

type reachAnswer struct {
	lead bool
	err  error
}

// reachAsync waits on the host's relay for addr in the background.
func reachAsync(c *seqClient, addr string) <-chan reachAnswer {
	ch := make(chan reachAnswer, 1)
	go func() {
		lead, err := seqRelay{c: c, bound: seqBound}.Wait(context.Background(), addr)
		ch <- reachAnswer{lead, err}
	}()
	return ch
}

func expectReach(t *testing.T, ch <-chan reachAnswer, lead bool) {
	t.Helper()
	select {
	case a := <-ch:
		if a.err != nil || a.lead != lead {
			t.Fatalf("reach answered lead=%v err=%v, want lead=%v", a.lead, a.err, lead)
		}
	case <-time.After(seqBound):
		t.Fatalf("no answer to reach within %v", seqBound)
	}
}

// waiting blocks until n processes of the host wait on addr behind its leader.
func waiting(t *testing.T, s *sequencer, addr string, n int) {
	t.Helper()
	if !s.await(func() bool { return s.reach[addr] != nil && len(s.reach[addr].waiters) == n }, seqBound) {
		t.Fatalf("%d processes never waited on %s", n, addr)
	}
}

// The host's rendezvous relay (rendezvous.Relay): per address, the first process whose connect
// failed keeps trying and the others wait; when one gets through, every waiter is told to connect
// now; when the one trying gives up, or dies, the next in line takes over.
func TestRelayTakesTurnsPerAddress(t *testing.T) {
	s := startSequencer(t, &vllm.NodePlan{Host: "h", Commands: []*vllm.ProcessPlan{plain("a"), plain("b"), plain("c"), plain("d")}})
	a, b, c, d := hello(t, s, "a"), hello(t, s, "b"), hello(t, s, "c"), hello(t, s, "d")

	// One leader per address.
	expectReach(t, reachAsync(a, "m:29500"), true)
	expectReach(t, reachAsync(d, "m:13345"), true)
	wb, wc := reachAsync(b, "m:29500"), reachAsync(c, "m:29500")
	waiting(t, s, "m:29500", 2)
	// a gets through: b and c connect now.
	seqRelay{c: a}.Reached("m:29500")
	expectReach(t, wb, false)
	expectReach(t, wc, false)

	// d gives up on its address: b, waiting behind it, takes over.
	wb = reachAsync(b, "m:13345")
	waiting(t, s, "m:13345", 1)
	seqRelay{c: d}.Quit("m:13345")
	expectReach(t, wb, true)

	// b dies while it leads: c takes over.
	wc = reachAsync(c, "m:13345")
	waiting(t, s, "m:13345", 1)
	b.Close()
	expectReach(t, wc, true)
	// A waiter that dies is no longer in line.
	wa := reachAsync(a, "m:13345")
	waiting(t, s, "m:13345", 1)
	a.Close()
	waiting(t, s, "m:13345", 0)
	if r := <-wa; r.err == nil {
		t.Fatalf("a closed process got an answer: lead=%v", r.lead)
	}
}
