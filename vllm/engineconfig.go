package vllm

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
)

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

	// _check_feature_supported, before any DP check (vllm/engine/arg_utils.py): pipeline
	// parallelism needs the default executor backend, mp, ray or external_launcher.
	if b := a.DistributedExecutorBackend; PP > 1 && b != nil && *b != "mp" && *b != "ray" && *b != "external_launcher" {
		const feature = "Pipeline Parallelism without Ray distributed executor or multiprocessing executor or external launcher"
		return nil, &PyError{Type: "NotImplementedError", Msg: feature + " is not supported. We recommend to remove " + feature + " from your config."}
	}
	// CacheConfig(...) comes next, before any DP check.
	if err := cacheFieldErrors(a, in.env); err != nil {
		return nil, err
	}
	// Asserts before PR #49124, ValueErrors since (dpLaunchCheck); the headless one stayed an assert.
	checks := in.profile.DPLaunchChecks
	if in.headless && hybridLB {
		return nil, assertionError("data_parallel_hybrid_lb is not applicable in headless mode")
	}
	if hybridLB && a.DataParallelExternalLB {
		return nil, dpLaunchCheck(checks, "data_parallel_hybrid_lb and data_parallel_external_lb cannot both be True.",
			"`--data-parallel-hybrid-lb` and `--data-parallel-external-lb` cannot be enabled together. Enable only one load-balancing mode.")
	}
	if checks == DPLaunchChecksAssert && a.DataParallelBackend != "mp" && a.NNodes != 1 {
		return nil, assertionError("nnodes > 1 is only supported with data_parallel_backend=mp")
	}
	if checks == DPLaunchChecksValueError && a.NNodes > 1 && a.DataParallelBackend != "mp" {
		return nil, launchOptionsError("`--nnodes %d` requires `--data-parallel-backend mp`; got `--data-parallel-backend %s`. Use the MP backend or set `--nnodes 1`.",
			a.NNodes, a.DataParallelBackend)
	}
	inferred := 0
	if a.NNodes > 1 {
		worldSize := D * PP * TP
		worldSizeWithinDP := PP * TP
		if worldSize%a.NNodes != 0 {
			return nil, dpLaunchCheck(checks, fmt.Sprintf("world_size=%d must be divisible by nnodes=%d.", worldSize, a.NNodes),
				fmt.Sprintf("`--nnodes %d` must evenly divide the total world size (%d). Adjust `--nnodes`, `--data-parallel-size`, `--pipeline-parallel-size`, or `--tensor-parallel-size`.", a.NNodes, worldSize))
		}
		// The assert only bounded node_rank from above; PR #49124 added the lower bound.
		if a.NodeRank >= a.NNodes || (checks == DPLaunchChecksValueError && a.NodeRank < 0) {
			return nil, dpLaunchCheck(checks, fmt.Sprintf("node_rank=%d must be less than nnodes=%d.", a.NodeRank, a.NNodes),
				fmt.Sprintf("`--node-rank` must be between 0 and %d; got `--node-rank %d`. Set it to this node's zero-based index.", a.NNodes-1, a.NodeRank))
		}
		localWorldSize := worldSize / a.NNodes
		if worldSizeWithinDP == 0 {
			return nil, zeroDivision
		}
		inferred = floorDiv(a.NodeRank*localWorldSize, worldSizeWithinDP)
		switch {
		case D > 1 && a.DataParallelExternalLB:
			if in.profile.ExternalLBRank == ExternalLBRankInfer {
				// Before PR #53743: the inferred rank overwrites an explicit one.
				dpRank = intPtr(inferred)
			} else if dpRank == nil {
				// After PR #53743: keep an explicit rank; infer one only when the nodes split evenly
				// into replicas (nnodes a multiple of D: each node serves one replica, so
				// --node-rank names it). Otherwise two nodes would infer one rank (DP 2 over
				// --nnodes 3 with TP 3: nodes 0 and 1 both infer 0) or a node would hold several.
				if a.NNodes%D != 0 {
					return nil, externalLBRankError(a.NNodes, D)
				}
				dpRank = intPtr(inferred)
			}
		case dpSizeLocal == nil:
			// Infer data parallel size local for internal DP LB.
			dpSizeLocal = intPtr(max(localWorldSize/worldSizeWithinDP, 1))
		}
	}
	externalLB := a.DataParallelExternalLB || dpRank != nil
	if a.boolFlag("--enable-fault-tolerance") && !externalLB {
		return nil, valueError("Fault tolerance requires external load balancer mode (--data-parallel-external-lb or --data-parallel-rank). Internal LB mode is not supported.")
	}
	if D > 1 && externalLB && !in.moe && in.profile.DenseExternalDP == DenseExternalDPReject {
		return nil, valueError("Non-MoE models do not support external data parallel mode. For external load balancing, launch independent vLLM instances without --data-parallel-* arguments.")
	}
	var sizeLocal int
	switch {
	case externalLB:
		if dpRank == nil {
			return nil, dpLaunchCheck(checks, "data_parallel_rank or node_rank must be specified if data_parallel_external_lb is enable.",
				"`--data-parallel-external-lb` requires a data-parallel rank. Set `--data-parallel-rank`, or set `--data-parallel-size` greater than 1 and use `--nnodes` with `--node-rank` so the rank can be inferred.")
		}
		if dpSizeLocal != nil && *dpSizeLocal != 1 {
			return nil, dpLaunchCheck(checks, "data_parallel_size_local must be 1 or None when data_parallel_rank is set",
				fmt.Sprintf("an external data-parallel rank requires `--data-parallel-size-local 1`; got %d. Set it to 1 or omit it.", *dpSizeLocal))
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
			return nil, dpLaunchCheck(checks, "data_parallel_size_local must be set to use data_parallel_hybrid_lb.",
				"`--data-parallel-hybrid-lb` requires `--data-parallel-size-local`. Set it to the number of data-parallel ranks on this node.")
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
	case a.DataParallelBackend != "mp":
		// create_engine_config asserts the backend where it defaults the address (before
		// ParallelConfig validates it), with a tuple for its message (vllm/engine/arg_utils.py).
		return nil, &PyError{Type: "AssertionError", Msg: "('data_parallel_backend can only be ray or mp, got %s', " + pyRepr(a.DataParallelBackend) + ")"}
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
	// ParallelConfig(..., assigned_physical_gpu_ids=self._resolve_device_ids(), ...): the argument
	// is evaluated, and may raise, before pydantic validates any field.
	var gpuIDs []int
	if a.hasOther("--device-ids") {
		var err error
		if gpuIDs, err = resolveDeviceIDs(a.lastOther("--device-ids"), in.env.cudaVisible); err != nil {
			return nil, err
		}
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
		features:       parallelFeatures(a, in.apiProcessCount),
		assignedGPUIDs: gpuIDs,
	}, in.env, in.gpus, in.profile.NNodesWithinDP == NNodesWithinDPClamp)
}

