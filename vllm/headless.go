package vllm

import "github.com/widetp/widetp/report"

// headless is run_headless (vllm/entrypoints/cli/serve.py): a replica's follower node
// (node_rank_within_dp > 0) starts its workers directly through MultiprocExecutor; otherwise the
// node's L engine cores start and handshake with the head's front end.
func (cp *cmdPlanner) headless() *ProcessPlan {
	id := cp.id(report.RoleHeadless, 0)
	pc, err := createEngineConfig(cp.engineInput(cp.args, true))
	if err != nil {
		return cp.crashed(id, "", report.RoleHeadless, nil, StageConfig, err)
	}
	p := cp.newPlan(cp.identity(id, "", report.RoleHeadless, pc))
	p.Identity.EngineID = cp.engineID
	if pc.DataParallelSizeLocal <= 0 {
		p.Crash = &Crash{Stage: StageConfig, Error: valueError("data_parallel_size_local must be > 0 in headless mode").Error()}
		return p
	}
	nodeRank, err := pc.NodeRankWithinDP()
	if err != nil {
		p.Crash = &Crash{Stage: StageConfig, Error: crashText(err)}
		return p
	}
	if nodeRank > 0 {
		// Headless workers for multi-node TP/PP: no engine core, so the workers keep the values
		// create_engine_config gave this node (data_parallel_rank_local stays None when D > 1).
		if err := cp.attachWorkers(p, pc, cp.engineID); err != nil {
			p.Crash = &Crash{Stage: StageConfig, Error: crashText(err)}
			return p
		}
		p.ChildFailure = workerStartupFailure
		return p
	}
	h := headlessHandshake(pc)
	for j := 0; j < pc.DataParallelSizeLocal && cp.err == nil; j++ {
		p.Children = append(p.Children, cp.engineCore(pc, pc.DataParallelRank+j, j, id, h))
	}
	// CoreEngineProcManager.monitor_engine_liveness: an engine's death shuts the others down and
	// run_headless returns.
	p.StopsOnChildFailure = true
	return p
}
