package fakestore

import (
	"runtime"
	"testing"
	"time"
)

// Waiting reports how many long polls are parked (benchmarks and tests use it to start the clock
// only once the waiter is really blocked).
func (s *Server) Waiting() int64 { return s.events.waiting.Load() }

// WaitParked blocks until one long poll is parked, failing tb after 10 s.
func WaitParked(tb testing.TB, s *Server) {
	deadline := time.Now().Add(10 * time.Second)
	for s.Waiting() < 1 {
		if time.Now().After(deadline) {
			tb.Fatal("no long poll parked within 10s")
		}
		runtime.Gosched()
	}
}
