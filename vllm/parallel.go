package vllm

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ParallelConfig is vllm/config/parallel.py ParallelConfig: the fields identity depends on, the
// derived properties, and the checks its constructor runs. A process holds its own copy; an
// engine core and its workers mutate theirs (run_engine_core), the API server's stays as built.
type ParallelConfig struct {
	PipelineParallelSize       int
	TensorParallelSize         int
	PrefillContextParallelSize int
	DecodeContextParallelSize  int

	DataParallelSize      int
	DataParallelSizeLocal int
	DataParallelRank      int
	// DataParallelRankLocal is None (nil) unless the env fallback or run_engine_core sets it.
	DataParallelRankLocal *int
	DataParallelIndex     int
	DataParallelMasterIP  string
	DataParallelRPCPort   int
	// DataParallelMasterPort is only meaningful in the offline (env) case, where it comes from
	// VLLM_DP_MASTER_PORT; online vLLM draws it at random on the head and ships it in the
	// handshake, which the model replaces by a fixed offset of the rpc port (rendezvous.go).
	DataParallelMasterPort int
	DataParallelBackend    string
	ExternalLB             bool
	HybridLB               bool
	IsMoEModel             bool
	EnableExpertParallel   bool

	// DistributedExecutorBackend is "mp", "uni" or "ray" once __post_init__ has resolved it.
	DistributedExecutorBackend string
	MasterAddr                 string
	MasterPort                 int
	NNodes                     int
	NodeRank                   int

	WorldSize int
	// Rank is the worker's global rank within its replica (set by Worker.__init__); 0 elsewhere.
	Rank int

	// EnableElasticEP is enable_elastic_ep: launch_core_engines then always handshakes over TCP.
	EnableElasticEP bool
	// AssignedPhysicalGPUIDs is assigned_physical_gpu_ids: --device-ids resolved by
	// create_engine_config (EngineArgs._resolve_device_ids); nil without the flag.
	AssignedPhysicalGPUIDs []int

	// clamp is the profile's nnodes_within_dp rule (PR #53743).
	clamp bool
	// features are the remaining fields the constructor checks (parallelFeatureFlags).
	features parallelFeatureFlags
	// offline records the env fallback of __post_init__ (DP 1 on the command line): the DP master
	// address and port then come from VLLM_DP_MASTER_IP / VLLM_DP_MASTER_PORT.
	offline bool
}

// clone copies the config so a child process can mutate its own (vLLM pickles the config into
// each child process).
func (pc *ParallelConfig) clone() *ParallelConfig {
	c := *pc
	if pc.DataParallelRankLocal != nil {
		v := *pc.DataParallelRankLocal
		c.DataParallelRankLocal = &v
	}
	return &c
}

// LocalEnginesOnly is the local_engines_only property: the client manages only local engine
// cores in external and hybrid LB.
func (pc *ParallelConfig) LocalEnginesOnly() bool { return pc.ExternalLB || pc.HybridLB }

// WorldSizeAcrossDP is world_size_across_dp.
func (pc *ParallelConfig) WorldSizeAcrossDP() int { return pc.WorldSize * pc.DataParallelSize }

// NNodesWithinDP is the nnodes_within_dp property: how many nodes one DP replica spans.
// Floor (before PR #53743) can return 0; clamp returns at least 1. D // L raises
// ZeroDivisionError when data_parallel_size_local is 0 on a multi-node command.
func (pc *ParallelConfig) NNodesWithinDP() (int, error) {
	if pc.NNodes == 1 {
		return 1, nil
	}
	if pc.DataParallelSizeLocal == 0 {
		return 0, zeroDivision
	}
	nodeSize := pc.DataParallelSize / pc.DataParallelSizeLocal
	if nodeSize == 0 {
		return 0, zeroDivision
	}
	n := pc.NNodes / nodeSize
	if pc.clamp && n < 1 {
		n = 1
	}
	return n, nil
}

