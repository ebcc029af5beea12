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
	// An engine of another host that dies after its handshake and before its READY: the front
	// end's wait_for_engine_startup has no deadline and polls only its local processes' sentinels,
	// so it waits for ever. Here the P2P offload tier refuses to start without PYTHONHASHSEED
	// (vllm/v1/kv_offload/tiering/p2p/manager.py), which only the front end's host sets.
	t.Run("a front end whose remote engine dies before its READY never listens", func(t *testing.T) {
		const kv = `--kv-transfer-config '{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"spec_name":"TieringOffloadingSpec","cpu_bytes_to_use":1000000,"secondary_tiers":[{"type":"p2p"}]}}'`
		const dp = " -dp 2 -dpl 1 -dpa h --data-parallel-rpc-port 13345 "
		for _, remote := range []string{"", "PYTHONHASHSEED=0 "} {
			procs := predict(t, false, "main",
				node("h", "CUDA_VISIBLE_DEVICES=0 PYTHONHASHSEED=0 vllm serve org/M --port 8000 --api-server-count 1"+dp+kv,
					"CUDA_VISIBLE_DEVICES=1 vllm serve org/M --grpc --port 8000"),
				node("g", remote+"vllm serve org/M --headless --data-parallel-start-rank 1"+dp+kv))
			engine, http, grpc := get(t, procs, "g/0/engine-core-1"), get(t, procs, "h/0/api-server-0"), get(t, procs, "h/1/api-server-0")
			if remote != "" {
				// With the seed on both hosts every engine sends READY: the HTTP front end listens
				// first, and the gRPC bind beside it fails.
				if engine.Exit != nil || http.Exit != nil || grpc.Exit == nil || socket(grpc).Errno != AddrInUseErrno {
					t.Errorf("seeded: engine exit %+v, HTTP exit %+v, gRPC exit %+v socket %+v: want the HTTP front end serving and the gRPC bind refused", engine.Exit, http.Exit, grpc.Exit, socket(grpc))
				}
				continue
			}
			if engine.Exit == nil || len(engine.Rendezvous) != 1 || engine.Rendezvous[0].Error != "" {
				t.Fatalf("g/0/engine-core-1: exit %+v, rendezvous %+v: the test's premise (it dies after its handshake) is gone", engine.Exit, engine.Rendezvous)
			}
			if http.Exit != nil {
				t.Errorf("h/0/api-server-0: exit %+v, want it waiting for READY", http.Exit)
			}
			if grpc.Exit != nil || socket(grpc).Error != "" {
				t.Errorf("h/1/api-server-0: exit %+v, socket %+v: want it serving beside a socket that never listens", grpc.Exit, socket(grpc))
			}
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
