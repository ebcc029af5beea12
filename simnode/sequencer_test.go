package simnode

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/vllm"
)

// seqBound bounds every sequencer wait in these tests; the sequencer answers in microseconds.
const seqBound = 10 * time.Second

func binder(id string, seq int, children ...*vllm.ProcessPlan) *vllm.ProcessPlan {
	return &vllm.ProcessPlan{Identity: report.Process{ID: id, BindSeq: seq}, BindsLookup: true, Children: children}
}

func plain(id string, children ...*vllm.ProcessPlan) *vllm.ProcessPlan {
	return &vllm.ProcessPlan{Identity: report.Process{ID: id}, Children: children}
}

func startSequencer(t *testing.T, plan *vllm.NodePlan) *sequencer {
	t.Helper()
	dir, err := os.MkdirTemp("", "seq")
	if err != nil {
		t.Fatal(err)
	}
	s, err := newSequencer(plan, filepath.Join(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.close(); os.RemoveAll(dir) })
	return s
}

func hello(t *testing.T, s *sequencer, id string) *seqClient {
	t.Helper()
	c, err := dialSequencer(s.ln.Addr().String(), id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// turnAsync asks for a bind turn in the background.
func turnAsync(c *seqClient) <-chan int {
	ch := make(chan int, 1)
	go func() {
		n, err := c.Turn(context.Background(), seqBound)
		if err != nil {
			n = -1
		}
		ch <- n
	}()
	return ch
}

func expectTurn(t *testing.T, ch <-chan int, want int) {
	t.Helper()
	select {
	case n := <-ch:
		if n != want {
			t.Fatalf("turn %d, want %d", n, want)
		}
	case <-time.After(seqBound):
		t.Fatalf("no turn %d within %v", want, seqBound)
	}
}

// asked waits until the sequencer holds id's turn request, so that what follows is ordered after it.
func asked(t *testing.T, s *sequencer, id string) {
	t.Helper()
	if !s.await(func() bool { return s.turns[id] != nil }, seqBound) {
		t.Fatalf("%s's turn request never reached the sequencer", id)
	}
}

// notYet checks that id's turn request is still held: a grant removes it under the sequencer's
// lock in the same step as the state change that made it due.
func notYet(t *testing.T, s *sequencer, id string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.turns[id] == nil {
		t.Fatalf("%s was granted its turn out of order", id)
	}
}

// TestBindsFollowBindSeq: the model's BindSeq orders the binds of one host (vllm/plan.go
// NodePlan), whatever order the processes ask in; each gets the host-local order it bound in.
func TestBindsFollowBindSeq(t *testing.T) {
	plan := &vllm.NodePlan{Host: "h", Commands: []*vllm.ProcessPlan{
		plain("a", binder("a/w0", 2)),
		plain("b", binder("b/w0", 1)),
	}}
	s := startSequencer(t, plan)
	a, b := hello(t, s, "a/w0"), hello(t, s, "b/w0")
	hello(t, s, "a")
	hello(t, s, "b")
	ta := turnAsync(a)
	// a asks first but is second in line: it must wait for b's bind.
	asked(t, s, "a/w0")
	notYet(t, s, "a/w0")
	tb := turnAsync(b)
	expectTurn(t, tb, 1)
	notYet(t, s, "a/w0")
	if err := b.Bound(); err != nil {
		t.Fatal(err)
	}
	expectTurn(t, ta, 2)
}

// TestDeadBinderIsSkipped: a process that dies before its turn (its connection closes), or that
// never starts because its parent died, does not hold the host's later binds or its lookups.
func TestDeadBinderIsSkipped(t *testing.T) {
	plan := &vllm.NodePlan{Host: "h", Commands: []*vllm.ProcessPlan{
		plain("p0", binder("p0/w0", 1)),
		binder("x", 2),
		binder("y", 3),
	}}
	s := startSequencer(t, plan)
	x, y := hello(t, s, "x"), hello(t, s, "y")
	tx, ty := turnAsync(x), turnAsync(y)
	asked(t, s, "x")
	asked(t, s, "y")
	notYet(t, s, "x")
	// p0 dies before it started its worker: the worker will never bind.
	s.exited("p0")
	expectTurn(t, tx, 1)
	notYet(t, s, "y")
	// x dies holding its turn (its connection closes): y goes next.
	x.Close()
	expectTurn(t, ty, 2)

	serving := make(chan error, 1)
	go func() { serving <- y.Serving(context.Background(), seqBound) }()
	// The serving request is held (not released) while y's bind is outstanding.
	if !s.await(func() bool { return len(s.serving) == 1 }, seqBound) {
		t.Fatal("serving was released before y bound, or never asked")
	}
	y.Bound()
	if err := <-serving; err != nil {
		t.Fatal(err)
	}
}

func TestServingWithoutBindsIsImmediate(t *testing.T) {
	s := startSequencer(t, &vllm.NodePlan{Host: "h", Commands: []*vllm.ProcessPlan{plain("a")}})
	if err := hello(t, s, "a").Serving(context.Background(), seqBound); err != nil {
		t.Fatal(err)
	}
}

func TestSequencerRefusesStrangers(t *testing.T) {
	s := startSequencer(t, &vllm.NodePlan{Host: "h", Commands: []*vllm.ProcessPlan{plain("a"), binder("b", 1)}})
	stranger := hello(t, s, "not-planned")
	if _, err := stranger.Turn(context.Background(), seqBound); err == nil {
		t.Fatal("a process the plan does not hold got a turn")
	}
	nonBinder := hello(t, s, "a")
	if _, err := nonBinder.Turn(context.Background(), seqBound); err == nil {
		t.Fatal("a process whose plan binds nothing got a turn")
	}
}

func TestSequencerWaitsAreBounded(t *testing.T) {
	s := startSequencer(t, &vllm.NodePlan{Host: "h", Commands: []*vllm.ProcessPlan{binder("a", 1), binder("b", 2)}})
	b := hello(t, s, "b")
	hello(t, s, "a") // alive, never asks: b's turn never comes
	if _, err := b.Turn(context.Background(), 100*time.Millisecond); err == nil {
		t.Fatal("a turn that cannot come was granted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := hello(t, s, "b").Serving(ctx, seqBound); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled serving wait: %v", err)
	}
}

func handshakeBinder(id string, children ...*vllm.ProcessPlan) *vllm.ProcessPlan {
	return &vllm.ProcessPlan{Identity: report.Process{ID: id}, Children: children,
		Rendezvous: []vllm.RendezvousPlan{{Kind: "dp", Address: "h:13345", WorldSize: 2, Rank: 0, BindsEarly: true}}}
}

// TestHandshakeBindsFollowPlanOrder: a host's handshake binders (vllm.RendezvousPlan.BindsEarly)
// bind in plan order whatever order they ask in, and each is released to start its children only
// once every other binder bound or died — so the first binder is still alive (holding the address)
// when the second one binds (vllm/v1/engine/utils.py launch_core_engines binds before it starts
// the engines).
func TestHandshakeBindsFollowPlanOrder(t *testing.T) {
	plan := &vllm.NodePlan{Host: "h", Commands: []*vllm.ProcessPlan{
		handshakeBinder("a", plain("a/e0")), handshakeBinder("b", plain("b/e0")), handshakeBinder("c"),
	}}
	s := startSequencer(t, plan)
	a, b, c := hello(t, s, "a"), hello(t, s, "b"), hello(t, s, "c")
	turn := func(cl *seqClient) <-chan int {
		ch := make(chan int, 1)
		go func() {
			n, err := cl.HandshakeTurn(context.Background(), seqBound)
			if err != nil {
				n = -1
			}
			ch <- n
		}()
		return ch
	}
	tb := turn(b)
	if !s.await(func() bool { return s.hsTurns["b"] != nil }, seqBound) {
		t.Fatal("b's handshake turn request never reached the sequencer")
	}
	ta := turn(a)
	expectTurn(t, ta, 1)
	a.HandshakeBound()
	allA := make(chan error, 1)
	go func() { allA <- a.HandshakesBound(context.Background(), seqBound) }()
	expectTurn(t, tb, 2)
	if !s.await(func() bool { return len(s.hsWaiters) == 1 }, seqBound) {
		t.Fatal("a was released before b and c bound, or never asked")
	}
	// b's bind fails and it dies; c never asks and dies: a may start its engines.
	b.HandshakeBound()
	b.Close()
	c.Close()
	if err := <-allA; err != nil {
		t.Fatal(err)
	}
	if _, err := hello(t, s, "a/e0").HandshakeTurn(context.Background(), seqBound); err == nil {
		t.Fatal("a process whose plan binds no handshake got a handshake turn")
	}
}

// TestAnswersReachTheWaitThatAsked: a process's waits on the sequencer may overlap, and the
// sequencer answers in the order things happen on the host, not in the order it was asked; an
// answer to a wait that gave up may still come. Each answer carries its request's tag, and goes
// to the wait that asked or, when none waits for it any more, nowhere.
func TestAnswersReachTheWaitThatAsked(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := dialSequencer(path, "p")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	turn, hsTurn := make(chan int, 1), make(chan int, 1)
	ask := func(f func(context.Context, time.Duration) (int, error), out chan<- int) {
		n, err := f(context.Background(), seqBound)
		if err != nil {
			t.Error(err)
		}
		out <- n
	}
	go ask(c.Turn, turn)
	go ask(c.HandshakeTurn, hsTurn)
	sc := bufio.NewScanner(conn)
	tags := map[string]uint64{}
	for len(tags) < 2 && sc.Scan() {
		var req seqRequest
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			t.Fatal(err)
		}
		if req.Op == "hello" {
			continue
		}
		if req.Tag == 0 {
			t.Fatalf("%s awaits an answer but carries no tag", req.Op)
		}
		tags[req.Op] = req.Tag
	}
	if tags["turn"] == tags["hs-turn"] {
		t.Fatalf("two waits share tag %d", tags["turn"])
	}
	enc := json.NewEncoder(conn)
	// A late answer to a wait that gave up, then the two answers in the opposite order.
	for _, rep := range []seqReply{{Tag: tags["turn"] + tags["hs-turn"], Turn: 99}, {Tag: tags["hs-turn"], Turn: 5}, {Tag: tags["turn"], Turn: 3}} {
		if err := enc.Encode(rep); err != nil {
			t.Fatal(err)
		}
	}
	if n := <-turn; n != 3 {
		t.Errorf("Turn got %d, want 3", n)
	}
	if n := <-hsTurn; n != 5 {
		t.Errorf("HandshakeTurn got %d, want 5", n)
	}
}

// TestSequencerAnswersCarryTheirRequestsTag: the sequencer's side of the tags.
func TestSequencerAnswersCarryTheirRequestsTag(t *testing.T) {
	s := startSequencer(t, &vllm.NodePlan{Host: "h", Commands: []*vllm.ProcessPlan{binder("a", 1)}})
	conn, err := net.Dial("unix", s.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("{\"op\":\"hello\",\"id\":\"a\"}\n{\"tag\":41,\"op\":\"turn\"}\n")); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(seqBound))
	var rep seqReply
	if err := json.NewDecoder(conn).Decode(&rep); err != nil {
		t.Fatal(err)
	}
	if rep.Tag != 41 || rep.Turn != 1 {
		t.Fatalf("answer %+v, want tag 41 and turn 1", rep)
	}
}