// NodeRankWithinDP is node_rank % nnodes_within_dp (0 on a replica's head node).
func (pc *ParallelConfig) NodeRankWithinDP() (int, error) {
	n, err := pc.NNodesWithinDP()
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, zeroModulo
	}
	return pc.NodeRank % n, nil
}

// LocalWorldSize is world_size // nnodes_within_dp: the workers one node runs for a replica.
func (pc *ParallelConfig) LocalWorldSize() (int, error) {
	n, err := pc.NNodesWithinDP()
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, zeroDivision
	}
	return pc.WorldSize / n, nil
}

// reconfigureForIndependentDPRank is ParallelConfig.reconfigure_for_independent_dp_rank, run by
// run_engine_core for a dense model (or DP 1): it captures nnodes_within_dp and
// node_rank_within_dp first, then collapses DP to 1. It never touches data_parallel_index or
// data_parallel_rank_local.
func (pc *ParallelConfig) reconfigureForIndependentDPRank() error {
	nnodes, err := pc.NNodesWithinDP()
	if err != nil {
		return err
	}
	nodeRank, err := pc.NodeRankWithinDP()
	if err != nil {
		return err
	}
	pc.DataParallelSize = 1
	pc.DataParallelSizeLocal = 1
	pc.DataParallelRank = 0
	pc.NNodes = nnodes
	pc.NodeRank = nodeRank
	return nil
}

// parallelConfigInput is what create_engine_config passes to ParallelConfig(...).
type parallelConfigInput struct {
	pp, tp, pcp, dcp           int
	dpSize, dpSizeLocal        int
	dpRank                     int
	dpMasterIP                 string
	dpRPCPort                  int
	dpBackend                  string
	externalLB, hybridLB       bool
	isMoE, enableEP            bool
	executorBackend            string // "" is None
	masterAddr                 string
	masterPort, nnodes, nodeRk int
	features                   parallelFeatureFlags
	assignedGPUIDs             []int
}

// parallelFeatureFlags are the ParallelConfig fields outside data parallelism whose checks can
// refuse a launch; they shape no identity.
type parallelFeatureFlags struct {
	enableEPLB, enableElasticEP, enableFaultTol bool
	// redundantExperts is eplb_config.num_redundant_experts.
	redundantExperts int
	numaBind         bool
	// numaLists: --numa-bind-nodes or --numa-bind-cpus was given.
	numaLists           bool
	dcpCommBackend      string
	rayWorkersUseNsight bool
	// apiProcessCount is _api_process_count (parallelFeatures).
	apiProcessCount int
	// fieldErrs are the field validation errors of the fields create_engine_config passes from
	// their flags as given (parallelFeatures), empty where the field is valid.
	fieldErrs parallelFlagFieldErrors
}

// parallelFlagFieldErrors are pydantic's errors for the ParallelConfig fields create_engine_config
// passes from their flags unchanged: Field(ge=...) constraints and the numa field validators.
type parallelFlagFieldErrors struct {
	maxLoadingWorkers, ubatchSize, dboDecode, dboPrefill string
	numaNodes, numaCPUs                                  []string
}

