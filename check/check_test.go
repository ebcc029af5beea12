package check_test

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/widetp/widetp/check"
	"github.com/widetp/widetp/report"
)

// want is one expected violation: its kind, exactly the processes it names, and fragments its
// message must contain (host, process, values).
type want struct {
	kind  report.Kind
	procs []string
	says  []string
}

type row struct {
	name string
	// source is the vLLM (or Mooncake) behaviour the row encodes.
	source string
	procs  []report.Process
	want   []want
}

func TestRun(t *testing.T) {
	healthy := wideTP(2, 2, 2)
	followerWorkers := where(healthy, func(p report.Process) bool {
		return p.Role == report.RoleWorker && strings.Contains(p.Host, "follower")
	})
	r1Head := []string{"r1-head/0/engine-core-0", "r1-head/0/engine-core-0/worker-0", "r1-head/0/engine-core-0/worker-1"}
	pre48061 := edit(edit(healthy, func(p *report.Process) { p.MooncakeDPIndex = nil; crash("AssertionError")(p) }, followerWorkers...), mooncake(0), r1Head...)

	var crashes []want
	for _, id := range followerWorkers {
		crashes = append(crashes, want{report.ProcessCrashed, []string{id}, []string{id, "exited with code 1: AssertionError"}})
	}
	var r1Mismatch []want
	for _, id := range r1Head {
		w := want{report.DPIndexMismatch, []string{id, "r1-head/0/engine-core-0"}, []string{
			id + " has Mooncake DP index 0", "replica r1-head:29500's engine core r1-head/0/engine-core-0 has data_parallel_index 1"}}
		if id == "r1-head/0/engine-core-0" {
			w = want{report.DPIndexMismatch, []string{id}, []string{id + " has Mooncake DP index 0", "its own data_parallel_index", "is 1"}}
		}
		r1Mismatch = append(r1Mismatch, w)
	}

	// Co-located external-LB replicas under pre-48061: both Mooncake indices are 0, so both rank-0
	// workers bind ..._dp_rank0 and the later binder (command 1) answers both engine cores.
	colo := coLocated(2)
	dp0 := "ipc:///tmp/lookup_rpc_port_0_host_node0_dp_rank0"
	coloPre := edit(edit(edit(colo, chain(mooncake(0), func(p *report.Process) {
		if p.LookupPath != "" {
			p.LookupPath = dp0
		}
	}), "node0/1/engine-core-0", "node0/1/engine-core-0/worker-0", "node0/1/engine-core-0/worker-1"),
		func(p *report.Process) {
			p.Lookup = &report.Lookup{Nonce: "nonce-0", ServedBy: "node0/1/engine-core-0/worker-0"}
		}, "node0/0/engine-core-0"),
		func(p *report.Process) { p.Served = []string{"nonce-0", "nonce-1"} }, "node0/1/engine-core-0/worker-0")
	coloPre = edit(coloPre, func(p *report.Process) { p.Served = nil }, "node0/0/engine-core-0/worker-0")

	rows := []row{
		{name: "healthy wide-TP external LB under main", source: "vllm-identity.md §4 (e2); mooncake_store_worker.py after #48061: data_parallel_index always",
			procs: healthy},
		{name: "no records", source: "nothing reported: nothing to decide", procs: nil},
		{name: "pre-48061 wide-TP: followers assert, replica 1's head uses rank_local 0", source: "mooncake_store_worker.py before #48061 (get_mooncake_dp_engine_index); vllm/entrypoints/cli/serve.py run_headless leaves data_parallel_rank_local None",
			procs: pre48061, want: append(append([]want{}, crashes...), r1Mismatch...)},

		// process-crashed
		{name: "a signal nobody asked for is a crash", source: "README process-crashed: killed without a fault asking for it",
			procs: edit(healthy, func(p *report.Process) { p.Exit = &report.Exit{Code: -9, Signal: "SIGKILL"} }, "r0-head/0/api-server-0"),
			want:  []want{{report.ProcessCrashed, []string{"r0-head/0/api-server-0"}, []string{"api-server on r0-head", "(no replica)", "was killed by SIGKILL"}}}},
		{name: "an exit a fault or the teardown asked for is not a crash", source: "report.Exit.Expected",
			procs: edit(healthy, func(p *report.Process) { p.Exit = &report.Exit{Code: -15, Signal: "SIGTERM", Expected: true} }, "r0-head/0/engine-core-0/worker-1")},
		{name: "a clean exit is not a crash", source: "report.Process.Crashed: code 0, no exception",
			procs: edit(healthy, func(p *report.Process) { p.Exit = &report.Exit{Code: 0} }, "r0-head/0/api-server-0")},
		{name: "a ValueError at config is a crash with its message", source: "vllm/engine/arg_utils.py: Non-MoE models do not support external data parallel mode",
			procs: edit(healthy, crash("ValueError: Non-MoE models do not support external data parallel mode."), "r1-head/0/api-server-0"),
			want:  []want{{report.ProcessCrashed, []string{"r1-head/0/api-server-0"}, []string{"exited with code 1: ValueError: Non-MoE models"}}}},

		// dp-index-mismatch and what "the replica's engine core" is
		{name: "follower index differs from the head engine core", source: "vllm-identity.md §4 (e3) pre-48061: head uses rank_local 0, follower S",
			procs: edit(healthy, mooncake(0), "r1-follower1/0/headless-0/worker-1"),
			want: []want{{report.DPIndexMismatch, []string{"r1-follower1/0/headless-0/worker-1", "r1-head/0/engine-core-0"},
				[]string{"r1-follower1/0/headless-0/worker-1 has Mooncake DP index 0", "replica r1-head:29500's engine core r1-head/0/engine-core-0 has data_parallel_index 1"}}}},
		{name: "a crashed engine core still fixes its replica's index", source: "vllm/v1/engine/core.py: data_parallel_index is set before the executor starts",
			procs: edit(edit(healthy, crash("RuntimeError: Engine core initialization failed."), "r1-head/0/engine-core-0"), mooncake(3), "r1-follower1/0/headless-0/worker-0"),
			want: []want{
				{report.ProcessCrashed, []string{"r1-head/0/engine-core-0"}, []string{"RuntimeError"}},
				{report.DPIndexMismatch, []string{"r1-follower1/0/headless-0/worker-0", "r1-head/0/engine-core-0"}, []string{"Mooncake DP index 3", "has data_parallel_index 1"}},
			}},
		{name: "a missing engine core: the rank-0 worker stands in", source: "vllm/v1/executor/multiproc_executor.py: workers run with their engine core's vllm_config",
			procs: edit(drop(healthy, "r1-head/0/engine-core-0"), mooncake(0), "r1-follower1/0/headless-0/worker-0"),
			want: []want{{report.DPIndexMismatch, []string{"r1-follower1/0/headless-0/worker-0", "r1-head/0/engine-core-0/worker-0"},
				[]string{"engine core did not report; its rank-0 worker r1-head/0/engine-core-0/worker-0 has data_parallel_index 1"}}}},
		{name: "the head node missing entirely: members agree on data_parallel_index", source: "README (how the checks group records): a replica is the set of processes that joined one rendezvous",
			procs: edit(drop(healthy, "r1-head/0/engine-core-0", "r1-head/0/engine-core-0/worker-0", "r1-head/0/engine-core-0/worker-1"), mooncake(0), "r1-follower1/0/headless-0/worker-0"),
			want:  []want{{report.DPIndexMismatch, []string{"r1-follower1/0/headless-0/worker-0"}, []string{"every member has data_parallel_index 1"}}}},
		{name: "no reference and members disagree: their Mooncake indices must still agree", source: "mooncake_store_worker.py: server and clients of one replica compute one path",
			procs: edit(edit(drop(healthy, "r1-head/0/engine-core-0", "r1-head/0/engine-core-0/worker-0", "r1-head/0/engine-core-0/worker-1"),
				func(p *report.Process) { p.DataParallelIndex = 0 }, "r1-follower1/0/headless-0"), mooncake(0), "r1-follower1/0/headless-0/worker-0"),
			want: []want{{report.DPIndexMismatch, []string{"r1-follower1/0/headless-0/worker-0", "r1-follower1/0/headless-0/worker-1"},
				[]string{"replica r1-head:29500 has no engine core", "0 (r1-follower1/0/headless-0/worker-0); 1 (r1-follower1/0/headless-0/worker-1)"}}}},
		{name: "no reference, members disagree on data_parallel_index only: nothing to compare", source: "the Mooncake indices agree, so the lookup paths meet",
			procs: edit(drop(healthy, "r1-head/0/engine-core-0", "r1-head/0/engine-core-0/worker-0", "r1-head/0/engine-core-0/worker-1"),
				func(p *report.Process) { p.DataParallelIndex = 7 }, "r1-follower1/0/headless-0")},
		{name: "a process without a connector index is not compared", source: "report.Process.MooncakeDPIndex nil: no connector",
			procs: edit(healthy, func(p *report.Process) { p.MooncakeDPIndex = nil; p.DataParallelIndex = 5 }, "r0-follower1/0/headless-0/worker-0")},
		{name: "a process without a replica is not compared", source: "API servers own engines of several replicas (internal LB)",
			procs: edit(healthy, mooncake(9), "r0-head/0/api-server-0")},

		// lookup-path-collision, lookup-misrouted
		{name: "co-located external-LB replicas under main: distinct paths", source: "vllm-identity.md §4 (c) after #48061", procs: colo},
		{name: "co-located external-LB replicas pre-48061: one path, the later binder answers both", source: "vllm-identity.md §5 (c); libzmq ipc takeover; mooncake_store_worker.py unlinks the path before bind",
			procs: coloPre, want: []want{
				{report.DPIndexMismatch, []string{"node0/1/engine-core-0"}, []string{"node0/1/engine-core-0 has Mooncake DP index 0", "is 1"}},
				{report.DPIndexMismatch, []string{"node0/1/engine-core-0", "node0/1/engine-core-0/worker-0"}, []string{"node0/1/engine-core-0/worker-0 has Mooncake DP index 0"}},
				{report.DPIndexMismatch, []string{"node0/1/engine-core-0", "node0/1/engine-core-0/worker-1"}, []string{"node0/1/engine-core-0/worker-1 has Mooncake DP index 0"}},
				{report.LookupPathCollision, []string{"node0/0/engine-core-0/worker-0", "node0/1/engine-core-0/worker-0"},
					[]string{"on host node0, 2 live lookup servers bound " + dp0, "node0/0/engine-core-0/worker-0 (replica node0:29500, Mooncake DP index 0, bind 1), node0/1/engine-core-0/worker-0 (replica node0:29501, Mooncake DP index 0, bind 2)"}},
				{report.LookupMisrouted, []string{"node0/0/engine-core-0", "node0/1/engine-core-0/worker-0"},
					[]string{"node0/0/engine-core-0 (replica node0:29500, Mooncake DP index 0) looked up at " + dp0, "answered by node0/1/engine-core-0/worker-0 of replica node0:29501"}},
			}},
		{name: "two spellings of one socket file collide", source: "store/scheduler.py get_zmq_rpc_path_lookup formats ipc://{VLLM_RPC_BASE_PATH}/...: VLLM_RPC_BASE_PATH=/tmp/ gives ipc:///tmp//..., the file libzmq binds for ipc:///tmp/...",
			procs: edit(edit(colo, func(p *report.Process) { p.LookupPath = dp0 }, "node0/0/engine-core-0/worker-0"),
				func(p *report.Process) { p.LookupPath = strings.Replace(dp0, "ipc:///tmp/", "ipc:///tmp//", 1) }, "node0/1/engine-core-0/worker-0"),
			want: []want{{report.LookupPathCollision, []string{"node0/0/engine-core-0/worker-0", "node0/1/engine-core-0/worker-0"}, []string{"2 live lookup servers bound " + dp0}}}},
		{name: "one path on two hosts is no collision", source: "ipc paths are files: host-local",
			procs: edit(healthy, func(p *report.Process) { p.LookupPath = "ipc:///tmp/same" }, "r0-head/0/engine-core-0/worker-0", "r1-head/0/engine-core-0/worker-0", "r0-head/0/engine-core-0", "r1-head/0/engine-core-0")},
		{name: "a crashed binder holds no path", source: "the later bind unlinks the dead socket file",
			procs: edit(edit(colo, func(p *report.Process) { p.LookupPath = dp0 }, "node0/1/engine-core-0/worker-0"), crash("AssertionError"), "node0/0/engine-core-0/worker-0"),
			want:  []want{{report.ProcessCrashed, []string{"node0/0/engine-core-0/worker-0"}, []string{"AssertionError"}}}},
		{name: "a binder stopped by the teardown still held its path", source: "report.Process.Live: expected exits count as live",
			procs: edit(edit(colo, func(p *report.Process) { p.LookupPath = dp0 }, "node0/1/engine-core-0/worker-0"),
				func(p *report.Process) { p.Exit = &report.Exit{Code: -15, Signal: "SIGTERM", Expected: true} }, "node0/0/engine-core-0/worker-0"),
			want: []want{{report.LookupPathCollision, []string{"node0/0/engine-core-0/worker-0", "node0/1/engine-core-0/worker-0"}, []string{"2 live lookup servers"}}}},
		{name: "answered by a process that left no record", source: "report.ResolveLookups names the server; an unknown one cannot be the client's replica",
			procs: edit(healthy, func(p *report.Process) {
				p.Lookup = &report.Lookup{Nonce: "nonce-0", ServedBy: "ghost/0/engine-core-0/worker-0"}
			}, "r0-head/0/engine-core-0"),
			want: []want{{report.LookupMisrouted, []string{"ghost/0/engine-core-0/worker-0", "r0-head/0/engine-core-0"}, []string{"answered by ghost/0/engine-core-0/worker-0, which left no record"}}}},
		{name: "answered, but no server claims the nonce", source: "report.ResolveLookups found no Served entry for the nonce",
			procs: edit(healthy, func(p *report.Process) { p.Lookup = &report.Lookup{Nonce: "nonce-1"} }, "r1-head/0/engine-core-0"),
			want:  []want{{report.LookupMisrouted, []string{"r1-head/0/engine-core-0"}, []string{"no lookup server of the deployment claims", `"nonce-1"`}}}},

		// lookup-unreachable
		{name: "a lookup that timed out", source: "mooncake_store_scheduler.py: the REQ client waits for the REP server",
			procs: edit(healthy, func(p *report.Process) { p.Lookup = &report.Lookup{Nonce: "nonce-0", Error: "timeout after 2s"} }, "r0-head/0/engine-core-0"),
			want: []want{{report.LookupUnreachable, []string{"r0-head/0/engine-core-0"},
				[]string{"r0-head/0/engine-core-0 on r0-head", "Mooncake DP index 0", "ipc:///tmp/lookup_rpc_port_0_host_r0-head_dp_rank0: timeout after 2s"}}}},
		{name: "a live client that reported no result", source: "a scheduler that never got an answer cannot use the store",
			procs: edit(healthy, func(p *report.Process) { p.Lookup = nil }, "r1-head/0/engine-core-0"),
			want:  []want{{report.LookupUnreachable, []string{"r1-head/0/engine-core-0"}, []string{"no lookup result was reported"}}}},
		{name: "a client that crashed before looking up is only a crash", source: "vllm/v1/engine/core.py: the scheduler's connector is built after the executor",
			procs: edit(healthy, chain(func(p *report.Process) { p.Lookup = nil }, crash("RuntimeError: Worker failed")), "r1-head/0/engine-core-0"),
			want:  []want{{report.ProcessCrashed, []string{"r1-head/0/engine-core-0"}, []string{"RuntimeError: Worker failed"}}}},

		// segment-name-collision
		{name: "two live workers with one segment name", source: "Mooncake mooncake-store/src/client.cpp: the segment name is local_hostname host:port",
			procs: edit(healthy, func(p *report.Process) { p.Segment = "r0-head:12300" }, "r0-head/0/engine-core-0/worker-1"),
			want: []want{{report.SegmentNameCollision, []string{"r0-head/0/engine-core-0/worker-0", "r0-head/0/engine-core-0/worker-1"},
				[]string{`2 live processes hold Mooncake segment "r0-head:12300"`}}}},
		{name: "a crashed holder's segment expires", source: "Mooncake mooncake-store/src/master_service.cpp: a client that stops pinging expires",
			procs: edit(edit(healthy, func(p *report.Process) { p.Segment = "r0-head:12300" }, "r0-head/0/engine-core-0/worker-1"), crash("AssertionError"), "r0-head/0/engine-core-0/worker-0"),
			want:  []want{{report.ProcessCrashed, []string{"r0-head/0/engine-core-0/worker-0"}, nil}}},

		// engine-id-collision, engine-id-mismatch
		{name: "engine_id suffixed with the local DP rank collides across replicas", source: "vllm/v1/engine/core.py before #46628: engine_id += _dp{local_dp_rank}",
			procs: edit(healthy, func(p *report.Process) { p.EngineID = "eid-0_dp0" }, where(healthy, func(p report.Process) bool { return p.EngineID == "eid-1_dp1" })...),
			want: []want{{report.EngineIDCollision, []string{"r0-head/0/engine-core-0", "r1-head/0/engine-core-0"},
				[]string{`engine_id "eid-0_dp0" is held by the engines of 2 replicas`, "r1-head/0/engine-core-0 (replica r1-head:29500)"}}}},
		{name: "two engines without a replica share an engine_id", source: "each engine is a replica of its own",
			procs: []report.Process{{ID: "a/0/engine-core-0", Host: "a", Role: report.RoleEngineCore, EngineID: "x"}, {ID: "b/0/engine-core-0", Host: "b", Role: report.RoleEngineCore, EngineID: "x"}},
			want:  []want{{report.EngineIDCollision, []string{"a/0/engine-core-0", "b/0/engine-core-0"}, []string{"(no replica)"}}}},
		{name: "a headless launcher's own parse is not compared", source: "vllm/entrypoints/cli/serve.py run_headless builds no KV connector; workers adopt TP rank 0's engine_id (#39907)",
			procs: edit(healthy, func(p *report.Process) { p.EngineID = "launcher-parse" }, "r0-follower1/0/headless-0")},
		{name: "workers of one replica share their engine's id: no collision", source: "workers copy the engine core's kv_transfer_config", procs: coLocated(3)},
		{name: "followers hold their own CLI parse's engine_id", source: "vLLM#39907: engine_id = uuid4() per CLI parse, before the TP-rank-0 broadcast",
			procs: edit(healthy, func(p *report.Process) { p.EngineID = "eid-follower" }, "r0-follower1/0/headless-0/worker-0", "r0-follower1/0/headless-0/worker-1"),
			want: []want{{report.EngineIDMismatch, []string{"r0-follower1/0/headless-0/worker-0", "r0-follower1/0/headless-0/worker-1", "r0-head/0/engine-core-0", "r0-head/0/engine-core-0/worker-0", "r0-head/0/engine-core-0/worker-1"},
				[]string{"replica r0-head:29500 holds 2 engine_ids", `"eid-0_dp0" (r0-head/0/engine-core-0, r0-head/0/engine-core-0/worker-0, r0-head/0/engine-core-0/worker-1)`, `"eid-follower" (r0-follower1/0/headless-0/worker-0, r0-follower1/0/headless-0/worker-1)`}}}},

		// dp-index-duplicate
		{name: "two replicas claim one global DP index", source: "vLLM#53743: the inferred rank overwrote an explicit --data-parallel-rank (vllm/engine/arg_utils.py)",
			procs: edit(healthy, chain(func(p *report.Process) { p.DataParallelIndex, p.DataParallelRank = 0, 0 }, func(p *report.Process) {
				if p.MooncakeDPIndex != nil {
					p.MooncakeDPIndex = report.Int(0)
				}
			}), where(healthy, func(p report.Process) bool { return strings.HasPrefix(p.ID, "r1-") })...),
			want: []want{{report.DPIndexDuplicate, []string{"r0-head/0/engine-core-0", "r1-head/0/engine-core-0"},
				[]string{"2 replicas of one deployment have global DP index 0: r0-head:29500 (r0-head/0/engine-core-0), r1-head:29500 (r1-head/0/engine-core-0)"}}}},
		{name: "the instances of a P/D pair each number their replicas from 0", source: "vLLM P/D disaggregation: prefill and decode are separate `vllm serve` deployments with their own DP groups",
			procs: append(meetAt(healthy, "r0-head:29551"), meetAt(renamed(healthy, "d-"), "d-r0-head:29551")...)},
		{name: "replicas that met at one barrier are one deployment", source: "vllm/config/parallel.py stateless_init_dp_group: the DP group spans every replica",
			procs: append(meetAt(healthy, "r0-head:29551"), meetAt(renamed(healthy, "d-"), "r0-head:29551")...),
			want: []want{
				{report.DPIndexDuplicate, []string{"d-r0-head/0/engine-core-0", "r0-head/0/engine-core-0"}, []string{"2 replicas of one deployment have global DP index 0"}},
				{report.DPIndexDuplicate, []string{"d-r1-head/0/engine-core-0", "r1-head/0/engine-core-0"}, []string{"2 replicas of one deployment have global DP index 1"}},
			}},
		{name: "a loopback barrier is one per host", source: "vLLM's default VLLM_DP_MASTER_IP / master_addr 127.0.0.1: each host meets on its own loopback",
			procs: []report.Process{
				{ID: "a/0/engine-core-0", Host: "a", Role: report.RoleEngineCore, Replica: "127.0.0.1:29552@a/dp0", Rendezvous: []report.Rendezvous{{Kind: "dp", Address: "127.0.0.1:29551"}}},
				{ID: "b/0/engine-core-0", Host: "b", Role: report.RoleEngineCore, Replica: "127.0.0.1:29552@b/dp0", Rendezvous: []report.Rendezvous{{Kind: "dp", Address: "127.0.0.1:29551"}}},
			}},
		{name: "two engines claim one DP slot: two replicas, one index", source: "vLLM#53743: --node-rank inference overwrote --data-parallel-rank 1 with 0 on a shared node (vllm/engine/arg_utils.py create_engine_config)",
			procs: edit(colo, func(p *report.Process) {
				p.Replica, p.DataParallelRank, p.DataParallelIndex, p.MooncakeDPIndex = "node0:29500", 0, 0, report.Int(0)
			}, where(colo, func(p report.Process) bool { return p.Command == 1 })...),
			want: []want{{report.DPIndexDuplicate, []string{"node0/0/engine-core-0", "node0/1/engine-core-0"},
				[]string{"node0:29500 [node0/0/engine-core-0] (node0/0/engine-core-0), node0:29500 [node0/1/engine-core-0] (node0/1/engine-core-0)"}}}},

		// rendezvous-failed
		{name: "workers rendezvous timed out with followers missing", source: "vllm/distributed/parallel_state.py init_distributed_environment: TCPStore at --master-addr:--master-port",
			procs: edit(healthy, func(p *report.Process) {
				p.Rendezvous = []report.Rendezvous{{Kind: "workers", Address: "r0-head:29500", Error: "timeout after 30s", Missing: []string{"r0-follower1/0/headless-0/worker-1"}}}
			}, "r0-head/0/engine-core-0/worker-0"),
			want: []want{{report.RendezvousFailed, []string{"r0-follower1/0/headless-0/worker-1", "r0-head/0/engine-core-0/worker-0"},
				[]string{"workers rendezvous at r0-head:29500 (replica r0-head:29500) did not complete", "r0-head/0/engine-core-0/worker-0: timeout after 30s", "never arrived: r0-follower1/0/headless-0/worker-1"}}}},
		{name: "failed loopback rendezvous of two hosts are two barriers", source: "vLLM's default master_addr 127.0.0.1: each host meets on its own loopback",
			procs: []report.Process{
				{ID: "a/0/engine-core-0/worker-0", Host: "a", Role: report.RoleWorker, Rendezvous: []report.Rendezvous{{Kind: "workers", Address: "127.0.0.1:29500", Error: "timeout"}}},
				{ID: "b/0/engine-core-0/worker-0", Host: "b", Role: report.RoleWorker, Rendezvous: []report.Rendezvous{{Kind: "workers", Address: "127.0.0.1:29500", Error: "timeout"}}},
			},
			want: []want{
				{report.RendezvousFailed, []string{"a/0/engine-core-0/worker-0"}, []string{"workers rendezvous at 127.0.0.1:29500@a"}},
				{report.RendezvousFailed, []string{"b/0/engine-core-0/worker-0"}, []string{"workers rendezvous at 127.0.0.1:29500@b"}},
			}},
		// A process that died before it built its KV connector never used its engine_id or
		// Mooncake DP index: its failure is reported, a mismatch of those would mislead.
		{name: "workers that died in their torch rendezvous hold their own engine_id: no mismatch", source: "vllm/v1/worker/gpu_worker.py: the world before ensure_kv_transfer_initialized (kv_transfer_state.py broadcasts the engine_id there)",
			procs: edit(healthy, chain(func(p *report.Process) {
				p.EngineID = "eid-follower"
				p.Rendezvous = []report.Rendezvous{{Kind: "workers", Address: "r0-head:29500", Error: "timed out", Missing: []string{"rank 0"}}}
			}, crash("torch.distributed.DistStoreError: Timed out")), "r0-follower1/0/headless-0/worker-0", "r0-follower1/0/headless-0/worker-1"),
			want: []want{
				{report.ProcessCrashed, []string{"r0-follower1/0/headless-0/worker-0"}, []string{"DistStoreError"}},
				{report.ProcessCrashed, []string{"r0-follower1/0/headless-0/worker-1"}, []string{"DistStoreError"}},
				{report.RendezvousFailed, []string{"r0-follower1/0/headless-0/worker-0", "r0-follower1/0/headless-0/worker-1", "rank 0"}, []string{"workers rendezvous at r0-head:29500"}},
			}},
		{name: "a worker that died in its rendezvous never used its Mooncake index", source: "mooncake_store_worker.py: the index is computed in MooncakeStoreWorker.__init__, after the world",
			procs: edit(healthy, chain(mooncake(7), func(p *report.Process) {
				p.Rendezvous = []report.Rendezvous{{Kind: "workers", Address: "r1-head:29500", Error: "timed out"}}
			}, crash("torch.distributed.DistStoreError: Timed out")), "r1-follower1/0/headless-0/worker-0"),
			want: []want{
				{report.ProcessCrashed, []string{"r1-follower1/0/headless-0/worker-0"}, []string{"DistStoreError"}},
				{report.RendezvousFailed, []string{"r1-follower1/0/headless-0/worker-0"}, nil},
			}},
		{name: "a worker that exited before any rendezvous never used its index either", source: "vllm/v1/worker/gpu_worker.py init_device fails before the world",
			procs: edit(healthy, chain(mooncake(7), crash("AssertionError: DP adjusted local rank 8 is out of bounds. ")), "r1-follower1/0/headless-0/worker-0"),
			want:  []want{{report.ProcessCrashed, []string{"r1-follower1/0/headless-0/worker-0"}, []string{"out of bounds"}}}},
		{name: "a worker that completed its world and lives is compared", source: "mooncake_store_worker.py after the world",
			procs: edit(healthy, chain(mooncake(7), func(p *report.Process) {
				p.Rendezvous = []report.Rendezvous{{Kind: "workers", Address: "r1-head:29500"}}
			}), "r1-follower1/0/headless-0/worker-0"),
			want: []want{{report.DPIndexMismatch, []string{"r1-follower1/0/headless-0/worker-0", "r1-head/0/engine-core-0"}, []string{"Mooncake DP index 7"}}}},
		{name: "workers that never started (their engine was refused at its handshake): no mismatch, no lookup holder", source: "vllm/v1/engine/core.py: handshakes before the executor; the paper run keeps the unstarted records",
			procs: edit(edit(healthy, chain(crash("RuntimeError: Did not receive response from front-end process within 5 minutes"), func(p *report.Process) {
				p.Rendezvous = []report.Rendezvous{{Kind: "dp", Address: "r0-head:29550", Error: "no answer"}}
				p.Lookup = nil
			}), "r1-head/0/engine-core-0"),
				func(p *report.Process) {
					p.EngineID, p.MooncakeDPIndex, p.Segment, p.BindSeq, p.Served = "eid-head-own", report.Int(0), "", 0, nil
					if p.LookupRole == report.LookupServer {
						p.LookupPath = "ipc:///tmp/lookup_rpc_port_0_host_r1-head_dp_rank0"
					}
				}, "r1-head/0/engine-core-0/worker-0", "r1-head/0/engine-core-0/worker-1"),
			want: []want{
				{report.ProcessCrashed, []string{"r1-head/0/engine-core-0"}, []string{"Did not receive response"}},
				{report.RendezvousFailed, []string{"r1-head/0/engine-core-0"}, nil},
			}},
		{name: "an engine that crashed before its scheduler shares no engine_id", source: "vllm/v1/engine/core.py: the scheduler's connector is built after the executor",
			procs: edit(healthy, chain(func(p *report.Process) { p.EngineID, p.Lookup = "eid-0_dp0", nil },
				crash("ZeroDivisionError: integer division or modulo by zero")), "r1-head/0/engine-core-0"),
			want: []want{{report.ProcessCrashed, []string{"r1-head/0/engine-core-0"}, []string{"ZeroDivisionError"}}}},
		{name: "completed rendezvous are no violation", source: "Rendezvous.Error empty",
			procs: edit(healthy, func(p *report.Process) {
				p.Rendezvous = []report.Rendezvous{{Kind: "workers", Address: "r0-head:29500"}}
			}, "r0-head/0/engine-core-0/worker-0", "r0-follower1/0/headless-0/worker-0")},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			got := check.Run(r.procs)
			if got == nil {
				t.Fatalf("Run returned nil, want an empty slice (it is marshalled as [] in the report)")
			}
			assertViolations(t, r.source, got, r.want)
		})
	}
}

