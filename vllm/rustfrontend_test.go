package vllm

import (
	"context"
	"strings"
	"testing"
)

// The Rust front end (vllm/entrypoints/cli/serve.py ServeSubcommand.cmd after its gRPC branch,
// vllm/envs.py _resolve_rust_cli_path, run_multi_api_server and vllm/v1/utils.py
// RustFrontendProcessManager): VLLM_USE_RUST_FRONTEND is int() of its value; set, the binary is
// VLLM_RUST_FRONTEND_PATH, or for "auto"/"1"/"true" (its default) vllm-rs beside envs.py, whose
// absence is a FileNotFoundError before anything starts. The API server count then defaults to
// one (an explicit count above one is capped), the launch is run_multi_api_server's, and
// get_engine_zmq_addresses probes each TCP engine-io port up front (defer_api_server_ports=False)
// for the Rust process to bind.
func TestRustFrontendLaunchPath(t *testing.T) {
	const bin = "VLLM_USE_RUST_FRONTEND=1 VLLM_RUST_FRONTEND_PATH=/opt/vllm-rs "
	head := "vllm serve org/M -dp 4 -dpl 2 --data-parallel-address h --data-parallel-rpc-port 13345"
	for _, tt := range []struct {
		name    string
		install Install
		line    string
		crash   string // the top process's exception ("" = none)
		io      string // the front end's engine-io records: "role key" joined by ","
		absent  string // a process that must not be planned
	}{
		{name: "internal LB: one engine-io pair, not one per DP rank", line: bin + "vllm serve org/M -dp 4",
			io: "bind input,bind output"},
		{name: "without it, one pair per API server", line: "vllm serve org/M -dp 4",
			io: "bind input,bind input,bind input,bind input,bind output,bind output,bind output,bind output"},
		{name: "an explicit count is capped at one", line: bin + "vllm serve org/M -dp 4 --api-server-count 3",
			io: "bind input,bind output"},
		{name: "TCP engine-io ports are probed up front", line: bin + head,
			io: "probe input,bind input,probe output,bind output"},
		{name: "without it, TCP ports are bound at once", line: head,
			io: "bind input,bind input,bind input,bind input,bind output,bind output,bind output,bind output"},
		{name: "auto without vllm-rs in the package", install: Install{PackageDir: "/x/vllm", NoRustFrontend: true},
			line:  "VLLM_USE_RUST_FRONTEND=1 vllm serve org/M -dp 2",
			crash: "FileNotFoundError: VLLM_RUST_FRONTEND_PATH=auto but the vllm-rs binary was not found at /x/vllm/vllm-rs.", absent: "h/0/engine-core-0"},
		{name: "TRUE is auto too", install: Install{PackageDir: "/x/vllm", NoRustFrontend: true},
			line:  "VLLM_USE_RUST_FRONTEND=1 VLLM_RUST_FRONTEND_PATH=TRUE vllm serve org/M --headless",
			crash: "not found at /x/vllm/vllm-rs", absent: "h/0/engine-core-0"},
		{name: "auto finds the images' vllm-rs", line: "VLLM_USE_RUST_FRONTEND=1 vllm serve org/M -dp 2",
			io: "bind input,bind output"},
		{name: "int() refuses true", line: "VLLM_USE_RUST_FRONTEND=true vllm serve org/M -dp 2",
			crash: "ValueError: invalid literal for int() with base 10: 'true'", absent: "h/0/engine-core-0"},
		{name: "0 is off", line: "VLLM_USE_RUST_FRONTEND=0 VLLM_RUST_FRONTEND_PATH=/opt/vllm-rs vllm serve org/M -dp 2",
			io: "bind input,bind input,bind output,bind output"},
		{name: "an empty path is off", install: Install{NoRustFrontend: true},
			line: "VLLM_USE_RUST_FRONTEND=1 VLLM_RUST_FRONTEND_PATH= vllm serve org/M -dp 2",
			io:   "bind input,bind input,bind output,bind output"},
		{name: "--grpc comes first", install: Install{NoRustFrontend: true},
			line: "VLLM_USE_RUST_FRONTEND=1 vllm serve org/M --grpc", io: "bind input,bind output"},
		{name: "the OpenAI entrypoint never reads it", install: Install{NoRustFrontend: true},
			line: "VLLM_USE_RUST_FRONTEND=1 python -m vllm.entrypoints.openai.api_server --model org/M", io: "bind input,bind output"},
		{name: "read before the headless checks", install: Install{NoRustFrontend: true},
			line:  "VLLM_USE_RUST_FRONTEND=1 vllm serve org/M --headless --api-server-count 2",
			crash: "FileNotFoundError"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := Deployment{Name: "rust", Model: Model{Name: "org/M", MoE: true}, Profile: profileOf(t, "main"), Seed: "seed",
				Nodes: []Node{node("h", tt.line)}, Install: tt.install}
			plans, err := ModelPlanner{}.PlanDeployment(context.Background(), d)
			if err != nil {
				t.Fatal(err)
			}
			procs := ProcessesByID(plans)
			var top *ProcessPlan
			for _, id := range []string{"h/0/api-server-0", "h/0/headless-0"} {
				if p, ok := procs[id]; ok {
					top = p
				}
			}
			if top == nil {
				t.Fatalf("no front end planned: %v", procs)
			}
			switch {
			case tt.crash == "" && top.Crash != nil:
				t.Fatalf("%s crashes: %s", top.Identity.ID, top.Crash.Error)
			case tt.crash != "" && (top.Crash == nil || !strings.Contains(top.Crash.Error, tt.crash)):
				t.Fatalf("%s: crash %+v, want %q", top.Identity.ID, top.Crash, tt.crash)
			}
			if tt.absent != "" {
				if _, ok := procs[tt.absent]; ok {
					t.Errorf("%s planned, want none", tt.absent)
				}
			}
			if tt.crash != "" {
				return
			}
			var io []string
			for _, a := range top.Addresses {
				if a.Channel == "engine-io" {
					io = append(io, string(a.Role)+" "+a.Key)
				}
			}
			if got := strings.Join(io, ","); got != tt.io {
				t.Errorf("engine-io %q, want %q", got, tt.io)
			}
		})
	}
}
