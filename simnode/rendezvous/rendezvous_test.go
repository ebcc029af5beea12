package rendezvous

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/widetp/widetp/internal/testport"
)

// freeAddr returns a loopback address whose port stays free for rank 0 to listen on (testport:
// outside the kernel's ephemeral range, so no outgoing connection is given it meanwhile).
func freeAddr(t *testing.T) string { return testport.Addr(t, "127.0.0.1") }

// timeout bounds the barriers meant to complete: it only matters when the test is failing.
const timeout = 10 * time.Second

func cfg(d time.Duration) Config { return Config{Timeout: d, ListenIP: "127.0.0.1"} }

// joinErr is Join when only the outcome matters.
func joinErr(ctx context.Context, m Member, c Config) error {
	_, err := Join(ctx, m, c)
	return err
}

// joinAll runs one Join per member concurrently and returns their results by rank.
func joinAll(ctx context.Context, members []Member, c Config) map[int]error {
	var mu sync.Mutex
	out := map[int]error{}
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Go(func() {
			err := joinErr(ctx, m, c)
			mu.Lock()
			out[m.Rank] = err
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

func members(kind, addr string, world int, ranks ...int) []Member {
	var ms []Member
	for _, r := range ranks {
		ms = append(ms, Member{Kind: kind, Address: addr, WorldSize: world, Rank: r, ID: fmt.Sprintf("h/0/worker-%d", r)})
	}
	return ms
}

// TestAllMembersMeet: torch's TCPStore barrier of init_worker_distributed_environment
// (vllm/v1/worker/gpu_worker.py): every rank returns once the world is complete, whichever starts first.
func TestAllMembersMeet(t *testing.T) {
	addr := freeAddr(t)
	// Rank 0 last: the others must retry until it listens.
	res := joinAll(context.Background(), members("workers", addr, 8, 7, 6, 5, 4, 3, 2, 1, 0), cfg(timeout))
	for r, err := range res {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	if len(res) != 8 {
		t.Fatalf("%d results", len(res))
	}
}

// TestEveryMemberLeavesWithEveryValue: vLLM's workers exchange the KV engine_id through the
// torch store at init (vllm/distributed/kv_transfer/kv_connector/utils.py, PRs #39907 and #44528).
func TestEveryMemberLeavesWithEveryValue(t *testing.T) {
	addr := freeAddr(t)
	want := map[int]string{}
	var ms []Member
	for r := range 4 {
		want[r] = fmt.Sprintf("engine-%d", r)
		ms = append(ms, Member{Kind: "workers", Address: addr, WorldSize: 4, Rank: r, Value: want[r]})
	}
	got := joinValues(t, context.Background(), ms)
	for r := range 4 {
		if fmt.Sprint(got[r]) != fmt.Sprint(want) {
			t.Errorf("rank %d left with %v, want %v", r, got[r], want)
		}
	}
}

// Rank 0 leaves knowing who came, by rank: a front end learns which engines joined its handshake
// from their HELLOs (the engines whose READY it then waits for).
func TestRank0LeavesWithTheMembersIDs(t *testing.T) {
	addr := freeAddr(t)
	ms := members("dp", addr, 3, 2, 0, 1)
	var wg sync.WaitGroup
	var ids map[int]string
	for _, m := range ms {
		wg.Go(func() {
			res, err := Join(context.Background(), m, cfg(timeout))
			if err != nil {
				t.Errorf("rank %d: %v", m.Rank, err)
			}
			if m.Rank == 0 {
				ids = res.IDs
			} else if res.IDs != nil {
				t.Errorf("rank %d left with IDs %v: only rank 0 knows who came", m.Rank, res.IDs)
			}
		})
	}
	wg.Wait()
	want := map[int]string{0: "h/0/worker-0", 1: "h/0/worker-1", 2: "h/0/worker-2"}
	if fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Errorf("rank 0 left with IDs %v, want %v", ids, want)
	}
}

// joinValues runs one Join per member concurrently and returns the values each left with, by
// rank; a member whose Join fails fails t.
func joinValues(t *testing.T, ctx context.Context, ms []Member) map[int]map[int]string {
	var mu sync.Mutex
	got := map[int]map[int]string{}
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Go(func() {
			res, err := Join(ctx, m, cfg(timeout))
			if err != nil {
				t.Errorf("rank %d: %v", m.Rank, err)
			}
			mu.Lock()
			got[m.Rank] = res.Values
			mu.Unlock()
		})
	}
	wg.Wait()
	return got
}

// A member that names the values it reads (Member.Want) leaves with those alone, as a torch store
// client gets only its keys; one that wants none leaves with none, and one that says nothing with
// every value. Rank 0 keeps every value whatever the members want.
func TestMembersLeaveWithTheValuesTheyWant(t *testing.T) {
	addr := freeAddr(t)
	wants := map[int][]int{0: {3}, 1: {0}, 2: {}, 3: nil}
	var ms []Member
	for r := range 4 {
		ms = append(ms, Member{Kind: "workers", Address: addr, WorldSize: 4, Rank: r, Value: fmt.Sprintf("engine-%d", r), Want: wants[r]})
	}
	got := joinValues(t, context.Background(), ms)
	all := map[int]string{0: "engine-0", 1: "engine-1", 2: "engine-2", 3: "engine-3"}
	for r, want := range map[int]map[int]string{0: all, 1: {0: "engine-0"}, 2: {}, 3: all} {
		if fmt.Sprint(got[r]) != fmt.Sprint(want) {
			t.Errorf("rank %d (want %v) left with %v, want %v", r, wants[r], got[r], want)
		}
	}
}

// A world spanning many DP replicas (world_size_across_dp: 512 workers of 32 TP-16 replicas in the
// README's 64-node benchmark) answers every member with every member's value: the verdict is far
// longer than a hello.
func TestLargeWorldGetsEveryValue(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*timeout)
	defer cancel()
	const world = 160
	ms := members("workers", freeAddr(t), world, rangeOf(world)...)
	for i := range ms {
		ms[i].Value = fmt.Sprintf("%08x-f478-449d-bd3d-ec20f3131a50_dp%d", i, i/16)
	}
	for r, values := range joinValues(t, ctx, ms) {
		if len(values) != world || values[world-1] != ms[world-1].Value {
			t.Errorf("rank %d got %d values", r, len(values))
		}
	}
}

func rangeOf(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func TestWorldOfOneNeedsNoPeer(t *testing.T) {
	if err := joinErr(context.Background(), Member{Kind: "dp", Address: "127.0.0.1:1", WorldSize: 1}, cfg(time.Millisecond)); err != nil {
		t.Fatal(err)
	}
}

func TestMissingRankEndsTheBarrierForEveryoneWhoCame(t *testing.T) {
	addr := freeAddr(t)
	start := time.Now()
	res := joinAll(context.Background(), members("workers", addr, 4, 0, 1, 3), cfg(time.Second))
	if took := time.Since(start); took > time.Second+verdictGrace+time.Second {
		t.Fatalf("barrier with a missing rank took %v", took)
	}
	for _, r := range []int{0, 1, 3} {
		var re *Error
		if !errors.As(res[r], &re) {
			t.Fatalf("rank %d: %v, want *Error", r, res[r])
		}
		if !strings.HasPrefix(re.Python, "torch.distributed.DistStoreError: Timed out after 1 seconds waiting for clients. 3/4 clients joined.") {
			t.Errorf("rank %d: %q", r, re.Python)
		}
		if !slices.Equal(re.Missing, []string{"rank 2"}) {
			t.Errorf("rank %d: missing %v, want [rank 2]", r, re.Missing)
		}
	}
}

func TestRank0NeverComes(t *testing.T) {
	addr := freeAddr(t)
	start := time.Now()
	err := joinErr(context.Background(), Member{Kind: "workers", Address: addr, WorldSize: 2, Rank: 1}, cfg(300*time.Millisecond))
	var re *Error
	if !errors.As(err, &re) {
		t.Fatalf("Join without rank 0: %v", err)
	}
	_, port, _ := net.SplitHostPort(addr)
	want := fmt.Sprintf("torch.distributed.DistNetworkError: The client socket has timed out after 300ms while trying to connect to (127.0.0.1, %s).", port)
	if re.Python != want || !slices.Equal(re.Missing, []string{"rank 0"}) {
		t.Fatalf("got %q missing %v; want %q missing [rank 0]", re.Python, re.Missing, want)
	}
	if took := time.Since(start); took > 300*time.Millisecond+maxRetry+time.Second {
		t.Fatalf("gave up after %v", took)
	}
}

func TestMemberThatLeavesBeforeCompletionIsMissing(t *testing.T) {
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 2)
	go func() {
		errs <- joinErr(context.Background(), Member{Kind: "workers", Address: addr, WorldSize: 3, Rank: 0}, cfg(time.Second))
	}()
	// Rank 1 joins, then its process "dies": its connection closes before rank 2 ever comes.
	go func() {
		errs <- joinErr(ctx, Member{Kind: "workers", Address: addr, WorldSize: 3, Rank: 1}, cfg(timeout))
	}()
	waitListening(t, addr)
	cancel()
	var rank0 *Error
	for range 2 {
		if err := <-errs; errors.As(err, &rank0) {
			continue
		} else if !errors.Is(err, context.Canceled) {
			t.Fatalf("unexpected result %v", err)
		}
	}
	if rank0 == nil || !slices.Equal(rank0.Missing, []string{"rank 1", "rank 2"}) {
		t.Fatalf("rank 0: %+v, want rank 1 (left) and rank 2 missing", rank0)
	}
}

// waitListening returns once something accepts at addr (bounded, no sleeps: each failed dial is the pacing).
func waitListening(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
	}
	t.Fatalf("nothing listens at %s", addr)
}

