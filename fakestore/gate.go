package fakestore

import (
	"context"
	"sync"
	"time"
)

// startGate is the run's start gate (api.GateResponse): closed when the store starts, opened
// once by the harness, closed again only by Reset. A store restart or wipe leaves it as it is:
// those are faults of Mooncake's state, and the gate is the harness's.
type startGate struct {
	mu sync.Mutex
	// open is closed when the gate opens; Reset replaces it with a new one.
	open chan struct{}
	// waiting counts the long polls blocked on the gate right now (tests use it to know a
	// waiter is parked).
	waiting int
}

func newStartGate() *startGate { return &startGate{open: make(chan struct{})} }

// openGate opens the gate; it reports whether it was closed until now.
func (g *startGate) openGate() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.openLocked() {
		return false
	}
	close(g.open)
	return true
}

// close closes an open gate again (Reset).
func (g *startGate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.openLocked() {
		g.open = make(chan struct{})
	}
}

// isOpen reports whether the gate is open now.
func (g *startGate) isOpen() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.openLocked()
}

// openLocked reports whether the gate is open; g.mu is held.
func (g *startGate) openLocked() bool {
	select {
	case <-g.open:
		return true
	default:
		return false
	}
}

// parked is how many long polls wait on the gate now.
func (g *startGate) parked() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting
}

// wait reports whether the gate is open, waiting up to d (capped at MaxEventWait, as a long poll
// of the events is) for it to open; it returns early when ctx ends or the server stops.
func (g *startGate) wait(ctx context.Context, d time.Duration, stop <-chan struct{}) bool {
	if d > MaxEventWait {
		d = MaxEventWait
	}
	g.mu.Lock()
	open := g.open
	if g.openLocked() {
		g.mu.Unlock()
		return true
	}
	if d <= 0 {
		g.mu.Unlock()
		return false
	}
	g.waiting++
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.waiting--
		g.mu.Unlock()
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-open:
		return true
	case <-t.C:
	case <-ctx.Done():
	case <-stop:
	}
	return false
}

// GateWaiters is how many long polls wait at the start gate now: a harness or a test that must
// know a node is parked there, not merely started, reads it.
func (s *Server) GateWaiters() int { return s.gate.parked() }
