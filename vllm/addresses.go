package vllm

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/widetp/widetp/report"
)

// Every address a process binds, opens, dials, probes or advertises, derived as vLLM derives it.
// planAddresses runs over a command's finished process tree (it needs each process's own
// ParallelConfig, which cmdPlanner.identity keeps) and fills ProcessPlan.Addresses. Channels:
//
//	api-server           the front end's HTTP socket (gRPC's under --grpc, bound once the engines are
//	                     up), --host (all interfaces) : --port; a DP supervisor
//	                     child takes --port + its local rank (vllm/entrypoints/openai/api_server.py
//	                     setup_server; dp_supervisor.py _build_vllm_dp_server_args)
//	dp-supervisor        the supervisor's health port, --data-parallel-supervisor-port
//	dp-master-ports      get_open_ports_list(5) in ParallelConfig.__post_init__ when DP > 1
//	                     (vllm/config/parallel.py); the last one is data_parallel_master_port
//	dp-handshake         the engines' startup handshake: ipc://<VLLM_RPC_BASE_PATH>/<uuid4> when every
//	                     engine is local, else tcp://<data_parallel_master_ip>:<rpc port>
//	                     (vllm/v1/engine/utils.py launch_core_engines)
//	dp-coordinator       DPCoordinator's three sockets: ipc, or tcp://<dp master ip>:0 (the kernel
//	                     picks, the coordinator publishes it) (vllm/v1/engine/coordinator.py)
//	engine-io            the front end's input/output sockets to the engines
//	                     (vllm/v1/engine/utils.py get_engine_zmq_addresses)
//	dp-group             the MoE engines' stateless DP group (ParallelConfig.stateless_init_dp_group)
//	torch-world          the workers' torch store (vllm/distributed/parallel_state.py
//	                     init_distributed_environment)
//	executor-init        a single-node executor's distributed_init_method: get_open_port() probed by
//	                     the engine core (uniproc_executor.py; multiproc_executor.py before PR #50999),
//	                     or a file:// store (after)
//	nixl-side-channel    NIXL handshake listeners, advertisements and the dials of consumers
//	                     (vllm/distributed/kv_transfer/kv_connector/v1/nixl)
//	offload-region       the tiering offload spec's /dev/shm region (vllm/v1/kv_offload/tiering/spec.py)
//	offload-p2p-control  the P2P tier's ZMQ control socket (vllm/v1/kv_offload/tiering/p2p/manager.py)
//	kv-events            the scheduler's KV event publisher and its replay socket, offset by the
//	                     engine's DP index (vllm/distributed/kv_events.py; kvevents.go)
//
// The rendezvous the model meets at (rendezvous.go) keep their own derived ports; the entries
// above say what vLLM binds there, and the rendezvous layer is what exercises them.

// NIXLProducer is a KV-producing NIXL engine as its consumers see it: what its scheduler
// advertises in kv_transfer_params (the proxy hands it to the decoder) and who answers each
// (pp, tp) rank's handshake under the profile.
type NIXLProducer struct {
	EngineID string
	// Endpoint is the advertised remote_host:remote_port, as tcp://host:port.
	Endpoint string
	// EngineCore is the producer engine core's process ID (the listener after PR #26338).
	EngineCore     string
	TPSize, PPSize int
	// Workers are the producer's worker IDs by pp*TPSize + tp (the listeners before #26338).
	Workers []string
}

// addrEnv is what vllm/envs.py gives the address rules of one command.
type addrEnv struct {
	vllmPort *int
	// dpMasterPort is VLLM_DP_MASTER_PORT when it is in the environment (nil otherwise: the
	// reserved range is empty).
	dpMasterPort *int
	nixlHost     string
	nixlPort     int
	p2pHost      string
	p2pPort      int
	// mooncakeBootstrapPort is VLLM_MOONCAKE_BOOTSTRAP_PORT (8998).
	mooncakeBootstrapPort int
	hashSeed              bool
	tmp                   string
	rpcBase               string
}

func (cp *cmdPlanner) readAddrEnv() addrEnv {
	m := make(map[string]string, len(cp.node.Env)+len(cp.args.Env))
	for k, v := range cp.node.Env {
		m[k] = v
	}
	for k, v := range cp.args.Env {
		m[k] = v
	}
	e := addrEnv{nixlHost: "localhost", nixlPort: 5600, p2pHost: "localhost", p2pPort: 5710, mooncakeBootstrapPort: 8998,
		tmp: gettempdir(m), rpcBase: cp.env.rpcBasePath}
	e.vllmPort, _ = vllmPortEnv(m) // its error crashes the process where it is read (postInit)
	if v, ok := m["VLLM_DP_MASTER_PORT"]; ok {
		if n, err := pyInt(v); err == nil {
			e.dpMasterPort = &n
		}
	}
	if v, ok := m["VLLM_NIXL_SIDE_CHANNEL_HOST"]; ok {
		e.nixlHost = v
	}
	if n, err := pyInt(m["VLLM_NIXL_SIDE_CHANNEL_PORT"]); err == nil {
		e.nixlPort = n
	}
	if v, ok := m["VLLM_P2P_SIDE_CHANNEL_HOST"]; ok {
		e.p2pHost = v
	}
	if n, err := pyInt(m["VLLM_P2P_SIDE_CHANNEL_PORT"]); err == nil {
		e.p2pPort = n
	}
	if n, err := pyInt(m["VLLM_MOONCAKE_BOOTSTRAP_PORT"]); err == nil {
		e.mooncakeBootstrapPort = n
	}
	_, e.hashSeed = m["PYTHONHASHSEED"]
	return e
}

