package vllm

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The KV connector part of VllmConfig.__post_init__ (vllm/config/vllm.py), which
// create_engine_config runs in every front end (API server, headless launcher) once its
// ParallelConfig is built: _post_init_kv_transfer_config turns --kv-offloading-size into a
// connector, the hybrid KV cache manager (HMA) block resolves the connector's class through
// KVConnectorFactory.supports_hma_config when --disable-hybrid-kv-cache-manager was not given,
// and _verify_kv_transfer_compat refuses a connector under
// PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True. Engine cores and workers get the resulting
// config from their front end; the connector classes are built in them later
// (KVConnectorFactory.create_connector, workerConnectorError).

// registeredConnectors are the names vllm/distributed/kv_transfer/kv_connector/factory.py
// registers, each with whether its class subclasses SupportsHMA
// (vllm/distributed/kv_transfer/kv_connector/v1/base.py supports_hma). NixlConnector is an alias
// of NixlPullConnector; both NIXL classes derive from NixlBaseConnector, which supports HMA.
// LMCacheMPConnector is the lmcache package's class when it is installed (as the model takes
// it), else LMCacheMPConnectorUpstream: taken not to support HMA, as the upstream class does not.
// MultiConnector supports HMA when every child does (MultiConnector.all_children_support_hma).
// One vLLM's registry serves every profile.
var registeredConnectors = map[string]bool{
	"ExampleConnector":             false,
	"ExampleHiddenStatesConnector": true,
	"LMCacheConnectorV1":           false,
	"LMCacheMPConnector":           false,
	"NixlConnector":                true,
	"NixlPullConnector":            true,
	"NixlPushConnector":            true,
	multiConnectorName:             true,
	"MoRIIOConnector":              false,
	offloadingConnectorName:        true,
	"DecodeBenchConnector":         true,
	mooncakeConnectorName:          true,
	MooncakeStoreConnectorName:     true,
	"FlexKVConnectorV1":            false,
	"SimpleCPUOffloadConnector":    true,
	"HF3FSKVConnector":             false,
}

// hybridKVCacheManager is --disable-hybrid-kv-cache-manager as argparse leaves it: nil when
// neither it nor --no-disable-hybrid-kv-cache-manager was given (SchedulerConfig's None), else
// whether the manager is disabled (the last of the two wins).
func hybridKVCacheManager(a *ServeArgs) *bool {
	const flag = "--disable-hybrid-kv-cache-manager"
	if !a.hasOther(flag) && !a.hasOther("--no-"+strings.TrimPrefix(flag, "--")) {
		return nil
	}
	v := a.boolFlag(flag)
	return &v
}

// connectorModulePath is kv_connector_module_path: nil when unset or null.
func (k *KVTransferConfig) connectorModulePath() *string {
	if k == nil {
		return nil
	}
	s, ok := k.Raw["kv_connector_module_path"].(string)
	if !ok {
		return nil
	}
	return &s
}

// connectorClass is KVConnectorFactory.get_connector_class: whether the class it loads supports
// HMA, or what it raises. A class from kv_connector_module_path is taken to import and to lack
// SupportsHMA: an out-of-tree connector the scenario cannot show, written before HMA.
func connectorClass(k *KVTransferConfig) (hma bool, err error) {
	if k.Raw["kv_connector"] == nil {
		return false, valueError("Connector name is not set in KVTransferConfig")
	}
	if p := k.connectorModulePath(); p != nil {
		if *p == "" {
			return false, valueError("kv_connector_module_path cannot be an empty string.")
		}
		return false, nil
	}
	hma, ok := registeredConnectors[k.Connector]
	if !ok {
		return false, valueError("Unsupported connector type: %s", k.Connector)
	}
	return hma, nil
}

