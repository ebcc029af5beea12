// Package report holds the record every simulated vLLM process produces — predicted by the model
// (widetp explain) or sent by a live process to the fake store (widetp run) — and the violations the
// checks derive from a set of such records. It is a leaf: the model, the node program, the fake store,
// the checks and the harness all speak it, so a check cannot tell a prediction from an observation.
package report

import "strconv"

// Role is the kind of a simulated vLLM process.
type Role string

const (
	// RoleAPIServer is a `vllm serve` front end process (it owns the engine cores).
	RoleAPIServer Role = "api-server"
	// RoleEngineCore is an EngineCore process (run_engine_core); it owns its workers.
	RoleEngineCore Role = "engine-core"
	// RoleHeadless is the process of `vllm serve --headless` (run_headless).
	RoleHeadless Role = "headless"
	// RoleRayActor is a DP engine actor of the Ray backend.
	RoleRayActor Role = "ray-actor"
	// RoleWorker is a GPU worker process (MultiprocExecutor worker).
	RoleWorker Role = "worker"
	// RoleDPSupervisor is the `--data-parallel-multi-port-external-lb` supervisor: it starts one
	// external-LB API server per local DP rank.
	RoleDPSupervisor Role = "dp-supervisor"
)

// LookupRole says which end of the Mooncake lookup channel a process holds.
type LookupRole string

const (
	// LookupServer binds the ZMQ REP lookup server (the worker with parallel_config.rank == 0).
	LookupServer LookupRole = "server"
	// LookupClient connects a ZMQ REQ client (an engine core's scheduler).
	LookupClient LookupRole = "client"
)

// Process is one simulated vLLM process: who it is, where it listens, what it observed, how it ended.
// Pointers are Python's optional values: nil is None (or "not applicable / not reached"), distinct from 0.
type Process struct {
	// ID is unique within a run and stable across runs of one scenario:
	// "<host>/<command index>/<role>-<index>[/worker-<local rank>]".
	ID string `json:"id"`
	// Parent is the ID of the process that started this one ("" for a command's top process).
	Parent string `json:"parent,omitempty"`
	Host   string `json:"host"`
	// Command is the index of the `vllm serve` line on its host (co-located launches differ here).
	Command int  `json:"command"`
	Role    Role `json:"role"`
	// PID is the OS process id (0 in a prediction).
	PID int `json:"pid"`

	// Replica names the set of processes that meet in one rendezvous: the workers of one engine and
	// the engine core that owns them. Processes with the same Replica form one replica.
	Replica string `json:"replica"`

	DataParallelSize      int  `json:"data_parallel_size"`
	DataParallelRank      int  `json:"data_parallel_rank"`
	DataParallelRankLocal *int `json:"data_parallel_rank_local"`
	DataParallelIndex     int  `json:"data_parallel_index"`
	LocalEnginesOnly      bool `json:"local_engines_only"`
	NodeRankWithinDP      int  `json:"node_rank_within_dp"`

	// MooncakeDPIndex is the Mooncake store connector's DP engine index; nil where the process has no
	// connector or crashed computing it.
	MooncakeDPIndex *int `json:"mooncake_dp_index"`

	// Worker ranks; nil for non-workers.
	Rank   *int `json:"rank"`
	TPRank *int `json:"tp_rank"`
	PPRank *int `json:"pp_rank"`

	// LookupPath is the ipc:// endpoint this process binds (LookupRole server) or connects to (client).
	LookupPath string     `json:"lookup_path,omitempty"`
	LookupRole LookupRole `json:"lookup_role,omitempty"`
	// BindSeq orders the lookup server binds of one host: a later bind of the same path captures the
	// clients that connect after it (libzmq takes an ipc path over silently). Observed runs report the
	// host-local order in which binds happened; the model predicts it.
	BindSeq int `json:"bind_seq,omitempty"`
	// Lookup is the result of this client's lookup request.
	Lookup *Lookup `json:"lookup,omitempty"`
	// Served lists the nonces of the lookup requests this server answered (see Lookup.Nonce).
	Served []string `json:"served,omitempty"`

	// EngineID is the KV transfer engine_id this process's KV connector uses: set on the processes
	// that build one (engine cores and Ray actors for the scheduler side, workers), "" on launchers
	// (API servers, headless launchers, DP supervisors: they parse the config but build no
	// connector) and on every process of a command without --kv-transfer-config.
	EngineID string `json:"engine_id,omitempty"`
	// Segment is the Mooncake segment name (host:port) a worker registered.
	Segment string `json:"segment,omitempty"`

	// Rendezvous lists the rendezvous this process took part in and how each ended.
	Rendezvous []Rendezvous `json:"rendezvous,omitempty"`

	// Addresses are every address the process binds, opens, dials, probes or advertises, as the
	// model derives them from vLLM's code, with what happened to each in a live run (Address).
	Addresses []Address `json:"addresses,omitempty"`
	// Hung is set when a step of the process never returned (a port allocator that spins for
	// ever): it lives on, making no progress, until something stops it.
	Hung *Hang `json:"hung,omitempty"`

	// Ready is set by a live run once the process completed its start-up (children started,
	// rendezvous joined, segment registered, lookup bound or answered) and serves; a prediction
	// leaves it false. It lets a harness wait for "every process ready or exited" on the store.
	Ready bool `json:"ready,omitempty"`

	// Exit is nil while the process lives (or, in a prediction, when it would keep running).
	Exit *Exit `json:"exit"`

	// Registration is what the Mooncake store holds of this worker's registration after the last
	// store fault (nil: no store step ran, or the process registers nothing).
	Registration *Registration `json:"registration,omitempty"`
	// Restarts counts the fault steps that restarted this process; BeforeRestart is the identity
	// it had before the first of them.
	Restarts      int       `json:"restarts,omitempty"`
	BeforeRestart *Identity `json:"before_restart,omitempty"`
}

