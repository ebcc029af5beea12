package vllm

// The behaviour changes of the addresses a deployment derives (addresses.go, ports.go). They join
// the catalog after the identity changes of profile.go, so --help and the README list them last.

// Values of the address changes; the first of each is the older behaviour.
const (
	// VLLMPortListRepeat: get_open_ports_list calls get_open_port until it has count distinct
	// ports; with VLLM_PORT set every call scans from the same port and returns it again, so a
	// data-parallel launch never gets past its ParallelConfig (before PR #36191).
	VLLMPortListRepeat = "repeat"
	// VLLMPortListAdvance: with VLLM_PORT set the scan restarts one past each port it found
	// (PR #36191).
	VLLMPortListAdvance = "advance"

	// OpenPortReservedRetry: get_open_port asks _get_open_port again until the answer is outside
	// [VLLM_DP_MASTER_PORT, +10), with nothing changed in between — with VLLM_PORT inside that range
	// the answer never changes and the call never returns (issue #50024); get_open_ports_list does
	// not skip the range at all.
	OpenPortReservedRetry = "retry"
	// OpenPortReservedRescan: a reserved answer is followed by one scan from the end of the range,
	// in get_open_port and get_open_ports_list alike (PR #50965).
	OpenPortReservedRescan = "rescan"

	// ExecutorRendezvousTCP: a single-node MultiprocExecutor's workers meet at
	// tcp://<loopback>:<get_open_port()>, a port the engine core probes before it starts them
	// (before PR #50999).
	ExecutorRendezvousTCP = "tcp"
	// ExecutorRendezvousFile: they meet at file://<tempdir>/vllm_dist_<uuid>, no port at all
	// (PR #50999; ROCm with AITER custom all-reduce keeps the TCP store). The uni executor's
	// distributed_init_method follows the same rule (uniproc_executor.py _distributed_args):
	// get_ip():get_open_port() under tcp, a file store under file.
	ExecutorRendezvousFile = "file"

	// OffloadP2PPortFixed: the KV-offload P2P tier's control socket binds host 0.0.0.0, port 7777
	// (or the tier's host/port) in every DP engine (before PR #47636).
	OffloadP2PPortFixed = "fixed"
	// OffloadP2PPortDPIndex: it binds VLLM_P2P_SIDE_CHANNEL_HOST (localhost) and
	// VLLM_P2P_SIDE_CHANNEL_PORT (5710) plus the engine's data_parallel_index (PR #47636).
	OffloadP2PPortDPIndex = "dp_index"

	// OffloadRegionKeyInstance: the tiering offload region is /dev/shm/vllm_offload_{instance_id},
	// which every engine core of one front end shares, and a worker's slot is its physical device
	// index (before PR #47987).
	OffloadRegionKeyInstance = "instance"
	// OffloadRegionKeyEngine: the region is named after the engine's KV engine_id (one per DP
	// replica) and the slot is the device index modulo the world size (PR #47987).
	OffloadRegionKeyEngine = "engine"

	// NIXLSideChannelWorker: every worker listens for NIXL handshakes on its own host at
	// VLLM_NIXL_SIDE_CHANNEL_PORT + data_parallel_rank*TP + tp_rank, the scheduler advertises its
	// own host and base port, and a remote worker dials that host at base + the TP rank it reads
	// from (before PR #26338).
	NIXLSideChannelWorker = "worker"
	// NIXLSideChannelScheduler: the engine core's scheduler listens once, at
	// VLLM_NIXL_SIDE_CHANNEL_PORT + data_parallel_index, with every rank's metadata (PR #26338).
	NIXLSideChannelScheduler = "scheduler"

	// KVEventsPortZeroOffset: ZmqEventPublisher.offset_endpoint_port raises a tcp endpoint's port
	// by the engine's DP index whatever it is, so tcp://*:0 becomes tcp://*:1, :2, ... past DP
	// index 0 (before PR #55844).
	KVEventsPortZeroOffset = "offset"
	// KVEventsPortZeroKernel: port 0 stays 0 on every index, and a wildcard tcp://*:0 binds the
	// node's own address (get_ip()) at a port the kernel picks and reads back (PR #55844).
	KVEventsPortZeroKernel = "kernel"
)

