// Package nodeapi is the contract between the harness and the programs it runs on a host: `widetp
// node` (package simnode) and `widetp store` (package fakestore). It is the one place that says
// what a node is handed (its JSON Config, in EnvConfig), which environment a runtime sets for a
// host's program, which line each program prints once it is up, where the store listens and by
// which name it is reached, and which host names are valid. The harness, simnode, the fake store
// and the scenario loader import it instead of keeping copies that could drift.
//
// It imports no cgo (simnode links libzmq; the harness must not) and nothing of the harness.
package nodeapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/widetp/widetp/vllm"
)

// The environment a runtime gives a host's program: who it is, what it binds, and — only where
// hosts share one file system (the local runtime) — the directory that prefixes every ipc://
// path, standing in for the host's private /tmp, and the map of host names to addresses that
// stands in for DNS.
const (
	// EnvConfig holds a node's JSON Config (`widetp node` without --config).
	EnvConfig = "WIDETP_NODE_CONFIG"
	// EnvRun is the run id (the io.widetp.run label), on every host and inherited by every
	// process it starts: what finds a run's processes on the machine (leak checks, the
	// benchmark's memory sampler).
	EnvRun = "WIDETP_RUN"
	// EnvHost is the simulated host name (default: os.Hostname()).
	EnvHost = "WIDETP_HOST"
	// EnvIPCRoot prefixes every ipc:// path a host's processes bind or connect to (default: none).
	EnvIPCRoot = "WIDETP_IPC_ROOT"
	// EnvListenIP is the address a host's listeners bind (default 0.0.0.0).
	EnvListenIP = "WIDETP_LISTEN_IP"
	// EnvHosts maps simulated host names to addresses: "r0-head=127.0.0.2,r0-f1=127.0.0.3".
	EnvHosts = "WIDETP_HOSTS"
	// EnvBinary names the widetp binary a harness run executes on its hosts and builds its images
	// from, when the caller does not pass one: a Go test that imports the harness is not widetp
	// itself (`go build ./cmd/widetp`).
	EnvBinary = "WIDETP_BIN"
)

// Ready lines: the start of the line each program prints on stdout once it is up. A runtime's
// start waits for it.
const (
	// NodeReady is printed by `widetp node` once the store answered and its processes are planned,
	// just before it waits at the start gate (Config.Gate) or, without one, starts them.
	NodeReady = "simnode: node "
	// StoreReady is printed by `widetp store` once every listener is up.
	StoreReady = "fakestore: flavor="
)

// StoreHost is the fake store's host name in every run. It is not a valid scenario host name
// (those are the scenario's nodes; one named so is refused), and it is what the nodes' store URLs
// name, resolved by the engine's DNS in Docker and through EnvHosts locally.
const StoreHost = "widetp-store"

// The fake store's ports (its listeners' defaults). The master plane never uses 50051: that port
// belongs to the real master's binary RPC, and a real client pointed at the fake must fail
// loudly, not half-speak.
const (
	StoreMetadataPort = 8080
	StoreMasterPort   = 50052
	StoreAdminPort    = 9003
)

// StorePorts are the store's ports in a fixed order: metadata, master, admin.
func StorePorts() []int { return []int{StoreMetadataPort, StoreMasterPort, StoreAdminPort} }

// StoreURLsAt are the store's base URLs on host.
func StoreURLsAt(host string) StoreURLs {
	url := func(port int) string { return "http://" + host + ":" + strconv.Itoa(port) }
	return StoreURLs{Metadata: url(StoreMetadataPort), Master: url(StoreMasterPort), Admin: url(StoreAdminPort)}
}

