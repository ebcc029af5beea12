package vllm

import (
	"strings"
	"testing"

	"github.com/widetp/widetp/report"
)

// The KV connector part of VllmConfig.__post_init__ (vllm/config/vllm.py) and of
// KVConnectorFactory.create_connector (vllm/distributed/kv_transfer/kv_connector/factory.py):
// which connector a command runs and where resolving its class fails.

func healthy(t *testing.T, procs []report.Process) {
	t.Helper()
	for _, p := range procs {
		if p.Crashed() {
			t.Errorf("%s crashed: %s", p.ID, exitText(p))
		}
	}
}

func TestKVOffloadingSizeMakesTheConnector(t *testing.T) {
	// VllmConfig._post_init_kv_transfer_config: --kv-offloading-size picks the backend's
	// connector, kv_role kv_both, in the given config or a new one (whose uuid4 engine_id every
	// process of the command then shares).
	procs := predict(t, false, "main", node("h", "vllm serve org/M -tp 2 --kv-offloading-size 10"))
	healthy(t, procs)
	w := get(t, procs, "h/0/engine-core-0/worker-1")
	if w.EngineID == "" || w.EngineID != get(t, procs, "h/0/engine-core-0").EngineID {
		t.Errorf("worker engine_id %q, engine core %q: want the offloading connector's", w.EngineID, get(t, procs, "h/0/engine-core-0").EngineID)
	}
	if w := get(t, predict(t, false, "main", node("h", "vllm serve org/M -tp 2")), "h/0/engine-core-0/worker-1"); w.EngineID != "" {
		t.Errorf("without a connector the worker has engine_id %q", w.EngineID)
	}
	// The given config keeps its engine_id; its connector is replaced.
	procs = predict(t, false, "main", node("h", `vllm serve org/M -tp 2 --kv-offloading-size 2 --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer","engine_id":"e1"}'`))
	healthy(t, procs)
	if ec := get(t, procs, "h/0/engine-core-0"); ec.EngineID != "e1" || hasAddress(ec, "nixl-side-channel") {
		t.Errorf("engine core %q with NIXL addresses %v: want engine_id e1 and the offloading connector only", ec.EngineID, hasAddress(ec, "nixl-side-channel"))
	}
	// envs.VLLM_USE_SIMPLE_KV_OFFLOAD is int() of its value, read only for the native backend.
	procs = predict(t, false, "main", node("h", "VLLM_USE_SIMPLE_KV_OFFLOAD=yes vllm serve org/M --kv-offloading-size 4"))
	crashedWith("h/0/api-server-0", "ValueError: invalid literal for int() with base 10: 'yes'")(t, procs)
	healthy(t, predict(t, false, "main", node("h", "VLLM_USE_SIMPLE_KV_OFFLOAD=yes vllm serve org/M --kv-offloading-size 4 --kv-offloading-backend lmcache")))
}

func TestAConnectorClassIsResolvedByTheFrontEnd(t *testing.T) {
	// With no --disable-hybrid-kv-cache-manager, VllmConfig.__post_init__ asks
	// KVConnectorFactory.supports_hma_config, which loads the class: an unregistered name fails
	// create_engine_config in every front end, the headless launcher's included.
	for _, name := range []string{"FooConnector", "SharedStorageConnector", "P2pNcclConnector"} {
		kv := `--kv-transfer-config '{"kv_connector":"` + name + `","kv_role":"kv_both"}'`
		procs := predict(t, false, "main",
			node("h0", "vllm serve org/M -tp 4 -dp 4 -dpl 2 --data-parallel-address h0 --data-parallel-rpc-port 13345 "+kv),
			node("h1", "vllm serve org/M -tp 4 -dp 4 -dpl 2 --data-parallel-start-rank 2 --headless --data-parallel-address h0 --data-parallel-rpc-port 13345 "+kv))
		crashedWith("h0/0/api-server-0", "ValueError: Unsupported connector type: "+name)(t, procs)
		crashedWith("h1/0/headless-0", "ValueError: Unsupported connector type: "+name)(t, procs)
	}
	// Given the preference either way, the CUDA graph check still loads the class in the front
	// end when it captures full graphs (the default); without graphs (--enforce-eager), the class
	// is first loaded where the connector is built: every worker
	// (ensure_kv_transfer_initialized), before its engine's scheduler.
	const foo = `--disable-hybrid-kv-cache-manager --kv-transfer-config '{"kv_connector":"FooConnector","kv_role":"kv_both"}'`
	crashedWith("h/0/api-server-0", "ValueError: Unsupported connector type: FooConnector")(t,
		predict(t, false, "main", node("h", "vllm serve org/M -tp 2 "+foo)))
	procs := predict(t, false, "main", node("h", "vllm serve org/M -tp 2 --enforce-eager "+foo))
	if a := get(t, procs, "h/0/api-server-0"); a.Exit != nil && strings.Contains(a.Exit.Error, "Unsupported connector") {
		t.Errorf("the front end resolved the class although the preference was given and no graphs are captured: %s", exitText(a))
	}
	crashedWith("h/0/engine-core-0/worker-1", "ValueError: Unsupported connector type: FooConnector")(t, procs)
	// A class from kv_connector_module_path is the user's: it imports; an empty path does not.
	healthy(t, predict(t, false, "main", node("h", `vllm serve org/M --kv-transfer-config '{"kv_connector":"MyConnector","kv_role":"kv_both","kv_connector_module_path":"my.connectors"}'`)))
	crashedWith("h/0/api-server-0", "ValueError: kv_connector_module_path cannot be an empty string.")(t,
		predict(t, false, "main", node("h", `vllm serve org/M --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_connector_module_path":""}'`)))
	// An empty name is a name (not None): the registry does not have it.
	crashedWith("h/0/api-server-0", "ValueError: Unsupported connector type: ")(t,
		predict(t, false, "main", node("h", `vllm serve org/M --kv-transfer-config '{"kv_connector":"","kv_role":"kv_both"}'`)))
	crashedWith("h/0/engine-core-0/worker-0", "ValueError: Unsupported connector type: ")(t,
		predict(t, false, "main", node("h", `vllm serve org/M -O0 --disable-hybrid-kv-cache-manager --kv-transfer-config '{"kv_connector":"","kv_role":"kv_both"}'`)))
}

