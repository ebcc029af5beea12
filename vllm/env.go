package vllm

import (
	"path"
	"strings"
)

// vllmEnv is what vllm/envs.py reads from a process's environment for identity, with vLLM's
// defaults. Each command sees its node's environment layered under the command's own NAME=value
// assignments.
type vllmEnv struct {
	dpRank       int
	dpRankLocal  int
	dpSize       int
	dpMasterIP   string
	dpMasterPort int
	// rayDPPackStrategy is VLLM_RAY_DP_PACK_STRATEGY: strict | fill | span.
	rayDPPackStrategy string
	// rpcBasePath is VLLM_RPC_BASE_PATH, default tempfile.gettempdir().
	rpcBasePath string
	// hostIP is VLLM_HOST_IP ("" when unset: get_ip() then resolves the host's own address).
	hostIP string
	// mooncakeRequesterHostname is MOONCAKE_REQUESTER_LOCAL_HOSTNAME, stripped.
	mooncakeRequesterHostname string
	// visibleDevices is the device count CUDA_VISIBLE_DEVICES allows, -1 when it is unset.
	visibleDevices int
	// cudaVisible is CUDA_VISIBLE_DEVICES as set ("" when unset or empty: vLLM treats both alike
	// when it maps device IDs).
	cudaVisible string
	// vllmPort is VLLM_PORT (nil when unset); vllmPortErr what envs.get_vllm_port raises when
	// int() refuses it, at the first port allocation that reads it.
	vllmPort    *int
	vllmPortErr error
	// runtimeLoRAUpdating is VLLM_ALLOW_RUNTIME_LORA_UPDATING ("1" or "true", stripped, in any
	// case), which run_multi_api_server refuses with more than one API server.
	runtimeLoRAUpdating bool
	// nicEnvErr is what set_worker_net_device raises in each worker before it builds its Worker
	// when only one of VLLM_GPU_NIC_PCIE_MAPPING and VLLM_NIC_SELECTION_VARS is set (non-blank).
	nicEnvErr error
	// prefixRetention is VLLM_PREFIX_CACHE_RETENTION_INTERVAL (nil when unset): the default of
	// CacheConfig.prefix_cache_retention_interval when the flag does not give one.
	prefixRetention *int
	// mqChunkErr is what int() of VLLM_MQ_MAX_CHUNK_BYTES_MB raises (MultiprocExecutor reads it on
	// a replica's first node before it starts any worker); splitGroupErr the same for
	// VLLM_DISTRIBUTED_USE_SPLIT_GROUP (each worker, right before it joins its torch world).
	mqChunkErr, splitGroupErr error
	// float32PrecisionErr is what env_with_choices raises for VLLM_FLOAT32_MATMUL_PRECISION outside
	// highest/high/medium (any case), read by every GPU Worker.__init__ once its rank is set.
	float32PrecisionErr error
}

