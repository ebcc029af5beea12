package vllm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"strconv"

	"github.com/widetp/widetp/report"
)

// Rendezvous kinds (report.Rendezvous.Kind).
const (
	// RendezvousWorkers is the torch process group of a replica's workers (its world group).
	RendezvousWorkers = "workers"
	// RendezvousDP is a data-parallel barrier: an engine core handshake with its front end, or the
	// DP process group of MoE engine cores.
	RendezvousDP = "dp"
)

// Port offsets and bases of the model's rendezvous addresses. vLLM meets at some of these
// through ports it draws at random on the head and ships in the engine handshake, or through
// private ipc paths; the model needs an address every member can compute alone, so it derives
// one and documents it here.
const (
	// dpGroupPortOffset: the MoE DP group (ParallelConfig.stateless_init_dp_group) meets at
	// data_parallel_master_ip : data_parallel_rpc_port + 1. vLLM uses a port from
	// _data_parallel_master_port_list, drawn on the head and shipped in the handshake.
	dpGroupPortOffset = 1
	// dpWorldPortOffset: workers of a single-node replica whose torch world spans DP ranks
	// (MoE, data_parallel_size > 1, nnodes == 1) meet at data_parallel_master_ip :
	// data_parallel_rpc_port + 2 (vLLM: get_next_dp_init_port(), from the same shipped list).
	dpWorldPortOffset = 2
	// LocalPortBase, localPortStride: rendezvous that vLLM keeps on one host (the engine
	// handshake over a private ipc path when all engines are local; a single-node replica's
	// torch world on a free loopback port) use <host>:LocalPortBase + localPortStride*command +
	// slot, slots numbered in planning order, so co-located commands never share one. 61000 is
	// above vLLM's defaults (29500-29551 DP and torch ports, 8000 API) and above Linux's default
	// ephemeral range (net.ipv4.ip_local_port_range 32768-60999): a simulated listener there is
	// never refused because an outgoing connection of the same host took its port, as one at
	// 40002 once was (the kernel hands connect() even ports from that range). The stride of 128
	// leaves room for 127 local rendezvous per command and 35 commands per host below 65535.
	LocalPortBase   = 61000
	localPortStride = 128
)

func hostPort(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }

// globalHandshakeError is what make_zmq_socket raises for the handshake at
// tcp://data_parallel_master_ip:data_parallel_rpc_port, bound by rank 0's front end or dialled by
// an engine core: split_zmq_path (vllm/utils/network_utils.py) wants a host for tcp, and an empty
// --data-parallel-address gives none.
func globalHandshakeError(pc *ParallelConfig) error {
	if pc.DataParallelMasterIP != "" {
		return nil
	}
	return &PyError{Type: "ValueError", Msg: "Invalid zmq path: tcp://" + hostPort(pc.DataParallelMasterIP, pc.DataParallelRPCPort)}
}

// barrierKey names the barrier a process on host meets at address: report.BarrierKey, since
// every host has its own loopback (vLLM's defaults put single-node rendezvous on 127.0.0.1, and
// simnode resolves a loopback address to the host it runs on).
func barrierKey(host, address string) string { return report.BarrierKey(host, address) }

// engineHandshake is where a front end and the engine cores it launches meet
// (vllm/v1/engine/utils.py launch_core_engines and CoreEngineProcManager).
type engineHandshake struct {
	// global is the handshake at data_parallel_master_ip:data_parallel_rpc_port (rank 0's front
	// end waits there for every engine when any engine is remote); nil when the handshake is local.
	global *RendezvousPlan
	// local is the front end's own handshake on its host (all engines local, or a dp_rank > 0
	// front end in hybrid/external LB, whose engines also join the global one).
	local *RendezvousPlan
	// engineRank maps an engine's DP index to its rank in each handshake.
	globalRank func(index int) int
	localRank  func(index int) int
	// headless: the engines are run_headless's (CoreEngineProcManager(local_client=False)).
	headless bool
}

