package rendezvous

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// hostRelay is one host's Relay, kept in memory: the first member to wait leads, the others wait
// for a connect or for the leader to quit (the simnode sequencer does the same across processes).
type hostRelay struct {
	mu      sync.Mutex
	leading bool
	waiters []chan bool // true: lead
	waits   int
	leads   int // Waits answered with lead, the promotions included
	reached int
	// waited, when set, hears of every Wait as it begins.
	waited chan struct{}
}

func (r *hostRelay) Wait(ctx context.Context, _ string) (bool, error) {
	r.mu.Lock()
	r.waits++
	if r.waited != nil {
		r.waited <- struct{}{}
	}
	if !r.leading {
		r.leading = true
		r.leads++
		r.mu.Unlock()
		return true, nil
	}
	ch := make(chan bool, 1)
	r.waiters = append(r.waiters, ch)
	r.mu.Unlock()
	select {
	case lead := <-ch:
		return lead, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

func (r *hostRelay) Reached(string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reached++
	for _, ch := range r.waiters {
		ch <- false
	}
	r.waiters, r.leading = nil, false
}

func (r *hostRelay) Quit(string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.waiters) == 0 {
		r.leading = false
		return
	}
	r.leads++
	r.waiters[0] <- true
	r.waiters = r.waiters[1:]
}

// The members of one host that wait for a rank 0 that is not up yet make one connect each, then
// wait while one of them keeps trying; once it gets through, the others connect at once and the
// barrier completes for everyone, with every member's value. Without the relay each member would
// try some forty times over two seconds (pace.Pause).
func TestRelayOneMemberTriesForTheHost(t *testing.T) {
	addr := freeAddr(t)
	const world = 6
	relay := &hostRelay{}
	var mu sync.Mutex
	failed := map[int]int{} // failed dials by rank
	// ready closes once every member has waited at least once and the one that leads has failed
	// three dials: rank 0 then comes while the others wait on the relay.
	ready := make(chan struct{})
	var once sync.Once
	type result struct {
		rank int
		res  Result
		err  error
	}
	results := make(chan result, world)
	for _, m := range members("workers", addr, world, 1, 2, 3, 4, 5) {
		m.Value = fmt.Sprintf("v%d", m.Rank)
		c := cfg(timeout)
		c.Relay = relay
		c.Forget = func(string, error) {
			mu.Lock()
			defer mu.Unlock()
			failed[m.Rank]++
			relay.mu.Lock()
			waited := relay.waits
			relay.mu.Unlock()
			if waited >= world-1 && failed[m.Rank] >= 3 {
				once.Do(func() { close(ready) })
			}
		}
		go func() {
			res, err := Join(context.Background(), m, c)
			results <- result{m.Rank, res, err}
		}()
	}
	select {
	case <-ready:
	case r := <-results:
		t.Fatalf("rank %d left before rank 0 came: %v", r.rank, r.err)
	case <-time.After(timeout):
		t.Fatal("the members never all waited while one kept trying")
	}
	rank0 := Member{Kind: "workers", Address: addr, WorldSize: world, Rank: 0, Value: "v0"}
	go func() {
		res, err := Join(context.Background(), rank0, cfg(timeout))
		results <- result{0, res, err}
	}()
	for range world {
		r := <-results
		if r.err != nil {
			t.Fatalf("rank %d: %v", r.rank, r.err)
		}
		for k := range world {
			if got := r.res.Values[k]; got != fmt.Sprintf("v%d", k) {
				t.Errorf("rank %d left with value %q for rank %d", r.rank, got, k)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	leaders := 0
	for rank, n := range failed {
		if n > 1 {
			leaders++
		}
		if n < 1 {
			t.Errorf("rank %d never failed a dial (%d)", rank, n)
		}
	}
	if leaders != 1 {
		t.Errorf("failed dials by rank %v: want one member that kept trying, the others once each", failed)
	}
	if relay.reached == 0 {
		t.Error("no member told the relay it got through")
	}
}

// A member that waits on the relay still gives up at its own time-out, with torch's error, when
// rank 0 never comes; and when the leader gives up first, the next member takes over the tries.
func TestRelayWaitersGiveUpAtTheirOwnTimeout(t *testing.T) {
	addr := freeAddr(t)
	relay := &hostRelay{waited: make(chan struct{}, 16)}
	errs := make(chan error, 3)
	start := time.Now()
	for i, m := range members("workers", addr, 4, 1, 2, 3) {
		// The first to wait leads, and gives up first: the next in line must take over.
		c := cfg(time.Duration(200*(i+1)) * time.Millisecond)
		c.Relay = relay
		go func() { errs <- joinErr(context.Background(), m, c) }()
		select {
		case <-relay.waited:
		case <-time.After(timeout):
			t.Fatalf("rank %d never waited", m.Rank)
		}
	}
	for range 3 {
		err := <-errs
		var re *Error
		if !errors.As(err, &re) || len(re.Missing) != 1 || re.Missing[0] != "rank 0" {
			t.Fatalf("Join without rank 0: %v, want torch's connect time-out missing rank 0", err)
		}
	}
	if took := time.Since(start); took > 600*time.Millisecond+maxRetry+time.Second {
		t.Fatalf("the members gave up after %v", took)
	}
	relay.mu.Lock()
	defer relay.mu.Unlock()
	if relay.leads < 2 {
		t.Errorf("%d members led the tries; when the first gave up, the next should have taken over", relay.leads)
	}
}
