package vllm

import (
	"fmt"

	"github.com/widetp/widetp/report"
)

// This file is the contract between the model and the node program (simnode): the model turns a
// node's `vllm serve` lines into a tree of ProcessPlans; simnode executes each plan for real (OS
// processes, TCP rendezvous, ZMQ lookup sockets, store registration) and reports what happened;
// Predict executes the same plans on paper. Both sides read the same plan, so a prediction and an
// observation can only differ where the real world differs from the paper one.

// Stage is the point in a process's start-up where something happens, in vLLM's order.
type Stage string

const (
	// StageConfig: argument parsing and config validation (create_engine_config, ParallelConfig
	// __post_init__, run_headless checks), before any child is started.
	StageConfig Stage = "config"
	// StageHandshakeBind: after StageConfig and before the process starts any child, it binds the
	// rendezvous it serves with BindsEarly (vllm/v1/engine/utils.py launch_core_engines enters
	// zmq_socket_ctx(local_handshake_address, zmq.ROUTER, bind=True) before CoreEngineProcManager
	// starts the engines). A bind that fails raises here, so the process's children never start.
	StageHandshakeBind Stage = "handshake-bind"
	// StageEngineInit: run_engine_core, before the executor starts the workers.
	StageEngineInit Stage = "engine-init"
	// StageConnectorInit: a worker's KV connector init, after its torch rendezvous
	// (init_worker_distributed_environment precedes ensure_kv_transfer_initialized in vLLM's worker).
	StageConnectorInit Stage = "connector-init"
)

// Crash is a Python exception the process raises at a stage.
type Crash struct {
	Stage Stage `json:"stage"`
	// Error is the Python-style text: "AssertionError", "ValueError: ...", "ZeroDivisionError: ...".
	Error string `json:"error"`
}

// RendezvousPlan is one barrier the process joins: a TCP rendezvous served by rank 0 at Address.
type RendezvousPlan struct {
	// Kind is "workers" (torch rendezvous of one replica's workers) or "dp" (the DP group of engine
	// cores, or the handshake with the front end's coordinator).
	Kind string `json:"kind"`
	// Address is host:port; the member with Rank 0 listens there, the others connect to it.
	Address   string `json:"address"`
	WorldSize int    `json:"world_size"`
	Rank      int    `json:"rank"`
	// BindsEarly (rank 0 only): the process binds Address at StageHandshakeBind, before it starts
	// its children, and serves this barrier from that socket when it reaches it. When another
	// live process of the host already holds the address the bind fails (EADDRINUSE): the process
	// exits with ZMQBindError's text, its children never start, and no rendezvous is recorded —
	// it is a crash of the binder, not a failed barrier. The processes of a host bind in plan
	// order (commands in order, then tree order), and each binder starts its children only once
	// every earlier and later binder of its host bound or died, so the later binder is the one
	// that fails, every run.
	BindsEarly bool `json:"binds_early,omitempty"`
	// Hello (an engine core's handshake with a front end) is what the engine says when it joins:
	// rank 0 may refuse it (Expect).
	Hello *EngineHello `json:"hello,omitempty"`
	// Expect (rank 0 of a front end's handshake) is what the front end accepts. When a member's
	// Hello is refused (HandshakeExpect.Refuse), rank 0 raises that RuntimeError at once and
	// exits; its own engines (Local) are shut down with it, and every other member that joined
	// gets no answer and exits with HandshakeNoAnswer.
	Expect *HandshakeExpect `json:"expect,omitempty"`
}

// EngineHello is the HELLO an engine core sends on a handshake socket (vllm/v1/engine/core.py
// EngineCoreProc.startup_handshake, from _perform_handshakes).
type EngineHello struct {
	// Index is the engine's DP rank, its ZMQ identity (EngineCoreProc.engine_index).
	Index int `json:"index"`
	// Local is `local_client and client_handshake_address is None`: false on rank 0's handshake
	// for the engines of a dp_rank > 0 front end (they say Local on their own front end's) and for
	// run_headless's engines.
	Local bool `json:"local"`
	// Headless is `not local_client`: the engines run_headless starts.
	Headless bool `json:"headless"`
	// ConfigHash is the engine's ParallelConfig.compute_hash(), which its READY carries when DP > 1
	// (vllm/v1/engine/core.py _perform_handshake). Only equality with the front end's matters: the
	// model's is its own digest of the same factors (configHash), the probe's is vLLM's.
	ConfigHash string `json:"config_hash,omitempty"`
}

