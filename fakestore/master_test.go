package fakestore_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/widetp/widetp/fakestore"
	"github.com/widetp/widetp/fakestore/api"
	"github.com/widetp/widetp/fakestore/client"
)

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func seg(id, name string) api.Segment {
	return api.Segment{ID: id, Name: name, Base: 0x10000, Size: 1 << 20, TEEndpoint: name, Protocol: "tcp"}
}

// register does what a Mooncake client's setup() does: publish rpc_meta and ram, mount.
func register(t *testing.T, c *client.Client, clientID string, s api.Segment) {
	t.Helper()
	ctx := bounded(t, 5*time.Second)
	if _, err := c.Put(ctx, "mooncake/rpc_meta/"+s.Name, []byte(`{"ip_or_host_name":"h","rpc_port":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "mooncake/ram/"+s.Name, []byte(`{"name":"`+s.Name+`","protocol":"tcp"}`)); err != nil {
		t.Fatal(err)
	}
	if err := c.MountSegment(ctx, clientID, s); err != nil {
		t.Fatalf("mount %s: %v", s.Name, err)
	}
}

func pingStatus(t *testing.T, c *client.Client, clientID string) string {
	t.Helper()
	p, err := c.Ping(bounded(t, 5*time.Second), clientID)
	if err != nil {
		t.Fatalf("ping %s: %v", clientID, err)
	}
	return p.ClientStatus
}

// TestFirstPingAfterMountNeedsRemount encodes master_service.cpp: MountSegment does not put the
// client in ok_client_, ReMountSegment does, Ping answers from that set.
func TestFirstPingAfterMountNeedsRemount(t *testing.T) {
	_, c := start(t, fakestore.Config{})
	ctx := bounded(t, 5*time.Second)
	register(t, c, "c1", seg("s1", "10.0.0.1:12300"))
	if got := pingStatus(t, c, "c1"); got != api.ClientNeedRemount {
		t.Fatalf("first ping after mount = %s, want NEED_REMOUNT", got)
	}
	if err := c.ReMountSegment(ctx, "c1", []api.Segment{seg("s1", "10.0.0.1:12300")}); err != nil {
		t.Fatal(err)
	}
	if got := pingStatus(t, c, "c1"); got != api.ClientOK {
		t.Fatalf("ping after remount = %s, want OK", got)
	}
	m, err := c.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m["master_active_clients"] != 1 || m[`segment_total_capacity_bytes{segment="10.0.0.1:12300"}`] != 1<<20 {
		t.Errorf("metrics after remount: active=%v capacity=%v", m["master_active_clients"], m[`segment_total_capacity_bytes{segment="10.0.0.1:12300"}`])
	}
	segs, err := c.AllSegments(ctx)
	if err != nil || !slices.Equal(segs, []string{"10.0.0.1:12300"}) {
		t.Errorf("remount of a mounted segment id duplicated it: %v %v", segs, err)
	}
}

// TestClientTTLExpiry: ClientMonitorFunc expires a client silent for client_live_ttl_sec,
// unmounts its segments, and the metadata cleanup deletes the keys of those names — only those.
func TestClientTTLExpiry(t *testing.T) {
	clock := fakestore.NewManualClock(epoch)
	s, c := start(t, fakestore.Config{Clock: clock, ClientTTL: 10 * time.Second})
	ctx := bounded(t, 5*time.Second)
	register(t, c, "quiet", seg("s1", "10.0.0.1:12300"))
	register(t, c, "chatty", seg("s2", "10.0.0.2:12301"))
	for _, id := range []string{"quiet", "chatty"} {
		pingStatus(t, c, id)
		if err := c.ReMountSegment(ctx, id, nil); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(6 * time.Second)
	if got := pingStatus(t, c, "chatty"); got != api.ClientOK {
		t.Fatalf("chatty ping = %s", got)
	}
	s.Sweep()
	if got := pingStatus(t, c, "quiet"); got != api.ClientOK {
		t.Fatalf("quiet client expired after 6s of a 10s TTL: %s", got)
	}
	// quiet pinged at +6s; chatty at +6s too. Pass quiet's deadline only by pinging chatty.
	clock.Advance(6 * time.Second)
	pingStatus(t, c, "chatty")
	// The background sweeper may expire quiet as soon as the clock moves: look from before that.
	since := s.Snapshot().LastSeq
	clock.Advance(5 * time.Second)
	s.Sweep()

	ev, err := c.WaitFor(ctx, since, func(e api.Event) bool { return e.Plane == api.PlaneStore && e.Op == "expire" })
	if err != nil {
		t.Fatal(err)
	}
	if ev.Key != "quiet" {
		t.Fatalf("expired %q, want quiet", ev.Key)
	}
	for _, k := range []string{"mooncake/rpc_meta/10.0.0.1:12300", "mooncake/ram/10.0.0.1:12300"} {
		if _, err := c.Get(ctx, k); err == nil {
			t.Errorf("%s survived its client's expiry", k)
		}
	}
	for _, k := range []string{"mooncake/rpc_meta/10.0.0.2:12301", "mooncake/ram/10.0.0.2:12301"} {
		if _, err := c.Get(ctx, k); err != nil {
			t.Errorf("%s of a live client: %v", k, err)
		}
	}
	segs, _ := c.AllSegments(ctx)
	if !slices.Equal(segs, []string{"10.0.0.2:12301"}) {
		t.Errorf("segments after expiry = %v", segs)
	}
	if got := pingStatus(t, c, "quiet"); got != api.ClientNeedRemount {
		t.Errorf("expired client's ping = %s, want NEED_REMOUNT", got)
	}
	regs, _, err := c.Registrations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range regs {
		if r.Kind == "rpc_meta" && r.Name == "10.0.0.1:12300" {
			found = true
			last := r.History[len(r.History)-1]
			if r.Live || last.Op != "expire" || last.Result != "deleted" {
				t.Errorf("rpc_meta registration after expiry: live=%v last=%+v", r.Live, last)
			}
		}
	}
	if !found {
		t.Error("no rpc_meta registration for the expired segment")
	}
}

func TestDuplicateSegmentNames(t *testing.T) {
	for _, tc := range []struct {
		policy   fakestore.DuplicatePolicy
		wantErr  api.Code
		segments []string
		action   string
	}{
		// segment.cpp before name ownership: two segments under one name.
		{fakestore.AcceptDuplicates, api.OK, []string{"h:1", "h:1"}, "accepted"},
		// The newer mount path refuses a name another client owns with INVALID_PARAMS.
		{fakestore.RejectDuplicates, api.InvalidParams, []string{"h:1"}, "rejected"},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			_, c := start(t, fakestore.Config{DuplicateSegments: tc.policy})
			ctx := bounded(t, 5*time.Second)
			if err := c.MountSegment(ctx, "a", seg("s1", "h:1")); err != nil {
				t.Fatal(err)
			}
			// The owner may mount a second segment under its own name under either policy.
			if err := c.MountSegment(ctx, "a", seg("s3", "h:1")); err != nil {
				t.Fatalf("owner's second segment: %v", err)
			}
			err := c.MountSegment(ctx, "b", seg("s2", "h:1"))
			if tc.wantErr == api.OK && err != nil || tc.wantErr != api.OK && !api.IsCode(err, tc.wantErr) {
				t.Fatalf("second client mounting h:1: %v, want %v", err, tc.wantErr)
			}
			segs, _ := c.AllSegments(ctx)
			want := append(tc.segments, "h:1")
			if !slices.Equal(segs, want) {
				t.Errorf("segments = %v, want %v", segs, want)
			}
			_, dups, err := c.Registrations(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(dups) != 1 || dups[0].Action != tc.action || dups[0].Holder != "a" || dups[0].Client != "b" || dups[0].Peer != "127.0.0.1" {
				t.Errorf("duplicates = %+v, want one %s by b against a", dups, tc.action)
			}
		})
	}
}

// TestObjectLifecycleErrorCodes walks master_service.cpp's PutStart/PutEnd/PutRevoke/
// GetReplicaList/Remove/RemoveAll error paths.
func TestObjectLifecycleErrorCodes(t *testing.T) {
	clock := fakestore.NewManualClock(epoch)
	_, c := start(t, fakestore.Config{Clock: clock, LeaseTTL: 5 * time.Second})
	ctx := bounded(t, 10*time.Second)
	put := func(key string) api.PutStartRequest {
		return api.PutStartRequest{ClientID: "w", Key: key, SliceLength: 4096, Config: api.ReplicateConfig{ReplicaNum: 1}}
	}
	expect := func(what string, err error, code api.Code) {
		t.Helper()
		if code == api.OK && err != nil || code != api.OK && !api.IsCode(err, code) {
			t.Errorf("%s: %v, want %s", what, err, code)
		}
	}
	_, err := c.PutStart(ctx, put("k"))
	expect("PutStart with no segment mounted", err, api.NoAvailableHandle)
	if err := c.MountSegment(ctx, "w", seg("s1", "h:1")); err != nil {
		t.Fatal(err)
	}
	_, err = c.PutStart(ctx, api.PutStartRequest{ClientID: "w", Key: "", SliceLength: 1, Config: api.ReplicateConfig{ReplicaNum: 1}})
	expect("PutStart of an empty key", err, api.InvalidParams)
	_, err = c.PutStart(ctx, api.PutStartRequest{ClientID: "w", Key: "z", SliceLength: 2 << 20, Config: api.ReplicateConfig{ReplicaNum: 1}})
	expect("PutStart larger than every segment", err, api.NoAvailableHandle)
	reps, err := c.PutStart(ctx, put("k"))
	expect("PutStart", err, api.OK)
	if len(reps) != 1 || reps[0].SegmentName != "h:1" || reps[0].Status != api.ReplicaProcessing || reps[0].BufferAddress != 0x10000 {
		t.Errorf("replicas = %+v", reps)
	}
	_, err = c.PutStart(ctx, put("k"))
	expect("PutStart of a key being put", err, api.ObjectAlreadyExists)
	_, err = c.GetReplicaList(ctx, "k")
	expect("GetReplicaList before PutEnd", err, api.ReplicaIsNotReady)
	expect("Remove before PutEnd", c.Remove(ctx, "k", false), api.ReplicaIsNotReady)
	expect("PutEnd by another client", c.PutEnd(ctx, "intruder", "k"), api.IllegalClient)
	expect("PutEnd of a missing key", c.PutEnd(ctx, "w", "nope"), api.ObjectNotFound)
	expect("PutEnd", c.PutEnd(ctx, "w", "k"), api.OK)
	expect("PutRevoke of a completed put", c.PutRevoke(ctx, "w", "k"), api.InvalidWrite)
	expect("PutRevoke of a missing key", c.PutRevoke(ctx, "w", "nope"), api.ObjectNotFound)

	rl, err := c.GetReplicaList(ctx, "k")
	expect("GetReplicaList", err, api.OK)
	if rl.LeaseTTLMillis != 5000 || len(rl.Replicas) != 1 || rl.Replicas[0].Status != api.ReplicaComplete {
		t.Errorf("GetReplicaList = %+v", rl)
	}
	expect("Remove under the read lease", c.Remove(ctx, "k", false), api.ObjectHasLease)
	if n, err := c.RemoveAll(ctx, false); err != nil || n != 0 {
		t.Errorf("RemoveAll under the lease removed %d (%v)", n, err)
	}
	clock.Advance(5 * time.Second)
	expect("Remove once the lease ran out", c.Remove(ctx, "k", false), api.OK)
	expect("Remove of a removed key", c.Remove(ctx, "k", false), api.ObjectNotFound)

	// BatchExistKey grants the lease too (ExistKey: "it may be further used by the client").
	for _, k := range []string{"a", "b"} {
		if _, err := c.PutStart(ctx, put(k)); err != nil {
			t.Fatal(err)
		}
		if err := c.PutEnd(ctx, "w", k); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.PutStart(ctx, put("pending")); err != nil {
		t.Fatal(err)
	}
	exists, err := c.BatchExistKey(ctx, []string{"a", "pending", "missing"})
	if err != nil || !slices.Equal(exists, []bool{true, false, false}) {
		t.Fatalf("BatchExistKey = %v %v", exists, err)
	}
	expect("Remove after ExistKey's lease", c.Remove(ctx, "a", false), api.ObjectHasLease)
	expect("forced Remove ignores the lease", c.Remove(ctx, "a", true), api.OK)
	if n, err := c.RemoveAll(ctx, false); err != nil || n != 1 {
		t.Errorf("RemoveAll = %d %v, want 1 (b; pending is incomplete)", n, err)
	}
	keys, _ := c.AllKeys(ctx)
	if !slices.Equal(keys, []string{"pending"}) {
		t.Errorf("keys left = %v", keys)
	}
	expect("PutRevoke of a pending put", c.PutRevoke(ctx, "w", "pending"), api.OK)

	// Unmounting a segment drops the replicas on it.
	if _, err := c.PutStart(ctx, put("on-s1")); err != nil {
		t.Fatal(err)
	}
	expect("PutEnd", c.PutEnd(ctx, "w", "on-s1"), api.OK)
	expect("UnmountSegment", c.UnmountSegment(ctx, "w", "s1"), api.OK)
	expect("UnmountSegment again is idempotent", c.UnmountSegment(ctx, "w", "s1"), api.OK)
	_, err = c.GetReplicaList(ctx, "on-s1")
	expect("GetReplicaList after its segment went", err, api.ObjectNotFound)
}

// TestMasterPlaneBadInput: requests that cannot run get a 4xx with INVALID_PARAMS and a message
// naming the problem; the plane keeps serving.
func TestMasterPlaneBadInput(t *testing.T) {
	s, c := start(t, fakestore.Config{MaxBody: 256})
	base := s.URL(api.PlaneMaster)
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		message                  string
	}{
		{"malformed JSON", "POST", "/master/Ping", `{"client_id":`, 400, "decode Ping request"},
		{"unknown field", "POST", "/master/Ping", `{"clientid":"x"}`, 400, `unknown field "clientid"`},
		{"trailing data", "POST", "/master/Ping", `{"client_id":"x"}{}`, 400, "trailing data"},
		{"wrong type", "POST", "/master/PutStart", `{"key":7}`, 400, "decode PutStart request"},
		{"unknown op", "POST", "/master/Explode", `{}`, 404, `unknown master operation "Explode"`},
		{"not under /master/", "POST", "/Ping", `{}`, 404, "unknown path"},
		{"GET", "GET", "/master/Ping", ``, 405, "take POST"},
		{"oversized", "POST", "/master/Ping", `{"client_id":"` + string(bytes.Repeat([]byte("x"), 300)) + `"}`, 413, "over 256 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := bounded(t, 5*time.Second)
			req, _ := http.NewRequestWithContext(ctx, tc.method, base+tc.path, bytes.NewBufferString(tc.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var res api.Result
			if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
				t.Fatalf("answer is not JSON: %v", err)
			}
			if resp.StatusCode != tc.status || res.ErrorCode != api.InvalidParams || !bytes.Contains([]byte(res.Message), []byte(tc.message)) {
				t.Errorf("%d %+v, want %d INVALID_PARAMS mentioning %q", resp.StatusCode, res, tc.status, tc.message)
			}
		})
	}
	if ok, err := c.ServiceReady(bounded(t, 5*time.Second)); err != nil || !ok {
		t.Errorf("plane stopped serving after bad input: %v %v", ok, err)
	}
	if err := c.MountSegment(bounded(t, 5*time.Second), "c", api.Segment{ID: "s", Name: "n", Base: 0, Size: 1}); !api.IsCode(err, api.InvalidParams) {
		t.Errorf("mount at base 0: %v, want INVALID_PARAMS", err)
	}
	if _, err := c.Ping(bounded(t, 5*time.Second), ""); !api.IsCode(err, api.InvalidParams) {
		t.Errorf("ping without client id: %v, want INVALID_PARAMS", err)
	}
}