// hostLabel is a DNS label as RFC 1123 and Kubernetes define it: lowercase, because a container
// hostname is one and vLLM puts socket.gethostname() into the lookup path verbatim.
var hostLabel = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`) })

// ValidHost reports whether name is a valid host name: a lowercase DNS label ([a-z0-9-], at most
// 63, no leading or trailing '-').
func ValidHost(name string) bool { return hostLabel().MatchString(name) }

// HostRule says what ValidHost wants, for error messages.
const HostRule = "a DNS label ([a-z0-9-], at most 63, no leading or trailing '-')"

// Config is a node's input: what `vllm serve` lines to run and where the store is. It is JSON
// (`widetp node --config FILE` or $WIDETP_NODE_CONFIG); durations are Go duration strings ("30s").
type Config struct {
	// Host is the node's hostname; "" takes $WIDETP_HOST, then os.Hostname().
	Host string `json:"host,omitempty"`
	// GPUs is the number of GPUs the node has (the model's default when 0).
	GPUs int `json:"gpus,omitempty"`
	// Commands are the node's `vllm serve` lines, verbatim; several are co-located launches.
	Commands []string `json:"commands"`
	Model    Model    `json:"model"`
	// Profile is the vLLM behaviour to reproduce (vllm.Profile: a named profile and its changes).
	Profile json.RawMessage `json:"profile,omitempty"`
	// Env is the environment vLLM sees, over the vLLM variables of the process environment.
	Env map[string]string `json:"env,omitempty"`
	// Seed makes a run reproducible: the model draws the KV engine_ids from it (vllm.Options.Seed,
	// so a harness passes the scenario name, as explain does), and each process its ports and
	// lookup nonces.
	Seed string `json:"seed,omitempty"`
	// Store holds the fake Mooncake store's base URLs.
	Store    StoreURLs `json:"store"`
	Timeouts Timeouts  `json:"timeouts,omitempty"`
	// Plan, when set, is run instead of the plan the model derives from Commands: the harness can
	// hand a node exactly the plan it predicted.
	Plan *vllm.NodePlan `json:"plan,omitempty"`
	// Deployment, when set, is every node of the deployment, this one included: the model then
	// plans them all (vllm.PlanDeployment), since some processes dial another node's by what it
	// advertises (a NIXL kv_consumer's workers dial the producers' side channels).
	Deployment []DeploymentNode `json:"deployment,omitempty"`
	// Steals are a fault timeline's steal-port steps on this node: the node binds the port of
	// each named address of a process between the moment the process learnt it (its probe) and
	// its own bind, so a probe-then-bind race comes out the same on every run.
	Steals []Steal `json:"steals,omitempty"`
	// Gate makes the node wait at the store's start gate (GET /_widetp/gate) before it starts any
	// process, for at most Timeouts.Gate. A harness opens the gate once the runtime has brought up
	// every host of the run, so that the processes of all hosts start together, however far apart
	// the runtime started the hosts themselves (a Docker engine starts a few containers at a
	// time). A node started again later, by a restart step, finds the gate open.
	Gate bool `json:"gate,omitempty"`
}

// Steal names the address a steal-port step takes: a channel of one process's addresses.
type Steal struct {
	Process string `json:"process"`
	Channel string `json:"channel"`
}

// DeploymentNode is one node of Config.Deployment: what vllm.Node needs.
type DeploymentNode struct {
	Host     string            `json:"host"`
	GPUs     int               `json:"gpus,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	Commands []string          `json:"commands"`
}

// Model is the served model: its name and whether it is a mixture of experts (vLLM's DP rules
// differ for MoE and dense models).
type Model struct {
	Name string `json:"name"`
	MoE  bool   `json:"moe"`
}

// StoreURLs are the fake store's listeners (http://host:port).
type StoreURLs struct {
	// Metadata is the HTTP metadata server (Mooncake's metadata_server).
	Metadata string `json:"metadata"`
	// Master is the master plane (Mooncake's master_server_address, as JSON over HTTP).
	Master string `json:"master"`
	// Admin is the admin listener, which also serves the fake's report and event endpoints.
	Admin string `json:"admin"`
}

// Timeouts bound every wait of a node's processes.
type Timeouts struct {
	// Rendezvous bounds each barrier (torch's default is 600 s; scenarios use far less).
	Rendezvous Duration `json:"rendezvous,omitempty"`
	// Lookup bounds a scheduler's lookup request.
	Lookup Duration `json:"lookup,omitempty"`
	// Store bounds each request to the store, and the retries of a store that is down at start.
	Store Duration `json:"store,omitempty"`
	// StoreStart bounds the wait for a store that is not up yet when the node starts: the harness
	// starts the store and the nodes in one round, so a node may come up first and wait for the
	// store's name to resolve and its ports to answer. Default: Store.
	StoreStart Duration `json:"store_start,omitempty"`
	// Hang bounds a step that can spin for ever (vLLM's port allocators): after it, the process
	// is reported hung (report.Process.Hung) and makes no further progress.
	Hang Duration `json:"hang,omitempty"`
	// Gate bounds the wait at the start gate (Config.Gate): the harness opens it once every host
	// is up, so it covers the runtime's start of the whole run. Default: DefaultGateTimeout.
	Gate Duration `json:"gate,omitempty"`
}

