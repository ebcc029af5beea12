package fakestore

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/widetp/widetp/fakestore/api"
)

// parked blocks until n waiters are parked in the log (bounded by ctx).
func parked(ctx context.Context, t *testing.T, l *eventLog, n int64) {
	t.Helper()
	for l.waiting.Load() < n {
		if ctx.Err() != nil {
			t.Fatalf("%d waiters never parked (have %d)", n, l.waiting.Load())
		}
		runtime.Gosched()
	}
}

// TestParkedWaitersAllWakeOnOneAppend: every parked waiter returns with the event, well before
// its wait bound (the bound here is far beyond the test's deadline).
func TestParkedWaitersAllWakeOnOneAppend(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l := newEventLog()
	l.append(api.Event{Op: "before"})
	const waiters = 8
	var wg sync.WaitGroup
	got := make(chan []api.Event, waiters)
	for range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			evs, _ := l.wait(ctx, 1, time.Hour)
			got <- evs
		}()
	}
	parked(ctx, t, l, waiters)
	l.append(api.Event{Op: "wake"})
	wg.Wait()
	close(got)
	for evs := range got {
		if len(evs) != 1 || evs[0].Op != "wake" || evs[0].Seq != 2 {
			t.Errorf("waiter woke with %+v", evs)
		}
	}
	if ctx.Err() != nil {
		t.Fatal("waiters only returned at the deadline")
	}
}

func TestWaitIsReleasedByCloseAndBoundedByItsWait(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l := newEventLog()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if evs, _ := l.wait(ctx, 0, time.Hour); len(evs) != 0 {
			t.Errorf("closed log answered %+v", evs)
		}
	}()
	parked(ctx, t, l, 1)
	l.close()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("close did not release the waiter")
	}
	start := time.Now()
	if evs, _ := newEventLog().wait(ctx, 0, 20*time.Millisecond); len(evs) != 0 || ctx.Err() != nil {
		t.Fatalf("empty log answered %+v", evs)
	}
	if time.Since(start) < 20*time.Millisecond {
		t.Error("a wait returned before its bound with no event")
	}
}

func TestResetKeepsSequence(t *testing.T) {
	l := newEventLog()
	l.append(api.Event{})
	l.append(api.Event{})
	l.reset()
	e := l.append(api.Event{})
	evs, last := l.since(0)
	if e.Seq != 3 || last != 3 || len(evs) != 1 {
		t.Errorf("after reset: appended seq %d, last %d, events %+v", e.Seq, last, evs)
	}
}
