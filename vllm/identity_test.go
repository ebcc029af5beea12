package vllm

import (
	"fmt"
	"testing"

	"github.com/widetp/widetp/report"
)

// store is a --kv-transfer-config that runs the Mooncake store connector.
const store = `--kv-transfer-config '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both"}'`

// wideTP builds the wide-TP deployment of spec §4 (D = 2 replicas of TP 16 over 4 nodes of 8
// GPUs: nodes 0,1 are replica 0, nodes 2,3 replica 1, nodes 0 and 2 the heads). perNode returns
// the extra flags of node k; followers (k odd) always get --headless.
func wideTP(perNode func(k int) string) []Node {
	var nodes []Node
	for k := 0; k < 4; k++ {
		cmd := fmt.Sprintf("vllm serve org/M -tp 16 -dp 2 --nnodes 4 --node-rank %d --master-addr h0 --data-parallel-address h0 %s %s", k, store, perNode(k))
		if k%2 == 1 {
			cmd += " --headless"
		}
		nodes = append(nodes, node(fmt.Sprintf("h%d", k), cmd))
	}
	return nodes
}

// idWant is one row of spec §4: the DP identity every process of a group holds.
type idWant struct {
	rank  int
	local *int // nil: None
	index int
	leo   bool // local_engines_only
}