// cacheFieldErrors is pydantic's field validation of the CacheConfig(...) create_engine_config
// builds from the command line (vllm/config/cache.py: block_size, prefix_match_unit,
// mamba_block_size and replayssm_buffer_len gt=0, gpu_memory_utilization in (0, 1],
// prefix_cache_retention_interval ge=0), every broken constraint in field order, in one
// ValidationError. A flag left out, or None for the nullable ones, keeps its valid default.
func cacheFieldErrors(a *ServeArgs, env vllmEnv) error {
	var errs []string
	// intField checks an int flag against gt=0 (orEqual false) or ge=0 (orEqual true).
	intField := func(field, flag string, orEqual bool) {
		if e := intFieldError(a, field, flag, 0, !orEqual); e != "" {
			errs = append(errs, e)
		}
	}
	intField("block_size", "--block-size", false)
	intField("prefix_match_unit", "--prefix-match-unit", false)
	if flag := "--gpu-memory-utilization"; a.hasOther(flag) {
		// NaN is left out: how pydantic words it is not pinned down here.
		if f, err := pyFloat(a.lastOther(flag)); err == nil && !math.IsNaN(f) {
			switch {
			case f <= 0:
				errs = append(errs, "gpu_memory_utilization: Input should be greater than 0 [input_value="+pyFloatRepr(f)+"]")
			case f > 1:
				errs = append(errs, "gpu_memory_utilization: Input should be less than or equal to 1 [input_value="+pyFloatRepr(f)+"]")
			}
		}
	}
	if n := env.prefixRetention; n != nil && !a.hasOther("--prefix-cache-retention-interval") {
		// The deprecated variable's value is the default when the flag gives none.
		if e := intBoundError("prefix_cache_retention_interval", *n, 0, false); e != "" {
			errs = append(errs, e)
		}
	}
	intField("prefix_cache_retention_interval", "--prefix-cache-retention-interval", true)
	intField("mamba_block_size", "--mamba-block-size", false)
	intField("replayssm_buffer_len", "--replayssm-buffer-len", false)
	if len(errs) == 0 {
		return nil
	}
	return &PyError{Type: "pydantic_core.ValidationError", Msg: validationErrors("CacheConfig", errs)}
}

