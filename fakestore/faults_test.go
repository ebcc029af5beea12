package fakestore_test

import (
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/widetp/widetp/fakestore"
	"github.com/widetp/widetp/fakestore/api"
	"github.com/widetp/widetp/fakestore/client"
)

func eventsOf(t *testing.T, s *fakestore.Server, since uint64, keep func(api.Event) bool) []api.Event {
	t.Helper()
	all, _ := s.Events(since)
	var out []api.Event
	for _, e := range all {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

func noRetry(t *testing.T, s *fakestore.Server) *client.Client {
	t.Helper()
	c, err := client.New(client.WithMetadataURL(s.URL(api.PlaneMetadata)), client.WithMasterURL(s.URL(api.PlaneMaster)),
		client.WithAdminURL(s.URL(api.PlaneAdmin)), client.WithRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestLatencyFaultDelaysMatchingRequestsForItsCount(t *testing.T) {
	s, c := start(t, fakestore.Config{})
	ctx := bounded(t, 10*time.Second)
	f, err := c.AddFault(ctx, api.Fault{Kind: api.FaultLatency, Plane: api.PlaneMetadata, Method: "PUT", Key: "*/ram/*",
		Latency: api.Duration(80 * time.Millisecond), Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if _, err := c.Put(ctx, "mooncake/ram/h:1", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(begin); d < 80*time.Millisecond {
		t.Errorf("faulted PUT answered after %v, before the 80ms latency", d)
	}
	evs := eventsOf(t, s, 0, func(e api.Event) bool { return e.Plane == api.PlaneMetadata })
	if len(evs) != 1 || evs[0].Fault != f.ID || evs[0].Status != 200 {
		t.Errorf("events = %+v", evs)
	}
	if fs, _ := c.Faults(ctx); len(fs) != 0 {
		t.Errorf("a count-1 fault outlived its hit: %+v", fs)
	}
}

// TestDropFaultAndClientRetries: a dropped idempotent call is retried by the client and
// succeeds; a dropped non-idempotent one is not retried (the store saw it once).
func TestDropFaultAndClientRetries(t *testing.T) {
	s, c := start(t, fakestore.Config{})
	ctx := bounded(t, 10*time.Second)
	register(t, c, "w", seg("s1", "h:1"))
	if _, err := c.AddFault(ctx, api.Fault{Kind: api.FaultDrop, Plane: api.PlaneMetadata, Method: "GET", Count: 1}); err != nil {
		t.Fatal(err)
	}
	since := r0(s)
	if v, err := c.Get(ctx, "mooncake/ram/h:1"); err != nil || len(v) == 0 {
		t.Fatalf("GET after one drop: %q %v (want the retry to succeed)", v, err)
	}
	gets := eventsOf(t, s, since, func(e api.Event) bool { return e.Plane == api.PlaneMetadata })
	if len(gets) != 2 || gets[0].Status != 0 || gets[0].Detail != "dropped" || gets[1].Status != 200 {
		t.Errorf("GET events = %+v, want a dropped one then a 200", gets)
	}
	if _, err := c.AddFault(ctx, api.Fault{Kind: api.FaultDrop, Plane: api.PlaneMaster, Method: api.OpPutStart, Count: 1}); err != nil {
		t.Fatal(err)
	}
	since = r0(s)
	_, err := c.PutStart(ctx, api.PutStartRequest{ClientID: "w", Key: "k", SliceLength: 1, Config: api.ReplicateConfig{ReplicaNum: 1}})
	if err == nil {
		t.Fatal("a dropped PutStart succeeded")
	}
	if puts := eventsOf(t, s, since, func(e api.Event) bool { return e.Op == api.OpPutStart }); len(puts) != 1 {
		t.Errorf("PutStart reached the store %d times, want 1 (no retry of a non-idempotent call)", len(puts))
	}
}

func TestRefuseFaultResetsConnectionsFromThePeer(t *testing.T) {
	s, c := start(t, fakestore.Config{})
	ctx := bounded(t, 10*time.Second)
	if _, err := c.AddFault(ctx, api.Fault{Kind: api.FaultRefuse, Plane: api.PlaneMaster, Peer: "127.0.0.1", Count: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := noRetry(t, s).ServiceReady(ctx); err == nil {
		t.Fatal("refused connection answered")
	}
	// One refusal left: the default client's bounded retries get through.
	if ok, err := c.ServiceReady(ctx); err != nil || !ok {
		t.Fatalf("retrying client after the refusals: %v %v", ok, err)
	}
	refused := eventsOf(t, s, 0, func(e api.Event) bool { return e.Detail == "refused" })
	if len(refused) != 2 || refused[0].Plane != api.PlaneMaster || refused[0].Peer != "127.0.0.1" || refused[0].Status != 0 {
		t.Errorf("refusal events = %+v", refused)
	}
	// Another peer's scope does not touch us.
	if _, err := c.AddFault(ctx, api.Fault{Kind: api.FaultRefuse, Peer: "10.9.9.9"}); err != nil {
		t.Fatal(err)
	}
	if _, err := noRetry(t, s).ServiceReady(ctx); err != nil {
		t.Errorf("refusal scoped to another peer refused us: %v", err)
	}
}

func TestStatusFaultAnswersWithTheRealBody(t *testing.T) {
	s, c := start(t, fakestore.Config{})
	ctx := bounded(t, 10*time.Second)
	register(t, c, "w", seg("s1", "h:1"))
	if _, err := c.PutStart(ctx, api.PutStartRequest{ClientID: "w", Key: "obj", SliceLength: 8, Config: api.ReplicateConfig{ReplicaNum: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := c.PutEnd(ctx, "w", "obj"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []api.Fault{
		{Kind: api.FaultStatus, Plane: api.PlaneMetadata, Key: "*rpc_meta*", Status: 404, Count: 1},
		{Kind: api.FaultStatus, Plane: api.PlaneMetadata, Method: "PUT", Status: 500, Count: 1},
		{Kind: api.FaultStatus, Plane: api.PlaneMaster, Method: api.OpGetReplicaList, Code: api.ObjectNotFound, Count: 1},
		{Kind: api.FaultStatus, Plane: api.PlaneAdmin, Method: "GET", Key: "", Status: 503, Count: 1},
	} {
		if _, err := c.AddFault(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	runRows(t, s.URL(api.PlaneMetadata), []exchangeRow{
		{"forced 404 of a stored key", "GET", "/metadata?key=mooncake%2Frpc_meta%2Fh%3A1", "", 404, "metadata not found", noCT, ""},
		{"the fault is spent", "GET", "/metadata?key=mooncake%2Frpc_meta%2Fh%3A1", "", 200, `{"ip_or_host_name":"h","rpc_port":1}`, "application/json", ""},
		{"forced 500 in coro_http's words", "PUT", "/metadata?key=x", "v", 500, "500 Internal Server Error", noCT, ""},
	})
	if _, err := c.GetReplicaList(ctx, "obj"); !api.IsCode(err, api.ObjectNotFound) {
		t.Errorf("forced GetReplicaList: %v, want OBJECT_NOT_FOUND", err)
	}
	if _, err := c.GetReplicaList(ctx, "obj"); err != nil {
		t.Errorf("GetReplicaList after the fault: %v", err)
	}
	runRows(t, s.URL(api.PlaneAdmin), []exchangeRow{
		{"forced 503: service plane not active", "GET", "/get_all_keys", "", 503,
			`{"success":false,"error_code":-1011,"error_message":"service plane is not active"}`, "application/json; charset=utf-8", ""},
		{"the fault is spent", "GET", "/get_all_keys", "", 200, "obj\n", "text/plain; version=0.0.4", ""},
	})
}

// TestRestartFaultLosesAllStateAndClientsRemount: Mooncake #1336/#2246 — after a master restart
// every client sees NEED_REMOUNT and must register again.
func TestRestartFaultLosesAllStateAndClientsRemount(t *testing.T) {
	clock := fakestore.NewManualClock(epoch)
	s, c := start(t, fakestore.Config{Clock: clock})
	ctx := bounded(t, 10*time.Second)
	register(t, c, "w", seg("s1", "h:1"))
	pingStatus(t, c, "w")
	if err := c.ReMountSegment(ctx, "w", []api.Segment{seg("s1", "h:1")}); err != nil {
		t.Fatal(err)
	}
	before, _ := c.Ping(ctx, "w")
	if _, err := c.AddFault(ctx, api.Fault{Kind: api.FaultRestart}); err != nil {
		t.Fatal(err)
	}
	after, err := c.Ping(ctx, "w")
	if err != nil || after.ClientStatus != api.ClientNeedRemount || after.ViewVersion != before.ViewVersion+1 {
		t.Fatalf("ping after restart = %+v %v (before %+v)", after, err, before)
	}
	if _, err := c.Get(ctx, "mooncake/rpc_meta/h:1"); err == nil {
		t.Error("metadata survived the restart")
	}
	if segs, _ := c.AllSegments(ctx); len(segs) != 0 {
		t.Errorf("segments survived the restart: %v", segs)
	}
	regs, _, _ := c.Registrations(ctx)
	for _, r := range regs {
		if r.Live || r.History[len(r.History)-1].Op != "restart" {
			t.Errorf("registration %s/%s after restart: live=%v history=%+v", r.Kind, r.Name, r.Live, r.History)
		}
	}
	register(t, c, "w", seg("s1", "h:1")) // a fresh store takes the same names again

	// A restart with a duration is down that long (on the store's clock): connections refused.
	if _, err := c.AddFault(ctx, api.Fault{Kind: api.FaultRestart, Plane: api.PlaneMetadata, Duration: api.Duration(10 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := noRetry(t, s).Get(ctx, "mooncake/rpc_meta/h:1"); err == nil {
		t.Error("metadata plane answered while down")
	}
	clock.Advance(10 * time.Second)
	if _, err := noRetry(t, s).Get(ctx, "mooncake/rpc_meta/h:1"); !isNotFound(err) {
		t.Errorf("metadata plane after the downtime: %v, want a 404 (state was lost)", err)
	}
}

func TestLoseKeysFaultLosesOneWorker(t *testing.T) {
	s, c := start(t, fakestore.Config{})
	ctx := bounded(t, 10*time.Second)
	for _, w := range []struct{ id, name string }{{"w1", "h:1"}, {"w2", "h:2"}} {
		register(t, c, w.id, seg("s-"+w.name, w.name))
		pingStatus(t, c, w.id)
		if err := c.ReMountSegment(ctx, w.id, nil); err != nil {
			t.Fatal(err)
		}
	}
	since := r0(s)
	if _, err := c.AddFault(ctx, api.Fault{Kind: api.FaultLoseKeys, Segment: "h:1"}); err != nil {
		t.Fatal(err)
	}
	ev, err := c.WaitFor(ctx, since, func(e api.Event) bool { return e.Op == "lose-keys" })
	if err != nil || ev.Detail != "keys: mooncake/ram/h:1 mooncake/rpc_meta/h:1" {
		t.Fatalf("lose-keys event %+v %v", ev, err)
	}
	if _, err := c.Get(ctx, "mooncake/ram/h:1"); !isNotFound(err) {
		t.Errorf("lost worker's ram key: %v", err)
	}
	if _, err := c.Get(ctx, "mooncake/ram/h:2"); err != nil {
		t.Errorf("other worker's ram key: %v", err)
	}
	if got := pingStatus(t, c, "w1"); got != api.ClientNeedRemount {
		t.Errorf("lost worker's ping = %s, want NEED_REMOUNT", got)
	}
	if got := pingStatus(t, c, "w2"); got != api.ClientOK {
		t.Errorf("other worker's ping = %s, want OK", got)
	}
	if segs, _ := c.AllSegments(ctx); !slices.Equal(segs, []string{"h:2"}) {
		t.Errorf("segments = %v", segs)
	}
	// By peer: everything 127.0.0.1 wrote.
	if _, err := c.AddFault(ctx, api.Fault{Kind: api.FaultLoseKeys, Peer: "127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	if snap, _ := c.Snapshot(ctx); len(snap.Metadata) != 0 || len(snap.Segments) != 0 {
		t.Errorf("after losing the peer's keys: metadata %v segments %v", snap.Metadata, snap.Segments)
	}
}

func TestIgnorePingsFaultLetsOneClientExpire(t *testing.T) {
	clock := fakestore.NewManualClock(epoch)
	s, c := start(t, fakestore.Config{Clock: clock, ClientTTL: 10 * time.Second})
	ctx := bounded(t, 10*time.Second)
	register(t, c, "ignored", seg("s1", "h:1"))
	register(t, c, "heard", seg("s2", "h:2"))
	f, err := c.AddFault(ctx, api.Fault{Kind: api.FaultIgnorePings, Client: "ignored"})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		clock.Advance(4 * time.Second)
		pingStatus(t, c, "ignored")
		pingStatus(t, c, "heard")
	}
	s.Sweep()
	if segs, _ := c.AllSegments(ctx); !slices.Equal(segs, []string{"h:2"}) {
		t.Errorf("segments after 12s with ignored pings = %v, want h:2 only", segs)
	}
	pings := eventsOf(t, s, 0, func(e api.Event) bool { return e.Op == api.OpPing && e.Key == "ignored" })
	if len(pings) != 3 || pings[0].Fault != f.ID {
		t.Errorf("ignored pings = %+v", pings)
	}
}

func TestFaultDurationRunsOnTheStoreClock(t *testing.T) {
	clock := fakestore.NewManualClock(epoch)
	_, c := start(t, fakestore.Config{Clock: clock, Faults: []api.Fault{
		{Kind: api.FaultStatus, Plane: api.PlaneMetadata, Status: 503, Duration: api.Duration(5 * time.Second)},
	}})
	ctx := bounded(t, 10*time.Second)
	fs, err := c.Faults(ctx)
	if err != nil || len(fs) != 1 || !fs[0].Expires.Equal(epoch.Add(5*time.Second)) {
		t.Fatalf("faults from the config = %+v %v", fs, err)
	}
	for range 2 {
		if _, err := c.Get(ctx, "k"); err == nil || isNotFound(err) {
			t.Errorf("GET under a 503 fault: %v", err)
		}
	}
	clock.Advance(5 * time.Second)
	if _, err := c.Get(ctx, "k"); !isNotFound(err) {
		t.Errorf("GET after the fault's duration: %v, want not found", err)
	}
	if fs, _ := c.Faults(ctx); len(fs) != 0 {
		t.Errorf("expired fault still listed: %+v", fs)
	}
	f, err := c.AddFault(ctx, api.Fault{Kind: api.FaultDrop, Plane: api.PlaneAdmin})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveFault(ctx, f.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Health(ctx); err != nil {
		t.Errorf("health after removing the drop fault: %v", err)
	}
}

// TestFaultsNeverTouchTheTestEndpoints: a fault scoped to everything still leaves the test
// endpoints (which share the admin listener) answering, so a test can always remove it.
func TestFaultsNeverTouchTheTestEndpoints(t *testing.T) {
	s, c := start(t, fakestore.Config{})
	ctx := bounded(t, 10*time.Second)
	if _, err := c.AddFault(ctx, api.Fault{Kind: api.FaultDrop}); err != nil {
		t.Fatal(err)
	}
	if _, err := noRetry(t, s).Health(ctx); err == nil {
		t.Error("admin /health answered under a global drop")
	}
	if err := c.ClearFaults(ctx); err != nil {
		t.Fatalf("clear faults under a global drop: %v", err)
	}
	resp, err := http.Get(s.URL(api.PlaneAdmin) + "/health")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("health after clearing: %d", resp.StatusCode)
	}
}

// TestWipeFaultLosesMetadataOnly: Mooncake #2246 — a metadata server that lost its keys while the
// master kept its clients: the segments stay mounted, every Ping answers OK, and the rpc_meta/ram
// keys are gone, so no client publishes them again.
func TestWipeFaultLosesMetadataOnly(t *testing.T) {
	s, c := start(t, fakestore.Config{})
	ctx := bounded(t, 10*time.Second)
	register(t, c, "w", seg("s1", "h:1"))
	pingStatus(t, c, "w")
	if err := c.ReMountSegment(ctx, "w", nil); err != nil {
		t.Fatal(err)
	}
	since := r0(s)
	if _, err := c.AddFault(ctx, api.Fault{Kind: api.FaultWipe}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitFor(ctx, since, func(e api.Event) bool { return e.Op == "wipe" }); err != nil {
		t.Fatalf("wipe event: %v", err)
	}
	for _, k := range []string{"mooncake/rpc_meta/h:1", "mooncake/ram/h:1"} {
		if _, err := c.Get(ctx, k); !isNotFound(err) {
			t.Errorf("%s after the wipe: %v, want a 404", k, err)
		}
	}
	if segs, _ := c.AllSegments(ctx); !slices.Equal(segs, []string{"h:1"}) {
		t.Errorf("segments after the wipe = %v, want the master's h:1 kept", segs)
	}
	if got := pingStatus(t, c, "w"); got != api.ClientOK {
		t.Errorf("ping after the wipe = %s, want OK (the master lost nothing)", got)
	}
	regs, _, _ := c.Registrations(ctx)
	for _, r := range regs {
		wiped := r.History[len(r.History)-1].Op == "wipe"
		if r.Kind == "segment" && (!r.Live || wiped) || r.Kind != "segment" && (r.Live || !wiped) {
			t.Errorf("registration %s/%s after the wipe: live=%v history=%+v", r.Kind, r.Name, r.Live, r.History)
		}
	}
}