// alloc is a PortAlloc of this command under the profile.
func (cp *cmdPlanner) alloc(e addrEnv, fn string, count int) *PortAlloc {
	a := &PortAlloc{Func: fn, Count: count, VLLMPort: e.vllmPort,
		List: cp.opts.Profile.VLLMPortList, Reserve: cp.opts.Profile.OpenPortReserved}
	if e.dpMasterPort != nil {
		a.Reserved = &[2]int{*e.dpMasterPort, *e.dpMasterPort + 10}
	}
	return a
}

// probeEndpoint is where an allocator scans from: tcp://host:<VLLM_PORT>, or :0 when the kernel
// picks.
func probeEndpoint(host string, e addrEnv) string {
	start := 0
	if e.vllmPort != nil {
		start = *e.vllmPort
	}
	return "tcp://" + hostPort(host, start)
}

// planAddresses fills the Addresses of every process of the command's tree.
func (cp *cmdPlanner) planAddresses(top *ProcessPlan) {
	if cp.args == nil {
		return // the line did not parse: nothing binds
	}
	e := cp.readAddrEnv()
	var walk func(p, parent *ProcessPlan)
	walk = func(p, parent *ProcessPlan) {
		if p.Crash == nil || p.Crash.Stage != StageConfig {
			cp.processAddresses(p, parent, e)
		}
		for _, c := range p.Children {
			walk(c, p)
		}
	}
	walk(top, nil)
}

func (cp *cmdPlanner) processAddresses(p, parent *ProcessPlan, e addrEnv) {
	pc := cp.pcs[p.Identity.ID]
	add := func(a AddressPlan) { p.Addresses = append(p.Addresses, a) }
	switch p.Identity.Role {
	case report.RoleAPIServer:
		cp.frontEndAddresses(p, parent, pc, e, add)
	case report.RoleHeadless:
		cp.dpMasterPorts(pc, e, add)
		if len(p.Children) > 0 && p.Children[0].Identity.Role == report.RoleWorker {
			// run_headless on a follower node runs the MultiprocExecutor itself.
			cp.executorInit(pc, e, add)
		}
	case report.RoleDPSupervisor:
		host := cp.args.lastOther("--host")
		if host == "" {
			host = "0.0.0.0"
		}
		add(AddressPlan{Address: report.Address{Channel: "dp-supervisor", Role: report.AddressBind,
			Endpoint: "tcp://" + hostPort(host, cp.args.DataParallelSupervisorPort),
			Source:   "vllm/entrypoints/openai/dp_supervisor.py DPSupervisor (bound once the DP servers are ready)"},
			Stage: StageServing})
	case report.RoleEngineCore:
		cp.engineCoreAddresses(p, pc, e, add)
	case report.RoleRayActor:
		// DPEngineCoreActor (vllm/v1/engine/core.py) runs an EngineCore, its scheduler's publisher
		// included, with data_parallel_index set to its DP rank.
		cp.kvEventsAddresses(p, pc, add)
		cp.ecSchedulerConnector(p)
	case report.RoleWorker:
		cp.workerAddresses(p, pc, e, add)
	}
	cp.rendezvousAddresses(p, pc, add)
}

