package vllm

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/widetp/widetp/report"
)

// addrOf returns the addresses of one channel (and role, when given) of a process.
func addrOf(p report.Process, channel string, role report.AddressRole) []report.Address {
	var out []report.Address
	for _, a := range p.Addresses {
		if a.Channel == channel && (role == "" || a.Role == role) {
			out = append(out, a)
		}
	}
	return out
}

func endpoints(as []report.Address) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.Endpoint
	}
	return out
}

// TestAddresses: each address a process derives, row by row with the vLLM code it encodes.
func TestAddresses(t *testing.T) {
	const nixlP = `'{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'`
	tiering := func(tier string) string {
		return `'{"kv_connector":"OffloadingConnector","kv_role":"kv_both","kv_connector_extra_config":{"spec_name":"TieringOffloadingSpec","cpu_bytes_to_use":1,"secondary_tiers":[` + tier + `]}}'`
	}
	tests := []struct {
		name, source, profile string
		moe                   bool
		nodes                 []Node
		check                 func(t *testing.T, procs []report.Process)
	}{
		{name: "the front end's HTTP socket: --host and --port, else every interface and 8000",
			source: "vllm/entrypoints/openai/api_server.py setup_server (launcher.create_server_socket((args.host or '', args.port)))", profile: "main",
			nodes: []Node{node("h", "vllm serve org/M --host 10.0.0.1 --port 8123"), node("g", "vllm serve org/M")},
			check: func(t *testing.T, procs []report.Process) {
				for id, want := range map[string]string{"h/0/api-server-0": "tcp://10.0.0.1:8123", "g/0/api-server-0": "tcp://0.0.0.0:8000"} {
					if got := endpoints(addrOf(get(t, procs, id), "api-server", report.AddressBind)); !slices.Equal(got, []string{want}) {
						t.Errorf("%s: api-server %v, want %s", id, got, want)
					}
				}
			}},
		{name: "a DP supervisor's children: --port + local rank; the supervisor's own port is listed",
			source: "vllm/entrypoints/openai/dp_supervisor.py _build_vllm_dp_server_args (child_args.port = args.port + local_rank)", profile: "main", moe: true,
			nodes: []Node{node("h", "vllm serve org/M -dp 4 -dpl 4 --data-parallel-multi-port-external-lb --port 9000")},
			check: func(t *testing.T, procs []report.Process) {
				for r := 0; r < 4; r++ {
					id := fmt.Sprintf("h/0/api-server-%d", r)
					if got := endpoints(addrOf(get(t, procs, id), "api-server", report.AddressBind)); !slices.Equal(got, []string{fmt.Sprintf("tcp://0.0.0.0:%d", 9000+r)}) {
						t.Errorf("%s: %v", id, got)
					}
				}
				if sup := addrOf(get(t, procs, "h/0/dp-supervisor-0"), "dp-supervisor", report.AddressBind); len(sup) != 1 || sup[0].Exercised || sup[0].Endpoint != "tcp://0.0.0.0:9256" {
					t.Errorf("supervisor %+v", sup)
				}
			}},
		{name: "two co-located front ends on one --port: both bind, the later one's listen fails once its engines are up",
			source: "vllm/entrypoints/openai/api_server.py setup_server (SO_REUSEADDR bind before create_engine_config), uvicorn listens in serve_http after the engines' handshake; Linux refuses only a second listener", profile: "main",
			nodes: []Node{node("h", "CUDA_VISIBLE_DEVICES=0 vllm serve org/M", "CUDA_VISIBLE_DEVICES=1 vllm serve org/M")},
			check: func(t *testing.T, procs []report.Process) {
				later := get(t, procs, "h/1/api-server-0")
				if later.Exit == nil || later.Exit.Error != "OSError: [Errno 98] Address already in use" {
					t.Fatalf("later front end: %s", exitText(later))
				}
				if b := addrOf(later, "api-server", report.AddressBind); len(b) != 1 || b[0].BindSeq == 0 || b[0].Error == "" {
					t.Errorf("later front end's socket: %+v; want bound, then refused at listen", b)
				}
				if first := get(t, procs, "h/0/api-server-0"); first.Exit != nil {
					t.Errorf("first front end: %s", exitText(first))
				}
				// Its engine core came up (the handshake completed) and was shut down with it.
				if e := get(t, procs, "h/1/engine-core-0"); e.Exit == nil || e.Crashed() || len(e.Rendezvous) == 0 || e.Rendezvous[0].Error != "" {
					t.Errorf("the later front end's engine core: %s, %+v", exitText(e), e.Rendezvous)
				}
				multi := predict(t, true, "main", node("g",
					"CUDA_VISIBLE_DEVICES=0,1 vllm serve org/M -dp 2 --api-server-count 2",
					"CUDA_VISIBLE_DEVICES=2,3 vllm serve org/M -dp 2 --api-server-count 2 --data-parallel-rpc-port 13000"))
				for _, id := range []string{"g/0/api-server-0", "g/1/api-server-0"} {
					if p := get(t, multi, id); p.Exit != nil {
						t.Errorf("%s with SO_REUSEPORT (run_multi_api_server): %s; both listen", id, exitText(p))
					}
				}
			}},
		{name: "the DP master port list: every data-parallel launch probes five ports",
			source: "vllm/config/parallel.py ParallelConfig.__post_init__ (get_open_ports_list(5) when data_parallel_size > 1)", profile: "main",
			nodes: []Node{node("h", "VLLM_PORT=5678 vllm serve org/M -dp 2"), node("g", "vllm serve org/M")},
			check: func(t *testing.T, procs []report.Process) {
				got := addrOf(get(t, procs, "h/0/api-server-0"), "dp-master-ports", report.AddressProbe)
				if len(got) != 1 || !slices.Equal(got[0].Ports, []int{5678, 5679, 5680, 5681, 5682}) || got[0].Endpoint != "tcp://0.0.0.0:5678" {
					t.Errorf("h: %+v", got)
				}
				if got := addrOf(get(t, procs, "g/0/api-server-0"), "dp-master-ports", ""); len(got) != 0 {
					t.Errorf("g (no data parallel): %+v", got)
				}
			}},
		{name: "the executor's init method: uni probes get_ip(); mp probes loopback before PR #50999, a file store after",
			source: "vllm/v1/executor/uniproc_executor.py _init_executor; vllm/v1/executor/multiproc_executor.py _init_executor", profile: "main+executor_rendezvous=tcp",
			nodes: []Node{node("h", "vllm serve org/M"), node("g", "vllm serve org/M -tp 2")},
			check: func(t *testing.T, procs []report.Process) {
				if got := addrOf(get(t, procs, "h/0/engine-core-0"), "executor-init", report.AddressProbe); len(got) != 1 || got[0].Endpoint != "tcp://h:0" {
					t.Errorf("uni: %+v", got)
				}
				if got := addrOf(get(t, procs, "g/0/engine-core-0"), "executor-init", report.AddressProbe); len(got) != 1 || got[0].Endpoint != "tcp://127.0.0.1:0" {
					t.Errorf("mp, tcp: %+v", got)
				}
				file := predict(t, false, "main", node("g", "vllm serve org/M -tp 2"), node("h", "vllm serve org/M"))
				got := addrOf(get(t, file, "g/0/engine-core-0"), "executor-init", "")
				if len(got) != 1 || got[0].Exercised || !strings.HasPrefix(got[0].Endpoint, "file:///tmp/vllm_dist_") {
					t.Errorf("mp, file: %+v", got)
				}
				// vllm/v1/executor/uniproc_executor.py _distributed_args: the uni executor takes a
				// file store after PR #50999 too (TCP only for AITER's custom all-reduce).
				got = addrOf(get(t, file, "h/0/engine-core-0"), "executor-init", "")
				if len(got) != 1 || got[0].Role != report.AddressBind || !strings.HasPrefix(got[0].Endpoint, "file:///tmp/vllm_dist_") {
					t.Errorf("uni, file: %+v", got)
				}
			}},
		{name: "the engine I/O sockets: an input and an output per API server process",
			source: "vllm/v1/engine/utils.py get_engine_zmq_addresses(vllm_config, num_api_servers); vllm/entrypoints/cli/serve.py run_multi_api_server (api_server_count defaults to the local DP size)", profile: "main",
			nodes: []Node{node("h", "vllm serve org/M -dp 2"), node("g", "vllm serve org/M")},
			check: func(t *testing.T, procs []report.Process) {
				keys := func(id string) []string {
					var out []string
					for _, a := range addrOf(get(t, procs, id), "engine-io", report.AddressBind) {
						out = append(out, a.Key)
					}
					return out
				}
				if got := keys("h/0/api-server-0"); !slices.Equal(got, []string{"input", "input", "output", "output"}) {
					t.Errorf("DP 2 (two API server processes): %v", got)
				}
				if got := keys("g/0/api-server-0"); !slices.Equal(got, []string{"input", "output"}) {
					t.Errorf("one API server: %v", got)
				}
			}},
		{name: "the DP coordinator: ipc when every engine and front end is local, tcp port 0 otherwise",
			source: "vllm/v1/engine/coordinator.py DPCoordinator (get_engine_client_zmq_addr(local_only, host)); vllm/config/vllm.py needs_dp_coordinator", profile: "main", moe: true,
			nodes: []Node{
				node("a", "vllm serve org/M -dp 2"),
				node("b", "vllm serve org/M -dp 4 -dpl 2 --data-parallel-hybrid-lb --data-parallel-address b --data-parallel-rpc-port 13345"),
			},
			check: func(t *testing.T, procs []report.Process) {
				for _, a := range addrOf(get(t, procs, "a/0/api-server-0"), "dp-coordinator", report.AddressBind) {
					if !strings.HasPrefix(a.Endpoint, "ipc:///tmp/") {
						t.Errorf("internal LB, all local: %s %s", a.Key, a.Endpoint)
					}
				}
				got := addrOf(get(t, procs, "b/0/api-server-0"), "dp-coordinator", report.AddressBind)
				if len(got) != 3 || got[0].Endpoint != "tcp://b:0" || got[1].Endpoint != "tcp://b:0" {
					t.Errorf("hybrid LB with remote engines: %+v", got)
				}
				if got[0].Exercised {
					t.Errorf("the coordinator is not planned: its sockets are listed only")
				}
			}},
		{name: "NIXL after PR #26338: each engine's scheduler listens once, base + data_parallel_index",
			source: "vllm/distributed/kv_transfer/kv_connector/v1/nixl/base_scheduler.py (side_channel_port = VLLM_NIXL_SIDE_CHANNEL_PORT + data_parallel_index)", profile: "main", moe: true,
			nodes: []Node{node("h", "VLLM_NIXL_SIDE_CHANNEL_HOST=h vllm serve org/M -dp 2 --kv-transfer-config "+nixlP)},
			check: func(t *testing.T, procs []report.Process) {
				for dp := 0; dp < 2; dp++ {
					core := get(t, procs, fmt.Sprintf("h/0/engine-core-%d", dp))
					want := fmt.Sprintf("tcp://h:%d", 5600+dp)
					if b := addrOf(core, "nixl-side-channel", report.AddressBind); len(b) != 1 || b[0].Endpoint != want || b[0].Key != core.EngineID || b[0].BindSeq == 0 {
						t.Errorf("%s listens %+v, want %s", core.ID, b, want)
					}
					if ad := addrOf(core, "nixl-side-channel", report.AddressAdvertise); len(ad) != 1 || ad[0].Endpoint != want {
						t.Errorf("%s advertises %+v", core.ID, ad)
					}
					if w := addrOf(get(t, procs, core.ID+"/worker-0"), "nixl-side-channel", ""); len(w) != 0 {
						t.Errorf("workers listen too: %+v", w)
					}
				}
			}},
		{name: "NIXL before PR #26338: every worker listens on its own host at base + dp_rank*TP + tp_rank",
			source: "nixl_connector.py NixlConnectorWorker._nixl_handshake_listener (make_zmq_path('tcp', VLLM_NIXL_SIDE_CHANNEL_HOST, base_port + tp_rank))", profile: "main+nixl_side_channel=worker", moe: true,
			nodes: []Node{
				node("p0", "VLLM_NIXL_SIDE_CHANNEL_HOST=p0 vllm serve org/M -tp 16 --nnodes 2 --node-rank 0 --master-addr p0 --kv-transfer-config "+nixlP),
				node("p1", "VLLM_NIXL_SIDE_CHANNEL_HOST=p1 vllm serve org/M -tp 16 --nnodes 2 --node-rank 1 --master-addr p0 --headless --kv-transfer-config "+nixlP),
			},
			check: func(t *testing.T, procs []report.Process) {
				if b := addrOf(get(t, procs, "p1/0/headless-0/worker-3"), "nixl-side-channel", report.AddressBind); len(b) != 1 || b[0].Endpoint != "tcp://p1:5611" || b[0].Key != get(t, procs, "p0/0/engine-core-0").EngineID {
					t.Errorf("follower worker (tp 11): %+v", b)
				}
				core := get(t, procs, "p0/0/engine-core-0")
				if b := addrOf(core, "nixl-side-channel", report.AddressBind); len(b) != 0 {
					t.Errorf("the scheduler listens too: %+v", b)
				}
				if ad := addrOf(core, "nixl-side-channel", report.AddressAdvertise); len(ad) != 1 || ad[0].Endpoint != "tcp://p0:5600" {
					t.Errorf("advertised %+v", ad)
				}
			}},
		{name: "a NIXL kv_consumer's workers dial every producer engine; kv_both instances dial nobody",
			source: "nixl/base_worker.py _nixl_handshake (REQ to the remote_host:remote_port the proxy passes in kv_transfer_params)", profile: "main", moe: true,
			nodes: []Node{
				node("p", "VLLM_NIXL_SIDE_CHANNEL_HOST=p vllm serve org/M -tp 2 --kv-transfer-config "+nixlP),
				node("d", `VLLM_NIXL_SIDE_CHANNEL_HOST=d vllm serve org/M -tp 2 --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'`),
				node("b", `vllm serve org/M --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'`),
			},
			check: func(t *testing.T, procs []report.Process) {
				prod := get(t, procs, "p/0/engine-core-0")
				for w := 0; w < 2; w++ {
					c := addrOf(get(t, procs, fmt.Sprintf("d/0/engine-core-0/worker-%d", w)), "nixl-side-channel", report.AddressConnect)
					if len(c) != 2 {
						t.Fatalf("decode worker %d dials %d times, want the producer p and the kv_both b: %+v", w, len(c), c)
					}
					if c[1].Endpoint != "tcp://p:5600" || c[1].Key != prod.EngineID || c[1].ServedBy != prod.ID {
						t.Errorf("decode worker %d: %+v", w, c[1])
					}
				}
				if c := addrOf(get(t, procs, "b/0/engine-core-0/worker-0"), "nixl-side-channel", report.AddressConnect); len(c) != 0 {
					t.Errorf("kv_both dials: %+v", c)
				}
			}},
		{name: "the P2P offload tier's control socket: the tier's port in every engine before PR #47636, plus data_parallel_index after",
			source: "vllm/v1/kv_offload/tiering/p2p/manager.py P2PSecondaryTierManager (port = int(port) + dp_index)", profile: "main", moe: true,
			nodes: []Node{node("h", "PYTHONHASHSEED=0 vllm serve org/M -dp 2 --kv-transfer-config "+tiering(`{"type":"p2p","port":7000}`)),
				node("g", "PYTHONHASHSEED=0 vllm serve org/M --kv-transfer-config "+tiering(`{"type":"p2p"}`))},
			check: func(t *testing.T, procs []report.Process) {
				for dp := 0; dp < 2; dp++ {
					got := endpoints(addrOf(get(t, procs, fmt.Sprintf("h/0/engine-core-%d", dp)), "offload-p2p-control", report.AddressBind))
					if want := fmt.Sprintf("tcp://localhost:%d", 7000+dp); !slices.Equal(got, []string{want}) {
						t.Errorf("dp %d: %v, want %s", dp, got, want)
					}
				}
				if got := endpoints(addrOf(get(t, procs, "g/0/engine-core-0"), "offload-p2p-control", "")); !slices.Equal(got, []string{"tcp://localhost:5710"}) {
					t.Errorf("defaults: %v", got)
				}
				old := predict(t, true, "main+offload_p2p_port=fixed", node("h", "PYTHONHASHSEED=0 vllm serve org/M --kv-transfer-config "+tiering(`{"type":"p2p"}`)))
				if got := endpoints(addrOf(get(t, old, "h/0/engine-core-0"), "offload-p2p-control", "")); !slices.Equal(got, []string{"tcp://0.0.0.0:7777"}) {
					t.Errorf("before PR #47636: %v", got)
				}
			}},
		{name: "the P2P tier refuses to start without PYTHONHASHSEED, before it binds",
			source: "vllm/v1/kv_offload/tiering/p2p/manager.py (ValueError: PYTHONHASHSEED must be set for P2P KV offload ..., PR #48021)", profile: "main",
			nodes: []Node{node("h", "vllm serve org/M --kv-transfer-config "+tiering(`{"type":"p2p"}`))},
			check: func(t *testing.T, procs []report.Process) {
				core := get(t, procs, "h/0/engine-core-0")
				if core.Exit == nil || !strings.HasPrefix(core.Exit.Error, "ValueError: PYTHONHASHSEED must be set") || len(addrOf(core, "offload-p2p-control", "")) != 0 {
					t.Errorf("%s, %+v", exitText(core), core.Addresses)
				}
			}},
		{name: "the offload region: one per engine_id after PR #47987; before, one per front end and a slot past the region on DP rank 1",
			source: "vllm/v1/kv_offload/tiering/spec.py get_manager/create_worker; cpu/shared_offload_region.py (/dev/shm/vllm_offload_{name}.mmap, populate loop madvise)", profile: "main",
			nodes: []Node{node("h", "vllm serve org/M -dp 2 --kv-transfer-config "+tiering(``))},
			check: func(t *testing.T, procs []report.Process) {
				for dp := 0; dp < 2; dp++ {
					core := get(t, procs, fmt.Sprintf("h/0/engine-core-%d", dp))
					want := "shm:///dev/shm/vllm_offload_" + core.EngineID + ".mmap"
					for _, id := range []string{core.ID, core.ID + "/worker-0"} {
						if got := endpoints(addrOf(get(t, procs, id), "offload-region", report.AddressOpen)); !slices.Equal(got, []string{want}) {
							t.Errorf("%s opens %v, want %s", id, got, want)
						}
					}
				}
				old := predict(t, false, "main+offload_region_key=instance", node("h", "vllm serve org/M -dp 2 --kv-transfer-config "+tiering(``)))
				a := addrOf(get(t, old, "h/0/engine-core-0/worker-0"), "offload-region", "")
				b := addrOf(get(t, old, "h/0/engine-core-1/worker-0"), "offload-region", "")
				if len(a) != 1 || len(b) != 1 || a[0].Endpoint != b[0].Endpoint || b[0].ServedBy != "h/0/engine-core-0/worker-0" {
					t.Errorf("before PR #47987: %+v / %+v", a, b)
				}
				if w := get(t, old, "h/0/engine-core-1/worker-0"); w.Exit == nil || w.Exit.Error != "ValueError: madvise start out of bounds" {
					t.Errorf("DP rank 1's worker: %s", exitText(w))
				}
			}},
		{name: "the P2P Mooncake connector: TP 0 of the engine runs the bootstrap server, every producer worker registers with get_mooncake_bootstrap_addr()",
			source: "vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py should_launch_bootstrap_server, get_mooncake_bootstrap_addr (127.0.0.1 under external LB)", profile: "main", moe: true,
			nodes: []Node{
				node("h", `vllm serve org/M -tp 16 -dp 2 --data-parallel-rank 0 --nnodes 4 --node-rank 0 --master-addr h --kv-transfer-config '{"kv_connector":"MooncakeConnector","kv_role":"kv_producer"}'`),
				node("f", `vllm serve org/M -tp 16 -dp 2 --data-parallel-rank 0 --nnodes 4 --node-rank 1 --master-addr h --headless --kv-transfer-config '{"kv_connector":"MooncakeConnector","kv_role":"kv_producer"}'`),
			},
			check: func(t *testing.T, procs []report.Process) {
				if b := endpoints(addrOf(get(t, procs, "h/0/engine-core-0/worker-0"), "mooncake-bootstrap", report.AddressBind)); !slices.Equal(b, []string{"tcp://0.0.0.0:8998"}) {
					t.Errorf("head TP 0: %v", b)
				}
				// A headless follower's workers have no data_parallel_rank_local, so none runs a
				// server, and under external LB they register with their own host's 127.0.0.1:
				// listed, for what it shows (no run exercises these yet).
				fw := get(t, procs, "f/0/headless-0/worker-0")
				if b := addrOf(fw, "mooncake-bootstrap", report.AddressBind); len(b) != 0 {
					t.Errorf("follower TP 8 runs a server: %+v", b)
				}
				if c := endpoints(addrOf(fw, "mooncake-bootstrap", report.AddressConnect)); !slices.Equal(c, []string{"tcp://127.0.0.1:8998"}) {
					t.Errorf("follower registers at %v", c)
				}
			}},
		{name: "rendezvous are listed as what vLLM binds there: a local handshake is a private ipc path",
			source: "vllm/v1/engine/utils.py launch_core_engines (get_open_zmq_ipc_path when handshake_local_only)", profile: "main", moe: true,
			nodes: []Node{node("h", "vllm serve org/M -dp 2")},
			check: func(t *testing.T, procs []report.Process) {
				fe := addrOf(get(t, procs, "h/0/api-server-0"), "dp-handshake", report.AddressBind)
				en := addrOf(get(t, procs, "h/0/engine-core-1"), "dp-handshake", report.AddressConnect)
				if len(fe) != 1 || len(en) != 1 || fe[0].Endpoint != en[0].Endpoint || !strings.HasPrefix(fe[0].Endpoint, "ipc:///tmp/") || fe[0].Exercised {
					t.Errorf("front end %+v, engine %+v", fe, en)
				}
				if g := addrOf(get(t, procs, "h/0/engine-core-1"), "dp-group", report.AddressConnect); len(g) != 1 || g[0].Endpoint != "tcp://127.0.0.1:29551" {
					t.Errorf("dp group %+v", g)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Logf("source: %s", tt.source)
			tt.check(t, predict(t, tt.moe, tt.profile, tt.nodes...))
		})
	}
}

// TestHangs: a spinning allocator leaves its process hung, alive and without children. An engine
// core probes for its executor after its HELLO (vllm/v1/engine/core.py builds the executor inside
// _perform_handshakes), so its front end's handshake completes and the front end lives on, waiting
// for a READY that never comes (wait_for_engine_startup has no deadline).
func TestHangs(t *testing.T) {
	t.Log("source: vllm/utils/network_utils.py get_open_port before PR #50965 (issue #50024), get_open_ports_list before PR #36191")
	procs := predict(t, false, "main+open_port_reserved=retry,executor_rendezvous=tcp",
		node("h", "VLLM_PORT=29500 VLLM_DP_MASTER_PORT=29500 vllm serve org/M -dp 2"))
	for _, id := range []string{"h/0/engine-core-0", "h/0/engine-core-1"} {
		p := get(t, procs, id)
		if p.Hung == nil || !strings.Contains(p.Hung.Where, "get_open_port") || p.Hung.Deadline != HangBoundText {
			t.Errorf("%s: hung %+v", id, p.Hung)
		}
		if len(under(procs, id)) != 1 {
			t.Errorf("%s: its workers are listed, but it never starts them", id)
		}
		if p.Crashed() {
			t.Errorf("%s: %s; a hung engine is stopped by its parent, not crashed", id, exitText(p))
		}
	}
	fe := get(t, procs, "h/0/api-server-0")
	if fe.Exit != nil || fe.Hung != nil || len(fe.Rendezvous) != 1 || fe.Rendezvous[0].Error != "" {
		t.Errorf("front end: %s, hung %+v, rendezvous %+v; want it alive past a completed handshake", exitText(fe), fe.Hung, fe.Rendezvous)
	}
	front := predict(t, true, "main+vllm_port_list=repeat", node("h", "VLLM_PORT=5678 vllm serve org/M -dp 2"))
	if fe := get(t, front, "h/0/api-server-0"); fe.Hung == nil || len(front) != 1 {
		t.Errorf("before PR #36191 the front end hangs in its config and starts nothing: %+v (%d processes)", fe.Hung, len(front))
	}
}

// TestDialsPeers: only a NIXL kv_consumer's node needs the deployment planned
// (nixl/base_worker.py dials the producers the proxy names).
func TestDialsPeers(t *testing.T) {
	tests := []struct {
		line string
		want bool
	}{
		{`vllm serve org/M --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'`, true},
		{`vllm serve org/M --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'`, false},
		{`vllm serve org/M --kv-transfer-config '{"kv_connector":"MultiConnector","kv_role":"kv_consumer","kv_connector_extra_config":{"connectors":[{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}]}}'`, true},
		{`vllm serve org/M`, false},
		{`vllm serve --no-such-flag`, false},
	}
	for _, tt := range tests {
		if got := DialsPeers(node("h", tt.line)); got != tt.want {
			t.Errorf("DialsPeers(%s) = %v, want %v", tt.line, got, tt.want)
		}
	}
}
