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
	"strings"

	"github.com/widetp/widetp/internal/nodeapi"
)

// Environment variables a node reads (besides the config itself): the node contract's
// (internal/nodeapi).
const (
	// EnvConfig holds the node's JSON config when --config is not given.
	EnvConfig = nodeapi.EnvConfig
	// EnvHost is the simulated hostname (default: os.Hostname()).
	EnvHost = nodeapi.EnvHost
	// EnvIPCRoot prefixes every ipc:// path the processes bind or connect to (default: none).
	EnvIPCRoot = nodeapi.EnvIPCRoot
	// EnvListenIP is the address rendezvous masters listen on (default 0.0.0.0).
	EnvListenIP = nodeapi.EnvListenIP
	// EnvHosts maps simulated hostnames to addresses: "r0-head=127.0.0.2,r0-f1=127.0.0.3".
	EnvHosts = nodeapi.EnvHosts
)

// Config is a node's input (nodeapi.Config): what `vllm serve` lines to run and where the store
// is. It is JSON (--config FILE or $WIDETP_NODE_CONFIG); durations are Go duration strings ("30s").
type Config = nodeapi.Config

// DeploymentNode is one node of Config.Deployment.
type DeploymentNode = nodeapi.DeploymentNode

// Model is the served model.
type Model = nodeapi.Model

// StoreURLs are the fake store's listeners (http://host:port).
type StoreURLs = nodeapi.StoreURLs

// Timeouts bound every wait of a node's processes.
type Timeouts = nodeapi.Timeouts

// Duration is a time.Duration that reads and writes as a Go duration string.
type Duration = nodeapi.Duration

// Defaults of Timeouts.
const (
	DefaultRendezvousTimeout = nodeapi.DefaultRendezvousTimeout
	DefaultLookupTimeout     = nodeapi.DefaultLookupTimeout
	DefaultStoreTimeout      = nodeapi.DefaultStoreTimeout
	DefaultHangTimeout       = nodeapi.DefaultHangTimeout
)

// validateConfig is the contract's checks plus the profile, which only the node program parses.
func validateConfig(c *Config) error {
	var errs []error
	if err := c.Validate(); err != nil {
		errs = append(errs, err)
	}
	if _, err := parseProfile(c.Profile); err != nil {
		errs = append(errs, err)
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
	c.Timeouts = c.Timeouts.WithDefaults()
	if err := validateConfig(&c); err != nil {
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
	// Resolved are the names the parent process had resolved through DNS when it started this
	// one: they seed its name cache (unlike Hosts, an answer is dropped when a dial to it fails).
	Resolved map[string]string `json:"resolved,omitempty"`

	// names caches this process's DNS answers (hosts.go); nil resolves every time.
	names *nameCache
}

// withNameCache is rt with a name cache seeded from rt.Resolved.
func (rt Runtime) withNameCache() Runtime {
	rt.names = newNameCache(rt.Resolved)
	return rt
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
	return rt.withNameCache(), nil
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
		if !ok || !nodeapi.ValidHost(name) || net.ParseIP(addr) == nil {
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
