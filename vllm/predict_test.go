package vllm

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/widetp/widetp/report"
)

// runPlans executes hand-made plans on paper.
func runPlans(tops ...*ProcessPlan) map[string]report.Process {
	s := &sim{}
	for _, p := range tops {
		s.add(p, nil)
	}
	s.run()
	out := map[string]report.Process{}
	for _, p := range s.procs {
		out[p.rec.ID] = p.rec
	}
	return out
}

func proc(id, host string, role report.Role, rdv ...RendezvousPlan) *ProcessPlan {
	return &ProcessPlan{Identity: report.Process{ID: id, Host: host, Role: role}, Rendezvous: rdv}
}

func rdv(addr string, world, rank int) RendezvousPlan {
	return RendezvousPlan{Kind: RendezvousWorkers, Address: addr, WorldSize: world, Rank: rank}
}

func TestBarriers(t *testing.T) {
	t.Run("complete when every rank arrives once", func(t *testing.T) {
		got := runPlans(proc("a", "h", report.RoleWorker, rdv("x:1", 2, 0)), proc("b", "h", report.RoleWorker, rdv("x:1", 2, 1)))
		for _, id := range []string{"a", "b"} {
			if p := got[id]; p.Exit != nil || len(p.Rendezvous) != 1 || p.Rendezvous[0].Error != "" {
				t.Errorf("%s: %+v", id, p)
			}
		}
	})
	t.Run("a rank nobody plans is missing by number", func(t *testing.T) {
		got := runPlans(proc("a", "h", report.RoleWorker, rdv("x:1", 3, 1)))
		r := got["a"].Rendezvous
		if len(r) != 1 || !reflect.DeepEqual(r[0].Missing, []string{"rank 0", "rank 2"}) || got["a"].Exit == nil {
			t.Errorf("%+v exit %s", r, exitText(got["a"]))
		}
		if !strings.HasPrefix(got["a"].Exit.Error, "torch.distributed.DistStoreError: Timed out after 600 seconds") {
			t.Errorf("exit %q", got["a"].Exit.Error)
		}
	})
	t.Run("a member that crashed earlier is missing by ID", func(t *testing.T) {
		b := proc("b", "h", report.RoleWorker, rdv("x:1", 2, 1))
		b.Crash = &Crash{Stage: StageEngineInit, Error: "ValueError: boom"}
		got := runPlans(proc("a", "h", report.RoleWorker, rdv("x:1", 2, 0)), b)
		if r := got["a"].Rendezvous; len(r) != 1 || !reflect.DeepEqual(r[0].Missing, []string{"b"}) {
			t.Errorf("%+v", r)
		}
		if len(got["b"].Rendezvous) != 0 {
			t.Errorf("a crashed member records no barrier: %+v", got["b"].Rendezvous)
		}
	})
	t.Run("conflicting world sizes and duplicate ranks fail", func(t *testing.T) {
		got := runPlans(proc("a", "h", report.RoleWorker, rdv("x:1", 2, 0)), proc("b", "h", report.RoleWorker, rdv("x:1", 4, 1)))
		if e := got["b"].Rendezvous[0].Error; !strings.Contains(e, "b expects world size 4, rank 0 serves 2") {
			t.Errorf("error %q", e)
		}
		got = runPlans(proc("a", "h", report.RoleWorker, rdv("x:1", 2, 0)), proc("b", "h", report.RoleWorker, rdv("x:1", 2, 0)))
		if e := got["a"].Rendezvous[0].Error; !strings.Contains(e, "rank 0 claimed by a and b") {
			t.Errorf("error %q", e)
		}
	})
	t.Run("a wait cycle times out instead of hanging", func(t *testing.T) {
		got := runPlans(
			proc("a", "h", report.RoleWorker, rdv("x:1", 2, 0), rdv("x:2", 2, 0)),
			proc("b", "h", report.RoleWorker, rdv("x:2", 2, 1), rdv("x:1", 2, 1)),
		)
		for _, id := range []string{"a", "b"} {
			p := got[id]
			if !p.Crashed() || len(p.Rendezvous) != 1 || p.Rendezvous[0].Error == "" {
				t.Errorf("%s: %s %+v", id, exitText(p), p.Rendezvous)
			}
		}
	})
	t.Run("a loopback address is a barrier of each host", func(t *testing.T) {
		// simnode resolves 127.0.0.1 to the host it runs on (simnode/hosts.go), as every
		// process resolves its own loopback.
		got := runPlans(
			proc("a", "h1", report.RoleWorker, rdv("127.0.0.1:29551", 2, 0)), proc("b", "h1", report.RoleWorker, rdv("127.0.0.1:29551", 2, 1)),
			proc("c", "h2", report.RoleWorker, rdv("127.0.0.1:29551", 2, 0)), proc("d", "h2", report.RoleWorker, rdv("127.0.0.1:29551", 2, 1)),
		)
		for _, id := range []string{"a", "b", "c", "d"} {
			if p := got[id]; p.Exit != nil || len(p.Rendezvous) != 1 || p.Rendezvous[0].Error != "" || p.Rendezvous[0].Address != "127.0.0.1:29551" {
				t.Errorf("%s: %s %+v", id, exitText(p), p.Rendezvous)
			}
		}
	})
	t.Run("barriers are joined in order", func(t *testing.T) {
		got := runPlans(
			proc("a", "h", report.RoleWorker, rdv("x:1", 2, 0), rdv("x:2", 2, 0)),
			proc("b", "h", report.RoleWorker, rdv("x:1", 2, 1), rdv("x:2", 2, 1)),
		)
		if r := got["b"].Rendezvous; len(r) != 2 || r[0].Address != "x:1" || r[1].Address != "x:2" || got["b"].Exit != nil {
			t.Errorf("%+v", r)
		}
	})
}

