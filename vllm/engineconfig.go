package vllm

import "strconv"

// engineConfigInput is what EngineArgs.create_engine_config reads besides the command line.
type engineConfigInput struct {
	args     *ServeArgs
	headless bool
	moe      bool
	profile  Profile
	env      vllmEnv
	// gpus is the node's device count as torch sees it (CUDA_VISIBLE_DEVICES applied).
	gpus int
	// hostIP is get_ip(): VLLM_HOST_IP, else the host's own address (its name in the simulation).
	hostIP string
	// apiProcessCount is EngineArgs._api_process_count: the API server count run_multi_api_server
	// sets, 1 on every other path.
	apiProcessCount int
}

// createEngineConfig is the data-parallel part of vllm/engine/arg_utils.py
// EngineArgs.create_engine_config (spec §1), line by line, then ParallelConfig(...).
func createEngineConfig(in engineConfigInput) (*ParallelConfig, error) {
	a := in.args
	// Work on copies: create_engine_config assigns to self.data_parallel_* as it goes.
	dpRank := copyInt(a.DataParallelRank)
	dpSizeLocal := copyInt(a.DataParallelSizeLocal)
	startRank := a.DataParallelStartRank
	hybridLB := a.DataParallelHybridLB
	D, PP, TP := a.DataParallelSize, a.PipelineParallelSize, a.TensorParallelSize

	if in.headless && hybridLB {
		return nil, assertionError("data_parallel_hybrid_lb is not applicable in headless mode")
	}
	if hybridLB && a.DataParallelExternalLB {
		return nil, assertionError("data_parallel_hybrid_lb and data_parallel_external_lb cannot both be True.")
	}
	if a.DataParallelBackend != "mp" && a.NNodes != 1 {
		return nil, assertionError("nnodes > 1 is only supported with data_parallel_backend=mp")
	}
	inferred := 0
	if a.NNodes > 1 {
		worldSize := D * PP * TP
		worldSizeWithinDP := PP * TP
		localWorldSize := worldSize / a.NNodes
		if worldSize%a.NNodes != 0 {
			return nil, assertionError("world_size=%d must be divisible by nnodes=%d.", worldSize, a.NNodes)
		}
		if a.NodeRank >= a.NNodes {
			return nil, assertionError("node_rank=%d must be less than nnodes=%d.", a.NodeRank, a.NNodes)
		}
		inferred = (a.NodeRank * localWorldSize) / worldSizeWithinDP
		switch {
		case D > 1 && a.DataParallelExternalLB:
			if in.profile.ExternalLBRank == ExternalLBRankInfer {
				// Before PR #53743: the inferred rank overwrites an explicit one.
				dpRank = intPtr(inferred)
			} else if dpRank == nil {
				// After PR #53743: keep an explicit rank; infer only when each node holds
				// at most one rank, so --node-rank names it unambiguously.
				if D > a.NNodes {
					return nil, valueError("data_parallel_rank must be set explicitly for external LB when data_parallel_size (%d) > nnodes (%d): node_rank cannot identify the DP rank when several ranks share a node.", D, a.NNodes)
				}
				dpRank = intPtr(inferred)
			}
		case dpSizeLocal == nil:
			// Infer data parallel size local for internal DP LB.
			dpSizeLocal = intPtr(max(localWorldSize/worldSizeWithinDP, 1))
		}
	}
	externalLB := a.DataParallelExternalLB || dpRank != nil
	if D > 1 && externalLB && !in.moe && in.profile.DenseExternalDP == DenseExternalDPReject {
		return nil, valueError("Non-MoE models do not support external data parallel mode. For external load balancing, launch independent vLLM instances without --data-parallel-* arguments.")
	}
	var sizeLocal int
	switch {
	case externalLB:
		if dpRank == nil {
			return nil, assertionError("data_parallel_rank or node_rank must be specified if data_parallel_external_lb is enable.")
		}
		if dpSizeLocal != nil && *dpSizeLocal != 1 {
			return nil, assertionError("data_parallel_size_local must be 1 or None when data_parallel_rank is set")
		}
		sizeLocal = 1
		hybridLB = false
	case dpSizeLocal != nil:
		sizeLocal = *dpSizeLocal
		// Since PR #47692 a start rank of 0 is a start rank (`is not None`); before, the test was
		// Python truthiness, which reads 0 as none at all (vLLM#47691).
		startSet := startRank != nil && (*startRank != 0 || in.profile.StartRankZero == StartRankZeroSet)
		if startSet && !in.headless {
			hybridLB = true // hybrid LB is inferred from a start rank
		}
		if hybridLB && sizeLocal == 1 {
			// "data_parallel_hybrid_lb is not eligible when data_parallel_size_local = 1,
			// autoswitch to data_parallel_external_lb."
			externalLB = true
			hybridLB = false
		}
		if sizeLocal == D {
			hybridLB = false
		}
		if startSet {
			dpRank = intPtr(*startRank)
		} else {
			dpRank = intPtr(inferred) // before PR #47692: `start_rank or inferred`
		}
	default:
		if hybridLB {
			return nil, assertionError("data_parallel_size_local must be set to use data_parallel_hybrid_lb.")
		}
		if a.DataParallelBackend == "ray" && in.env.rayDPPackStrategy == "span" {
			sizeLocal = 1 // DP ranks span nodes
		} else {
			sizeLocal = D
		}
	}

	var dpAddress string
	switch {
	case a.DataParallelAddress != nil:
		dpAddress = *a.DataParallelAddress
	case a.DataParallelBackend == "ray":
		dpAddress = in.hostIP
	default:
		dpAddress = a.MasterAddr
		if dpAddress == "" {
			dpAddress = defaultDPMasterIP
		}
	}
	rpcPort := defaultDataParallelRPCPort
	if a.DataParallelRPCPort != nil {
		rpcPort = *a.DataParallelRPCPort
	}
	executor := ""
	if a.DistributedExecutorBackend != nil {
		executor = *a.DistributedExecutorBackend
	}
	rank := 0
	if dpRank != nil {
		rank = *dpRank
	}
	return newParallelConfig(parallelConfigInput{
		pp: PP, tp: TP, pcp: a.PrefillContextParallelSize, dcp: a.DecodeContextParallelSize,
		dpSize: D, dpSizeLocal: sizeLocal, dpRank: rank,
		dpMasterIP: dpAddress, dpRPCPort: rpcPort, dpBackend: a.DataParallelBackend,
		externalLB: externalLB, hybridLB: hybridLB,
		isMoE: in.moe, enableEP: a.EnableExpertParallel,
		executorBackend: executor,
		masterAddr:      a.MasterAddr, masterPort: a.MasterPort,
		nnodes: a.NNodes, nodeRk: a.NodeRank,
		features: parallelFeatures(a, in.apiProcessCount),
	}, in.env, in.gpus, in.profile.NNodesWithinDP == NNodesWithinDPClamp)
}