func assertViolations(t *testing.T, source string, got []report.Violation, wants []want) {
	t.Helper()
	used := make([]bool, len(got))
	for _, v := range got {
		if !slices.IsSorted(v.Processes) || len(v.Processes) == 0 {
			t.Errorf("[%s] %s names processes %v: want a non-empty sorted list", source, v.Kind, v.Processes)
		}
	}
	for _, w := range wants {
		w.procs = slices.Sorted(slices.Values(w.procs))
		found := false
		for i, v := range got {
			if used[i] || v.Kind != w.kind || !slices.Equal(v.Processes, w.procs) {
				continue
			}
			used[i], found = true, true
			for _, s := range w.says {
				if !strings.Contains(v.Message, s) {
					t.Errorf("[%s] %s message %q lacks %q", source, v.Kind, v.Message, s)
				}
			}
			if !strings.HasPrefix(v.Message, string(v.Kind)+": ") {
				t.Errorf("[%s] message %q does not start with its kind", source, v.Message)
			}
			break
		}
		if !found {
			t.Errorf("[%s] missing %s over %v; got:\n%s", source, w.kind, w.procs, dump(got))
		}
	}
	for i, v := range got {
		if !used[i] {
			t.Errorf("[%s] unexpected %s over %v: %s", source, v.Kind, v.Processes, v.Message)
		}
	}
}

