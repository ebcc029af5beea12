package fakestore_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/widetp/widetp/fakestore"
	"github.com/widetp/widetp/fakestore/api"
	"github.com/widetp/widetp/report"
)

func TestReportsKeepTheLatestPerIDAndTheHistory(t *testing.T) {
	_, c := start(t, fakestore.Config{})
	ctx := bounded(t, 5*time.Second)
	posts := []report.Process{
		{ID: "h/0/engine-core-0", Role: report.RoleEngineCore},
		{ID: "h/0/engine-core-0/worker-0", Role: report.RoleWorker, Rank: report.Int(0)},
		{ID: "h/0/engine-core-0", Role: report.RoleEngineCore, PID: 42, Exit: &report.Exit{Code: 1, Error: "AssertionError"}},
	}
	for _, p := range posts {
		if err := c.PostReport(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	latest, err := c.Reports(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(latest) != 2 || latest[0].ID != "h/0/engine-core-0" || latest[0].PID != 42 || !latest[0].Crashed() ||
		latest[1].Rank == nil || *latest[1].Rank != 0 {
		t.Errorf("latest = %+v", latest)
	}
	hist, err := c.ReportHistory(ctx)
	if err != nil || len(hist) != 3 || hist[0].PID != 0 || hist[2].PID != 42 {
		t.Errorf("history = %+v %v", hist, err)
	}
	evs, err := c.Events(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var processes []string
	for _, e := range evs.Events {
		if e.Plane == api.PlaneTest && e.Op == "reports" && e.Method == http.MethodPost {
			processes = append(processes, e.Process)
		}
	}
	if strings.Join(processes, ",") != "h/0/engine-core-0,h/0/engine-core-0/worker-0,h/0/engine-core-0" {
		t.Errorf("report events name processes %v", processes)
	}
}

func TestRegistrationsRecordWriterTimesCountAndHistory(t *testing.T) {
	clock := fakestore.NewManualClock(epoch)
	_, c := start(t, fakestore.Config{Clock: clock})
	ctx := bounded(t, 5*time.Second)
	key := "mooncake/cluster-a/rpc_meta/10.0.0.9:12345"
	if _, err := c.Put(ctx, key, []byte("v1")); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if got, err := c.Put(ctx, key, []byte("v1")); err != nil || got != "metadata unchanged" {
		t.Fatalf("same-body re-PUT: %q %v", got, err)
	}
	if _, err := c.Put(ctx, key, []byte("v2")); !isDuplicate(err) {
		t.Fatalf("other-body PUT: %v", err)
	}
	if err := c.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if _, err := c.Put(ctx, key, []byte("v3")); err != nil {
		t.Fatal(err)
	}
	regs, dups, err := c.Registrations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(regs) != 1 {
		t.Fatalf("registrations = %+v", regs)
	}
	r := regs[0]
	var ops []string
	for _, h := range r.History {
		ops = append(ops, h.Op+":"+h.Result)
	}
	if r.Kind != "rpc_meta" || r.Name != "10.0.0.9:12345" || r.Writer != "127.0.0.1" || r.Writes != 2 || !r.Live ||
		!r.FirstWrite.Equal(epoch) || !r.LastWrite.Equal(epoch.Add(2*time.Second)) ||
		strings.Join(ops, " ") != "put:updated put:unchanged put:rejected-duplicate delete:deleted put:updated" {
		t.Errorf("registration = %+v, history %v", r, ops)
	}
	if len(dups) != 2 || dups[0].Action != "unchanged" || dups[1].Action != "rejected" || dups[1].Holder != "127.0.0.1" {
		t.Errorf("duplicates = %+v", dups)
	}
}

// TestLongPollWakesOnTheNextEvent: a waiter blocked in GET /_widetp/events returns with the event
// that arrives, long before its wait runs out.
func TestLongPollWakesOnTheNextEvent(t *testing.T) {
	s, c := start(t, fakestore.Config{})
	ctx := bounded(t, 10*time.Second)
	_, last := s.Events(0)
	got := make(chan api.EventsResponse, 1)
	errs := make(chan error, 1)
	go func() {
		r, err := c.Events(ctx, last, fakestore.MaxEventWait)
		if err != nil {
			errs <- err
			return
		}
		got <- r
	}()
	// The waiter may not have arrived yet; either way it must see the PUT, never wait it out.
	if _, err := c.Put(ctx, "mooncake/ram/h:1", []byte("x")); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if len(r.Events) == 0 || r.Events[0].Key != "mooncake/ram/h:1" || r.Events[0].Plane != api.PlaneMetadata ||
			r.Events[0].Method != http.MethodPut || r.Events[0].Status != 200 || r.Events[0].Peer != "127.0.0.1" {
			t.Errorf("woke with %+v", r)
		}
	case err := <-errs:
		t.Fatal(err)
	case <-ctx.Done():
		t.Fatal("the long poll did not wake on the PUT")
	}
	// With nothing new, a zero wait answers at once and empty.
	r, err := c.Events(ctx, r0(s), 0)
	if err != nil || len(r.Events) != 0 {
		t.Errorf("events after the last = %+v %v", r, err)
	}
}

func r0(s *fakestore.Server) uint64 { _, last := s.Events(0); return last }

func TestWaitForMatchesAndIsBounded(t *testing.T) {
	_, c := start(t, fakestore.Config{})
	ctx := bounded(t, 10*time.Second)
	done := make(chan api.Event, 1)
	errs := make(chan error, 1)
	go func() {
		e, err := c.WaitFor(ctx, 0, func(e api.Event) bool { return e.Op == api.OpMountSegment && e.Key == "h:9" })
		if err != nil {
			errs <- err
			return
		}
		done <- e
	}()
	for _, name := range []string{"h:7", "h:8", "h:9"} {
		if err := c.MountSegment(ctx, "c-"+name, seg("s-"+name, name)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case e := <-done:
		if e.Plane != api.PlaneMaster || e.Code != api.OK {
			t.Errorf("matched %+v", e)
		}
	case err := <-errs:
		t.Fatal(err)
	}
	short := bounded(t, 200*time.Millisecond)
	if _, err := c.WaitFor(short, 0, func(api.Event) bool { return false }); err == nil {
		t.Error("WaitFor for an event that never comes returned no error")
	}
	if _, err := c.WaitFor(t.Context(), 0, func(api.Event) bool { return true }); err == nil {
		t.Error("WaitFor without a deadline was accepted")
	}
}

func TestResetForgetsAllButKeepsSequenceNumbersGrowing(t *testing.T) {
	s, c := start(t, fakestore.Config{})
	ctx := bounded(t, 5*time.Second)
	register(t, c, "c1", seg("s1", "h:1"))
	if err := c.PostReport(ctx, report.Process{ID: "p"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddFault(ctx, api.Fault{Kind: api.FaultLatency, Latency: api.Duration(time.Millisecond), Plane: api.PlaneAdmin}); err != nil {
		t.Fatal(err)
	}
	before := r0(s)
	if err := c.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	snap, err := c.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Metadata) != 0 || len(snap.Segments) != 0 || len(snap.Registrations) != 0 || len(snap.Reports) != 0 ||
		len(snap.Faults) != 0 {
		t.Errorf("state after reset: %+v", snap)
	}
	if len(snap.Events) == 0 || snap.Events[0].Seq <= before || snap.Events[0].Op != "reset" {
		t.Errorf("events after reset start with %+v, want the reset event after seq %d", snap.Events, before)
	}
}

func TestSnapshotHoldsEverything(t *testing.T) {
	_, c := start(t, fakestore.Config{Flavor: fakestore.FlavorPython, DuplicateSegments: fakestore.RejectDuplicates})
	ctx := bounded(t, 5*time.Second)
	register(t, c, "c1", seg("s1", "h:1"))
	pingStatus(t, c, "c1")
	if err := c.PostReport(ctx, report.Process{ID: "p"}); err != nil {
		t.Fatal(err)
	}
	snap, err := c.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Flavor != "python" || snap.DuplicatePolicy != "reject" || len(snap.Metadata) != 2 || len(snap.Segments) != 1 ||
		len(snap.Clients) != 1 || snap.Clients[0].OK || len(snap.Registrations) != 3 || len(snap.Reports) != 1 ||
		len(snap.Events) < 5 || snap.LastSeq != snap.Events[len(snap.Events)-1].Seq {
		b, _ := json.MarshalIndent(snap, "", " ")
		t.Errorf("snapshot:\n%s", b)
	}
}

func TestTestEndpointsBadInput(t *testing.T) {
	s, c := start(t, fakestore.Config{MaxBody: 1024})
	base := s.URL(api.PlaneAdmin)
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		mention                  string
	}{
		{"malformed report", "POST", "/_widetp/reports", `{"id":`, 400, "decode report.Process"},
		{"report without id", "POST", "/_widetp/reports", `{"host":"h"}`, 400, "no id"},
		{"report of the wrong type", "POST", "/_widetp/reports", `{"id":7}`, 400, "decode report.Process"},
		{"oversized report", "POST", "/_widetp/reports", `{"id":"` + strings.Repeat("x", 2000) + `"}`, 413, "over 1024 bytes"},
		{"since not a number", "GET", "/_widetp/events?since=abc", "", 400, `since="abc"`},
		{"wait not a duration", "GET", "/_widetp/events?wait=forever", "", 400, `wait="forever"`},
		{"bad percent-encoding", "GET", "/_widetp/events?since=%zz", "", 400, "query"},
		{"unknown endpoint", "GET", "/_widetp/nope", "", 404, "unknown test endpoint"},
		{"wrong method", "DELETE", "/_widetp/snapshot", "", 405, "allowed GET"},
		{"unknown fault kind", "POST", "/_widetp/faults", `{"kind":"explode"}`, 400, `fault kind "explode"`},
		{"refuse scoped by key", "POST", "/_widetp/faults", `{"kind":"refuse","key":"x"}`, 400, "only plane and peer"},
		{"fault with unknown field", "POST", "/_widetp/faults", `{"kind":"drop","nope":1}`, 400, `unknown field "nope"`},
		{"fault on the test plane", "POST", "/_widetp/faults", `{"kind":"drop","plane":"test"}`, 400, "test endpoints take no faults"},
		{"delete an unknown fault", "DELETE", "/_widetp/faults?id=f99", "", 404, `no fault "f99"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := bounded(t, 5*time.Second)
			req, _ := http.NewRequestWithContext(ctx, tc.method, base+tc.path, bytes.NewBufferString(tc.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var eb api.ErrorBody
			if resp.StatusCode != tc.status || json.Unmarshal(b, &eb) != nil || !strings.Contains(eb.Error, tc.mention) {
				t.Errorf("%d %s, want %d mentioning %q", resp.StatusCode, b, tc.status, tc.mention)
			}
		})
	}
	if _, err := c.Snapshot(bounded(t, 5*time.Second)); err != nil {
		t.Errorf("store stopped serving after bad input: %v", err)
	}
}