// HandshakeExpect is what a front end accepts on the handshake it serves (vllm/v1/engine/utils.py
// launch_core_engines' engines_to_handshake, and wait_for_engine_startup).
type HandshakeExpect struct {
	// First and Count: the engines First..First+Count-1 (every DP rank on rank 0; a dp_rank > 0
	// front end's own engines otherwise); the first LocalCount of them are local.
	First      int `json:"first"`
	Count      int `json:"count"`
	LocalCount int `json:"local_count"`
	// RemoteHeadless is remote_should_be_headless: `not data_parallel_hybrid_lb and not
	// data_parallel_external_lb` of the front end's own config.
	RemoteHeadless bool `json:"remote_headless"`
	// ConfigHash is the front end's own ParallelConfig.compute_hash() when it coordinates DP (DP > 1
	// and a MoE model: wait_for_engine_startup's coordinated_dp), "" otherwise: each engine's READY
	// must carry the same (RefuseReady).
	ConfigHash string `json:"config_hash,omitempty"`
}

// Refuse is wait_for_engine_startup's verdict on one HELLO, in vLLM's order: the RuntimeError the
// front end raises, or "" when it accepts the engine.
func (x HandshakeExpect) Refuse(h EngineHello) string {
	if h.Index < x.First || h.Index >= x.First+x.Count {
		return fmt.Sprintf("RuntimeError: Message from engine with unexpected data parallel rank: %d", h.Index)
	}
	local := h.Index < x.First+x.LocalCount
	where := func(l bool) string {
		if l {
			return "local"
		}
		return "remote"
	}
	if h.Local != local {
		return fmt.Sprintf("RuntimeError: HELLO message from %s engine %d, expected it to be %s", where(h.Local), h.Index, where(local))
	}
	// Remote engines must be headless exactly when the front end runs internal LB.
	if !h.Local && h.Headless != x.RemoteHeadless {
		if h.Headless {
			return fmt.Sprintf("RuntimeError: Remote engine %d must not use --headless in external or hybrid dp lb mode", h.Index)
		}
		return fmt.Sprintf("RuntimeError: Remote engine %d must use --headless unless in external or hybrid dp lb mode", h.Index)
	}
	return ""
}

// RefuseReady is wait_for_engine_startup's check of an engine's READY (vllm/v1/engine/utils.py):
// with coordinated DP, an engine whose parallel config hashes differently from the front end's is
// refused with a RuntimeError ("" when it is accepted). vLLM reads READY once the engine finished
// its init; the simulation decides it where both sides' plans meet, at the handshake, lets the
// handshake complete (every engine got its answer) and has the front end raise right after it.
func (x HandshakeExpect) RefuseReady(h EngineHello) string {
	if x.ConfigHash == "" || h.ConfigHash == x.ConfigHash {
		return ""
	}
	worker := h.ConfigHash
	if worker == "" {
		worker = "None"
	}
	return fmt.Sprintf("RuntimeError: Configuration mismatch detected for engine %d. All DP workers must have identical "+
		"configurations for parameters that affect collective communication (e.g., enable_eplb, "+
		"eplb_config.log_balancedness). Worker hash: %s, Expected hash: %s. Please ensure all workers are "+
		"started with the same command-line arguments.", h.Index, worker, x.ConfigHash)
}

// HandshakeNoAnswer is what an engine raises when the front end never answers its HELLO
// (vllm/v1/engine/core.py startup_handshake, HANDSHAKE_TIMEOUT_MINS = 5).
const HandshakeNoAnswer = "RuntimeError: Did not receive response from front-end process within 5 minutes"

