package vllm

import (
	"context"
	"strings"
	"testing"

	"github.com/widetp/widetp/report"
)

// internalLB is a MoE deployment of 2 replicas x TP 8 whose head serves the API for both and
// reaches the follower's engine over TCP: internal LB across nodes, the shape whose engine-io
// sockets are TCP (vllm/v1/engine/utils.py get_engine_zmq_addresses: client_local_only is false
// when local_engine_count != dp_size and the engines are not local_engines_only).
func internalLB() []Node {
	kv := ` --kv-transfer-config '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both"}'`
	return []Node{
		node("head", "vllm serve org/M -tp 8 -dp 2 -dpl 1 --data-parallel-address head --data-parallel-rpc-port 13345"+kv),
		node("follower", "vllm serve org/M -tp 8 -dp 2 -dpl 1 --data-parallel-address head --data-parallel-rpc-port 13345 --headless --data-parallel-start-rank 1"+kv),
	}
}

func timeline(t *testing.T, profile string, nodes []Node, steps ...FaultStep) *Timeline {
	t.Helper()
	d := Deployment{Name: t.Name(), Model: Model{Name: "org/M", MoE: true}, Profile: profileOf(t, profile), Seed: "seed", Nodes: nodes}
	plans, err := ModelPlanner{}.PlanDeployment(context.Background(), d)
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	tl, err := PredictTimeline(d, plans, steps)
	if err != nil {
		t.Fatalf("PredictTimeline: %v", err)
	}
	return tl
}

// TestStealPort: before vLLM PR #42585 the front end's TCP engine-io sockets bind a port that
// get_open_port() probed earlier (vllm/v1/engine/utils.py get_engine_zmq_addresses), so a bind
// in between kills the API server with ZMQError (vLLM issue #40443); after it they bind port 0
// and there is nothing to take.
func TestStealPort(t *testing.T) {
	steal := FaultStep{Name: "s", Action: FaultStealPort, Process: "head/0/api-server-0", Channel: "engine-io"}
	before := timeline(t, "main+zmq_port_alloc=probe", internalLB(), steal)
	api := get(t, before.Settled, "head/0/api-server-0")
	if api.Exit == nil || !strings.HasPrefix(api.Exit.Error, "zmq.error.ZMQError: Address already in use (addr='tcp://head:") {
		t.Fatalf("probe: the API server's exit is %+v, want ZMQError: Address already in use on tcp://head:<probed>", api.Exit)
	}
	if api.Exit.Expected {
		t.Errorf("probe: the front end's death is vLLM's failure, not the step's: Expected must be false")
	}
	if e := before.Steps[0].Effects[0]; !strings.HasPrefix(e, "bound tcp://head:") {
		t.Errorf("probe: effect %q, want the endpoint taken", e)
	}
	after := timeline(t, "main", internalLB(), steal)
	if p := get(t, after.Settled, "head/0/api-server-0"); p.Exit != nil {
		t.Errorf("bind: the API server exits (%+v); with port 0 there is nothing to take", p.Exit)
	}
	if e := after.Steps[0].Effects[0]; !strings.Contains(e, "nothing to take") || !strings.Contains(e, "tcp://head:0 ") {
		t.Errorf("bind: effect %q, want nothing to take at tcp://head:0", e)
	}
	// Without the step, the probed port binds: the race needs someone in the window.
	plain := timeline(t, "main+zmq_port_alloc=probe", internalLB())
	if p := get(t, plain.Settled, "head/0/api-server-0"); p.Exit != nil {
		t.Errorf("probe without a thief: the API server exits: %+v", p.Exit)
	}
}

// TestStoreRestartRemount: a restarted master answers every client's next Ping NEED_REMOUNT
// (mooncake-store/src/master_service.cpp); the client then does what its version does (Mooncake
// PRs #845 and #2077, issue #2246). A wipe of the metadata server alone asks nobody to remount.
func TestStoreRestartRemount(t *testing.T) {
	for _, tc := range []struct {
		profile           string
		step              string
		mounted, publishd bool
		remounts          int
	}{
		{"main", FaultStoreRestart, true, true, 1},
		{"main+mooncake_remount=mount", FaultStoreRestart, true, false, 1},
		{"main+mooncake_remount=none", FaultStoreRestart, false, false, 0},
		{"main", FaultStoreWipe, true, false, 0},
	} {
		tl := timeline(t, tc.profile, internalLB(), FaultStep{Name: "s", Action: tc.step})
		n := 0
		for _, p := range tl.Steps[0].Processes {
			if p.Segment == "" {
				if p.Registration != nil {
					t.Errorf("%s %s: %s registers nothing but has %+v", tc.profile, tc.step, p.ID, p.Registration)
				}
				continue
			}
			n++
			want := report.Registration{Mounted: tc.mounted, Published: tc.publishd, Remounts: tc.remounts}
			if p.Registration == nil || *p.Registration != want {
				t.Errorf("%s %s: %s registration %+v, want %+v", tc.profile, tc.step, p.ID, p.Registration, want)
			}
		}
		if n != 16 {
			t.Errorf("%s: %d workers with a segment, want 16", tc.profile, n)
		}
	}
}

