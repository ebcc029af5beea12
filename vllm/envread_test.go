package vllm

import (
	"context"
	"strings"
	"testing"
)

// planned is the model's plan of the deployment, by process ID.
func planned(t *testing.T, moe bool, profile string, nodes ...Node) map[string]*ProcessPlan {
	t.Helper()
	d := Deployment{Name: t.Name(), Model: Model{Name: "org/M", MoE: moe}, Profile: profileOf(t, profile), Seed: "seed", Nodes: nodes}
	plans, err := ModelPlanner{}.PlanDeployment(context.Background(), d)
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	return ProcessesByID(plans)
}

// A CUDA_VISIBLE_DEVICES entry int() refuses (a GPU UUID, a MIG name) crashes each GPU worker in
// Worker.init_device: logical_device_id_to_visible_device_id reads the worker's own entry, then
// converts the whole list (vllm/platforms/interface.py device_control_id_to_physical_device_id,
// vllm/v1/worker/gpu_worker.py).
func TestNonIntegerVisibleDeviceCrashesTheWorker(t *testing.T) {
	for _, tt := range []struct {
		name, line string
		want       map[string]string // worker ID -> the entry its error names ("" = runs)
	}{
		{"UUIDs: each worker trips on its own entry",
			"CUDA_VISIBLE_DEVICES=GPU-abc,GPU-def vllm serve org/M -tp 2",
			map[string]string{"h/0/engine-core-0/worker-0": "GPU-abc", "h/0/engine-core-0/worker-1": "GPU-def"}},
		{"one bad entry: workers whose own entry is fine trip on it when the list is read",
			"CUDA_VISIBLE_DEVICES=0,GPU-x,2,3 vllm serve org/M -tp 2 -dp 2",
			map[string]string{"h/0/engine-core-0/worker-0": "GPU-x", "h/0/engine-core-0/worker-1": "GPU-x",
				"h/0/engine-core-1/worker-0": "GPU-x", "h/0/engine-core-1/worker-1": "GPU-x"}},
		{"integers, with blanks int() strips",
			"CUDA_VISIBLE_DEVICES=' 4, 5' vllm serve org/M -tp 2",
			map[string]string{"h/0/engine-core-0/worker-0": "", "h/0/engine-core-0/worker-1": ""}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// The plan: every worker's own fate (a run's timeline stops the siblings of the
			// first engine that fails).
			plans := planned(t, true, "main", node("h", tt.line))
			for id, entry := range tt.want {
				p, ok := plans[id]
				if !ok {
					t.Fatalf("no process %s planned", id)
				}
				if entry == "" {
					if p.Crash != nil {
						t.Errorf("%s crashes: %s, want it running", id, p.Crash.Error)
					}
					continue
				}
				want := "ValueError: Non-integer device ID '" + entry + "' is not supported by cuda."
				if p.Crash == nil || p.Crash.Stage != StageEngineInit || p.Crash.Error != want {
					t.Errorf("%s: crash %+v, want %q at engine init", id, p.Crash, want)
				}
			}
		})
	}
}