func dump(vs []report.Violation) string {
	var b strings.Builder
	for _, v := range vs {
		fmt.Fprintf(&b, "  %s %v: %s\n", v.Kind, v.Processes, v.Message)
	}
	return b.String()
}

func TestRunOrdersByKindThenProcess(t *testing.T) {
	procs := edit(edit(wideTP(2, 2, 2), crash("AssertionError"), "r1-follower1/0/headless-0/worker-0", "r0-follower1/0/headless-0/worker-1"),
		mooncake(5), "r0-head/0/engine-core-0/worker-1")
	got := check.Run(procs)
	var kinds []report.Kind
	var firsts []string
	for _, v := range got {
		kinds = append(kinds, v.Kind)
		firsts = append(firsts, v.Processes[0])
	}
	wantKinds := []report.Kind{report.ProcessCrashed, report.ProcessCrashed, report.DPIndexMismatch}
	if !slices.Equal(kinds, wantKinds) {
		t.Fatalf("kinds %v, want %v", kinds, wantKinds)
	}
	if !slices.IsSorted(firsts[:2]) {
		t.Errorf("violations of one kind not ordered by process: %v", firsts)
	}
}

func TestKindsCoverTheContract(t *testing.T) {
	if got := check.Kinds(); !reflect.DeepEqual(got, report.Kinds) {
		t.Errorf("check.Kinds() = %v, want every kind of report.Kinds, in order: %v", got, report.Kinds)
	}
}