// frontEndAddresses: run_server binds the HTTP socket first (setup_server), then
// create_engine_config builds the ParallelConfig (get_open_ports_list), then launch_core_engines
// binds the handshake and starts the DP coordinator.
func (cp *cmdPlanner) frontEndAddresses(p, parent *ProcessPlan, pc *ParallelConfig, e addrEnv, add func(AddressPlan)) {
	port := cp.args.Port
	if parent != nil && parent.Identity.Role == report.RoleDPSupervisor && pc != nil {
		port = cp.args.Port + pc.DataParallelRank - supervisorStartRank(cp.args) // supervisorChildArgs: --port + i
	}
	host := cp.args.lastOther("--host")
	if host == "" {
		host = "0.0.0.0" // create_server_socket((args.host or "", port)): every interface
	}
	key := "api-server"
	if pc != nil {
		key = fmt.Sprintf("api-server dp%d", pc.DataParallelRank)
	}
	if !cp.grpc {
		add(AddressPlan{Address: report.Address{Channel: "api-server", Role: report.AddressBind,
			Endpoint: "tcp://" + hostPort(host, port), Key: key, Exercised: true,
			Source: "vllm/entrypoints/openai/api_server.py setup_server (launcher.create_server_socket); with --api-server-count N, run_multi_api_server binds once and hands the socket to its N API server processes"},
			Stage: StageConfig, Flavor: BindFlavorSocket, ListenAt: StageServing,
			// serve.py: setup_server(args, reuse_port=num_api_servers > 1)
			ReusePort: pc != nil && pc.features.apiProcessCount > 1})
	}
	if pc == nil {
		return
	}
	cp.dpMasterPorts(pc, e, add)
	if cp.grpc && p.Crash == nil {
		// serve_grpc binds once AsyncLLM is up: after what launching the engines binds.
		defer add(grpcSocket(host, port, key))
	}
	if pc.DataParallelBackend == "ray" || p.Crash != nil {
		return
	}
	D, L := pc.DataParallelSize, pc.DataParallelSizeLocal
	offline := pc.DataParallelRankLocal != nil
	ipc := func(what string) string {
		return "ipc://" + e.rpcBase + "/" + derivedUUID4(cp.opts.Seed, cp.node.Host, strconv.Itoa(cp.cmd), p.Identity.ID, what)
	}
	tcp0 := "tcp://" + hostPort(pc.DataParallelMasterIP, 0)
	if D > 1 && (cp.opts.Model.MoE || !pc.ExternalLB) && !offline && pc.DataParallelRank == 0 {
		// needs_dp_coordinator (vllm/config/vllm.py) on rank 0 of an online launch.
		// get_engine_client_zmq_addr(local_only, host): a fresh ipc path each call, or
		// tcp://host:0.
		addr := func(local bool, what string) string {
			if local {
				return ipc(what)
			}
			return tcp0
		}
		localFront := !pc.LocalEnginesOnly()
		localBack := D == L && !pc.EnableElasticEP
		src := "vllm/v1/engine/coordinator.py DPCoordinator (its own process, not planned; port 0: the kernel picks and the coordinator publishes it)"
		for _, s := range []struct {
			key   string
			local bool
		}{{"front_publish", localFront}, {"back_output", localBack}, {"back_publish", localBack}} {
			add(AddressPlan{Address: report.Address{Channel: "dp-coordinator", Role: report.AddressBind,
				Endpoint: addr(s.local, "coordinator-"+s.key), Key: s.key, Source: src}, Stage: StageEngineInit})
		}
	}
	io := tcp0
	if !engineIOOverTCP(pc) {
		io = ""
	}
	// get_engine_zmq_addresses(vllm_config, num_api_servers): an input and an output socket for
	// each API server process (run_multi_api_server's count; one for run_server's MPClient), all
	// inputs first.
	for _, dir := range []string{"input", "output"} {
		for i := 0; i < min(pc.features.apiProcessCount, maxProcessesPerCommand); i++ {
			ep := io
			switch {
			case ep == "":
				what := "engine-" + dir
				if i > 0 {
					what += strconv.Itoa(i)
				}
				ep = ipc(what)
			case cp.preallocatesEngineIO():
				// tcp://host:<get_open_port()>, probed by the launcher and bound by the API
				// server's client sockets (core_client.py make_zmq_socket) or the Rust front end
				// later: the window of vLLM#40443, which a steal-port step takes. Each bind binds
				// its own probe's port (the key tells them apart).
				key := dir
				if i > 0 {
					key += strconv.Itoa(i)
				}
				probeSrc, bindSrc := "vllm/v1/engine/utils.py get_engine_zmq_addresses (get_open_port(), before PR #42585)",
					"vllm/v1/engine/core_client.py MPClient (make_zmq_socket bind of the probed port, before PR #42585)"
				if cp.rustFrontend != "" {
					probeSrc, bindSrc = "vllm/v1/engine/utils.py get_engine_zmq_addresses (defer_api_server_ports=False: the Rust front end cannot report a bound port back)",
						"vllm/v1/utils.py RustFrontendProcessManager (vllm-rs frontend binds its --input-address and --output-address)"
				}
				add(AddressPlan{Address: report.Address{Channel: "engine-io", Role: report.AddressProbe,
					Endpoint: probeEndpoint("0.0.0.0", e), Key: key, Exercised: true, Source: probeSrc},
					Stage: StageConfig, Alloc: cp.alloc(e, FuncGetOpenPort, 0)})
				add(AddressPlan{Address: report.Address{Channel: "engine-io", Role: report.AddressBind,
					Endpoint: "tcp://" + hostPort(pc.DataParallelMasterIP, 0) + KeyProbedPort, Key: key, Exercised: true, Source: bindSrc},
					Stage: StageEngineInit, Flavor: BindFlavorZMQ})
				continue
			}
			add(AddressPlan{Address: report.Address{Channel: "engine-io", Role: report.AddressBind, Endpoint: ep, Key: dir,
				Source: "vllm/v1/engine/utils.py get_engine_zmq_addresses (port 0: bound at once, read back with LAST_ENDPOINT)"}, Stage: StageEngineInit})
		}
	}
}

// grpcSocket is the front end's socket under --grpc: serve_grpc builds the config and AsyncLLM
// (which launches the engines as run_server does), then binds host:port with grpc.aio's
// add_insecure_port, which sets SO_REUSEPORT, and serves at once.
func grpcSocket(host string, port int, key string) AddressPlan {
	return AddressPlan{Address: report.Address{Channel: "api-server", Role: report.AddressBind,
		Endpoint: "tcp://" + hostPort(host, port), Key: key, Exercised: true,
		Source: "vllm/entrypoints/grpc_server.py serve_grpc (server.add_insecure_port once AsyncLLM is up; gRPC sets SO_REUSEPORT)"},
		Stage: StageServing, Flavor: BindFlavorGRPC, ListenAt: StageServing, ReusePort: true}
}

