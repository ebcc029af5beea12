package check

import "github.com/widetp/widetp/report"

// ConnectorUsers decides, for every record, whether its process may have built its KV connector —
// the only point at which its engine_id and Mooncake DP index are used (a lookup path, a transfer,
// the engine_id broadcast of PRs #39907/#44528). A process that died before that point never used
// them, so the identity checks must not hold them against it: its failure is process-crashed's or
// rendezvous-failed's, and reporting an engine_id or DP index mismatch for it sends a reader after
// the wrong bug.
//
// The records say so by what they carry, in vLLM's start-up order:
//   - a worker builds its connector after its torch world (vllm/v1/worker/gpu_worker.py:
//     init_worker_distributed_environment, then ensure_kv_transfer_initialized in
//     vllm/distributed/kv_transfer/kv_transfer_state.py): one that failed a barrier, or exited
//     without completing one, never did;
//   - an engine core (or Ray actor) builds its scheduler's side last, after its handshakes, its DP
//     group and its executor's workers (vllm/v1/engine/core.py EngineCoreProc.__init__): one that
//     crashed, failed a barrier, or whose workers did not all get there, never did — unless it
//     looked up, which only a built scheduler does;
//   - a process whose parent ended, with no exit of its own, never started (the model's paper run
//     keeps such records: report.Process, Predict);
//   - launchers (API servers, headless launchers, DP supervisors) build none.
//
// Records that say nothing against it (no rendezvous recorded, say) count as built, so that a
// missing detail never hides a mismatch the remaining records show.
//
// It is exported for the matchers of harness/matchers, so that a matcher and the check of one
// invariant judge the same processes.
func ConnectorUsers(procs []report.Process) map[string]bool {
	byID := make(map[string]*report.Process, len(procs))
	workersOf := map[string][]*report.Process{}
	for i := range procs {
		p := &procs[i]
		byID[p.ID] = p
		if p.Role == report.RoleWorker && p.Parent != "" {
			workersOf[p.Parent] = append(workersOf[p.Parent], p)
		}
	}
	out := make(map[string]bool, len(procs))
	worker := func(p *report.Process) bool {
		return !failedBarrier(p) && !neverStarted(p, byID) && (p.Exit == nil || completedBarrier(p))
	}
	for i := range procs {
		p := &procs[i]
		switch {
		case p.Role == report.RoleWorker:
			out[p.ID] = worker(p)
		case isEngine(p):
			if p.Lookup != nil {
				out[p.ID] = true
				continue
			}
			built := !p.Crashed() && !failedBarrier(p) && !neverStarted(p, byID)
			for _, w := range workersOf[p.ID] {
				built = built && worker(w)
			}
			out[p.ID] = built
		}
	}
	return out
}

// failedBarrier: the process recorded a rendezvous that did not complete (it ended there).
func failedBarrier(p *report.Process) bool {
	for _, r := range p.Rendezvous {
		if r.Error != "" {
			return true
		}
	}
	return false
}

// completedBarrier: the process recorded a rendezvous that completed.
func completedBarrier(p *report.Process) bool {
	for _, r := range p.Rendezvous {
		if r.Error == "" {
			return true
		}
	}
	return false
}

// neverStarted: the process has no exit of its own while its parent ended in a way nobody asked
// for; a live process's children are stopped with it, so the child never ran.
func neverStarted(p *report.Process, byID map[string]*report.Process) bool {
	if p.Exit != nil {
		return false
	}
	par := byID[p.Parent]
	return par != nil && par.Exit != nil && !par.Exit.Expected
}