var addressChanges = []Change{
	{
		Name:   "vllm_port_list",
		Values: []string{VLLMPortListRepeat, VLLMPortListAdvance},
		Doc: "get_open_ports_list with VLLM_PORT set (vllm/utils/network_utils.py; vLLM PR #36191): repeat = " +
			"collect get_open_port() results until there are count distinct ones, but every call scans from " +
			"VLLM_PORT and returns the same port, so ParallelConfig of a data-parallel launch spins for ever; " +
			"advance = restart the scan one past each port found",
		get: func(p *Profile) *string { return &p.VLLMPortList },
	},
	{
		Name:   "open_port_reserved",
		Values: []string{OpenPortReservedRetry, OpenPortReservedRescan},
		Doc: "get_open_port with VLLM_DP_MASTER_PORT set (vllm/utils/network_utils.py; issue #50024, PR #50965): " +
			"retry = ask again while the answer is inside [VLLM_DP_MASTER_PORT, +10), which with VLLM_PORT " +
			"inside that range never changes (the call never returns), and get_open_ports_list skips no " +
			"reserved port; rescan = scan once more from the end of the range, in both",
		get: func(p *Profile) *string { return &p.OpenPortReserved },
	},
	{
		Name:   "executor_rendezvous",
		Values: []string{ExecutorRendezvousTCP, ExecutorRendezvousFile},
		Doc: "how the workers of a single-node MultiprocExecutor meet (vllm/v1/executor/multiproc_executor.py; " +
			"vLLM PR #50999): tcp = tcp://<loopback>:<get_open_port()>, probed by the engine core before it " +
			"starts them (the uni executor: get_ip():get_open_port()); file = file://<tempdir>/vllm_dist_<uuid>, " +
			"no port, for the uni executor too (vllm/v1/executor/uniproc_executor.py _distributed_args)",
		get: func(p *Profile) *string { return &p.ExecutorRendezvous },
	},
	{
		Name:   "offload_p2p_port",
		Values: []string{OffloadP2PPortFixed, OffloadP2PPortDPIndex},
		Doc: "the KV-offload P2P tier's ZMQ control socket (vllm/v1/kv_offload/tiering/p2p/manager.py; vLLM " +
			"PR #47636): fixed = tcp://0.0.0.0:7777 (or the tier's host and port) in every DP engine, so the " +
			"engines of one host collide; dp_index = VLLM_P2P_SIDE_CHANNEL_HOST:VLLM_P2P_SIDE_CHANNEL_PORT " +
			"(localhost:5710) plus the engine's data_parallel_index",
		get: func(p *Profile) *string { return &p.OffloadP2PPort },
	},
	{
		Name:   "offload_region_key",
		Values: []string{OffloadRegionKeyInstance, OffloadRegionKeyEngine},
		Doc: "the tiering offload spec's shared-memory region (vllm/v1/kv_offload/tiering/spec.py, " +
			"cpu/shared_offload_region.py; vLLM PR #47987): instance = /dev/shm/vllm_offload_{instance_id}, " +
			"shared by every DP engine of one front end, with each worker's slot its physical device index " +
			"(out of the region's range on DP rank > 0); engine = named after the replica's KV engine_id, " +
			"slot = device index % world_size",
		get: func(p *Profile) *string { return &p.OffloadRegionKey },
	},
	{
		Name:   "nixl_side_channel",
		Values: []string{NIXLSideChannelWorker, NIXLSideChannelScheduler},
		Doc: "who listens for NIXL handshakes (vllm/distributed/kv_transfer/kv_connector/v1/nixl; vLLM PR " +
			"#26338): worker = every worker on its own host at VLLM_NIXL_SIDE_CHANNEL_PORT + " +
			"data_parallel_rank*TP + tp_rank, while the scheduler advertises its own host, so a remote " +
			"worker dials the head for ranks that listen on other nodes; scheduler = the engine core " +
			"listens once at VLLM_NIXL_SIDE_CHANNEL_PORT + data_parallel_index with every rank's metadata",
		get: func(p *Profile) *string { return &p.NIXLSideChannel },
	},
	{
		Name:   "kv_events_port_zero",
		Values: []string{KVEventsPortZeroOffset, KVEventsPortZeroKernel},
		Doc: "a KV event publisher endpoint with port 0 (vllm/distributed/kv_events.py ZmqEventPublisher; vLLM " +
			"PR #55844): offset = the port is raised by the engine's DP index like any other, so tcp://*:0 " +
			"binds port 0 on index 0 and ports 1, 2, ... past it; kernel = port 0 stays 0 on every index, and " +
			"tcp://*:0 binds the node's address (get_ip()) at a port the kernel picks",
		get: func(p *Profile) *string { return &p.KVEventsPortZero },
	},
}

func init() { changes = append(changes, addressChanges...) }