// TestRestartRejoins: vLLM derives identity from the command line, so a restarted command comes
// back as the same processes; but a restarted rank cannot join a torch world (or MoE DP group)
// whose other members did not restart with it (vllm/distributed/parallel_state.py
// init_distributed_environment meets at a TCPStore that waits for world_size members), so it
// times out as vLLM's does. A restarted headless engine core does not get that far: the head's
// front end closed its handshake socket once its engines were up (launch_core_engines in
// vllm/v1/engine/utils.py holds it only for the start-up), so the engine's HELLO is never
// answered (startup_handshake in vllm/v1/engine/core.py). Restarting every node together
// completes.
func TestRestartRejoins(t *testing.T) {
	one := timeline(t, "main", internalLB(), FaultStep{Name: "r", Action: FaultRestart, Targets: []string{"follower"}})
	procs := one.Steps[0].Processes
	ec := get(t, procs, "follower/0/engine-core-1")
	if ec.Restarts != 1 || ec.BeforeRestart == nil || len(ec.BeforeRestart.Diff(report.IdentityOf(ec))) != 0 {
		t.Errorf("restarted engine core: restarts %d, before %+v: want 1 and the same identity", ec.Restarts, ec.BeforeRestart)
	}
	if ec.Exit == nil || ec.Exit.Expected || ec.Exit.Error != HandshakeNoAnswer {
		t.Errorf("the follower's engine core alone gets no answer from the head's front end: exit %+v, want %q", ec.Exit, HandshakeNoAnswer)
	}
	if h := get(t, procs, "head/0/api-server-0"); h.Exit != nil {
		t.Errorf("the head is untouched by the follower's restart: %+v", h.Exit)
	}
	all := timeline(t, "main", internalLB(), FaultStep{Name: "r", Action: FaultRestart, Targets: []string{"head", "follower"}})
	for _, p := range all.Steps[0].Processes {
		if p.Exit != nil {
			t.Errorf("restarting every node: %s exits %+v", p.ID, p.Exit)
		}
		if p.Restarts != 1 {
			t.Errorf("restarting every node: %s restarts %d, want 1", p.ID, p.Restarts)
		}
	}
}

// TestKillCascades: a killed worker's executor shuts down when it sees it die
// (vllm/v1/executor/multiproc_executor.py start_worker_monitor), and its engine core and front end
// with it; other hosts are untouched. Every such exit is the step's doing.
// A killed worker takes its whole command down on its host: its executor terminates every other
// worker and fails its engine core (vllm/v1/executor/multiproc_executor.py start_worker_monitor,
// MultiprocExecutor.shutdown), whose front end then shuts down (vllm/v1/engine/utils.py
// CoreEngineProcManager); the other host's processes are untouched.
func TestKillCascades(t *testing.T) {
	tl := timeline(t, "main", internalLB(), FaultStep{Name: "k", Action: FaultKill, Targets: []string{"head/0/engine-core-0/worker-3"}})
	procs := tl.Steps[0].Processes
	head := 0
	for _, p := range procs {
		switch p.Host {
		case "follower":
			if p.Exit != nil {
				t.Errorf("%s on the other host exits: %+v", p.ID, p.Exit)
			}
		case "head":
			head++
			if p.Exit == nil || !p.Exit.Expected || p.Exit.Signal != "SIGKILL" {
				t.Errorf("%s: exit %+v, want an expected SIGKILL (its command went down)", p.ID, p.Exit)
			}
		}
	}
	if head < 3 {
		t.Fatalf("the head runs %d processes; the deployment is not the one this test means", head)
	}
}

// TestCutOffHandshakeWaitsForAnAnswer: both nodes restart while the follower is cut off from the
// head. The follower's engine core cannot reach the front end's handshake; its socket is ZMQ,
// whose connect does not fail, so it waits out startup_handshake's poll and raises its
// RuntimeError (vllm/v1/engine/core.py), where a torch store client of the same cut would time
// out connecting (DistNetworkError).
func TestCutOffHandshakeWaitsForAnAnswer(t *testing.T) {
	tl := timeline(t, "main", internalLB(),
		FaultStep{Name: "cut", Action: FaultPartition, Hosts: []string{"follower"}, From: []string{"head"}},
		FaultStep{Name: "r", Action: FaultRestart, Targets: []string{"head", "follower"}})
	procs := tl.Steps[1].Processes
	ec := get(t, procs, "follower/0/engine-core-1")
	if ec.Exit == nil || ec.Exit.Error != HandshakeNoAnswer {
		t.Errorf("the cut-off engine core: exit %+v, want %q", ec.Exit, HandshakeNoAnswer)
	}
}