func TestRefusedMembers(t *testing.T) {
	cases := []struct {
		name   string
		source string
		bad    Member
		errHas string
	}{
		{"other kind at the address", "a dp group and a worker group must not share a port",
			Member{Kind: "dp", WorldSize: 3, Rank: 1}, "is workers with world size 3, not dp with world size 3"},
		{"other world size", "torch TCPStore: every rank passes the same world_size",
			Member{Kind: "workers", WorldSize: 4, Rank: 1}, "not workers with world size 4"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := freeAddr(t)
			tc.bad.Address = addr
			// Ranks 0 and 1 hold the barrier open while the bad member tries; rank 2 completes it
			// afterwards, so a refusal must not have spoilt the barrier for the good members.
			first := make(chan map[int]error, 1)
			go func() { first <- joinAll(context.Background(), members("workers", addr, 3, 0, 1), cfg(timeout)) }()
			err := joinErr(context.Background(), tc.bad, cfg(timeout))
			var re *Error
			if !errors.As(err, &re) || !strings.Contains(re.Python, tc.errHas) || !strings.HasPrefix(re.Python, "RuntimeError: ") {
				t.Fatalf("%s: %v, want RuntimeError containing %q", tc.source, err, tc.errHas)
			}
			last := joinErr(context.Background(), members("workers", addr, 3, 2)[0], cfg(timeout))
			good := <-first
			accepted := 0
			for _, err := range good {
				if err == nil {
					accepted++
				}
			}
			if last != nil || accepted != 2 {
				t.Fatalf("good members after a refusal: ranks 0,1 %v, rank 2 %v", good, last)
			}
		})
	}
}