// TestIdentityRows encodes spec §4, one row per launch path × process kind × model kind. Every
// process under each listed ID (the process and its descendants) must hold the row's identity
// and be running.
func TestIdentityRows(t *testing.T) {
	rows := []struct {
		name, source string
		moe          bool
		profile      string
		nodes        []Node
		groups       []idGroup
	}{
		{
			name: "(a) one node, internal LB, engine i and its workers, MoE", moe: true, profile: "main",
			source: "vllm/v1/engine/core.py run_engine_core; vllm/v1/engine/utils.py launch_core_engines",
			nodes:  []Node{node("h", "vllm serve org/M -dp 4 "+store)},
			groups: []idGroup{
				{"h/0/engine-core-0", idWant{0, some(0), 0, false}},
				{"h/0/engine-core-3", idWant{3, some(3), 3, false}},
			},
		},
		{
			name: "(a) one node, internal LB, dense: reconfigure_for_independent_dp_rank", moe: false, profile: "main",
			source: "vllm/config/parallel.py reconfigure_for_independent_dp_rank",
			nodes:  []Node{node("h", "vllm serve org/M -dp 4 "+store)},
			groups: []idGroup{
				{"h/0/engine-core-2", idWant{0, some(2), 2, false}},
			},
		},
		{
			name: "(b) multi-node internal LB, headless follower with start rank, MoE", moe: true, profile: "main",
			source: "vllm/entrypoints/cli/serve.py run_headless; vllm/engine/arg_utils.py create_engine_config",
			nodes: []Node{
				node("h0", "vllm serve org/M -dp 4 -dpl 2 --data-parallel-address h0 "+store),
				node("h1", "vllm serve org/M -dp 4 -dpl 2 --data-parallel-start-rank 2 --data-parallel-address h0 --headless "+store),
			},
			groups: []idGroup{
				{"h0/0/engine-core-1", idWant{1, some(1), 1, false}},
				{"h1/0/engine-core-2", idWant{2, some(0), 2, false}},
				{"h1/0/engine-core-3", idWant{3, some(1), 3, false}},
			},
		},
		{
			name: "(b) multi-node internal LB, dense", moe: false, profile: "main",
			source: "vllm/v1/engine/core.py run_engine_core",
			nodes: []Node{
				node("h0", "vllm serve org/M -dp 4 -dpl 2 --data-parallel-address h0 "+store),
				node("h1", "vllm serve org/M -dp 4 -dpl 2 --data-parallel-start-rank 2 --data-parallel-address h0 --headless "+store),
			},
			groups: []idGroup{{"h1/0/engine-core-3", idWant{0, some(1), 3, false}}},
		},
		{
			name: "(c) external LB, one vllm serve per replica (co-located), MoE", moe: true, profile: "main",
			source: "vllm/engine/arg_utils.py create_engine_config (external LB: L = 1)",
			nodes: []Node{node("h",
				"vllm serve org/M -dp 2 --data-parallel-rank 0 --port 8000 "+store,
				"vllm serve org/M -dp 2 --data-parallel-rank 1 --port 8001 "+store)},
			groups: []idGroup{
				{"h/0/engine-core-0", idWant{0, some(0), 0, true}},
				{"h/1/engine-core-1", idWant{1, some(0), 1, true}},
			},
		},
		{
			name: "(c) external LB, dense, where vLLM still allows it", moe: false, profile: "main+dense_external_dp=allow",
			source: "vllm/engine/arg_utils.py create_engine_config; vllm/v1/engine/core.py run_engine_core",
			nodes: []Node{node("h",
				"vllm serve org/M -dp 2 --data-parallel-rank 0 --port 8000 "+store,
				"vllm serve org/M -dp 2 --data-parallel-rank 1 --port 8001 "+store)},
			groups: []idGroup{{"h/1/engine-core-1", idWant{0, some(0), 1, true}}},
		},
		{
			name: "(d) hybrid LB, engine j of the node with start rank S, MoE", moe: true, profile: "main",
			source: "vllm/engine/arg_utils.py create_engine_config (hybrid inferred from a start rank)",
			nodes: []Node{
				node("h0", "vllm serve org/M -dp 4 -dpl 2 -dph --data-parallel-address h0 "+store),
				node("h1", "vllm serve org/M -dp 4 -dpl 2 --data-parallel-start-rank 2 --data-parallel-address h0 "+store),
			},
			groups: []idGroup{
				{"h0/0/engine-core-1", idWant{1, some(1), 1, true}},
				{"h1/0/engine-core-3", idWant{3, some(1), 3, true}},
			},
		},
		{
			name: "(d) hybrid LB, dense", moe: false, profile: "main",
			source: "vllm/v1/engine/core.py run_engine_core",
			nodes: []Node{
				node("h0", "vllm serve org/M -dp 4 -dpl 2 -dph --data-parallel-address h0 "+store),
				node("h1", "vllm serve org/M -dp 4 -dpl 2 --data-parallel-start-rank 2 --data-parallel-address h0 "+store),
			},
			groups: []idGroup{{"h1/0/engine-core-2", idWant{0, some(0), 2, true}}},
		},
		{
			name: "(e1) wide-TP internal LB: heads and followers, MoE", moe: true, profile: "main",
			source: "vllm/engine/arg_utils.py create_engine_config (--nnodes); vllm/entrypoints/cli/serve.py run_headless",
			nodes: wideTP(func(k int) string {
				if k == 2 {
					return "--headless"
				}
				return ""
			}),
			groups: []idGroup{
				{"h0/0/engine-core-0", idWant{0, some(0), 0, false}},
				{"h2/0/engine-core-1", idWant{1, some(0), 1, false}},
				{"h1/0/headless-0", idWant{0, nil, 0, false}},
				{"h3/0/headless-0", idWant{1, nil, 1, false}},
			},
		},
		{
			name: "(e1) wide-TP, one replica over two nodes: follower local rank 0, not None", moe: false, profile: "main",
			source: "vllm/config/parallel.py __post_init__ (env fallback when DP == 1)",
			nodes: []Node{
				node("h0", "vllm serve org/M -tp 16 --nnodes 2 --node-rank 0 --master-addr h0 "+store),
				node("h1", "vllm serve org/M -tp 16 --nnodes 2 --node-rank 1 --master-addr h0 --headless "+store),
			},
			groups: []idGroup{
				{"h0/0/engine-core-0", idWant{0, some(0), 0, false}},
				{"h1/0/headless-0", idWant{0, some(0), 0, false}},
			},
		},
		{
			name: "(e2) wide-TP external LB: every node passes --data-parallel-rank N", moe: true, profile: "main",
			source: "vllm/engine/arg_utils.py create_engine_config; vllm/entrypoints/cli/serve.py run_headless",
			nodes:  wideTP(func(k int) string { return fmt.Sprintf("--data-parallel-rank %d", k/2) }),
			groups: []idGroup{
				{"h0/0/engine-core-0", idWant{0, some(0), 0, true}},
				{"h2/0/engine-core-1", idWant{1, some(0), 1, true}},
				{"h1/0/headless-0", idWant{0, nil, 0, true}},
				{"h3/0/headless-0", idWant{1, nil, 1, true}},
			},
		},
		{
			name: "(e3) wide-TP, head start rank auto-switches to external; headless never infers hybrid", moe: true, profile: "main",
			source: "vllm/engine/arg_utils.py create_engine_config (hybrid with L == 1 -> external)",
			nodes: wideTP(func(k int) string {
				// Replica 0's head names its start rank 0 too: since PR #47692 that makes it
				// external LB, so rank 0's front end accepts replica 1's non-headless engine
				// (vllm/v1/engine/utils.py wait_for_engine_startup).
				return fmt.Sprintf("--data-parallel-start-rank %d", k/2)
			}),
			groups: []idGroup{
				{"h2/0/engine-core-1", idWant{1, some(0), 1, true}},
				{"h3/0/headless-0", idWant{1, nil, 1, false}},
			},
		},
		{
			name: "(f) Ray, actor i, per-node ordinal (strict packing, 2 ranks a node), MoE", moe: true, profile: "main",
			source: "vllm/v1/engine/utils.py CoreEngineActorManager.create_dp_placement_groups",
			nodes:  []Node{node("h", "vllm serve org/M -dp 4 -dpl 2 -tp 4 --data-parallel-backend ray "+store)},
			groups: []idGroup{
				{"h/0/ray-actor-1", idWant{1, some(1), 1, false}},
				{"h/0/ray-actor-2", idWant{2, some(0), 2, false}},
				{"h/0/ray-actor-3", idWant{3, some(1), 3, false}},
			},
		},
		{
			name: "(f) Ray, actor i, dense", moe: false, profile: "main",
			source: "vllm/v1/engine/utils.py CoreEngineActorManager; vllm/config/parallel.py reconfigure_for_independent_dp_rank",
			nodes:  []Node{node("h", "vllm serve org/M -dp 4 -tp 2 --data-parallel-backend ray "+store)},
			groups: []idGroup{{"h/0/ray-actor-3", idWant{0, some(3), 3, false}}},
		},
		{
			name: "(g) offline SPMD: DP 1 on the command line, VLLM_DP_* in the environment", moe: true, profile: "main",
			source: "vllm/config/parallel.py __post_init__ (env fallback); vllm/envs.py",
			nodes: []Node{node("h",
				"VLLM_DP_SIZE=2 VLLM_DP_RANK=0 VLLM_DP_MASTER_IP=h VLLM_DP_MASTER_PORT=13345 vllm serve org/M --port 8000 "+store,
				"VLLM_DP_SIZE=2 VLLM_DP_RANK=1 VLLM_DP_RANK_LOCAL=1 VLLM_DP_MASTER_IP=h VLLM_DP_MASTER_PORT=13345 vllm serve org/M --port 8001 "+store)},
			groups: []idGroup{
				{"h/0/engine-core-0", idWant{0, some(0), 0, false}},
				{"h/1/engine-core-1", idWant{1, some(1), 1, false}},
			},
		},
	}
	for _, row := range rows {
		// The DP identity does not depend on the Mooncake index rule: every row holds under
		// pre-48061 too (where some processes then crash computing that index).
		profiles := []string{row.profile}
		if row.profile == "main" {
			profiles = append(profiles, "pre-48061")
		}
		for _, profile := range profiles {
			t.Run(row.name+"/"+profile, func(t *testing.T) {
				t.Logf("source: %s", row.source)
				checkIdentityRow(t, predict(t, row.moe, profile, row.nodes...), row.groups, profile == "main")
			})
		}
	}
}

// idGroup is a process (and its descendants) and the identity they hold.
type idGroup struct {
	id   string
	want idWant
}

func checkIdentityRow(t *testing.T, procs []report.Process, groups []idGroup, healthy bool) {
	t.Helper()
	for _, g := range groups {
		group := under(procs, g.id)
		if len(group) == 0 {
			get(t, procs, g.id) // fails listing the IDs
		}
		for _, p := range group {
			if p.DataParallelRank != g.want.rank || optStr(p.DataParallelRankLocal) != optStr(g.want.local) ||
				p.DataParallelIndex != g.want.index || p.LocalEnginesOnly != g.want.leo {
				t.Errorf("%s: rank=%d local=%s index=%d leo=%v, want rank=%d local=%s index=%d leo=%v",
					p.ID, p.DataParallelRank, optStr(p.DataParallelRankLocal), p.DataParallelIndex, p.LocalEnginesOnly,
					g.want.rank, optStr(g.want.local), g.want.index, g.want.leo)
			}
		}
	}
	for _, p := range procs {
		if healthy && p.Crashed() {
			t.Errorf("%s crashed: %s", p.ID, exitText(p))
		}
	}
}