// newParallelConfig runs ParallelConfig's construction in pydantic's order: field constraints,
// __post_init__, then the model validators (_validate_parallel_config). gpus is the node's
// device count as torch sees it.
func newParallelConfig(in parallelConfigInput, env vllmEnv, gpus int, clamp bool) (*ParallelConfig, error) {
	if err := fieldErrors(in); err != nil {
		return nil, err
	}
	pc := &ParallelConfig{
		PipelineParallelSize:       in.pp,
		TensorParallelSize:         in.tp,
		PrefillContextParallelSize: in.pcp,
		DecodeContextParallelSize:  in.dcp,
		DataParallelSize:           in.dpSize,
		DataParallelSizeLocal:      in.dpSizeLocal,
		DataParallelRank:           in.dpRank,
		DataParallelMasterIP:       in.dpMasterIP,
		DataParallelRPCPort:        in.dpRPCPort,
		DataParallelBackend:        in.dpBackend,
		ExternalLB:                 in.externalLB,
		HybridLB:                   in.hybridLB,
		IsMoEModel:                 in.isMoE,
		EnableExpertParallel:       in.enableEP,
		DistributedExecutorBackend: in.executorBackend,
		MasterAddr:                 in.masterAddr,
		MasterPort:                 in.masterPort,
		NNodes:                     in.nnodes,
		NodeRank:                   in.nodeRk,
		EnableElasticEP:            in.features.enableElasticEP,
		AssignedPhysicalGPUIDs:     in.assignedGPUIDs,
		clamp:                      clamp,
		features:                   in.features,
	}
	if err := pc.postInit(env, gpus); err != nil {
		return nil, err
	}
	if err := pc.validate(); err != nil {
		return nil, err
	}
	if err := pc.verifyArgs(); err != nil {
		return nil, err
	}
	return pc, nil
}

// fieldErrors is pydantic's field validation of ParallelConfig(...), before __post_init__: every
// field that breaks its constraint (vllm/config/parallel.py: Field(ge=1) on the sizes, nnodes and
// max_parallel_loading_workers, ge=0 on data_parallel_size_local, data_parallel_rank, node_rank,
// ubatch_size and the DBO token thresholds, 1..65535 on the rpc port since PR #51469, the
// DataParallelBackend literal, the numa_bind_nodes and numa_bind_cpus validators), in field
// order, in one ValidationError.
func fieldErrors(in parallelConfigInput) error {
	var errs []string
	atLeast := func(field string, v, lo int) {
		if v < lo {
			errs = append(errs, fmt.Sprintf("%s: Input should be greater than or equal to %d [input_value=%d]", field, lo, v))
		}
	}
	atLeast("pipeline_parallel_size", in.pp, 1)
	atLeast("tensor_parallel_size", in.tp, 1)
	atLeast("prefill_context_parallel_size", in.pcp, 1)
	atLeast("data_parallel_size", in.dpSize, 1)
	atLeast("data_parallel_size_local", in.dpSizeLocal, 0)
	atLeast("data_parallel_rank", in.dpRank, 0)
	atLeast("data_parallel_rpc_port", in.dpRPCPort, 1)
	if in.dpRPCPort > 65535 {
		errs = append(errs, fmt.Sprintf("data_parallel_rpc_port: Input should be less than or equal to 65535 [input_value=%d]", in.dpRPCPort))
	}
	if in.dpBackend != "mp" && in.dpBackend != "ray" {
		errs = append(errs, "data_parallel_backend: Input should be 'ray' or 'mp' [input_value="+pyRepr(in.dpBackend)+"]")
	}
	fe := in.features.fieldErrs
	for _, e := range []string{fe.maxLoadingWorkers, fe.ubatchSize, fe.dboDecode, fe.dboPrefill} {
		if e != "" {
			errs = append(errs, e)
		}
	}
	atLeast("node_rank", in.nodeRk, 0)
	atLeast("nnodes", in.nnodes, 1)
	errs = append(errs, fe.numaNodes...)
	errs = append(errs, fe.numaCPUs...)
	atLeast("decode_context_parallel_size", in.dcp, 1)
	if len(errs) == 0 {
		return nil
	}
	return &PyError{Type: "pydantic_core.ValidationError", Msg: validationErrors("ParallelConfig", errs)}
}

// validationErrors is a pydantic ValidationError's text on one line: "1 validation error for
// <class>: <error>", or "N validation errors for <class>: <error>; <error>...".
func validationErrors(class string, errs []string) string {
	return validationCount(class, len(errs)) + ": " + strings.Join(errs, "; ")
}

// validationCount is the first line of a pydantic ValidationError: "1 validation error for
// <class>" or "N validation errors for <class>".
func validationCount(class string, n int) string {
	if n == 1 {
		return "1 validation error for " + class
	}
	return fmt.Sprintf("%d validation errors for %s", n, class)
}