// TestRankJoinsTwice: two processes that computed the same rank (a model bug or a misconfigured
// --node-rank) — the second to arrive is refused, the first takes part.
func TestRankJoinsTwice(t *testing.T) {
	addr := freeAddr(t)
	results := make(chan error, 3)
	for _, m := range members("workers", addr, 3, 0, 1, 1) {
		go func() { results <- joinErr(context.Background(), m, cfg(timeout)) }()
	}
	// The refusal comes back while the barrier is still open (rank 2 has not come).
	first := <-results
	var re *Error
	if !errors.As(first, &re) || !strings.HasPrefix(re.Python, "RuntimeError: ") || !strings.Contains(re.Python, "rank 1 joined twice") {
		t.Fatalf("first result: %v, want the duplicate refused", first)
	}
	if err := joinErr(context.Background(), members("workers", addr, 3, 2)[0], cfg(timeout)); err != nil {
		t.Fatalf("rank 2: %v", err)
	}
	for range 2 {
		if err := <-results; err != nil {
			t.Fatalf("rank 0 or the accepted rank 1: %v", err)
		}
	}
}

func TestResolveMapsHostNames(t *testing.T) {
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	named := "r0-head:" + port
	c := cfg(timeout)
	c.Resolve = func(_ context.Context, host string) (string, error) {
		if host != "r0-head" {
			return "", fmt.Errorf("unknown host %q", host)
		}
		return "127.0.0.1", nil
	}
	for r, err := range joinAll(context.Background(), members("dp", named, 2, 0, 1), c) {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

func TestRank0CannotListen(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	err = joinErr(context.Background(), Member{Kind: "workers", Address: ln.Addr().String(), WorldSize: 2}, cfg(timeout))
	var re *Error
	if !errors.As(err, &re) || !strings.Contains(re.Python, "DistNetworkError: The server socket has failed to listen") || !strings.Contains(re.Python, "EADDRINUSE") {
		t.Fatalf("listen on a busy port: %v", err)
	}
}

func TestBadInput(t *testing.T) {
	cases := []struct {
		m      Member
		c      Config
		errHas string
	}{
		{Member{Kind: "workers", Address: "h:1", WorldSize: 2, Rank: 2}, cfg(timeout), "rank 2 outside world size 2"},
		{Member{Kind: "workers", Address: "h:1", WorldSize: 0}, cfg(timeout), "world size 0"},
		{Member{Kind: "workers", Address: "h", WorldSize: 2}, cfg(timeout), "missing port"},
		{Member{Kind: "workers", Address: "h:0", WorldSize: 2}, cfg(timeout), "not 1-65535"},
		{Member{Address: "h:1", WorldSize: 2}, cfg(timeout), "empty kind"},
		{Member{Kind: "workers", Address: "h:1", WorldSize: 2}, Config{}, "timeout 0s must be positive"},
	}
	for _, tc := range cases {
		err := joinErr(context.Background(), tc.m, tc.c)
		var re *Error
		if err == nil || errors.As(err, &re) || !strings.Contains(err.Error(), tc.errHas) {
			t.Errorf("Join(%+v) = %v, want a bad-input error containing %q", tc.m, err, tc.errHas)
		}
	}
}

func TestCancelStopsTheWait(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 2)
	addr := freeAddr(t)
	go func() {
		errs <- joinErr(ctx, Member{Kind: "workers", Address: addr, WorldSize: 3, Rank: 0}, cfg(time.Hour))
	}()
	go func() {
		errs <- joinErr(ctx, Member{Kind: "workers", Address: addr, WorldSize: 3, Rank: 1}, cfg(time.Hour))
	}()
	waitListening(t, addr)
	cancel()
	for range 2 {
		select {
		case err := <-errs:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled Join: %v", err)
			}
		case <-time.After(timeout):
			t.Fatal("cancelled Join did not return")
		}
	}
}