func TestMultiConnectorChildrenAreAskedUntilOneLacksHMA(t *testing.T) {
	// MultiConnector.all_children_support_hma builds each child's KVTransferConfig in order and
	// stops at the first whose class lacks SupportsHMA (LMCacheConnectorV1): a bad child after it
	// is only met by the workers, whose MultiConnector resolves every child's class
	// (_get_connector_classes_and_configs); one before it fails the front end.
	multi := func(children string) string {
		return `vllm serve org/M --kv-transfer-config '{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":[` + children + `]}}'`
	}
	// The HMA walk alone: no CUDA graphs (-cc.cudagraph_mode none).
	procs := predict(t, false, "main", node("h", multi(`{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"},{"kv_connector":"Bar","kv_role":"kv_both"}`)+" -cc.cudagraph_mode none"))
	if a := get(t, procs, "h/0/api-server-0"); a.Exit != nil && strings.Contains(a.Exit.Error, "Bar") {
		t.Errorf("the front end met the child after one without HMA: %s", exitText(a))
	}
	crashedWith("h/0/engine-core-0/worker-0", "ValueError: Unsupported connector type: Bar")(t, procs)
	crashedWith("h/0/api-server-0", "ValueError: Unsupported connector type: Bar")(t,
		predict(t, false, "main", node("h", multi(`{"kv_connector":"NixlConnector","kv_role":"kv_both"},{"kv_connector":"Bar","kv_role":"kv_both"}`))))
	crashedWith("h/0/api-server-0", "TypeError: 'str' object is not a mapping")(t,
		predict(t, false, "main", node("h", multi(`"NixlConnector"`)+" --enforce-eager")))
	crashedWith("h/0/api-server-0", "pydantic_core.ValidationError: 1 validation error for KVTransferConfig: foo: Unexpected keyword argument [input_value=1]")(t,
		predict(t, false, "main", node("h", multi(`{"kv_connector":"NixlConnector","kv_role":"kv_both","foo":1}`))))
}