// postInit is ParallelConfig.__post_init__ (the identity-relevant part).
func (pc *ParallelConfig) postInit(env vllmEnv, gpus int) error {
	pc.WorldSize = pc.PipelineParallelSize * pc.TensorParallelSize * pc.PrefillContextParallelSize
	if pc.EnableElasticEP {
		// The NIXL check that follows these (async EPLB needs the nixl package) depends on the
		// installed packages, which a scenario does not describe; the model assumes NIXL.
		switch {
		case !pc.features.enableEPLB:
			return validationError("ParallelConfig", "Elastic EP is only supported with enable_eplb=True.")
		case pc.PipelineParallelSize > 1:
			return validationError("ParallelConfig", "Elastic EP is not supported with pipeline parallelism (pipeline_parallel_size=%d).", pc.PipelineParallelSize)
		case pc.ExternalLB || pc.HybridLB:
			// NotImplementedError is no ValueError: pydantic lets it through unwrapped.
			return &PyError{Type: "NotImplementedError", Msg: "Elastic EP is not compatible with data_parallel_external_lb or data_parallel_hybrid_lb. Elastic EP relies on a single API server and core client to coordinate scale up/down."}
		}
	}
	if pc.DataParallelSize > 1 || pc.DataParallelSizeLocal == 0 {
		// Data parallel was specified in the engine args.
		if !(0 <= pc.DataParallelRank && pc.DataParallelRank < pc.DataParallelSize) {
			return validationError("ParallelConfig", "data_parallel_rank (%d) must be in the range [0, %d)",
				pc.DataParallelRank, pc.DataParallelSize)
		}
		if !pc.EnableElasticEP && env.vllmPortErr != nil {
			// get_open_ports_list(5) for the DP master ports reads envs.VLLM_PORT, which raises
			// on a value int() refuses; pydantic wraps the ValueError.
			return validationError("ParallelConfig", "%s", env.vllmPortErr.(*PyError).Msg)
		}
	} else {
		// Otherwise fall back to env vars (the offline SPMD case).
		pc.DataParallelSize = env.dpSize
		pc.DataParallelRank = env.dpRank
		local := env.dpRankLocal
		pc.DataParallelRankLocal = &local
		pc.DataParallelMasterIP = env.dpMasterIP
		pc.DataParallelMasterPort = env.dpMasterPort
		pc.offline = true
		if pc.DataParallelSize > 1 && !pc.IsMoEModel {
			return validationError("ParallelConfig", "Offline data parallel mode is not supported/useful for dense models.")
		}
	}
	pc.DataParallelIndex = pc.DataParallelRank

	if pc.DistributedExecutorBackend == "" && pc.WorldSizeAcrossDP() > 1 {
		// Multiprocessing by default when the world fits the node (CUDA platform, no Ray
		// placement group: the simulated node has none).
		backend := "mp"
		switch {
		case pc.NNodes > 1:
			backend = "mp"
		case gpus < pc.WorldSize:
			return validationError("ParallelConfig",
				"World size (%d) is larger than the number of available GPUs (%d) in this node. If this is intentional and you are using:\n- ray, set '--distributed-executor-backend ray'.\n- multiprocessing, set '--nnodes' appropriately.",
				pc.WorldSize, gpus)
		case pc.DataParallelBackend == "ray":
			backend = "ray"
		}
		pc.DistributedExecutorBackend = backend
	}
	if pc.DistributedExecutorBackend == "" && pc.WorldSize == 1 {
		pc.DistributedExecutorBackend = "uni"
	}
	if pc.NNodes > 1 {
		switch pc.DistributedExecutorBackend {
		case "mp", "uni", "external_launcher":
		default:
			return validationError("ParallelConfig", "nnodes > 1 can only be set when distributed executor backend is mp, uni or external_launcher.")
		}
	}
	return nil
}