// engineIOOverTCP is whether get_engine_zmq_addresses gives the front end TCP sockets (remote
// engines may dial them) rather than ipc paths: not offline, not local engines only, and not
// every engine on this node.
func engineIOOverTCP(pc *ParallelConfig) bool {
	return !(pc.DataParallelRankLocal != nil || pc.LocalEnginesOnly() ||
		(pc.DataParallelSizeLocal == pc.DataParallelSize && !pc.EnableElasticEP))
}

// dpMasterPorts: ParallelConfig.__post_init__ fills _data_parallel_master_port_list with
// get_open_ports_list(5) when data parallel was given on the command line (and elastic EP is
// off); it runs in every process that builds a ParallelConfig from arguments.
func (cp *cmdPlanner) dpMasterPorts(pc *ParallelConfig, e addrEnv, add func(AddressPlan)) {
	if pc == nil || pc.offline || pc.EnableElasticEP || !(pc.DataParallelSize > 1 || pc.DataParallelSizeLocal == 0) {
		return
	}
	add(AddressPlan{Address: report.Address{Channel: "dp-master-ports", Role: report.AddressProbe,
		Endpoint: probeEndpoint("0.0.0.0", e), Exercised: true,
		Source: "vllm/config/parallel.py ParallelConfig.__post_init__ (get_open_ports_list(5); the last is data_parallel_master_port)"},
		Stage: StageConfig, Alloc: cp.alloc(e, FuncGetOpenPortsList, 5)})
}

// executorInit is the distributed_init_method a single-node executor computes before it starts
// its workers.
func (cp *cmdPlanner) executorInit(pc *ParallelConfig, e addrEnv, add func(AddressPlan)) {
	if pc == nil {
		return
	}
	switch {
	case pc.DistributedExecutorBackend == "uni" && cp.opts.Profile.ExecutorRendezvous == ExecutorRendezvousTCP:
		add(AddressPlan{Address: report.Address{Channel: "executor-init", Role: report.AddressProbe,
			Endpoint: probeEndpoint(cp.hostIP, e), Exercised: true,
			Source: "vllm/v1/executor/uniproc_executor.py _init_executor (get_ip(), get_open_port()), before PR #50999"},
			Stage: StageEngineInit, Alloc: cp.alloc(e, FuncGetOpenPort, 0)})
	case pc.DistributedExecutorBackend == "uni":
		// UniProcExecutor._distributed_args: a file:// store too since PR #50999 (TCP only when
		// AITER's custom all-reduce needs it, which no simulated platform has).
		add(AddressPlan{Address: report.Address{Channel: "executor-init", Role: report.AddressBind,
			Endpoint: "file://" + e.tmp + "/vllm_dist_" + strings.ReplaceAll(derivedUUID4(cp.opts.Seed, cp.node.Host, strconv.Itoa(cp.cmd), "file-store", fmt.Sprint(pc.DataParallelRank)), "-", ""),
			Source:   "vllm/v1/executor/uniproc_executor.py _distributed_args (get_file_store_init_method, PR #50999)"},
			Stage: StageEngineInit})
	case pc.DistributedExecutorBackend == "mp" && cp.opts.Profile.ExecutorRendezvous == ExecutorRendezvousTCP:
		add(AddressPlan{Address: report.Address{Channel: "executor-init", Role: report.AddressProbe,
			Endpoint: probeEndpoint(defaultMasterAddr, e), Exercised: true,
			Source: "vllm/v1/executor/multiproc_executor.py _init_executor (get_loopback_ip(), get_open_port()), before PR #50999"},
			Stage: StageEngineInit, Alloc: cp.alloc(e, FuncGetOpenPort, 0)})
	case pc.DistributedExecutorBackend == "mp":
		add(AddressPlan{Address: report.Address{Channel: "executor-init", Role: report.AddressBind,
			Endpoint: "file://" + e.tmp + "/vllm_dist_" + strings.ReplaceAll(derivedUUID4(cp.opts.Seed, cp.node.Host, strconv.Itoa(cp.cmd), "file-store", fmt.Sprint(pc.DataParallelRank)), "-", ""),
			Source:   "vllm/v1/executor/multiproc_executor.py _init_executor (get_file_store_init_method, PR #50999)"},
			Stage: StageEngineInit})
	}
}

func (cp *cmdPlanner) engineCoreAddresses(p *ProcessPlan, pc *ParallelConfig, e addrEnv, add func(AddressPlan)) {
	if pc == nil {
		return
	}
	if p.Crash != nil && p.Crash.Stage == StageEngineInit {
		if p.executorInitDone {
			cp.executorInit(pc, e, add)
		}
		return
	}
	cp.executorInit(pc, e, add)
	for _, c := range cp.connectors() {
		switch {
		case c.name == offloadingConnectorName:
			cp.offloadSchedulerAddresses(p, pc, e, c, add)
		case isNIXL(c.name):
			cp.nixlSchedulerAddresses(p, pc, e, c, add)
		}
	}
	cp.kvEventsAddresses(p, pc, add)
	cp.ecSchedulerConnector(p)
}

func (cp *cmdPlanner) workerAddresses(p *ProcessPlan, pc *ParallelConfig, e addrEnv, add func(AddressPlan)) {
	if pc == nil || p.Crash != nil && p.Crash.Stage == StageEngineInit {
		return
	}
	for _, c := range cp.connectors() {
		switch {
		case c.name == offloadingConnectorName:
			cp.offloadWorkerAddresses(p, pc, c, add)
		case isNIXL(c.name):
			cp.nixlWorkerAddresses(p, pc, e, c, add)
		case c.name == mooncakeConnectorName:
			cp.mooncakeWorkerAddresses(p, pc, e, c, add)
		}
	}
}

