package vllm

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/widetp/widetp/check"
	"github.com/widetp/widetp/report"
)

// Store connector configurations of the launch paths below.
const (
	storeBoth     = `--kv-transfer-config '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both"}'`
	storeProducer = `--kv-transfer-config '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_producer"}'`
	// storeNoLookup is a decode instance that never loads from the store (the enable_lookup switch
	// of mooncake/store/scheduler.py, as vLLM's disaggregated examples set it).
	storeNoLookup = `--kv-transfer-config '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_consumer","kv_connector_extra_config":{"enable_lookup":false}}'`
)

// launchRow is one real launch path: the commands as vLLM's docs, examples or tests give them, the
// identity vLLM's source gives each process, and the violations the checks must find in the
// prediction (none for a healthy deployment).
type launchRow struct {
	name, source string
	moe          bool
	profile      string
	nodes        []Node
	groups       []idGroup
	kinds        []report.Kind
	// also checks what the identity groups cannot say (worker ranks, lookups, crash texts).
	also func(t *testing.T, procs []report.Process)
}

// TestLaunchPaths runs launch commands collected from vLLM's documentation, examples and tests
// (and the Mooncake integration guides) through the model and the checks.
func TestLaunchPaths(t *testing.T) {
	rows := []launchRow{
		{
			name: "API server only on the head (-dpl 0), every engine on a headless node", moe: true, profile: "main",
			source: "docs/serving/data_parallel_deployment.md (internal LB); vllm/v1/engine/utils.py launch_core_engines (dp_rank 0 handshakes with every engine, none local)",
			nodes: []Node{
				node("n0", "vllm serve org/M --data-parallel-size 4 --data-parallel-size-local 0 --data-parallel-address n0 --data-parallel-rpc-port 13345 "+storeBoth),
				node("n1", "vllm serve org/M --headless --data-parallel-size 4 --data-parallel-size-local 4 --data-parallel-address n0 --data-parallel-rpc-port 13345 "+storeBoth),
			},
			groups: []idGroup{
				{"n0/0/api-server-0", idWant{0, nil, 0, false}},
				{"n1/0/engine-core-0", idWant{0, some(0), 0, false}},
				{"n1/0/engine-core-3", idWant{3, some(3), 3, false}},
			},
			also: func(t *testing.T, procs []report.Process) {
				if n := len(under(procs, "n0/0/api-server-0")); n != 1 {
					t.Errorf("the API-only head starts %d processes, want none besides itself", n-1)
				}
			},
		},
		{
			name: "API-only server and a headless engines server on one host, 4 API servers", moe: true, profile: "main",
			source: "tests/v1/distributed/test_internal_lb_dp.py APIOnlyServerManager",
			nodes: []Node{node("h",
				"vllm serve org/M --data-parallel-size 2 --data-parallel-size-local 0 --tensor-parallel-size 1 --port 8000 --api-server-count 4 --data-parallel-address 127.0.0.1 --data-parallel-rpc-port 13345 "+storeBoth,
				"CUDA_VISIBLE_DEVICES=0,1 vllm serve org/M --headless --data-parallel-size 2 --data-parallel-size-local 2 --tensor-parallel-size 1 --data-parallel-address 127.0.0.1 --data-parallel-rpc-port 13345 "+storeBoth)},
			groups: []idGroup{
				{"h/1/engine-core-0", idWant{0, some(0), 0, false}},
				{"h/1/engine-core-1", idWant{1, some(1), 1, false}},
			},
		},
		{
			name: "hybrid LB, two 'nodes' on one host with their own GPUs and 4 API servers each", moe: true, profile: "main",
			source: "tests/v1/distributed/test_hybrid_lb_dp.py HybridLBServerManager",
			nodes: []Node{node("h",
				"CUDA_VISIBLE_DEVICES=0,1 vllm serve org/M --data-parallel-size 4 --data-parallel-size-local 2 --data-parallel-start-rank 0 --data-parallel-hybrid-lb --tensor-parallel-size 1 --port 8000 --api-server-count 4 --data-parallel-address 127.0.0.1 --data-parallel-rpc-port 13345 "+storeBoth,
				"CUDA_VISIBLE_DEVICES=2,3 vllm serve org/M --data-parallel-size 4 --data-parallel-size-local 2 --data-parallel-start-rank 2 --data-parallel-hybrid-lb --tensor-parallel-size 1 --port 8001 --api-server-count 4 --data-parallel-address 127.0.0.1 --data-parallel-rpc-port 13345 "+storeBoth)},
			groups: []idGroup{
				{"h/0/engine-core-1", idWant{1, some(1), 1, true}},
				{"h/1/engine-core-2", idWant{2, some(0), 2, true}},
				{"h/1/engine-core-3", idWant{3, some(1), 3, true}},
			},
		},
		{
			name: "wide-EP recipe: hybrid LB, 4 nodes x 8 DP ranks, 8 API servers each, EPLB with redundant experts given as JSON strings", moe: true, profile: "main",
			source: "examples/online_serving/wide_ep/launch_server.sh (uv run vllm serve ... --data-parallel-hybrid-lb --data-parallel-start-rank $START_RANK)",
			nodes: func() []Node {
				var nodes []Node
				for k := 0; k < 4; k++ {
					nodes = append(nodes, node(fmt.Sprintf("n%d", k), fmt.Sprintf(`uv run vllm serve deepseek-ai/DeepSeek-V3-0324 \
  --data-parallel-hybrid-lb --api-server-count 8 --data-parallel-address n0 --data-parallel-rpc-port 13345 \
  --tensor-parallel-size 1 --data-parallel-size 32 --data-parallel-size-local 8 --data-parallel-start-rank %d \
  --enable-expert-parallel --no-enable-prefix-caching --max-model-len 16384 --enable-dbo --dbo-decode-token-threshold 32 \
  --async-scheduling --enable-eplb \
  --eplb-config '{"window_size":"1000","step_interval":"3000","num_redundant_experts":"32","log_balancedness":"False"}' \
  --max-num-seqs 512 \
  --compilation_config '{"pass_config":{"enable_fusion":true},"custom_ops":["+rms_norm"],"cudagraph_mode":"FULL_DECODE_ONLY"}' \
  --kv-transfer-config '{"kv_connector":"DecodeBenchConnector","kv_role":"kv_both"}'`, 8*k)))
				}
				return nodes
			}(),
			groups: []idGroup{
				{"n0/0/engine-core-7", idWant{7, some(7), 7, true}},
				{"n1/0/engine-core-9", idWant{9, some(1), 9, true}},
				{"n3/0/engine-core-31", idWant{31, some(7), 31, true}},
			},
		},
		{
			name: "external LB, co-located ranks, one GPU each through CUDA_VISIBLE_DEVICES", moe: true, profile: "main",
			source: "docs/serving/data_parallel_deployment.md (external LB); vllm/v1/worker/gpu_worker.py init_device (local rank offset by data_parallel_rank_local 0)",
			nodes: []Node{node("h",
				"CUDA_VISIBLE_DEVICES=0 vllm serve org/M --data-parallel-size 2 --data-parallel-rank 0 --port 8000 "+storeBoth,
				"CUDA_VISIBLE_DEVICES=1 vllm serve org/M --data-parallel-size 2 --data-parallel-rank 1 --port 8001 "+storeBoth)},
			groups: []idGroup{
				{"h/0/engine-core-0", idWant{0, some(0), 0, true}},
				{"h/1/engine-core-1", idWant{1, some(0), 1, true}},
			},
		},
		{
			name: "external LB with --data-parallel-size-local 1 given explicitly", moe: true, profile: "main",
			source: "vllm/engine/arg_utils.py create_engine_config (data_parallel_size_local must be 1 or None)",
			nodes: []Node{
				node("n0", "vllm serve org/M -dp 2 --data-parallel-rank 0 --data-parallel-size-local 1 --data-parallel-address n0 "+storeBoth),
				node("n1", "vllm serve org/M -dp 2 --data-parallel-rank 1 --data-parallel-size-local 1 --data-parallel-address n0 "+storeBoth),
			},
			groups: []idGroup{
				{"n0/0/engine-core-0", idWant{0, some(0), 0, true}},
				{"n1/0/engine-core-1", idWant{1, some(0), 1, true}},
			},
		},
		{
			name: "pipeline parallel across nodes: -tp 8 -pp 2 --nnodes 2, follower headless", moe: false, profile: "main",
			source: "docs/serving/parallelism_scaling.md; vllm/v1/executor/multiproc_executor.py (rank = local_world_size * node_rank_within_dp + local_rank)",
			nodes: []Node{
				node("n0", "vllm serve org/M -tp 8 -pp 2 --nnodes 2 --node-rank 0 --master-addr n0 "+storeBoth),
				node("n1", "vllm serve org/M -tp 8 -pp 2 --nnodes 2 --node-rank 1 --master-addr n0 --headless "+storeBoth),
			},
			groups: []idGroup{
				{"n0/0/engine-core-0", idWant{0, some(0), 0, false}},
				{"n1/0/headless-0", idWant{0, some(0), 0, false}},
			},
			also: func(t *testing.T, procs []report.Process) {
				w := get(t, procs, "n1/0/headless-0/worker-3")
				if *w.Rank != 11 || *w.TPRank != 3 || *w.PPRank != 1 {
					t.Errorf("follower worker-3: rank %d tp %d pp %d, want 11/3/1", *w.Rank, *w.TPRank, *w.PPRank)
				}
			},
		},
		{
			name: "prefill context parallel: ranks ordered (PP, PCP, TP), TP fastest", moe: false, profile: "main",
			source: "vllm/distributed/parallel_state.py initialize_model_parallel (ExternalDP x DP x PP x PCP x TP); vllm/config/parallel.py world_size = PP*TP*PCP",
			nodes:  []Node{node("h", "vllm serve org/M -tp 4 -pcp 2 "+storeBoth)},
			groups: []idGroup{{"h/0/engine-core-0", idWant{0, some(0), 0, false}}},
			also: func(t *testing.T, procs []report.Process) {
				w := get(t, procs, "h/0/engine-core-0/worker-6")
				if *w.Rank != 6 || *w.TPRank != 2 || *w.PPRank != 0 {
					t.Errorf("worker-6: rank %d tp %d pp %d, want 6/2/0", *w.Rank, *w.TPRank, *w.PPRank)
				}
			},
		},
		{
			name: "prefill context parallel with data parallel is refused", moe: true, profile: "main",
			source: "vllm/config/parallel.py _validate_parallel_config (PCP does not support data parallelism yet)",
			nodes:  []Node{node("h", "vllm serve org/M -tp 2 -pcp 2 -dp 2 "+storeBoth)},
			kinds:  []report.Kind{report.ProcessCrashed},
			also:   crashedWith("h/0/api-server-0", "PCP does not support data parallelism yet."),
		},
		{
			name: "Ray DP backend: one command starts every rank, per-node ordinals", moe: true, profile: "main",
			source: "docs/serving/data_parallel_deployment.md (--data-parallel-backend=ray); vllm/v1/engine/utils.py create_dp_placement_groups",
			nodes:  []Node{node("n0", "vllm serve org/M --data-parallel-size 4 --data-parallel-size-local 2 --data-parallel-backend=ray "+storeBoth)},
			groups: []idGroup{
				{"n0/0/ray-actor-1", idWant{1, some(1), 1, false}},
				{"n0/0/ray-actor-2", idWant{2, some(0), 2, false}},
			},
		},
		{
			name: "python -m vllm.entrypoints.openai.api_server runs one API server: --headless and --api-server-count start nothing else", moe: false, profile: "main",
			source: "vllm/entrypoints/openai/api_server.py __main__ (run_server); kvcache-ai/Mooncake doc/en/vllm-integration-v1.md",
			nodes:  []Node{node("h", "python3 -m vllm.entrypoints.openai.api_server --model org/M --headless -dp 2 --api-server-count 3 "+storeBoth)},
			groups: []idGroup{
				{"h/0/api-server-0", idWant{0, nil, 0, false}},
				{"h/0/engine-core-1", idWant{0, some(1), 1, false}},
			},
		},
		{
			name: "independent DP=1 instances on one host share the default lookup path: the last binder answers every producer", moe: false, profile: "main",
			source: "kvcache-ai/Mooncake doc/en/vllm-integration-v1.md (one instance per GPU); mooncake/store/scheduler.py get_zmq_rpc_path_lookup (index 0 for DP 1)",
			nodes: []Node{node("h",
				"CUDA_VISIBLE_DEVICES=0 vllm serve org/M --port 8100 "+storeProducer,
				"CUDA_VISIBLE_DEVICES=1 vllm serve org/M --port 8101 "+storeProducer)},
			kinds: []report.Kind{report.LookupMisrouted, report.LookupPathCollision},
		},
		{
			name: "decode instances with enable_lookup off still bind the lookup path but never look up", moe: false, profile: "main",
			source: "mooncake/store/scheduler.py MooncakeStoreScheduler.get_num_new_matched_tokens (returns 0 when not enable_lookup); mooncake/store/worker.py (rank 0 binds the server regardless)",
			nodes: []Node{node("h",
				"CUDA_VISIBLE_DEVICES=0 vllm serve org/M --port 8200 "+storeNoLookup,
				"CUDA_VISIBLE_DEVICES=1 vllm serve org/M --port 8201 "+storeNoLookup)},
			kinds: []report.Kind{report.LookupPathCollision},
			also: func(t *testing.T, procs []report.Process) {
				e := get(t, procs, "h/0/engine-core-0")
				if e.Lookup != nil || e.LookupRole != "" || e.MooncakeDPIndex == nil {
					t.Errorf("a scheduler that never looks up: lookup %+v role %q index %s", e.Lookup, e.LookupRole, optStr(e.MooncakeDPIndex))
				}
			},
		},
		{
			name: "VLLM_RPC_BASE_PATH=/tmp/ and /tmp name one socket file: the lookup paths collide", moe: false, profile: "main",
			source: "mooncake/store/scheduler.py get_zmq_rpc_path_lookup (f\"ipc://{base_url}/lookup_...\"); libzmq binds the file",
			nodes: []Node{node("h",
				"VLLM_RPC_BASE_PATH=/tmp CUDA_VISIBLE_DEVICES=0 vllm serve org/M --port 8000 "+storeBoth,
				"VLLM_RPC_BASE_PATH=/tmp/ CUDA_VISIBLE_DEVICES=1 vllm serve org/M --port 8001 "+storeBoth)},
			kinds: []report.Kind{report.LookupMisrouted, report.LookupPathCollision},
		},
		{
			name: "dotted kv-transfer-config keys replace the whole JSON: no connector is named, which VllmConfig refuses", moe: false, profile: "main",
			source: "vllm/utils/argparse_utils.py FlexibleArgumentParser.parse_args (dotted keys appended as one JSON after every other argument); vllm/config/vllm.py VllmConfig.__post_init__ (KVConnectorFactory.supports_hma_config)",
			nodes:  []Node{node("h", `vllm serve org/M `+storeBoth+` --kv-transfer-config.kv_role kv_both`)},
			kinds:  []report.Kind{report.ProcessCrashed},
			also:   crashedWith("h/0/api-server-0", "ValueError: Connector name is not set in KVTransferConfig"),
		},
		{
			name: "dotted kv-transfer-config keys with the HMA preference given: no connector is left, and the scheduler fails to build one", moe: false, profile: "main",
			source: "vllm/config/vllm.py VllmConfig.__post_init__ (no connector class resolved once --disable-hybrid-kv-cache-manager is set); vllm/distributed/kv_transfer/kv_transfer_state.py ensure_kv_transfer_initialized (is_kv_transfer_instance); vllm/v1/core/sched/scheduler.py Scheduler.__init__ (create_connector for any kv_transfer_config)",
			nodes:  []Node{node("h", `vllm serve org/M `+storeBoth+` --kv-transfer-config.kv_role kv_both --disable-hybrid-kv-cache-manager`)},
			kinds:  []report.Kind{report.ProcessCrashed},
			also: func(t *testing.T, procs []report.Process) {
				crashedWith("h/0/engine-core-0", "ValueError: Connector name is not set in KVTransferConfig")(t, procs)
				if w := get(t, procs, "h/0/engine-core-0/worker-0"); w.Crashed() {
					t.Errorf("the worker built a connector: %s", exitText(w))
				}
				for _, p := range procs {
					if p.MooncakeDPIndex != nil || p.LookupPath != "" || p.EngineID != "" {
						t.Errorf("%s still runs a KV connector: index %s path %q engine %q", p.ID, optStr(p.MooncakeDPIndex), p.LookupPath, p.EngineID)
					}
				}
			},
		},
		{
			name: "P/D with a MultiConnector of NIXL and the Mooncake store: the store child's lookup path", moe: false, profile: "main",
			source: "vllm/distributed/kv_transfer/kv_connector/v1/multi_connector.py (every child built, every child's get_num_new_matched_tokens asked)",
			nodes: []Node{node("h",
				`CUDA_VISIBLE_DEVICES=0 vllm serve org/M --port 8100 --kv-transfer-config '{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":[{"kv_connector":"NixlConnector","kv_role":"kv_both"},{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both","kv_connector_extra_config":{"lookup_rpc_port":5}}]}}'`,
				// Its own NIXL side-channel port: co-located NIXL instances on one port collide
				// (nixl/base_scheduler.py binds VLLM_NIXL_SIDE_CHANNEL_PORT + data_parallel_index).
				`VLLM_NIXL_SIDE_CHANNEL_PORT=5700 CUDA_VISIBLE_DEVICES=1 vllm serve org/M --port 8200 --kv-transfer-config '{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":[{"kv_connector":"NixlConnector","kv_role":"kv_both"},{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both","kv_connector_extra_config":{"lookup_rpc_port":6}}]}}'`)},
			also: func(t *testing.T, procs []report.Process) {
				if p := get(t, procs, "h/1/engine-core-0"); p.LookupPath != "ipc:///tmp/lookup_rpc_port_6_host_h_dp_rank0" {
					t.Errorf("lookup path %q", p.LookupPath)
				}
			},
		},
		{
			name: "a Mooncake store inside a nested MultiConnector runs as one at the top", moe: false, profile: "main",
			source: "vllm/distributed/kv_transfer/kv_connector/v1/multi_connector.py (a child MultiConnector is built from the registry like any child, and builds its own children)",
			nodes: []Node{node("h",
				`vllm serve org/M --kv-transfer-config '{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":[{"kv_connector":"NixlConnector","kv_role":"kv_both"},{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":[{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both","kv_connector_extra_config":{"lookup_rpc_port":7}}]}}]}}'`)},
			also: func(t *testing.T, procs []report.Process) {
				if p := get(t, procs, "h/0/engine-core-0"); p.LookupPath != "ipc:///tmp/lookup_rpc_port_7_host_h_dp_rank0" {
					t.Errorf("lookup path %q", p.LookupPath)
				}
			},
		},
		{
			name: "a MultiConnector child without kv_role fails the front end, where VllmConfig asks every child whether it supports HMA", moe: false, profile: "main",
			source: "vllm/config/vllm.py VllmConfig.__post_init__; vllm/distributed/kv_transfer/kv_connector/v1/multi_connector.py all_children_support_hma (KVTransferConfig per child); vllm/config/kv_transfer.py",
			nodes:  []Node{node("h", `vllm serve org/M --kv-transfer-config '{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":[{"kv_connector":"NixlConnector"}]}}'`)},
			kinds:  []report.Kind{report.ProcessCrashed},
			also:   crashedWith("h/0/api-server-0", "Please specify kv_role when kv_connector is set"),
		},
		{
			name: "with --disable-hybrid-kv-cache-manager and no CUDA graphs the child without kv_role fails every worker at connector init instead", moe: false, profile: "main",
			source: "vllm/distributed/kv_transfer/kv_connector/v1/multi_connector.py _get_connector_classes_and_configs (KVTransferConfig per child); vllm/config/kv_transfer.py; vllm/config/vllm.py (--enforce-eager: no CUDA graph check)",
			nodes:  []Node{node("h", `vllm serve org/M --enforce-eager --disable-hybrid-kv-cache-manager --kv-transfer-config '{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":[{"kv_connector":"NixlConnector"}]}}'`)},
			kinds:  []report.Kind{report.ProcessCrashed},
			also:   crashedWith("h/0/engine-core-0/worker-0", "Please specify kv_role when kv_connector is set"),
		},
		{
			name: "the P2P MooncakeConnector and LMCache run no lookup server", moe: false, profile: "main",
			source: "vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py (side channels, no LookupKeyServer); examples/online_serving/disaggregated_serving/mooncake_connector/run_mooncake_connector.sh",
			nodes: []Node{node("h",
				`VLLM_MOONCAKE_BOOTSTRAP_PORT=8998 CUDA_VISIBLE_DEVICES=0 vllm serve org/M --port 8010 --kv-transfer-config "{\"kv_connector\":\"MooncakeConnector\",\"kv_role\":\"kv_producer\"}" > prefill1.log 2>&1 &`,
				`CUDA_VISIBLE_DEVICES=1 vllm serve org/M --port 8020 --kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_consumer"}' > decode1.log 2>&1 &`)},
			also: func(t *testing.T, procs []report.Process) {
				for _, p := range procs {
					if p.LookupPath != "" || p.MooncakeDPIndex != nil || p.Segment != "" {
						t.Errorf("%s: lookup %q index %s", p.ID, p.LookupPath, optStr(p.MooncakeDPIndex))
					}
				}
			},
		},
		{
			name: "--served-model-name with an option first is refused before argparse", moe: false, profile: "main",
			source: "vllm/utils/argparse_utils.py FlexibleArgumentParser.parse_args",
			nodes:  []Node{node("h", "vllm serve --served-model-name x -tp 2 org/M")},
			kinds:  []report.Kind{report.ProcessCrashed},
			also:   crashedWith("h/0/api-server-0", "ValueError: `model` should be provided as the first positional argument"),
		},
		{
			name: "EPLB without expert parallelism is refused", moe: true, profile: "main",
			source: "vllm/config/parallel.py _validate_parallel_config",
			nodes:  []Node{node("h", "vllm serve org/M -dp 2 --enable-eplb "+storeBoth)},
			kinds:  []report.Kind{report.ProcessCrashed},
			also:   crashedWith("h/0/api-server-0", "enable_expert_parallel must be True to use EPLB."),
		},
		{
			name: "redundant experts without EPLB are refused (dotted --eplb-config key)", moe: true, profile: "main",
			source: "vllm/config/parallel.py _validate_parallel_config",
			nodes:  []Node{node("h", "vllm serve org/M -dp 2 -ep --eplb-config.num_redundant_experts 32 "+storeBoth)},
			kinds:  []report.Kind{report.ProcessCrashed},
			also:   crashedWith("h/0/api-server-0", "num_redundant_experts is set to 32 but EPLB is not enabled."),
		},
		{
			name: "fault tolerance with internal LB is refused", moe: true, profile: "main",
			source: "vllm/engine/arg_utils.py create_engine_config (fault tolerance requires external LB)",
			nodes:  []Node{node("h", "vllm serve org/M -dp 4 -ep --enable-fault-tolerance "+storeBoth)},
			kinds:  []report.Kind{report.ProcessCrashed},
			also:   crashedWith("h/0/api-server-0", "ValueError: Fault tolerance requires external load balancer mode (--data-parallel-external-lb or --data-parallel-rank). Internal LB mode is not supported."),
		},
		{
			name: "fault tolerance with several API servers is refused", moe: true, profile: "main",
			source: "vllm/config/parallel.py _validate_parallel_config (_api_process_count set by run_multi_api_server)",
			nodes:  []Node{node("h", "vllm serve org/M -dp 4 -ep --data-parallel-rank 0 --api-server-count 4 --enable-fault-tolerance "+storeBoth)},
			kinds:  []report.Kind{report.ProcessCrashed},
			also:   crashedWith("h/0/api-server-0", "Fault tolerance requires a single API server process (--api-server-count=1), but got 4."),
		},
		{
			name: "elastic EP: the engines handshake over TCP and each replica keeps its own torch world", moe: true, profile: "main",
			source: "vllm/v1/engine/utils.py launch_core_engines (handshake_local_only is False under elastic EP); vllm/distributed/parallel_state.py init_distributed_environment",
			nodes:  []Node{node("h", "vllm serve org/M -dp 4 -ep --enable-eplb --enable-elastic-ep --api-server-count 4 "+storeBoth)},
			groups: []idGroup{{"h/0/engine-core-3", idWant{3, some(3), 3, false}}},
			also: func(t *testing.T, procs []report.Process) {
				e := get(t, procs, "h/0/engine-core-0")
				if len(e.Rendezvous) == 0 || e.Rendezvous[0].Address != "127.0.0.1:29550" {
					t.Errorf("engine handshake %+v, want the TCP one at 127.0.0.1:29550", e.Rendezvous)
				}
				// init_distributed_environment does not widen the world to the DP replicas under
				// elastic EP: each engine's workers meet alone.
				a, b := get(t, procs, "h/0/engine-core-0/worker-0"), get(t, procs, "h/0/engine-core-3/worker-0")
				if len(a.Rendezvous) != 1 || a.Replica == b.Replica || !strings.HasSuffix(a.Replica, "/dp0") || !strings.HasSuffix(b.Replica, "/dp0") {
					t.Errorf("worlds %+v %s and %+v %s, want one each", a.Rendezvous, a.Replica, b.Rendezvous, b.Replica)
				}
			},
		},
		{
			name: "elastic EP with external LB is refused", moe: true, profile: "main",
			source: "vllm/config/parallel.py __post_init__ (Elastic EP relies on a single API server)",
			nodes:  []Node{node("h", "vllm serve org/M -dp 2 --data-parallel-rank 0 -ep --enable-eplb --enable-elastic-ep "+storeBoth)},
			kinds:  []report.Kind{report.ProcessCrashed},
			also:   crashedWith("h/0/api-server-0", "NotImplementedError: Elastic EP is not compatible with data_parallel_external_lb or data_parallel_hybrid_lb."),
		},
		{
			name: "elastic EP with pipeline parallelism is refused", moe: true, profile: "main",
			source: "vllm/config/parallel.py __post_init__",
			nodes:  []Node{node("h", "vllm serve org/M -dp 2 -pp 2 -ep --enable-eplb --enable-elastic-ep "+storeBoth)},
			kinds:  []report.Kind{report.ProcessCrashed},
			also:   crashedWith("h/0/api-server-0", "Elastic EP is not supported with pipeline parallelism (pipeline_parallel_size=2)."),
		},
		{
			name: "headless with --data-parallel-size-local 0 is refused", moe: true, profile: "main",
			source: "vllm/entrypoints/cli/serve.py run_headless",
			nodes:  []Node{node("n1", "vllm serve org/M --headless -dp 2 --data-parallel-size-local 0 --data-parallel-address n0 "+storeBoth)},
			kinds:  []report.Kind{report.ProcessCrashed},
			also:   crashedWith("n1/0/headless-0", "ValueError: data_parallel_size_local must be > 0 in headless mode"),
		},
		{
			name: "a world larger than the node with mp forced: the workers past the devices fail", moe: false, profile: "main",
			source: "vllm/v1/worker/gpu_worker.py init_device (PR #45026: the DP-adjusted local rank must be below the device count)",
			nodes:  []Node{node("h", "vllm serve org/M -tp 16 --distributed-executor-backend mp "+storeBoth)},
			kinds:  []report.Kind{report.ProcessCrashed},
			also: func(t *testing.T, procs []report.Process) {
				crashedWith("h/0/engine-core-0/worker-9", "AssertionError: DP adjusted local rank 9 is out of bounds for 8 devices.")(t, procs)
				if w := get(t, procs, "h/0/engine-core-0/worker-7"); w.Crashed() {
					t.Errorf("worker 7 fits the node: %s", exitText(w))
				}
			},
		},
		{
			name: "fault tolerance needs an FT-capable all2all backend: the workers refuse any other", moe: true, profile: "main",
			source: "vllm/v1/worker/gpu_worker.py Worker.__init__, vllm/v1/worker/sentinel/gpu_worker_sentinel.py WorkerSentinel (naive is replaced by allgather_reducescatter first: config/parallel.py)",
			nodes: []Node{node("h0", "vllm serve org/M -dp 2 --data-parallel-rank 0 -dpa h0 -ep --enable-fault-tolerance --all2all-backend naive "+storeBoth),
				node("h1", "vllm serve org/M -dp 2 --data-parallel-rank 1 -dpa h0 -ep --enable-fault-tolerance "+storeBoth)},
			kinds: []report.Kind{report.ProcessCrashed},
			also: func(t *testing.T, procs []report.Process) {
				for _, id := range []string{"h0/0/engine-core-0/worker-0", "h1/0/engine-core-1/worker-0"} {
					crashedWith(id, "ValueError: Fault tolerance requires an FT-capable all2all backend (one of ['deepep_low_latency', 'nixl_ep']), but got 'allgather_reducescatter'.")(t, procs)
					if w := get(t, procs, id); w.Replica != "" || w.EngineID != "" || len(w.Rendezvous) != 0 {
						t.Errorf("%s raised in Worker.__init__, before its torch world: replica %q, engine_id %q, rendezvous %+v", id, w.Replica, w.EngineID, w.Rendezvous)
					}
				}
			},
		},
		{
			name: "NIC selection: the PCIe mapping without the selection variables fails every worker before its Worker exists", moe: true, profile: "main",
			source: "vllm/v1/executor/vllm_net_devices.py set_worker_net_device, called by multiproc_executor.py WorkerProc.worker_main before WorkerProc.__init__",
			nodes: []Node{node("h0", "VLLM_GPU_NIC_PCIE_MAPPING=0000:1a:00.0=0000:1b:00.0 VLLM_NIC_SELECTION_VARS=' ' vllm serve org/M -tp 2 -ep -dp 2 --data-parallel-rank 0 -dpa h0 --enable-fault-tolerance "+storeBoth),
				node("h1", "vllm serve org/M -tp 2 -ep -dp 2 --data-parallel-rank 1 -dpa h0 --enable-fault-tolerance --all2all-backend nixl_ep "+storeBoth)},
			// h1's workers wait in vain for h0's at the DP group's torch world.
			kinds: []report.Kind{report.ProcessCrashed, report.RendezvousFailed},
			also: func(t *testing.T, procs []report.Process) {
				// Before the fault-tolerance sentinel, and before WorkerBase.__init__ sets the
				// worker's rank in its ParallelConfig: both workers still say rank 0.
				for _, id := range []string{"h0/0/engine-core-0/worker-0", "h0/0/engine-core-0/worker-1"} {
					crashedWith(id, "RuntimeError: VLLM_GPU_NIC_PCIE_MAPPING is set but VLLM_NIC_SELECTION_VARS is not; both must be set together.")(t, procs)
					if w := get(t, procs, id); w.Rank == nil || *w.Rank != 0 || w.TPRank == nil || *w.TPRank != 0 {
						t.Errorf("%s: rank %v tp rank %v, want 0 and 0", id, w.Rank, w.TPRank)
					}
				}
			},
		},
		{
			name: "NIC selection variables without the mapping fail the workers too", moe: false, profile: "main",
			source: "vllm/v1/executor/vllm_net_devices.py set_worker_net_device",
			nodes:  []Node{node("h", "VLLM_NIC_SELECTION_VARS=NCCL_IB_HCA vllm serve org/M -tp 2 "+storeBoth)},
			kinds:  []report.Kind{report.ProcessCrashed},
			also:   crashedWith("h/0/engine-core-0/worker-1", "RuntimeError: VLLM_NIC_SELECTION_VARS is set but VLLM_GPU_NIC_PCIE_MAPPING is not; both must be set together."),
		},
		{
			name: "VLLM_MQ_MAX_CHUNK_BYTES_MB that int() refuses: the replica's engine core fails before its workers; the headless follower never reads it", moe: true, profile: "main",
			source: "vllm/v1/executor/multiproc_executor.py MultiprocExecutor._init_executor (node_rank_within_dp == 0, after get_file_store_init_method); vllm/envs.py",
			nodes: []Node{node("h0", "VLLM_MQ_MAX_CHUNK_BYTES_MB=16MB vllm serve org/M -tp 16 --nnodes 2 --node-rank 0 --master-addr h0 "+storeBoth),
				node("h1", "VLLM_MQ_MAX_CHUNK_BYTES_MB=16MB vllm serve org/M -tp 16 --nnodes 2 --node-rank 1 --master-addr h0 --headless "+storeBoth)},
			// The follower's workers wait in vain for the head's.
			kinds: []report.Kind{report.ProcessCrashed, report.RendezvousFailed},
			also: func(t *testing.T, procs []report.Process) {
				crashedWith("h0/0/engine-core-0", "ValueError: invalid literal for int() with base 10: '16MB'")(t, procs)
				if ws := under(procs, "h0/0/engine-core-0/"); len(ws) != 0 {
					t.Errorf("the engine core started %d workers, want none", len(ws))
				}
				if w := get(t, procs, "h1/0/headless-0/worker-0"); w.Crashed() && strings.Contains(w.Exit.Error, "invalid literal") {
					t.Errorf("the follower read it: %s", exitText(w))
				}
			},
		},
		{
			name: "VLLM_MQ_MAX_CHUNK_BYTES_MB is the multiproc executor's alone: the uni executor starts", moe: false, profile: "main",
			source: "vllm/v1/executor/uniproc_executor.py (reads no such variable)",
			nodes:  []Node{node("h", "VLLM_MQ_MAX_CHUNK_BYTES_MB=x vllm serve org/M "+storeBoth)},
		},
		{
			name: "VLLM_MQ_MAX_CHUNK_BYTES_MB is the multiproc executor's alone: the Ray executor starts", moe: false, profile: "main",
			source: "vllm/v1/executor/ray_executor.py (reads no such variable; ray_executor_v2.py, behind VLLM_USE_RAY_V2_EXECUTOR_BACKEND, does)",
			nodes:  []Node{node("h", "VLLM_MQ_MAX_CHUNK_BYTES_MB=x vllm serve org/M -tp 2 --distributed-executor-backend ray "+storeBoth)},
		},
		{
			name: "VLLM_DISTRIBUTED_USE_SPLIT_GROUP that int() refuses: every worker fails right before its torch world, with its own rank", moe: false, profile: "main",
			source: "vllm/distributed/parallel_state.py init_distributed_environment (read before init_process_group); vllm/envs.py",
			nodes:  []Node{node("h", "VLLM_DISTRIBUTED_USE_SPLIT_GROUP=true vllm serve org/M -tp 2 "+storeBoth)},
			kinds:  []report.Kind{report.ProcessCrashed},
			also:   workerOneCrashedBeforeItsWorld("ValueError: invalid literal for int() with base 10: 'true'"),
		},
		{
			name: "VLLM_FLOAT32_MATMUL_PRECISION outside its choices: every worker fails in Worker.__init__, with its own rank, before its torch world", moe: false, profile: "main",
			source: "vllm/v1/worker/gpu_worker.py Worker.__init__ (envs.VLLM_FLOAT32_MATMUL_PRECISION); vllm/envs.py env_with_choices (case-insensitive)",
			nodes:  []Node{node("h", "VLLM_FLOAT32_MATMUL_PRECISION=low vllm serve org/M -tp 2 "+storeBoth)},
			kinds:  []report.Kind{report.ProcessCrashed},
			also:   workerOneCrashedBeforeItsWorld("ValueError: Invalid value 'low' for VLLM_FLOAT32_MATMUL_PRECISION. Valid options: ['highest', 'high', 'medium']."),
		},
		{
			name: "VLLM_FLOAT32_MATMUL_PRECISION is read in any case", moe: false, profile: "main",
			source: "vllm/envs.py env_with_choices (case_sensitive=False)",
			nodes:  []Node{node("h", "VLLM_FLOAT32_MATMUL_PRECISION=High vllm serve org/M -tp 2 "+storeBoth)},
		},
		{
			name: "fault tolerance with an FT-capable all2all backend starts", moe: true, profile: "main",
			source: "vllm/v1/worker/sentinel/gpu_worker_sentinel.py FT_BACKEND_SET",
			nodes: []Node{node("h0", "vllm serve org/M -dp 2 --data-parallel-rank 0 -dpa h0 -ep --enable-fault-tolerance --all2all-backend deepep_low_latency "+storeBoth),
				node("h1", "vllm serve org/M -dp 2 --data-parallel-rank 1 -dpa h0 -ep --enable-fault-tolerance --all2all-backend nixl_ep "+storeBoth)},
		},
		{
			name: "--device-ids picks the node's GPUs: each DP engine takes its slice of them", moe: true, profile: "main",
			source: "vllm/engine/arg_utils.py _resolve_device_ids; vllm/v1/worker/gpu_worker.py init_device (assigned_physical_gpu_ids)",
			nodes:  []Node{node("h", `vllm serve org/M -dp 2 -tp 2 --device-ids "4,5,6,7" `+storeBoth)},
			groups: []idGroup{{"h/0/engine-core-1", idWant{1, some(1), 1, false}}},
		},
		{
			name: "--device-ids shorter than the world: workers past it and the replica's share fail", moe: false, profile: "main",
			source: "vllm/v1/worker/gpu_worker.py init_device (assigned_physical_gpu_ids bounds)",
			nodes:  []Node{node("h", "vllm serve org/M -tp 4 --device-ids 0,1 "+storeBoth)},
			kinds:  []report.Kind{report.ProcessCrashed},
			also: func(t *testing.T, procs []report.Process) {
				crashedWith("h/0/engine-core-0/worker-0", "AssertionError: local_world_size (4) exceeds assigned_physical_gpu_ids count (2)")(t, procs)
				crashedWith("h/0/engine-core-0/worker-3", "AssertionError: local_rank 3 is out of bounds for assigned_physical_gpu_ids [0, 1]")(t, procs)
			},
		},
		{
			name: "--device-ids composes with CUDA_VISIBLE_DEVICES: an index past the visible ones is refused", moe: false, profile: "main",
			source: "vllm/engine/arg_utils.py _resolve_device_ids",
			nodes:  []Node{node("h", "CUDA_VISIBLE_DEVICES=2,3 vllm serve org/M -tp 2 --device-ids 0,2 "+storeBoth)},
			kinds:  []report.Kind{report.ProcessCrashed},
			also:   crashedWith("h/0/api-server-0", "ValueError: --device-ids index 2 is out of range for CUDA_VISIBLE_DEVICES=2,3 (2 devices visible)"),
		},
		{
			name: "a DP supervisor gives each child its slice of the devices", moe: true, profile: "main",
			source: "vllm/entrypoints/openai/dp_supervisor.py _build_device_ids; vllm/v1/worker/gpu_worker.py init_device",
			nodes:  []Node{node("h", "vllm serve org/M -dp 4 -dpl 4 -tp 2 -dpm "+storeBoth)},
			groups: []idGroup{{"h/0/engine-core-3", idWant{3, some(0), 3, true}}},
		},
		{
			name: "a DP supervisor's slices past the node's devices: those children's workers fail", moe: true, profile: "main",
			source: "vllm/entrypoints/openai/dp_supervisor.py _build_device_ids (child 2 gets devices 4,5 of a 4-GPU node)",
			nodes:  []Node{{Host: "h", GPUs: 4, Commands: []string{"vllm serve org/M -dp 4 -dpl 4 -tp 2 -dpm " + storeBoth}}},
			kinds:  []report.Kind{report.ProcessCrashed},
			also: func(t *testing.T, procs []report.Process) {
				crashedWith("h/0/engine-core-2/worker-0", "torch.AcceleratorError: CUDA error: invalid device ordinal")(t, procs)
				if w := get(t, procs, "h/0/engine-core-1/worker-1"); w.Crashed() {
					t.Errorf("child 1's worker fits: %s", exitText(w))
				}
			},
		},
		{
			// With TP*PP 0 a child's slice is the empty list, which _resolve_device_ids takes for
			// no device ids (`if not self.device_ids`), not an unparsable flag: the child gets to
			// ParallelConfig, which refuses the size.
			name: "a DP supervisor's empty slices are no device ids", moe: true, profile: "main",
			source: "vllm/entrypoints/openai/dp_supervisor.py _build_device_ids; vllm/engine/arg_utils.py _resolve_device_ids",
			nodes:  []Node{node("h", "vllm serve org/M -dp 2 -dpl 2 -tp 2 -pp 0 -dpm --device-ids 0,1 "+storeBoth)},
			kinds:  []report.Kind{report.ProcessCrashed},
			also:   crashedWith("h/0/api-server-0", "pipeline_parallel_size: Input should be greater than or equal to 1 [input_value=0]"),
		},
		{
			// ServeSubcommand.cmd sets api_server_count to 0 for --headless before it runs the
			// supervisor, whose __init__ validates the arguments a second time.
			name: "a headless DP supervisor refuses the API server count --headless gave it", moe: true, profile: "main",
			source: "vllm/entrypoints/cli/serve.py ServeSubcommand.cmd; vllm/entrypoints/openai/dp_supervisor.py DPSupervisor.__init__",
			nodes:  []Node{node("h", "vllm serve org/M -dp 4 -dpl 2 -dpm --headless "+storeBoth)},
			kinds:  []report.Kind{report.ProcessCrashed},
			also:   crashedWith("h/0/dp-supervisor-0", "ValueError: Error: --data-parallel-multi-port-external-lb currently requires --api-server-count=1"),
		},
		{
			name: "a DP supervisor whose --device-ids cannot cover a child dies of it", moe: true, profile: "main",
			source: "vllm/entrypoints/openai/dp_supervisor.py _build_device_ids",
			nodes:  []Node{node("h", "vllm serve org/M -dp 4 -dpl 2 -tp 2 -dpm --device-ids 0,1,2 "+storeBoth)},
			kinds:  []report.Kind{report.ProcessCrashed},
			also:   crashedWith("h/0/dp-supervisor-0", "ValueError: --device-ids has 3 entries, but DP rank 1 needs devices [2, 4)"),
		},
		{
			name: "--device-ids with a duplicate is refused", moe: false, profile: "main",
			source: "vllm/engine/arg_utils.py _resolve_device_ids",
			nodes:  []Node{node("h", "vllm serve org/M -tp 2 --device-ids 1,1 "+storeBoth)},
			kinds:  []report.Kind{report.ProcessCrashed},
			also:   crashedWith("h/0/api-server-0", "ValueError: --device-ids must not contain duplicates: [1, 1]"),
		},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			t.Logf("source: %s", row.source)
			procs := predict(t, row.moe, row.profile, row.nodes...)
			checkIdentityRow(t, procs, row.groups, len(row.kinds) == 0)
			got := report.KindSet(check.Run(procs))
			want := append([]report.Kind{}, row.kinds...)
			if len(want) == 0 {
				want = []report.Kind{}
			}
			if !reflect.DeepEqual(got, want) {
				for _, v := range check.Run(procs) {
					t.Log(v.Message)
				}
				t.Errorf("violations %v, want %v", got, want)
			}
			if row.also != nil {
				row.also(t, procs)
			}
		})
	}
}

// crashedWith checks that a process exited with an error containing text.
// workerOneCrashedBeforeItsWorld: h/0/engine-core-0/worker-1 crashed with text after its Worker
// set its rank (1) and before it joined its torch world (no replica).
func workerOneCrashedBeforeItsWorld(text string) func(t *testing.T, procs []report.Process) {
	return func(t *testing.T, procs []report.Process) {
		t.Helper()
		crashedWith("h/0/engine-core-0/worker-1", text)(t, procs)
		if w := get(t, procs, "h/0/engine-core-0/worker-1"); w.Rank == nil || *w.Rank != 1 || w.Replica != "" {
			t.Errorf("worker 1: rank %v replica %q, want rank 1 and no torch world", w.Rank, w.Replica)
		}
	}
}

func crashedWith(id, text string) func(t *testing.T, procs []report.Process) {
	return func(t *testing.T, procs []report.Process) {
		t.Helper()
		p := get(t, procs, id)
		if !p.Crashed() || !strings.Contains(p.Exit.Error, text) {
			t.Errorf("%s: %s, want a crash with %q", id, exitText(p), text)
		}
	}
}
