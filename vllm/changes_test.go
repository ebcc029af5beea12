package vllm

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/widetp/widetp/report"
)

// TestEngineIDDPSuffix encodes PR #46628 (vllm/v1/engine/core.py run_engine_core): a DP supervisor
// starts one external-LB server per local rank, every child has local_dp_rank 0, so the old
// suffix gives them all `_dp0`; the new one suffixes the global rank.
func TestEngineIDDPSuffix(t *testing.T) {
	cmd := `vllm serve org/M -dp 4 -dpl 2 --data-parallel-multi-port-external-lb --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both","engine_id":"E"}'`
	tests := []struct {
		profile string
		want    map[string]string
	}{
		{"main+engine_id_dp_suffix=local", map[string]string{"h/0/engine-core-0": "E_dp0", "h/0/engine-core-1": "E_dp0", "h/0/engine-core-1/worker-0": "E_dp0"}},
		{"main", map[string]string{"h/0/engine-core-0": "E_dp0", "h/0/engine-core-1": "E_dp1", "h/0/engine-core-1/worker-0": "E_dp1",
			// The launchers build no connector, so they hold no engine_id (report.Process.EngineID).
			"h/0/api-server-1": "", "h/0/dp-supervisor-0": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.profile, func(t *testing.T) {
			procs := predict(t, true, tt.profile, node("h", cmd))
			for id, want := range tt.want {
				if got := get(t, procs, id).EngineID; got != want {
					t.Errorf("%s: engine_id %q, want %q", id, got, want)
				}
			}
			sup := get(t, procs, "h/0/dp-supervisor-0")
			if sup.Role != report.RoleDPSupervisor || get(t, procs, "h/0/api-server-1").Parent != sup.ID {
				t.Errorf("supervisor tree wrong: %+v", sup)
			}
		})
	}
}

// TestRayEngineIDSuffix: the Ray actor manager suffixes each actor's engine_id with its global DP
// rank whatever engine_id_dp_suffix says (vllm/v1/engine/utils.py _apply_dp_identity_suffix, PR
// #41792, before #46628 touched run_engine_core); with strict packing two actors share a per-node
// ordinal, so a local suffix would collide.
func TestRayEngineIDSuffix(t *testing.T) {
	cmd := `vllm serve org/M -dp 4 -dpl 2 -tp 2 --data-parallel-backend ray --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both","engine_id":"E"}'`
	for _, profile := range []string{"main", "main+engine_id_dp_suffix=local"} {
		procs := predict(t, true, profile, node("h", cmd))
		for i := 0; i < 4; i++ {
			a := get(t, procs, fmt.Sprintf("h/0/ray-actor-%d", i))
			if want := fmt.Sprintf("E_dp%d", i); a.EngineID != want {
				t.Errorf("%s: %s engine_id %q, want %q", profile, a.ID, a.EngineID, want)
			}
		}
	}
}

// TestNNodesWithinDP encodes PR #53743's first half (vllm/config/parallel.py nnodes_within_dp):
// external LB with more DP ranks than nodes floors nnodes_within_dp to 0, and the executor's
// world_size % nnodes_within_dp (vllm/v1/executor/multiproc_executor.py _get_parallel_sizes)
// raises at the modulo; clamped, the engines start.
func TestNNodesWithinDP(t *testing.T) {
	nodes := func() []Node {
		var out []Node
		for k := 0; k < 2; k++ {
			var cmds []string
			for j := 0; j < 2; j++ {
				cmds = append(cmds, fmt.Sprintf("vllm serve org/M -dp 4 -tp 4 --nnodes 2 --node-rank %d --data-parallel-external-lb --data-parallel-rank %d --port %d --master-addr h0 --data-parallel-address h0",
					k, 2*k+j, 8000+j))
			}
			out = append(out, node(fmt.Sprintf("h%d", k), cmds...))
		}
		return out
	}()
	t.Run("floor", func(t *testing.T) {
		procs := predict(t, true, "main+nnodes_within_dp=floor", nodes...)
		ec := get(t, procs, "h1/1/engine-core-3")
		if ec.Exit == nil || ec.Exit.Error != "ZeroDivisionError: integer modulo by zero" {
			t.Errorf("engine core: %s", exitText(ec))
		}
		api := get(t, procs, "h1/1/api-server-0")
		if api.Exit == nil || api.Exit.Error != "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP3': 1}" {
			t.Errorf("api server: %s", exitText(api))
		}
	})
	t.Run("clamp", func(t *testing.T) {
		procs := predict(t, true, "main", nodes...)
		for _, p := range procs {
			if p.Crashed() {
				t.Errorf("%s: %s", p.ID, exitText(p))
			}
		}
		if w := get(t, procs, "h1/1/engine-core-3/worker-3"); *w.Rank != 3 || w.NodeRankWithinDP != 0 {
			t.Errorf("worker rank %s node rank within dp %d", optStr(w.Rank), w.NodeRankWithinDP)
		}
	})
}

// TestExternalLBRank encodes PR #53743's second half (vllm/engine/arg_utils.py
// create_engine_config): with --nnodes, the rank inferred from --node-rank used to overwrite an
// explicit --data-parallel-rank, so two co-located ranks claimed the same DP rank.
func TestExternalLBRank(t *testing.T) {
	var nodes []Node
	for k := 0; k < 2; k++ {
		var cmds []string
		for j := 0; j < 2; j++ {
			cmds = append(cmds, fmt.Sprintf("vllm serve org/M -dp 4 -tp 4 --nnodes 2 --node-rank %d --data-parallel-external-lb --data-parallel-rank %d --port %d --master-addr h0 --data-parallel-address h0",
				k, 2*k+j, 8000+j))
		}
		nodes = append(nodes, node(fmt.Sprintf("h%d", k), cmds...))
	}
	t.Run("infer overrides the explicit rank", func(t *testing.T) {
		procs := predict(t, true, "main+external_lb_rank=infer", nodes...)
		if a, b := get(t, procs, "h1/0/api-server-0"), get(t, procs, "h1/1/api-server-0"); a.DataParallelRank != 2 || b.DataParallelRank != 2 {
			t.Errorf("ranks %d and %d, want both 2", a.DataParallelRank, b.DataParallelRank)
		}
		failed := false
		for _, p := range procs {
			for _, r := range p.Rendezvous {
				failed = failed || r.Error != ""
			}
		}
		if !failed {
			t.Error("two engines claiming DP rank 2 must fail their rendezvous")
		}
	})
	t.Run("explicit keeps it", func(t *testing.T) {
		procs := predict(t, true, "main", nodes...)
		if p := get(t, procs, "h1/1/engine-core-3"); p.DataParallelIndex != 3 || p.Crashed() {
			t.Errorf("engine core 3: index %d, %s", p.DataParallelIndex, exitText(p))
		}
	})
	// The rule, with vLLM's own cases (tests/v1/engine/test_engine_args.py
	// test_external_lb_requires_explicit_rank_when_nodes_are_not_evenly_partitioned, ..._infers_rank_...,
	// ..._preserves_explicit_rank_...): without an explicit rank, --nnodes must be a multiple of D.
	for _, c := range []struct {
		dp, nnodes, tp, nodeRank int
		rank                     string // --data-parallel-rank, "" for none
		want                     int    // the DP rank; -1: refused
	}{
		{4, 2, 1, 1, "", -1}, // two ranks a node
		{2, 3, 3, 1, "", -1}, // replicas straddle nodes: nodes 0 and 1 would both infer 0
		{2, 2, 1, 1, "", 1},  // one replica a node
		{2, 4, 12, 1, "", 0}, // each replica spans two nodes
		{4, 2, 1, 1, "3", 3}, // an explicit rank is kept
		{3, 6, 2, 5, "", 2},  // two nodes a replica, three replicas
		{4, 8, 1, 3, "", 1},  // world 4 over 8 nodes does not divide: refused earlier
	} {
		name := fmt.Sprintf("dp%d-nnodes%d-tp%d-rank%q", c.dp, c.nnodes, c.tp, c.rank)
		t.Run(name, func(t *testing.T) {
			cmd := fmt.Sprintf("vllm serve org/M -dp %d -tp %d --nnodes %d --node-rank %d --master-addr h0 --data-parallel-external-lb", c.dp, c.tp, c.nnodes, c.nodeRank)
			if c.rank != "" {
				cmd += " --data-parallel-rank " + c.rank
			}
			for _, profile := range []string{"main", "main+external_lb_rank=infer"} {
				args, err := ParseServe(cmd)
				if err != nil {
					t.Fatal(err)
				}
				env, _ := readEnv(nil)
				pc, err := createEngineConfig(engineConfigInput{args: args, moe: true, profile: profileOf(t, profile), env: env, gpus: 64, hostIP: "h0", apiProcessCount: 1})
				if c.dp*c.tp%c.nnodes != 0 {
					if err == nil || !strings.Contains(err.Error(), "must evenly divide the total world size") {
						t.Errorf("%s: %v, want the world-size refusal", profile, err)
					}
					continue
				}
				inferred := c.nodeRank * (c.dp * c.tp / c.nnodes) / c.tp
				switch {
				case profile != "main":
					// Before the fix: the inferred rank, always.
					if err != nil || pc.DataParallelRank != inferred {
						t.Errorf("%s: rank %v (%v), want the inferred %d", profile, pc, err, inferred)
					}
				case c.want < 0:
					if err == nil || !strings.HasPrefix(err.Error(), "ValueError: Invalid data-parallel launch options: ") || !strings.Contains(err.Error(), "Set a unique `--data-parallel-rank`") {
						t.Errorf("main: %v, want the ValueError asking for a unique --data-parallel-rank", err)
					}
				default:
					if err != nil || pc.DataParallelRank != c.want {
						t.Errorf("main: %+v (%v), want rank %d", pc, err, c.want)
					}
				}
			}
		})
	}
}

// TestDenseExternalDP encodes create_engine_config's dense-model check (vllm/engine/arg_utils.py).
func TestDenseExternalDP(t *testing.T) {
	cmd := "vllm serve org/M -dp 2 --data-parallel-rank 1"
	rejected := predict(t, false, "main", node("h", cmd))
	if p := get(t, rejected, "h/0/api-server-0"); p.Exit == nil || !strings.HasPrefix(p.Exit.Error, "ValueError: Non-MoE models do not support external data parallel mode.") || len(rejected) != 1 {
		t.Errorf("reject: %s, %d processes", exitText(p), len(rejected))
	}
	allowed := predict(t, false, "main+dense_external_dp=allow", node("h", cmd))
	if p := get(t, allowed, "h/0/engine-core-1"); p.DataParallelRank != 0 || p.DataParallelIndex != 1 {
		t.Errorf("allow: engine rank %d index %d", p.DataParallelRank, p.DataParallelIndex)
	}
	moe := predict(t, true, "main", node("h", cmd))
	if p := get(t, moe, "h/0/engine-core-1"); p.DataParallelRank != 1 {
		t.Errorf("MoE: engine rank %d", p.DataParallelRank)
	}
}

// TestEngineIDSync encodes PRs #39907 and #44528 (vllm/distributed/kv_transfer/kv_transfer_state.py
// _sync_engine_id_across_tp): every CLI parse draws its own uuid4, so the follower's workers held
// another engine_id than rank 0 until workers broadcast it over the TP group, then the PP group.
func TestEngineIDSync(t *testing.T) {
	kv := `--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'`
	tpAcross := []Node{
		node("h0", "vllm serve org/M -tp 16 --nnodes 2 --node-rank 0 --master-addr h0 "+kv),
		node("h1", "vllm serve org/M -tp 16 --nnodes 2 --node-rank 1 --master-addr h0 --headless "+kv),
	}
	ppAcross := []Node{
		node("h0", "vllm serve org/M -tp 8 -pp 2 --nnodes 2 --node-rank 0 --master-addr h0 "+kv),
		node("h1", "vllm serve org/M -tp 8 -pp 2 --nnodes 2 --node-rank 1 --master-addr h0 --headless "+kv),
	}
	tests := []struct {
		name, profile string
		nodes         []Node
		same          bool // follower worker holds the head's engine_id
	}{
		{"none, TP across nodes", "main+engine_id_sync=none", tpAcross, false},
		{"tp, TP across nodes", "main+engine_id_sync=tp", tpAcross, true},
		{"tp, PP across nodes: the follower's TP group is all on the follower", "main+engine_id_sync=tp", ppAcross, false},
		{"tp_pp, PP across nodes", "main", ppAcross, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			procs := predict(t, false, tt.profile, tt.nodes...)
			head := get(t, procs, "h0/0/engine-core-0/worker-0").EngineID
			follower := get(t, procs, "h1/0/headless-0/worker-5")
			if (follower.EngineID == head) != tt.same || head == "" {
				t.Errorf("head %q follower %q, want same=%v", head, follower.EngineID, tt.same)
			}
			if lead := get(t, procs, "h1/0/headless-0").EngineID; lead != "" {
				t.Errorf("the headless launcher builds no connector, yet holds engine_id %q", lead)
			}
			// Worker 0 of the follower is TP rank 8: before any exchange it holds the follower's
			// own parse, another uuid4 than the head's.
			if own := get(t, procs, "h1/0/headless-0/worker-0").EngineID; tt.profile == "main+engine_id_sync=none" && own == head {
				t.Errorf("the follower's own parse must draw its own engine_id, got the head's %q", own)
			}
		})
	}
}