// mooncakeWorkerAddresses lists the P2P Mooncake connector's producer side
// (vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py): every producer
// worker binds its sender side channel on a random port of get_ip() and registers it with the
// bootstrap server at get_mooncake_bootstrap_addr() — 127.0.0.1 under external or hybrid LB, the
// master address when a replica spans nodes, else the DP master IP — and the TP 0 / PP 0 worker
// of the designated engine (should_launch_bootstrap_server) runs that server on every interface.
// Listed only: no run exercises them yet.
func (cp *cmdPlanner) mooncakeWorkerAddresses(p *ProcessPlan, pc *ParallelConfig, e addrEnv, c connector, add func(AddressPlan)) {
	if c.role != "kv_producer" && c.role != "kv_both" {
		return
	}
	tp, pp := 0, 0
	if p.Identity.TPRank != nil {
		tp = *p.Identity.TPRank
	}
	if p.Identity.PPRank != nil {
		pp = *p.Identity.PPRank
	}
	src := "vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py"
	launch := tp == 0 && pp == 0
	if pc.LocalEnginesOnly() {
		launch = launch && pc.DataParallelRankLocal != nil && *pc.DataParallelRankLocal == 0
	} else {
		launch = launch && pc.DataParallelIndex == 0
	}
	if launch {
		add(AddressPlan{Address: report.Address{Channel: "mooncake-bootstrap", Role: report.AddressBind,
			Endpoint: "tcp://" + hostPort("0.0.0.0", e.mooncakeBootstrapPort), Key: KeyEngineID,
			Source: src + " should_launch_bootstrap_server, MooncakeBootstrapServer (uvicorn)"}, Stage: StageConnectorInit})
	}
	host := pc.DataParallelMasterIP
	if pc.LocalEnginesOnly() {
		host = "127.0.0.1"
	} else if n, err := pc.NNodesWithinDP(); err == nil && n > 1 {
		host = pc.MasterAddr
	}
	add(AddressPlan{Address: report.Address{Channel: "mooncake-bootstrap", Role: report.AddressConnect,
		Endpoint: "tcp://" + hostPort(host, e.mooncakeBootstrapPort), Key: KeyEngineID,
		Source: src + " register_worker_with_bootstrap (POST /register at get_mooncake_bootstrap_addr; retries while it refuses)"}, Stage: StageConnectorInit})
	add(AddressPlan{Address: report.Address{Channel: "mooncake-side-channel", Role: report.AddressBind,
		Endpoint: "tcp://" + hostPort(cp.hostIP, 0), Key: KeyEngineID,
		Source: src + " _mooncake_sender_listener (ROUTER bind_to_random_port on get_ip())"}, Stage: StageConnectorInit})
}

// rendezvousAddresses lists what vLLM binds or dials where the model's barriers meet; the
// rendezvous layer exercises the barriers themselves.
func (cp *cmdPlanner) rendezvousAddresses(p *ProcessPlan, pc *ParallelConfig, add func(AddressPlan)) {
	for _, r := range p.Rendezvous {
		role := report.AddressConnect
		if r.Rank == 0 {
			role = report.AddressBind
		}
		a := report.Address{Role: role, Endpoint: "tcp://" + r.Address, Key: r.Address}
		switch {
		case r.Kind == RendezvousWorkers:
			a.Channel = "torch-world"
			a.Key = p.Identity.Replica
			a.Source = "vllm/distributed/parallel_state.py init_distributed_environment (rank 0's TCPStore)"
			if pc != nil && pc.NNodes == 1 && pc.DataParallelSize == 1 {
				a.Source = "vllm: the executor's distributed_init_method (channel executor-init); the model's barrier meets here (rendezvous.go)"
			}
		case r.BindsEarly || p.Identity.Role == report.RoleEngineCore && isHandshake(p, r, pc):
			a.Channel = "dp-handshake"
			a.Source = "vllm/v1/engine/utils.py launch_core_engines (handshake ROUTER; engines dial it)"
			if pc != nil && r.Address != hostPort(pc.DataParallelMasterIP, pc.DataParallelRPCPort) {
				// A host-local handshake is a private ipc path in vLLM; the model's barrier meets at a
				// derived port instead (rendezvous.go LocalPortBase).
				binder := p.Identity.ID
				if !r.BindsEarly {
					binder = p.Identity.Parent
				}
				a.Endpoint = "ipc://" + cp.env.rpcBasePath + "/" + derivedUUID4(cp.opts.Seed, cp.node.Host, strconv.Itoa(cp.cmd), binder, "handshake")
				a.Source += "; the model's barrier meets at tcp://" + r.Address
			}
		default:
			a.Channel = "dp-group"
			a.Source = "vllm/config/parallel.py stateless_init_dp_group (vLLM pops the port from the shipped list; the model derives rpc port + 1: rendezvous.go)"
		}
		add(AddressPlan{Address: a, Stage: StageEngineInit})
	}
}

