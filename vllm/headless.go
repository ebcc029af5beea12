package vllm

import "github.com/widetp/widetp/report"

// headless is run_headless (vllm/entrypoints/cli/serve.py): a replica's follower node
// (node_rank_within_dp > 0) starts its workers directly through MultiprocExecutor; otherwise the
// node's L engine cores start and handshake with the head's front end.
func (cp *cmdPlanner) headless() *ProcessPlan {
	id := cp.id(report.RoleHeadless, 0)
	pc, err := createEngineConfig(cp.engineInput(cp.args, true, 1))
	if err == nil {
		err = cp.postInitErr
	}
	if err != nil {
		return cp.crashed(id, "", report.RoleHeadless, nil, StageConfig, err)
	}
	// No EngineID: the launcher parses a KV config (and draws its uuid) but builds no connector;
	// only its workers or engine cores do (report.Process.EngineID).
	p := cp.newPlan(cp.identity(id, "", report.RoleHeadless, pc))
	if err := headlessRankCheck(cp.args, cp.opts.Profile); err != nil {
		p.Crash = &Crash{Stage: StageConfig, Error: err.Error()}
		return p
	}
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
	// CoreEngineProcManager(..., executor_class=Executor.get_class(vllm_config)). (The follower
	// above builds a MultiprocExecutor without it; with --nnodes above 1 ParallelConfig has
	// already refused any backend but mp, uni and external_launcher.)
	if err := executorClassError(pc); err != nil {
		p.Crash = &Crash{Stage: StageConfig, Error: crashText(err)}
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

// headlessRankCheck is run_headless's refusal of a DP rank, right after create_engine_config
// (vllm/entrypoints/cli/serve.py; vLLM#20399):
//
//	PR #19790 (derived): if parallel_config.data_parallel_rank is not None: raise ValueError(...)
//	PR #20398 (raw):     if engine_args.data_parallel_rank is not None:     raise ValueError(...)
//	main (none):         no check
//
// The derived value is an int on every path (create_engine_config passes `data_parallel_rank or
// 0`), so the first form refuses every headless launch, rank flags or not.
func headlessRankCheck(a *ServeArgs, prof Profile) error {
	switch prof.HeadlessRankCheck {
	case HeadlessRankCheckDerived:
		return errHeadlessRank
	case HeadlessRankCheckRaw:
		if a.DataParallelRank != nil {
			return errHeadlessRank
		}
	}
	return nil
}

var errHeadlessRank = valueError("data_parallel_rank is not applicable in headless mode")