// TestScreenRefuses: rank 0 judges each member's Hello as it arrives (a front end reading the
// engines' HELLOs in vllm/v1/engine/utils.py wait_for_engine_startup). The first refused one ends
// the barrier at once: rank 0 returns the refusal, members that joined get their Screening's
// answer, and a held member waits until it is stopped (or its time runs out).
func TestScreenRefuses(t *testing.T) {
	addr := freeAddr(t)
	judged := make(chan string, 4)
	screen := func(hello []byte) Screening {
		judged <- string(hello)
		switch string(hello) {
		case `"held"`:
			return Screening{Answer: "no answer", Hold: true}
		case `"bad"`:
			return Screening{Refuse: "RuntimeError: refused", Answer: "no answer"}
		}
		return Screening{Answer: "no answer"}
	}
	ms := members("dp", addr, 4, 0, 1, 2, 3)
	ms[0].Screen = screen
	ms[1].Hello = []byte(`"held"`)
	ms[2].Hello = []byte(`"ok"`)
	ms[3].Hello = []byte(`"bad"`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rank0 := make(chan error, 1)
	go func() { rank0 <- joinErr(ctx, ms[0], cfg(timeout)) }()
	held, others := make(chan error, 1), make(chan error, 2)
	go func() { held <- joinErr(ctx, ms[1], cfg(timeout)) }()
	go func() { others <- joinErr(ctx, ms[2], cfg(timeout)) }()
	// The held and the admitted member are in before the refused one arrives.
	<-judged
	<-judged
	go func() { others <- joinErr(ctx, ms[3], cfg(timeout)) }()
	var re *Error
	if err := <-rank0; !errors.As(err, &re) || re.Python != "RuntimeError: refused" || !slices.Equal(re.Missing, []string{}) {
		t.Fatalf("rank 0: %v (%+v), want the refusal", err, re)
	}
	for range 2 {
		if err := <-others; !errors.As(err, &re) || re.Python != "no answer" {
			t.Errorf("admitted or refused member: %v, want told no answer", err)
		}
	}
	select {
	case err := <-held:
		t.Fatalf("the held member returned before it was stopped: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	cancel()
	if err := <-held; !errors.Is(err, context.Canceled) {
		t.Errorf("held member after its stop: %v", err)
	}
}

// TestScreenLateRefusalCompletesTheBarrier: a refusal rank 0 makes only later (a front end refusing
// an engine's READY for another parallel config hash, vllm/v1/engine/utils.py
// wait_for_engine_startup) lets the barrier complete for every member; rank 0 leaves with the first
// such refusal in Result.Late.
func TestScreenLateRefusalCompletesTheBarrier(t *testing.T) {
	addr := freeAddr(t)
	ms := members("dp", addr, 3, 0, 1, 2)
	ms[0].Screen = func(hello []byte) Screening {
		if string(hello) == `"mismatch"` {
			return Screening{Late: "RuntimeError: late"}
		}
		return Screening{}
	}
	ms[1].Hello = []byte(`"ok"`)
	ms[2].Hello = []byte(`"mismatch"`)
	ctx := context.Background()
	rank0 := make(chan Result, 1)
	go func() {
		res, err := Join(ctx, ms[0], cfg(timeout))
		if err != nil {
			t.Errorf("rank 0: %v, want the barrier completed", err)
		}
		rank0 <- res
	}()
	for r, err := range joinAll(ctx, ms[1:], cfg(timeout)) {
		if err != nil {
			t.Errorf("member %d: %v, want its answer", r, err)
		}
	}
	if res := <-rank0; res.Late != "RuntimeError: late" {
		t.Errorf("rank 0's late refusal = %q", res.Late)
	}
}

// TestLostRank0: rank 0 accepts a member's connection and closes it without an answer (a front
// end that raised and exited). torch's store client fails at once with DistNetworkError; a ZMQ
// handshake member (Lost: an engine core's startup_handshake in vllm/v1/engine/core.py) sees no
// disconnect and waits — until it is stopped, or its time runs out and it raises Lost.
func TestLostRank0(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	addr := ln.Addr().String()
	const lost = "RuntimeError: no answer from the front end"
	torch := Member{Kind: "dp", Address: addr, WorldSize: 2, Rank: 1, ID: "h/0/engine-core-1"}
	zmq := torch
	zmq.Lost = lost

	var re *Error
	if err := joinErr(context.Background(), torch, cfg(time.Hour)); !errors.As(err, &re) || !strings.HasPrefix(re.Python, "torch.distributed.DistNetworkError") {
		t.Errorf("torch member: %v, want DistNetworkError at once", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- joinErr(ctx, zmq, cfg(time.Hour)) }()
	select {
	case err := <-done:
		t.Fatalf("ZMQ member returned %v before it was stopped", err)
	default:
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("stopped ZMQ member: %v, want context.Canceled", err)
		}
	case <-time.After(timeout):
		t.Fatal("stopped ZMQ member did not return")
	}

	start := time.Now()
	bound := 300 * time.Millisecond
	if err := joinErr(context.Background(), zmq, cfg(bound)); !errors.As(err, &re) || re.Python != lost || !slices.Equal(re.Missing, []string{rankName(0)}) {
		t.Errorf("ZMQ member at its time-out: %v, want %q", err, lost)
	}
	if waited := time.Since(start); waited < bound {
		t.Errorf("ZMQ member gave up after %v, before its bound %v", waited, bound)
	}
}

// TestRank0ThatNeverListens: torch's store client gives up at its time-out with DistNetworkError;
// a ZMQ handshake member (Lost) connects without an error to an endpoint nobody binds and waits
// for an answer, then raises Lost at the same bound (vllm/v1/engine/core.py startup_handshake).
func TestRank0ThatNeverListens(t *testing.T) {
	addr := freeAddr(t) // nobody listens
	const lost = "RuntimeError: no answer from the front end"
	torch := Member{Kind: "dp", Address: addr, WorldSize: 2, Rank: 1, ID: "h/0/engine-core-1"}
	zmq := torch
	zmq.Lost = lost
	bound := 300 * time.Millisecond
	for _, c := range []struct {
		name string
		m    Member
		want string
	}{
		{"torch", torch, "torch.distributed.DistNetworkError: The client socket has timed out"},
		{"ZMQ", zmq, lost},
	} {
		start := time.Now()
		var re *Error
		if err := joinErr(context.Background(), c.m, cfg(bound)); !errors.As(err, &re) || !strings.HasPrefix(re.Python, c.want) || !slices.Equal(re.Missing, []string{rankName(0)}) {
			t.Errorf("%s member: %v, want %q, rank 0 missing", c.name, err, c.want)
		}
		if waited := time.Since(start); waited < bound {
			t.Errorf("%s member gave up after %v, before its bound %v", c.name, waited, bound)
		}
	}
}

// A member tells Forget about every dial that failed, with the reason, so that a cached answer for
// rank 0's host can be asked for again.
func TestJoinTellsForgetWhyADialFailed(t *testing.T) {
	addr := freeAddr(t) // nobody listens: every dial is refused
	host, _, _ := net.SplitHostPort(addr)
	var mu sync.Mutex
	var forgot []error
	c := cfg(300 * time.Millisecond)
	c.Resolve = func(context.Context, string) (string, error) { return host, nil }
	c.Forget = func(h string, err error) {
		mu.Lock()
		defer mu.Unlock()
		if h != host {
			t.Errorf("Forget(%q), want the dialled host %q", h, host)
		}
		forgot = append(forgot, err)
	}
	err := joinErr(context.Background(), Member{Kind: "workers", Address: addr, WorldSize: 2, Rank: 1}, c)
	var re *Error
	if !errors.As(err, &re) {
		t.Fatalf("Join to a rank 0 that never listens: %v, want a rendezvous error", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(forgot) == 0 {
		t.Fatal("no failed dial reached Forget")
	}
	refused := 0
	for _, e := range forgot {
		var ne net.Error
		switch {
		case errors.Is(e, syscall.ECONNREFUSED):
			refused++
		case errors.As(e, &ne) && ne.Timeout():
			// The member's bound can end a dial in flight on a loaded machine (make test beside
			// make e2e): that dial is told as timed out, not refused.
		default:
			t.Errorf("Forget got %v, want the refusal (or, cut by the bound, a time-out)", e)
		}
	}
	if refused == 0 {
		t.Errorf("Forget got %v, none of them the refusal", forgot)
	}
}

// A connect whose SYN is lost is abandoned after pace.ConnectAttempt and made again on a new
// socket: in a run, a peer's name resolves a moment before its interface answers, and the kernel
// would send the lost SYN again only after a second. Here the loss is a front listener whose
// accept queue is full (Linux drops a SYN then); once the member has given up one attempt, the
// queue is drained and the front passes connections on to rank 0. A member that kept its first
// socket would never get through: the queue is drained only after an attempt was abandoned.
func TestJoinTriesAgainOnANewSocketWhenAConnectIsLost(t *testing.T) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	// A backlog of 0 queues one connection: the filler below.
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "front")
	front, err := net.FileListener(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer front.Close()
	filler, err := net.Dial("tcp", front.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer filler.Close()

	back := freeAddr(t)
	abandoned := make(chan struct{})
	var once sync.Once
	c := cfg(5 * time.Second)
	c.Forget = func(_ string, err error) {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			once.Do(func() { close(abandoned) })
		}
	}
	go func() {
		<-abandoned
		first, err := front.Accept() // the filler
		if err != nil {
			return
		}
		first.Close()
		for {
			in, err := front.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", back)
			if err != nil {
				in.Close()
				continue
			}
			go func() { io.Copy(out, in); out.(*net.TCPConn).CloseWrite() }()
			go func() { io.Copy(in, out); in.(*net.TCPConn).CloseWrite() }()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	errs := joinAll(ctx, []Member{
		{Kind: "workers", Address: back, WorldSize: 2, Rank: 0, ID: "h/0/worker-0"},
		{Kind: "workers", Address: front.Addr().String(), WorldSize: 2, Rank: 1, ID: "h/0/worker-1"},
	}, c)
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	select {
	case <-abandoned:
	default:
		t.Error("no connect attempt was abandoned: the front's queue was never full")
	}
}

// TestStoppedRank0HoldsItsCommand: rank 0 stopped before its barrier completes (its launch line's
// teardown: a failing front end stops its engines and their workers, vllm/v1/engine/utils.py)
// tells the members Config.StoppedWith names to hold: they wait for their own stop, which the same
// teardown brings, instead of raising torch's DistNetworkError on the closed connection. A member
// of another launch line sees the connection close and raises it at once, as torch's store
// client does when its master goes.
func TestStoppedRank0HoldsItsCommand(t *testing.T) {
	addr := freeAddr(t)
	ms := members("workers", addr, 4, 0, 1, 2)
	ms[2].ID = "other/0/worker-2"
	arrived := make(chan struct{}, 2)
	ms[0].Screen = func([]byte) Screening { arrived <- struct{}{}; return Screening{} }
	ms[1].Hello, ms[2].Hello = []byte(`1`), []byte(`2`)
	c0 := cfg(timeout)
	c0.StoppedWith = func(id string) bool { return strings.HasPrefix(id, "h/0/") }

	ctx0, stop0 := context.WithCancel(context.Background())
	defer stop0()
	ctx1, stop1 := context.WithCancel(context.Background())
	defer stop1()
	rank0, held, other := make(chan error, 1), make(chan error, 1), make(chan error, 1)
	go func() { rank0 <- joinErr(ctx0, ms[0], c0) }()
	go func() { held <- joinErr(ctx1, ms[1], cfg(timeout)) }()
	go func() { other <- joinErr(context.Background(), ms[2], cfg(timeout)) }()
	<-arrived
	<-arrived
	stop0()
	if err := <-rank0; !errors.Is(err, context.Canceled) {
		t.Fatalf("stopped rank 0: %v, want context.Canceled", err)
	}
	var re *Error
	if err := <-other; !errors.As(err, &re) || re.Python != rank0Gone || !slices.Equal(re.Missing, []string{rankName(0)}) {
		t.Errorf("member of another launch: %v, want %q at once", err, rank0Gone)
	}
	select {
	case err := <-held:
		t.Fatalf("held member returned before its own stop: %v", err)
	default:
	}
	stop1()
	if err := <-held; !errors.Is(err, context.Canceled) {
		t.Errorf("held member after its stop: %v, want context.Canceled", err)
	}
}

// TestScreenJudgesAHelloOfAnotherShape: an engine whose own command gives the handshake another
// world size (a follower whose --data-parallel-size says more than the head's) is judged by its
// HELLO, as vLLM's front end knows the engines it waits for and not a world size
// (vllm/v1/engine/utils.py wait_for_engine_startup): one rank 0 waits for joins rank 0's world,
// one it does not wait for is refused for itself, not for the world size.
func TestScreenJudgesAHelloOfAnotherShape(t *testing.T) {
	screen := func(hello []byte) Screening {
		if string(hello) == `"unexpected"` {
			return Screening{Refuse: "RuntimeError: Message from engine with unexpected data parallel rank: 2", Answer: "no answer"}
		}
		return Screening{Answer: "no answer"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	// Waited for: rank 0 serves a world of 3; the member thinks it is one of 5.
	ms := members("dp", freeAddr(t), 3, 0, 1, 2)
	ms[0].Screen = screen
	ms[1].Hello, ms[2].Hello = []byte(`"ok"`), []byte(`"ok"`)
	ms[2].WorldSize = 5
	for r, err := range joinAll(ctx, ms, cfg(timeout)) {
		if err != nil {
			t.Errorf("waited-for engines, rank %d: %v, want the barrier complete", r, err)
		}
	}

	// Not waited for: the refusal is rank 0's, and the member is told its answer.
	ms = members("dp", freeAddr(t), 3, 0, 1, 3)
	ms[0].Screen = screen
	ms[1].Hello = []byte(`"ok"`)
	ms[2].Hello, ms[2].WorldSize = []byte(`"unexpected"`), 5
	errs := joinAll(ctx, ms, cfg(timeout))
	var re *Error
	if err := errs[0]; !errors.As(err, &re) || !strings.Contains(re.Python, "unexpected data parallel rank: 2") {
		t.Errorf("rank 0: %v, want the refusal of the engine it does not wait for", err)
	}
	if err := errs[3]; !errors.As(err, &re) || re.Python != "no answer" {
		t.Errorf("the refused engine: %v, want told no answer (not a world size)", err)
	}
}
