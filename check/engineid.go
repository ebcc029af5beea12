package check

import (
	"fmt"
	"strings"

	"github.com/widetp/widetp/report"
)

// engineIDCollision reports a KV engine_id shared by the engines of different replicas. Before
// vLLM#46628 run_engine_core suffixed engine_id with _dp{local_dp_rank} (vllm/v1/engine/core.py),
// so every DP=1 child of a supervisor was _dp0 and decode pulled KV from the wrong prefill rank.
// An engine without a replica is a replica of its own; an engine that never built its connector
// (ConnectorUsers) never used its engine_id.
func engineIDCollision(procs []report.Process) []report.Violation {
	used := ConnectorUsers(procs)
	holders := map[string][]*report.Process{}
	for i := range procs {
		p := &procs[i]
		if isEngine(p) && p.EngineID != "" && used[p.ID] {
			holders[p.EngineID] = append(holders[p.EngineID], p)
		}
	}
	var out []report.Violation
	for _, id := range sortedKeys(holders) {
		ps := holders[id]
		reps := map[string]bool{}
		for _, p := range ps {
			if p.Replica == "" {
				reps["\x00"+p.ID] = true
			} else {
				reps[p.Replica] = true
			}
		}
		if len(reps) < 2 {
			continue
		}
		parts := make([]string, len(ps))
		for i, p := range ps {
			parts[i] = fmt.Sprintf("%s (replica %s)", p.ID, replicaName(p.Replica))
		}
		out = append(out, report.Violation{
			Kind: report.EngineIDCollision,
			Message: fmt.Sprintf("%s: engine_id %q is held by the engines of %d replicas: %s",
				report.EngineIDCollision, id, len(reps), strings.Join(parts, ", ")),
			Processes: ids(ps),
		})
	}
	return out
}

// engineIDMismatch reports replicas whose processes hold different KV engine_ids (vLLM#39907: each
// node's independent CLI parse drew its own uuid4, so headless followers' workers disagreed with
// rank 0 until vLLM broadcast it from TP rank 0). Only the processes that run the KV connector
// are compared — the engine (its scheduler side) and the workers: a headless launcher or an API
// server parses a config with an engine_id too, but never builds a connector, so its value is
// never used for a transfer (the model leaves it out of their records, report.Process.EngineID;
// the filter keeps a record that carries one anyway from deciding). A process that died before it
// built its connector (ConnectorUsers: in the torch rendezvous, say) never took part in the
// engine_id broadcast, so its own draw is no mismatch.
func engineIDMismatch(procs []report.Process) []report.Violation {
	var out []report.Violation
	used := ConnectorUsers(procs)
	for _, r := range replicas(procs) {
		byID := map[string][]string{}
		for _, p := range r.members {
			if p.EngineID != "" && runsConnector(p) && used[p.ID] {
				byID[p.EngineID] = append(byID[p.EngineID], p.ID)
			}
		}
		if len(byID) < 2 {
			continue
		}
		keys := sortedKeys(byID)
		parts := make([]string, len(keys))
		var involved []string
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%q (%s)", k, idList(byID[k]))
			involved = append(involved, byID[k]...)
		}
		out = append(out, report.Violation{
			Kind: report.EngineIDMismatch,
			Message: fmt.Sprintf("%s: replica %s holds %d engine_ids: %s",
				report.EngineIDMismatch, r.name, len(keys), strings.Join(parts, "; ")),
			Processes: uniqueSorted(involved),
		})
	}
	return out
}

// runsConnector reports whether p builds a KV connector: an engine (scheduler side) or a worker.
func runsConnector(p *report.Process) bool {
	return isEngine(p) || p.Role == report.RoleWorker
}
