package simnode_test

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/widetp/widetp/check"
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/simnode"
	"github.com/widetp/widetp/simnode/mooncake"
	"github.com/widetp/widetp/vllm"
)

// host is one simulated host of a local run: its own name, loopback address and ipc root.
type host struct {
	name, ip string
	commands []string
}

// deployment is a scenario run for real: one `widetp node` per host on the in-process store.
type deployment struct {
	profile  string
	model    vllm.Model
	gpus     int
	hosts    []host
	timeouts simnode.Timeouts
}

// outcome is what a run observed next to what the model predicts for it.
type outcome struct {
	observed  map[string]report.Process
	predicted map[string]report.Process
	nodes     map[string]*node
	store     *store
}

func (d deployment) run(t *testing.T) *outcome {
	t.Helper()
	profile, err := vllm.ProfileNamed(d.profile)
	if err != nil {
		t.Fatal(err)
	}
	var vnodes []vllm.Node
	var pairs []string
	for _, h := range d.hosts {
		vnodes = append(vnodes, vllm.Node{Host: h.name, GPUs: d.gpus, Commands: h.commands})
		pairs = append(pairs, h.name+"="+h.ip)
	}
	pred, err := vllm.Predict(vllm.Deployment{Name: t.Name(), Model: d.model, Profile: profile, Seed: "1", Nodes: vnodes})
	if err != nil {
		t.Fatal(err)
	}
	o := &outcome{predicted: map[string]report.Process{}, nodes: map[string]*node{}, store: newStore(t)}
	for _, p := range pred {
		o.predicted[p.ID] = p
	}
	for _, h := range d.hosts {
		cfg := o.store.config(h.name)
		cfg.GPUs = d.gpus
		cfg.Commands = h.commands
		cfg.Model = simnode.Model{Name: d.model.Name, MoE: d.model.MoE}
		cfg.Profile = []byte(`"` + d.profile + `"`)
		// Every node knows the whole deployment, as the harness tells it (its peers' commands).
		for _, m := range d.hosts {
			cfg.Deployment = append(cfg.Deployment, simnode.DeploymentNode{Host: m.name, GPUs: d.gpus, Commands: m.commands})
		}
		if d.timeouts.Rendezvous != 0 {
			cfg.Timeouts = d.timeouts
		}
		o.nodes[h.name] = startNode(t, hostEnv{name: h.name, ip: h.ip, hosts: strings.Join(pairs, ",")}, cfg)
	}
	o.observed = o.store.waitRecords(t, "every process the model starts to be ready or gone", func(m map[string]report.Process) bool {
		for id := range o.predicted {
			if !o.startedInPrediction(id) {
				continue
			}
			r, ok := m[id]
			// A process the model ends must have ended; one it keeps must be up. A run that
			// diverges runs into the bound and fails with what it saw.
			if !ok || (o.predicted[id].Exit != nil && r.Exit == nil) || (r.Exit == nil && !r.Ready) {
				return false
			}
		}
		return true
	})
	return o
}

// startedInPrediction: the model's paper run started the process (a child of a process that
// exited before starting it has neither an exit nor a parent alive).
func (o *outcome) startedInPrediction(id string) bool {
	p := o.predicted[id]
	if p.Exit != nil || p.Parent == "" {
		return true
	}
	return o.predicted[p.Parent].Exit == nil
}

