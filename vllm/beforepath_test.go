package vllm

import (
	"strings"
	"testing"
)

// Until ServeSubcommand.cmd takes a launch path (vllm/entrypoints/cli/serve.py: its --grpc branch
// first, then run_headless, run_dp_supervisor or the API server), the failing process is the one
// `vllm serve` started: a line with --headless asked for the headless launcher, so a failure in the
// parser, in the environment the parser reads (vllm/envs.py, while ParallelConfig's defaults are
// built), or in validate_parsed_serve_args (vllm/entrypoints/openai/cli_args.py) is the headless
// launcher's, --grpc or not. Only the path taken names it otherwise (--grpc makes it the API
// server that serve_grpc runs).
func TestTopProcessBeforeTheLaunchPath(t *testing.T) {
	for _, tt := range []struct {
		name, line string
		top        string
		crash      string // "" = the path is taken
	}{
		{"validate refuses --grpc with the supervisor",
			"vllm serve org/M --headless --grpc -dp 2 -dpl 2 --data-parallel-multi-port-external-lb",
			"h/0/headless-0", "ValueError: Error: --data-parallel-multi-port-external-lb does not support --grpc"},
		{"the parser refuses an option",
			"vllm serve org/M --grpc --headless --no-such-option",
			"h/0/headless-0", "unrecognized arguments: --no-such-option"},
		{"the environment the parser reads",
			"VLLM_DP_SIZE=x vllm serve org/M --grpc --headless",
			"h/0/headless-0", "invalid literal for int() with base 10: 'x'"},
		{"the path taken: serve_grpc's API server",
			"vllm serve org/M --grpc --headless", "h/0/api-server-0", ""},
		// The word, not the option: an abbreviation parses as --headless, but only the path
		// (run_headless) makes the process the launcher.
		{"an abbreviation that fails validation is the API server's",
			"vllm serve org/M --headl --grpc -dp 2 -dpl 2 --data-parallel-multi-port-external-lb",
			"h/0/api-server-0", "does not support --grpc"},
		{"an abbreviation that reaches run_headless",
			"vllm serve org/M --headl -tp 2", "h/0/headless-0", ""},
		{"the OpenAI entrypoint has no headless launcher",
			"python -m vllm.entrypoints.openai.api_server --model org/M --headless --no-such-option",
			"h/0/api-server-0", "unrecognized arguments: --no-such-option"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			plans := planned(t, true, "main", node("h", tt.line))
			top, ok := plans[tt.top]
			if !ok {
				var ids []string
				for id := range plans {
					ids = append(ids, id)
				}
				t.Fatalf("no %s planned; planned: %v", tt.top, ids)
			}
			switch {
			case tt.crash == "" && top.Crash != nil:
				t.Errorf("%s crashes: %s", tt.top, top.Crash.Error)
			case tt.crash != "" && (top.Crash == nil || !strings.Contains(top.Crash.Error, tt.crash)):
				t.Errorf("%s: crash %+v, want %q", tt.top, top.Crash, tt.crash)
			}
		})
	}
}

// The KV engine_id run_engine_core gives a DP engine (vllm/v1/engine/core.py: the "_dp{rank}"
// suffix) is the connector's, and EngineCore.__init__ builds the scheduler, and with it the
// scheduler-side connector, only after the executor: an engine core that fails before, in
// DPEngineCoreProc._init_data_parallel's assertions (a DP rank from VLLM_DP_RANK with
// --data-parallel-size 1), reports no engine_id, as a worker that fails before its connector
// reports none. One that gets as far reports it.
func TestEngineCoreReportsItsEngineIDOnceItsSchedulerExists(t *testing.T) {
	const kv = ` --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both","engine_id":"e1"}'`
	plans := planned(t, true, "main", node("h",
		"VLLM_DP_RANK=1 vllm serve org/M -dp 1"+kv,
		"vllm serve org/M -dp 2 --port 9000 --data-parallel-rpc-port 13400"+kv))
	failed := plans["h/0/engine-core-1"]
	if failed == nil || failed.Crash == nil || failed.Crash.Error != "AssertionError" {
		t.Fatalf("h/0/engine-core-1: %+v, want the bare AssertionError of _init_data_parallel", failed)
	}
	if failed.Identity.EngineID != "" {
		t.Errorf("h/0/engine-core-1 reports engine_id %q before it built a scheduler; want none", failed.Identity.EngineID)
	}
	if failed.Identity.DataParallelIndex != 1 {
		t.Errorf("h/0/engine-core-1: data_parallel_index %d, want 1 (set before the assertion)", failed.Identity.DataParallelIndex)
	}
	for id, want := range map[string]string{"h/1/engine-core-0": "e1_dp0", "h/1/engine-core-1": "e1_dp1"} {
		if p := plans[id]; p == nil || p.Crash != nil || p.Identity.EngineID != want {
			t.Errorf("%s: %+v, want it running with engine_id %q", id, p, want)
		}
	}
}

// A front end with no local engine (--data-parallel-size-local 0 on a DP rank > 0, its engines
// elsewhere) serves its private handshake path for nobody: wait_for_engine_startup waits for no
// engine (vllm/v1/engine/utils.py), so the plan carries no expectation to screen hellos with.
func TestFrontEndWithoutLocalEnginesExpectsNone(t *testing.T) {
	plans := planned(t, true, "main", node("h",
		"vllm serve org/M -dp 4 --data-parallel-size-local 0 --data-parallel-start-rank 2 --data-parallel-address h --data-parallel-hybrid-lb"))
	fe := plans["h/0/api-server-0"]
	if fe == nil || fe.Crash != nil {
		t.Fatalf("h/0/api-server-0: %+v, want it serving", fe)
	}
	var local *RendezvousPlan
	for i, r := range fe.Rendezvous {
		if r.Kind == RendezvousDP {
			local = &fe.Rendezvous[i]
		}
	}
	if local == nil || local.WorldSize != 1 {
		t.Fatalf("the front end's handshakes %+v: want one of itself alone", fe.Rendezvous)
	}
	if local.Expect != nil {
		t.Errorf("its handshake expects %+v; want no expectation", *local.Expect)
	}
	if len(fe.Children) != 0 {
		t.Errorf("%d engine(s) under the front end, want none", len(fe.Children))
	}
}
