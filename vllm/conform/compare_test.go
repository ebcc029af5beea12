package conform

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/scenarios"
	"github.com/widetp/widetp/vllm"
)

func modelPlans(t *testing.T, d vllm.Deployment) []*vllm.NodePlan {
	t.Helper()
	plans, err := vllm.ModelPlanner{}.PlanDeployment(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	return plans
}

// clone deep-copies plans through their JSON contract.
func clone(t *testing.T, plans []*vllm.NodePlan) []*vllm.NodePlan {
	t.Helper()
	b, err := json.Marshal(plans)
	if err != nil {
		t.Fatal(err)
	}
	var out []*vllm.NodePlan
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func deployment(t *testing.T) vllm.Deployment {
	prof, _ := vllm.ProfileNamed("main")
	return Generate(len(launchPaths), "compare", prof)[0] // one node, internal LB
}

func TestIdenticalPlansAgree(t *testing.T) {
	for _, d := range Generate(len(launchPaths), "identical", mustProfile(t)) {
		p := modelPlans(t, d)
		var c Counts
		if ds := Compare(d.Name, clone(t, p), p, &c); len(ds) > 0 {
			t.Errorf("%s: identical plans disagree: %+v", d.Name, ds)
		}
		if c.Processes == 0 || c.Fields <= c.Processes {
			t.Errorf("%s: counted %+v", d.Name, c)
		}
	}
}

func mustProfile(t *testing.T) vllm.Profile {
	prof, err := vllm.ProfileNamed("main")
	if err != nil {
		t.Fatal(err)
	}
	return prof
}

func TestAChangedFieldIsOneDisagreement(t *testing.T) {
	d := deployment(t)
	want := modelPlans(t, d)
	got := clone(t, want)
	eng := got[0].Commands[0].Children[0]
	eng.Identity.DataParallelIndex += 7
	var c Counts
	ds := Compare(d.Name, got, want, &c)
	if len(ds) != 1 || ds[0].Process != eng.Identity.ID || ds[0].Field != "data_parallel_index" || ds[0].Area != "identity" {
		t.Fatalf("disagreements = %+v, want one on %s data_parallel_index", ds, eng.Identity.ID)
	}
}

// Addresses compare on the channels the probe derives: a different port is one disagreement on
// that channel; a different uuid4 in an ipc path (each planner draws its own) is none; a channel
// the probe does not derive is not compared.
func TestAddressesCompareOnTheProbesChannels(t *testing.T) {
	d := deployment(t)
	want := modelPlans(t, d)
	front := func(plans []*vllm.NodePlan) *vllm.ProcessPlan { return plans[0].Commands[0] }
	find := func(p *vllm.ProcessPlan, channel string) *vllm.AddressPlan {
		for i := range p.Addresses {
			if p.Addresses[i].Channel == channel {
				return &p.Addresses[i]
			}
		}
		t.Fatalf("%s has no %s address: %+v", p.Identity.ID, channel, p.Addresses)
		return nil
	}

	got := clone(t, want)
	find(front(got), "api-server").Endpoint = "tcp://0.0.0.0:9999"
	var c Counts
	ds := Compare(d.Name, got, want, &c)
	if len(ds) != 1 || ds[0].Field != "addresses.api-server" || ds[0].Area != "address" || !strings.Contains(ds[0].VLLM, ":9999") {
		t.Errorf("a moved API server port: disagreements %+v, want one on addresses.api-server", ds)
	}

	got = clone(t, want)
	io := find(front(got), "engine-io")
	if !strings.HasPrefix(io.Endpoint, "ipc://") {
		t.Fatalf("engine-io of a one-node launch is %s, want an ipc path", io.Endpoint)
	}
	io.Endpoint = io.Endpoint[:strings.LastIndex(io.Endpoint, "/")+1] + "00000000-0000-4000-8000-000000000000"
	front(got).Addresses = append(front(got).Addresses, vllm.AddressPlan{Address: report.Address{Channel: "nixl-side-channel", Role: report.AddressBind, Endpoint: "tcp://h0:5600"}})
	if ds := Compare(d.Name, got, want, &c); len(ds) != 0 {
		t.Errorf("another uuid4 and an uncompared channel: disagreements %+v, want none", ds)
	}
}

func TestAMissingProcessIsAnExistsDisagreement(t *testing.T) {
	d := deployment(t)
	want := modelPlans(t, d)
	got := clone(t, want)
	top := got[0].Commands[0]
	gone := top.Children[len(top.Children)-1]
	top.Children = top.Children[:len(top.Children)-1]
	var c Counts
	ds := Compare(d.Name, got, want, &c)
	found := false
	for _, x := range ds {
		found = found || x.Process == gone.Identity.ID && x.Field == "exists" && x.VLLM == "absent"
	}
	if !found {
		t.Fatalf("no exists disagreement for %s in %+v", gone.Identity.ID, ds)
	}
}

// Host-local rendezvous ports are a simulation convention: two planners that number the slots
// differently but put the same processes there agree; one that splits a barrier does not.
func TestLocalAddressesCompareByStructure(t *testing.T) {
	d := deployment(t)
	want := modelPlans(t, d)
	renumber := func(plans []*vllm.NodePlan, f func(addr string) string) {
		var walk func(p *vllm.ProcessPlan)
		walk = func(p *vllm.ProcessPlan) {
			for i := range p.Rendezvous {
				p.Rendezvous[i].Address = f(p.Rendezvous[i].Address)
			}
			// A slot names the addresses met there too (their key, a tcp endpoint).
			for i := range p.Addresses {
				a := &p.Addresses[i]
				a.Key = f(a.Key)
				if rest, ok := strings.CutPrefix(a.Endpoint, "tcp://"); ok {
					a.Endpoint = "tcp://" + f(rest)
				}
			}
			for _, c := range p.Children {
				walk(c)
			}
		}
		for _, np := range plans {
			for _, top := range np.Commands {
				walk(top)
			}
		}
	}
	shifted := clone(t, want)
	renumber(shifted, func(a string) string {
		if isLocal(a, "h0") {
			return a + "0" // h0:40001 -> h0:400010: another slot, same members
		}
		return a
	})
	var c Counts
	for _, x := range Compare(d.Name, shifted, want, &c) {
		if x.Field != "replica" {
			t.Errorf("renumbered slots disagree: %+v", x)
		}
	}
}

// Generate is reproducible from its seed, covers every launch path, and what it writes loads back
// as the same deployment.
func TestGenerateReproducesAndRoundTrips(t *testing.T) {
	prof := mustProfile(t)
	a := Generate(2*len(launchPaths), "seed-a", prof)
	b := Generate(2*len(launchPaths), "seed-a", prof)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("Generate is not reproducible from its seed")
	}
	if c := Generate(2*len(launchPaths), "seed-b", prof); reflect.DeepEqual(a, c) {
		t.Fatal("two seeds generated the same deployments")
	}
	dir := t.TempDir()
	if err := WriteScenarios(dir, a, "main"); err != nil {
		t.Fatal(err)
	}
	for i, d := range a {
		if want := LaunchPaths()[i%len(launchPaths)]; filepath.Ext(d.Name) != "" || !contains(d.Name, want) {
			t.Errorf("deployment %d is %s, want launch path %s", i, d.Name, want)
		}
		s, err := scenarios.Load(filepath.Join(dir, d.Name+".yaml"))
		if err != nil {
			t.Fatalf("written scenario does not load: %v", err)
		}
		got := s.Deployment()
		for j := range got.Nodes {
			if len(got.Nodes[j].Env) == 0 {
				got.Nodes[j].Env = d.Nodes[j].Env
			}
		}
		if !reflect.DeepEqual(got.Nodes, d.Nodes) || got.Model != d.Model {
			t.Errorf("%s: written and loaded back differ:\n got %+v\nwant %+v", d.Name, got.Nodes, d.Nodes)
		}
	}
}

func contains(s, sub string) bool { return len(s) >= len(sub) && s[len(s)-len(sub):] == sub }

// Every generated deployment of many seeds writes a scenario file that loads (a disagreement
// must replay with widetp explain).
func TestGeneratedScenariosLoad(t *testing.T) {
	prof := mustProfile(t)
	for _, seed := range []string{"1", "2", "3", "4", "5"} {
		deps := Generate(5*len(launchPaths), seed, prof)
		dir := t.TempDir()
		if err := WriteScenarios(dir, deps, "main"); err != nil {
			t.Fatal(err)
		}
		for _, d := range deps {
			if _, err := scenarios.Load(filepath.Join(dir, d.Name+".yaml")); err != nil {
				t.Errorf("seed %s: %v", seed, err)
			}
		}
	}
}

// A headless follower without --data-parallel-start-rank starts engines 0 and 1, which the head
// runs itself: their HELLOs carry engine indexes already in use on the head's handshake ROUTER,
// which rejects the second peer of an identity, so the front end never reads them and refuses
// nothing (vLLM's wait_for_engine_startup, vllm/v1/engine/utils.py; the probe feeds the front
// end's own engines first). Only HELLOs that reach the front end count.
func TestHandshakeRefusalsCountOnlyTheHELLOsThatArrive(t *testing.T) {
	prof, _ := vllm.ProfileNamed("main")
	const flags = " -tp 2 -dp 4 --data-parallel-size-local 2 --data-parallel-address h0 --data-parallel-rpc-port 13345"
	d := vllm.Deployment{Name: "follower-without-start-rank", Profile: prof, Seed: "s",
		Model: vllm.Model{Name: "deepseek-ai/DeepSeek-V3", MoE: true},
		Nodes: []vllm.Node{
			{Host: "h0", GPUs: 8, Commands: []string{"vllm serve deepseek-ai/DeepSeek-V3" + flags}},
			{Host: "h1", GPUs: 8, Commands: []string{"vllm serve deepseek-ai/DeepSeek-V3 --headless" + flags}},
		}}
	plans := modelPlans(t, d)
	var c Counts
	if ds := CompareHandshakes(d, plans, map[string]string{}, &c); len(ds) > 0 {
		t.Errorf("refusals of HELLOs the ROUTER rejects: %+v", ds)
	}
	if c.Fields == 0 {
		t.Fatal("no handshake compared")
	}
	// Had vLLM read a rejected HELLO and refused it, the model, which does not read it, would
	// disagree.
	ds := CompareHandshakes(d, plans, map[string]string{"h0/0/api-server-0": "RuntimeError: HELLO message from remote engine 0, expected it to be local"}, &c)
	if len(ds) != 1 {
		t.Errorf("a refusal the model does not find: %d disagreements, want 1", len(ds))
	}
}

// Two commands of one host that serve their handshake at the same tcp address: the second to bind
// fails with ZMQError (EADDRINUSE) before it reads any HELLO (launch_core_engines binds it first,
// vllm/v1/engine/utils.py), so the first command's engine, which dials that address, is refused by
// nobody there; the model's paper execution of the plans (PredictPlans) names the front end that
// failed. A refusal vLLM did raise there still counts.
func TestAFrontEndThatCannotBindItsHandshakeRefusesNothing(t *testing.T) {
	for _, lines := range [][]string{
		// The second front end fails: it would have refused the first one's local engine.
		{"VLLM_PORT=20000 vllm serve deepseek-ai/DeepSeek-V3 -tp 2 -dp 4 --data-parallel-size-local 1 --data-parallel-hybrid-lb --port 8000",
			"VLLM_PORT=20000 vllm serve deepseek-ai/DeepSeek-V3 -tp 2 -dp 4 --data-parallel-size-local 0 --port 8001"},
		// The second front end fails before it starts its local engine, which the first one
		// would have refused.
		{"VLLM_PORT=20000 vllm serve deepseek-ai/DeepSeek-V3 -tp 2 -dp 4 --data-parallel-size-local 0 --data-parallel-hybrid-lb --port 8000",
			"VLLM_PORT=20000 vllm serve deepseek-ai/DeepSeek-V3 -tp 2 -dp 4 --data-parallel-rank 0 --port 8001"},
	} {
		frontEndThatCannotBindItsHandshake(t, lines)
	}
}

func frontEndThatCannotBindItsHandshake(t *testing.T, lines []string) {
	t.Helper()
	prof, _ := vllm.ProfileNamed("main")
	d := vllm.Deployment{Name: "two-front-ends-one-handshake", Profile: prof, Seed: "s",
		Model: vllm.Model{Name: "deepseek-ai/DeepSeek-V3", MoE: true},
		Nodes: []vllm.Node{{Host: "h0", GPUs: 16, Commands: lines}}}
	plans := modelPlans(t, d)
	procs, err := vllm.PredictPlans(d, plans)
	if err != nil {
		t.Fatal(err)
	}
	failed := ""
	for _, p := range procs {
		if p.Exit != nil && strings.HasPrefix(p.Exit.Error, "zmq.error.ZMQError: Address already in use") {
			failed = p.ID
		}
	}
	if failed == "" {
		t.Fatal("no front end failed to bind its handshake: the deployment no longer collides")
	}
	var c Counts
	if ds := CompareHandshakes(d, plans, map[string]string{}, &c); len(ds) > 0 {
		t.Errorf("%s: refusals of HELLOs that are never sent or read: %+v", lines, ds)
	}
	ds := CompareHandshakes(d, plans, map[string]string{failed: "RuntimeError: HELLO message from local engine 0, expected it to be remote"}, &c)
	if len(ds) != 1 {
		t.Errorf("%s: a refusal vLLM raised where the model finds none: %d disagreements, want 1", lines, len(ds))
	}
}