// TestHeadlessRankCheck encodes vLLM#20399 (vllm/entrypoints/cli/serve.py run_headless): PR
// #19790 refused a DP rank by checking the derived parallel_config.data_parallel_rank, which is
// never None, so every headless node failed; PR #20398 checks the raw --data-parallel-rank; vLLM
// main has no check. Each row is a headless node of a two-node internal-LB deployment (or of an
// external-LB wide-TP replica) and whether its launcher dies of the ValueError.
func TestHeadlessRankCheck(t *testing.T) {
	head := "vllm serve org/M -dp 4 -dpl 2 --data-parallel-address h0 --data-parallel-rpc-port 13345"
	startRank := "vllm serve org/M --headless -dp 4 -dpl 2 --data-parallel-start-rank 2 --data-parallel-address h0 --data-parallel-rpc-port 13345"
	// The external-LB wide-TP deployment of spec §4 (e2): h1 and h3 are headless followers that
	// pass their replica's --data-parallel-rank.
	wideExternal := wideTP(func(k int) string { return fmt.Sprintf("--data-parallel-rank %d", k/2) })
	const refused = "ValueError: data_parallel_rank is not applicable in headless mode"
	rows := []struct {
		name, profile, source string
		nodes                 []Node
		refused               bool
	}{
		{"derived: no rank flag, refused all the same", "main+headless_rank_check=derived", "PR #19790",
			[]Node{node("h0", head), node("h1", startRank)}, true},
		{"raw: no rank flag, starts", "main+headless_rank_check=raw", "PR #20398",
			[]Node{node("h0", head), node("h1", startRank)}, false},
		{"raw: --data-parallel-rank on a headless follower, refused", "main+headless_rank_check=raw", "PR #20398",
			wideExternal, true},
		{"none: --data-parallel-rank on a headless follower, starts", "main", "vLLM main run_headless",
			wideExternal, false},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			t.Logf("source: vllm/entrypoints/cli/serve.py run_headless (%s)", r.source)
			procs := predict(t, true, r.profile, r.nodes...)
			lead := get(t, procs, "h1/0/headless-0")
			if got := lead.Exit != nil && lead.Exit.Error == refused; got != r.refused {
				t.Fatalf("launcher %s, refused=%v", exitText(lead), r.refused)
			}
			if r.refused && len(under(procs, "h1/0/headless-0")) != 1 {
				t.Errorf("a refused launcher starts no child: %d processes", len(under(procs, "h1/0/headless-0")))
			}
			if !r.refused {
				for _, p := range procs {
					if p.Crashed() {
						t.Errorf("%s: %s", p.ID, exitText(p))
					}
				}
			}
		})
	}
}

