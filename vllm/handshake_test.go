package vllm

import (
	"slices"
	"strings"
	"testing"

	"github.com/widetp/widetp/report"
)

// TestHandshakeExpectRefuse encodes wait_for_engine_startup's checks of each HELLO
// (vllm/v1/engine/utils.py), in vLLM's order: an index outside the engines the front end
// handshakes with, a local/remote mismatch, then remote engines that are --headless exactly when
// the front end runs internal LB.
func TestHandshakeExpectRefuse(t *testing.T) {
	internal := HandshakeExpect{First: 0, Count: 4, LocalCount: 2, RemoteHeadless: true}
	hybrid := HandshakeExpect{First: 0, Count: 4, LocalCount: 2, RemoteHeadless: false}
	own := HandshakeExpect{First: 2, Count: 2, LocalCount: 2, RemoteHeadless: false} // a dp_rank 2 front end's own engines
	for _, c := range []struct {
		name   string
		expect HandshakeExpect
		hello  EngineHello
		want   string
	}{
		{"internal LB: a local engine", internal, EngineHello{Index: 1, Local: true}, ""},
		{"internal LB: a headless remote engine", internal, EngineHello{Index: 3, Headless: true}, ""},
		{"internal LB: a remote engine of another front end", internal, EngineHello{Index: 3},
			"RuntimeError: Remote engine 3 must use --headless unless in external or hybrid dp lb mode"},
		{"hybrid/external LB: a remote engine of another front end", hybrid, EngineHello{Index: 2}, ""},
		{"hybrid/external LB: a headless remote engine", hybrid, EngineHello{Index: 2, Headless: true},
			"RuntimeError: Remote engine 2 must not use --headless in external or hybrid dp lb mode"},
		{"an index past the DP size", internal, EngineHello{Index: 4, Headless: true},
			"RuntimeError: Message from engine with unexpected data parallel rank: 4"},
		{"a remote engine with a local index", internal, EngineHello{Index: 0, Headless: true},
			"RuntimeError: HELLO message from remote engine 0, expected it to be local"},
		{"a local engine with a remote index", internal, EngineHello{Index: 2, Local: true},
			"RuntimeError: HELLO message from local engine 2, expected it to be remote"},
		{"a dp_rank > 0 front end's own engines", own, EngineHello{Index: 3, Local: true}, ""},
		{"another engine on a dp_rank > 0 front end's handshake", own, EngineHello{Index: 1, Local: true},
			"RuntimeError: Message from engine with unexpected data parallel rank: 1"},
	} {
		if got := c.expect.Refuse(c.hello); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestHandshakeRefusal: what each side of a refused handshake does (vllm/v1/engine/utils.py
// wait_for_engine_startup raises in rank 0's front end; vllm/v1/engine/core.py startup_handshake
// times out in the refused engine, which never built its executor; run_headless's engine manager
// then stops cleanly). The first rows are the recipe PR #47692 broke: GPUStack's dp_only layout
// (gpustack/gpustack#6236), one DP rank a node, the head with --data-parallel-start-rank 0 and
// --headless followers.
func TestHandshakeRefusal(t *testing.T) {
	const head = "vllm serve org/M -tp 8 -dp 2 -dpl 1 --data-parallel-start-rank 0 --data-parallel-address h0 --data-parallel-rpc-port 13345 " + store
	const follower = "vllm serve org/M -tp 8 -dp 2 -dpl 1 --data-parallel-start-rank 1 --data-parallel-address h0 --data-parallel-rpc-port 13345 --headless " + store
	rows := []struct {
		name, profile string
		nodes         []Node
		// front is the front end that refuses (its exception), "" when the launch is healthy.
		front, why string
		// refused is the engine that hears nothing; stopped are its front end's own engines.
		refused, stopped string
	}{
		{name: "start rank 0 on the head since PR #47692: external LB refuses the headless follower", profile: "main",
			nodes: []Node{node("h0", head), node("h1", follower)},
			front: "h0/0/api-server-0", why: "RuntimeError: Remote engine 1 must not use --headless in external or hybrid dp lb mode",
			refused: "h1/0/engine-core-1", stopped: "h0/0/engine-core-0"},
		{name: "start rank 0 on the head before PR #47692: internal LB, healthy", profile: "main+start_rank_zero=unset",
			nodes: []Node{node("h0", head), node("h1", follower)}},
		{name: "hybrid LB (two local engines) refuses --headless followers", profile: "main",
			nodes: []Node{
				node("h0", "vllm serve org/M -dp 4 -dpl 2 --data-parallel-start-rank 0 --data-parallel-address h0 "+store),
				node("h1", "vllm serve org/M -dp 4 -dpl 2 --data-parallel-start-rank 2 --data-parallel-address h0 --headless "+store)},
			front: "h0/0/api-server-0", why: "RuntimeError: Remote engine 2 must not use --headless in external or hybrid dp lb mode",
			refused: "h1/0/engine-core-2", stopped: "h0/0/engine-core-1"},
		{name: "internal-LB head refuses a replica head that switched to external LB", profile: "main",
			nodes: wideTP(func(k int) string {
				if k >= 2 {
					return "--data-parallel-start-rank 1"
				}
				return ""
			}),
			front: "h0/0/api-server-0", why: "RuntimeError: Remote engine 1 must use --headless unless in external or hybrid dp lb mode",
			refused: "h2/0/engine-core-1", stopped: "h0/0/engine-core-0"},
		{name: "a headless engine past the head's DP size", profile: "main",
			nodes: []Node{
				node("h0", "vllm serve org/M -dp 2 -dpl 1 --data-parallel-address h0 "+store),
				node("h1", "vllm serve org/M -dp 4 -dpl 1 --data-parallel-start-rank 3 --data-parallel-address h0 --headless "+store)},
			front: "h0/0/api-server-0", why: "RuntimeError: Message from engine with unexpected data parallel rank: 3",
			refused: "h1/0/engine-core-3", stopped: "h0/0/engine-core-0"},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			procs := predict(t, true, r.profile, r.nodes...)
			if r.front == "" {
				for _, p := range procs {
					if p.Crashed() {
						t.Errorf("%s: %s", p.ID, exitText(p))
					}
				}
				return
			}
			if f := get(t, procs, r.front); f.Exit == nil || f.Exit.Error != r.why || len(f.Rendezvous) != 1 || f.Rendezvous[0].Error != r.why {
				t.Errorf("front end: %s %+v, want %q", exitText(f), f.Rendezvous, r.why)
			}
			e := get(t, procs, r.refused)
			if e.Exit == nil || e.Exit.Error != HandshakeNoAnswer || len(e.Rendezvous) == 0 || e.Rendezvous[0].Error != HandshakeNoAnswer {
				t.Errorf("refused engine: %s %+v", exitText(e), e.Rendezvous)
			}
			if s := get(t, procs, r.stopped); s.Exit == nil || s.Crashed() {
				t.Errorf("the front end's own engine is stopped with it: %s", exitText(s))
			}
			// No engine of the launch got past its handshake, so no worker of theirs started.
			for _, p := range procs {
				if p.Role == report.RoleWorker && strings.Contains(p.ID, "/engine-core-") && (p.Exit != nil || len(p.Rendezvous) != 0) {
					t.Errorf("%s started: %s %+v", p.ID, exitText(p), p.Rendezvous)
				}
			}
			// The refused engine's parent: run_headless's engine manager stops cleanly
			// (monitor_engine_liveness); a front end fails as when any engine fails.
			par := get(t, procs, e.Parent)
			if clean := par.Role == report.RoleHeadless; par.Exit == nil || par.Crashed() == clean {
				t.Errorf("the refused engine's parent %s: %s", par.ID, exitText(par))
			}
		})
	}
}

// TestConfigHashRefusal: with coordinated DP (DP > 1, a MoE model) rank 0's front end compares
// every engine's READY parallel_config_hash with its own ParallelConfig.compute_hash() and raises
// on a mismatch (vllm/v1/engine/utils.py wait_for_engine_startup; vllm/v1/engine/core.py
// _perform_handshake sends the hash; vllm/config/parallel.py compute_hash ignores ranks, local
// sizes, LB mode, addresses and ports). A headless follower launched without the head's
// --enable-expert-parallel hashes differently: the handshake completes, then the front end raises;
// a dense model is not coordinated and is not checked; the same flags everywhere are accepted.
func TestConfigHashRefusal(t *testing.T) {
	const head = "vllm serve org/M -tp 2 -dp 4 -dpl 2 --data-parallel-address h0 --data-parallel-rpc-port 13345 --enable-expert-parallel"
	follower := func(extra string) string {
		return "vllm serve org/M -tp 2 -dp 4 -dpl 2 --data-parallel-start-rank 2 --data-parallel-address h0 --data-parallel-rpc-port 13345 --headless" + extra
	}
	mismatch := predict(t, true, "main", node("h0", head), node("h1", follower("")))
	f := get(t, mismatch, "h0/0/api-server-0")
	if f.Exit == nil || !strings.HasPrefix(f.Exit.Error, "RuntimeError: Configuration mismatch detected for engine 2. ") {
		t.Fatalf("front end: %s, want the configuration mismatch of engine 2", exitText(f))
	}
	if len(f.Rendezvous) != 1 || f.Rendezvous[0].Error != "" {
		t.Errorf("the handshake completes before the READY is refused: %+v", f.Rendezvous)
	}
	if e := get(t, mismatch, "h1/0/engine-core-2"); e.Crashed() || len(e.Rendezvous) == 0 || e.Rendezvous[0].Error != "" {
		t.Errorf("the follower's engine got its answer: %s %+v", exitText(e), e.Rendezvous)
	}
	if s := get(t, mismatch, "h0/0/engine-core-0"); s.Exit == nil || s.Crashed() {
		t.Errorf("the front end's own engine is stopped with it: %s", exitText(s))
	}
	for name, procs := range map[string][]report.Process{
		"the same flags":         predict(t, true, "main", node("h0", head), node("h1", follower(" --enable-expert-parallel"))),
		"a dense model (no EP)":  predict(t, false, "main", node("h0", head), node("h1", follower(""))),
		"another local DP count": predict(t, true, "main", node("h0", head), node("h1", strings.Replace(follower(" --enable-expert-parallel"), "-dpl 2", "-dpl 2 --data-parallel-size-local 2", 1))),
	} {
		for _, p := range procs {
			if p.Crashed() {
				t.Errorf("%s: %s: %s", name, p.ID, exitText(p))
			}
		}
	}
	x := HandshakeExpect{First: 0, Count: 2, LocalCount: 1, RemoteHeadless: true, ConfigHash: "a"}
	if got := x.RefuseReady(EngineHello{Index: 1, Headless: true}); !strings.Contains(got, "Worker hash: None, Expected hash: a.") {
		t.Errorf("a READY without a hash: %q", got)
	}
}

// TestHandshakeWithNoFrontEnd: engines whose handshake no front end ever binds (run_headless
// alone, here through `--api-server-count 0`, which ServeSubcommand.cmd in
// vllm/entrypoints/cli/serve.py sends there) wait out startup_handshake's poll
// (vllm/v1/engine/core.py, HANDSHAKE_TIMEOUT_MINS): their ZMQ connect never fails, so they exit
// with the handshake's RuntimeError, not torch's store time-out.
func TestHandshakeWithNoFrontEnd(t *testing.T) {
	procs := predict(t, true, "main", node("h0", "vllm serve org/M -tp 2 -dp 2 --api-server-count 0 "+store))
	engines := 0
	for _, p := range procs {
		if p.Role != report.RoleEngineCore {
			continue
		}
		engines++
		if p.Exit == nil || p.Exit.Error != HandshakeNoAnswer || len(p.Rendezvous) != 1 || !slices.Equal(p.Rendezvous[0].Missing, []string{"rank 0"}) {
			t.Errorf("%s: %s %+v, want %q", p.ID, exitText(p), p.Rendezvous, HandshakeNoAnswer)
		}
	}
	if engines != 2 {
		t.Errorf("%d engine cores, want run_headless's 2", engines)
	}
}

// An engine dials the handshake of rank 0's front end, which waits for the engines its own command
// line gives (launch_core_engines' engines_to_handshake, vllm/v1/engine/utils.py): a follower whose
// --data-parallel-size says more than the head's is one of the head's engines where the head waits
// for its index, at its place in the head's list, and keeps its own view where the head does not
// (the head refuses it). Commands that agree are not changed.
func TestEnginesTakeTheShapeOfTheHandshakeTheyDial(t *testing.T) {
	const addr = " --data-parallel-address h0 --data-parallel-rpc-port 13345"
	plans := planned(t, true, "main",
		node("h0", "vllm serve org/M -tp 2 -dp 2 --data-parallel-size-local 1"+addr),
		node("h1", "vllm serve org/M -tp 2 -dp 4 --data-parallel-size-local 2 --data-parallel-start-rank 1 --headless"+addr))
	handshake := func(id string) RendezvousPlan {
		t.Helper()
		p := plans[id]
		if p == nil {
			t.Fatalf("no %s planned", id)
		}
		for _, r := range p.Rendezvous {
			if r.Kind == RendezvousDP && r.Address == "h0:13345" {
				return r
			}
		}
		t.Fatalf("%s dials no handshake at h0:13345: %+v", id, p.Rendezvous)
		return RendezvousPlan{}
	}
	for _, tt := range []struct {
		id          string
		world, rank int
	}{
		{"h0/0/api-server-0", 3, 0},  // the head's front end: engines 0 and 1
		{"h0/0/engine-core-0", 3, 1}, // its own engine
		{"h1/0/engine-core-1", 3, 2}, // the follower's engine 1: the head waits for it
		{"h1/0/engine-core-2", 5, 3}, // engine 2: the head does not wait for it; its own -dp 4
	} {
		if r := handshake(tt.id); r.WorldSize != tt.world || r.Rank != tt.rank {
			t.Errorf("%s: handshake world %d rank %d, want world %d rank %d", tt.id, r.WorldSize, r.Rank, tt.world, tt.rank)
		}
	}
}

// A front end of DP rank > 0 that manages only its own engines (external or hybrid LB) gives them
// a private handshake path, and launch_core_engines asserts it is not handshake-local-only: an
// env-driven front end (VLLM_DP_SIZE and VLLM_DP_RANK where --data-parallel-size is 1, which sets
// data_parallel_rank_local: offline mode) with --data-parallel-external-lb fails that assertion
// before it starts an engine (vllm/v1/engine/utils.py, vllm/config/parallel.py).
func TestRankAboveZeroCannotHandshakeLocallyOnly(t *testing.T) {
	plans := planned(t, true, "main", node("h",
		"VLLM_DP_SIZE=2 VLLM_DP_RANK=1 vllm serve org/M -dp 1 --data-parallel-rank 1 --data-parallel-external-lb"))
	fe := plans["h/0/api-server-0"]
	if fe == nil || fe.Crash == nil || fe.Crash.Error != "AssertionError" {
		t.Fatalf("h/0/api-server-0: %+v, want launch_core_engines' bare AssertionError", fe)
	}
	if len(fe.Children) != 0 {
		t.Errorf("%d engine(s) started, want none", len(fe.Children))
	}
}

// TestEmptyDataParallelAddress: the handshake at tcp://data_parallel_master_ip:port needs a host
// (make_zmq_socket's split_zmq_path, vllm/utils/network_utils.py). With --data-parallel-address ”
// rank 0's front end fails binding it, before it starts its engines; a headless engine core fails
// dialling it, before its workers; a front end whose handshake is host-local (every engine its
// own: an ipc path) does not use it.
func TestEmptyDataParallelAddress(t *testing.T) {
	const invalid = "ValueError: Invalid zmq path: tcp://:13345"
	procs := predict(t, true, "main",
		node("h0", "vllm serve org/M -tp 2 -dp 4 -dpl 2 --data-parallel-address '' --data-parallel-rpc-port 13345"),
		node("h1", "vllm serve org/M -tp 2 -dp 4 -dpl 2 --data-parallel-start-rank 2 --data-parallel-address h0 --data-parallel-rpc-port 13345 --headless"))
	fe := get(t, procs, "h0/0/api-server-0")
	if fe.Exit == nil || fe.Exit.Error != invalid {
		t.Errorf("front end: %s, want %s", exitText(fe), invalid)
	}
	for _, p := range procs {
		if p.Role == report.RoleEngineCore && p.Host == "h0" {
			t.Errorf("the front end started %s before binding its handshake", p.ID)
		}
	}
	procs = predict(t, true, "main",
		node("h0", "vllm serve org/M -tp 2 -dp 4 -dpl 2 --data-parallel-address h0 --data-parallel-rpc-port 13345"),
		node("h1", "vllm serve org/M -tp 2 -dp 4 -dpl 2 --data-parallel-start-rank 2 --data-parallel-address '' --data-parallel-rpc-port 13345 --headless"))
	for _, id := range []string{"h1/0/engine-core-2", "h1/0/engine-core-3"} {
		ec := get(t, procs, id)
		if ec.Exit == nil || ec.Exit.Error != invalid {
			t.Errorf("%s: %s, want %s", id, exitText(ec), invalid)
		}
	}
	for _, p := range procs {
		if p.Role == report.RoleWorker && p.Host == "h1" {
			t.Errorf("%s started: its engine core failed its handshake first", p.ID)
		}
	}
	local := get(t, predict(t, true, "main", node("h0", "vllm serve org/M -tp 2 -dp 2 --data-parallel-address ''")), "h0/0/api-server-0")
	if local.Crashed() {
		t.Errorf("host-local handshake: %s, want it to start", exitText(local))
	}
}