// isHandshake: an engine core's "dp" rendezvous other than its DP group (the last one of a
// DPEngineCoreProc) is a handshake with a front end.
func isHandshake(p *ProcessPlan, r RendezvousPlan, pc *ParallelConfig) bool {
	if pc == nil {
		return true
	}
	return !(r.Address == dpGroup(pc).Address && r.Rank == pc.DataParallelRank && r.WorldSize == pc.DataParallelSize)
}

// connector is one KV connector a command builds (a MultiConnector's children flattened).
type connector struct {
	name  string
	role  string
	extra map[string]any
}

const (
	offloadingConnectorName = "OffloadingConnector"
	nixlConnectorName       = "NixlConnector"
	mooncakeConnectorName   = "MooncakeConnector"
)

func (cp *cmdPlanner) connectors() []connector {
	var out []connector
	for _, k := range cp.args.KVTransfer.runningConnectors() {
		out = append(out, connector{k.Connector, k.Role, k.ExtraConfig})
	}
	return out
}

// tieringP2PTiers returns the p2p secondary tiers of a TieringOffloadingSpec, and whether the
// connector runs that spec at all.
func tieringP2PTiers(c connector) ([]map[string]any, bool) {
	if spec, _ := c.extra["spec_name"].(string); spec != "TieringOffloadingSpec" {
		return nil, false
	}
	var out []map[string]any
	tiers, _ := c.extra["secondary_tiers"].([]any)
	for _, t := range tiers {
		m, ok := t.(map[string]any)
		if ok && pyStr(m["type"]) == "p2p" {
			out = append(out, m)
		}
	}
	return out, true
}

// instanceID is VllmConfig.instance_id: random_uuid()[:5] drawn once per CLI parse, pickled into
// every engine core the front end starts (the mp path adds no DP suffix).
func (cp *cmdPlanner) instanceID() string {
	return derivedUUID4(cp.opts.Seed, cp.node.Host, strconv.Itoa(cp.cmd), "instance_id")[:5]
}

// offloadSchedulerAddresses: TieringOffloadingSpec.get_manager opens the scheduler side of the
// shared region, then each secondary tier; a p2p tier binds its ZMQ ROUTER control socket.
func (cp *cmdPlanner) offloadSchedulerAddresses(p *ProcessPlan, pc *ParallelConfig, e addrEnv, c connector, add func(AddressPlan)) {
	p2p, tiering := tieringP2PTiers(c)
	if !tiering {
		return
	}
	prof := cp.opts.Profile
	name := p.Identity.EngineID
	if prof.OffloadRegionKey == OffloadRegionKeyInstance {
		name = cp.instanceID()
	}
	add(AddressPlan{Address: report.Address{Channel: "offload-region", Role: report.AddressOpen,
		Endpoint: "shm:///dev/shm/vllm_offload_" + name + ".mmap", Key: p.Identity.EngineID, Exercised: true,
		Source: "vllm/v1/kv_offload/tiering/spec.py get_manager (SharedOffloadRegion, rank None)"},
		Stage: StageConnectorInit})
	if len(p2p) > 0 && !e.hashSeed {
		// P2PSecondaryTierManager refuses to start without PYTHONHASHSEED (PR #48021), before it
		// binds anything.
		schedulerRaises(p, valueError("PYTHONHASHSEED must be set for P2P KV offload so that block hashes match across instances. Set it to a fixed value (e.g. PYTHONHASHSEED=0) on every P2P peer."))
		return
	}
	for _, t := range p2p {
		host, port := "0.0.0.0", 7777
		if prof.OffloadP2PPort == OffloadP2PPortDPIndex {
			host, port = e.p2pHost, e.p2pPort
		}
		if v, ok := t["host"]; ok && v != nil {
			host = pyStr(v)
		}
		if v, ok := t["port"]; ok && v != nil {
			if n, err := pyInt(pyStr(v)); err == nil {
				port = n
			}
		}
		if prof.OffloadP2PPort == OffloadP2PPortDPIndex {
			port += pc.DataParallelIndex
		}
		add(AddressPlan{Address: report.Address{Channel: "offload-p2p-control", Role: report.AddressBind,
			Endpoint: "tcp://" + hostPort(host, port), Key: p.Identity.EngineID, Exercised: true,
			Source: "vllm/v1/kv_offload/tiering/p2p/manager.py P2PSecondaryTierManager (ZmqTransport ROUTER)"},
			Stage: StageConnectorInit, Flavor: BindFlavorZMQ})
	}
}

// offloadWorkerAddresses: TieringOffloadingSpec.create_worker opens the worker side of the region
// with its slot: the physical device index before PR #47987 (past the region's world_size slots
// on a DP rank > 0, where SharedOffloadRegion's populate loop madvises past the mapping), the
// index modulo world_size after.
func (cp *cmdPlanner) offloadWorkerAddresses(p *ProcessPlan, pc *ParallelConfig, c connector, add func(AddressPlan)) {
	if _, tiering := tieringP2PTiers(c); !tiering {
		return
	}
	prof := cp.opts.Profile
	name := KeyEngineID
	if prof.OffloadRegionKey == OffloadRegionKeyInstance {
		name = cp.instanceID()
	}
	a := AddressPlan{Address: report.Address{Channel: "offload-region", Role: report.AddressOpen,
		Endpoint: "shm:///dev/shm/vllm_offload_" + name + ".mmap", Key: KeyEngineID, Exercised: true,
		Source: "vllm/v1/kv_offload/tiering/spec.py create_worker (SharedOffloadRegion, rank = device slot)"},
		Stage: StageConnectorInit}
	if prof.OffloadRegionKey == OffloadRegionKeyInstance && cp.deviceIndex(p, pc) >= pc.WorldSize {
		a.Raises = "ValueError: madvise start out of bounds"
	}
	add(a)
}