// TestStartRankZero encodes PR #47692 (issue #47691; vllm/engine/arg_utils.py create_engine_config):
// `--data-parallel-start-rank 0` used to be read by a truthiness test, so 0 was no start rank: the
// node inferred no hybrid LB and took the rank inferred from --node-rank. Since the fix 0 is a start
// rank like any other (vLLM's own test_data_parallel_start_rank_zero_infers_hybrid_lb is the first
// row). The API server's create_engine_config decides every row; headless nodes never infer hybrid.
func TestStartRankZero(t *testing.T) {
	rows := []struct {
		name, cmd string
		// id is the process whose config the row reads.
		id string
		// per profile value: local_engines_only and data_parallel_rank
		unsetLEO, setLEO   bool
		unsetRank, setRank int
	}{
		{"-dp 4 -dpl 2 -dpr 0: hybrid LB since the fix", "vllm serve org/M -dp 4 -dpl 2 --data-parallel-start-rank 0",
			"h/0/api-server-0", false, true, 0, 0},
		{"-dp 2 -dpl 1 -dpr 0: hybrid with one local engine switches to external LB", "vllm serve org/M -dp 2 -dpl 1 --data-parallel-start-rank 0",
			"h/0/api-server-0", false, true, 0, 0},
		{"-dpr 0 on a single-node deployment (-dpl = -dp): hybrid is turned off again", "vllm serve org/M -dp 2 -dpl 2 --data-parallel-start-rank 0",
			"h/0/api-server-0", false, false, 0, 0},
		{"--nnodes with -dpr 0 on node 1: the start rank beats the inferred one", "vllm serve org/M -tp 8 -dp 2 --nnodes 2 --node-rank 1 --master-addr h --data-parallel-start-rank 0 --headless",
			"h/0/headless-0", false, false, 1, 0},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			for _, tc := range []struct {
				value string
				leo   bool
				rank  int
			}{{StartRankZeroUnset, r.unsetLEO, r.unsetRank}, {StartRankZeroSet, r.setLEO, r.setRank}} {
				pc := parallelConfigOf(t, r.cmd, strings.HasSuffix(r.id, "headless-0"), "main+start_rank_zero="+tc.value)
				if pc.LocalEnginesOnly() != tc.leo || pc.DataParallelRank != tc.rank {
					t.Errorf("start_rank_zero=%s: local_engines_only %v rank %d, want %v %d (external %v hybrid %v)",
						tc.value, pc.LocalEnginesOnly(), pc.DataParallelRank, tc.leo, tc.rank, pc.ExternalLB, pc.HybridLB)
				}
			}
		})
	}
}