// ProcessPlan is everything one simulated process is and does.
type ProcessPlan struct {
	// Identity is the process's record as the model derives it, before anything ran: PID 0, Exit nil,
	// Lookup nil, Segment "" (a real run fills them in). Identity.ID is unique within the deployment.
	Identity report.Process `json:"identity"`
	// Crash, if set, is the exception the process raises; it then exits non-zero without doing the
	// steps that follow that stage.
	Crash *Crash `json:"crash,omitempty"`
	// Rendezvous are joined in order, after StageEngineInit and before StageConnectorInit.
	Rendezvous []RendezvousPlan `json:"rendezvous,omitempty"`
	// BindsLookup: after connector init, bind the REP lookup server at Identity.LookupPath.
	BindsLookup bool `json:"binds_lookup,omitempty"`
	// ConnectsLookup: once the host serves, connect a REQ client at Identity.LookupPath and look up.
	ConnectsLookup bool `json:"connects_lookup,omitempty"`
	// RegistersSegment: after connector init, set up a Mooncake store client and register a segment.
	RegistersSegment bool `json:"registers_segment,omitempty"`
	// SegmentHost is the local_hostname the store client registers under (a port is drawn from
	// 12300–14300 when it carries none).
	SegmentHost string `json:"segment_host,omitempty"`
	// SegmentRemount is what the store client does when the master answers a ping NEED_REMOUNT:
	// the profile's mooncake_remount (none, mount, republish).
	SegmentRemount string `json:"segment_remount,omitempty"`
	// ChildFailure is the exception this process raises when one of its children exits with an
	// error (vLLM: the engine fails to start); "" means a child's failure does not end this process.
	// A trailing ChildFailurePlaceholder stands for the failed children as vLLM prints them
	// (`{'EngineCore_DP0': 1}`), which only the run knows.
	ChildFailure string `json:"child_failure,omitempty"`
	// StopsOnChildFailure: when a child exits with an error, this process shuts its other
	// children down and exits cleanly (code 0) instead of raising (vLLM's headless engine manager
	// and multi-port DP supervisor do this). Only meaningful when ChildFailure is "".
	StopsOnChildFailure bool `json:"stops_on_child_failure,omitempty"`
	// EngineIDFromRank, when set, is the rank (in this process's "workers" rendezvous) whose KV
	// engine_id this worker adopts once that rendezvous completes: vLLM broadcasts the engine_id
	// from TP rank 0, then PP rank 0, at worker init (PRs #39907, #44528). Identity.EngineID holds
	// the worker's own value before the exchange.
	EngineIDFromRank *int `json:"engine_id_from_rank,omitempty"`
	// Children are started by this process after its StageConfig checks pass (and its
	// StageHandshakeBind), or, with ChildrenAfterRendezvous, once it completed every rendezvous.
	Children []*ProcessPlan `json:"children,omitempty"`
	// ChildrenAfterRendezvous: the process starts its children only after it completed all its
	// Rendezvous, in order; if one fails they never start. An engine core handshakes with its front
	// end(s) and joins its DP group before its executor starts the workers
	// (vllm/v1/engine/core.py EngineCoreProc.__init__: _perform_handshakes, _init_data_parallel,
	// then EngineCore.__init__ builds the executor), so a refused or stranded engine has no workers.
	ChildrenAfterRendezvous bool `json:"children_after_rendezvous,omitempty"`
	// Addresses are every address the process binds, opens, dials, probes or advertises
	// (plan_addresses.go); the Exercised ones are steps a run executes.
	Addresses []AddressPlan `json:"addresses,omitempty"`

	// executorInitDone: an engine core that crashes at StageEngineInit had its executor compute
	// its distributed_init_method first (an address of its own), for planAddresses.
	executorInitDone bool
}

// ChildFailurePlaceholder ends a ChildFailure whose text names the failed children.
const ChildFailurePlaceholder = "{...}"

// NodePlan is every process tree one host starts, one tree per `vllm serve` line, in command order.
// simnode starts the commands of a host in that order, each after the previous one has bound its
// lookup servers, and lets the clients look up only once the whole host is up, so that the last
// binder of a path is the one that answers (libzmq's takeover), deterministically.
type NodePlan struct {
	Host     string         `json:"host"`
	Commands []*ProcessPlan `json:"commands"`
}

// ProcessesByID indexes every process of the plans (each command's tree) by its ID.
func ProcessesByID(plans []*NodePlan) map[string]*ProcessPlan {
	out := map[string]*ProcessPlan{}
	walkDeployment(plans, func(p *ProcessPlan) { out[p.Identity.ID] = p })
	return out
}
