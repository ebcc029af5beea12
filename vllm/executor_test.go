package vllm

import (
	"strings"
	"testing"

	"github.com/widetp/widetp/report"
)

// TestUniExecutorRunsOneWorker: UniProcExecutor (vllm/v1/executor/uniproc_executor.py
// _distributed_args) runs one worker at rank 0 whatever the world size, which
// --distributed-executor-backend uni leaves above 1 (vllm/config/parallel.py accepts uni with
// any world size): that worker waits in a torch world nobody else joins. A follower node of a wide
// TP replica starts its workers through MultiprocExecutor whatever the backend (run_headless in
// vllm/entrypoints/cli/serve.py).
func TestUniExecutorRunsOneWorker(t *testing.T) {
	ranks := func(ws []report.Process) []int {
		var out []int
		for _, w := range ws {
			out = append(out, *w.Rank)
		}
		return out
	}
	workers := func(procs []report.Process, prefix string) []report.Process {
		var out []report.Process
		for _, p := range under(procs, prefix) {
			if p.Role == report.RoleWorker {
				out = append(out, p)
			}
		}
		return out
	}
	t.Run("TP 2: one worker at rank 0 times out", func(t *testing.T) {
		procs := predict(t, true, "main", node("h", "vllm serve org/M -tp 2 --distributed-executor-backend uni"))
		ws := workers(procs, "h/0/engine-core-0")
		if len(ws) != 1 || *ws[0].Rank != 0 || *ws[0].TPRank != 0 {
			t.Fatalf("worker ranks %v, want [0]", ranks(ws))
		}
		if e := exitText(ws[0]); !strings.Contains(e, "DistStoreError") || !strings.Contains(e, "1/2 clients joined") {
			t.Errorf("worker: %s, want the torch store's time-out with 1 of 2 ranks", e)
		}
		if e := exitText(get(t, procs, "h/0/engine-core-0")); !strings.Contains(e, "WorkerProc initialization failed") {
			t.Errorf("engine core: %s", e)
		}
	})
	t.Run("TP 1: the worker starts", func(t *testing.T) {
		procs := predict(t, true, "main", node("h", "vllm serve org/M --distributed-executor-backend uni"))
		ws := workers(procs, "h/0/engine-core-0")
		if len(ws) != 1 || ws[0].Exit != nil {
			t.Fatalf("worker ranks %v (%s), want one that runs", ranks(ws), exitText(ws[0]))
		}
	})
	t.Run("DP 2: each engine core runs its own rank-0 worker", func(t *testing.T) {
		procs := predict(t, true, "main", node("h", "vllm serve org/M -dp 2 --distributed-executor-backend uni"))
		for _, e := range []string{"h/0/engine-core-0", "h/0/engine-core-1"} {
			if ws := workers(procs, e); len(ws) != 1 || *ws[0].Rank != 0 {
				t.Errorf("%s: worker ranks %v, want [0]", e, ranks(ws))
			}
		}
	})
	t.Run("wide TP: the follower's workers are MultiprocExecutor's", func(t *testing.T) {
		line := "vllm serve org/M -tp 16 --nnodes 2 --master-addr n0 --master-port 29600 --distributed-executor-backend uni --node-rank "
		procs := predict(t, true, "main", node("n0", line+"0"), node("n1", line+"1 --headless"))
		if ws := workers(procs, "n0/0/engine-core-0"); len(ws) != 1 || *ws[0].Rank != 0 {
			t.Errorf("head: worker ranks %v, want [0]", ranks(ws))
		}
		ws := workers(procs, "n1/0/headless-0")
		if len(ws) != 8 || *ws[0].Rank != 8 || *ws[7].Rank != 15 {
			t.Errorf("follower: worker ranks %v, want 8..15", ranks(ws))
		}
	})
}

// TestWorkerDownStopsTheEngineBeforeItsScheduler: EngineCore.__init__ (vllm/v1/engine/core.py)
// builds its executor, whose workers start and build their KV connectors, before it builds the
// Scheduler (vllm/v1/core/sched/scheduler.py), whose constructor builds the scheduler's KV
// connector, then its event publisher (vllm/distributed/kv_events.py), and whose offloading
// connector opens its secondary tiers (vllm/v1/kv_offload/tiering/p2p/manager.py). An engine core
// whose worker fails (here: CUDA_VISIBLE_DEVICES names one device, so engine 1's worker, local
// rank 1, has none) never gets to raise what its Scheduler would; an engine core whose workers
// start does.
func TestWorkerDownStopsTheEngineBeforeItsScheduler(t *testing.T) {
	const offload = `{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"spec_name":"TieringOffloadingSpec","cpu_bytes_to_use":209715200,"secondary_tiers":[{"type":"p2p","host":"127.0.0.1","port":7777}]}}`
	for _, tt := range []struct {
		name, flags, want string
		index0            bool // engine 0 raises it too (the publisher offsets past index 0 only)
	}{
		{"the scheduler's KV connector", "--kv-transfer-config.kv_role kv_both --disable-hybrid-kv-cache-manager",
			"ValueError: Connector name is not set in KVTransferConfig", true},
		{"the event publisher", `--kv-events-config '{"enable_kv_cache_events":true,"endpoint":"tcp://*:abc"}'`,
			"ValueError: invalid literal for int() with base 10: 'abc'", false},
		{"a P2P offload tier without PYTHONHASHSEED", "--kv-transfer-config '" + offload + "'",
			"ValueError: PYTHONHASHSEED must be set for P2P KV offload so that block hashes match across instances. Set it to a fixed value (e.g. PYTHONHASHSEED=0) on every P2P peer.", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Both workers start (two devices): engine 1 raises what its Scheduler would.
			up := planned(t, true, "main", node("h", "CUDA_VISIBLE_DEVICES=0,1 vllm serve org/M -dp 2 --enable-expert-parallel "+tt.flags))
			if c := up["h/0/engine-core-1"].Crash; c == nil || c.Stage != StageConnectorInit || c.Error != tt.want {
				t.Fatalf("workers up: engine 1 crash %+v, want %q at connector init", c, tt.want)
			}
			down := planned(t, true, "main", node("h", "CUDA_VISIBLE_DEVICES=0 vllm serve org/M -dp 2 --enable-expert-parallel "+tt.flags))
			if w := down["h/0/engine-core-1/worker-0"].Crash; w == nil || w.Stage != StageEngineInit {
				t.Fatalf("engine 1's worker: crash %+v, want it to fail selecting its device", w)
			}
			if c := down["h/0/engine-core-1"].Crash; c != nil {
				t.Errorf("worker down: engine 1 crash %+v, want none (its Scheduler is never built)", c)
			}
			// Engine 0's worker has device 0: its Scheduler is built, and raises as before.
			c := down["h/0/engine-core-0"].Crash
			if tt.index0 && (c == nil || c.Error != tt.want) || !tt.index0 && c != nil {
				t.Errorf("engine 0, whose worker starts: crash %+v (raises it: %t)", c, tt.index0)
			}
		})
	}
}
