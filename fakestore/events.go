package fakestore

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/widetp/widetp/fakestore/api"
)

// MaxEventWait caps a long poll's wait: long enough that a waiter re-polls rarely, short enough
// to stay under common HTTP client and proxy idle timeouts (60 s and up).
const MaxEventWait = 30 * time.Second

// eventLog is the append-only log of everything the store saw. Waiters block on a channel that
// every append closes and replaces, so each one wakes as soon as an event lands (no polling).
type eventLog struct {
	mu     sync.Mutex
	events []api.Event
	last   uint64
	wake   chan struct{}
	// armed is set when a waiter took wake: only then does an append need to close and replace
	// it (an append with nobody waiting allocates nothing for wake-ups).
	armed bool
	done  chan struct{} // closed when the server shuts down: releases every waiter
	// waiting counts long polls blocked right now (tests use it to know a waiter is parked).
	waiting atomic.Int64
}

func newEventLog() *eventLog {
	return &eventLog{wake: make(chan struct{}), done: make(chan struct{})}
}

// append assigns the next sequence number and wakes every waiter.
func (l *eventLog) append(e api.Event) api.Event {
	l.mu.Lock()
	l.last++
	e.Seq = l.last
	l.events = append(l.events, e)
	if l.armed {
		close(l.wake)
		l.wake = make(chan struct{})
		l.armed = false
	}
	l.mu.Unlock()
	return e
}

// sinceLocked returns a copy of the events with Seq > since.
func (l *eventLog) sinceLocked(since uint64) []api.Event {
	i := sort.Search(len(l.events), func(i int) bool { return l.events[i].Seq > since })
	out := make([]api.Event, len(l.events)-i)
	copy(out, l.events[i:])
	return out
}

// since returns the events with Seq > since and the newest sequence number handed out.
func (l *eventLog) since(since uint64) ([]api.Event, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sinceLocked(since), l.last
}

// wait returns the events with Seq > since, waiting up to d (capped at MaxEventWait) for the
// first one. It returns early, possibly with none, when ctx ends or the server closes.
func (l *eventLog) wait(ctx context.Context, since uint64, d time.Duration) ([]api.Event, uint64) {
	if d > MaxEventWait {
		d = MaxEventWait
	}
	var timer *time.Timer
	for {
		l.mu.Lock()
		evs, last, wake := l.sinceLocked(since), l.last, l.wake
		if len(evs) > 0 || d <= 0 {
			l.mu.Unlock()
			return evs, last
		}
		l.armed = true
		l.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(d)
			defer timer.Stop()
		}
		l.waiting.Add(1)
		select {
		case <-wake:
			l.waiting.Add(-1)
		case <-timer.C:
			l.waiting.Add(-1)
			return nil, last
		case <-ctx.Done():
			l.waiting.Add(-1)
			return nil, last
		case <-l.done:
			l.waiting.Add(-1)
			return nil, last
		}
	}
}

// reset drops the stored events; sequence numbers keep growing so a waiter's since stays valid.
func (l *eventLog) reset() {
	l.mu.Lock()
	l.events = nil
	l.mu.Unlock()
}

func (l *eventLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.done:
	default:
		close(l.done)
	}
}