// Defaults of Timeouts.
const (
	// DefaultRendezvousTimeout is short next to torch's 600 s: in a simulation every member starts
	// within seconds, so a minute only passes when one never will.
	DefaultRendezvousTimeout = 60 * time.Second
	// DefaultLookupTimeout bounds a lookup (and a side-channel dial) where vLLM's LookupKeyClient
	// would block in recv for ever: a local ipc round trip takes well under a millisecond, so 2 s
	// without an answer from a socket that completed no ZMTP handshake means no server. A server
	// that completed one is up, and on a loaded machine may answer later: it is waited for up to
	// the rendezvous bound.
	DefaultLookupTimeout = 2 * time.Second
	// DefaultStoreTimeout is Mooncake's metadata client bound (3 s total per request) plus room for
	// a few retries of a store that is still starting.
	DefaultStoreTimeout = 5 * time.Second
	// DefaultHangTimeout is short next to the rendezvous bound, so that a process whose
	// allocator spins is reported hung before the peers waiting on it give up: a loop that
	// binds a free port and rejects it thousands of times a second has had its chance by then.
	DefaultHangTimeout = 2 * time.Second
	// DefaultGateTimeout is far above the few minutes the slowest runtime takes to start a large
	// run's hosts: a node only gives up at the gate when no harness will ever open it.
	DefaultGateTimeout = 10 * time.Minute
)

// Duration is a time.Duration that reads and writes as a Go duration string.
type Duration time.Duration

// MarshalJSON writes "1.5s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string ("30s").
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"30s\": %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// WithDefaults fills every zero bound with its default (StoreStart with Store).
func (t Timeouts) WithDefaults() Timeouts {
	if t.Rendezvous == 0 {
		t.Rendezvous = Duration(DefaultRendezvousTimeout)
	}
	if t.Lookup == 0 {
		t.Lookup = Duration(DefaultLookupTimeout)
	}
	if t.Store == 0 {
		t.Store = Duration(DefaultStoreTimeout)
	}
	if t.Hang == 0 {
		t.Hang = Duration(DefaultHangTimeout)
	}
	if t.StoreStart == 0 {
		t.StoreStart = t.Store
	}
	if t.Gate == 0 {
		t.Gate = Duration(DefaultGateTimeout)
	}
	return t
}

// Validate checks what the contract itself fixes: host names, commands or a plan, store URLs,
// positive bounds, a plan for this host, a deployment that lists this node. The profile is the
// node program's to parse.
func (c *Config) Validate() error {
	var errs []error
	if !ValidHost(c.Host) {
		errs = append(errs, fmt.Errorf("host %q is not %s", c.Host, HostRule))
	}
	if len(c.Commands) == 0 && c.Plan == nil {
		errs = append(errs, errors.New("commands: at least one `vllm serve` line is required"))
	}
	if c.GPUs < 0 {
		errs = append(errs, fmt.Errorf("gpus %d is negative", c.GPUs))
	}
	for name, u := range map[string]string{"store.metadata": c.Store.Metadata, "store.master": c.Store.Master, "store.admin": c.Store.Admin} {
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			errs = append(errs, fmt.Errorf("%s %q is not an http:// URL", name, u))
		}
	}
	for name, d := range map[string]Duration{"timeouts.rendezvous": c.Timeouts.Rendezvous, "timeouts.lookup": c.Timeouts.Lookup, "timeouts.store": c.Timeouts.Store, "timeouts.store_start": c.Timeouts.StoreStart, "timeouts.gate": c.Timeouts.Gate} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s %v must be positive", name, time.Duration(d)))
		}
	}
	if c.Plan != nil && c.Plan.Host != c.Host {
		errs = append(errs, fmt.Errorf("plan is for host %q, the node is %q", c.Plan.Host, c.Host))
	}
	if len(c.Deployment) > 0 {
		self := false
		for i, n := range c.Deployment {
			if !ValidHost(n.Host) {
				errs = append(errs, fmt.Errorf("deployment[%d].host %q is not %s", i, n.Host, HostRule))
			}
			self = self || n.Host == c.Host
		}
		if !self {
			errs = append(errs, fmt.Errorf("deployment does not list this node %q", c.Host))
		}
	}
	return errors.Join(errs...)
}

// The node program's control requests: `widetp node ctl kill|restart PROCESS`, run on a host (the
// Runtime's Exec), asks its node program to SIGKILL one process, or to start one command again.
const (
	// CtlCommand is the `widetp node` subcommand.
	CtlCommand = "ctl"
	// CtlKill SIGKILLs one process; CtlRestart kills one command's process tree and starts the
	// command again.
	CtlKill    = "kill"
	CtlRestart = "restart"
)

// CtlRequest is one control request.
type CtlRequest struct {
	Op      string `json:"op"`
	Process string `json:"process"`
}

// CtlReply answers a CtlRequest; `widetp node ctl` prints it as one JSON line.
type CtlReply struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	// Acts is the node's count of carried-out requests, this one included: its next settled
	// status with at least that many Acts was derived after it.
	Acts int `json:"acts,omitempty"`
	// Detail says what the node did.
	Detail string `json:"detail,omitempty"`
}
