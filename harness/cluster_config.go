package harness

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/widetp/widetp/internal/nodeapi"
	"github.com/widetp/widetp/scenarios"
	"github.com/widetp/widetp/vllm"
)

// ClusterOption changes how a Cluster runs a scenario.
type ClusterOption func(*clusterConfig)

// clusterConfig is a Cluster's configuration: derived from the scenario (clusterDefaults), changed
// by ClusterOptions, checked by validate.
type clusterConfig struct {
	progress io.Writer
	// timeouts are the nodes' own bounds (simnode's Config.Timeouts).
	timeouts NodeTimeouts
	// settle bounds the wait for every node to settle.
	settle time.Duration
	// teardown bounds Close when the caller's context is gone (an interrupt still tears down).
	teardown time.Duration
	// plans are the nodes' process plans by host, when a planner other than simnode's own model
	// made them (WithPlans); a node without one plans its commands itself.
	plans map[string]*vllm.NodePlan
}

// NodeTimeouts are the bounds every simulated process of a run waits with (simnode.Timeouts).
type NodeTimeouts struct {
	// Rendezvous bounds each barrier: a peer that never arrives is rendezvous-failed after it.
	Rendezvous time.Duration
	// Lookup bounds a scheduler's lookup request: lookup-unreachable after it.
	Lookup time.Duration
	// Store bounds each request to the store.
	Store time.Duration
	// StoreStart bounds a node's wait for the store at its start (the store starts in the same
	// round as the nodes); zero means Store.
	StoreStart time.Duration
}

// Bounds derived from a scenario. A simulated deployment starts every member of every rendezvous
// within a few seconds, so the bounds are short next to vLLM's (torch waits 600 s): a scenario
// whose peer never comes (rendezvous-failed) costs the rendezvous bound, and the suite runs it on
// two shared cores next to others.
const (
	// rendezvousBase covers the spread of process starts: the start gate lets every host's
	// processes go at once, but under a parallel suite on 2 cores one node's processes can come up
	// seconds after its peers'. 10 s is several times the worst spread seen, and still cheap for
	// the scenarios that wait it out.
	rendezvousBase = 10 * time.Second
	// rendezvousPerGPU adds for the processes that start before the last member joins: about one
	// simulated process per GPU, each a fork and exec plus a store post (~20 ms of a shared core).
	rendezvousPerGPU = 20 * time.Millisecond
	// rendezvousPerHost adds for the node programs that start those processes: past the start
	// gate every host starts its process tree at once, and at 64 hosts the burst of some 700
	// process starts keeps both cores busy for tens of seconds, so the last member of a
	// rendezvous can start that much after the first (before the gate, at 17 hosts, a healthy DP
	// handshake timed out after 13 s while the engine still started containers).
	rendezvousPerHost = time.Second
	// lookupBase is simnode's default: a local ipc round trip takes well under a millisecond, so
	// 2 s without an answer means no server, not a slow one — on an idle machine. lookupPerGPU adds
	// for the processes that share the 2 cores with the server: at 64 nodes (512 GPUs, 608
	// processes and the engine starting 65 containers) a live server went unanswered for 2 s.
	lookupBase   = 2 * time.Second
	lookupPerGPU = 20 * time.Millisecond
	// storeTimeout is simnode's default: Mooncake's metadata client bound plus a few retries.
	storeTimeout = 5 * time.Second
	// storeStartTimeout bounds a node's wait for the store, which starts in the same round: the
	// store is up within a second of its container, but a round of 65 containers on 2 shared
	// cores can start it well after the first node.
	storeStartTimeout = 60 * time.Second
	// startupBase and startupPerGPU bound the start-up itself before the waits: images or binaries
	// are built by then, so this is process starts on 2 cores, generously.
	startupBase   = 30 * time.Second
	startupPerGPU = 50 * time.Millisecond
	// clusterTeardown bounds Close: each node gets the runtime's stop grace after SIGTERM, then
	// the runtime removes everything within its op timeout.
	clusterTeardown = 2 * time.Minute
)

// clusterDefaults derives the bounds of a run of s from its size.
func clusterDefaults(s *scenarios.Scenario) clusterConfig {
	gpus := 0
	for _, n := range s.Nodes {
		gpus += n.GPUs
	}
	t := NodeTimeouts{
		Rendezvous: rendezvousBase + time.Duration(gpus)*rendezvousPerGPU + time.Duration(len(s.Nodes)+1)*rendezvousPerHost,
		Lookup:     lookupBase + time.Duration(gpus)*lookupPerGPU,
		Store:      storeTimeout,
		StoreStart: storeStartTimeout,
	}
	return clusterConfig{progress: io.Discard, timeouts: t, settle: settleBound(t, gpus), teardown: clusterTeardown}
}

// settleBound is the longest a healthy or failing run takes to settle: start-up, then the longest
// chain of waits a process can be in (simnode: a bind turn or the serving phase waits up to two
// rendezvous bounds plus store round trips; a failing parent lets its children settle, then
// waits for them with a few store round trips each), plus a lookup.
func settleBound(t NodeTimeouts, gpus int) time.Duration {
	startup := startupBase + time.Duration(gpus)*startupPerGPU
	return startup + 2*t.Rendezvous + t.Lookup + 10*t.Store
}

// WithClusterProgress receives one line per step of the run (store up, nodes up, nodes settled,
// checks running); the CLI passes stderr. The runtime has its own (WithProgress).
func WithClusterProgress(w io.Writer) ClusterOption {
	return func(c *clusterConfig) { c.progress = w }
}

