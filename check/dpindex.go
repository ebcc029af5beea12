package check

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/widetp/widetp/report"
)

// dpIndexMismatch reports every process whose Mooncake DP engine index differs from its replica's
// global DP index. The Mooncake store connector derives its lookup path from that index on both
// ends (mooncake_store_worker.py, get_zmq_rpc_path_lookup), so one replica's processes must agree;
// before vLLM#48061 the helper returned data_parallel_rank_local under external/hybrid LB, which
// is 0 on every head. Processes without an index (no connector, or crashed computing it), and
// those that died before they built their connector (ConnectorUsers), have nothing to compare;
// their crash is process-crashed's.
func dpIndexMismatch(procs []report.Process) []report.Violation {
	var out []report.Violation
	used := ConnectorUsers(procs)
	for _, r := range replicas(procs) {
		if !r.ok {
			out = append(out, disagreeing(r, used)...)
			continue
		}
		for _, p := range r.members {
			if p.MooncakeDPIndex == nil || *p.MooncakeDPIndex == r.index || !used[p.ID] {
				continue
			}
			involved := []string{p.ID}
			var msg string
			if p == r.ref {
				msg = fmt.Sprintf("%s: %s has Mooncake DP index %d, but its own data_parallel_index (replica %s's global DP index) is %d",
					report.DPIndexMismatch, p.ID, *p.MooncakeDPIndex, r.name, r.index)
			} else {
				msg = fmt.Sprintf("%s: %s has Mooncake DP index %d, replica %s's %s has data_parallel_index %d",
					report.DPIndexMismatch, p.ID, *p.MooncakeDPIndex, r.name, r.from, r.index)
				if r.ref != nil {
					involved = append(involved, r.ref.ID)
				}
			}
			out = append(out, report.Violation{Kind: report.DPIndexMismatch, Message: msg, Processes: uniqueSorted(involved)})
		}
	}
	return out
}

// disagreeing handles a replica whose global DP index the records cannot decide: its members must
// still agree with each other on the Mooncake DP index, or their lookups cannot meet.
func disagreeing(r *replica, used map[string]bool) []report.Violation {
	byIndex := map[int][]string{}
	for _, p := range r.members {
		if p.MooncakeDPIndex != nil && used[p.ID] {
			byIndex[*p.MooncakeDPIndex] = append(byIndex[*p.MooncakeDPIndex], p.ID)
		}
	}
	if len(byIndex) < 2 {
		return nil
	}
	values := make([]int, 0, len(byIndex))
	for v := range byIndex {
		values = append(values, v)
	}
	sort.Ints(values)
	parts := make([]string, len(values))
	var involved []string
	for i, v := range values {
		parts[i] = fmt.Sprintf("%d (%s)", v, idList(byIndex[v]))
		involved = append(involved, byIndex[v]...)
	}
	return []report.Violation{{
		Kind: report.DPIndexMismatch,
		Message: fmt.Sprintf("%s: replica %s has no engine core or rank-0 worker record and its members disagree on data_parallel_index; their Mooncake DP indices differ: %s",
			report.DPIndexMismatch, r.name, strings.Join(parts, "; ")),
		Processes: uniqueSorted(involved),
	}}
}

// dpIndexDuplicate reports global DP indices claimed by more than one replica of one deployment
// (vLLM#53743: the rank inferred from --node-rank overwrote an explicit --data-parallel-rank, so
// two engines took one rank silently). Replicas belong to one deployment when they met at a
// common barrier (deployments); the instances of a P/D pair each number their replicas from 0.
// A replica whose index the records cannot decide is left out: it has no index to duplicate.
func dpIndexDuplicate(procs []report.Process) []report.Violation {
	var decided []*replica
	for _, r := range replicas(procs) {
		if r.ok {
			decided = append(decided, r)
		}
	}
	groups, unplaced := deployments(decided)
	if len(groups) == 0 && len(unplaced) > 0 {
		groups = [][]*replica{nil}
	}
	type claim struct {
		index    int
		replicas []*replica
	}
	var claims []claim
	reported := map[string]bool{}
	for _, g := range groups {
		byIndex := map[int][]*replica{}
		for _, r := range append(append([]*replica{}, g...), unplaced...) {
			byIndex[r.index] = append(byIndex[r.index], r)
		}
		for idx, rs := range byIndex {
			if len(rs) < 2 {
				continue
			}
			sort.Slice(rs, func(i, j int) bool { return rs[i].name < rs[j].name })
			names := make([]string, len(rs))
			for i, r := range rs {
				names[i] = r.name
			}
			// Unplaced replicas join every group: report each set of claimants once.
			if k := strings.Join(names, "\x00"); !reported[k] {
				reported[k] = true
				claims = append(claims, claim{idx, rs})
			}
		}
	}
	var out []report.Violation
	for _, c := range claims {
		parts := make([]string, len(c.replicas))
		var involved []string
		for i, r := range c.replicas {
			if r.ref != nil {
				parts[i] = fmt.Sprintf("%s (%s)", r.name, r.ref.ID)
				involved = append(involved, r.ref.ID)
			} else {
				parts[i] = r.name
				involved = append(involved, ids(r.members)...)
			}
		}
		out = append(out, report.Violation{
			Kind: report.DPIndexDuplicate,
			Message: fmt.Sprintf("%s: %d replicas of one deployment have global DP index %s: %s",
				report.DPIndexDuplicate, len(c.replicas), strconv.Itoa(c.index), strings.Join(parts, ", ")),
			Processes: uniqueSorted(involved),
		})
	}
	return out
}