// parallelFeatures reads the ParallelConfig fields whose checks can refuse a launch
// (ParallelConfig.__post_init__, _validate_parallel_config, _verify_args) from the flags kept in
// ServeArgs.Other.
func parallelFeatures(a *ServeArgs, apiProcessCount int) parallelFeatureFlags {
	f := parallelFeatureFlags{
		enableEPLB:          a.boolFlag("--enable-eplb"),
		enableElasticEP:     a.boolFlag("--enable-elastic-ep"),
		enableFaultTol:      a.boolFlag("--enable-fault-tolerance"),
		numaBind:            a.boolFlag("--numa-bind"),
		numaLists:           a.hasOther("--numa-bind-nodes") || a.hasOther("--numa-bind-cpus"),
		dcpCommBackend:      a.lastOther("--dcp-comm-backend"),
		rayWorkersUseNsight: a.boolFlag("--ray-workers-use-nsight"),
		apiProcessCount:     max(apiProcessCount, 1),
	}
	if eplb := a.jsonConfig("--eplb-config"); eplb != nil {
		if n, err := strconv.Atoi(pyStr(eplb["num_redundant_experts"])); err == nil {
			f.redundantExperts = n
		}
	}
	return f
}

func intPtr(v int) *int { return &v }

func copyInt(p *int) *int {
	if p == nil {
		return nil
	}
	return intPtr(*p)
}