// meetAt returns a copy of procs in which every replica member recorded a completed DP barrier at
// addr (the DP group of a MoE deployment).
func meetAt(procs []report.Process, addr string) []report.Process {
	out := append([]report.Process(nil), procs...)
	for i := range out {
		if out[i].Replica != "" {
			out[i].Rendezvous = []report.Rendezvous{{Kind: "dp", Address: addr}}
		}
	}
	return out
}

// renamed returns a copy of procs as another deployment on other hosts: every host, ID, replica,
// lookup path, segment and engine_id prefixed.
func renamed(procs []report.Process, prefix string) []report.Process {
	out := make([]report.Process, len(procs))
	for i, p := range procs {
		p.ID, p.Host = prefix+p.ID, prefix+p.Host
		if p.Parent != "" {
			p.Parent = prefix + p.Parent
		}
		if p.Replica != "" {
			p.Replica = prefix + p.Replica
		}
		if p.LookupPath != "" {
			p.LookupPath = strings.Replace(p.LookupPath, "_host_", "_host_"+prefix, 1)
		}
		if p.Segment != "" {
			p.Segment = prefix + p.Segment
		}
		if p.EngineID != "" {
			p.EngineID = prefix + p.EngineID
		}
		if p.Lookup != nil {
			l := *p.Lookup
			l.ServedBy, l.Nonce = prefix+l.ServedBy, prefix+l.Nonce
			p.Lookup = &l
		}
		var served []string
		for _, n := range p.Served {
			served = append(served, prefix+n)
		}
		p.Served = served
		out[i] = p
	}
	return out
}