// readEnv reads the variables as envs.py does: int(os.getenv(name, default)) raises ValueError on
// a non-integer, which the process hits while building its ParallelConfig.
func readEnv(env map[string]string) (vllmEnv, error) {
	e := vllmEnv{
		dpMasterIP:        "127.0.0.1", // envs.VLLM_DP_MASTER_IP default
		rayDPPackStrategy: "strict",    // envs.VLLM_RAY_DP_PACK_STRATEGY default
		visibleDevices:    -1,
	}
	intVar := func(name string, def int) (int, error) {
		n, err := envInt(env, name, def)
		if err != nil {
			// ParallelConfig.__post_init__ reads them (the offline DP fallback; the DP master
			// ports' reserved range), so pydantic wraps the ValueError.
			return 0, validationError("ParallelConfig", "invalid literal for int() with base 10: %s", pyRepr(env[name]))
		}
		return n, nil
	}
	if v, ok := env["VLLM_FLOAT32_MATMUL_PRECISION"]; ok {
		e.float32PrecisionErr = choicesEnvError("VLLM_FLOAT32_MATMUL_PRECISION", v, []string{"highest", "high", "medium"}, false)
	}
	// CacheConfig.prefix_cache_retention_interval's default factory (vllm/config/cache.py
	// _get_prefix_cache_retention_interval) runs while the parser is built, before the default
	// ParallelConfig() below: int() of the deprecated variable, its ValueError unwrapped.
	if v, ok := env["VLLM_PREFIX_CACHE_RETENTION_INTERVAL"]; ok {
		n, err := pyInt(v)
		if err != nil {
			return e, valueError("invalid literal for int() with base 10: %s", pyRepr(v))
		}
		e.prefixRetention = &n
	}
	// Then CompilationConfig's compile_cache_save_format default factory
	// (vllm/config/compilation.py; the parser reads CompilationConfig's defaults after
	// CacheConfig's, vllm/engine/arg_utils.py add_cli_args): env_with_choices, case-sensitive.
	if v, ok := env["VLLM_COMPILE_CACHE_SAVE_FORMAT"]; ok {
		if err := choicesEnvError("VLLM_COMPILE_CACHE_SAVE_FORMAT", v, []string{"binary", "unpacked"}, true); err != nil {
			return e, err
		}
	}
	// In the order ParallelConfig.__post_init__'s offline fallback reads them.
	var err error
	if e.dpSize, err = intVar("VLLM_DP_SIZE", 1); err != nil {
		return e, err
	}
	if e.dpRank, err = intVar("VLLM_DP_RANK", 0); err != nil {
		return e, err
	}
	// VLLM_DP_RANK_LOCAL defaults to VLLM_DP_RANK (envs.py), so it is never None here.
	if e.dpRankLocal, err = intVar("VLLM_DP_RANK_LOCAL", e.dpRank); err != nil {
		return e, err
	}
	if e.dpMasterPort, err = intVar("VLLM_DP_MASTER_PORT", 0); err != nil {
		return e, err
	}
	// The parser's default ParallelConfig() (vllm/engine/arg_utils.py _compute_kwargs) takes that
	// fallback, DP size 1 and local size 1, so its model validator refuses a VLLM_DP_SIZE below
	// one before any flag is read.
	if e.dpSize < 1 {
		return e, validationError("ParallelConfig", "data_parallel_size_local (1) must be <= data_parallel_size (%d)", e.dpSize)
	}
	// Then its _verify_args: bool(int(VLLM_BATCH_INVARIANT)) ("true" is refused too).
	if _, err = intVar("VLLM_BATCH_INVARIANT", 0); err != nil {
		return e, err
	}
	if v, ok := env["VLLM_DP_MASTER_IP"]; ok {
		e.dpMasterIP = v
	}
	if v, ok := env["VLLM_RAY_DP_PACK_STRATEGY"]; ok {
		e.rayDPPackStrategy = v
	}
	e.rpcBasePath = gettempdir(env)
	if v, ok := env["VLLM_RPC_BASE_PATH"]; ok {
		e.rpcBasePath = v
	}
	e.vllmPort, e.vllmPortErr = vllmPortEnv(env)
	switch strings.ToLower(strings.TrimSpace(env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"])) {
	case "1", "true":
		e.runtimeLoRAUpdating = true
	}
	// vllm/v1/executor/vllm_net_devices.py set_worker_net_device: the two come together or not at
	// all. (With both, the mapping names PCI addresses of the host's GPUs and NICs, which a
	// simulated host does not have: the model takes them as valid.)
	mapping := strings.TrimSpace(env["VLLM_GPU_NIC_PCIE_MAPPING"]) != ""
	selection := strings.TrimSpace(env["VLLM_NIC_SELECTION_VARS"]) != ""
	switch {
	case mapping && !selection:
		e.nicEnvErr = &PyError{Type: "RuntimeError", Msg: "VLLM_GPU_NIC_PCIE_MAPPING is set but VLLM_NIC_SELECTION_VARS is not; both must be set together."}
	case selection && !mapping:
		e.nicEnvErr = &PyError{Type: "RuntimeError", Msg: "VLLM_NIC_SELECTION_VARS is set but VLLM_GPU_NIC_PCIE_MAPPING is not; both must be set together."}
	}
	e.mqChunkErr = intEnvError(env, "VLLM_MQ_MAX_CHUNK_BYTES_MB")
	e.splitGroupErr = intEnvError(env, "VLLM_DISTRIBUTED_USE_SPLIT_GROUP")
	e.hostIP = env["VLLM_HOST_IP"]
	e.mooncakeRequesterHostname = strings.TrimSpace(env["MOONCAKE_REQUESTER_LOCAL_HOSTNAME"])
	if v, ok := env["CUDA_VISIBLE_DEVICES"]; ok {
		e.cudaVisible = v
		e.visibleDevices = 0
		for _, d := range strings.Split(v, ",") {
			if strings.TrimSpace(d) != "" {
				e.visibleDevices++
			}
		}
	}
	return e, nil
}

// intEnvError is the ValueError int() raises on a variable envs.py reads as an integer, where the
// reader catches nothing; nil when it is unset or an integer.
func intEnvError(env map[string]string, name string) error {
	if v, ok := env[name]; ok {
		if _, err := pyInt(v); err != nil {
			return valueError("invalid literal for int() with base 10: %s", pyRepr(v))
		}
	}
	return nil
}

// vllmPortEnv is envs.get_vllm_port: int() of VLLM_PORT, else a URI hint, else "must be a valid
// integer" (vllm/envs.py).
func vllmPortEnv(env map[string]string) (*int, error) {
	v, ok := env["VLLM_PORT"]
	if !ok {
		return nil, nil
	}
	if n, err := pyInt(v); err == nil {
		return &n, nil
	}
	if strings.Contains(v, "://") {
		return nil, valueError("VLLM_PORT '%s' appears to be a URI. This may be caused by a Kubernetes service discovery issue,check the warning in: https://docs.vllm.ai/en/latest/configuration/env_vars.html", v)
	}
	return nil, valueError("VLLM_PORT '%s' must be a valid integer", v)
}

// gettempdir is Python's tempfile.gettempdir(): the first of TMPDIR, TEMP, TMP that is set, made
// absolute and normalised (os.path.abspath: "/var/tmp/" and "/var//tmp" are "/var/tmp"), else
// /tmp. The model cannot check that the directory exists (a simulated node has it), nor resolve
// a relative one against the process's working directory, which a scenario does not give; it is
// normalised as it stands.
func gettempdir(env map[string]string) string {
	for _, k := range []string{"TMPDIR", "TEMP", "TMP"} {
		if v := env[k]; v != "" {
			return path.Clean(v)
		}
	}
	return "/tmp"
}

// deviceCount is torch.cuda.device_count() on the node: CUDA_VISIBLE_DEVICES narrows the GPUs.
func (e vllmEnv) deviceCount(gpus int) int {
	if e.visibleDevices >= 0 && e.visibleDevices < gpus {
		return e.visibleDevices
	}
	return gpus
}

// choicesEnvError is envs.py env_with_choices refusing a set value outside its choices (compared
// in lower case unless caseSensitive); nil when the value is one of them.
func choicesEnvError(name, v string, choices []string, caseSensitive bool) error {
	for _, c := range choices {
		if v == c || !caseSensitive && strings.EqualFold(v, c) {
			return nil
		}
	}
	quoted := make([]string, len(choices))
	for i, c := range choices {
		quoted[i] = pyRepr(c)
	}
	return valueError("Invalid value '%s' for %s. Valid options: [%s].", v, name, strings.Join(quoted, ", "))
}
