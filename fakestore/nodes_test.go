package fakestore_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/widetp/widetp/fakestore"
	"github.com/widetp/widetp/fakestore/api"
)

// A node's status posts may overtake each other on separate connections: the store keeps the one
// with the highest Seq per host, lists them by host, logs each post as an event keyed by host (a
// harness waits on those), and forgets them on reset.
func TestNodeStatusesKeepTheNewestPerHost(t *testing.T) {
	s, c := start(t, fakestore.Config{})
	ctx := bounded(t, 5*time.Second)
	posts := []api.NodeStatus{
		{Host: "r1-head", Seq: 1, Processes: 3},
		{Host: "r0-head", Seq: 2, Settled: true, Processes: 19, Ready: 18, Exited: 1},
		{Host: "r0-head", Seq: 1, Processes: 4, Pending: []string{"r0-head/0/api-server-0"}},
	}
	for _, p := range posts {
		if err := c.PostNodeStatus(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.NodeStatuses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Host != "r0-head" || !got[0].Settled || got[0].Seq != 2 || got[0].Ready != 18 ||
		got[1].Host != "r1-head" || got[1].Settled {
		t.Errorf("statuses = %+v", got)
	}
	if snap := s.Snapshot(); len(snap.Nodes) != 2 {
		t.Errorf("snapshot nodes = %+v", snap.Nodes)
	}
	evs, err := c.Events(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, e := range evs.Events {
		if e.Plane == api.PlaneTest && e.Op == "nodes" && e.Method == http.MethodPost {
			keys = append(keys, e.Key)
		}
	}
	if len(keys) != 3 || keys[0] != "r1-head" || keys[2] != "r0-head" {
		t.Errorf("node events keyed %v", keys)
	}
	// A restarted node program counts its posts from 1 again under a later Boot: its statuses
	// replace those of the run before, and a late post of the old run does not come back.
	for _, p := range []api.NodeStatus{
		{Host: "r0-head", Seq: 1, Boot: 2, Processes: 1},
		{Host: "r0-head", Seq: 3, Boot: 0, Settled: true},
	} {
		if err := c.PostNodeStatus(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := c.NodeStatuses(ctx); err != nil || got[0].Boot != 2 || got[0].Seq != 1 || got[0].Settled {
		t.Errorf("after a restart: %+v %v, want the new run's first status", got, err)
	}
	if err := c.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := c.NodeStatuses(ctx); err != nil || len(got) != 0 {
		t.Errorf("after reset: %+v %v", got, err)
	}
}

func TestNodeStatusBadInput(t *testing.T) {
	s, _ := start(t, fakestore.Config{})
	base := s.URL(api.PlaneAdmin)
	for _, tc := range []struct {
		name, method, body string
		status             int
		mention            string
	}{
		{"malformed", "POST", `{"host":`, 400, "decode node status"},
		{"no host", "POST", `{"settled":true}`, 400, "no host"},
		{"unknown field", "POST", `{"host":"h","nope":1}`, 400, `unknown field "nope"`},
		{"wrong method", "DELETE", "", 405, "allowed GET, POST"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := bounded(t, 5*time.Second)
			req, _ := http.NewRequestWithContext(ctx, tc.method, base+"/_widetp/nodes", bytes.NewBufferString(tc.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var eb api.ErrorBody
			if resp.StatusCode != tc.status || json.Unmarshal(b, &eb) != nil || !bytes.Contains([]byte(eb.Error), []byte(tc.mention)) {
				t.Errorf("%d %s, want %d mentioning %q", resp.StatusCode, b, tc.status, tc.mention)
			}
		})
	}
}
