package check

import (
	"fmt"

	"github.com/widetp/widetp/report"
)

// A replica is the set of processes that joined one rendezvous (design.md): the records with the
// same report.Process.Replica. Records without a replica (an API server, which owns engine cores
// of several replicas under internal LB) belong to none.
type replica struct {
	name    string
	members []*report.Process // in ID order
	// index is the replica's global DP index and from says where it was read; ok is false when
	// the records cannot decide it (see replicaIndex).
	index int
	from  string
	ref   *report.Process
	ok    bool
}

// replicas groups procs (in ID order) by Replica, in replica-name order.
func replicas(procs []report.Process) []*replica {
	byName := map[string]*replica{}
	for i := range procs {
		p := &procs[i]
		if p.Replica == "" {
			continue
		}
		r := byName[p.Replica]
		if r == nil {
			r = &replica{name: p.Replica}
			byName[p.Replica] = r
		}
		r.members = append(r.members, p)
	}
	out := make([]*replica, 0, len(byName))
	for _, name := range sortedKeys(byName) {
		r := byName[name]
		r.index, r.ref, r.from, r.ok = replicaIndex(r)
		out = append(out, r)
	}
	return out
}

// isEngine reports whether p is the engine of its replica: an EngineCore process or, on the Ray
// backend, the DP engine actor.
func isEngine(p *report.Process) bool {
	return p.Role == report.RoleEngineCore || p.Role == report.RoleRayActor
}

// replicaIndex decides a replica's global DP index: the data_parallel_index of the replica's
// engine core (design.md, dp-index-mismatch). An engine core that crashed still counts: its
// identity was fixed by its config before anything could fail, and a crash is reported on its own.
// When no engine core reported (its node never came up, or a record was lost), the rank-0 worker
// stands in: vLLM's workers run with a copy of their engine core's vllm_config
// (vllm/v1/executor/multiproc_executor.py), so its data_parallel_index is the engine core's. Failing
// both, an index every member agrees on is still the replica's; otherwise it is undecided (ok false)
// and dpIndexMismatch falls back to comparing the members with each other.
func replicaIndex(r *replica) (index int, ref *report.Process, from string, ok bool) {
	for _, p := range r.members {
		if isEngine(p) {
			return p.DataParallelIndex, p, "engine core " + p.ID, true
		}
	}
	for _, p := range r.members {
		if p.Role == report.RoleWorker && p.Rank != nil && *p.Rank == 0 {
			return p.DataParallelIndex, p, fmt.Sprintf("engine core did not report; its rank-0 worker %s", p.ID), true
		}
	}
	if len(r.members) == 0 {
		return 0, nil, "", false
	}
	idx := r.members[0].DataParallelIndex
	for _, p := range r.members[1:] {
		if p.DataParallelIndex != idx {
			return 0, nil, "", false
		}
	}
	return idx, nil, "engine core and rank-0 worker did not report; every member", true
}
