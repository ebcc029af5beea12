package vllm

import "fmt"

// runEngineCore is EngineCoreProc.run_engine_core(dp_rank, local_dp_rank) in
// vllm/v1/engine/core.py (spec §3), applied to the engine core's own copy of the config:
//
//	data_parallel = D > 1 or dp_rank > 0
//	if data_parallel: data_parallel_rank_local = local_dp_rank
//	if data_parallel and kv: engine_id += "_dp{dp_rank}"   (before PR #46628: local_dp_rank)
//	data_parallel_index = dp_rank
//	if data_parallel and MoE: data_parallel_rank = dp_rank  -> DPEngineCoreProc
//	else: reconfigure_for_independent_dp_rank()
//
// It returns the engine core's KV engine_id ("" without a KV config) and whether the engine runs
// as a DPEngineCoreProc (joins the DP group).
func runEngineCore(pc *ParallelConfig, dpRank, localDPRank int, baseEngineID string, hasKV bool, prof Profile) (engineID string, dpEngine bool, err error) {
	dataParallel := pc.DataParallelSize > 1 || dpRank > 0
	if dataParallel {
		pc.DataParallelRankLocal = intPtr(localDPRank)
	}
	if hasKV {
		engineID = baseEngineID
		if dataParallel {
			engineID = engineIDWithDPSuffix(baseEngineID, dpRank, localDPRank, prof)
		}
	}
	pc.DataParallelIndex = dpRank
	if dataParallel && pc.IsMoEModel {
		pc.DataParallelRank = dpRank
		// DPEngineCoreProc._init_data_parallel: assert dp_size > 1;
		// assert 0 <= local_dp_rank <= dp_rank < dp_size.
		if pc.DataParallelSize <= 1 {
			return engineID, true, bareAssertion
		}
		if !(0 <= localDPRank && localDPRank <= dpRank && dpRank < pc.DataParallelSize) {
			return engineID, true, bareAssertion
		}
		return engineID, true, nil
	}
	// Non-MoE DP ranks are independent: treat like DP=1; data_parallel_index keeps the rank.
	return engineID, false, pc.reconfigureForIndependentDPRank()
}

// engineIDWithDPSuffix is the "_dp{..}" suffix run_engine_core gives a data-parallel engine's KV
// engine_id: the global DP rank after PR #46628, the local one before.
func engineIDWithDPSuffix(base string, dpRank, localDPRank int, prof Profile) string {
	if prof.EngineIDDPSuffix == EngineIDSuffixLocal {
		return fmt.Sprintf("%s_dp%d", base, localDPRank)
	}
	return fmt.Sprintf("%s_dp%d", base, dpRank)
}

// engineProcName is the process name CoreEngineProcManager gives an engine core, which the front
// end prints when one fails: EngineCore_DP{index} when DP > 1, EngineCore otherwise.
func engineProcName(frontEndDPSize, index int) string {
	if frontEndDPSize > 1 {
		return fmt.Sprintf("EngineCore_DP%d", index)
	}
	return "EngineCore"
}

// Exceptions a parent raises when a child fails during start-up.
const (
	// engineStartupFailure is launch_core_engines' wait_for_engine_startup when an engine core
	// process exits before it is ready.
	engineStartupFailure = "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): " + ChildFailurePlaceholder
	// workerStartupFailure is MultiprocExecutor's WorkerProc.wait_for_ready when a worker dies
	// during init (KV connector init included).
	workerStartupFailure = "Exception: WorkerProc initialization failed due to an exception in a background process. See stack trace for root cause."
	// rayActorFailure is what ray.get raises in the parent when an actor dies during init.
	rayActorFailure = "ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task."
)
