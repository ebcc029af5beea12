package vllm

import (
	"strconv"
	"strings"

	"github.com/widetp/widetp/report"
)

// The address part of the plan contract (plan.go): every address a process binds, opens, dials,
// probes or advertises, derived from vLLM's code (addresses.go), executed for real by simnode and
// on paper by Predict.

// StageServing: after start-up, once the process serves — when vLLM's KV connectors dial their
// peers (a request names the peer). Clients dial only once the peer they must reach is up.
const StageServing Stage = "serving"

// AddressPlan is one address step of a process.
type AddressPlan struct {
	// Address is the record entry as the model derives it; the step fills in its outcome. A Key
	// of KeyEngineID stands for the process's KV engine_id at the time of the step (a worker
	// adopts its TP rank 0's at init, vLLM PRs #39907/#44528).
	report.Address
	// Stage is when the step happens: binds, opens and probes at StageConfig, StageEngineInit or
	// StageConnectorInit (before what can raise at that stage), connects at StageServing. Steps
	// of one stage run in list order. Only Exercised steps run; the others are listed.
	Stage Stage `json:"stage"`
	// Alloc is the allocator a probe runs.
	Alloc *PortAlloc `json:"alloc,omitempty"`
	// Flavor says how a failed bind is raised: BindFlavorZMQ (pyzmq's ZMQError), BindFlavorSocket
	// (Python's OSError from socket.bind), BindFlavorGRPC (gRPC's RuntimeError).
	Flavor string `json:"flavor,omitempty"`
	// Raises, when set, is the exception the process raises right after the step succeeds (the
	// connector's first use of what it opened fails).
	Raises string `json:"raises,omitempty"`
	// Peer (connects) is the ID of the process whose identity (Key) the client must reach there;
	// a live client dials once that process is up, or gone.
	Peer string `json:"peer,omitempty"`
	// ListenAt (a Python socket bind) is the stage at which the bound socket starts listening:
	// vLLM's front end binds its HTTP socket with SO_REUSEADDR in setup_server and uvicorn listens
	// on it only once the engines are up (StageServing). Until then a second bind of the port
	// succeeds (Linux refuses a bind only next to a listener); the later listen is refused.
	ListenAt Stage `json:"listen_at,omitempty"`
	// ReusePort: the socket sets SO_REUSEPORT too (run_multi_api_server's, with --api-server-count
	// > 1); two such listeners of one port both listen, and the kernel splits the connections.
	ReusePort bool `json:"reuse_port,omitempty"`
}

// KeyEngineID in an AddressPlan's Key stands for the process's KV engine_id when the step runs.
const KeyEngineID = "{engine_id}"

// KeyProbedPort ends a bind's Endpoint "tcp://host:0{probed}" whose port is the one the
// process's last probe of the same channel and key returned (a probe-then-bind: the port is
// known, and free, only until the bind).
const KeyProbedPort = "{probed}"

// ResolveProbed returns endpoint with its KeyProbedPort suffix replaced by the port that the
// probe of channel and key in addrs returned; ok is false when no such probe has a port yet.
// Endpoints without the suffix come back unchanged.
func ResolveProbed(endpoint, channel, key string, addrs []report.Address) (string, bool) {
	base, found := strings.CutSuffix(endpoint, KeyProbedPort)
	if !found {
		return endpoint, true
	}
	port := 0
	for _, a := range addrs {
		if a.Role == report.AddressProbe && a.Channel == channel && a.Key == key && len(a.Ports) > 0 {
			port = a.Ports[0]
		}
	}
	if port == 0 {
		return base, false
	}
	return strings.TrimSuffix(base, ":0") + ":" + strconv.Itoa(port), true
}

// Bind flavors (AddressPlan.Flavor).
const (
	BindFlavorZMQ    = "zmq"
	BindFlavorSocket = "socket"
	// BindFlavorGRPC: grpc.aio's add_insecure_port, whose failure is a RuntimeError naming the
	// address (grpc/_common.py validate_port_binding_result).
	BindFlavorGRPC = "grpc"
)

// BindErrorText is the exception a failed bind raises: pyzmq's ZMQError with the endpoint it tried
// (ZMQBindError), Python's OSError with the errno socket.bind raised, or gRPC's RuntimeError.
func BindErrorText(flavor, endpoint string, errno int, strerror string) string {
	switch flavor {
	case BindFlavorSocket:
		return "OSError: [Errno " + strconv.Itoa(errno) + "] " + strerror
	case BindFlavorGRPC:
		return "RuntimeError: Failed to bind to address " + strings.TrimPrefix(endpoint, "tcp://") +
			"; set GRPC_VERBOSITY=debug environment variable to see detailed error message."
	}
	return "zmq.error.ZMQError: " + strerror + " (addr='" + endpoint + "')"
}

// AddrInUseErrno is Linux's EADDRINUSE.
const AddrInUseErrno = 98