func records(m map[string]report.Process) []report.Process {
	out := make([]report.Process, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	report.ResolveLookups(out)
	return out
}

func kinds(procs []report.Process) []report.Kind { return report.KindSet(check.Run(procs)) }

// agreesWithPrediction checks that the run and the model's paper run agree on every violation
// kind and, process by process, on what the checks read: whether it lives, its Mooncake DP index
// and which server answered its lookup. Texts and timings may differ (a real rendezvous times
// out after the node's bound, the paper one after torch's 600 s).
func (o *outcome) agreesWithPrediction(t *testing.T) {
	t.Helper()
	obs, pred := records(o.observed), records(o.predicted)
	if got, want := kinds(obs), kinds(pred); !slices.Equal(got, want) {
		t.Errorf("violation kinds: observed %v, predicted %v", got, want)
	}
	byID := map[string]report.Process{}
	for _, r := range obs {
		byID[r.ID] = r
	}
	for _, p := range pred {
		if !o.startedInPrediction(p.ID) {
			if _, ok := byID[p.ID]; ok {
				t.Errorf("%s ran, the model never starts it", p.ID)
			}
			continue
		}
		r, ok := byID[p.ID]
		if !ok {
			t.Errorf("%s: no record, the model starts it", p.ID)
			continue
		}
		if r.Live() != p.Live() {
			t.Errorf("%s: observed exit %+v, predicted %+v", p.ID, r.Exit, p.Exit)
		}
		if fmt.Sprint(deref(r.MooncakeDPIndex)) != fmt.Sprint(deref(p.MooncakeDPIndex)) {
			t.Errorf("%s: Mooncake DP index %v, predicted %v", p.ID, deref(r.MooncakeDPIndex), deref(p.MooncakeDPIndex))
		}
		if p.Lookup != nil && p.Live() && (r.Lookup == nil || r.Lookup.ServedBy != p.Lookup.ServedBy) {
			t.Errorf("%s: lookup %+v, predicted served by %q", p.ID, r.Lookup, p.Lookup.ServedBy)
		}
	}
	if t.Failed() {
		for _, v := range check.Run(obs) {
			t.Logf("observed: %s", v.Message)
		}
	}
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

const kvStore = `--kv-transfer-config '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both"}'`

// wideTP is one replica of TP 4 over two 2-GPU hosts: a head running `vllm serve` and a
// `--headless` follower (vLLM's multi-node docs: --nnodes/--node-rank/--master-addr).
func wideTP(head, follower bool) []host {
	cmd := func(rank int, extra string) string {
		return fmt.Sprintf("vllm serve org/moe --tensor-parallel-size 4 --enable-expert-parallel --nnodes 2 --node-rank %d --master-addr r0-head --master-port 29500 %s %s", rank, extra, kvStore)
	}
	var hs []host
	if head {
		hs = append(hs, host{name: "r0-head", ip: "127.0.0.2", commands: []string{cmd(0, "")}})
	}
	if follower {
		hs = append(hs, host{name: "r0-follower", ip: "127.0.0.3", commands: []string{cmd(1, "--headless")}})
	}
	return hs
}

var moe = vllm.Model{Name: "org/moe", MoE: true}

// TestWideTPReplicaOverTwoHosts: the head's and the follower's workers form one torch world at
// the head's --master-addr:--master-port; every TP rank reports the replica's DP index.
func TestWideTPReplicaOverTwoHosts(t *testing.T) {
	for _, profile := range []string{"main", "pre-48061"} {
		t.Run(profile, func(t *testing.T) {
			o := deployment{profile: profile, model: moe, gpus: 2, hosts: wideTP(true, true)}.run(t)
			o.agreesWithPrediction(t)
			obs := records(o.observed)
			if v := check.Run(obs); len(v) != 0 {
				t.Errorf("violations in a healthy single-replica deployment: %v", v)
			}
			workers := 0
			for _, r := range obs {
				if r.Role != report.RoleWorker {
					continue
				}
				workers++
				if !r.Ready || r.Segment == "" || len(r.Rendezvous) != 1 || r.Rendezvous[0].Address != "r0-head:29500" {
					t.Errorf("%s: ready %v segment %q rendezvous %+v", r.ID, r.Ready, r.Segment, r.Rendezvous)
				}
			}
			if workers != 4 {
				t.Errorf("%d workers reported, want 4 (TP 4 over two hosts)", workers)
			}
			for name, n := range o.nodes {
				if code := n.stop(); code != simnode.ExitOK {
					t.Errorf("node %s exit %d after SIGTERM", name, code)
				}
			}
		})
	}
}

// TestFollowerWithoutHead: a follower whose head never starts waits for rank 0 at
// --master-addr:--master-port until the rendezvous bound, then every worker raises torch's
// error naming the missing rank 0, and the node exits on its own: rendezvous-failed, no hang.
func TestFollowerWithoutHead(t *testing.T) {
	bound := 2 * time.Second
	start := time.Now()
	o := deployment{profile: "main", model: moe, gpus: 2, hosts: wideTP(false, true),
		timeouts: simnode.Timeouts{Rendezvous: simnode.Duration(bound), Lookup: simnode.Duration(time.Second), Store: simnode.Duration(5 * time.Second)}}.run(t)
	o.agreesWithPrediction(t)
	obs := records(o.observed)
	if ks := kinds(obs); !slices.Contains(ks, report.RendezvousFailed) {
		t.Fatalf("kinds %v, want rendezvous-failed", ks)
	}
	// Both workers give up at the same deadline; whichever the headless process sees first makes
	// it shut the other down (vLLM's WorkerProc.wait_for_ready raises on the first failure), so a
	// worker either reports the time-out or exits cleanly, and at least one reports it.
	timedOut := 0
	for _, r := range obs {
		if r.Role != report.RoleWorker {
			continue
		}
		switch {
		case r.Exit == nil:
			t.Errorf("%s is still up", r.ID)
		case len(r.Rendezvous) == 0 && r.Exit.Code == 0 && r.Exit.Error == "":
			// shut down by its parent while it waited
		case len(r.Rendezvous) == 1 && slices.Equal(r.Rendezvous[0].Missing, []string{"rank 0"}) &&
			r.Rendezvous[0].Error == "torch.distributed.DistNetworkError: The client socket has timed out after 2000ms while trying to connect to (r0-head, 29500)." &&
			r.Exit.Error == r.Rendezvous[0].Error && r.Exit.Code == 1:
			timedOut++
		default:
			t.Errorf("%s: rendezvous %+v exit %+v", r.ID, r.Rendezvous, r.Exit)
		}
	}
	if timedOut == 0 {
		t.Error("no worker reported the rendezvous time-out")
	}
	if code := o.nodes["r0-follower"].wait(); code != simnode.ExitCrashed {
		t.Errorf("node exit %d, want %d (a process crashed)", code, simnode.ExitCrashed)
	}
	// The bound, the node's start and its processes' exits; not torch's 600 s.
	if took := time.Since(start); took > bound+15*time.Second {
		t.Errorf("a missing head took %v to surface (bound %v)", took, bound)
	}
}

// colocated is launch path (c): two external-LB replicas of TP 2 on one 4-GPU host, one
// `vllm serve --data-parallel-rank N` each (vLLM's data-parallel docs for co-located ranks).
func colocated() []host {
	cmd := func(rank, port int) string {
		return fmt.Sprintf("vllm serve org/moe --tensor-parallel-size 2 --enable-expert-parallel --data-parallel-size 2 --data-parallel-rank %d --port %d %s", rank, port, kvStore)
	}
	return []host{{name: "node0", ip: "127.0.0.4", commands: []string{cmd(0, 8000), cmd(1, 8001)}}}
}

// TestColocatedEnginesCollide: before vLLM#48061 both engines use data_parallel_rank_local = 0 as
// their Mooncake DP index, so both rank-0 workers bind ipc:///tmp/lookup_rpc_port_0_host_node0_dp_rank0.
// The second bind silently takes the path over in libzmq, and the first engine's scheduler is
// answered by the second replica's server. With the fix, each engine has its own path.
func TestColocatedEnginesCollide(t *testing.T) {
	cases := []struct {
		profile string
		want    []report.Kind
	}{
		{"main", []report.Kind{}},
		{"pre-48061", []report.Kind{report.DPIndexMismatch, report.LookupMisrouted, report.LookupPathCollision}},
	}
	for _, tc := range cases {
		t.Run(tc.profile, func(t *testing.T) {
			o := deployment{profile: tc.profile, model: moe, gpus: 4, hosts: colocated()}.run(t)
			o.agreesWithPrediction(t)
			obs := records(o.observed)
			if got := kinds(obs); !slices.Equal(got, tc.want) {
				t.Fatalf("kinds %v, want %v", got, tc.want)
			}
			byID := map[string]report.Process{}
			for _, r := range obs {
				byID[r.ID] = r
			}
			first := byID["node0/0/engine-core-0"]
			wantServer := "node0/0/engine-core-0/worker-0"
			if tc.profile == "pre-48061" {
				wantServer = "node0/1/engine-core-1/worker-0"
			}
			if first.Lookup == nil || first.Lookup.ServedBy != wantServer {
				t.Fatalf("engine 0's lookup %+v, want served by %s", first.Lookup, wantServer)
			}
			// The takeover is libzmq's: the first server is alive and bound, it just gets nothing.
			srv0 := byID["node0/0/engine-core-0/worker-0"]
			if srv0.Exit != nil || srv0.BindSeq != 1 || (tc.profile == "pre-48061" && len(srv0.Served) != 0) {
				t.Fatalf("first lookup server: exit %+v bind %d served %v", srv0.Exit, srv0.BindSeq, srv0.Served)
			}
		})
	}
}

// TestEngineFailureStopsItsSiblings: on a host narrowed to 4 GPUs (CUDA_VISIBLE_DEVICES), DP rank
// 1's workers select devices 4-7 and fail (Worker.init_device, vllm/v1/worker/gpu_worker.py); their
// engine core fails, and the front end stops the other engine core at once
// (wait_for_engine_startup, vllm/v1/engine/utils.py). Under MoE DP the surviving engine's workers
// wait in a torch world that spans both engines' workers: they go down with their engine (exit 0,
// as the model has it) instead of timing out in that barrier. The dense twin, whose engines each
// have a world of their own, agrees too.
func TestEngineFailureStopsItsSiblings(t *testing.T) {
	for i, model := range []vllm.Model{{Name: "deepseek-ai/DeepSeek-V3", MoE: true}, {Name: "meta-llama/Llama-3.1-8B-Instruct"}} {
		t.Run(model.Name, func(t *testing.T) {
			h := host{name: fmt.Sprintf("ef%d", i), ip: fmt.Sprintf("127.0.0.%d", 32+i),
				commands: []string{"CUDA_VISIBLE_DEVICES=4,5,6,7 vllm serve " + model.Name + " -tp 2 -pp 2 -dp 2"}}
			o := deployment{profile: "main", model: model, gpus: 8, hosts: []host{h}}.run(t)
			o.agreesWithPrediction(t)
			for w := 0; w < 4; w++ {
				id := fmt.Sprintf("%s/0/engine-core-0/worker-%d", h.name, w)
				if r := o.observed[id]; r.Exit == nil || r.Crashed() {
					t.Errorf("%s: exit %+v, want stopped with its engine", id, r.Exit)
				}
			}
		})
	}
}

// TestSchedulerFailuresAfterTheWorkers: under MoE DP 4 on one host, an ipc KV event endpoint
// cannot be offset past DP index 0 (ZmqEventPublisher, vllm/distributed/kv_events.py), so engine
// cores 1-3 fail when their schedulers are built — after their workers joined the torch world all
// four engines' workers share (vllm/v1/engine/core.py builds the Scheduler after the executor).
// The world completes, engine core 0 comes up, and the run agrees with the model.
func TestSchedulerFailuresAfterTheWorkers(t *testing.T) {
	h := host{name: "sf0", ip: "127.0.0.34",
		commands: []string{`vllm serve deepseek-ai/DeepSeek-V3 -dp 4 --kv-events-config '{"enable_kv_cache_events":true,"endpoint":"ipc:///tmp/kv_events"}'`}}
	o := deployment{profile: "main", model: vllm.Model{Name: "deepseek-ai/DeepSeek-V3", MoE: true}, gpus: 8, hosts: []host{h}}.run(t)
	o.agreesWithPrediction(t)
	for e := 0; e < 4; e++ {
		id := fmt.Sprintf("sf0/0/engine-core-%d/worker-0", e)
		if r := o.observed[id]; !r.Ready || len(r.Rendezvous) == 0 || r.Rendezvous[0].Error != "" {
			t.Errorf("%s: ready %t, rendezvous %+v, want through the torch world", id, r.Ready, r.Rendezvous)
		}
	}
}

// TestSegmentPortsAsPredicted: a worker whose Mooncake local_hostname carries no port draws one in
// 12300–14300 (Mooncake's transfer engine); the run's client and the model's paper execution draw
// it with one generator (vllm.ProcessRand, from the scenario's seed and the process's ID), so every
// worker's segment is the one predicted — also when two hosts share a segment host
// (VLLM_HOST_IP), where equal draws are a real segment-name collision both would show.
func TestSegmentPortsAsPredicted(t *testing.T) {
	if vllm.SegmentPortMin != mooncake.MinPort || vllm.SegmentPortMax != mooncake.MaxPort || vllm.SegmentPortAttempts != mooncake.PortAttempts {
		t.Fatalf("the model draws from %d-%d (%d draws), the client from %d-%d (%d)", vllm.SegmentPortMin, vllm.SegmentPortMax,
			vllm.SegmentPortAttempts, mooncake.MinPort, mooncake.MaxPort, mooncake.PortAttempts)
	}
	line := "VLLM_HOST_IP=10.9.9.9 vllm serve meta-llama/Llama-3.1-8B-Instruct -tp 8 " + kvStore
	o := deployment{profile: "main", model: vllm.Model{Name: "meta-llama/Llama-3.1-8B-Instruct"}, gpus: 8,
		hosts: []host{{name: "sp0", ip: "127.0.0.35", commands: []string{line}}, {name: "sp1", ip: "127.0.0.36", commands: []string{line}}}}.run(t)
	o.agreesWithPrediction(t)
	n := 0
	for id, p := range o.predicted {
		if p.Segment == "" {
			continue
		}
		n++
		if got := o.observed[id].Segment; got != p.Segment {
			t.Errorf("%s registered %q, predicted %q", id, got, p.Segment)
		}
		if !strings.HasPrefix(p.Segment, "10.9.9.9:") {
			t.Errorf("%s: predicted segment %q, want on the segment host 10.9.9.9", id, p.Segment)
		}
	}
	if n != 16 {
		t.Errorf("%d workers with a predicted segment, want 16", n)
	}
}

// TestDialsWaitForTheirHostsBinds: vLLM's NIXL workers dial a peer's side channel only when a
// request names it, after the deployment came up. A decode deployment whose side-channel host is
// left at localhost (VLLM_NIXL_SIDE_CHANNEL_HOST) dials its prefiller at localhost:5600, where its
// own engine core's handshake listener answers (address-misrouted); that listener binds after the
// workers are up (Scheduler.__init__ builds the connector after the executor), so a worker that
// dialled as soon as it was up would find nobody there and report the peer unreachable instead.
func TestDialsWaitForTheirHostsBinds(t *testing.T) {
	pd := func(role string) string {
		return `'{"kv_connector":"NixlConnector","kv_role":"` + role + `"}'`
	}
	o := deployment{profile: "main", model: vllm.Model{Name: "meta-llama/Llama-3.1-8B-Instruct"}, gpus: 8, hosts: []host{
		{name: "pd0", ip: "127.0.0.41", commands: []string{"vllm serve meta-llama/Llama-3.1-8B-Instruct -dp 2 --port 8100 --data-parallel-address pd0 --kv-transfer-config " + pd("kv_producer")}},
		{name: "pd1", ip: "127.0.0.42", commands: []string{"vllm serve meta-llama/Llama-3.1-8B-Instruct -dp 2 --port 8200 --data-parallel-address pd1 --kv-transfer-config " + pd("kv_consumer")}},
	}}.run(t)
	o.agreesWithPrediction(t)
	if got := kinds(records(o.observed)); !slices.Contains(got, report.AddressMisrouted) {
		t.Errorf("no dial was answered by the decode host's own listener; violations %v", got)
	}
}
