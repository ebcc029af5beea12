package fakestore_test

import (
	"context"
	"errors"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/widetp/widetp/fakestore"
	"github.com/widetp/widetp/fakestore/api"
)

// gateParked waits until n long polls wait at the start gate, failing after 10 s.
func gateParked(t *testing.T, s *fakestore.Server, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.GateWaiters() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d gate waiters never parked (have %d)", n, s.GateWaiters())
		}
		runtime.Gosched()
	}
}

// The start gate is shut when the store starts: a poll without a wait answers at once, a long
// poll parks until the harness opens the gate and then answers open; opening again is a no-op.
// Only the opening is an event (a logged poll would wake every other poller), a store restart
// (a fault of Mooncake's state) leaves the gate open, and a reset shuts it.
func TestStartGate(t *testing.T) {
	s, c := start(t, fakestore.Config{})
	ctx := bounded(t, 20*time.Second)
	if open, err := c.Gate(ctx, 0); err != nil || open {
		t.Fatalf("gate of a new store: open %v, err %v; want shut", open, err)
	}
	waiters := make(chan bool, 2)
	for range 2 {
		go func() {
			open, err := c.Gate(ctx, 10*time.Second)
			if err != nil {
				t.Error(err)
			}
			waiters <- open
		}()
	}
	gateParked(t, s, 2)
	if len(waiters) != 0 {
		t.Fatal("a long poll answered before the gate opened")
	}
	if err := c.OpenGate(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if !<-waiters {
			t.Error("a parked long poll answered shut after the gate opened")
		}
	}
	if err := c.OpenGate(ctx); err != nil {
		t.Fatalf("opening an open gate: %v", err)
	}
	evs, err := c.Events(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var gate []string
	for _, e := range evs.Events {
		if e.Plane == api.PlaneTest && e.Op == "gate" {
			gate = append(gate, e.Method+" "+e.Detail)
		}
	}
	if len(gate) != 2 || gate[0] != "POST opened" || gate[1] != "POST already open" {
		t.Errorf("gate events %q, want the two openings and no poll", gate)
	}
	if _, err := c.AddFault(ctx, api.Fault{Kind: api.FaultRestart}); err != nil {
		t.Fatal(err)
	}
	if !s.GateOpen() {
		t.Error("a store restart shut the start gate")
	}
	s.Reset()
	if open, err := c.Gate(ctx, 0); err != nil || open {
		t.Errorf("gate after a reset: open %v, err %v; want shut", open, err)
	}
}

// A long poll of a shut gate answers shut after its wait; a bad wait or method is refused with
// the reason; WaitGate needs a deadline and gives up at it with the context's error.
func TestStartGateBounds(t *testing.T) {
	s, c := start(t, fakestore.Config{})
	ctx := bounded(t, 20*time.Second)
	if open, err := c.Gate(ctx, 50*time.Millisecond); err != nil || open {
		t.Errorf("long poll of a shut gate: open %v, err %v", open, err)
	}
	for _, tc := range []struct {
		method, query string
		want          int
	}{
		{http.MethodGet, "?wait=soon", http.StatusBadRequest},
		{http.MethodGet, "?wait=-1s", http.StatusBadRequest},
		{http.MethodDelete, "", http.StatusMethodNotAllowed},
	} {
		req, _ := http.NewRequestWithContext(ctx, tc.method, s.URL(api.PlaneAdmin)+api.TestPrefix+"gate"+tc.query, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s gate%s: HTTP %d, want %d", tc.method, tc.query, resp.StatusCode, tc.want)
		}
	}
	if err := c.WaitGate(context.Background()); err == nil {
		t.Error("WaitGate without a deadline waited")
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := c.WaitGate(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitGate on a shut gate: %v, want the deadline", err)
	}
	if s.GateOpen() {
		t.Error("the gate opened by itself")
	}
}