// intFieldError is pydantic's error for an int field that create_engine_config passes from flag
// as given, under Field(ge=bound), or Field(gt=bound) when strict; "" when the flag is absent,
// None (a nullable option's) or within the bound. A value int() refuses was refused by the parser.
func intFieldError(a *ServeArgs, field, flag string, bound int, strict bool) string {
	v := a.lastOther(flag)
	if !a.hasOther(flag) || v == "None" || v == "" {
		return ""
	}
	n, err := pyInt(v)
	if err != nil {
		return ""
	}
	return intBoundError(field, n, bound, strict)
}

// intBoundError is pydantic's error for the int n of field under Field(ge=bound), or Field(gt=bound)
// when strict; "" within the bound.
func intBoundError(field string, n, bound int, strict bool) string {
	switch {
	case strict && n <= bound:
		return fmt.Sprintf("%s: Input should be greater than %d [input_value=%d]", field, bound, n)
	case !strict && n < bound:
		return fmt.Sprintf("%s: Input should be greater than or equal to %d [input_value=%d]", field, bound, n)
	}
	return ""
}

// noneItems is pydantic's type errors for the None items of a list field (an optional_type
// option's "" or "None" values, which the field's item type refuses): one per item, by index. The
// field's validator does not run then.
func noneItems(field, typ string, vals []string) []string {
	var errs []string
	for i, v := range vals {
		if v == "" || v == "None" {
			errs = append(errs, fmt.Sprintf("%s.%d: Input should be a valid %s [input_value=None]", field, i, typ))
		}
	}
	return errs
}

// numaNodesError is ParallelConfig's validation of numa_bind_nodes from --numa-bind-nodes' values
// (vllm/config/parallel.py: list[int] | None, then _validate_numa_bind_nodes; nargs="+" never gives
// an empty list). pydantic words a validator's ValueError as "Value error, <message>", without the
// field.
func numaNodesError(vals []string) []string {
	if errs := noneItems("numa_bind_nodes", "integer", vals); errs != nil {
		return errs
	}
	for _, v := range vals {
		if n, err := pyInt(v); err == nil && n < 0 {
			return []string{"Value error, numa_bind_nodes must contain non-negative integers."}
		}
	}
	return nil
}

// numaCPUsError is ParallelConfig's validation of numa_bind_cpus from --numa-bind-cpus' values
// (vllm/config/parallel.py: list[str] | None, then _validate_numa_bind_cpus): every entry a
// numactl CPU list ("0-3", "0,2,4-7": numbers or ascending ranges, comma-separated), checked entry
// by entry.
func numaCPUsError(vals []string) []string {
	if errs := noneItems("numa_bind_cpus", "string", vals); errs != nil {
		return errs
	}
	for _, cpuset := range vals {
		ranges, ok := numactlCPUList(cpuset)
		if !ok {
			return []string{"Value error, numa_bind_cpus entries must use numactl CPU list syntax, for example '0-3' or '0,2,4-7'."}
		}
		for _, r := range ranges {
			if r[1] != "" && pyDigitsLess(r[1], r[0]) {
				return []string{"Value error, numa_bind_cpus ranges must be ascending, but got '" + cpuset + "'."}
			}
		}
	}
	return nil
}

// numactlCPUList splits a numactl CPU list into its parts, each [start, end] ("" end for a single
// CPU), or reports that s is not one. Digits are what Python's \d and int() accept: any Unicode
// decimal digit.
func numactlCPUList(s string) ([][2]string, bool) {
	var out [][2]string
	for _, part := range strings.Split(s, ",") {
		start, end, isRange := strings.Cut(part, "-")
		if !pyDigits(start) || (isRange && !pyDigits(end)) {
			return nil, false
		}
		out = append(out, [2]string{start, end})
	}
	return out, true
}

// pyDigits reports a non-empty run of Unicode decimal digits.
func pyDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !unicode.IsDigit(r) {
			return false
		}
	}
	return true
}

// pyDigitsLess compares two runs of decimal digits as the numbers int() reads from them, however
// long. Unicode's decimal digits come in blocks of ten, zero to nine, some blocks back to back:
// a digit's value is its distance from the start of its run of digits, modulo ten.
func pyDigitsLess(a, b string) bool {
	norm := func(s string) string {
		var sb strings.Builder
		for _, r := range s {
			start := r
			for unicode.IsDigit(start - 1) {
				start--
			}
			sb.WriteByte(byte('0' + (r-start)%10))
		}
		return strings.TrimLeft(sb.String(), "0")
	}
	x, y := norm(a), norm(b)
	if len(x) != len(y) {
		return len(x) < len(y)
	}
	return x < y
}

