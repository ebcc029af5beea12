package conform_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/widetp/widetp/check"
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/scenarios"
	"github.com/widetp/widetp/vllm"
	"github.com/widetp/widetp/vllm/conform"
	"github.com/widetp/widetp/vllm/probe"
	"github.com/widetp/widetp/vllm/probe/probetest"
)

// The vLLM snapshot the tests run (see probetest), unpacked once for the package.
var (
	snapshotDir  string
	snapshotSkip string
	cacheDir     string

	// shared is one vllm planner for the package's tests (starting one imports vLLM: seconds).
	shared     *probe.Planner
	sharedErr  error
	sharedOnce sync.Once
)

func TestMain(m *testing.M) {
	dir, cleanup, skip := probetest.Unpack()
	snapshotDir, snapshotSkip = dir, skip
	cacheDir, _ = os.MkdirTemp("", "widetp-probe-cache-")
	code := m.Run()
	if shared != nil {
		_ = shared.Close()
	}
	_ = os.RemoveAll(cacheDir)
	cleanup()
	os.Exit(code)
}

// planner is the vllm planner on the snapshot, or skips the test saying why there is none.
func planner(tb testing.TB) *probe.Planner {
	tb.Helper()
	if snapshotSkip != "" {
		tb.Skip(snapshotSkip)
	}
	sharedOnce.Do(func() {
		shared, sharedErr = probe.New(context.Background(), probe.WithVLLM(snapshotDir), probe.WithCacheDir(cacheDir),
			probe.WithTimeouts(2*time.Minute, 2*time.Minute))
	})
	if sharedErr != nil {
		tb.Fatalf("start the vllm planner on the snapshot: %v", sharedErr)
	}
	return shared
}

func snapshotProfile(tb testing.TB) vllm.Profile {
	prof, err := vllm.ProfileNamed(probetest.SnapshotProfile)
	if err != nil {
		tb.Fatal(err)
	}
	return prof
}

// eachProcess calls fn on every process of the plans, each tree in pre-order.
func eachProcess(plans []*vllm.NodePlan, fn func(*vllm.ProcessPlan)) {
	var walk func(pp *vllm.ProcessPlan)
	walk = func(pp *vllm.ProcessPlan) {
		fn(pp)
		for _, c := range pp.Children {
			walk(c)
		}
	}
	for _, np := range plans {
		for _, top := range np.Commands {
			walk(top)
		}
	}
}

// agreeOn reports where the model and vLLM's own code (the planner p) disagree on d, under what.
func agreeOn(t *testing.T, p *probe.Planner, d vllm.Deployment, what string) {
	t.Helper()
	var c conform.Counts
	if ds, err := conform.Deployment(context.Background(), d, p, &c); err != nil || len(ds) > 0 {
		t.Errorf("%s: model and vLLM disagree: %v %v", what, err, unexpected(ds))
	}
}

func unexpected(ds []conform.Disagreement) []string {
	var out []string
	for _, d := range ds {
		out = append(out, fmt.Sprintf("%s %s %s: vllm %q, model %q", d.Scenario, d.Process, d.Field, d.VLLM, d.Model))
	}
	return out
}

