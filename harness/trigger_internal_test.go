package harness

import (
	"context"
	"testing"
	"time"

	"github.com/widetp/widetp/fakestore"
	"github.com/widetp/widetp/fakestore/api"
	"github.com/widetp/widetp/fakestore/client"
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/scenarios"
	"github.com/widetp/widetp/simnode/mooncake"
)

// triggerStore is a real fake store on loopback with a clock the test moves, and a Cluster that
// reads it as a run's does.
func triggerStore(t *testing.T) (*fakestore.Server, *fakestore.ManualClock, *Cluster) {
	t.Helper()
	clock := fakestore.NewManualClock(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC))
	s, err := fakestore.New(fakestore.Config{MetadataAddr: "127.0.0.1:0", MasterAddr: "127.0.0.1:0",
		AdminAddr: "127.0.0.1:0", Clock: clock, SweepInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	cl, err := client.New(client.WithMetadataURL(s.URL(api.PlaneMetadata)), client.WithMasterURL(s.URL(api.PlaneMaster)),
		client.WithAdminURL(s.URL(api.PlaneAdmin)))
	if err != nil {
		t.Fatal(err)
	}
	return s, clock, &Cluster{client: cl, cfg: clusterConfig{settle: 10 * time.Second}}
}

// feed hands the store's events after seq to fn, in order, and returns the last seq and the seq of
// the event at which fn first said done (0: none).
func feed(t *testing.T, c *Cluster, since uint64, fn func(api.Event) (bool, error)) (last, doneAt uint64) {
	t.Helper()
	resp, err := c.client.Events(context.Background(), since, 0)
	if err != nil {
		t.Fatal(err)
	}
	last = since
	for _, e := range resp.Events {
		last = e.Seq
		done, err := fn(e)
		if err != nil {
			t.Fatal(err)
		}
		if done && doneAt == 0 {
			doneAt = e.Seq
		}
	}
	return last, doneAt
}

// An `expired` trigger holds once the store expired every client in scope that it stopped hearing,
// not at the first expiry: Mooncake's master expires each client on its own TTL, one monitor pass
// at a time (mooncake-store/src/master_service.cpp, ClientMonitorFunc), so the workers of a host
// cut off together, whose last pings were up to a heartbeat apart, expire over two passes. A heal
// between the passes left half of a host's workers registered in CI
// (fault-partition-store-expired: 4 of 8 workers lost their registration on Docker, 8 locally).
func TestExpiredTriggerWaitsForEveryClientTheStoreStoppedHearing(t *testing.T) {
	ctx := context.Background()
	s, clock, c := triggerStore(t)
	mount := func(id, seg string) {
		if err := c.client.MountSegment(ctx, id, api.Segment{ID: id + "-seg", Name: seg, Base: 1 << 40, Size: 1 << 20}); err != nil {
			t.Fatal(err)
		}
	}
	// Two follower workers heard last 600 ms apart, then cut off; a head worker pings on.
	mount("f0", "follower:12300")
	clock.Advance(600 * time.Millisecond)
	mount("f1", "follower:12301")
	mount("h0", "head:12300")
	from, err := c.lastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}

	anyExpiry := scenarios.Trigger{Kind: scenarios.AfterEvent, Event: scenarios.EventExpired}
	ofFollower := scenarios.Trigger{Kind: scenarios.AfterEvent, Event: scenarios.EventExpired, Host: "follower"}
	ofHead := scenarios.Trigger{Kind: scenarios.AfterEvent, Event: scenarios.EventExpired, Host: "head"}
	var wAny, wFollower, wHead expiryWait
	seq := map[*expiryWait]uint64{&wAny: from, &wFollower: from, &wHead: from}
	step := func() (fired []string) {
		for w, tr := range map[*expiryWait]scenarios.Trigger{&wAny: anyExpiry, &wFollower: ofFollower, &wHead: ofHead} {
			last, at := feed(t, c, seq[w], func(e api.Event) (bool, error) { return c.expiredAll(ctx, tr, e, w) })
			seq[w] = last
			if at != 0 {
				fired = append(fired, tr.String())
			}
		}
		return fired
	}
	// Monitor passes a heartbeat apart; the head worker pings before each.
	var firstExpiry, triggered int
	for pass := 1; pass <= 15 && triggered == 0; pass++ {
		clock.Advance(mooncake.HeartbeatInterval)
		if _, err := c.client.Ping(ctx, "h0"); err != nil {
			t.Fatal(err)
		}
		s.Sweep()
		snap, err := c.client.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		left := map[string]bool{}
		for _, cl := range snap.Clients {
			left[cl.ID] = true
		}
		if firstExpiry == 0 && !left["f0"] {
			firstExpiry = pass
			if !left["f1"] {
				t.Fatalf("pass %d expired both followers at once: the test needs them a pass apart", pass)
			}
		}
		fired := step()
		if len(fired) > 0 {
			if left["f0"] || left["f1"] {
				t.Fatalf("pass %d: %v held while a silent follower client was left (clients %v)", pass, fired, left)
			}
			if len(fired) != 2 {
				t.Fatalf("pass %d: fired %v, want the unscoped and the follower's trigger together", pass, fired)
			}
			triggered = pass
		}
		if !left["h0"] {
			t.Fatalf("pass %d expired the head worker, which pinged every heartbeat", pass)
		}
	}
	if firstExpiry == 0 || triggered != firstExpiry+1 {
		t.Fatalf("first expiry at pass %d, trigger at pass %d: want it one pass later, when the second follower expired", firstExpiry, triggered)
	}
	// The head's trigger never holds: no client of the head expired.
	for range 3 {
		clock.Advance(mooncake.HeartbeatInterval)
		if _, err := c.client.Ping(ctx, "h0"); err != nil {
			t.Fatal(err)
		}
		s.Sweep()
		if fired := step(); len(fired) > 0 && fired[0] == ofHead.String() {
			t.Fatalf("the head's expired trigger held though no head client expired")
		}
	}
}

// `registered`, `remounted` and `expired` of one process name the segment that process reported:
// the store's events carry segment names, not process IDs.
func TestStoreEventsScopeToAProcessBySegment(t *testing.T) {
	ctx := context.Background()
	_, _, c := triggerStore(t)
	for _, p := range []report.Process{
		{ID: "follower/0/headless-0/worker-0", Host: "follower", Segment: "follower:12300"},
		{ID: "follower/0/headless-0/worker-1", Host: "follower", Segment: "follower:12301"},
	} {
		if err := c.client.PostReport(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	tr := scenarios.Trigger{Kind: scenarios.AfterEvent, Event: scenarios.EventRegistered, Process: "follower/0/headless-0/worker-1"}
	for seg, want := range map[string]bool{"follower:12300": false, "follower:12301": true, "head:12301": false} {
		e := api.Event{Op: api.OpMountSegment, Code: api.OK, Key: seg}
		if got, err := c.matches(ctx, tr, e); err != nil || got != want {
			t.Errorf("registered of worker-1, a mount of %s: %v (%v), want %v", seg, got, err, want)
		}
	}
	tr.Event = scenarios.EventExpired
	for detail, want := range map[string]bool{"segments: follower:12300": false, "segments: follower:12300 follower:12301": true, "segments:": false} {
		if got, err := c.matches(ctx, tr, api.Event{Op: "expire", Key: "client", Detail: detail}); err != nil || got != want {
			t.Errorf("expired of worker-1, %q: %v (%v), want %v", detail, got, err, want)
		}
	}
}