// resolveDeviceIDs is EngineArgs._resolve_device_ids over --device-ids "2,3,5,7" (argparse splits it
// at commas; an all-digit entry is an int, any other a GPU UUID): no duplicates, no mix of ints and
// UUIDs, and with CUDA_VISIBLE_DEVICES set each int indexes the visible devices and becomes the
// physical ID there. UUIDs need NVML, which a simulated node does not have: not simulated.
func resolveDeviceIDs(raw, cudaVisible string) ([]int, error) {
	var ints []int
	var reprs []string
	seen := map[string]bool{}
	dup, uuids := false, 0
	for _, part := range strings.Split(raw, ",") {
		part = strings.TrimSpace(part)
		if n, err := strconv.Atoi(part); err == nil && isDigits(part) {
			ints = append(ints, n)
			reprs = append(reprs, strconv.Itoa(n))
		} else {
			uuids++
			reprs = append(reprs, pyRepr(part))
		}
		key := reprs[len(reprs)-1]
		dup = dup || seen[key]
		seen[key] = true
	}
	switch {
	case dup:
		return nil, valueError("--device-ids must not contain duplicates: [%s]", strings.Join(reprs, ", "))
	case uuids == len(reprs):
		return nil, fmt.Errorf("--device-ids with GPU UUIDs (%s) needs NVML: %w", raw, errNotSimulated)
	case uuids > 0:
		return nil, valueError("--device-ids must not mix integer IDs and UUIDs")
	}
	if cudaVisible == "" {
		return ints, nil
	}
	var visible []int
	for _, v := range strings.Split(cudaVisible, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("CUDA_VISIBLE_DEVICES=%s names GPU UUIDs, which need NVML: %w", cudaVisible, errNotSimulated)
		}
		visible = append(visible, n)
	}
	out := make([]int, len(ints))
	for i, id := range ints {
		if id >= len(visible) {
			return nil, valueError("--device-ids index %d is out of range for CUDA_VISIBLE_DEVICES=%s (%d devices visible)", id, cudaVisible, len(visible))
		}
		out[i] = visible[id]
	}
	return out, nil
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
		fieldErrs: parallelFlagFieldErrors{
			maxLoadingWorkers: intFieldError(a, "max_parallel_loading_workers", "--max-parallel-loading-workers", 1, false),
			ubatchSize:        intFieldError(a, "ubatch_size", "--ubatch-size", 0, false),
			dboDecode:         intFieldError(a, "dbo_decode_token_threshold", "--dbo-decode-token-threshold", 0, false),
			dboPrefill:        intFieldError(a, "dbo_prefill_token_threshold", "--dbo-prefill-token-threshold", 0, false),
			numaNodes:         numaNodesError(a.otherValues("--numa-bind-nodes")),
			numaCPUs:          numaCPUsError(a.otherValues("--numa-bind-cpus")),
		},
	}
	if eplb := a.jsonConfig("--eplb-config"); eplb != nil {
		if n, err := strconv.Atoi(pyStr(eplb["num_redundant_experts"])); err == nil {
			f.redundantExperts = n
		}
	}
	return f
}

// externalLBRankError is PR #53743's refusal to infer an external-LB rank from --node-rank when
// --nnodes is not a multiple of --data-parallel-size. vLLM's own test
// (tests/v1/engine/test_engine_args.py test_external_lb_requires_explicit_rank_when_nodes_are_not_evenly_partitioned)
// pins only the ValueError and its "Set a unique `--data-parallel-rank`" part; the rest of the
// sentence follows PR #49124's form and is the model's.
func externalLBRankError(nnodes, dpSize int) error {
	return launchOptionsError("`--data-parallel-external-lb` infers the data-parallel rank from `--node-rank` only when `--nnodes` (%d) is a multiple of `--data-parallel-size` (%d). Set a unique `--data-parallel-rank` for each process.", nnodes, dpSize)
}

// dpLaunchCheck is one of create_engine_config's data-parallel launch-option checks: a bare assert
// with its old message before PR #49124, a ValueError with the actionable message since.
func dpLaunchCheck(checks, assertMsg, valueMsg string) error {
	if checks == DPLaunchChecksAssert {
		return assertionError("%s", assertMsg)
	}
	return launchOptionsError("%s", valueMsg)
}

// launchOptionsError is the ValueError PR #49124 gave every data-parallel launch-option check.
func launchOptionsError(format string, args ...any) error {
	return valueError("Invalid data-parallel launch options: "+format, args...)
}

// floorDiv is Python's // on ints (rounds toward negative infinity, unlike Go's /).
func floorDiv(a, b int) int {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func intPtr(v int) *int { return &v }

func copyInt(p *int) *int {
	if p == nil {
		return nil
	}
	return intPtr(*p)
}