func shipped(tb testing.TB) []*scenarios.Scenario {
	files, err := filepath.Glob("../../scenarios/*.yaml")
	if err != nil || len(files) == 0 {
		tb.Fatalf("no shipped scenarios: %v", err)
	}
	var out []*scenarios.Scenario
	for _, f := range files {
		s, err := scenarios.Load(f, scenarios.WithProfile(scenarios.ProfileSpec{Base: probetest.SnapshotProfile}))
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// Every shipped scenario, planned by vLLM's own launch code (the snapshot) and by the model under
// the snapshot's profile, agrees field by field; vLLM's verdicts on the HELLOs each front end
// heard agree with HandshakeExpect.Refuse; and the probe's plans crash only at stages a runtime
// executes (a refusal is the barrier's, not a crash).
func TestShippedScenariosConformToTheSnapshot(t *testing.T) {
	p := planner(t)
	var c conform.Counts
	var all []conform.Disagreement
	for _, s := range shipped(t) {
		d := s.Deployment()
		got, verdicts, err := p.PlanWithVerdicts(context.Background(), d)
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		want, err := vllm.ModelPlanner{}.PlanDeployment(context.Background(), d)
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		all = append(all, conform.Compare(d.Name, got, want, &c)...)
		all = append(all, conform.CompareHandshakes(d, got, verdicts, &c)...)
		eachProcess(got, func(pp *vllm.ProcessPlan) {
			if pp.Crash != nil && pp.Crash.Stage != vllm.StageConfig && pp.Crash.Stage != vllm.StageEngineInit && pp.Crash.Stage != vllm.StageConnectorInit {
				t.Errorf("%s: %s crashes at stage %q, which no runtime executes", s.Name, pp.Identity.ID, pp.Crash.Stage)
			}
		})
	}
	if c.Processes < 100 {
		t.Fatalf("compared only %d processes: the planners planned almost nothing", c.Processes)
	}
	if bad := unexpected(all); len(bad) > 0 {
		t.Errorf("%d disagreements outside the known drift:\n%s", len(bad), strings.Join(bad, "\n"))
	}
}

// Generated deployments over every launch path conform too.
func TestGeneratedDeploymentsConformToTheSnapshot(t *testing.T) {
	p := planner(t)
	var c conform.Counts
	var all []conform.Disagreement
	for _, d := range conform.Generate(len(conform.LaunchPaths()), "test", snapshotProfile(t)) {
		ds, err := conform.Deployment(context.Background(), d, p, &c)
		if err != nil {
			t.Fatalf("%s: %v", d.Name, err)
		}
		all = append(all, ds...)
	}
	if bad := unexpected(all); len(bad) > 0 {
		t.Errorf("%d disagreements outside the known drift:\n%s", len(bad), strings.Join(bad, "\n"))
	}
}

// The launch forms the generator varies within its paths (a pipeline over nodes, the DP layout
// and address inferred from --nnodes and --master-addr in create_engine_config,
// vllm/engine/arg_utils.py, vLLM's default DP RPC port, flags spelled as aliases, with
// underscores, = or abbreviated) conform too: the first deployment of each form among 260.
func TestGeneratedFormsConformToTheSnapshot(t *testing.T) {
	p := planner(t)
	var c conform.Counts
	var all []conform.Disagreement
	done := map[string]bool{}
	for _, d := range conform.Generate(20*len(conform.LaunchPaths()), "forms", snapshotProfile(t)) {
		fresh := false
		for _, f := range conform.LaunchForms(t, d) {
			if !done[f] {
				done[f], fresh = true, true
			}
		}
		if !fresh {
			continue
		}
		ds, err := conform.Deployment(context.Background(), d, p, &c)
		if err != nil {
			t.Fatalf("%s: %v", d.Name, err)
		}
		all = append(all, ds...)
	}
	if len(done) < 5 {
		t.Fatalf("forms met: %v, want all five", done)
	}
	if bad := unexpected(all); len(bad) > 0 {
		t.Errorf("%d disagreements:\n%s", len(bad), strings.Join(bad, "\n"))
	}
}

// vLLM PR #47692 broke recipes that give the head --data-parallel-start-rank 0 and keep headless
// followers: the head infers external LB and wait_for_engine_startup (vllm/v1/engine/utils.py)
// refuses the follower's headless engine. The probe hears vLLM say so, its plans carry the
// HELLO and the expectation that make Refuse say the same, and the paper execution of vLLM's
// plans finds the violations the scenario expects.
func TestStartRankZeroHeadlessFollowerIsRefusedByVLLM(t *testing.T) {
	p := planner(t)
	s, err := scenarios.Load("../../scenarios/vllm47692-dp-only-headless-followers-buggy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d := s.Deployment()
	plans, verdicts, err := p.PlanWithVerdicts(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	const front = "dp-leader/0/api-server-0"
	if v := verdicts[front]; !strings.Contains(v, "must not use --headless in external or hybrid dp lb mode") {
		t.Fatalf("vLLM's verdict for %s = %q, want the remote-headless refusal", front, v)
	}
	var c conform.Counts
	if ds := conform.CompareHandshakes(d, plans, verdicts, &c); len(ds) > 0 {
		t.Errorf("Refuse disagrees with vLLM: %+v", ds)
	}
	procs, err := vllm.PredictPlans(d, plans)
	if err != nil {
		t.Fatal(err)
	}
	got := report.KindSet(check.Run(procs))
	if !slices.Equal(got, s.Expect) {
		t.Errorf("violations of vLLM's plans = %v, scenario expects %v", got, s.Expect)
	}
}

// BenchmarkVLLMPlanFourNodes plans a 4-node wide-TP scenario with vLLM's launch code (target:
// under 5 s, the vllm planner's start, vLLM's import, included; bytecode cached).
func BenchmarkVLLMPlanFourNodes(b *testing.B) {
	if snapshotSkip != "" {
		b.Skip(snapshotSkip)
	}
	s, err := scenarios.Load("../../scenarios/vllm48061-internal-lb-wide-tp-control.yaml")
	if err != nil {
		b.Fatal(err)
	}
	// The first start compiles vLLM's bytecode into the cache; a user pays that once.
	planner(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p, err := probe.New(context.Background(), probe.WithVLLM(snapshotDir), probe.WithCacheDir(cacheDir))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.PlanDeployment(context.Background(), s.Deployment()); err != nil {
			b.Fatal(err)
		}
		p.Close()
	}
}

// BenchmarkConformFifty compares both planners on 50 generated deployments (target: under 3
// minutes).
func BenchmarkConformFifty(b *testing.B) {
	p := planner(b)
	deps := conform.Generate(50, "bench", snapshotProfile(b))
	for i := 0; i < b.N; i++ {
		var c conform.Counts
		for _, d := range deps {
			if _, err := conform.Deployment(context.Background(), d, p, &c); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// `--api-server-count 0` without --headless takes the headless launch path: ServeSubcommand.cmd
// (vllm/entrypoints/cli/serve.py) resolves the count, then runs run_headless for a count under 1.
// The top process is the headless launcher, as the model plans it.
func TestAPIServerCountZeroRunsTheHeadlessLauncher(t *testing.T) {
	p := planner(t)
	d := vllm.Deployment{Name: "api-server-count-0", Profile: snapshotProfile(t), Seed: "api-server-count-0",
		Model: vllm.Model{Name: "deepseek-ai/DeepSeek-V3", MoE: true},
		Nodes: []vllm.Node{{Host: "h0", GPUs: 8, Commands: []string{
			`vllm serve deepseek-ai/DeepSeek-V3 -tp 2 -dp 2 --api-server-count 0 --kv-transfer-config '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both"}'`}}}}
	plans, err := p.PlanDeployment(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	top := plans[0].Commands[0]
	if top.Identity.ID != "h0/0/headless-0" {
		t.Errorf("vLLM's top process = %s, want h0/0/headless-0 (run_headless)", top.Identity.ID)
	}
	if len(top.Children) != 2 {
		t.Errorf("the headless launcher starts %d engine cores, want 2", len(top.Children))
	}
	agreeOn(t, p, d, d.Name)
}

// Launches that fail ParallelConfig's field constraints, or create_engine_config's assert on the
// DP backend (vllm/engine/arg_utils.py; its message is a tuple), crash with the same text in the
// model as in vLLM: pydantic's errors on one line with their input values.
func TestConfigValidationTextsMatchVLLM(t *testing.T) {
	p := planner(t)
	for _, line := range []string{
		"-tp 0 -dp 0",
		"-tp 2 -dp 2 --data-parallel-rank -1",
		"-tp 2 -dp 2 --data-parallel-rpc-port 70000",
		"-tp 2 -dp 2 --data-parallel-backend xyz",
		"-tp 2 -dp 2 --data-parallel-backend xyz --data-parallel-address h0",
		// ParallelConfig's other constraints and its numa field validators, in field order.
		"-tp 2 -dp 2 -dcp 0 --dbo-prefill-token-threshold -2 --ubatch-size -5 --max-parallel-loading-workers 0 --numa-bind-cpus 0-3 5-2 --numa-bind-nodes 0 -1",
		"-tp 2 -dp 2 --numa-bind-cpus None 1 '' --numa-bind-nodes 1 None",
		// A turboquant KV cache skips boundary layers (TurboQuantConfig.get_boundary_skip_layers):
		// arithmetic on the model's layer count, which the probe's model config must hold.
		"-tp 2 -dp 2 --kv-cache-dtype turboquant_k8v4",
		// Each worker's fault-tolerance sentinel (Worker.__init__) refuses a backend without FT
		// kernels; an external-LB rank plans its workers.
		"-tp 2 -dp 2 --data-parallel-rank 1 --enable-fault-tolerance",
		"-tp 2 -dp 2 --data-parallel-rank 1 --enable-fault-tolerance --all2all-backend nixl_ep",
		// CompilationConfig's validator functions (vllm/config/compilation.py): a mode name
		// outside CompilationMode is a ValueError pydantic collects; a cudagraph_mode text
		// outside CUDAGraphMode a KeyError that escapes the validation; other values the enums'.
		`-tp 2 -cc '{"mode":"bogus","cudagraph_mode":[2,0]}'`,
		`-tp 2 -cc '{"mode":7,"cudagraph_mode":5}'`,
		`-tp 2 -cc '{"mode":"x","cudagraph_mode":"y"}'`,
		"-tp 2 -cc.cudagraph_mode ''",
		// VllmConfig(...)'s fields from the command line (vllm/config/vllm.py).
		"-tp 2 -Ox --shutdown-timeout -3",
		"-tp 2 -dp 2 --headless --optimization-level 7",
		"-tp 2 -O' 1' --shutdown-timeout 5",
		// ECTransferConfig.__post_init__ (vllm/config/ec_transfer.py): a connector needs a role.
		`-tp 2 --ec-transfer-config '{"ec_connector":"ECExampleConnector"}'`,
		`-tp 2 --ec-transfer-config.ec_connector ECCPUConnector`,
		`-tp 2 -cc '{"mode":"vllm_compile","cudagraph_mode":"full_decode_only"}' -cc.mode 3.0`,
		// AttentionConfig's and KernelConfig's validator functions (vllm/config/attention.py,
		// kernel.py): backends by name through the enums' own lookups, "auto" as None, kinds
		// of backend_per_kind, MoE and linear backends normalised before their Literal.
		"-tp 2 -ac.backend bogus",
		"-tp 2 -ac.backend Auto -ac.mla_prefill_backend flashinfer",
		"-tp 2 -ac.mla_prefill_backend nope",
		`-tp 2 -ac '{"backend_per_kind":{"full_attention":"flash_attn","zzz":"flashinfer"}}'`,
		`-tp 2 -ac '{"backend_per_kind":{"mamba":"nope"}}'`,
		`-tp 2 -ac '{"backend_per_kind":{"full_attention":"nope","zzz":"flashinfer"}}'`,
		`-tp 2 -ac '{"backend_per_kind":{"mamba":3,"sliding_window":"triton_attn"}}'`,
		`-tp 2 --kernel-config '{"moe_backend":"Deep-Gemm","linear_backend":"Bogus-X"}'`,
		"-tp 2 --kernel-config.moe_backend Bogus",
		// create_engine_config past ParallelConfig(...) (vllm/engine/arg_utils.py), in its order.
		`-tp 2 --spec-method ngram --spec-tokens 3 --speculative-config '{"num_speculative_tokens":2}'`,
		`-tp 2 --spec-model m --speculative-config '[1]'`,
		`-tp 2 --spec-tokens 3 --speculative-config '"tokens"'`,
		`-tp 2 --diffusion-config '{"canvas_length":0,"extra":1}' --default-mm-loras '{"image":"/l"}'`,
		`-tp 2 --diffusion-config '[1]'`,
		`-tp 2 --diffusion-config '"x"'`,
		`-tp 2 --diffusion-config '" {}  x"'`,
		`-tp 2 --diffusion-config '"{\"canvas_length\": 0}"'`,
		"-tp 2 --diffusion-config '{x'",
		`-tp 2 --speculative-config '[1]'`,
		"-tp 2 --spec-model None --speculative-config 3",
		`-tp 2 --speculative-config '"eagle"'`,
		`-tp 2 --default-mm-loras '{}' --enable-lora --max-loras 4 --max-cpu-loras 2`,
		`-tp 2 --enable-lora --max-loras 0 --attention-backend bogus`,
		`-tp 2 --enable-lora --max-num-seqs 512 --max-num-batched-tokens 1000 --speculative-config '{"num_speculative_tokens":1}'`,
		`-tp 2 --enable-lora --spec-tokens 7`,
		`-tp 2 --enable-lora --speculative-config '{"num_speculative_tokens": 8}'`,
		`-tp 2 --enable-lora --spec-tokens 8 --performance-mode throughput`,
		`-tp 2 -dp 2 --enable-lora --spec-tokens 1 -ep --all2all-backend deepep_low_latency`,
		`-tp 2 --enable-lora --spec-tokens 200 --max-num-seqs 64 --max-model-len 16k`,
		`-tp 2 --enable-lora --spec-tokens 200 --max-num-seqs 64 --max-model-len 16k --no-enable-chunked-prefill`,
		`-tp 2 --attention-backend FLASHINFER -ac.backend flash_attn`,
		`-tp 2 --attention-backend auto -ac.backend cutlass_msa --mamba-backend nope`,
		`-tp 2 --mamba-ssu-algorithm simple`,
		`-tp 2 --mamba-backend FlashInfer --mamba-ssu-algorithm simple --no-enable-flashinfer-autotune --kernel-config.enable_flashinfer_autotune true`,
		`-tp 2 --ir-op-priority.fused_add_rms_norm a,b --kernel-config '{"ir_op_priority":{"fused_add_rms_norm":["c"],"rms_norm":["d"]}}'`,
		`-tp 2 --ir-op-priority.rms_norm x --kernel-config '{"ir_op_priority":{"rms_norm":[]}}' --cudagraph-capture-sizes 1 2 -cc '{"cudagraph_capture_sizes":[4]}'`,
		`-tp 2 --max-cudagraph-capture-size 4 -cc.max_cudagraph_capture_size 8`,
		"-tp 2 --show-hidden-metrics-for-version 0.x --collect-detailed-traces worker,model all --kv-cache-metrics-sample 0",
		"-tp 2 --collect-detailed-traces model --offload-backend prefetch",
		"-tp 2 --offload-backend prefetch --offload-group-size 2 --offload-prefetch-step 0",
		"-tp 2 --offload-group-size -1 --offload-num-in-group 0 --safetensors-prefetch-num-threads 0",
		"-tp 2 --load-format tensorizer --model-loader-extra-config s3://bucket --cpu-offload-gb -2",
		// SchedulerConfig (vllm/config/scheduler.py): bounds, then verify_max_model_len.
		"-tp 2 --max-num-batched-tokens 256 --max-num-seqs 512",
		"-tp 2 --max-num-seqs 10000",
		"-tp 2 --no-enable-chunked-prefill --max-num-batched-tokens 4096 --max-model-len 8k",
		"-tp 2 --long-prefill-token-threshold 9000 --max-model-len 8000",
		"-tp 2 --max-num-batched-tokens 0 --max-num-seqs 0 --max-num-scheduled-tokens -1 --long-prefill-token-threshold -1 --watermark 1 --prefill-schedule-interval 0 --stream-interval 0",
		"-tp 2 --watermark -0.5 --seed 3",
		// FlexibleArgumentParser reads a last word with '-' and '.' as a dotted key without value.
		"-tp 2 --watermark -0.5",
		"-tp 2 --kv-transfer-config.kv_role",
		"-tp 2 -x.y.z 1k --seed 1",
		"-tp 2 -cc.mode 3 --gpu-memory-utilization -0.5 --kv-transfer.kv_role kv_both",
	} {
		d := vllm.Deployment{Name: "config-texts", Profile: snapshotProfile(t), Seed: "config-texts",
			Model: vllm.Model{Name: "deepseek-ai/DeepSeek-V3", MoE: true},
			Nodes: []vllm.Node{{Host: "h0", GPUs: 8, Commands: []string{"vllm serve deepseek-ai/DeepSeek-V3 " + line}}}}
		agreeOn(t, p, d, line)
	}
}

// The schedulers' KV event publishers (vllm/distributed/kv_events.py ZmqEventPublisher, built by
// vllm/v1/core/sched/scheduler.py with the engine's data_parallel_index): vLLM's own factory, run
// by the probe on each engine core's config, and the model agree on every endpoint, its role,
// and the engines that raise instead (an ipc endpoint past DP index 0) — and the probe does
// derive them (a planner that derived none would agree with nothing to compare).
func TestKVEventPublishersMatchVLLM(t *testing.T) {
	p := planner(t)
	const m = "deepseek-ai/DeepSeek-V3"
	ev := func(extra string) string {
		return `--kv-events-config '{"enable_kv_cache_events":true` + extra + `}'`
	}
	deps := map[string][][]string{
		"one-node-dp4":  {{"vllm serve " + m + " -tp 2 -dp 4 " + ev(`,"replay_endpoint":"tcp://*:5600"`)}},
		"hybrid-2-node": {{"vllm serve " + m + " -tp 4 -dp 4 -dpl 2 --data-parallel-hybrid-lb --data-parallel-address h0 " + ev("")}, {"vllm serve " + m + " -tp 4 -dp 4 -dpl 2 --data-parallel-start-rank 2 --data-parallel-hybrid-lb --data-parallel-address h0 " + ev("")}},
		"wide-tp-external": {
			{"vllm serve " + m + " -tp 16 -dp 2 --data-parallel-rank 0 --data-parallel-address h0 --nnodes 4 --node-rank 0 --master-addr h0 " + ev("")},
			{"vllm serve " + m + " -tp 16 -dp 2 --data-parallel-rank 0 --data-parallel-address h0 --nnodes 4 --node-rank 1 --master-addr h0 --headless " + ev("")},
			{"vllm serve " + m + " -tp 16 -dp 2 --data-parallel-rank 1 --data-parallel-address h0 --nnodes 4 --node-rank 2 --master-addr h2 " + ev("")},
			{"vllm serve " + m + " -tp 16 -dp 2 --data-parallel-rank 1 --data-parallel-address h0 --nnodes 4 --node-rank 3 --master-addr h2 --headless " + ev("")}},
		"ipc-dp2":     {{"vllm serve " + m + " -tp 2 -dp 2 " + ev(`,"endpoint":"ipc:///tmp/kv_events"`)}},
		"inproc-dp2":  {{"vllm serve " + m + " -tp 2 -dp 2 " + ev(`,"endpoint":"inproc://kv"`)}},
		"connect-dp2": {{"vllm serve " + m + " -tp 2 -dp 2 " + ev(`,"endpoint":"tcp://localhost:5557"`)}},
		"bad-port":    {{"vllm serve " + m + " -tp 2 -dp 2 " + ev(`,"endpoint":"tcp://*:abc"`)}},
		"port-zero":   {{"vllm serve " + m + " -tp 2 -dp 2 " + ev(`,"endpoint":"tcp://*:0"`)}},
		// Engine 1's workers have no device: it stops before its Scheduler builds a publisher.
		"bad-port-workers-down": {{"CUDA_VISIBLE_DEVICES=0,1 vllm serve " + m + " -tp 2 -dp 2 " + ev(`,"endpoint":"tcp://*:abc"`)}},
	}
	published := 0
	for name, nodes := range deps {
		d := vllm.Deployment{Name: "kv-events-" + name, Profile: snapshotProfile(t), Seed: name,
			Model: vllm.Model{Name: m, MoE: true}}
		for i, cmds := range nodes {
			d.Nodes = append(d.Nodes, vllm.Node{Host: fmt.Sprintf("h%d", i), GPUs: 8, Commands: cmds})
		}
		plans, err := p.PlanDeployment(context.Background(), d)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		eachProcess(plans, func(pp *vllm.ProcessPlan) {
			for _, a := range pp.Addresses {
				if a.Channel == "kv-events" {
					published++
				}
			}
		})
		model, err := vllm.ModelPlanner{}.PlanDeployment(context.Background(), d)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var c conform.Counts
		if ds := conform.Compare(d.Name, plans, model, &c); len(ds) > 0 {
			t.Errorf("%s: model and vLLM disagree: %v", name, unexpected(ds))
		}
	}
	// one-node-dp4: 4 engines × (PUB + replay); hybrid: 4; wide-TP: 2 heads; ipc: engine 0 only;
	// inproc and connect: 2 each; bad-port: engine 0 (index 0 leaves the endpoint as written);
	// port-zero: 2 (the snapshot predates PR #55844: engine 1 binds port 1); bad-port-workers-down:
	// engine 0.
	if want := 8 + 4 + 2 + 1 + 2 + 2 + 1 + 2 + 1; published != want {
		t.Errorf("vLLM's plans hold %d kv-events addresses, want %d", published, want)
	}
}

// The KV connector part of VllmConfig.__post_init__ and of KVConnectorFactory.create_connector
// (vllm/config/vllm.py, vllm/distributed/kv_transfer/kv_connector/factory.py): vLLM's own code,
// run by the probe, and the model agree on which connector a command runs and where resolving
// its class fails — and the probe does fail where vLLM does (a planner that never crashed would
// agree with a model that never crashes).
func TestKVConnectorResolutionMatchesVLLM(t *testing.T) {
	p := planner(t)
	const m = "Qwen/Qwen3-30B-A3B"
	kv := func(j string) string { return `--kv-transfer-config '` + j + `'` }
	multi := func(children string) string {
		return kv(`{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":[` + children + `]}}`)
	}
	cases := map[string]struct {
		env, flags string
		crash      string // a crash text some process must show, in both planners
	}{
		"offloading":         {flags: "--kv-offloading-size 10"},
		"offloading-lmcache": {flags: "--kv-offloading-size 10 --kv-offloading-backend lmcache"},
		"offloading-bad-env": {env: "VLLM_USE_SIMPLE_KV_OFFLOAD=x ", flags: "--kv-offloading-size 4", crash: "invalid literal for int()"},
		"unregistered":       {flags: kv(`{"kv_connector":"P2pNcclConnector","kv_role":"kv_both"}`), crash: "Unsupported connector type: P2pNcclConnector"},
		"unregistered-later": {flags: kv(`{"kv_connector":"FooConnector","kv_role":"kv_both"}`) + " --disable-hybrid-kv-cache-manager", crash: "Unsupported connector type: FooConnector"},
		"no-name":            {flags: kv(`{"kv_role":"kv_both"}`), crash: "Connector name is not set"},
		"empty-module-path":  {flags: kv(`{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_connector_module_path":""}`), crash: "cannot be an empty string"},
		// The front end stops asking at a child without HMA; the workers' MultiConnector
		// resolves every child's class.
		"multi-stops":         {flags: multi(`{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"},{"kv_connector":"Bar","kv_role":"kv_both"}`), crash: "Unsupported connector type: Bar"},
		"multi-own-engine-id": {flags: "--disable-hybrid-kv-cache-manager " + multi(`{"kv_connector":"NixlConnector","kv_role":"kv_both","engine_id":"e"}`), crash: "got multiple values for keyword argument 'engine_id'"},
		"multi-bad-field":     {flags: "--disable-hybrid-kv-cache-manager " + multi(`{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_port":"x"}`), crash: "kv_port: Input should be a valid integer"},
		"multi-nested":        {flags: "--disable-hybrid-kv-cache-manager " + multi(`{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":[{"kv_connector":"Bar","kv_role":"kv_both"}]}}`), crash: "Unsupported connector type: Bar"},
		"multi-keys":          {flags: "--enforce-eager --disable-hybrid-kv-cache-manager " + kv(`{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":{"a":{}}}}`), crash: "'str' object has no attribute 'get'"},
		"scheduler-no-name":   {flags: "--disable-hybrid-kv-cache-manager " + kv(`{"kv_role":"kv_both"}`), crash: "Connector name is not set"},
		// Engine 1's workers have no device: only engine 0 builds its Scheduler.
		"scheduler-no-name-workers-down": {env: "CUDA_VISIBLE_DEVICES=0,1 ", flags: "--disable-hybrid-kv-cache-manager " + kv(`{"kv_role":"kv_both"}`), crash: "Connector name is not set"},
		"empty-name":                     {flags: kv(`{"kv_connector":"","kv_role":"kv_both"}`), crash: "Unsupported connector type: "},
		"multi-bad-child":                {flags: multi(`{"kv_connector":"NixlConnector","kv_role":"kv_both"},{"kv_connector":"Bar","kv_role":"kv_both"}`), crash: "Unsupported connector type: Bar"},
		"multi-not-mapping":              {flags: multi(`"x"`), crash: "must be a mapping, not str"},
		"multi-not-mapping-hma":          {flags: "--enforce-eager " + multi(`"x"`), crash: "'str' object is not a mapping"},
		// VllmConfig.__post_init__'s CUDA graph check resolves the class in the front end
		// whatever the HMA preference, when the graph mode there captures full graphs.
		"graphs-pref":             {flags: "--disable-hybrid-kv-cache-manager " + kv(`{"kv_connector":"FooConnector","kv_role":"kv_both"}`), crash: "Unsupported connector type: FooConnector"},
		"graphs-O1":               {flags: "-O1 --disable-hybrid-kv-cache-manager " + kv(`{"kv_connector":"FooConnector","kv_role":"kv_both"}`), crash: "Unsupported connector type: FooConnector"},
		"graphs-no-compile":       {flags: "-cc.mode none --disable-hybrid-kv-cache-manager " + kv(`{"kv_connector":"FooConnector","kv_role":"kv_both"}`), crash: "Unsupported connector type: FooConnector"},
		"graphs-full-only":        {flags: `-cc '{"mode":0,"cudagraph_mode":2}' --disable-hybrid-kv-cache-manager ` + kv(`{"kv_connector":"FooConnector","kv_role":"kv_both"}`), crash: "Unsupported connector type: FooConnector"},
		"graphs-eager":            {flags: "--enforce-eager -cc.cudagraph_mode full_decode_only --disable-hybrid-kv-cache-manager " + kv(`{"kv_connector":"FooConnector","kv_role":"kv_both"}`), crash: "Unsupported connector type: FooConnector"},
		"graphs-no-torch-compile": {env: "TORCH_COMPILE_DISABLE=1 ", flags: "--disable-hybrid-kv-cache-manager " + kv(`{"kv_connector":"FooConnector","kv_role":"kv_both"}`), crash: "Unsupported connector type: FooConnector"},
		"graphs-breakable":        {env: "VLLM_USE_BREAKABLE_CUDAGRAPH=1 ", flags: "--disable-hybrid-kv-cache-manager " + kv(`{"kv_connector":"FooConnector","kv_role":"kv_both"}`), crash: "Unsupported connector type: FooConnector"},
		"graphs-layerwise":        {flags: multi(`{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both","kv_connector_extra_config":{"use_layerwise":true}},{"kv_connector":"Bar","kv_role":"kv_both"}`), crash: "Unsupported connector type: Bar"},
		"graphs-dict":             {flags: "--disable-hybrid-kv-cache-manager " + kv(`{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":{"a":{}}}}`), crash: "must be a mapping, not str"},
		"graphs-null":             {flags: kv(`{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":null}}`), crash: "'NoneType' object is not iterable"},
		// The EC connector (vllm/distributed/ec_transfer): each worker builds one for a transfer
		// instance, each Scheduler for any config.
		"ec-unknown":        {flags: `--ec-transfer-config '{"ec_connector":"Bogus","ec_role":"ec_both"}'`, crash: "Unsupported connector type: Bogus"},
		"ec-no-connector":   {flags: `--ec-transfer-config '{"ec_role":"ec_both"}'`, crash: "EC connect must not be None"},
		"ec-module-path":    {flags: `--ec-transfer-config '{"ec_connector":"Bogus","ec_role":"ec_both","ec_connector_module_path":"my.mod"}'`},
		"ec-empty-path":     {flags: `--ec-transfer-config '{"ec_connector":"Bogus","ec_role":"ec_both","ec_connector_module_path":""}'`, crash: "Empty module name"},
		"ec-registered":     {flags: `--ec-transfer-config '{"ec_connector":"ECCPUConnector","ec_role":"ec_producer"}'`},
		"graphs-child-role": {flags: "--disable-hybrid-kv-cache-manager " + multi(`{"kv_connector":"NixlConnector"}`), crash: "Please specify kv_role"},
		"multi-unknown-key": {flags: multi(`{"kv_connector":"NixlConnector","kv_role":"kv_both","foo":1}`), crash: "Unexpected keyword argument"},
		"expandable":        {env: "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True ", flags: kv(`{"kv_connector":"NixlConnector","kv_role":"kv_both"}`), crash: "incompatible with PYTORCH_CUDA_ALLOC_CONF"},
		"expandable-sleep":  {env: "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True ", flags: "--enable-sleep-mode " + kv(`{"kv_connector":"NixlConnector","kv_role":"kv_both"}`)},
		"hma-enabled":       {flags: "--no-disable-hybrid-kv-cache-manager " + kv(`{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}`), crash: "does not support HMA but HMA is enabled"},
	}
	for name, tc := range cases {
		d := vllm.Deployment{Name: "kv-connector-" + name, Profile: snapshotProfile(t), Seed: name,
			Model: vllm.Model{Name: m, MoE: true},
			Nodes: []vllm.Node{{Host: "h0", GPUs: 8, Commands: []string{tc.env + "vllm serve " + m + " -tp 2 -dp 2 " + tc.flags}}}}
		var c conform.Counts
		ds, err := conform.Deployment(context.Background(), d, p, &c)
		if err != nil || len(ds) > 0 {
			t.Errorf("%s: model and vLLM disagree: %v %v", name, err, unexpected(ds))
		}
		plans, err := p.PlanDeployment(context.Background(), d)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var crashes []string
		eachProcess(plans, func(pp *vllm.ProcessPlan) {
			if pp.Crash != nil {
				crashes = append(crashes, pp.Crash.Error)
			}
		})
		switch {
		case tc.crash == "" && len(crashes) > 0:
			t.Errorf("%s: vLLM's code crashed (%s), want a healthy plan", name, crashes[0])
		case tc.crash != "" && !strings.Contains(strings.Join(crashes, "\n"), tc.crash):
			t.Errorf("%s: vLLM's code crashed with %q, want %q", name, crashes, tc.crash)
		}
	}
}

// An empty --data-parallel-address gives the handshake at tcp://data_parallel_master_ip:port no
// host, which make_zmq_socket's split_zmq_path (vllm/utils/network_utils.py) refuses: rank 0's
// front end as it binds it (before it starts its engines), a headless engine core as it dials it
// (before its workers); a handshake that stays host-local (ipc) never asks.
func TestEmptyDataParallelAddressMatchesVLLM(t *testing.T) {
	p := planner(t)
	const m = "deepseek-ai/DeepSeek-V3"
	for name, nodes := range map[string][]string{
		"front-end": {"vllm serve " + m + " -tp 2 -dp 4 -dpl 2 --data-parallel-address ''",
			"vllm serve " + m + " -tp 2 -dp 4 -dpl 2 --data-parallel-start-rank 2 --data-parallel-address h0 --headless"},
		"headless": {"vllm serve " + m + " -tp 2 -dp 4 -dpl 2 --data-parallel-address h0",
			"vllm serve " + m + " -tp 2 -dp 4 -dpl 2 --data-parallel-start-rank 2 --data-parallel-address '' --headless"},
		"local-only": {"vllm serve " + m + " -tp 2 -dp 2 --data-parallel-address ''"},
	} {
		d := vllm.Deployment{Name: "empty-dp-address-" + name, Profile: snapshotProfile(t), Seed: name,
			Model: vllm.Model{Name: m, MoE: true}}
		for i, cmd := range nodes {
			d.Nodes = append(d.Nodes, vllm.Node{Host: fmt.Sprintf("h%d", i), GPUs: 8, Commands: []string{cmd}})
		}
		agreeOn(t, p, d, name)
	}
}

// With a tensorizer load format create_load_config gives the model loader the model's name as its
// directory (vllm/engine/arg_utils.py), and the Rust front end's manager then writes the
// non-default arguments as JSON (vllm/v1/utils.py RustFrontendProcessManager): the probe's model
// name is the command's (huggingface_hub is stood in; HF_HUB_OFFLINE would have it resolved to a
// snapshot), and both planners start the launch.
func TestTensorizerLoadFormatMatchesVLLM(t *testing.T) {
	p := planner(t)
	const m = "deepseek-ai/DeepSeek-V3"
	for _, cmd := range []string{
		"vllm serve " + m + " -tp 2 --load-format tensorizer",
		"VLLM_USE_RUST_FRONTEND=1 VLLM_RUST_FRONTEND_PATH=/opt/vllm-rs/bin/vllm-rs vllm serve " + m + " -tp 2 -dp 2 --load-format tensorizer",
	} {
		d := vllm.Deployment{Name: "tensorizer", Profile: snapshotProfile(t), Seed: "tensorizer",
			Model: vllm.Model{Name: m, MoE: true}, Nodes: []vllm.Node{{Host: "h0", GPUs: 8, Commands: []string{cmd}}}}
		agreeOn(t, p, d, cmd)
	}
}
