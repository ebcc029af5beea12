package simnode

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/widetp/widetp/fakestore/api"
	"github.com/widetp/widetp/fakestore/client"
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/vllm"
)

// statusPlan is one `vllm serve` of an API server, its engine core and two workers
// (vllm/v1/engine/core_client.py starts the engine core; vllm/v1/executor/multiproc_executor.py
// the workers). The engine core raises when a worker fails (vLLM's "Engine core initialization
// failed"), the API server when its engine core does (wait_for_engine_startup).
func statusPlan() *vllm.NodePlan {
	w := func(n string) *vllm.ProcessPlan {
		return &vllm.ProcessPlan{Identity: report.Process{ID: "h/0/engine-core-0/worker-" + n}}
	}
	ec := &vllm.ProcessPlan{Identity: report.Process{ID: "h/0/engine-core-0"}, ChildFailure: "RuntimeError: Engine core initialization failed",
		Children: []*vllm.ProcessPlan{w("0"), w("1")}}
	api := &vllm.ProcessPlan{Identity: report.Process{ID: "h/0/api-server-0"}, ChildFailure: "RuntimeError: Engine core initialization failed",
		Children: []*vllm.ProcessPlan{ec}}
	return &vllm.NodePlan{Host: "h", Commands: []*vllm.ProcessPlan{api}}
}

func ready() memberView { return memberView{record: &report.Process{Ready: true}, phase: PhaseReady} }
func starting(ph Phase) memberView {
	return memberView{record: &report.Process{}, phase: ph}
}
func exitedWith(code int) memberView {
	return memberView{record: &report.Process{Exit: &report.Exit{Code: code}}, phase: PhaseExited}
}

func TestNodeStatusSettlesOnlyWhenNothingMoreHappensByItself(t *testing.T) {
	const (
		api = "h/0/api-server-0"
		ec  = "h/0/engine-core-0"
		w0  = "h/0/engine-core-0/worker-0"
		w1  = "h/0/engine-core-0/worker-1"
	)
	rows := []struct {
		name        string
		members     map[string]memberView
		failedStart bool
		settled     bool
		pending     []string
		counts      [3]int // processes, ready, exited
	}{
		{name: "nothing reported yet", members: map[string]memberView{}, pending: []string{api, ec, w0, w1}},
		{name: "workers started but silent behind a ready engine core",
			members: map[string]memberView{api: ready(), ec: ready()}, pending: []string{w0, w1}, counts: [3]int{2, 2, 0}},
		{name: "a worker still in its rendezvous",
			members: map[string]memberView{api: ready(), ec: ready(), w0: ready(), w1: starting(PhaseStarted)}, pending: []string{w1}, counts: [3]int{4, 3, 0}},
		{name: "everything up", settled: true,
			members: map[string]memberView{api: ready(), ec: ready(), w0: ready(), w1: ready()}, counts: [3]int{4, 4, 0}},
		// The engine core reacts to its worker's failure (ChildFailure): until it has exited,
		// the node is not settled, even though every process is ready or gone.
		{name: "a worker crashed, its engine core has not reacted yet",
			members: map[string]memberView{api: ready(), ec: ready(), w0: ready(), w1: exitedWith(1)}, pending: []string{ec}, counts: [3]int{4, 3, 1}},
		{name: "a worker exited cleanly: nobody reacts", settled: true,
			members: map[string]memberView{api: ready(), ec: ready(), w0: ready(), w1: exitedWith(0)}, counts: [3]int{4, 3, 1}},
		{name: "the cascade reached the API server", settled: true,
			members: map[string]memberView{api: exitedWith(1), ec: exitedWith(1), w0: exitedWith(0), w1: exitedWith(1)}, counts: [3]int{4, 0, 4}},
		// A process that died before starting its children: they never will.
		{name: "the API server crashed at config", settled: true,
			members: map[string]memberView{api: exitedWith(1)}, counts: [3]int{1, 0, 1}},
		{name: "the command could not start", failedStart: true, settled: true, members: map[string]memberView{}},
		// A hung engine core (a port allocator that never returns, vllm/utils/network_utils.py)
		// moves no more by itself and never starts its workers; its API server, which waits for
		// its READY (wait_for_engine_startup, vllm/v1/engine/utils.py), says it waits for ever.
		{name: "the engine core hung", settled: true,
			members: map[string]memberView{api: starting(PhaseWaiting), ec: {record: &report.Process{Hung: &report.Hang{Where: "get_open_port"}}, phase: PhaseStarted}}, counts: [3]int{2, 0, 0}},
		{name: "the engine core hung, its API server has not seen it yet",
			members: map[string]memberView{api: starting(PhaseRendezvous), ec: {record: &report.Process{Hung: &report.Hang{Where: "get_open_port"}}, phase: PhaseStarted}}, pending: []string{api}, counts: [3]int{2, 0, 0}},
		// An exit its parent posted for a child that died silently: the phase alone says so.
		{name: "an exit known only by its phase", settled: false,
			members: map[string]memberView{api: ready(), ec: ready(), w0: ready(), w1: {phase: PhaseExited}}, pending: []string{ec}, counts: [3]int{4, 3, 1}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			failed := map[string]bool{}
			if r.failedStart {
				failed[api] = true
			}
			st := nodeStatus("h", statusPlan(), r.members, failed)
			if st.Settled != r.settled || !slices.Equal(st.Pending, r.pending) || [3]int{st.Processes, st.Ready, st.Exited} != r.counts {
				t.Errorf("status %+v, want settled %v pending %v counts %v", st, r.settled, r.pending, r.counts)
			}
			if st.Host != "h" {
				t.Errorf("host %q", st.Host)
			}
		})
	}
}

