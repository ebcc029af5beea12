package vllm

import (
	"strings"
	"testing"
)

// `vllm serve --grpc` is ServeSubcommand.cmd's first branch (vllm/entrypoints/cli/serve.py):
// serve_grpc (vllm/entrypoints/grpc_server.py) builds the config as run_server does, with one API
// process and no headless mode, whatever --headless, --api-server-count or the hybrid/external
// flags say, and binds host:port with grpc.aio's add_insecure_port (SO_REUSEPORT) once AsyncLLM
// is up. The OpenAI entrypoint's __main__ never looks at --grpc; the DP supervisor refuses it
// (vllm/entrypoints/openai/dp_supervisor.py validate_multi_port_external_lb_args).
func TestGRPCLaunchPath(t *testing.T) {
	for _, tt := range []struct {
		name, line string
		top        string // the top process's ID
		others     []string
		absent     []string
		socket     string // the api-server bind: "stage endpoint flavor reuse" ("" = none)
		crash      string
	}{
		{"headless is ignored", "vllm serve org/M --grpc --headless -tp 2", "h/0/api-server-0",
			[]string{"h/0/engine-core-0/worker-1"}, []string{"h/0/headless-0"}, "serving tcp://0.0.0.0:8000 grpc true", ""},
		{"one API process whatever --api-server-count", "vllm serve org/M --grpc -dp 4 --api-server-count 4", "h/0/api-server-0",
			[]string{"h/0/engine-core-3"}, []string{"h/0/api-server-1"}, "serving tcp://0.0.0.0:8000 grpc true", ""},
		{"--host and --port", "vllm serve org/M --grpc --host :: --port 50051", "h/0/api-server-0",
			nil, nil, "serving tcp://[::]:50051 grpc true", ""},
		{"the OpenAI entrypoint serves HTTP", "python -m vllm.entrypoints.openai.api_server --model org/M --grpc", "h/0/api-server-0",
			nil, nil, "config tcp://0.0.0.0:8000 socket false", ""},
		{"the DP supervisor refuses it", "vllm serve org/M --grpc -dp 2 -dpl 2 --data-parallel-multi-port-external-lb", "h/0/api-server-0",
			nil, []string{"h/0/engine-core-0"}, "", "ValueError: Error: --data-parallel-multi-port-external-lb does not support --grpc"},
		{"a config error binds nothing", "vllm serve org/M --grpc -dp 2 --data-parallel-rank 5", "h/0/api-server-0",
			nil, []string{"h/0/engine-core-0"}, "", "data_parallel_rank (5) must be in the range [0, 2)"},
		// python -m vllm.entrypoints.grpc_server: main() parses --host, --port (50051) and the
		// engine's options, then runs serve_grpc without validate_parsed_serve_args or
		// ServeSubcommand.cmd (no load-balancing mode check, no supervisor).
		{"the module's default port", "python -m vllm.entrypoints.grpc_server --model org/M -tp 2", "h/0/api-server-0",
			[]string{"h/0/engine-core-0/worker-1"}, nil, "serving tcp://0.0.0.0:50051 grpc true", ""},
		{"the module's --host and --port", "python3 -m vllm.entrypoints.grpc_server --model org/M --host :: --port 7000", "h/0/api-server-0",
			nil, nil, "serving tcp://[::]:7000 grpc true", ""},
		{"the module takes the supervisor flag as an engine option", "python -m vllm.entrypoints.grpc_server --model org/M -dp 2 --data-parallel-multi-port-external-lb", "h/0/api-server-0",
			[]string{"h/0/engine-core-1"}, []string{"h/0/dp-supervisor-0"}, "serving tcp://0.0.0.0:50051 grpc true", ""},
		{"the module checks no load-balancing mode", "python -m vllm.entrypoints.grpc_server --model org/M -dp 2 --data-parallel-rank 0 --data-parallel-hybrid-lb", "h/0/api-server-0",
			[]string{"h/0/engine-core-0"}, nil, "serving tcp://0.0.0.0:50051 grpc true", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			plans := planned(t, true, "main", node("h", tt.line))
			top, ok := plans[tt.top]
			if !ok {
				t.Fatalf("no %s planned", tt.top)
			}
			for _, id := range tt.others {
				if _, ok := plans[id]; !ok {
					t.Errorf("no %s planned", id)
				}
			}
			for _, id := range tt.absent {
				if _, ok := plans[id]; ok {
					t.Errorf("%s planned, want none", id)
				}
			}
			switch {
			case tt.crash == "" && top.Crash != nil:
				t.Errorf("%s crashes: %s", tt.top, top.Crash.Error)
			case tt.crash != "" && (top.Crash == nil || !strings.Contains(top.Crash.Error, tt.crash)):
				t.Errorf("%s: crash %+v, want %q", tt.top, top.Crash, tt.crash)
			}
			var sockets []string
			for _, a := range top.Addresses {
				if a.Channel == "api-server" {
					sockets = append(sockets, strings.Join([]string{string(a.Stage), a.Endpoint, a.Flavor, map[bool]string{true: "true", false: "false"}[a.ReusePort]}, " "))
				}
			}
			want := []string{}
			if tt.socket != "" {
				want = []string{tt.socket}
			}
			if strings.Join(sockets, "|") != strings.Join(want, "|") {
				t.Errorf("api-server sockets %q, want %q", sockets, want)
			}
		})
	}
}