// WithPlans hands each node the plan a vllm.Planner made for it (simnode's Config.Plan), so the
// run executes exactly those plans: `widetp run --planner vllm` runs vLLM's own plans.
func WithPlans(plans []*vllm.NodePlan) ClusterOption {
	return func(c *clusterConfig) {
		c.plans = map[string]*vllm.NodePlan{}
		for _, p := range plans {
			if p != nil {
				c.plans[p.Host] = p
			}
		}
	}
}

// WithNodeTimeouts replaces the bounds derived from the scenario; the settle bound follows them
// unless WithSettleTimeout sets it.
func WithNodeTimeouts(t NodeTimeouts) ClusterOption {
	return func(c *clusterConfig) { c.timeouts = t; c.settle = 0 }
}

// WithSettleTimeout bounds the wait for every node to settle.
func WithSettleTimeout(d time.Duration) ClusterOption {
	return func(c *clusterConfig) { c.settle = d }
}

func (c *clusterConfig) validate(s *scenarios.Scenario) error {
	if c.progress == nil {
		c.progress = io.Discard
	}
	for name, d := range map[string]time.Duration{"rendezvous": c.timeouts.Rendezvous, "lookup": c.timeouts.Lookup, "store": c.timeouts.Store} {
		if d <= 0 {
			return fmt.Errorf("%s timeout %s: must be positive", name, d)
		}
	}
	if c.settle == 0 {
		gpus := 0
		for _, n := range s.Nodes {
			gpus += n.GPUs
		}
		c.settle = settleBound(c.timeouts, gpus)
	}
	if c.settle < 0 {
		return fmt.Errorf("settle timeout %s: must be positive", c.settle)
	}
	return nil
}

// StoreHost is the fake store's host name in every run (nodeapi.StoreHost): not a valid scenario
// host name, and what the nodes' store URLs name.
const StoreHost = nodeapi.StoreHost

// storeReady and nodeReady match the lines `widetp store` and `widetp node` print once up.
var (
	storeReady = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile("^" + regexp.QuoteMeta(nodeapi.StoreReady)) })
	nodeReady  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile("^" + regexp.QuoteMeta(nodeapi.NodeReady)) })
)

// storeSpec is the fake store of s. Each listener binds the host's own address,
// $(WIDETP_LISTEN_IP), which the runtime expands: the run's loopback address for the store host
// in a local run (so parallel runs do not collide), every interface of its own network namespace
// in a container.
func storeSpec(s *scenarios.Scenario) NodeSpec {
	addr := func(port int) string { return "$(" + EnvListenIP + "):" + strconv.Itoa(port) }
	return NodeSpec{
		Host:    StoreHost,
		Program: Widetp,
		Args: []string{
			"store",
			"-flavor=" + s.Store.Flavor,
			"-metadata-addr=" + addr(nodeapi.StoreMetadataPort),
			"-master-addr=" + addr(nodeapi.StoreMasterPort),
			"-admin-addr=" + addr(nodeapi.StoreAdminPort),
		},
		Ready: storeReady(),
		Ports: nodeapi.StorePorts(),
	}
}

// nodeSpec is node n of s: `widetp node` with its config (nodeapi.Config) — the node's commands
// and GPUs, the scenario's model and resolved profile, the environment layered (scenario, then
// node), the scenario name as the seed (explain seeds the model with it, so engine_ids match the
// prediction), the store by its host name, and the run's bounds. The harness does not import
// simnode: that would link libzmq into every harness user through cgo.
func nodeSpec(s *scenarios.Scenario, n scenarios.Node, t NodeTimeouts, plan *vllm.NodePlan) (NodeSpec, error) {
	profile, err := json.Marshal(s.Resolved)
	if err != nil {
		return NodeSpec{}, fmt.Errorf("node %s: encode its profile: %w", n.Host, err)
	}
	cfg := nodeapi.Config{
		Host:     n.Host,
		GPUs:     n.GPUs,
		Commands: n.Commands,
		Model:    nodeapi.Model{Name: s.Model.Name, MoE: s.Model.MoE},
		Profile:  profile,
		Env:      s.Environ(n),
		Seed:     s.Name,
		Store:    nodeapi.StoreURLsAt(StoreHost),
		Timeouts: nodeapi.Timeouts{
			Rendezvous: nodeapi.Duration(t.Rendezvous), Lookup: nodeapi.Duration(t.Lookup),
			Store: nodeapi.Duration(t.Store), StoreStart: nodeapi.Duration(t.StoreStart),
		},
		Plan: plan,
		// StartCluster opens the gate once the runtime has brought up every host.
		Gate: true,
	}
	for _, m := range s.Nodes {
		cfg.Deployment = append(cfg.Deployment, nodeapi.DeploymentNode{Host: m.Host, GPUs: m.GPUs, Env: s.Environ(m), Commands: m.Commands})
	}
	for _, st := range s.Faults {
		if st.Action == scenarios.ActStealPort && strings.HasPrefix(st.Target, n.Host+"/") {
			cfg.Steals = append(cfg.Steals, nodeapi.Steal{Process: st.Target, Channel: st.Channel})
		}
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return NodeSpec{}, fmt.Errorf("node %s: encode its config: %w", n.Host, err)
	}
	return NodeSpec{
		Host:    n.Host,
		Program: Widetp,
		Args:    []string{"node"},
		Env:     map[string]string{nodeapi.EnvConfig: string(b)},
		Ready:   nodeReady(),
	}, nil
}
