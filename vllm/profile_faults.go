package vllm

// The behaviour changes that only a fault shows: a port taken between its probe and its bind, and
// a Mooncake store that lost its state. They join the catalog after the address changes.

const (
	// ZMQPortAllocProbe: get_engine_zmq_addresses (vllm/v1/engine/utils.py) gives each TCP
	// engine-io socket of the front end tcp://<host>:<get_open_port()>: a port probed free and
	// released, bound later by the API server — another bind in between wins it, and the front
	// end dies of ZMQError: Address already in use (vLLM issue #40443; before PR #42585).
	ZMQPortAllocProbe = "probe"
	// ZMQPortAllocBind: the sockets bind tcp://<host>:0 and read the kernel's port back with
	// zmq.LAST_ENDPOINT, so there is no window (PR #42585).
	ZMQPortAllocBind = "bind"

	// MooncakeRemountNone: the client never pings the master in non-HA mode, so after a master
	// restart its segment stays unknown (before Mooncake PR #845).
	MooncakeRemountNone = "none"
	// MooncakeRemountMount: the heartbeat answers NEED_REMOUNT with ReMountSegment only; the
	// transfer engine's rpc_meta and ram keys, lost with the master's embedded metadata server,
	// are not written again, so peers get "metadata not found" (Mooncake PR #845, issue #2246).
	MooncakeRemountMount = "mount"
	// MooncakeRemountRepublish: after ReMountSegment the client re-publishes both keys
	// (Mooncake PR #2077: updateLocalSegmentDesc, rePublishRpcMetaEntry).
	MooncakeRemountRepublish = "republish"
)

var faultChanges = []Change{
	{
		Name:   "zmq_port_alloc",
		Values: []string{ZMQPortAllocProbe, ZMQPortAllocBind},
		Doc: "the port of each TCP engine-io socket of the front end (vllm/v1/engine/utils.py " +
			"get_engine_zmq_addresses, vllm/v1/engine/core_client.py; vLLM issue #40443, PR #42585): probe = " +
			"get_open_port() probes a free port and releases it, and the API server binds it later, so a bind " +
			"in between makes it die of ZMQError: Address already in use; bind = bind tcp://host:0 and read " +
			"the port back (zmq.LAST_ENDPOINT): nothing to take",
		get: func(p *Profile) *string { return &p.ZMQPortAlloc },
	},
	{
		Name:   "mooncake_remount",
		Values: []string{MooncakeRemountNone, MooncakeRemountMount, MooncakeRemountRepublish},
		Doc: "what a Mooncake store client does when its master lost its state (mooncake-store/src/" +
			"client_service.cpp heartbeat; Mooncake PRs #845, #2077, issue #2246): none = no heartbeat in " +
			"non-HA mode, the segment stays lost; mount = on NEED_REMOUNT remount the segment only, the " +
			"rpc_meta/ram keys the master's metadata server lost stay gone; republish = remount and write " +
			"both keys again",
		get: func(p *Profile) *string { return &p.MooncakeRemount },
	},
}

func init() { changes = append(changes, faultChanges...) }