// frontEndHandshake is launch_core_engines' choice of handshake for a front end whose config is
// pc; localAddr is the host-local address the planner reserved for it.
//
//	offline_mode = data_parallel_rank_local is not None           -> engines [dp_rank] (L must be 1)
//	dp_rank == 0                                                  -> engines 0..D-1
//	else (must be local_engines_only)                             -> engines dp_rank..dp_rank+L-1
//	handshake_local_only = (offline_mode or L == D) and not enable_elastic_ep
//	local_engines_only and dp_rank > 0: the front end binds a private ipc path for its local
//	engines, which also handshake at rank 0's tcp://dp_master_ip:rpc_port.
//
// The handshake it serves carries wait_for_engine_startup's expectation (HandshakeExpect): on rank
// 0, engine i is local when i < L, and remote engines must be --headless exactly when rank 0 runs
// internal LB; a remote engine of the other kind is refused with a RuntimeError. That is how
// vLLM#47692 broke launches that pass --data-parallel-start-rank 0 to a head with --headless
// followers: the head now infers hybrid (or external) LB.
func frontEndHandshake(pc *ParallelConfig, localAddr string) (engineHandshake, error) {
	D, L, dpRank := pc.DataParallelSize, pc.DataParallelSizeLocal, pc.DataParallelRank
	offline := pc.DataParallelRankLocal != nil
	global := hostPort(pc.DataParallelMasterIP, pc.DataParallelRPCPort)
	remoteHeadless := !pc.HybridLB && !pc.ExternalLB
	// wait_for_engine_startup(..., coordinated_dp=dp_size > 1 and model_config.is_moe, ...)
	hash := ""
	if D > 1 && pc.IsMoEModel {
		hash = configHash(pc)
	}
	// engines_to_handshake's assertions, then the one on where a rank > 0 serves its engines.
	switch {
	case offline && L != 1:
		// offline_mode: assert local_engine_count == 1
		return engineHandshake{}, bareAssertion
	case !offline && dpRank != 0 && !pc.LocalEnginesOnly():
		return engineHandshake{}, assertionError("Attempting to launch core_engines from dp_rank > 0, but found internal DPLB, which is incompatible.")
	}
	// A rank > 0 that manages only its own engines gives them a private handshake path and must
	// not be handshake-local-only (assert not handshake_local_only): an env-driven (offline SPMD,
	// VLLM_DP_RANK_LOCAL) front end of rank > 0 with --data-parallel-external-lb, say, fails here.
	handshakeLocalOnly := (offline || L == D) && !pc.EnableElasticEP
	if pc.LocalEnginesOnly() && dpRank > 0 && handshakeLocalOnly {
		return engineHandshake{}, bareAssertion
	}
	switch {
	case offline:
		return engineHandshake{
			local: &RendezvousPlan{Kind: RendezvousDP, Address: localAddr, WorldSize: 2, Rank: 0,
				Expect: &HandshakeExpect{First: dpRank, Count: 1, LocalCount: 1, RemoteHeadless: remoteHeadless, ConfigHash: hash}},
			localRank: func(int) int { return 1 },
		}, nil
	case dpRank == 0:
		h := engineHandshake{globalRank: func(i int) int { return 1 + i }}
		expect := &HandshakeExpect{First: 0, Count: D, LocalCount: L, RemoteHeadless: remoteHeadless, ConfigHash: hash}
		if L == D && !pc.EnableElasticEP {
			h.local = &RendezvousPlan{Kind: RendezvousDP, Address: localAddr, WorldSize: D + 1, Rank: 0, Expect: expect}
			h.localRank, h.globalRank = h.globalRank, nil
			return h, nil
		}
		h.global = &RendezvousPlan{Kind: RendezvousDP, Address: global, WorldSize: D + 1, Rank: 0, Expect: expect}
		return h, nil
	default:
		h := engineHandshake{
			local:      &RendezvousPlan{Kind: RendezvousDP, Address: localAddr, WorldSize: L + 1, Rank: 0},
			localRank:  func(i int) int { return 1 + i - dpRank },
			globalRank: func(i int) int { return 1 + i },
		}
		// With no local engine (--data-parallel-size-local 0) wait_for_engine_startup waits for
		// none, and nothing else reaches the front end's private ipc path: no expectation.
		if L > 0 {
			h.local.Expect = &HandshakeExpect{First: dpRank, Count: L, LocalCount: L, RemoteHeadless: remoteHeadless, ConfigHash: hash}
		}
		return h, nil
	}
}