// supportsHMAConfig is KVConnectorFactory.supports_hma_config: the class is loaded first (its
// errors), then a MultiConnector asks its children in order (all_children_support_hma), each
// turned into a KVTransferConfig with the parent's engine_id, and stops at the first child that
// does not support HMA: later children are not looked at.
func supportsHMAConfig(k *KVTransferConfig) (bool, error) {
	hma, err := connectorClass(k)
	if err != nil || k.Connector != multiConnectorName {
		return hma, err
	}
	raw := k.ExtraConfig["connectors"]
	if !pyTruthy(raw) {
		return false, nil
	}
	all := true
	// {"engine_id": ..., **conn_config}: a dict display unpacks only a mapping.
	err = eachChildMapping(raw, "'%s' object is not a mapping", func(m map[string]any) (bool, error) {
		merged := map[string]any{"engine_id": nil}
		if k.EngineID != nil {
			merged["engine_id"] = *k.EngineID
		}
		maps.Copy(merged, m)
		child, err := newKVTransferConfig(merged)
		if err != nil {
			return true, err
		}
		ok, err := supportsHMAConfig(child)
		all = ok
		return !ok, err
	})
	return all && err == nil, err
}

// eachChildMapping runs a MultiConnector's loop over its children (pyIter of raw): fn on each
// child in turn until it says stop or fails; a child that is not a dict raises, where the loop
// meets it, the TypeError notMapping words (with the child's type name).
func eachChildMapping(raw any, notMapping string, fn func(m map[string]any) (stop bool, err error)) error {
	children, err := pyIter(raw)
	if err != nil {
		return err
	}
	for _, c := range children {
		m, ok := c.(map[string]any)
		if !ok {
			return &PyError{Type: "TypeError", Msg: fmt.Sprintf(notMapping, pyTypeName(c))}
		}
		if stop, err := fn(m); stop || err != nil {
			return err
		}
	}
	return nil
}

// pydanticError is a KVTransferConfig validation failure raised outside argparse: the
// ValidationError itself, not argparse's exit.
func pydanticError(err error) error {
	var ae *ArgError
	if errors.As(err, &ae) {
		msg := ae.Reason
		if ae.Detail != "" {
			msg += ": " + ae.Detail
		}
		return &PyError{Type: "pydantic_core.ValidationError", Msg: msg}
	}
	return err
}

// kvOffloadingConnector is VllmConfig._post_init_kv_transfer_config: with --kv-offloading-size
// the connector is the offloading backend's (native: OffloadingConnector, or
// SimpleCPUOffloadConnector under VLLM_USE_SIMPLE_KV_OFFLOAD; lmcache: LMCacheMPConnector) with
// kv_role kv_both, in the --kv-transfer-config given (its engine_id and other fields kept) or a
// new one. It returns kv unchanged without --kv-offloading-size.
func kvOffloadingConnector(a *ServeArgs, env map[string]string) (*KVTransferConfig, error) {
	kv := a.KVTransfer
	if !a.optionalValue("--kv-offloading-size") {
		return kv, nil
	}
	size, err := pyFloat(a.lastOther("--kv-offloading-size"))
	if err != nil {
		return kv, nil // argparse's float() already refused it
	}
	out := &KVTransferConfig{Raw: map[string]any{}}
	if kv != nil {
		c := *kv
		out = &c
		out.Raw = maps.Clone(kv.Raw)
		out.ExtraConfig = maps.Clone(kv.ExtraConfig)
	}
	backend := a.lastOther("--kv-offloading-backend")
	if backend == "" {
		backend = "native" // CacheConfig.kv_offloading_backend
	}
	switch backend {
	case "native":
		simple, err := envInt(env, "VLLM_USE_SIMPLE_KV_OFFLOAD", 0)
		if err != nil {
			return kv, err
		}
		out.Connector = offloadingConnectorName
		if simple != 0 {
			out.Connector = "SimpleCPUOffloadConnector"
		}
		if out.ExtraConfig == nil {
			out.ExtraConfig = map[string]any{}
		}
		// kv_offloading_size * (1 << 30): a Python float.
		out.ExtraConfig["cpu_bytes_to_use"] = json.Number(pyFloatRepr(size * (1 << 30)))
	case "lmcache":
		out.Connector = "LMCacheMPConnector"
	}
	out.Role = "kv_both"
	out.Raw["kv_connector"], out.Raw["kv_role"] = out.Connector, out.Role
	if out.ExtraConfig != nil {
		out.Raw["kv_connector_extra_config"] = out.ExtraConfig
	}
	return out, nil
}