// TestDPLaunchChecks encodes PR #49124 (vllm/engine/arg_utils.py create_engine_config): the
// data-parallel launch-option asserts became ValueErrors with a message per case, prefixed
// "Invalid data-parallel launch options: " (the headless/hybrid assert stayed an assert). Each row is
// the API server of one command, with the exception it dies of under each value.
func TestDPLaunchChecks(t *testing.T) {
	rows := []struct {
		name, cmd, assert, value string
	}{
		{"headless with hybrid LB (an assert in both)", "vllm serve org/M -dp 4 -dpl 2 -dph --headless",
			"AssertionError: data_parallel_hybrid_lb is not applicable in headless mode",
			"AssertionError: data_parallel_hybrid_lb is not applicable in headless mode"},
		// `vllm serve` refuses two LB modes before create_engine_config (serve.py); the api_server
		// entry point calls run_server directly.
		{"hybrid and external LB together", "python -m vllm.entrypoints.openai.api_server --model org/M -dp 4 -dpl 2 --data-parallel-hybrid-lb --data-parallel-external-lb",
			"AssertionError: data_parallel_hybrid_lb and data_parallel_external_lb cannot both be True.",
			"ValueError: Invalid data-parallel launch options: `--data-parallel-hybrid-lb` and `--data-parallel-external-lb` cannot be enabled together. Enable only one load-balancing mode."},
		{"--nnodes with the Ray DP backend", "vllm serve org/M --nnodes 2 -dpb ray",
			"AssertionError: nnodes > 1 is only supported with data_parallel_backend=mp",
			"ValueError: Invalid data-parallel launch options: `--nnodes 2` requires `--data-parallel-backend mp`; got `--data-parallel-backend ray`. Use the MP backend or set `--nnodes 1`."},
		{"--nnodes that does not divide the world", "vllm serve org/M -tp 3 --nnodes 2",
			"AssertionError: world_size=3 must be divisible by nnodes=2.",
			"ValueError: Invalid data-parallel launch options: `--nnodes 2` must evenly divide the total world size (3). Adjust `--nnodes`, `--data-parallel-size`, `--pipeline-parallel-size`, or `--tensor-parallel-size`."},
		{"--node-rank past --nnodes", "vllm serve org/M -tp 2 --nnodes 2 --node-rank 5",
			"AssertionError: node_rank=5 must be less than nnodes=2.",
			"ValueError: Invalid data-parallel launch options: `--node-rank` must be between 0 and 1; got `--node-rank 5`. Set it to this node's zero-based index."},
		{"external LB without a rank", "vllm serve org/M -dp 2 --data-parallel-external-lb",
			"AssertionError: data_parallel_rank or node_rank must be specified if data_parallel_external_lb is enable.",
			"ValueError: Invalid data-parallel launch options: `--data-parallel-external-lb` requires a data-parallel rank. Set `--data-parallel-rank`, or set `--data-parallel-size` greater than 1 and use `--nnodes` with `--node-rank` so the rank can be inferred."},
		{"external LB with a local size", "vllm serve org/M -dp 4 --data-parallel-rank 1 -dpl 2",
			"AssertionError: data_parallel_size_local must be 1 or None when data_parallel_rank is set",
			"ValueError: Invalid data-parallel launch options: an external data-parallel rank requires `--data-parallel-size-local 1`; got 2. Set it to 1 or omit it."},
		{"hybrid LB without a local size", "vllm serve org/M -dp 4 -dph",
			"AssertionError: data_parallel_size_local must be set to use data_parallel_hybrid_lb.",
			"ValueError: Invalid data-parallel launch options: `--data-parallel-hybrid-lb` requires `--data-parallel-size-local`. Set it to the number of data-parallel ranks on this node."},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			for value, want := range map[string]string{DPLaunchChecksAssert: r.assert, DPLaunchChecksValueError: r.value} {
				procs := predict(t, true, "main+dp_launch_checks="+value, node("h", r.cmd))
				top := procs[0]
				if len(procs) != 1 || top.Exit == nil || top.Exit.Error != want {
					t.Errorf("dp_launch_checks=%s: %s (%d processes), want %q", value, exitText(top), len(procs), want)
				}
			}
		})
	}
	// --data-parallel-hybrid-lb with --data-parallel-external-lb on a front end: serve.py refuses
	// two LB modes before create_engine_config sees them.
	procs := predict(t, true, "main", node("h", "vllm serve org/M -dp 4 -dpl 2 -dph --data-parallel-external-lb"))
	if p := procs[0]; p.Exit == nil || !strings.HasPrefix(p.Exit.Error, "ValueError: Cannot use more than one data parallel load balancing mode.") {
		t.Errorf("two LB modes: %s", exitText(p))
	}
}