// nodeStatusSink is an admin plane that records every node status posted to it, in order.
func nodeStatusSink(t *testing.T) (*client.Client, <-chan api.NodeStatus) {
	t.Helper()
	posted := make(chan api.NodeStatus, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var st api.NodeStatus
		if r.Method != http.MethodPost || r.URL.Path != api.TestPrefix+"nodes" || json.NewDecoder(r.Body).Decode(&st) != nil {
			http.Error(w, "not a node status", http.StatusBadRequest)
			return
		}
		posted <- st
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(client.WithAdminURL(srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	return c, posted
}

// A node posts an unsettled status at once, holds the changes that follow for the gap (each
// replacing the one before), and posts a settled status at once, in place of the held ones; a
// poster that closes posts what it held. The gap here outlasts the test: whatever it posted, it
// posted without waiting one out.
func TestNodeStatusPostsHoldUnsettledChangesButNeverASettledOne(t *testing.T) {
	store, posted := nodeStatusSink(t)
	st := func(settled bool, pending ...string) api.NodeStatus {
		return api.NodeStatus{Host: "h", Settled: settled, Pending: pending, Processes: len(pending)}
	}
	next := func(what string) api.NodeStatus {
		t.Helper()
		select {
		case s := <-posted:
			return s
		case <-time.After(10 * time.Second):
			t.Fatalf("no post of %s", what)
		}
		return api.NodeStatus{}
	}
	p := newStatusPoster(store, 5*time.Second, time.Hour, slog.New(slog.NewTextHandler(io.Discard, nil)))
	p.update(st(false, "a"))
	if s := next("the first status"); s.Settled || !slices.Equal(s.Pending, []string{"a"}) || s.Seq != 1 {
		t.Fatalf("first post %+v, want unsettled, pending a, seq 1", s)
	}
	p.update(st(false, "b"))
	p.update(st(false, "c"))
	p.update(st(true))
	if s := next("the settled status"); !s.Settled || s.Seq != 4 {
		t.Fatalf("second post %+v, want the settled status (seq 4), not a held unsettled one", s)
	}
	// A settled status opens no gap: the next unsettled one goes at once too.
	p.update(st(false, "d"))
	if s := next("the unsettled status after the settled one"); s.Settled || s.Seq != 5 {
		t.Fatalf("third post %+v, want unsettled, seq 5", s)
	}
	p.update(st(false, "e"))
	p.update(st(false, "f"))
	p.close()
	if s := next("the held status at close"); s.Settled || !slices.Equal(s.Pending, []string{"f"}) || s.Seq != 7 {
		t.Fatalf("post at close %+v, want the last one handed in (pending f, seq 7)", s)
	}
	select {
	case s := <-posted:
		t.Fatalf("a post after close: %+v", s)
	default:
	}
}