// envInt is int(os.getenv(name, default)) as envs.py reads it: Python's int() of the text, which
// refuses anything else with ValueError.
func envInt(env map[string]string, name string, def int) (int, error) {
	v, ok := env[name]
	if !ok {
		return def, nil
	}
	n, err := pyInt(v)
	if err != nil {
		return 0, valueError("invalid literal for int() with base 10: %s", pyRepr(v))
	}
	return n, nil
}

// postInitConnector is the rest of the KV connector part of VllmConfig.__post_init__, on the
// config kvOffloadingConnector returned: the HMA block (supports_hma_config when
// --disable-hybrid-kv-cache-manager was not given: an unknown connector, an empty module path or
// a MultiConnector child that does not validate fail the front end here), then
// _verify_kv_transfer_compat.
func postInitConnector(a *ServeArgs, kv *KVTransferConfig, env map[string]string) error {
	if kv != nil && hybridKVCacheManager(a) == nil {
		if _, err := supportsHMAConfig(kv); err != nil {
			return err
		}
	}
	if !kv.buildsConnector() {
		return nil
	}
	if !strings.Contains(env["PYTORCH_CUDA_ALLOC_CONF"], "expandable_segments:True") {
		return nil
	}
	// ModelConfig turns the cumem allocator on for sleep mode on CUDA.
	if a.boolFlag("--enable-cumem-allocator") || a.boolFlag("--enable-sleep-mode") {
		return nil
	}
	return valueError("KV connector %s is incompatible with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True unless enable_cumem_allocator is also enabled. "+
		"PyTorch's CUDA VMM allocator can remap KV cache virtual addresses to different physical pages, invalidating any pinned/registered KV memory "+
		"(e.g. IB memory regions registered by NIXL or Mooncake). Either unset expandable_segments:True or enable the cumem allocator "+
		"(sleep mode does this automatically and also routes KV allocations through CuMemAllocator's pool, where expandable_segments is automatically disabled).",
		kv.Connector)
}

// workerConnectorError is what KVConnectorFactory.create_connector raises in a worker (the first
// process to build the connector, at its KV cache init) when the front end did not resolve the
// class already: with --disable-hybrid-kv-cache-manager given either way, the class is loaded
// here (an unknown name fails now), and with the manager enabled (--no-disable-...) a connector
// without HMA support is refused.
func workerConnectorError(a *ServeArgs, kv *KVTransferConfig) error {
	if !kv.buildsConnector() {
		return nil
	}
	disabled := hybridKVCacheManager(a)
	if disabled == nil {
		return nil // VllmConfig.__post_init__ resolved it in the front end
	}
	if _, err := connectorClass(kv); err != nil {
		return err
	}
	if *disabled {
		return nil
	}
	hma, err := supportsHMAConfig(kv)
	if err != nil {
		return err
	}
	if !hma {
		return valueError("Connector %s does not support HMA but HMA is enabled. Please set `--disable-hybrid-kv-cache-manager`.", connectorClassName(kv))
	}
	return nil
}

// connectorClassName is connector_cls.__name__: NixlConnector's class is NixlPullConnector;
// LMCacheMPConnector's is the lmcache package's class of that name (the package taken to be
// installed); a module path's class is the kv_connector name itself.
func connectorClassName(kv *KVTransferConfig) string {
	if kv.connectorModulePath() == nil && kv.Connector == nixlConnectorName {
		return "NixlPullConnector"
	}
	return kv.Connector
}

// connectorBuildError is what building the KV connector raises in each worker of the command
// (the same for all), in KVConnectorFactory.create_connector's order: the class and the HMA check
// (workerConnectorError), then a MultiConnector's children (connectorInitError). The connector
// classes' own constructors are not modelled (NIXL's worker refuses a kv_consumer split into
// pipeline stages, its push scheduler bidirectional transfer): the probe builds stand-in classes,
// so a vllm plan cannot show them, and the model follows the probe.
func connectorBuildError(a *ServeArgs) error {
	if err := workerConnectorError(a, a.KVTransfer); err != nil {
		return err
	}
	return a.KVTransfer.connectorInitError()
}

