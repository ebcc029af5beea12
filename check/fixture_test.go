package check_test

import (
	"fmt"

	"github.com/widetp/widetp/report"
)

// wideTP hand-builds the records of a healthy wide-TP external-LB deployment as vLLM main derives it
// (vllm-identity.md §4 (e2)): d replicas, each spanning `nodes` nodes of perNode GPUs; node 0 of a
// replica runs `vllm serve` (API server, one engine core, its workers), the others `--headless`
// (the launcher and its workers, no engine core). Every process of replica N has
// data_parallel_index N and Mooncake DP index N; rank 0 binds the lookup server, the engine core
// looks up and is answered by it; one engine_id per replica; one segment per worker.
func wideTP(d, nodes, perNode int) []report.Process {
	var out []report.Process
	for n := 0; n < d; n++ {
		head := host(n, 0)
		rep := head + ":29500"
		path := fmt.Sprintf("ipc:///tmp/lookup_rpc_port_0_host_%s_dp_rank%d", head, n)
		eid := fmt.Sprintf("eid-%d_dp%d", n, n)
		api := report.Process{ID: head + "/0/api-server-0", Host: head, Role: report.RoleAPIServer,
			DataParallelSize: d, DataParallelRank: n, DataParallelRankLocal: report.Int(0), DataParallelIndex: n, LocalEnginesOnly: true}
		core := report.Process{ID: head + "/0/engine-core-0", Parent: api.ID, Host: head, Role: report.RoleEngineCore, Replica: rep,
			DataParallelSize: d, DataParallelRank: n, DataParallelRankLocal: report.Int(0), DataParallelIndex: n, LocalEnginesOnly: true,
			MooncakeDPIndex: report.Int(n), LookupPath: path, LookupRole: report.LookupClient, EngineID: eid,
			Lookup: &report.Lookup{Nonce: fmt.Sprintf("nonce-%d", n), ServedBy: head + "/0/engine-core-0/worker-0"}}
		out = append(out, api, core)
		for k := 0; k < nodes; k++ {
			h := host(n, k)
			parent := core.ID
			var local *int
			if k == 0 {
				local = report.Int(0)
			} else {
				launcher := report.Process{ID: h + "/0/headless-0", Host: h, Role: report.RoleHeadless, Replica: rep,
					DataParallelSize: d, DataParallelRank: n, DataParallelIndex: n, LocalEnginesOnly: true, NodeRankWithinDP: k}
				out = append(out, launcher)
				parent = launcher.ID
			}
			for i := 0; i < perNode; i++ {
				rank := k*perNode + i
				w := report.Process{ID: fmt.Sprintf("%s/worker-%d", parent, i), Parent: parent, Host: h, Role: report.RoleWorker, Replica: rep,
					DataParallelSize: d, DataParallelRank: n, DataParallelRankLocal: local, DataParallelIndex: n, LocalEnginesOnly: true,
					NodeRankWithinDP: k, MooncakeDPIndex: report.Int(n), Rank: report.Int(rank), TPRank: report.Int(rank), PPRank: report.Int(0),
					EngineID: eid, Segment: fmt.Sprintf("%s:%d", h, 12300+i)}
				if rank == 0 {
					w.LookupPath, w.LookupRole, w.BindSeq = path, report.LookupServer, 1
					w.Served = []string{core.Lookup.Nonce}
				}
				out = append(out, w)
			}
		}
	}
	return out
}

// coLocated hand-builds two external-LB replicas (TP perNode) started by two `vllm serve` lines on
// one host (vllm-identity.md §4 (c)), each with its own master port, under main: Mooncake DP
// index = data_parallel_index, so the lookup paths differ.
func coLocated(perNode int) []report.Process {
	var out []report.Process
	const h = "node0"
	for n := 0; n < 2; n++ {
		rep := fmt.Sprintf("%s:%d", h, 29500+n)
		path := fmt.Sprintf("ipc:///tmp/lookup_rpc_port_0_host_%s_dp_rank%d", h, n)
		core := report.Process{ID: fmt.Sprintf("%s/%d/engine-core-0", h, n), Host: h, Command: n, Role: report.RoleEngineCore, Replica: rep,
			DataParallelSize: 2, DataParallelRank: n, DataParallelRankLocal: report.Int(0), DataParallelIndex: n, LocalEnginesOnly: true,
			MooncakeDPIndex: report.Int(n), LookupPath: path, LookupRole: report.LookupClient, EngineID: fmt.Sprintf("eid-%d_dp%d", n, n),
			Lookup: &report.Lookup{Nonce: fmt.Sprintf("nonce-%d", n), ServedBy: fmt.Sprintf("%s/%d/engine-core-0/worker-0", h, n)}}
		out = append(out, core)
		for i := 0; i < perNode; i++ {
			w := report.Process{ID: fmt.Sprintf("%s/worker-%d", core.ID, i), Parent: core.ID, Host: h, Command: n, Role: report.RoleWorker, Replica: rep,
				DataParallelSize: 2, DataParallelRank: n, DataParallelRankLocal: report.Int(0), DataParallelIndex: n, LocalEnginesOnly: true,
				MooncakeDPIndex: report.Int(n), Rank: report.Int(i), TPRank: report.Int(i), PPRank: report.Int(0),
				EngineID: core.EngineID, Segment: fmt.Sprintf("%s:%d", h, 12300+n*perNode+i)}
			if i == 0 {
				w.LookupPath, w.LookupRole, w.BindSeq = path, report.LookupServer, n+1
				w.Served = []string{core.Lookup.Nonce}
			}
			out = append(out, w)
		}
	}
	return out
}

// host names node k of replica n.
func host(n, k int) string {
	if k == 0 {
		return fmt.Sprintf("r%d-head", n)
	}
	return fmt.Sprintf("r%d-follower%d", n, k)
}

// edit returns a copy of procs with fn applied to every process whose ID is listed (the copy is
// deep enough for fn to replace pointer fields). It panics on an unknown ID: a fixture typo must
// not turn a row into a test that cannot fail.
func edit(procs []report.Process, fn func(*report.Process), ids ...string) []report.Process {
	out := append([]report.Process(nil), procs...)
	for _, id := range ids {
		found := false
		for i := range out {
			if out[i].ID == id {
				fn(&out[i])
				found = true
			}
		}
		if !found {
			panic("fixture has no process " + id)
		}
	}
	return out
}

// where returns the IDs of the processes pred selects, in order.
func where(procs []report.Process, pred func(report.Process) bool) []string {
	var out []string
	for _, p := range procs {
		if pred(p) {
			out = append(out, p.ID)
		}
	}
	return out
}

// drop returns procs without the listed IDs (a record that never arrived).
func drop(procs []report.Process, ids ...string) []report.Process {
	gone := map[string]bool{}
	for _, id := range ids {
		gone[id] = true
	}
	var out []report.Process
	for _, p := range procs {
		if !gone[p.ID] {
			out = append(out, p)
		}
	}
	if len(out) != len(procs)-len(ids) {
		panic(fmt.Sprintf("drop: fixture lacks some of %v", ids))
	}
	return out
}

func crash(err string) func(*report.Process) {
	return func(p *report.Process) {
		p.Exit = &report.Exit{Code: 1, Error: err}
	}
}

func mooncake(idx int) func(*report.Process) {
	return func(p *report.Process) {
		p.MooncakeDPIndex = report.Int(idx)
	}
}

func chain(fns ...func(*report.Process)) func(*report.Process) {
	return func(p *report.Process) {
		for _, fn := range fns {
			fn(p)
		}
	}
}
