package vllm

import (
	"testing"

	"github.com/widetp/widetp/report"
)

// A process serves once everything below it came up: the API server leaves
// wait_for_engine_startup (vllm/v1/engine/utils.py) only when every engine sent READY, which an
// engine core sends at the end of EngineCoreProc's start-up, after its executor's workers and its
// scheduler (vllm/v1/engine/core.py). Until then the HTTP socket setup_server bound
// (vllm/entrypoints/openai/api_server.py) does not listen, and a gRPC front end has not bound its
// port (serve_grpc, vllm/entrypoints/grpc_server.py).
func TestFrontEndServesOnlyOnceItsEnginesAreUp(t *testing.T) {
	// Engines that spin in get_open_port for ever (vLLM issue #50024: VLLM_PORT inside the range
	// VLLM_DP_MASTER_PORT reserves, the retrying allocator, the TCP executor rendezvous).
	const hanging = "VLLM_PORT=29500 VLLM_DP_MASTER_PORT=29500 vllm serve org/M --data-parallel-size 2 --api-server-count 1 --port 8000"
	const profile = "main+open_port_reserved=retry,executor_rendezvous=tcp"
	socket := func(p report.Process) report.Address {
		t.Helper()
		for _, a := range p.Addresses {
			if a.Channel == "api-server" {
				return a
			}
		}
		t.Fatalf("%s has no api-server socket", p.ID)
		return report.Address{}
	}
	t.Run("a later HTTP front end on the port serves", func(t *testing.T) {
		procs := predict(t, false, profile, node("h", hanging, "CUDA_VISIBLE_DEVICES=2,3 vllm serve org/M --port 8000 -tp 2"))
		first, second := get(t, procs, "h/0/api-server-0"), get(t, procs, "h/1/api-server-0")
		if get(t, procs, "h/0/engine-core-0").Hung == nil {
			t.Fatalf("h/0's engines do not hang: the test's premise is gone")
		}
		if first.Exit != nil || first.Hung != nil {
			t.Errorf("h/0/api-server-0: exit %+v hung %+v, want it waiting for READY", first.Exit, first.Hung)
		}
		// Both bound the port with SO_REUSEADDR and neither listened then: Linux lets both bind.
		// Only the second listens, since the first never gets its engines' READY.
		if a := socket(second); second.Exit != nil || a.Error != "" || a.BindSeq <= socket(first).BindSeq {
			t.Errorf("h/1/api-server-0: exit %+v, socket %+v: want it bound after the first and serving", second.Exit, a)
		}
	})
	t.Run("a later gRPC front end on the port serves", func(t *testing.T) {
		procs := predict(t, false, profile, node("h", hanging, "CUDA_VISIBLE_DEVICES=2,3 vllm serve org/M --grpc --port 8000 -tp 2"))
		if g := get(t, procs, "h/1/api-server-0"); g.Exit != nil || socket(g).Error != "" {
			t.Errorf("h/1/api-server-0: exit %+v, socket %+v: want it serving", g.Exit, socket(g))
		}
	})
	t.Run("with engines up the first listener keeps the port", func(t *testing.T) {
		procs := predict(t, false, "main", node("h", "vllm serve org/M --port 8000 -tp 2",
			"CUDA_VISIBLE_DEVICES=2,3 vllm serve org/M --grpc --port 8000 -tp 2"))
		g := get(t, procs, "h/1/api-server-0")
		if g.Exit == nil || socket(g).Errno != AddrInUseErrno {
			t.Errorf("h/1/api-server-0: exit %+v, socket %+v: want EADDRINUSE", g.Exit, socket(g))
		}
	})
}