func TestCascades(t *testing.T) {
	worker := func(id string, crash *Crash) *ProcessPlan {
		p := proc(id, "h", report.RoleWorker)
		p.Crash = crash
		return p
	}
	t.Run("a crashed child raises ChildFailure with the failed engines named", func(t *testing.T) {
		api := proc("api", "h", report.RoleAPIServer)
		api.Identity.DataParallelSize = 2
		api.ChildFailure = engineStartupFailure
		e0 := proc("e0", "h", report.RoleEngineCore)
		e1 := proc("e1", "h", report.RoleEngineCore)
		e1.Identity.DataParallelIndex = 1
		e1.ChildFailure = workerStartupFailure
		e0.Children = []*ProcessPlan{worker("e0/w", nil)}
		e1.Children = []*ProcessPlan{worker("e1/w", &Crash{Stage: StageConnectorInit, Error: "AssertionError"})}
		api.Children = []*ProcessPlan{e0, e1}
		got := runPlans(api)
		want := map[string]string{
			"e1/w": "AssertionError",
			"e1":   workerStartupFailure,
			"api":  "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP1': 1}",
		}
		for id, w := range want {
			if p := got[id]; p.Exit == nil || p.Exit.Error != w || p.Exit.Code != 1 {
				t.Errorf("%s: %s, want %q", id, exitText(p), w)
			}
		}
		for _, id := range []string{"e0", "e0/w"} {
			if p := got[id]; p.Exit == nil || p.Exit.Code != 0 || p.Crashed() {
				t.Errorf("%s must shut down cleanly with its parent: %s", id, exitText(p))
			}
		}
	})
	t.Run("StopsOnChildFailure exits cleanly and stops the siblings", func(t *testing.T) {
		h := proc("headless", "h", report.RoleHeadless)
		h.StopsOnChildFailure = true
		bad := proc("bad", "h", report.RoleEngineCore)
		bad.Crash = &Crash{Stage: StageEngineInit, Error: "ZeroDivisionError: integer division or modulo by zero"}
		h.Children = []*ProcessPlan{proc("good", "h", report.RoleEngineCore), bad}
		got := runPlans(h)
		if p := got["headless"]; p.Exit == nil || p.Crashed() {
			t.Errorf("headless: %s", exitText(p))
		}
		if p := got["good"]; p.Exit == nil || p.Crashed() {
			t.Errorf("sibling: %s", exitText(p))
		}
	})
	t.Run("a config crash starts no children", func(t *testing.T) {
		top := proc("top", "h", report.RoleAPIServer)
		top.Crash = &Crash{Stage: StageConfig, Error: "ValueError: no"}
		top.Children = []*ProcessPlan{proc("child", "h", report.RoleEngineCore, rdv("x:1", 1, 0))}
		got := runPlans(top)
		if c := got["child"]; c.Exit != nil || len(c.Rendezvous) != 0 {
			t.Errorf("child of a config crash: %s %+v", exitText(c), c.Rendezvous)
		}
	})
}

