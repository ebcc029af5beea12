package simnode

import (
	"slices"
	"testing"

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
		// moves no more by itself and never starts its workers.
		{name: "the engine core hung", settled: true,
			members: map[string]memberView{api: ready(), ec: {record: &report.Process{Hung: &report.Hang{Where: "get_open_port"}}, phase: PhaseStarted}}, counts: [3]int{2, 1, 0}},
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