// Replicas exposes the grouping every check uses: one replica per engine and world slot, the
// headless followers' workers with their head's engine, and two engines that claim one slot as
// two replicas (vLLM#53743).
func TestReplicas(t *testing.T) {
	healthy := check.Replicas(wideTP(2, 2, 2))
	if len(healthy) != 2 || healthy[1].Name != "r1-head:29500" || healthy[1].Engine != "r1-head/0/engine-core-0" ||
		!healthy[1].IndexKnown || healthy[1].Index != 1 || len(healthy[1].Members) != 6 {
		t.Errorf("healthy wide TP: %+v", healthy)
	}
	colo := coLocated(2)
	claimed := check.Replicas(edit(colo, func(p *report.Process) { p.Replica, p.DataParallelIndex = "node0:29500", 0 },
		where(colo, func(p report.Process) bool { return p.Command == 1 })...))
	var names []string
	for _, r := range claimed {
		names = append(names, r.Name)
		if len(r.Members) != 3 || !r.IndexKnown || r.Index != 0 {
			t.Errorf("claimant %s: %+v", r.Name, r)
		}
	}
	if want := []string{"node0:29500 [node0/0/engine-core-0]", "node0:29500 [node0/1/engine-core-0]"}; !slices.Equal(names, want) {
		t.Errorf("replicas %q, want %q", names, want)
	}
	if got := check.Replicas(nil); len(got) != 0 {
		t.Errorf("no records, replicas %+v", got)
	}
}