func TestLookupTakeover(t *testing.T) {
	server := func(id string, crash *Crash) *ProcessPlan {
		p := proc(id, "h", report.RoleWorker)
		p.Identity.LookupPath, p.Identity.LookupRole, p.BindsLookup, p.Crash = "ipc:///tmp/p", report.LookupServer, true, crash
		return p
	}
	client := func(id, host string) *ProcessPlan {
		p := proc(id, host, report.RoleEngineCore)
		p.Identity.LookupPath, p.Identity.LookupRole, p.ConnectsLookup = "ipc:///tmp/p", report.LookupClient, true
		return p
	}
	got := runPlans(server("s1", nil), server("s2", nil), client("c", "h"), client("far", "other"))
	if got["s1"].BindSeq != 1 || got["s2"].BindSeq != 2 {
		t.Errorf("bind seqs %d %d", got["s1"].BindSeq, got["s2"].BindSeq)
	}
	if l := got["c"].Lookup; l == nil || l.ServedBy != "s2" {
		t.Errorf("the later binder must capture the client: %+v", l)
	}
	if l := got["far"].Lookup; l == nil || l.ServedBy != "" || l.Error == "" {
		t.Errorf("ipc paths are host-local: %+v", l)
	}
	got = runPlans(server("s1", nil), server("s2", &Crash{Stage: StageConnectorInit, Error: "AssertionError"}), client("c", "h"))
	if l := got["c"].Lookup; l == nil || l.ServedBy != "s1" || got["s2"].BindSeq != 0 {
		t.Errorf("a server that crashed before binding serves nothing: %+v seq %d", l, got["s2"].BindSeq)
	}
}