func TestMultiConnectorBuildsEveryChild(t *testing.T) {
	// vllm/distributed/kv_transfer/kv_connector/v1/multi_connector.py: with the hybrid KV cache
	// manager's preference given and no CUDA graphs, the front end does not look at the
	// children; each worker's
	// MultiConnector reads them all (_get_connector_classes_and_configs), then builds them, a
	// nested MultiConnector reading its own.
	multi := func(connectors string) string {
		return `vllm serve org/M -tp 2 --enforce-eager --disable-hybrid-kv-cache-manager --kv-transfer-config '{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":` + connectors + `}}'`
	}
	const nixl, store = `{"kv_connector":"NixlConnector","kv_role":"kv_both"}`, `{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both"}`
	healthy(t, predict(t, false, "main", node("h", multi(`[`+nixl+`,`+store+`]`))))
	for _, c := range []struct{ connectors, want string }{
		// The child gets engine_id as a keyword besides its own keys: twice if it names one.
		{`[` + nixl + `,{"kv_connector":"NixlConnector","kv_role":"kv_both","engine_id":"e"}]`, "TypeError: vllm.config.kv_transfer.KVTransferConfig() got multiple values for keyword argument 'engine_id'"},
		// Each child is asked for its engine_id with .get: a dict's keys and a string's
		// characters are strings.
		{`{"a":` + nixl + `}`, "AttributeError: 'str' object has no attribute 'get'"},
		{`"ab"`, "AttributeError: 'str' object has no attribute 'get'"},
		{`[null]`, "AttributeError: 'NoneType' object has no attribute 'get'"},
		{`3`, "TypeError: 'int' object is not iterable"},
		{`null`, "AssertionError"},
		// Every field is validated as the top-level config is, all errors of a child at once.
		{`[{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_port":"x","kv_ip":1}]`, "pydantic_core.ValidationError: 2 validation errors for KVTransferConfig: kv_ip: Input should be a valid string [input_value=1]; kv_port: Input should be a valid integer, unable to parse string as an integer [input_value='x']"},
		{`[{"kv_connector":"NixlConnector"}]`, "Value error, Please specify kv_role when kv_connector is set"},
		// Every child's class is resolved before any is built, in order.
		{`[` + nixl + `,{"kv_role":"kv_both"}]`, "ValueError: Connector name is not set in KVTransferConfig"},
		{`[{"kv_connector":"Foo","kv_role":"kv_both"},{"kv_connector":"Bar","kv_role":"kv_both"}]`, "ValueError: Unsupported connector type: Foo"},
		{`[{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":[{"kv_connector":"Bar","kv_role":"kv_both"}]}}]`, "ValueError: Unsupported connector type: Bar"},
	} {
		procs := predict(t, false, "main", node("h", multi(c.connectors)))
		if a := get(t, procs, "h/0/api-server-0"); a.Exit != nil && strings.Contains(a.Exit.Error, c.want) {
			t.Errorf("%s: the front end built the connector: %s", c.connectors, exitText(a))
		}
		crashedWith("h/0/engine-core-0/worker-1", c.want)(t, procs)
	}
}

func TestExpandableSegmentsRefuseAConnector(t *testing.T) {
	// VllmConfig._verify_kv_transfer_compat: a KV connector under
	// PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True needs the cumem allocator, which sleep mode
	// turns on (vllm/config/model.py).
	const env = "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
	const kv = ` --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'`
	crashedWith("h/0/api-server-0", "ValueError: KV connector NixlConnector is incompatible with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")(t,
		predict(t, false, "main", node("h", env+"vllm serve org/M"+kv)))
	crashedWith("h/0/api-server-0", "ValueError: KV connector OffloadingConnector is incompatible")(t,
		predict(t, false, "main", node("h", env+"vllm serve org/M --kv-offloading-size 1")))
	healthy(t, predict(t, false, "main", node("h", env+"vllm serve org/M --enable-sleep-mode"+kv)))
	healthy(t, predict(t, false, "main", node("h", env+"vllm serve org/M --enable-cumem-allocator"+kv)))
	healthy(t, predict(t, false, "main", node("h", env+"vllm serve org/M")))
}

func TestHMAEnabledRefusesAConnectorWithoutIt(t *testing.T) {
	// --no-disable-hybrid-kv-cache-manager: create_connector refuses a class without SupportsHMA
	// in every worker; NIXL's supports it.
	crashedWith("h/0/engine-core-0/worker-0", "ValueError: Connector LMCacheConnectorV1 does not support HMA but HMA is enabled.")(t,
		predict(t, false, "main", node("h", `vllm serve org/M -tp 2 --no-disable-hybrid-kv-cache-manager --kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'`)))
	// LMCacheMPConnector's class is the lmcache package's, of that name (lmcache_mp_connector.py).
	crashedWith("h/0/engine-core-0/worker-0", "ValueError: Connector LMCacheMPConnector does not support HMA but HMA is enabled.")(t,
		predict(t, false, "main", node("h", `vllm serve org/M -tp 2 --no-disable-hybrid-kv-cache-manager --kv-offloading-size 1 --kv-offloading-backend lmcache`)))
	healthy(t, predict(t, false, "main", node("h", `vllm serve org/M -tp 2 --no-disable-hybrid-kv-cache-manager --kv-transfer-config '{"kv_connector":"NixlPushConnector","kv_role":"kv_both"}'`)))
}