// Registration is a worker's Mooncake registration as the store holds it.
type Registration struct {
	// Mounted: the master has the worker's segment; Published: the metadata server has both
	// of its keys (rpc_meta and ram), which peers read to reach the segment.
	Mounted   bool `json:"mounted"`
	Published bool `json:"published"`
	// Remounts is how many times the worker remounted after NEED_REMOUNT.
	Remounts int `json:"remounts"`
}

// Identity is what a process is to the rest of the deployment: the fields that vLLM derives
// from the command line alone, so a restart with the same command line must give them back.
// The KV engine_id is not among them (vLLM draws a uuid4 per parse unless the
// kv-transfer-config sets one), nor the segment name (Mooncake draws its port).
type Identity struct {
	Replica               string `json:"replica"`
	DataParallelRank      int    `json:"data_parallel_rank"`
	DataParallelRankLocal *int   `json:"data_parallel_rank_local"`
	DataParallelIndex     int    `json:"data_parallel_index"`
	MooncakeDPIndex       *int   `json:"mooncake_dp_index"`
	Rank                  *int   `json:"rank"`
	TPRank                *int   `json:"tp_rank"`
	PPRank                *int   `json:"pp_rank"`
	LookupPath            string `json:"lookup_path,omitempty"`
}

// IdentityOf returns p's identity.
func IdentityOf(p Process) Identity {
	return Identity{Replica: p.Replica, DataParallelRank: p.DataParallelRank, DataParallelRankLocal: p.DataParallelRankLocal,
		DataParallelIndex: p.DataParallelIndex, MooncakeDPIndex: p.MooncakeDPIndex, Rank: p.Rank, TPRank: p.TPRank,
		PPRank: p.PPRank, LookupPath: p.LookupPath}
}

// Diff lists the fields in which b differs from a, as "name a -> b".
func (a Identity) Diff(b Identity) []string {
	var out []string
	str := func(name, x, y string) {
		if x != y {
			out = append(out, name+" "+x+" -> "+y)
		}
	}
	opt := func(v *int) string {
		if v == nil {
			return "None"
		}
		return itoa(*v)
	}
	str("replica", a.Replica, b.Replica)
	str("data_parallel_rank", itoa(a.DataParallelRank), itoa(b.DataParallelRank))
	str("data_parallel_rank_local", opt(a.DataParallelRankLocal), opt(b.DataParallelRankLocal))
	str("data_parallel_index", itoa(a.DataParallelIndex), itoa(b.DataParallelIndex))
	str("mooncake_dp_index", opt(a.MooncakeDPIndex), opt(b.MooncakeDPIndex))
	str("rank", opt(a.Rank), opt(b.Rank))
	str("tp_rank", opt(a.TPRank), opt(b.TPRank))
	str("pp_rank", opt(a.PPRank), opt(b.PPRank))
	str("lookup_path", a.LookupPath, b.LookupPath)
	return out
}

func itoa(v int) string { return strconv.Itoa(v) }

// Lookup is what an engine core's lookup client saw.
type Lookup struct {
	// Nonce is carried in the request's block-hash blob; the server that answers records it in its
	// Served list, which is how a silent ipc takeover becomes visible (ResolveLookups).
	Nonce string `json:"nonce,omitempty"`
	// ServedBy is the ID of the lookup server process that answered ("" if none did).
	ServedBy string `json:"served_by,omitempty"`
	// Error is set when no answer came within the bound ("timeout after 2s") or the reply was bad.
	Error string `json:"error,omitempty"`
}

// Rendezvous is one barrier a process joined.
type Rendezvous struct {
	// Kind is "workers" (torch rendezvous of a replica) or "dp" (the DP group / coordinator handshake).
	Kind string `json:"kind"`
	// Address is host:port of the barrier.
	Address string `json:"address"`
	// Error is set when the barrier did not complete; Missing names who never arrived.
	Error   string   `json:"error,omitempty"`
	Missing []string `json:"missing,omitempty"`
}

// Exit is how a process ended.
type Exit struct {
	Code int `json:"code"`
	// Error is the Python-style exception that ended it ("AssertionError", "ValueError: ..."); "" for
	// a clean exit.
	Error string `json:"error,omitempty"`
	// Signal names the signal that killed it, if one did.
	Signal string `json:"signal,omitempty"`
	// Expected is true when a fault or the harness's teardown asked for this exit.
	Expected bool `json:"expected,omitempty"`
}

// Crashed reports whether the process ended in an error nobody asked for.
func (p Process) Crashed() bool {
	return p.Exit != nil && !p.Exit.Expected && (p.Exit.Code != 0 || p.Exit.Error != "" || p.Exit.Signal != "")
}

// Live reports whether the process had not exited (a prediction: would keep running).
func (p Process) Live() bool { return p.Exit == nil || p.Exit.Expected }

// Int returns a pointer to v, for the optional fields.
func Int(v int) *int { return &v }