// envs.get_vllm_port raises on a VLLM_PORT int() refuses, at the first port allocation that reads
// it (vllm/envs.py, vllm/utils/network_utils.py): ParallelConfig.__post_init__'s
// get_open_ports_list when DP is on the command line (pydantic wraps the ValueError), the
// executor's get_open_port before PR #50999, get_engine_zmq_addresses' before PR #42585.
// Nothing reads it otherwise.
func TestVLLMPortThatIsNoInteger(t *testing.T) {
	const invalid = "VLLM_PORT 'abc' must be a valid integer"
	for _, tt := range []struct {
		name, profile, line, id, want string
		moe                           bool
	}{
		{"DP master ports (config)", "main", "VLLM_PORT=abc vllm serve org/M -dp 2", "h/0/api-server-0",
			"pydantic_core.ValidationError: 1 validation error for ParallelConfig: Value error, " + invalid, true},
		{"a URI (Kubernetes service links)", "main", "VLLM_PORT=tcp://10.0.0.1:8000 vllm serve org/M -dp 2", "h/0/api-server-0",
			"VLLM_PORT 'tcp://10.0.0.1:8000' appears to be a URI.", true},
		{"no DP: nothing reads it", "main", "VLLM_PORT=abc vllm serve org/M -tp 2", "h/0/api-server-0", "", true},
		{"no DP, the executor probes its port (before #50999)", "main+executor_rendezvous=tcp",
			"VLLM_PORT=abc vllm serve org/M -tp 2", "h/0/engine-core-0", "ValueError: " + invalid, true},
		{"elastic EP skips the DP master ports; engine I/O probes (before #42585)", "main+zmq_port_alloc=probe",
			"VLLM_PORT=abc vllm serve org/M -dp 2 -ep --enable-elastic-ep --enable-eplb", "h/0/api-server-0", "ValueError: " + invalid, true},
		{"elastic EP with engine I/O bound at port 0: nothing reads it", "main",
			"VLLM_PORT=abc vllm serve org/M -dp 2 -ep --enable-elastic-ep --enable-eplb", "h/0/api-server-0", "", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := get(t, predict(t, tt.moe, tt.profile, node("h", tt.line)), tt.id)
			switch {
			case tt.want == "" && p.Exit != nil:
				t.Errorf("%s: %s, want it running", tt.id, exitText(p))
			case tt.want != "" && (p.Exit == nil || !strings.Contains(p.Exit.Error, tt.want)):
				t.Errorf("%s: %s, want %q", tt.id, exitText(p), tt.want)
			}
		})
	}
}

// VLLM_ALLOW_RUNTIME_LORA_UPDATING ("1" or "true", stripped, in any case: vllm/envs.py) is
// refused by run_multi_api_server once its config is built, when more than one API server would
// serve (vllm/entrypoints/cli/serve.py): the runtime LoRA endpoints would change one server's
// adapters only. One API server, a headless launch and a config error first are untouched.
func TestRuntimeLoRAUpdatingWithSeveralAPIServers(t *testing.T) {
	const refused = "ValueError: VLLM_ALLOW_RUNTIME_LORA_UPDATING cannot be used with api_server_count > 1"
	for _, tt := range []struct {
		line, top, crash string
	}{
		{"VLLM_ALLOW_RUNTIME_LORA_UPDATING=1 vllm serve org/M -dp 2", "h/0/api-server-0", refused},
		{"VLLM_ALLOW_RUNTIME_LORA_UPDATING=' True ' vllm serve org/M -tp 2 --api-server-count 3", "h/0/api-server-0", refused},
		{"VLLM_ALLOW_RUNTIME_LORA_UPDATING=yes vllm serve org/M -dp 2", "h/0/api-server-0", ""},
		{"VLLM_ALLOW_RUNTIME_LORA_UPDATING=1 vllm serve org/M -dp 2 --api-server-count 1", "h/0/api-server-0", ""},
		{"VLLM_ALLOW_RUNTIME_LORA_UPDATING=1 vllm serve org/M -dp 2 --headless", "h/0/headless-0", ""},
		{"VLLM_ALLOW_RUNTIME_LORA_UPDATING=1 vllm serve org/M -dp 2 --data-parallel-rank 5", "h/0/api-server-0", "data_parallel_rank (5) must be in the range [0, 2)"},
	} {
		t.Run(tt.line, func(t *testing.T) {
			plans := planned(t, true, "main", node("h", tt.line))
			top, ok := plans[tt.top]
			if !ok {
				t.Fatalf("no %s planned", tt.top)
			}
			switch {
			case tt.crash == "" && top.Crash != nil:
				t.Errorf("%s crashes: %s", tt.top, top.Crash.Error)
			case tt.crash != "" && (top.Crash == nil || !strings.Contains(top.Crash.Error, tt.crash)):
				t.Errorf("%s: crash %+v, want %q", tt.top, top.Crash, tt.crash)
			case tt.crash == refused && len(top.Children) > 0:
				t.Errorf("%s started %d engines before it refused", tt.top, len(top.Children))
			}
		})
	}
}
