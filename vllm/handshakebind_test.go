package vllm

import "testing"

// TestHandshakeBind: a front end binds the handshake it serves before it starts its engines
// (vllm/v1/engine/utils.py launch_core_engines: zmq_socket_ctx(local_handshake_address,
// zmq.ROUTER, bind=True) encloses CoreEngineProcManager), so a second binder of one address on a
// host raises pyzmq's ZMQError itself, with no engine started and no barrier joined. Each line has
// its own --port, as co-located front ends need (addresses_test.go: the later listen is refused).
func TestHandshakeBind(t *testing.T) {
	const (
		rank0      = "vllm serve org/M -tp 4 -dp 2 --data-parallel-rank 0 --data-parallel-address h --data-parallel-rpc-port 13345"
		rank0Other = "vllm serve org/M -tp 4 -dp 2 --data-parallel-rank 0 --data-parallel-address h --data-parallel-rpc-port 13400"
		badConfig  = "vllm serve org/M -tp 4 -dp 2 --data-parallel-rank 0 --data-parallel-address h --data-parallel-rpc-port 13345 -dpl 2"
	)
	tests := []struct {
		name, source string
		lines        []string
		// crashed is the front end that fails its bind ("" when none does).
		crashed string
	}{
		{"the later co-located rank-0 front end on one port fails its bind",
			"v1/engine/utils.py launch_core_engines (bind before CoreEngineProcManager)",
			[]string{"CUDA_VISIBLE_DEVICES=0,1,2,3 " + rank0 + " --port 8000", "CUDA_VISIBLE_DEVICES=4,5,6,7 " + rank0 + " --port 8001"}, "h/1/api-server-0"},
		{"front ends on different rpc ports both bind",
			"v1/engine/utils.py launch_core_engines (get_engine_client_zmq_addr(host, data_parallel_rpc_port))",
			[]string{"CUDA_VISIBLE_DEVICES=0,1,2,3 " + rank0 + " --port 8000", "CUDA_VISIBLE_DEVICES=4,5,6,7 " + rank0Other + " --port 8001"}, ""},
		{"a front end that fails its config never binds, so the next one does",
			"v1/engine/utils.py launch_core_engines (reached only after create_engine_config)",
			[]string{"CUDA_VISIBLE_DEVICES=0,1,2,3 " + badConfig + " --port 8000", "CUDA_VISIBLE_DEVICES=4,5,6,7 " + rank0 + " --port 8001"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Logf("source: %s", tt.source)
			plan, err := PlanNode(node("h", tt.lines...), Options{Model: Model{Name: "org/M", MoE: true}, Profile: profileOf(t, "main"), Seed: "seed"})
			if err != nil {
				t.Fatalf("PlanNode: %v", err)
			}
			for _, top := range plan.Commands {
				for _, r := range top.Rendezvous {
					if !r.BindsEarly || r.Rank != 0 {
						t.Errorf("%s: the handshake it serves is not bound before its engines: %+v", top.Identity.ID, r)
					}
				}
			}
			procs := predict(t, true, "main", node("h", tt.lines...))
			for _, top := range []string{"h/0/api-server-0", "h/1/api-server-0"} {
				p := get(t, procs, top)
				failedBind := p.Exit != nil && p.Exit.Error == ZMQBindError("h:13345", AddressInUse)
				if failedBind != (top == tt.crashed) {
					t.Errorf("%s: %s; want a failed bind: %v", top, exitText(p), top == tt.crashed)
				}
				if top != tt.crashed {
					continue
				}
				if p.Exit.Code != 1 || len(p.Rendezvous) != 0 {
					t.Errorf("%s: exit %d, rendezvous %+v; want a crash with no barrier", top, p.Exit.Code, p.Rendezvous)
				}
				// No run starts anything below it, so the checks must not see its engines.
				if below := under(procs, top); len(below) != 1 {
					t.Errorf("%s: %d processes at or below it, want none below it", top, len(below))
				}
			}
			for _, p := range procs {
				for _, r := range p.Rendezvous {
					if r.Address == "h:13345" && p.ID != tt.crashed && contains(r.Missing, tt.crashed) {
						t.Errorf("%s: barrier misses the failed binder %s: %+v", p.ID, tt.crashed, r)
					}
				}
			}
		})
	}
}
