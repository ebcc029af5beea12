package harness

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/scenarios"
	"github.com/widetp/widetp/simnode"
)

const twoNodes = `name: two-nodes
description: one replica of TP 4 over two 2-GPU hosts (vLLM's multi-node docs)
profile: pre-48061
model: {name: org/moe, moe: true}
gpus_per_node: 2
env: {VLLM_RPC_BASE_PATH: /tmp, MOONCAKE_CONFIG_PATH: /etc/mooncake.json}
nodes:
  - host: r0-head
    env: {VLLM_RPC_BASE_PATH: /run}
    command: vllm serve org/moe --tensor-parallel-size 4 --enable-expert-parallel --nnodes 2 --node-rank 0 --master-addr r0-head
  - host: r0-follower
    command: vllm serve org/moe --tensor-parallel-size 4 --enable-expert-parallel --nnodes 2 --node-rank 1 --master-addr r0-head --headless
store: {flavor: python}
`

func parseScenario(t *testing.T, yaml string) *scenarios.Scenario {
	t.Helper()
	s, err := scenarios.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The node config the harness writes is simnode's Config: it decodes strictly (unknown fields are
// errors there) into the same values — host, GPUs, commands, model, the resolved profile, the
// environment layered scenario-then-node, the scenario name as seed, the store by its host name,
// the run's bounds.
func TestNodeConfigIsSimnodesConfig(t *testing.T) {
	s := parseScenario(t, twoNodes)
	cfg := clusterDefaults(s)
	spec, err := nodeSpec(s, s.Nodes[0], cfg.timeouts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Host != "r0-head" || spec.Program.Name != "widetp" || strings.Join(spec.Args, " ") != "node" || !spec.Ready.MatchString(simnode.ReadyLine+"r0-head up: 1 commands") {
		t.Errorf("spec %+v", spec)
	}
	got, err := simnode.ParseConfig([]byte(spec.Env[simnode.EnvConfig]), "harness", func(string) string { return "" })
	if err != nil {
		t.Fatalf("simnode refuses the harness's config: %v", err)
	}
	if got.Host != "r0-head" || got.GPUs != 2 || len(got.Commands) != 1 || got.Model.Name != "org/moe" || !got.Model.MoE || got.Seed != "two-nodes" {
		t.Errorf("config %+v", got)
	}
	if got.Env["VLLM_RPC_BASE_PATH"] != "/run" || got.Env["MOONCAKE_CONFIG_PATH"] != "/etc/mooncake.json" {
		t.Errorf("env not layered scenario then node: %v", got.Env)
	}
	if got.Store.Admin != "http://"+StoreHost+":9003" || got.Store.Metadata != "http://"+StoreHost+":8080" || got.Store.Master != "http://"+StoreHost+":50052" {
		t.Errorf("store URLs %+v", got.Store)
	}
	if time.Duration(got.Timeouts.Rendezvous) != cfg.timeouts.Rendezvous || time.Duration(got.Timeouts.Lookup) != 2*time.Second+4*20*time.Millisecond {
		t.Errorf("timeouts %+v, want %+v", got.Timeouts, cfg.timeouts)
	}
	var profile struct {
		MooncakeDPIndex string `json:"mooncake_dp_index"`
	}
	var raw struct {
		Profile json.RawMessage `json:"profile"`
	}
	if err := json.Unmarshal([]byte(spec.Env[simnode.EnvConfig]), &raw); err != nil || json.Unmarshal(raw.Profile, &profile) != nil || profile.MooncakeDPIndex != "legacy" {
		t.Errorf("profile %s: want pre-48061's legacy Mooncake index", raw.Profile)
	}

	store := storeSpec(s)
	if want := "store -flavor=python -metadata-addr=$(WIDETP_LISTEN_IP):8080 -master-addr=$(WIDETP_LISTEN_IP):50052 -admin-addr=$(WIDETP_LISTEN_IP):9003"; strings.Join(store.Args, " ") != want {
		t.Errorf("store args %q", store.Args)
	}
}

// Bounds grow with the deployment: a rendezvous waits for every member's start (the engine starts
// hosts a few at a time, and each GPU's process takes its share of the cores), and a lookup's
// answer comes from a process that shares the cores with every other.
func TestClusterBoundsFollowTheScenario(t *testing.T) {
	small := clusterDefaults(parseScenario(t, twoNodes))
	// Two nodes of 2 GPUs and the store: 3 hosts, 4 GPUs.
	if small.timeouts.Rendezvous != 10*time.Second+4*20*time.Millisecond+3*time.Second || small.settle <= 2*small.timeouts.Rendezvous {
		t.Errorf("two 2-GPU nodes: %+v", small)
	}
	if small.timeouts.Lookup != 2*time.Second+4*20*time.Millisecond {
		t.Errorf("two 2-GPU nodes: lookup bound %v", small.timeouts.Lookup)
	}
	cfg := clusterConfig{timeouts: NodeTimeouts{Rendezvous: time.Second, Lookup: time.Second, Store: time.Second}}
	if err := cfg.validate(parseScenario(t, twoNodes)); err != nil || cfg.settle != settleBound(cfg.timeouts, 4) {
		t.Errorf("settle %v, %v", cfg.settle, err)
	}
	bad := clusterConfig{timeouts: NodeTimeouts{Rendezvous: 0, Lookup: time.Second, Store: time.Second}}
	if err := bad.validate(parseScenario(t, twoNodes)); err == nil || !strings.Contains(err.Error(), "rendezvous timeout") {
		t.Errorf("zero rendezvous bound: %v", err)
	}
}

func TestProcessesSortByNodeThenNaturally(t *testing.T) {
	ids := []string{"b/0/engine-core-0/worker-10", "a/0/api-server-0", "b/0/engine-core-0/worker-2", "b/0/engine-core-0", "c/0/x", "a/1/api-server-0"}
	procs := make([]report.Process, len(ids))
	for i, id := range ids {
		procs[i] = report.Process{ID: id, Host: strings.SplitN(id, "/", 2)[0]}
	}
	SortProcesses(procs, map[string]int{"b": 0, "a": 1})
	var got []string
	for _, p := range procs {
		got = append(got, p.ID)
	}
	want := []string{"b/0/engine-core-0", "b/0/engine-core-0/worker-2", "b/0/engine-core-0/worker-10", "a/0/api-server-0", "a/1/api-server-0", "c/0/x"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("order %v, want %v", got, want)
	}
}

func TestSettleTimeoutNamesWhatEachNodeWaitsOn(t *testing.T) {
	e := &SettleTimeoutError{Bound: time.Minute, Pending: map[string][]string{"r1": nil, "r0": {"r0/0/engine-core-0/worker-3"}}}
	want := "not every node settled within 1m0s: r0 (waiting on r0/0/engine-core-0/worker-3); r1 (no status posted)"
	if e.Error() != want {
		t.Errorf("%q, want %q", e.Error(), want)
	}
}