// validate is ParallelConfig._validate_parallel_config (the identity-relevant checks).
func (pc *ParallelConfig) validate() error {
	f := pc.features
	if f.enableFaultTol && f.apiProcessCount > 1 {
		return validationError("ParallelConfig", "Fault tolerance requires a single API server process (--api-server-count=1), but got %d. The FT system assumes one AsyncMPClient manages all engines.", f.apiProcessCount)
	}
	if pc.DataParallelSizeLocal > pc.DataParallelSize {
		return validationError("ParallelConfig", "data_parallel_size_local (%d) must be <= data_parallel_size (%d)",
			pc.DataParallelSizeLocal, pc.DataParallelSize)
	}
	if pc.DataParallelSize <= 1 && pc.ExternalLB {
		return validationError("ParallelConfig", "data_parallel_external_lb can only be set when data_parallel_size > 1")
	}
	if !f.numaBind && f.numaLists {
		return validationError("ParallelConfig", "numa_bind_nodes and numa_bind_cpus require numa_bind=True.")
	}
	tp, pcp, dcp := pc.TensorParallelSize, pc.PrefillContextParallelSize, pc.DecodeContextParallelSize
	if f.enableEPLB {
		// The platform check before these (CUDA or ROCm) holds on a simulated GPU node.
		if !pc.EnableExpertParallel {
			return validationError("ParallelConfig", "enable_expert_parallel must be True to use EPLB.")
		}
		if tp*pcp*pc.DataParallelSize <= 1 {
			return validationError("ParallelConfig", "EPLB requires tensor, prefill-context, or data parallelism, but got TP=%d, PCP=%d, DP=%d.", tp, pcp, pc.DataParallelSize)
		}
	} else if f.redundantExperts != 0 {
		return validationError("ParallelConfig", "num_redundant_experts is set to %d but EPLB is not enabled. Either enable EPLB or unset num_redundant_experts.", f.redundantExperts)
	}
	if pcp > 1 && pc.DataParallelSize > 1 {
		return validationError("ParallelConfig", "PCP does not support data parallelism yet.")
	}
	if pcp == 1 {
		if tp%dcp != 0 {
			return validationError("ParallelConfig", "tp_size=%d must be divisible by dcp_size=%d.", tp, dcp)
		}
	} else if dcp != 1 && dcp != pcp && dcp != tp*pcp {
		return validationError("ParallelConfig",
			"When PCP is enabled, DCP must be disabled, span the PCP axis, or span the full TP x PCP axis. Got TP=%d, PCP=%d, DCP=%d; valid DCP sizes are %s.",
			tp, pcp, dcp, pySortedInts(1, pcp, tp*pcp))
	}
	if f.dcpCommBackend == "a2a" && dcp <= 1 {
		return validationError("ParallelConfig", "dcp_comm_backend='a2a' requires decode_context_parallel_size > 1.")
	}
	return nil
}

// verifyArgs is ParallelConfig._verify_args (the check that can refuse a simulated launch).
func (pc *ParallelConfig) verifyArgs() error {
	if pc.features.rayWorkersUseNsight && pc.DistributedExecutorBackend != "ray" {
		return validationError("ParallelConfig", "Unable to use nsight profiling unless workers run with Ray.")
	}
	return nil
}

// workerRanks is the rank layout of vllm/distributed/parallel_state.py initialize_model_parallel:
// ranks are ordered (DP, PP, PCP, TP), TP fastest.
func (pc *ParallelConfig) workerRanks(rank int) (tpRank, pcpRank, ppRank int) {
	tp, pcp, pp := pc.TensorParallelSize, pc.PrefillContextParallelSize, pc.PipelineParallelSize
	return rank % tp, (rank / tp) % pcp, (rank / (tp * pcp)) % pp
}

// pySortedInts renders sorted(set(values)) as Python prints a list of ints.
func pySortedInts(values ...int) string {
	seen := map[int]bool{}
	var out []int
	for _, v := range values {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	sort.Ints(out)
	parts := make([]string, len(out))
	for i, v := range out {
		parts[i] = strconv.Itoa(v)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
