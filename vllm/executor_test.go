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