// engineHandshakes is the handshakes an engine core with DP index `index` joins, in order, each
// with the HELLO it sends there (EngineCoreProc._perform_handshakes: with rank 0's front end
// first, then its own when it has one).
func (h engineHandshake) engineHandshakes(pc *ParallelConfig, index int) []RendezvousPlan {
	var out []RendezvousPlan
	// _perform_handshake's READY carries parallel_config_hash when data_parallel_size > 1, which a
	// dense model's engine no longer has (run_engine_core: reconfigure_for_independent_dp_rank).
	hash := ""
	if pc.DataParallelSize > 1 && pc.IsMoEModel {
		hash = configHash(pc)
	}
	if h.globalRank != nil {
		out = append(out, RendezvousPlan{Kind: RendezvousDP,
			Address:   hostPort(pc.DataParallelMasterIP, pc.DataParallelRPCPort),
			WorldSize: pc.DataParallelSize + 1, Rank: h.globalRank(index),
			// local = local_client and client_handshake_address is None: an engine that also
			// handshakes with its own front end is remote to rank 0.
			Hello: &EngineHello{Index: index, Local: !h.headless && h.local == nil, Headless: h.headless, ConfigHash: hash}})
	}
	if h.local != nil {
		out = append(out, RendezvousPlan{Kind: RendezvousDP, Address: h.local.Address,
			WorldSize: h.local.WorldSize, Rank: h.localRank(index),
			Hello: &EngineHello{Index: index, Local: true, ConfigHash: hash}})
	}
	return out
}

// headlessHandshake is run_headless's: its engines handshake with the head's front end at
// tcp://data_parallel_master_ip:data_parallel_rpc_port, where rank 0's front end waits for all D,
// as remote and headless engines.
func headlessHandshake(pc *ParallelConfig) engineHandshake {
	return engineHandshake{globalRank: func(i int) int { return 1 + i }, headless: true}
}

// dpGroup is the stateless DP process group a DPEngineCoreProc (MoE, DP > 1) joins in
// _init_data_parallel: all D engine cores of the deployment, rank = data_parallel_rank.
func dpGroup(pc *ParallelConfig) RendezvousPlan {
	addr := hostPort(pc.DataParallelMasterIP, pc.DataParallelRPCPort+dpGroupPortOffset)
	if pc.offline {
		// Offline SPMD: VLLM_DP_MASTER_IP:VLLM_DP_MASTER_PORT, the first port get_next_dp_init_port
		// hands out.
		addr = hostPort(pc.DataParallelMasterIP, pc.DataParallelMasterPort)
	}
	return RendezvousPlan{Kind: RendezvousDP, Address: addr, WorldSize: pc.DataParallelSize, Rank: pc.DataParallelRank}
}

// spansDP: init_distributed_environment widens a worker's torch world to every DP replica (and
// meets at the master or DP address) when nnodes > 1 or data_parallel_size > 1, except under
// elastic EP, whose replicas each keep the world the executor gave them.
func spansDP(pc *ParallelConfig) bool {
	return (pc.NNodes > 1 || pc.DataParallelSize > 1) && !pc.EnableElasticEP
}