// parallelConfigOf runs create_engine_config on one command line (MoE model, 8 GPUs).
func parallelConfigOf(t *testing.T, line string, headless bool, profile string) *ParallelConfig {
	t.Helper()
	args, err := ParseServe(line)
	if err != nil {
		t.Fatalf("parse %q: %v", line, err)
	}
	env, err := readEnv(nil)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := createEngineConfig(engineConfigInput{args: args, headless: headless, moe: true,
		profile: profileOf(t, profile), env: env, gpus: 8, hostIP: "h", apiProcessCount: 1})
	if err != nil {
		t.Fatalf("create_engine_config(%q): %v", line, err)
	}
	return pc
}

// TestProfiles: named profiles, the map form, and errors that name the unknown part.
func TestProfiles(t *testing.T) {
	m, err := ProfileNamed("main")
	if err != nil || m.MooncakeDPIndex != MooncakeDPIndexGlobal || m.NNodesWithinDP != NNodesWithinDPClamp ||
		m.EngineIDDPSuffix != EngineIDSuffixGlobal || m.DenseExternalDP != DenseExternalDPReject ||
		m.EngineIDSync != EngineIDSyncTPPP || m.ExternalLBRank != ExternalLBRankExplicit ||
		m.HeadlessRankCheck != HeadlessRankCheckNone || m.StartRankZero != StartRankZeroSet {
		t.Errorf("main = %+v, %v", m, err)
	}
	pre, err := ProfileNamed("pre-48061")
	if err != nil || pre.MooncakeDPIndex != MooncakeDPIndexLegacy {
		t.Errorf("pre-48061 = %+v, %v", pre, err)
	}
	pre.Name, m.MooncakeDPIndex, m.Name = "", MooncakeDPIndexLegacy, ""
	if pre != m {
		t.Errorf("pre-48061 must be main with the legacy index: %+v vs %+v", pre, m)
	}
	r, err := ResolveProfile("main", map[string]string{"nnodes_within_dp": "floor", "engine_id_dp_suffix": "local"})
	if err != nil || r.NNodesWithinDP != NNodesWithinDPFloor || r.EngineIDDPSuffix != EngineIDSuffixLocal ||
		r.Name != "main+engine_id_dp_suffix=local,nnodes_within_dp=floor" {
		t.Errorf("resolved = %+v, %v", r, err)
	}
	if v, ok := r.Value("nnodes_within_dp"); !ok || v != "floor" {
		t.Errorf("Value = %q %v", v, ok)
	}
	for _, bad := range []struct {
		base string
		set  map[string]string
		want string
	}{
		{"nightly", nil, `unknown profile "nightly"`},
		{"main", map[string]string{"mooncake_index": "legacy"}, `unknown change "mooncake_index"`},
		{"main", map[string]string{"mooncake_dp_index": "local"}, `unknown value "local"`},
	} {
		if _, err := ResolveProfile(bad.base, bad.set); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("ResolveProfile(%s, %v) = %v, want %q", bad.base, bad.set, err, bad.want)
		}
	}
	if err := (Profile{Name: "zero"}).Validate(); err == nil {
		t.Error("a zero profile must not validate")
	}
	if names := ProfileNames(); !reflect.DeepEqual(names, []string{"main", "main-455edc0", "pre-48061"}) {
		t.Errorf("ProfileNames = %v", names)
	}
	// The snapshot's commit: main without PR #53743's two halves and without PR #55844.
	snap, err := ProfileNamed("main-455edc0")
	m.Name, m.MooncakeDPIndex = "", MooncakeDPIndexGlobal
	want := m
	want.NNodesWithinDP, want.ExternalLBRank = NNodesWithinDPFloor, ExternalLBRankInfer
	want.KVEventsPortZero = KVEventsPortZeroOffset
	if snap.Name = ""; err != nil || snap != want {
		t.Errorf("main-455edc0 = %+v, %v; want %+v", snap, err, want)
	}
	for _, c := range Changes() {
		if len(c.Values) < 2 || c.Doc == "" {
			t.Errorf("change %s: values %v doc %q", c.Name, c.Values, c.Doc)
		}
	}
}

