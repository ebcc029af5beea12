// Package simnode is the node program of widetp: on one simulated host it derives, from the vLLM
// model, the processes each `vllm serve` line starts and runs every one of them as a real OS
// process — API server, engine cores, headless launcher, Ray actors, workers — which meet at real
// TCP rendezvous, bind and reach real ZMQ lookup sockets, register with the (fake) Mooncake store
// and report what they are and what happened to the store's report endpoint.
//
// A node is a supervisor (RunNode) and, under it, one process tree per command; each simulated
// process is a re-exec of the same binary (RunProcess), handed its plan on stdin.
package simnode

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/widetp/widetp/vllm"
)

// Environment variables a node reads (besides the config itself).
const (
	// EnvConfig holds the node's JSON config when --config is not given.
	EnvConfig = "WIDETP_NODE_CONFIG"
	// EnvHost is the simulated hostname (default: os.Hostname()).
	EnvHost = "WIDETP_HOST"
	// EnvIPCRoot prefixes every ipc:// path the processes bind or connect to (default: none).
	EnvIPCRoot = "WIDETP_IPC_ROOT"
	// EnvListenIP is the address rendezvous masters listen on (default 0.0.0.0).
	EnvListenIP = "WIDETP_LISTEN_IP"
	// EnvHosts maps simulated hostnames to addresses: "r0-head=127.0.0.2,r0-f1=127.0.0.3".
	EnvHosts = "WIDETP_HOSTS"
)

// Config is a node's input: what `vllm serve` lines to run and where the store is. It is JSON
// (--config FILE or $WIDETP_NODE_CONFIG); durations are Go duration strings ("30s").
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
}

// Defaults of Timeouts.
const (
	// DefaultRendezvousTimeout is short next to torch's 600 s: in a simulation every member starts
	// within seconds, so a minute only passes when one never will.
	DefaultRendezvousTimeout = 60 * time.Second
	// DefaultLookupTimeout bounds a lookup where vLLM's LookupKeyClient would block in recv for
	// ever: a local ipc round trip takes well under a millisecond, so 2 s without an answer means
	// no server, not a slow one.
	DefaultLookupTimeout = 2 * time.Second
	// DefaultStoreTimeout is Mooncake's metadata client bound (3 s total per request) plus room for
	// a few retries of a store that is still starting.
	DefaultStoreTimeout = 5 * time.Second
	// DefaultHangTimeout is short next to the rendezvous bound, so that a process whose
	// allocator spins is reported hung before the peers waiting on it give up: a loop that
	// binds a free port and rejects it thousands of times a second has had its chance by then.
	DefaultHangTimeout = 2 * time.Second
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

func (t Timeouts) withDefaults() Timeouts {
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
	return t
}

// hostLabel is a DNS label: the hostnames vLLM puts into ipc paths and rendezvous addresses.
var hostLabel = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)

func (c *Config) validate() error {
	var errs []error
	if !hostLabel.MatchString(c.Host) {
		errs = append(errs, fmt.Errorf("host %q is not a DNS label", c.Host))
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
	for name, d := range map[string]Duration{"timeouts.rendezvous": c.Timeouts.Rendezvous, "timeouts.lookup": c.Timeouts.Lookup, "timeouts.store": c.Timeouts.Store, "timeouts.store_start": c.Timeouts.StoreStart} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s %v must be positive", name, time.Duration(d)))
		}
	}
	if _, err := parseProfile(c.Profile); err != nil {
		errs = append(errs, err)
	}
	if c.Plan != nil && c.Plan.Host != c.Host {
		errs = append(errs, fmt.Errorf("plan is for host %q, the node is %q", c.Plan.Host, c.Host))
	}
	if len(c.Deployment) > 0 {
		self := false
		for i, n := range c.Deployment {
			if !hostLabel.MatchString(n.Host) {
				errs = append(errs, fmt.Errorf("deployment[%d].host %q is not a DNS label", i, n.Host))
			}
			self = self || n.Host == c.Host
		}
		if !self {
			errs = append(errs, fmt.Errorf("deployment does not list this node %q", c.Host))
		}
	}
	return errors.Join(errs...)
}

// ParseConfig reads a node config (src names it in errors) and fills what the environment gives:
// the host from $WIDETP_HOST or os.Hostname(), default timeouts.
func ParseConfig(data []byte, src string, getenv func(string) string) (*Config, error) {
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("node config %s: %w", src, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("node config %s: trailing data after the JSON object", src)
	}
	if c.Host == "" {
		c.Host = getenv(EnvHost)
	}
	if c.Host == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("node config %s: no host given and os.Hostname failed: %w", src, err)
		}
		c.Host = h
	}
	c.Timeouts = c.Timeouts.withDefaults()
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("node config %s: %w", src, err)
	}
	return &c, nil
}

// Runtime is what a node learns from its environment rather than its config: the same config runs
// in a container (DNS, private /tmp, 0.0.0.0) and in a local run (a host map, an ipc root and a
// 127.0.0.x address per simulated host).
type Runtime struct {
	IPCRoot  string            `json:"ipc_root,omitempty"`
	ListenIP string            `json:"listen_ip"`
	Hosts    map[string]string `json:"hosts,omitempty"`
}

// RuntimeFromEnv reads WIDETP_IPC_ROOT, WIDETP_LISTEN_IP and WIDETP_HOSTS.
func RuntimeFromEnv(getenv func(string) string) (Runtime, error) {
	rt := Runtime{IPCRoot: getenv(EnvIPCRoot), ListenIP: getenv(EnvListenIP)}
	if rt.ListenIP == "" {
		rt.ListenIP = "0.0.0.0"
	}
	if net.ParseIP(rt.ListenIP) == nil {
		return rt, fmt.Errorf("%s=%q is not an IP address", EnvListenIP, rt.ListenIP)
	}
	if rt.IPCRoot != "" && !strings.HasPrefix(rt.IPCRoot, "/") {
		return rt, fmt.Errorf("%s=%q is not an absolute path", EnvIPCRoot, rt.IPCRoot)
	}
	hosts, err := ParseHosts(getenv(EnvHosts))
	if err != nil {
		return rt, err
	}
	rt.Hosts = hosts
	return rt, nil
}

// ParseHosts reads a WIDETP_HOSTS value: comma-separated name=address pairs.
func ParseHosts(s string) (map[string]string, error) {
	hosts := map[string]string{}
	for i, pair := range strings.Split(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		name, addr, ok := strings.Cut(pair, "=")
		if !ok || !hostLabel.MatchString(name) || net.ParseIP(addr) == nil {
			return nil, fmt.Errorf("%s entry %d %q: want name=ip with a DNS label name", EnvHosts, i+1, pair)
		}
		if prev, dup := hosts[name]; dup && prev != addr {
			return nil, fmt.Errorf("%s: host %q maps to both %s and %s", EnvHosts, name, prev, addr)
		}
		hosts[name] = addr
	}
	return hosts, nil
}

// vllmEnvPrefixes are the variables vLLM (and the Mooncake client inside it) reads: a node passes
// these from its own environment to the model, and nothing else.
var vllmEnvPrefixes = []string{"VLLM_", "MOONCAKE_"}

// modelEnv is the environment the model sees: the vLLM variables of environ, overridden by the
// config's env.
func modelEnv(environ []string, cfgEnv map[string]string) map[string]string {
	env := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		for _, p := range vllmEnvPrefixes {
			if strings.HasPrefix(k, p) {
				env[k] = v
			}
		}
	}
	for k, v := range cfgEnv {
		env[k] = v
	}
	return env
}