func TestNIXLPullAndPushAreNIXL(t *testing.T) {
	// vllm/distributed/kv_transfer/kv_connector/v1/nixl/connector.py: NixlConnector is
	// NixlPullConnector; both it and NixlPushConnector are NixlBaseConnectors, whose scheduler
	// listens for handshakes at VLLM_NIXL_SIDE_CHANNEL_PORT + data_parallel_index
	// (base_scheduler.py).
	for _, name := range []string{"NixlConnector", "NixlPullConnector", "NixlPushConnector"} {
		procs := predict(t, false, "main", node("h", `vllm serve org/M -tp 2 --kv-transfer-config '{"kv_connector":"`+name+`","kv_role":"kv_producer"}'`))
		healthy(t, procs)
		if ec := get(t, procs, "h/0/engine-core-0"); !hasAddress(ec, "nixl-side-channel") {
			t.Errorf("%s: the engine core has no NIXL side channel", name)
		}
	}
	if ec := get(t, predict(t, false, "main", node("h", `vllm serve org/M -tp 2 --kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_producer"}'`)), "h/0/engine-core-0"); hasAddress(ec, "nixl-side-channel") {
		t.Errorf("LMCache's engine core listens on a NIXL side channel")
	}
}

func hasAddress(p report.Process, channel string) bool {
	for _, a := range p.Addresses {
		if a.Channel == channel {
			return true
		}
	}
	return false
}

// TestCUDAGraphCheckResolvesTheConnector: VllmConfig.__post_init__ (vllm/config/vllm.py) asks the
// KV connector's class whether it needs piecewise CUDA graphs when the front end would capture
// full ones, before the HMA block and whatever the HMA preference: resolving the class there
// fails the front end. The graph mode is the one __post_init__ holds at that point:
// OPTIMIZATION_LEVEL_TO_CONFIG's default for the level (full and piecewise from -O2, the
// default), --enforce-eager's none, none for a piecewise mode without VLLM_COMPILE
// (TORCH_COMPILE_DISABLE=1, -cc.mode none; VLLM_USE_BREAKABLE_CUDAGRAPH=1 keeps it).
// MultiConnector asks each child (vllm/distributed/kv_transfer/kv_connector/v1/
// multi_connector.py), and LMCacheConnectorV1 says yes with use_layerwise
// (lmcache_connector.py), which ends the walk.
func TestCUDAGraphCheckResolvesTheConnector(t *testing.T) {
	const foo = ` --disable-hybrid-kv-cache-manager --kv-transfer-config '{"kv_connector":"FooConnector","kv_role":"kv_both"}'`
	multi := func(children string) string {
		return ` --kv-transfer-config '{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":` + children + `}}'`
	}
	const lmcache, bar = `{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}`, `{"kv_connector":"Bar","kv_role":"kv_both"}`
	const layerwise = `{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both","kv_connector_extra_config":{"use_layerwise":true}}`
	for _, tt := range []struct {
		name, line string
		frontEnd   string // what the front end raises; "" when the workers meet the class first
		workers    string
	}{
		{"the default level captures full graphs", "vllm serve org/M -tp 2" + foo, "ValueError: Unsupported connector type: FooConnector", ""},
		{"-O3 too", "vllm serve org/M -tp 2 -O3" + foo, "ValueError: Unsupported connector type: FooConnector", ""},
		{"-O1 captures piecewise graphs only", "vllm serve org/M -tp 2 -O1" + foo, "", "ValueError: Unsupported connector type: FooConnector"},
		{"-O0 none", "vllm serve org/M -tp 2 -O 0" + foo, "", "ValueError: Unsupported connector type: FooConnector"},
		{"--enforce-eager overrides a full mode given", "vllm serve org/M -tp 2 --enforce-eager -cc.cudagraph_mode full" + foo, "", "ValueError: Unsupported connector type: FooConnector"},
		{"a full mode given at -O0", "vllm serve org/M -tp 2 -O0 -cc.cudagraph_mode FULL_DECODE_ONLY" + foo, "ValueError: Unsupported connector type: FooConnector", ""},
		{"no compilation: the piecewise default is dropped", "vllm serve org/M -tp 2 -cc.mode none" + foo, "", "ValueError: Unsupported connector type: FooConnector"},
		{"no compilation keeps a full-only mode", "vllm serve org/M -tp 2 -cc '{\"mode\":0,\"cudagraph_mode\":2}'" + foo, "ValueError: Unsupported connector type: FooConnector", ""},
		{"TORCH_COMPILE_DISABLE=1", "TORCH_COMPILE_DISABLE=1 vllm serve org/M -tp 2" + foo, "", "ValueError: Unsupported connector type: FooConnector"},
		{"breakable graphs keep the piecewise mode", "VLLM_USE_BREAKABLE_CUDAGRAPH=1 vllm serve org/M -tp 2" + foo, "ValueError: Unsupported connector type: FooConnector", ""},
		{"a child after LMCache without HMA is still asked", "vllm serve org/M -tp 2" + multi(`[`+lmcache+`,`+bar+`]`), "ValueError: Unsupported connector type: Bar", ""},
		{"a layerwise LMCache child ends the walk", "vllm serve org/M -tp 2" + multi(`[`+layerwise+`,`+bar+`]`), "", "ValueError: Unsupported connector type: Bar"},
		{"a child is KVTransferConfig(**child): a string is no mapping", "vllm serve org/M -tp 2" + multi(`["NixlConnector"]`),
			"TypeError: vllm.config.kv_transfer.KVTransferConfig() argument after ** must be a mapping, not str", ""},
		{"a dict of children is walked by its keys", "vllm serve org/M -tp 2" + multi(`{"a":`+lmcache+`}`),
			"TypeError: vllm.config.kv_transfer.KVTransferConfig() argument after ** must be a mapping, not str", ""},
		{"null children are not iterable", "vllm serve org/M -tp 2" + multi(`null`), "TypeError: 'NoneType' object is not iterable", ""},
		{"each child is validated, without the parent's engine_id", "vllm serve org/M -tp 2 --disable-hybrid-kv-cache-manager" + multi(`[{"kv_connector":"NixlConnector"}]`),
			"Please specify kv_role when kv_connector is set", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			procs := predict(t, false, "main", node("h", tt.line))
			if tt.frontEnd != "" {
				crashedWith("h/0/api-server-0", tt.frontEnd)(t, procs)
				return
			}
			if a := get(t, procs, "h/0/api-server-0"); a.Exit != nil && !strings.HasPrefix(a.Exit.Error, "RuntimeError: Engine core initialization failed") {
				t.Errorf("the front end raised %s; want the workers to meet the class", exitText(a))
			}
			crashedWith("h/0/engine-core-0/worker-0", tt.workers)(t, procs)
		})
	}
	// A config that is no transfer instance (no connector) is not asked; a MultiConnector
	// without children answers no, as its constructor then fails in the workers.
	crashedWith("h/0/engine-core-0", "ValueError: Connector name is not set in KVTransferConfig")(t,
		predict(t, false, "main", node("h", "vllm serve org/M -tp 2 --kv-transfer-config.kv_role kv_both --disable-hybrid-kv-cache-manager")))
	crashedWith("h/0/engine-core-0/worker-0", "AssertionError")(t,
		predict(t, false, "main", node("h", `vllm serve org/M -tp 2 --disable-hybrid-kv-cache-manager --kv-transfer-config '{"kv_connector":"MultiConnector","kv_role":"kv_both"}'`)))
}

