package fakestore_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/widetp/widetp/fakestore"
	"github.com/widetp/widetp/fakestore/api"
	"github.com/widetp/widetp/report"
)

// TestManyConcurrentClientsLoseNothing: workers register, heartbeat and report concurrently while
// long pollers follow the event log; afterwards the log holds every request exactly once, in
// contiguous sequence, every poller saw all of it in order, and every registration and report
// is there with the right counts. Run with -race.
func TestManyConcurrentClientsLoseNothing(t *testing.T) {
	s, c := start(t, fakestore.Config{})
	ctx := bounded(t, 60*time.Second)
	const workers, pollers = 24, 4
	const requestsPerWorker = 9 // 2 PUT, mount, ping, remount, ping, 2 reports, GET
	const total = workers * requestsPerWorker

	var pwg sync.WaitGroup
	seen := make([][]uint64, pollers)
	for i := range pollers {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			var since uint64
			for len(seen[i]) < total {
				r, err := c.Events(ctx, since, 5*time.Second)
				if err != nil {
					t.Errorf("poller %d: %v", i, err)
					return
				}
				for _, e := range r.Events {
					seen[i] = append(seen[i], e.Seq)
					since = e.Seq
				}
			}
		}()
	}

	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("10.0.%d.1:%d", w, 12300+w)
			id := fmt.Sprintf("client-%d", w)
			sg := seg("seg-"+id, name)
			steps := []func() error{
				func() error { _, err := c.Put(ctx, "mooncake/rpc_meta/"+name, []byte(`{"rpc_port":1}`)); return err },
				func() error { _, err := c.Put(ctx, "mooncake/ram/"+name, []byte(`{"name":"`+name+`"}`)); return err },
				func() error { return c.MountSegment(ctx, id, sg) },
				func() error { _, err := c.Ping(ctx, id); return err },
				func() error { return c.ReMountSegment(ctx, id, []api.Segment{sg}) },
				func() error {
					p, err := c.Ping(ctx, id)
					if err == nil && p.ClientStatus != api.ClientOK {
						err = fmt.Errorf("ping after remount: %s", p.ClientStatus)
					}
					return err
				},
				func() error { return c.PostReport(ctx, report.Process{ID: id, Segment: name}) },
				func() error { return c.PostReport(ctx, report.Process{ID: id, Segment: name, PID: 100 + w}) },
				func() error { _, err := c.Get(ctx, "mooncake/ram/"+name); return err },
			}
			for i, step := range steps {
				if err := step(); err != nil {
					t.Errorf("worker %d step %d: %v", w, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	pwg.Wait()
	if t.Failed() {
		return
	}

	evs, last := s.Events(0)
	if len(evs) != total || last != total {
		t.Fatalf("event log holds %d events (last seq %d), want %d", len(evs), last, total)
	}
	perPlane := map[api.Plane]int{}
	for i, e := range evs {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d: the log has a gap or reorder", i, e.Seq)
		}
		perPlane[e.Plane]++
	}
	if perPlane[api.PlaneMetadata] != 3*workers || perPlane[api.PlaneMaster] != 4*workers || perPlane[api.PlaneTest] != 2*workers {
		t.Errorf("events per plane = %v", perPlane)
	}
	for i, got := range seen {
		for j, seq := range got {
			if seq != uint64(j+1) {
				t.Fatalf("poller %d's event %d has seq %d: a poller missed or repeated events", i, j, seq)
			}
		}
	}
	regs, dups, err := c.Registrations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byKind := map[string]int{}
	for _, r := range regs {
		byKind[r.Kind]++
		if !r.Live || r.Writer != "127.0.0.1" || (r.Kind != "segment" && r.Writes != 1) || (r.Kind == "segment" && r.Writes != 1) {
			t.Errorf("registration %+v", r)
		}
	}
	if byKind["rpc_meta"] != workers || byKind["ram"] != workers || byKind["segment"] != workers || len(dups) != 0 {
		t.Errorf("registrations by kind %v, duplicates %d", byKind, len(dups))
	}
	reps, err := c.Reports(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hist, err := c.ReportHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != workers || len(hist) != 2*workers {
		t.Errorf("%d latest reports, %d posts; want %d and %d", len(reps), len(hist), workers, 2*workers)
	}
	for _, p := range reps {
		if p.PID < 100 {
			t.Errorf("report %s: latest is not the second post (pid %d)", p.ID, p.PID)
		}
	}
}