// workersWorld is the torch world a worker joins (vllm/distributed/parallel_state.py
// init_distributed_environment), given the worker's config pc and its replica rank:
//
//	if (nnodes > 1 or data_parallel_size > 1) and not enable_elastic_ep:
//	    rank = data_parallel_rank * world_size + rank; world_size = world_size_across_dp
//	    nnodes > 1: tcp://master_addr:master_port
//	    else:       tcp://data_parallel_master_ip:<next DP init port>
//	else: MultiprocExecutor's distributed_init_method (loopback, a free port): localAddr
func workersWorld(pc *ParallelConfig, rank int, localAddr string) RendezvousPlan {
	if spansDP(pc) {
		addr := hostPort(pc.MasterAddr, pc.MasterPort)
		if pc.NNodes == 1 {
			addr = hostPort(pc.DataParallelMasterIP, pc.DataParallelRPCPort+dpWorldPortOffset)
			if pc.offline {
				// The engine core took VLLM_DP_MASTER_PORT for its DP group before the
				// executor pickled the config, so the workers get the next port.
				addr = hostPort(pc.DataParallelMasterIP, pc.DataParallelMasterPort+1)
			}
		}
		return RendezvousPlan{Kind: RendezvousWorkers, Address: addr,
			WorldSize: pc.WorldSizeAcrossDP(), Rank: pc.DataParallelRank*pc.WorldSize + rank}
	}
	return RendezvousPlan{Kind: RendezvousWorkers, Address: localAddr, WorldSize: pc.WorldSize, Rank: rank}
}

// replicaName names the replica a worker world slot belongs to: the world's address (its
// BarrierKey, so that loopback worlds of different hosts stay apart) and the DP slot (the world
// spans all DP replicas of a MoE deployment, one slot per replica).
func replicaName(host string, world RendezvousPlan, pc *ParallelConfig) string {
	slot := 0
	if world.WorldSize > pc.WorldSize && pc.WorldSize > 0 {
		slot = world.Rank / pc.WorldSize
	}
	return fmt.Sprintf("%s/dp%d", barrierKey(host, world.Address), slot)
}

// AddressInUse is libzmq's strerror for EADDRINUSE, as pyzmq prints it.
const AddressInUse = "Address already in use"

// ZMQBindError is the exception a front end raises when its handshake ROUTER socket cannot bind
// address (host:port): pyzmq's Socket.bind appends the address it tried to the ZMQError's
// strerror, and vLLM binds get_engine_client_zmq_addr's tcp://host:port. Host-local handshakes
// are ipc paths in vLLM, which never fail this way (libzmq takes an ipc path over), and the
// model gives each of them its own port (LocalPortBase), so only tcp handshakes reach this.
func ZMQBindError(address, strerror string) string {
	return fmt.Sprintf("zmq.error.ZMQError: %s (addr='tcp://%s')", strerror, address)
}

// configHash is the model's ParallelConfig.compute_hash() (vllm/config/parallel.py): a digest of
// the factors it keeps that vLLM hashes — everything but the ranks, local sizes, LB mode, addresses
// and ports, node layout and executor, which compute_hash ignores. Two engines of one deployment
// launched with the same parallel flags hash alike; one with another TP, PP, DP size, expert
// parallelism or EPLB setting does not. Its value is not vLLM's (only equality matters).
func configHash(pc *ParallelConfig) string {
	f := pc.features
	factors := fmt.Sprintf("tp=%d pp=%d pcp=%d dcp=%d dp=%d moe=%t ep=%t eplb=%t redundant=%d elastic=%t fault_tolerance=%t dcp_comm=%s",
		pc.TensorParallelSize, pc.PipelineParallelSize, pc.PrefillContextParallelSize, pc.DecodeContextParallelSize,
		pc.DataParallelSize, pc.IsMoEModel, pc.EnableExpertParallel, f.enableEPLB, f.redundantExperts, pc.EnableElasticEP,
		f.enableFaultTol, f.dcpCommBackend)
	sum := sha256.Sum256([]byte(factors))
	return hex.EncodeToString(sum[:])
}