func TestPredictRejectsBadInput(t *testing.T) {
	ok := node("h", "vllm serve m")
	main := profileOf(t, "main")
	tests := []struct {
		name string
		d    Deployment
		want string
	}{
		{"no nodes", Deployment{Name: "d", Profile: main}, "no nodes"},
		{"duplicate hosts", Deployment{Name: "d", Profile: main, Nodes: []Node{ok, ok}}, `host "h" appears twice`},
		{"empty host", Deployment{Name: "d", Profile: main, Nodes: []Node{{GPUs: 8}}}, "host name is empty"},
		{"host with a slash", Deployment{Name: "d", Profile: main, Nodes: []Node{{Host: "a/b", GPUs: 8}}}, `"a/b"`},
		{"no GPUs", Deployment{Name: "d", Profile: main, Nodes: []Node{{Host: "h"}}}, "GPUs must be positive"},
		{"zero profile", Deployment{Name: "d", Nodes: []Node{ok}}, "mooncake_dp_index"},
		{"external launcher", Deployment{Name: "d", Profile: main, Nodes: []Node{node("h", "vllm serve m --distributed-executor-backend external_launcher")}}, "torchrun"},
		{"absurd DP size", Deployment{Name: "d", Profile: main, Nodes: []Node{node("h", "vllm serve m -dp 100000000")}}, "not simulated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Predict(tt.d)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Predict = %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
	if _, err := PlanNode(node("h", "vllm serve m --distributed-executor-backend external_launcher"), Options{Profile: main}); !errors.Is(err, errNotSimulated) {
		t.Errorf("PlanNode external_launcher: %v", err)
	}
}

// TestConfigFailuresBecomeCrashes: what vLLM refuses while building its config ends the top
// process at StageConfig with vLLM's exception, and starts nothing.
func TestConfigFailuresBecomeCrashes(t *testing.T) {
	tests := []struct {
		name, source, line string
		moe                bool
		want               string
	}{
		{"argparse error", "argparse", "vllm serve m -tp x", true, "SystemExit: 2 (vllm serve: error: argument --tensor-parallel-size/-tp: invalid int value"},
		{"shell error", "POSIX shell", "vllm serve 'm", true, "shell: unterminated single quote"},
		{"bad env int (read in ParallelConfig.__post_init__: pydantic wraps it)", "vllm/envs.py, vllm/config/parallel.py", "VLLM_DP_RANK=x vllm serve m", true, "pydantic_core.ValidationError: 1 validation error for ParallelConfig: Value error, invalid literal for int() with base 10: 'x'"},
		// The parser's own default ParallelConfig() (arg_utils.py _compute_kwargs) takes the
		// offline fallback whatever -dp says: its validator refuses a DP size below its local 1,
		// and it reads VLLM_DP_SIZE before VLLM_DP_RANK.
		{"env DP size below one, whatever the flags", "vllm/engine/arg_utils.py _compute_kwargs, vllm/config/parallel.py", "VLLM_DP_SIZE=0 vllm serve m -dp 2", true,
			"pydantic_core.ValidationError: 1 validation error for ParallelConfig: Value error, data_parallel_size_local (1) must be <= data_parallel_size (0)"},
		{"env DP size read first", "vllm/config/parallel.py ParallelConfig.__post_init__", "VLLM_DP_RANK=x VLLM_DP_SIZE=y vllm serve m", true,
			"pydantic_core.ValidationError: 1 validation error for ParallelConfig: Value error, invalid literal for int() with base 10: 'y'"},
		// The deprecated VLLM_PREFIX_CACHE_RETENTION_INTERVAL is int()-ed by CacheConfig's default
		// factory while the parser is built, before the parser's default ParallelConfig() reads
		// the DP variables; VLLM_BATCH_INVARIANT is read by that ParallelConfig's _verify_args,
		// after them and before any field of the command's own configs.
		{"env retention interval read first", "vllm/config/cache.py _get_prefix_cache_retention_interval", "VLLM_DP_SIZE=0 VLLM_PREFIX_CACHE_RETENTION_INTERVAL=x vllm serve m", true,
			"ValueError: invalid literal for int() with base 10: 'x'"},
		{"env retention interval is the field's default", "vllm/config/cache.py prefix_cache_retention_interval Field(ge=0)", "VLLM_PREFIX_CACHE_RETENTION_INTERVAL=-3 vllm serve m --block-size 0", true,
			"pydantic_core.ValidationError: 2 validation errors for CacheConfig: block_size: Input should be greater than 0 [input_value=0]; prefix_cache_retention_interval: Input should be greater than or equal to 0 [input_value=-3]"},
		// CompilationConfig's compile_cache_save_format default factory reads its variable
		// (env_with_choices, case-sensitive) after CacheConfig's and before the DP variables.
		{"env compile cache format", "vllm/config/compilation.py compile_cache_save_format; vllm/envs.py env_with_choices", "VLLM_DP_SIZE=0 VLLM_COMPILE_CACHE_SAVE_FORMAT=Binary vllm serve m", true,
			"ValueError: Invalid value 'Binary' for VLLM_COMPILE_CACHE_SAVE_FORMAT. Valid options: ['binary', 'unpacked']."},
		{"env compile cache format after the retention interval", "vllm/engine/arg_utils.py add_cli_args (CacheConfig before CompilationConfig)", "VLLM_COMPILE_CACHE_SAVE_FORMAT=x VLLM_PREFIX_CACHE_RETENTION_INTERVAL=y vllm serve m", true,
			"ValueError: invalid literal for int() with base 10: 'y'"},
		{"env batch invariance after the DP variables", "vllm/config/parallel.py _verify_args (envs.VLLM_BATCH_INVARIANT)", "VLLM_BATCH_INVARIANT=true vllm serve m -tp 0", true,
			"pydantic_core.ValidationError: 1 validation error for ParallelConfig: Value error, invalid literal for int() with base 10: 'true'"},
		{"env batch invariance, DP size first", "vllm/config/parallel.py _validate_parallel_config before _verify_args", "VLLM_BATCH_INVARIANT=x VLLM_DP_SIZE=0 vllm serve m", true,
			"data_parallel_size_local (1) must be <= data_parallel_size (0)"},
		// CacheConfig(...) is built before any DP check and before ParallelConfig(...); pydantic
		// reports every broken field constraint at once, in field order.
		{"block size 0", "vllm/config/cache.py CacheConfig Field(gt=0)", "vllm serve m --block-size 0", true,
			"pydantic_core.ValidationError: 1 validation error for CacheConfig: block_size: Input should be greater than 0 [input_value=0]"},
		{"cache fields before parallel ones", "vllm/engine/arg_utils.py create_engine_config", "vllm serve m -tp 0 --gpu-memory-utilization 1.5 --block-size -16", true,
			"pydantic_core.ValidationError: 2 validation errors for CacheConfig: block_size: Input should be greater than 0 [input_value=-16]; gpu_memory_utilization: Input should be less than or equal to 1 [input_value=1.5]"},
		{"cache fields in field order", "vllm/config/cache.py", "vllm serve m --replayssm-buffer-len 0 --prefix-cache-retention-interval -1 --gpu-memory-utilization 0 --mamba-block-size None", true,
			"pydantic_core.ValidationError: 3 validation errors for CacheConfig: gpu_memory_utilization: Input should be greater than 0 [input_value=0.0]; prefix_cache_retention_interval: Input should be greater than or equal to 0 [input_value=-1]; replayssm_buffer_len: Input should be greater than 0 [input_value=0]"},
		{"two LB modes", "vllm/entrypoints/cli/serve.py ServeSubcommand.cmd", "vllm serve m -dp 2 --data-parallel-rank 0 --data-parallel-start-rank 0", true, "ValueError: Cannot use more than one data parallel load balancing mode"},
		{"api servers with headless", "serve.py ServeSubcommand.cmd", "vllm serve m --headless --api-server-count 2", true, "ValueError: --api-server-count=2 cannot be used with --headless"},
		{"hybrid and headless", "arg_utils.py create_engine_config", "vllm serve m -dp 2 -dpl 1 --headless -dph", true, "AssertionError: data_parallel_hybrid_lb is not applicable in headless mode"},
		{"nnodes with ray", "arg_utils.py create_engine_config", "vllm serve m --nnodes 2 --data-parallel-backend ray", true, "ValueError: Invalid data-parallel launch options: `--nnodes 2` requires `--data-parallel-backend mp`; got `--data-parallel-backend ray`. Use the MP backend or set `--nnodes 1`."},
		{"world not divisible by nodes", "arg_utils.py create_engine_config", "vllm serve m -tp 3 --nnodes 2", true, "ValueError: Invalid data-parallel launch options: `--nnodes 2` must evenly divide the total world size (3)."},
		{"node rank past nnodes", "arg_utils.py create_engine_config", "vllm serve m -tp 2 --nnodes 2 --node-rank 2", true, "ValueError: Invalid data-parallel launch options: `--node-rank` must be between 0 and 1; got `--node-rank 2`."},
		{"external LB local size", "arg_utils.py create_engine_config", "vllm serve m -dp 4 --data-parallel-rank 1 -dpl 2", true, "ValueError: Invalid data-parallel launch options: an external data-parallel rank requires `--data-parallel-size-local 1`; got 2. Set it to 1 or omit it."},
		{"hybrid LB without a local size", "arg_utils.py create_engine_config", "vllm serve m -dp 4 -dph", true, "ValueError: Invalid data-parallel launch options: `--data-parallel-hybrid-lb` requires `--data-parallel-size-local`."},
		{"hybrid and external LB", "arg_utils.py create_engine_config", "vllm serve m -dp 4 -dpl 2 -dph --data-parallel-external-lb", true, "ValueError: Cannot use more than one data parallel load balancing mode."},
		// argparse takes any int; ParallelConfig's field constraints refuse these when
		// create_engine_config builds it (pydantic validates fields before __post_init__).
		{"negative DP rank", "config/parallel.py ParallelConfig Field(ge=0)", "vllm serve m -dp 2 --data-parallel-rank -1", true,
			"pydantic_core.ValidationError: 1 validation error for ParallelConfig: data_parallel_rank: Input should be greater than or equal to 0 [input_value=-1]"},
		{"zero sizes, every field at once", "config/parallel.py ParallelConfig Field(ge=1)", "vllm serve m -tp 0 -dp 0 --headless", true,
			"pydantic_core.ValidationError: 2 validation errors for ParallelConfig: tensor_parallel_size: Input should be greater than or equal to 1 [input_value=0]; data_parallel_size: Input should be greater than or equal to 1 [input_value=0]"},
		{"ParallelConfig's other field constraints, in field order", "config/parallel.py ParallelConfig Field(ge=1) max_parallel_loading_workers, Field(ge=0) ubatch_size and the DBO thresholds",
			"vllm serve m -dcp 0 --dbo-prefill-token-threshold -2 --node-rank -1 --ubatch-size -5 --max-parallel-loading-workers 0 --dbo-decode-token-threshold -1 -pp 0", true,
			"pydantic_core.ValidationError: 7 validation errors for ParallelConfig: pipeline_parallel_size: Input should be greater than or equal to 1 [input_value=0]; max_parallel_loading_workers: Input should be greater than or equal to 1 [input_value=0]; ubatch_size: Input should be greater than or equal to 0 [input_value=-5]; dbo_decode_token_threshold: Input should be greater than or equal to 0 [input_value=-1]; dbo_prefill_token_threshold: Input should be greater than or equal to 0 [input_value=-2]; node_rank: Input should be greater than or equal to 0 [input_value=-1]; decode_context_parallel_size: Input should be greater than or equal to 1 [input_value=0]"},
		{"a None loading-worker count is the default", "config/parallel.py max_parallel_loading_workers: int | None", "vllm serve m --max-parallel-loading-workers None -tp 0", true,
			"pydantic_core.ValidationError: 1 validation error for ParallelConfig: tensor_parallel_size: Input should be greater than or equal to 1 [input_value=0]"},
		// The numa field validators run with the field constraints (before the model validator
		// that wants --numa-bind), after nnodes and before decode_context_parallel_size.
		{"numa validators, in field order", "config/parallel.py _validate_numa_bind_nodes, _validate_numa_bind_cpus", "vllm serve m -dcp 0 --numa-bind-cpus 0-3 5-2 --numa-bind-nodes 0 -1 --nnodes 0", true,
			"pydantic_core.ValidationError: 4 validation errors for ParallelConfig: nnodes: Input should be greater than or equal to 1 [input_value=0]; Value error, numa_bind_nodes must contain non-negative integers.; Value error, numa_bind_cpus ranges must be ascending, but got '5-2'.; decode_context_parallel_size: Input should be greater than or equal to 1 [input_value=0]"},
		{"numactl CPU list syntax", "config/parallel.py _NUMACTL_CPUSET_PATTERN", "vllm serve m --numa-bind-cpus 0-3,,5", true,
			"pydantic_core.ValidationError: 1 validation error for ParallelConfig: Value error, numa_bind_cpus entries must use numactl CPU list syntax, for example '0-3' or '0,2,4-7'."},
		{"numactl ranges compare as numbers", "config/parallel.py _validate_numa_bind_cpus (int() of each end)", "vllm serve m --numa-bind-cpus 09-10 99999999999999999999-100000000000000000000 10-9", true,
			"Value error, numa_bind_cpus ranges must be ascending, but got '10-9'."},
		{"numactl CPU numbers in any script's digits", "config/parallel.py _NUMACTL_CPUSET_PATTERN (\\d) and int()", "vllm serve m --numa-bind-cpus ٠-٣ ٣-١٠ 𝟗-𝟏𝟎 𝟑-𝟏", true,
			"Value error, numa_bind_cpus ranges must be ascending, but got '𝟑-𝟏'."},
		{"numa lists' None items are type errors, and the validators do not run", "config/parallel.py numa_bind_nodes: list[int] | None, numa_bind_cpus: list[str] | None (optional_type reads None)",
			"vllm serve m --numa-bind-cpus None 1 '' 3-1 --numa-bind-nodes 1 None -1", true,
			"pydantic_core.ValidationError: 3 validation errors for ParallelConfig: numa_bind_nodes.1: Input should be a valid integer [input_value=None]; numa_bind_cpus.0: Input should be a valid string [input_value=None]; numa_bind_cpus.2: Input should be a valid string [input_value=None]"},
		{"a repeated list option keeps its last list", "argparse store with nargs='+'", "vllm serve m --numa-bind-nodes -1 --numa-bind-nodes 0", true,
			"pydantic_core.ValidationError: 1 validation error for ParallelConfig: Value error, numa_bind_nodes and numa_bind_cpus require numa_bind=True."},
		{"rpc port above 65535", "config/parallel.py data_parallel_rpc_port Field(ge=1, le=65535) (PR #51469)", "vllm serve m -dpp 70000", true,
			"data_parallel_rpc_port: Input should be less than or equal to 65535 [input_value=70000]"},
		{"negative node rank on one node", "config/parallel.py node_rank Field(ge=0)", "vllm serve m --node-rank -3", true,
			"node_rank: Input should be greater than or equal to 0 [input_value=-3]"},
		{"negative node rank with --nnodes (PR #49124)", "arg_utils.py create_engine_config", "vllm serve m -tp 2 --nnodes 2 --node-rank -1", true,
			"ValueError: Invalid data-parallel launch options: `--node-rank` must be between 0 and 1; got `--node-rank -1`."},
		{"zero TP with --nnodes divides by zero", "arg_utils.py create_engine_config (node_rank * local_world_size // world_size_within_dp)", "vllm serve m -tp 0 --nnodes 2", true,
			"ZeroDivisionError: integer division or modulo by zero"},
		{"offline DP with more than one local engine", "v1/engine/utils.py launch_core_engines (offline_mode: assert local_engine_count == 1)",
			"VLLM_DP_SIZE=4 VLLM_DP_RANK=1 vllm serve m -dpl 2", true, "AssertionError"},
		{"rank out of range", "config/parallel.py __post_init__", "vllm serve m -dp 2 --data-parallel-start-rank 2 -dpl 1 --headless", true, "data_parallel_rank (2) must be in the range [0, 2)"},
		{"local size above DP size", "config/parallel.py _validate_parallel_config", "vllm serve m -dp 2 -dpl 4", true, "data_parallel_size_local (4) must be <= data_parallel_size (2)"},
		{"external LB with DP 1", "config/parallel.py _validate_parallel_config", "vllm serve m --data-parallel-rank 0", true, "data_parallel_external_lb can only be set when data_parallel_size > 1"},
		{"PCP with DP", "config/parallel.py _validate_parallel_config", "vllm serve m -pcp 2 -dp 2", true, "PCP does not support data parallelism yet."},
		{"TP not divisible by DCP", "config/parallel.py _validate_parallel_config", "vllm serve m -tp 4 -dcp 3", true, "tp_size=4 must be divisible by dcp_size=3."},
		{"world larger than the node", "config/parallel.py __post_init__", "vllm serve m -tp 16", true, "World size (16) is larger than the number of available GPUs (8)"},
		{"CUDA_VISIBLE_DEVICES narrows the node", "config/parallel.py __post_init__", "CUDA_VISIBLE_DEVICES=0,1 vllm serve m -tp 4", true, "World size (4) is larger than the number of available GPUs (2)"},
		{"PP with the uni executor", "arg_utils.py _check_feature_supported", "vllm serve m -pp 2 -dp 2 -dpl 4 --distributed-executor-backend uni", true,
			"NotImplementedError: Pipeline Parallelism without Ray distributed executor or multiprocessing executor or external launcher is not supported."},
		{"bad DP backend without a DP address", "arg_utils.py create_engine_config (assert, a tuple for its message)", "vllm serve m -dpb slurm", true, "AssertionError: ('data_parallel_backend can only be ray or mp, got %s', 'slurm')"},
		{"bad DP backend with a DP address", "config/parallel.py DataParallelBackend", "vllm serve m -dpb slurm --data-parallel-address h", true, "data_parallel_backend: Input should be 'ray' or 'mp' [input_value='slurm']"},
		{"offline DP for a dense model", "config/parallel.py __post_init__", "VLLM_DP_SIZE=2 vllm serve m", false, "Offline data parallel mode is not supported/useful for dense models."},
		{"headless without local engines", "serve.py run_headless", "vllm serve m -dp 2 -dpl 0 --headless", true, "ValueError: data_parallel_size_local must be > 0 in headless mode"},
		{"internal LB front end with a non-zero rank", "v1/engine/utils.py launch_core_engines", "vllm serve m -tp 8 -dp 2 --nnodes 2 --node-rank 1 --api-server-count 1", true, "AssertionError: Attempting to launch core_engines from dp_rank > 0"},
		{"several API servers for a non-zero internal rank", "serve.py run_multi_api_server", "vllm serve m -tp 8 -dp 2 --nnodes 2 --node-rank 1", true, "AssertionError"},
		{"auto tool choice needs a parser", "entrypoints/openai/cli_args.py validate_parsed_serve_args", "vllm serve m --enable-auto-tool-choice", true, "TypeError: Error: --enable-auto-tool-choice requires --tool-call-parser"},
		{"multi-port supervisor needs two local ranks", "entrypoints/openai/dp_supervisor.py", "vllm serve m -dp 4 -dpl 1 -dpm", true, "ValueError: Error: --data-parallel-multi-port-external-lb requires --data-parallel-size-local >= 2"},
		{"Ray placement on the master node", "v1/engine/utils.py create_dp_placement_groups", "vllm serve m -dp 4 -tp 4 -dpb ray", true, "ValueError: Not enough resources to allocate 4 DP ranks on DP master node h"},
		{"Ray fill packing with DeepEP", "v1/engine/utils.py create_dp_placement_groups", "VLLM_RAY_DP_PACK_STRATEGY=fill vllm serve m -dp 4 -tp 2 -dpb ray --all2all-backend deepep_low_latency", true,
			"ValueError: DeepEP kernels require EP ranks [0,7] (same for [8,15], ...) to be on the same node, but VLLM_RAY_DP_PACK_STRATEGY=fill does not guarantee that."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Logf("source: %s", tt.source)
			procs := predict(t, tt.moe, "main", node("h", tt.line))
			top := procs[0]
			for _, p := range procs {
				if p.Parent == "" {
					top = p
				}
			}
			if top.Exit == nil || !strings.Contains(top.Exit.Error, tt.want) || top.Exit.Code != 1 {
				t.Errorf("top %s: %s, want %q", top.ID, exitText(top), tt.want)
			}
			if len(procs) != 1 {
				t.Errorf("%d processes, want the top one only", len(procs))
			}
		})
	}
}

// TestRuntimeFailures: launches that pass config validation and fail later, as vLLM's would.
func TestRuntimeFailures(t *testing.T) {
	t.Run("DP-adjusted local rank past the node's devices (gpu_worker.py init_device)", func(t *testing.T) {
		procs := predict(t, true, "main", node("h", "vllm serve org/M -dp 2 -tp 8"))
		w := get(t, procs, "h/0/engine-core-1/worker-0")
		if w.Exit == nil || w.Exit.Error != "AssertionError: DP adjusted local rank 8 is out of bounds for 8 devices." {
			t.Errorf("worker: %s", exitText(w))
		}
		// init_device raises before init_worker_distributed_environment: no torch world, so no
		// replica for the worker nor for its engine core (which names its first worker's).
		for _, a := range w.Addresses {
			if a.Channel == "torch-world" {
				t.Errorf("worker: torch-world address %+v, want none", a)
			}
		}
		if e := get(t, procs, "h/0/engine-core-1"); w.Replica != "" || e.Replica != "" {
			t.Errorf("replicas: worker %q, engine core %q, want none", w.Replica, e.Replica)
		}
		// Nor does it build its KV connector: no engine_id, where the workers that start have one.
		procs = predict(t, true, "main", node("h", `vllm serve org/M -dp 2 -tp 8 --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'`))
		if ok, bad := get(t, procs, "h/0/engine-core-0/worker-0"), get(t, procs, "h/0/engine-core-1/worker-0"); ok.EngineID == "" || bad.EngineID != "" {
			t.Errorf("engine_id: started worker %q, failed worker %q, want one and none", ok.EngineID, bad.EngineID)
		}
		api := get(t, procs, "h/0/api-server-0")
		if api.Exit == nil || !strings.HasSuffix(api.Exit.Error, "{'EngineCore_DP1': 1}") {
			t.Errorf("api server: %s", exitText(api))
		}
	})
	t.Run("a node that never starts strands the engines' handshake, so no head worker starts", func(t *testing.T) {
		// h2 (replica 1's head) refuses to start; replica 0's engine waits for it at rank 0's
		// handshake and never builds its executor (vllm/v1/engine/core.py EngineCoreProc.__init__:
		// handshakes first), so replica 0's follower waits in vain for the head's workers.
		nodes := wideTP(func(int) string { return "" })[:3]
		procs := predict(t, true, "main", nodes...)
		e := get(t, procs, "h0/0/engine-core-0")
		if len(e.Rendezvous) != 1 || e.Rendezvous[0].Error == "" || !e.Crashed() {
			t.Errorf("engine: %s %+v", exitText(e), e.Rendezvous)
		}
		if w := get(t, procs, "h0/0/engine-core-0/worker-0"); w.Exit != nil || len(w.Rendezvous) != 0 {
			t.Errorf("head worker: %s %+v, want never started", exitText(w), w.Rendezvous)
		}
		f := get(t, procs, "h1/0/headless-0/worker-0")
		if len(f.Rendezvous) != 1 || !contains(f.Rendezvous[0].Missing, "h0/0/engine-core-0/worker-0") || !contains(f.Rendezvous[0].Missing, "rank 24") || !f.Crashed() {
			t.Errorf("follower worker: %s %+v", exitText(f), f.Rendezvous)
		}
	})
	t.Run("dense wide-TP with DP > 1: the followers keep DP 2 while the heads reconfigure to 1", func(t *testing.T) {
		procs := predict(t, false, "main", wideTP(func(int) string { return "" })...)
		f := get(t, procs, "h1/0/headless-0/worker-0")
		if len(f.Rendezvous) != 1 || !strings.Contains(f.Rendezvous[0].Error, "expects world size 32, rank 0 serves 16") {
			t.Errorf("follower: %+v", f.Rendezvous)
		}
	})
	t.Run("headless leader stops cleanly when an engine fails (CoreEngineProcManager.monitor_engine_liveness)", func(t *testing.T) {
		procs := predict(t, true, "main",
			node("h0", "vllm serve org/M -dp 4 -dpl 2 -tp 4 --data-parallel-address h0"),
			node("h1", "vllm serve org/M -dp 4 -dpl 2 -tp 8 --data-parallel-start-rank 2 --headless --data-parallel-address h0"))
		if h := get(t, procs, "h1/0/headless-0"); h.Exit == nil || h.Crashed() {
			t.Errorf("headless: %s", exitText(h))
		}
		if e := get(t, procs, "h1/0/engine-core-3"); !e.Crashed() {
			t.Errorf("engine 3: %s", exitText(e))
		}
	})
}