// deviceIndex is torch.accelerator.current_device_index() of a worker: Worker.init_device's
// DP-adjusted local rank (executor.go workerDevice).
func (cp *cmdPlanner) deviceIndex(p *ProcessPlan, pc *ParallelConfig) int {
	local := 0
	if i := strings.LastIndex(p.Identity.ID, "/worker-"); i >= 0 {
		local, _ = strconv.Atoi(p.Identity.ID[i+len("/worker-"):])
	}
	nnodes, err := pc.NNodesWithinDP()
	if err == nil && nnodes == 1 && pc.DistributedExecutorBackend != "ray" && pc.DataParallelBackend != "ray" {
		dpLocal := pc.DataParallelIndex
		if pc.DataParallelRankLocal != nil {
			dpLocal = *pc.DataParallelRankLocal
		}
		local += dpLocal * pc.PipelineParallelSize * pc.TensorParallelSize
	}
	return local
}

func nixlProduces(role string) bool { return role == "kv_producer" || role == "kv_both" }

// nixlSchedulerAddresses: the scheduler advertises where decoders dial (remote_host:remote_port in
// kv_transfer_params) and, after PR #26338, listens there itself with every rank's metadata.
func (cp *cmdPlanner) nixlSchedulerAddresses(p *ProcessPlan, pc *ParallelConfig, e addrEnv, c connector, add func(AddressPlan)) {
	port := e.nixlPort + pc.DataParallelIndex
	src := "vllm/distributed/kv_transfer/kv_connector/v1/nixl/base_scheduler.py (side_channel_host, side_channel_port = VLLM_NIXL_SIDE_CHANNEL_PORT + data_parallel_index)"
	if cp.opts.Profile.NIXLSideChannel == NIXLSideChannelWorker {
		port = e.nixlPort + pc.DataParallelRank*pc.TensorParallelSize
		src = "nixl_connector.py NixlConnectorScheduler before PR #26338 (VLLM_NIXL_SIDE_CHANNEL_PORT + data_parallel_rank * tp_size)"
	}
	ep := "tcp://" + hostPort(e.nixlHost, port)
	if nixlProduces(c.role) {
		add(AddressPlan{Address: report.Address{Channel: "nixl-side-channel", Role: report.AddressAdvertise,
			Endpoint: ep, Key: p.Identity.EngineID, Source: src + " advertised as remote_host:remote_port"}, Stage: StageServing})
	}
	if cp.opts.Profile.NIXLSideChannel == NIXLSideChannelScheduler {
		add(AddressPlan{Address: report.Address{Channel: "nixl-side-channel", Role: report.AddressBind,
			Endpoint: ep, Key: p.Identity.EngineID, Exercised: true,
			Source: "vllm/distributed/kv_transfer/kv_connector/v1/nixl/base_scheduler.py _nixl_handshake_listener (ROUTER)"},
			Stage: StageConnectorInit, Flavor: BindFlavorZMQ})
	}
}

// nixlWorkerAddresses: before PR #26338 every worker listens on its own host; consumers dial each
// producer the proxy names (the model: every producer engine of the deployment).
func (cp *cmdPlanner) nixlWorkerAddresses(p *ProcessPlan, pc *ParallelConfig, e addrEnv, c connector, add func(AddressPlan)) {
	tp := 0
	if p.Identity.TPRank != nil {
		tp = *p.Identity.TPRank
	}
	worker := cp.opts.Profile.NIXLSideChannel == NIXLSideChannelWorker
	if worker {
		add(AddressPlan{Address: report.Address{Channel: "nixl-side-channel", Role: report.AddressBind,
			Endpoint: "tcp://" + hostPort(e.nixlHost, e.nixlPort+pc.DataParallelRank*pc.TensorParallelSize+tp), Key: KeyEngineID, Exercised: true,
			Source: "nixl_connector.py NixlConnectorWorker._nixl_handshake_listener before PR #26338 (VLLM_NIXL_SIDE_CHANNEL_HOST: base + tp_rank)"},
			Stage: StageConnectorInit, Flavor: BindFlavorZMQ})
	}
	if c.role != "kv_consumer" {
		// The proxy routes each request of a kv_both instance one way or the other, which a
		// scenario does not say; a kv_consumer pulls from the producers, so the model has each of
		// its workers dial every producer engine once.
		return
	}
	for _, prod := range cp.opts.NIXLProducers {
		if prod.EngineID == p.Identity.EngineID || prod.TPSize <= 0 {
			continue // an engine does not pull from itself
		}
		targets := nixlTargetRanks(pc.TensorParallelSize, prod.TPSize, tp)
		if worker {
			// get_target_remote_rank: one handshake, at base + that rank.
			targets = targets[:1]
		}
		remotePP := []int{0}
		if !worker {
			remotePP = remotePP[:0]
			for i := 0; i < max(prod.PPSize, 1); i++ {
				remotePP = append(remotePP, i)
			}
		}
		for _, rpp := range remotePP {
			for _, rtp := range targets {
				ep, peer := prod.Endpoint, prod.EngineCore
				src := "vllm/distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py _nixl_handshake (REQ to remote_host:remote_port, GET_META_MSG for (pp, tp))"
				if worker {
					host, port, _ := splitEndpoint(prod.Endpoint)
					ep = "tcp://" + hostPort(host, port+rtp)
					peer = prod.worker(rpp, rtp)
					src = "nixl_connector.py NixlConnectorWorker._nixl_handshake before PR #26338 (REQ to remote_host:remote_port + p_remote_rank)"
				}
				add(AddressPlan{Address: report.Address{Channel: "nixl-side-channel", Role: report.AddressConnect,
					Endpoint: ep, Key: prod.EngineID, Exercised: true, Source: src + fmt.Sprintf("; remote pp %d tp %d", rpp, rtp)},
					Stage: StageServing, Peer: peer})
			}
		}
	}
}

