package harness

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

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
	// rendezvousBase covers the spread of node starts: containers start concurrently, but under a
	// parallel suite on 2 cores one node can come up seconds after its peers. 10 s is several
	// times the worst spread seen, and still cheap for the scenarios that wait it out.
	rendezvousBase = 10 * time.Second
	// rendezvousPerGPU adds for the processes that start before the last member joins: about one
	// simulated process per GPU, each a fork and exec plus a store post (~20 ms of a shared core).
	rendezvousPerGPU = 20 * time.Millisecond
	// lookupTimeout is simnode's default: a local ipc round trip takes well under a millisecond,
	// so 2 s without an answer means no server, not a slow one.
	lookupTimeout = 2 * time.Second
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
		Rendezvous: rendezvousBase + time.Duration(gpus)*rendezvousPerGPU,
		Lookup:     lookupTimeout,
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

// StoreHost is the fake store's host name in every run. It is not a valid scenario host name
// (those are the scenario's nodes; one named so is refused), and it is what the nodes' store URLs
// name, resolved by the engine's DNS in Docker and through WIDETP_HOSTS locally.
const StoreHost = "widetp-store"

// The fake store's ports: its defaults (fakestore.Default*Addr).
const (
	storeMetadataPort = 8080
	storeMasterPort   = 50052
	storeAdminPort    = 9003
)

// storeReady is the line `widetp store` prints once every listener is up (fakestore.ReadyLine).
var storeReady = regexp.MustCompile(`^fakestore: flavor=`)

// nodeReady is the line `widetp node` prints once it started every command (simnode.ReadyLine).
var nodeReady = regexp.MustCompile(`^simnode: node `)

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
			"-metadata-addr=" + addr(storeMetadataPort),
			"-master-addr=" + addr(storeMasterPort),
			"-admin-addr=" + addr(storeAdminPort),
		},
		Ready: storeReady,
		Ports: []int{storeMetadataPort, storeMasterPort, storeAdminPort},
	}
}

// nodeConfig is simnode's Config as JSON (simnode.Config; a spec decodes one into the other
// strictly, so the two cannot drift). The harness does not import simnode: that would link
// libzmq into every harness user through cgo.
type nodeConfig struct {
	Host     string            `json:"host"`
	GPUs     int               `json:"gpus"`
	Commands []string          `json:"commands"`
	Model    nodeModel         `json:"model"`
	Profile  vllm.Profile      `json:"profile"`
	Env      map[string]string `json:"env,omitempty"`
	Seed     string            `json:"seed"`
	Store    nodeStoreURLs     `json:"store"`
	Timeouts nodeTimeoutsJSON  `json:"timeouts"`
	// Deployment is every node of the scenario (simnode.Config.Deployment): a node plans the
	// whole deployment, as explain does, for the processes that dial another node's.
	Deployment []nodeDeployment `json:"deployment,omitempty"`
	Plan       *vllm.NodePlan   `json:"plan,omitempty"`
	// Steals are the scenario's steal-port steps on this node (simnode.Config.Steals).
	Steals []nodeSteal `json:"steals,omitempty"`
}

type nodeSteal struct {
	Process string `json:"process"`
	Channel string `json:"channel"`
}

type nodeDeployment struct {
	Host     string            `json:"host"`
	GPUs     int               `json:"gpus,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	Commands []string          `json:"commands"`
}

type nodeModel struct {
	Name string `json:"name"`
	MoE  bool   `json:"moe"`
}

type nodeStoreURLs struct {
	Metadata string `json:"metadata"`
	Master   string `json:"master"`
	Admin    string `json:"admin"`
}

type nodeTimeoutsJSON struct {
	Rendezvous string `json:"rendezvous"`
	Lookup     string `json:"lookup"`
	Store      string `json:"store"`
	StoreStart string `json:"store_start,omitempty"`
}

// nodeEnvConfig is where simnode reads its config (simnode.EnvConfig).
const nodeEnvConfig = "WIDETP_NODE_CONFIG"

// nodeSpec is node n of s: simnode with its config — the node's commands and GPUs, the scenario's
// model and resolved profile, the environment layered (scenario, then node), the scenario name as
// the seed (explain seeds the model with it, so engine_ids match the prediction), the store by its
// host name, and the run's bounds.
func nodeSpec(s *scenarios.Scenario, n scenarios.Node, t NodeTimeouts, plan *vllm.NodePlan) (NodeSpec, error) {
	url := func(port int) string { return "http://" + StoreHost + ":" + strconv.Itoa(port) }
	cfg := nodeConfig{
		Host:     n.Host,
		GPUs:     n.GPUs,
		Commands: n.Commands,
		Model:    nodeModel{Name: s.Model.Name, MoE: s.Model.MoE},
		Profile:  s.Resolved,
		Env:      s.Environ(n),
		Seed:     s.Name,
		Store:    nodeStoreURLs{Metadata: url(storeMetadataPort), Master: url(storeMasterPort), Admin: url(storeAdminPort)},
		Timeouts: nodeTimeoutsJSON{Rendezvous: t.Rendezvous.String(), Lookup: t.Lookup.String(), Store: t.Store.String()},
		Plan:     plan,
	}
	for _, m := range s.Nodes {
		cfg.Deployment = append(cfg.Deployment, nodeDeployment{Host: m.Host, GPUs: m.GPUs, Env: s.Environ(m), Commands: m.Commands})
	}
	for _, st := range s.Faults {
		if st.Action == scenarios.ActStealPort && strings.HasPrefix(st.Target, n.Host+"/") {
			cfg.Steals = append(cfg.Steals, nodeSteal{Process: st.Target, Channel: st.Channel})
		}
	}
	if t.StoreStart > 0 {
		cfg.Timeouts.StoreStart = t.StoreStart.String()
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return NodeSpec{}, fmt.Errorf("node %s: encode its config: %w", n.Host, err)
	}
	return NodeSpec{
		Host:    n.Host,
		Program: Widetp,
		Args:    []string{"node"},
		Env:     map[string]string{nodeEnvConfig: string(b)},
		Ready:   nodeReady,
	}, nil
}
