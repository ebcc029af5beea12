package vllm

import (
	"fmt"

	"github.com/widetp/widetp/report"
)

// rayFrontEnd is launch_core_engines with data_parallel_backend=ray: CoreEngineActorManager
// (vllm/v1/engine/utils.py) creates one engine actor per DP rank from placement groups and yields
// without the ZMQ handshake; the front end waits on ray.get of the actors' init.
//
// The simulation runs every actor and its workers on the command's host; the per-node ordinal
// (data_parallel_rank_local) is the one vLLM computes for a cluster of nodes like this one.
func (cp *cmdPlanner) rayFrontEnd(p *ProcessPlan, pc *ParallelConfig) *ProcessPlan {
	if pc.DataParallelSize > maxProcessesPerCommand {
		cp.err = fmt.Errorf("%d Ray actors: %w", pc.DataParallelSize, errNotSimulated)
		return p
	}
	local, err := rayLocalDPRanks(pc, cp.gpus, cp.env.rayDPPackStrategy, cp.args.lastOther("--all2all-backend"))
	if err != nil {
		p.Crash = &Crash{Stage: StageConfig, Error: crashText(err)}
		return p
	}
	for i := 0; i < pc.DataParallelSize && cp.err == nil; i++ {
		p.Children = append(p.Children, cp.rayActor(pc, i, local[i], p.Identity.ID))
	}
	p.ChildFailure = rayActorFailure
	return p
}

// rayActor is one DP engine actor: DPMoEEngineCoreActor when D > 1 and the model is MoE, else
// EngineCoreActor. When D > 1 the actor manager suffixes every actor's engine_id with its global DP
// rank (vllm/v1/engine/utils.py _apply_dp_identity_suffix, since PR #41792, before #46628 changed
// run_engine_core's; engine_id_dp_suffix does not apply here).
func (cp *cmdPlanner) rayActor(parent *ParallelConfig, index, localIndex int, parentID string) *ProcessPlan {
	id := cp.id(report.RoleRayActor, index)
	pc := parent.clone()
	pc.DataParallelRankLocal = intPtr(localIndex)
	pc.DataParallelIndex = index
	engineID := ""
	if cp.args.KVTransfer.buildsConnector() {
		engineID = cp.engineID
		if pc.DataParallelSize > 1 {
			engineID = fmt.Sprintf("%s_dp%d", cp.engineID, index)
		}
	}
	moe := pc.DataParallelSize > 1 && pc.IsMoEModel
	var err error
	if moe {
		pc.DataParallelRank = index
	} else {
		err = pc.reconfigureForIndependentDPRank()
	}
	p := cp.newPlan(cp.identity(id, parentID, report.RoleRayActor, pc))
	if err != nil {
		// No scheduler, so no KV connector and no engine_id reported (engineCore).
		p.Crash = &Crash{Stage: StageEngineInit, Error: crashText(err)}
		return p
	}
	if moe {
		p.Rendezvous = append(p.Rendezvous, dpGroup(pc))
	}
	if err := cp.attachExecutorWorkers(p, pc, engineID); err != nil {
		p.Crash = &Crash{Stage: StageEngineInit, Error: crashText(err)}
		p.Rendezvous = nil
		return p
	}
	p.Identity.EngineID = engineID
	cp.schedulerConnector(p, pc)
	p.ChildFailure = rayActorFailure
	// The actor joins its DP group in _init_data_parallel before it builds its executor.
	p.ChildrenAfterRendezvous = true
	return p
}

// rayLocalDPRanks is CoreEngineActorManager.create_dp_placement_groups' local_dp_ranks for a
// homogeneous Ray cluster whose nodes have this node's device count: the DP master node takes
// data_parallel_size_local ranks, then each further node takes (strict) that many again, (fill)
// as many as fit, or (span) one rank spread over several nodes; a rank's local index is its
// ordinal on its node. fill cannot keep DeepEP's EP ranks on one node, so it refuses DeepEP.
func rayLocalDPRanks(pc *ParallelConfig, gpus int, strategy, all2all string) ([]int, error) {
	D, L, ws := pc.DataParallelSize, pc.DataParallelSizeLocal, pc.WorldSize
	switch strategy {
	case "strict", "fill", "span":
	default:
		return nil, valueError("%s is not supported. Make sure to set `VLLM_RAY_DP_PACK_STRATEGY` to one of ('strict', 'fill', 'span')", strategy)
	}
	if strategy == "fill" && (all2all == "deepep_high_throughput" || all2all == "deepep_low_latency") {
		return nil, valueError("DeepEP kernels require EP ranks [0,7] (same for [8,15], ...) to be on the same node, but VLLM_RAY_DP_PACK_STRATEGY=fill does not guarantee that. Please use VLLM_RAY_DP_PACK_STRATEGY=strict instead.")
	}
	local := make([]int, 0, D)
	if strategy == "span" {
		if ws <= gpus {
			return nil, assertionError("World size %d is smaller than the maximum number of devices per node %d. Make sure to set `VLLM_RAY_DP_PACK_STRATEGY` to `strict` or `fill`", ws, gpus)
		}
		if ws%gpus != 0 {
			return nil, assertionError("For multi-node data parallel groups, world_size (%d) must be a multiple of number of devices per node (%d).", ws, gpus)
		}
		if L != 1 {
			return nil, assertionError("data-parallel-size-local %d should be set as the default (1) for VLLM_RAY_DP_PACK_STRATEGY=span. The actual data-parallel-size-local will be auto determined.", L)
		}
		for i := 0; i < D; i++ {
			local = append(local, 0)
		}
		return local, nil
	}
	avail := gpus / ws
	if avail < L {
		return nil, valueError("Not enough resources to allocate %d DP ranks on DP master node %s, possible to fit %d DP ranks.", L, pc.DataParallelMasterIP, avail)
	}
	perNode := L
	if strategy == "fill" {
		perNode = avail
	}
	for i := 0; i < L && len(local) < D; i++ {
		local = append(local, i)
	}
	if len(local) < D && perNode == 0 {
		return nil, valueError("Not enough resources to allocate %d placement groups, only created %d placement groups.", D, len(local))
	}
	for len(local) < D {
		for i := 0; i < perNode && len(local) < D; i++ {
			local = append(local, i)
		}
	}
	return local, nil
}