// isNIXL is whether a connector name loads a NIXL connector: NixlConnector (the pull connector's
// old name), NixlPullConnector or NixlPushConnector, every one a NixlBaseConnector
// (vllm/distributed/kv_transfer/kv_connector/v1/nixl/connector.py) whose scheduler listens for
// handshakes.
func isNIXL(name string) bool {
	return name == nixlConnectorName || name == "NixlPullConnector" || name == "NixlPushConnector"
}

// cudaGraphConnectorCheck is VllmConfig.__post_init__'s check of the KV connector for CUDA graphs
// (vllm/config/vllm.py), which runs before _post_init_kv_transfer_config, on the config as given:
// when the front end would capture full CUDA graphs (fullCUDAGraphs) and the config is a transfer
// instance, it resolves the connector's class (KVConnectorFactory.get_connector_class) and asks
// it whether it needs piecewise graphs; a MultiConnector asks its children
// (requiresPiecewiseForCUDAGraph). What resolving raises fails the front end there, before the
// HMA block, and with the HMA preference given too.
func cudaGraphConnectorCheck(a *ServeArgs, env map[string]string) error {
	kv := a.KVTransfer
	if !kv.buildsConnector() || !fullCUDAGraphs(a, env) {
		return nil
	}
	_, err := requiresPiecewiseForCUDAGraph(kv, kv.ExtraConfig)
	return err
}

// requiresPiecewiseForCUDAGraph is connector_cls.requires_piecewise_for_cudagraph(extra) after
// get_connector_class(k): LMCacheConnectorV1 answers extra's use_layerwise
// (vllm/distributed/kv_transfer/kv_connector/v1/lmcache_connector.py); MultiConnector
// (multi_connector.py) builds each child of extra's "connectors" as KVTransferConfig(**child) —
// without the parent's engine_id, unlike its constructor and the HMA walk — resolves its class
// and asks it with the child's own kv_connector_extra_config, stopping at the first that says
// yes; every other class, a kv_connector_module_path one included (taken to be written before
// the question), says no (KVConnectorBase_V1).
func requiresPiecewiseForCUDAGraph(k *KVTransferConfig, extra map[string]any) (bool, error) {
	if _, err := connectorClass(k); err != nil {
		return false, err
	}
	if k.connectorModulePath() != nil {
		return false, nil
	}
	switch k.Connector {
	case "LMCacheConnectorV1":
		return pyTruthy(extra["use_layerwise"]), nil
	case multiConnectorName:
	default:
		return false, nil
	}
	raw, ok := extra["connectors"]
	if !ok {
		return false, nil
	}
	yes := false
	err := eachChildMapping(raw, "vllm.config.kv_transfer.KVTransferConfig() argument after ** must be a mapping, not %s", func(m map[string]any) (bool, error) {
		child, err := newKVTransferConfig(m)
		if err != nil {
			return true, err
		}
		childExtra, _ := m["kv_connector_extra_config"].(map[string]any) // validated as a dict
		yes, err = requiresPiecewiseForCUDAGraph(child, childExtra)
		return yes, err
	})
	return yes && err == nil, err
}