// nixlTargetRanks is TransferTopology.handshake_target_ranks: the remote TP ranks a local TP rank
// reads from — one when the remote TP is not larger, the block of remote ranks it spans when it is.
func nixlTargetRanks(localTP, remoteTP, tp int) []int {
	if localTP <= 0 || remoteTP <= 0 {
		return []int{tp}
	}
	if localTP >= remoteTP {
		return []int{tp / (localTP / remoteTP)}
	}
	k := remoteTP / localTP
	out := make([]int, 0, k)
	for i := 0; i < k; i++ {
		out = append(out, tp*k+i)
	}
	return out
}

func (n NIXLProducer) worker(pp, tp int) string {
	i := pp*n.TPSize + tp
	if i < 0 || i >= len(n.Workers) {
		return ""
	}
	return n.Workers[i]
}

func splitEndpoint(ep string) (string, int, bool) {
	s := ep
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+3:]
	}
	h, ps, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, false
	}
	n, err := strconv.Atoi(ps)
	return h, n, err == nil
}

// NIXLProducersOf collects the NIXL producer engines of a deployment's plans: each engine core
// that advertises a NIXL side channel, and its workers (on every node) by rank.
func NIXLProducersOf(plans []*NodePlan) []NIXLProducer {
	type eng struct {
		prod    NIXLProducer
		replica string
	}
	var engines []*eng
	workers := map[string][]report.Process{}
	walkDeployment(plans, func(p *ProcessPlan) {
		if p.Identity.Role == report.RoleWorker && p.Identity.Replica != "" {
			workers[p.Identity.Replica] = append(workers[p.Identity.Replica], p.Identity)
		}
		for _, a := range p.Addresses {
			if a.Channel == "nixl-side-channel" && a.Role == report.AddressAdvertise {
				engines = append(engines, &eng{prod: NIXLProducer{EngineID: a.Key, Endpoint: a.Endpoint, EngineCore: p.Identity.ID},
					replica: p.Identity.Replica})
			}
		}
	})
	out := make([]NIXLProducer, 0, len(engines))
	for _, e := range engines {
		ws := workers[e.replica]
		tp, pp := 1, 1
		for _, w := range ws {
			if w.TPRank != nil {
				tp = max(tp, *w.TPRank+1)
			}
			if w.PPRank != nil {
				pp = max(pp, *w.PPRank+1)
			}
		}
		e.prod.TPSize, e.prod.PPSize = tp, pp
		e.prod.Workers = make([]string, tp*pp)
		for _, w := range ws {
			if w.TPRank != nil && w.PPRank != nil {
				e.prod.Workers[*w.PPRank*tp+*w.TPRank] = w.ID
			}
		}
		out = append(out, e.prod)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].EngineCore < out[j].EngineCore })
	return out
}

// DialsPeers reports whether a node's commands build a connector whose clients dial other
// instances' advertised addresses (a NIXL kv_consumer): only such a node needs the whole
// deployment planned (PlanDeployment); any other node's plan is PlanNode's alone.
func DialsPeers(n Node) bool {
	for _, line := range n.Commands {
		args, err := ParseServe(line)
		if err != nil {
			continue
		}
		cp := &cmdPlanner{args: args}
		for _, c := range cp.connectors() {
			if isNIXL(c.name) && c.role == "kv_consumer" {
				return true
			}
		}
	}
	return false
}

// PlanDeployment plans every node of a deployment. Consumers of NIXL handshakes need to know the
// producers (the proxy tells vLLM's decoders per request), so when the first pass finds both, the
// nodes are planned again with the producers known.
func PlanDeployment(nodes []Node, o Options) ([]*NodePlan, error) {
	plan := func(o Options) ([]*NodePlan, error) {
		out := make([]*NodePlan, 0, len(nodes))
		for _, n := range nodes {
			np, err := PlanNode(n, o)
			if err != nil {
				return nil, err
			}
			out = append(out, np)
		}
		return out, nil
	}
	plans, err := plan(o)
	if err == nil && len(o.NIXLProducers) == 0 {
		if producers := NIXLProducersOf(plans); len(producers) > 0 {
			o.NIXLProducers = producers
			plans, err = plan(o)
		}
	}
	if err != nil {
		return plans, err
	}
	linkHandshakes(plans)
	return plans, nil
}
