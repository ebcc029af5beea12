package check

import (
	"fmt"

	"github.com/widetp/widetp/report"
)

// A replica is the set of processes that joined one rendezvous (README, "how the checks group records"): the records with the
// same report.Process.Replica — the world address and DP slot of the replica's workers — that
// belong to one engine. Two engines never share a slot in a working deployment, but when two
// claim one (vLLM#53743: an overwritten --data-parallel-rank) each engine and its descendants are
// a replica of their own, so that the two are reported as replicas with one global DP index
// rather than as one replica holding two engine_ids. Records without a replica (an API server,
// which owns engine cores of several replicas under internal LB) belong to none.
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

// replicas groups procs (in ID order) by Replica and owning engine, in replica-name order.
func replicas(procs []report.Process) []*replica {
	byID := make(map[string]*report.Process, len(procs))
	for i := range procs {
		byID[procs[i].ID] = &procs[i]
	}
	type key struct{ name, engine string }
	groups := map[key]*replica{}
	engines := map[string][]string{} // replica name -> owning engines, in first-seen order
	for i := range procs {
		p := &procs[i]
		if p.Replica == "" {
			continue
		}
		k := key{p.Replica, owningEngine(p, byID)}
		r := groups[k]
		if r == nil {
			r = &replica{name: p.Replica}
			groups[k] = r
			if k.engine != "" {
				engines[p.Replica] = append(engines[p.Replica], k.engine)
			}
		}
		r.members = append(r.members, p)
	}
	byName := map[string]*replica{}
	for k, r := range groups {
		switch claims := engines[k.name]; {
		case len(claims) <= 1:
			// One engine (or none reported): its records and its headless followers' are one
			// replica under the slot's name.
			if prev := byName[k.name]; prev != nil {
				prev.members = mergeByID(prev.members, r.members)
				continue
			}
		case k.engine != "":
			r.name = fmt.Sprintf("%s [%s]", k.name, k.engine)
		default:
			// Headless workers of a slot two engines claim: which engine they serve is unknowable.
			r.name = fmt.Sprintf("%s [no engine]", k.name)
		}
		byName[r.name] = r
	}
	out := make([]*replica, 0, len(byName))
	for _, name := range sortedKeys(byName) {
		r := byName[name]
		r.index, r.ref, r.from, r.ok = replicaIndex(r)
		out = append(out, r)
	}
	return out
}

// owningEngine is the ID of the engine (engine core or Ray actor) p is or descends from, following
// Parent links through the records; "" when there is none (a headless follower's workers). A
// Parent cycle in malformed records ends the walk.
func owningEngine(p *report.Process, byID map[string]*report.Process) string {
	for steps := 0; p != nil && steps <= len(byID); steps++ {
		if isEngine(p) {
			return p.ID
		}
		p = byID[p.Parent]
	}
	return ""
}

// mergeByID merges two member lists that are each in ID order.
func mergeByID(a, b []*report.Process) []*report.Process {
	out := make([]*report.Process, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if a[0].ID <= b[0].ID {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}

// deployments groups replicas into the deployments they form: replicas whose members met at a
// common barrier (a DP group, an engine handshake, a torch world spanning DP ranks) belong to one.
// A prefill and a decode instance of a P/D pair share no barrier, so each is its own deployment,
// with its own DP indices 0..D-1. A replica whose records name no barrier at all cannot be
// placed; it is compared with every deployment (the result's second value lists it), so that
// missing rendezvous records never hide a duplicate.
func deployments(rs []*replica) (groups [][]*replica, unplaced []*replica) {
	parent := make([]int, len(rs))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	// first maps each barrier (its report.BarrierKey) to the first replica seen at it.
	first := map[string]int{}
	placed := make([]bool, len(rs))
	for i, r := range rs {
		for _, p := range r.members {
			for _, rz := range p.Rendezvous {
				b := report.BarrierKey(p.Host, rz.Address)
				placed[i] = true
				if j, ok := first[b]; ok {
					parent[find(i)] = find(j)
				} else {
					first[b] = i
				}
			}
		}
	}
	byRoot := map[int][]*replica{}
	var roots []int
	for i, r := range rs {
		if !placed[i] {
			unplaced = append(unplaced, r)
			continue
		}
		root := find(i)
		if _, ok := byRoot[root]; !ok {
			roots = append(roots, root)
		}
		byRoot[root] = append(byRoot[root], r)
	}
	for _, root := range roots {
		groups = append(groups, byRoot[root])
	}
	return groups, unplaced
}

// isEngine reports whether p is the engine of its replica: an EngineCore process or, on the Ray
// backend, the DP engine actor.
func isEngine(p *report.Process) bool {
	return p.Role == report.RoleEngineCore || p.Role == report.RoleRayActor
}

// replicaIndex decides a replica's global DP index: the data_parallel_index of the replica's
// engine core (README, dp-index-mismatch). An engine core that crashed still counts: its
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

// Replica is one replica as the checks group the records, for tools that show them.
type Replica struct {
	// Name is the replica's slot (report.Process.Replica), with " [<engine ID>]" appended when two
	// engines claim the slot and each is a replica of its own.
	Name string
	// Engine is the ID of the replica's engine core or Ray actor record ("" when none reported).
	Engine string
	// Index is the replica's global DP index when IndexKnown (see the checks' README section).
	Index      int
	IndexKnown bool
	// Members are the IDs of the replica's records, in ID order.
	Members []string
}

// Replicas groups procs into replicas the way every check does, in name order.
func Replicas(procs []report.Process) []Replica {
	rs := replicas(sortedByID(procs))
	out := make([]Replica, len(rs))
	for i, r := range rs {
		out[i] = Replica{Name: r.name, Index: r.index, IndexKnown: r.ok, Members: ids(r.members)}
		for _, p := range r.members {
			if isEngine(p) {
				out[i].Engine = p.ID
				break
			}
		}
	}
	return out
}