// With sets one change and refuses what ResolveProfile refuses; Canonical names a profile by its
// values: a named profile's name when one has them all, else main and where it differs.
func TestProfileWithAndCanonical(t *testing.T) {
	m, _ := ProfileNamed("main")
	p, err := m.With("nnodes_within_dp", NNodesWithinDPFloor)
	if err != nil || p.NNodesWithinDP != NNodesWithinDPFloor || m.NNodesWithinDP != NNodesWithinDPClamp {
		t.Fatalf("With = %+v, %v (main now %s)", p, err, m.NNodesWithinDP)
	}
	if got := p.Canonical().Name; got != "main+nnodes_within_dp=floor" {
		t.Errorf("Canonical = %q", got)
	}
	p, _ = p.With("external_lb_rank", ExternalLBRankInfer)
	p, _ = p.With("kv_events_port_zero", KVEventsPortZeroOffset)
	if got := p.Canonical().Name; got != "main-455edc0" {
		t.Errorf("main with the snapshot's three changes: Canonical = %q, want main-455edc0", got)
	}
	if got := m.Canonical().Name; got != "main" {
		t.Errorf("main: Canonical = %q", got)
	}
	for _, bad := range [][2]string{{"mooncake_index", "legacy"}, {"mooncake_dp_index", "local"}} {
		if _, err := m.With(bad[0], bad[1]); err == nil {
			t.Errorf("With(%s, %s) accepted", bad[0], bad[1])
		}
	}
}