// A gRPC bind the kernel refuses raises gRPC's RuntimeError, which names the address and not
// the errno (grpc/_common.py validate_port_binding_result); the record keeps the errno.
func TestGRPCBindRefusedOnPaper(t *testing.T) {
	procs := predict(t, false, "main", node("h",
		"vllm serve org/M --port 8000 -tp 2",
		"CUDA_VISIBLE_DEVICES=2,3 vllm serve org/M --grpc --port 8000 -tp 2"))
	p := get(t, procs, "h/1/api-server-0")
	want := "RuntimeError: Failed to bind to address 0.0.0.0:8000; set GRPC_VERBOSITY=debug environment variable to see detailed error message."
	if p.Exit == nil || p.Exit.Error != want {
		t.Fatalf("gRPC front end: %s, want %q", exitText(p), want)
	}
	for _, a := range p.Addresses {
		if a.Channel == "api-server" && (a.Errno != AddrInUseErrno || !a.AddrInUse()) {
			t.Errorf("its socket record %+v: want errno %d", a, AddrInUseErrno)
		}
	}
	if h := get(t, procs, "h/0/api-server-0"); h.Exit != nil {
		t.Errorf("the HTTP front end: %s, want it serving", exitText(h))
	}
}

// `python -m vllm.entrypoints.grpc_server`'s parser (built in its main()) has --host (a plain
// string), --port (50051) and the engine's options only: a frontend option or a positional model
// is a leftover its parser refuses, under its own program name (vLLM's parser agrees on every
// option: TestParseServeAgreesWithVLLMsParser).
func TestGRPCServerEntrypointParser(t *testing.T) {
	for _, tt := range []struct{ line, err string }{
		{"python -m vllm.entrypoints.grpc_server --model org/M --headless", "grpc_server.py: error: unrecognized arguments: --headless"},
		{"python -m vllm.entrypoints.grpc_server org/M", "grpc_server.py: error: unrecognized arguments: org/M"},
		{"python -m vllm.entrypoints.grpc_server --model org/M --api-server-count 2", "grpc_server.py: error: unrecognized arguments: --api-server-count 2"},
		{"python -m vllm.entrypoints.grpc_server --model org/M --port x", "grpc_server.py: error: argument --port: invalid int value: 'x'"},
		{"python -m vllm.entrypoints.grpc_server --model org/M -- -tp 2", "grpc_server.py: error: unrecognized arguments: -- -tp 2"},
	} {
		if _, err := ParseServe(tt.line); err == nil || err.Error() != tt.err {
			t.Errorf("%s: %v, want %q", tt.line, err, tt.err)
		}
	}
	a, err := ParseServe("python -m vllm.entrypoints.grpc_server --model org/M --host None -tp 2")
	if err != nil {
		t.Fatal(err)
	}
	if a.Entrypoint != EntrypointGRPCServer || a.Port != 50051 || a.lastOther("--host") != "None" || a.Model != "org/M" {
		t.Errorf("entrypoint %q, port %d, host %q, model %q; want grpc_server, 50051, the string None, org/M", a.Entrypoint, a.Port, a.lastOther("--host"), a.Model)
	}
}