// TestVllmConfigFieldsFromTheCommandLine: create_engine_config passes --optimization-level's text
// and --shutdown-timeout's int straight to VllmConfig(...) (vllm/engine/arg_utils.py), whose
// pydantic validation (vllm/config/vllm.py: optimization_level an OptimizationLevel 0-3,
// shutdown_timeout ge=0) fails every front end there, the headless launcher's too.
func TestVllmConfigFieldsFromTheCommandLine(t *testing.T) {
	for flags, want := range map[string]string{
		"-O 2 --shutdown-timeout 0":   "",
		"-O' 3'":                      "",
		"-O1.0":                       "",
		"-Ox":                         "pydantic_core.ValidationError: 1 validation error for VllmConfig: optimization_level: Input should be 0, 1, 2 or 3 [input_value='x']",
		"--optimization-level 4":      "pydantic_core.ValidationError: 1 validation error for VllmConfig: optimization_level: Input should be 0, 1, 2 or 3 [input_value='4']",
		"--shutdown-timeout -1 -O=-1": "pydantic_core.ValidationError: 2 validation errors for VllmConfig: optimization_level: Input should be 0, 1, 2 or 3 [input_value='-1']; shutdown_timeout: Input should be greater than or equal to 0 [input_value=-1]",
	} {
		for line, id := range map[string]string{"vllm serve org/M -tp 2 -dp 2 ": "h/0/api-server-0", "vllm serve org/M -tp 2 -dp 2 --headless ": "h/0/headless-0"} {
			top := get(t, predict(t, false, "main", node("h", line+flags)), id)
			switch {
			case want == "" && top.Crashed():
				t.Errorf("%s%s: %s, want it to start", line, flags, exitText(top))
			case want != "" && (top.Exit == nil || top.Exit.Error != want):
				t.Errorf("%s%s: %s, want %s", line, flags, exitText(top), want)
			}
		}
	}
}