// fullCUDAGraphs is whether the front end's CUDA graph mode captures full graphs when
// VllmConfig.__post_init__ (vllm/config/vllm.py) reaches its KV connector check, on a CUDA
// platform (support_static_graph_mode): --enforce-eager turns compilation and graphs off;
// TORCH_COMPILE_DISABLE=1 and VLLM_USE_BREAKABLE_CUDAGRAPH=1 turn compilation off; an unset
// compilation mode is VLLM_COMPILE above -O0; an unset graph mode is the optimization level's
// (OPTIMIZATION_LEVEL_TO_CONFIG: none at -O0, piecewise at -O1, full and piecewise at -O2 and
// -O3, -O2 by default); a mode that needs piecewise compilation without VLLM_COMPILE (and
// without breakable graphs) is none. Not modelled, as the model knows no architecture: the
// pooling and encoder-decoder overrides, the architectures that turn breakable graphs on, and
// dynamic speculative decoding's override.
func fullCUDAGraphs(a *ServeArgs, env map[string]string) bool {
	const vllmCompile = 3
	cc := a.jsonConfig("--compilation-config")
	mode, modeSet := compilationModeOf(cc["mode"])
	graphs, graphsSet := cudaGraphModeOf(cc["cudagraph_mode"])
	if a.boolFlag("--enforce-eager") {
		mode, modeSet, graphs, graphsSet = 0, true, cudaGraphMode{}, true
	}
	breakable := env["VLLM_USE_BREAKABLE_CUDAGRAPH"] == "1"
	if env["TORCH_COMPILE_DISABLE"] == "1" || breakable {
		mode, modeSet = 0, true
	}
	level, _ := optimizationLevel(a)
	if !modeSet {
		mode = 0
		if level > 0 {
			mode = vllmCompile
		}
	}
	if !graphsSet {
		graphs = [...]cudaGraphMode{{}, {piecewise: true}, {full: true, piecewise: true}, {full: true, piecewise: true}}[level]
	}
	if graphs.piecewise && mode != vllmCompile && !breakable {
		return false
	}
	return graphs.full
}

// compilationModeOf is a validated CompilationConfig.mode: its value, and whether it was given.
func compilationModeOf(v any) (int, bool) {
	switch x := v.(type) {
	case string:
		return slices.Index(compilationModes, strings.ToUpper(x)), true
	case nil:
		return 0, false
	}
	n, _ := laxInt(v)
	if n == nil {
		return 0, false
	}
	return int(n.Int64()), true
}

// cudaGraphModeOf is a validated CompilationConfig.cudagraph_mode: the member, and whether it was
// given.
func cudaGraphModeOf(v any) (cudaGraphMode, bool) {
	switch x := v.(type) {
	case string:
		return cudaGraphModes[strings.ToUpper(x)], true
	case nil:
		return cudaGraphMode{}, false
	}
	n, _ := laxInt(v)
	if n == nil || !n.IsInt64() || n.Int64() < 0 || n.Int64() >= int64(len(cudaGraphModeValues)) {
		return cudaGraphMode{}, false
	}
	return cudaGraphModes[cudaGraphModeValues[n.Int64()]], true
}

// vllmConfigFieldErrors is pydantic's validation of VllmConfig(...) (vllm/config/vllm.py), which
// create_engine_config builds last, in every front end, before its __post_init__: the fields it
// passes straight from the command line, in field order: optimization_level (argparse keeps
// --optimization-level's text; an OptimizationLevel, 0 to 3, which lax mode reads from an int's
// text) and shutdown_timeout (ge=0). The other fields are configs vLLM built.
func vllmConfigFieldErrors(a *ServeArgs) error {
	var errs []string
	if _, ok := optimizationLevel(a); !ok {
		errs = append(errs, "optimization_level: Input should be 0, 1, 2 or 3 [input_value="+pyRepr(a.lastOther("--optimization-level"))+"]")
	}
	if s, ok := a.lastOtherOK("--shutdown-timeout"); ok {
		if n, msg := laxInt(s); msg == "" && n.Sign() < 0 {
			errs = append(errs, "shutdown_timeout: Input should be greater than or equal to 0 [input_value="+n.String()+"]")
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return &PyError{Type: "pydantic_core.ValidationError", Msg: validationErrors("VllmConfig", errs)}
}

// optimizationLevel is VllmConfig.optimization_level from --optimization-level's text (O2 when
// not given), and whether VllmConfig takes it: an OptimizationLevel, 0 to 3, which lax mode
// reads from an int's text. A level it refuses reads as O2.
func optimizationLevel(a *ServeArgs) (int, bool) {
	s, given := a.lastOtherOK("--optimization-level")
	if !given {
		return 2, true
	}
	if n, msg := laxInt(s); msg == "" && n.IsInt64() && n.Int64() >= 0 && n.Int64() <= 3 {
		return int(n.Int64()), true
	}
	return 2, false
}
