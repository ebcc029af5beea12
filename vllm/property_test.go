package vllm

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/widetp/widetp/report"
)

// launch is a generated deployment: the per-node command lines a user would write for one valid
// launch path.
type launch struct {
	desc  string
	moe   bool
	ws    int // TP * PP, the world size of a replica
	dp    int
	nodes []Node
}

// genLaunch draws a valid launch path: TP, PP, GPUs a node, D, and an LB mode among those vLLM
// supports for the model kind (external DP only for MoE under main; dense wide-TP only with one
// replica, since the followers of a dense DP > 1 replica keep DP > 1 while its head collapses to 1).
func genLaunch(t *rapid.T) launch {
	moe := rapid.Bool().Draw(t, "moe")
	gpus := rapid.SampledFrom([]int{4, 8}).Draw(t, "gpus")
	tp := rapid.SampledFrom([]int{1, 2, 4, 8, 16}).Draw(t, "tp")
	pp := rapid.SampledFrom([]int{1, 2}).Draw(t, "pp")
	port := rapid.IntRange(0, 2).Draw(t, "lookup_rpc_port")
	kv := fmt.Sprintf(`--kv-transfer-config '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both","kv_connector_extra_config":{"lookup_rpc_port":%d}}'`, port)
	ws := tp * pp
	base := fmt.Sprintf("vllm serve org/M -tp %d -pp %d --data-parallel-address h0 %s", tp, pp, kv)
	l := launch{moe: moe, ws: ws}
	host := func(i int) string { return fmt.Sprintf("h%d", i) }
	if ws > gpus {
		perReplica := ws / gpus
		d := 1
		if moe {
			d = rapid.IntRange(1, 3).Draw(t, "dp")
		}
		modes := []string{"internal"}
		if moe && d > 1 {
			modes = append(modes, "external", "start-rank")
		}
		mode := rapid.SampledFrom(modes).Draw(t, "mode")
		l.dp, l.desc = d, fmt.Sprintf("wide-TP %s moe=%v gpus=%d tp=%d pp=%d dp=%d", mode, moe, gpus, tp, pp, d)
		nnodes := d * perReplica
		for k := 0; k < nnodes; k++ {
			r, head := k/perReplica, k%perReplica == 0
			cmd := fmt.Sprintf("%s -dp %d --nnodes %d --node-rank %d --master-addr h0", base, d, nnodes, k)
			switch mode {
			case "internal":
				if k > 0 {
					cmd += " --headless"
				}
			case "external":
				cmd += fmt.Sprintf(" --data-parallel-rank %d", r)
				if !head {
					cmd += " --headless"
				}
			case "start-rank":
				// Replica 0's nodes too: without it (or, before PR #47692, with start rank 0) rank
				// 0's front end runs internal LB and refuses replica 1's non-headless engine
				// (vllm/v1/engine/utils.py wait_for_engine_startup).
				cmd += fmt.Sprintf(" --data-parallel-start-rank %d", r)
				if !head {
					cmd += " --headless"
				}
			}
			l.nodes = append(l.nodes, Node{Host: host(k), GPUs: gpus, Commands: []string{cmd}})
		}
		return l
	}
	perNode := rapid.IntRange(1, gpus/ws).Draw(t, "replicas per node")
	nnodes := rapid.IntRange(1, 3).Draw(t, "nodes")
	d := perNode * nnodes
	modes := []string{"internal"}
	if d > 1 {
		// Hybrid and external LB need DP > 1 (ParallelConfig rejects external LB with DP 1).
		modes = append(modes, "hybrid")
	}
	if moe && d > 1 {
		modes = append(modes, "external", "offline")
		if perNode >= 2 && d > 1 {
			modes = append(modes, "multi-port")
		}
	}
	if nnodes == 1 {
		modes = append(modes, "ray")
	}
	mode := rapid.SampledFrom(modes).Draw(t, "mode")
	l.dp, l.desc = d, fmt.Sprintf("%s moe=%v gpus=%d tp=%d pp=%d nodes=%d per-node=%d", mode, moe, gpus, tp, pp, nnodes, perNode)
	for i := 0; i < nnodes; i++ {
		var cmds []string
		start := i * perNode
		switch mode {
		case "internal":
			cmd := fmt.Sprintf("%s -dp %d -dpl %d", base, d, perNode)
			if i > 0 {
				cmd += fmt.Sprintf(" --headless --data-parallel-start-rank %d", start)
			}
			cmds = append(cmds, cmd)
		case "hybrid":
			cmd := fmt.Sprintf("%s -dp %d -dpl %d", base, d, perNode)
			if i == 0 {
				cmd += " -dph"
			} else {
				cmd += fmt.Sprintf(" --data-parallel-start-rank %d", start)
			}
			cmds = append(cmds, cmd)
		case "external":
			for j := 0; j < perNode; j++ {
				cmds = append(cmds, fmt.Sprintf("%s -dp %d --data-parallel-rank %d --port %d", base, d, start+j, 8000+j))
			}
		case "offline":
			for j := 0; j < perNode; j++ {
				cmds = append(cmds, fmt.Sprintf("VLLM_DP_SIZE=%d VLLM_DP_RANK=%d VLLM_DP_RANK_LOCAL=%d VLLM_DP_MASTER_IP=h0 VLLM_DP_MASTER_PORT=13345 %s --port %d",
					d, start+j, j, base, 8000+j))
			}
		case "multi-port":
			cmds = append(cmds, fmt.Sprintf("%s -dp %d -dpl %d -dpm --data-parallel-start-rank %d", base, d, perNode, start))
		case "ray":
			cmds = append(cmds, fmt.Sprintf("%s -dp %d --data-parallel-backend ray", base, d))
		}
		l.nodes = append(l.nodes, Node{Host: host(i), GPUs: gpus, Commands: cmds})
	}
	return l
}

func predictLaunch(t *rapid.T, l launch, profile string) []report.Process {
	procs, err := Predict(Deployment{Name: "prop", Model: Model{Name: "org/M", MoE: l.moe}, Profile: profileOf(t, profile), Seed: "s", Nodes: l.nodes})
	if err != nil {
		t.Fatalf("%s: Predict: %v", l.desc, err)
	}
	return procs
}

// replicas groups processes by Replica ("" excluded).
func replicas(procs []report.Process) map[string][]report.Process {
	m := map[string][]report.Process{}
	for _, p := range procs {
		if p.Replica != "" {
			m[p.Replica] = append(m[p.Replica], p)
		}
	}
	return m
}

// TestPropertyRanksCoverTheReplica: under every profile, the worker ranks of a replica cover
// 0..world_size-1 exactly once (MultiprocExecutor: global_start_rank = local_world_size *
// node_rank_within_dp), and Predict is deterministic.
func TestPropertyRanksCoverTheReplica(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := genLaunch(t)
		profile := rapid.SampledFrom([]string{"main", "pre-48061"}).Draw(t, "profile")
		procs := predictLaunch(t, l, profile)
		if again := predictLaunch(t, l, profile); !reflect.DeepEqual(procs, again) {
			t.Fatalf("%s: Predict is not deterministic", l.desc)
		}
		groups := replicas(procs)
		if len(groups) != l.dp {
			t.Fatalf("%s: %d replicas, want %d", l.desc, len(groups), l.dp)
		}
		for name, g := range groups {
			var ranks []int
			for _, p := range g {
				if p.Role == report.RoleWorker {
					ranks = append(ranks, *p.Rank)
				}
			}
			sort.Ints(ranks)
			for i, r := range ranks {
				if r != i {
					t.Fatalf("%s: replica %s ranks %v, want 0..%d", l.desc, name, ranks, l.ws-1)
				}
			}
			if len(ranks) != l.ws {
				t.Fatalf("%s: replica %s has %d workers, want %d", l.desc, name, len(ranks), l.ws)
			}
		}
	})
}

// TestPropertyMainIsHealthy: under `main`, every valid launch path runs (no crash, no failed
// barrier), every process of a replica holds the engine core's data_parallel_index as its
// Mooncake DP index and one engine_id, replicas have distinct DP indexes and engine_ids, no two
// live lookup servers share a path on one host, and each engine core's client computes its own
// replica's server path and is served by it (spec §5 after PR #48061).
func TestPropertyMainIsHealthy(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := genLaunch(t)
		procs := predictLaunch(t, l, "main")
		for _, p := range procs {
			if p.Exit != nil {
				t.Fatalf("%s: %s exited: %s", l.desc, p.ID, exitText(p))
			}
		}
		indexes, engineIDs := map[int]string{}, map[string]string{}
		for name, g := range replicas(procs) {
			var engines, servers []report.Process
			for _, p := range g {
				switch {
				case p.Role == report.RoleEngineCore || p.Role == report.RoleRayActor:
					engines = append(engines, p)
				case p.LookupRole == report.LookupServer:
					servers = append(servers, p)
				}
			}
			if len(engines) != 1 || len(servers) != 1 {
				t.Fatalf("%s: replica %s has %d engine cores and %d lookup servers", l.desc, name, len(engines), len(servers))
			}
			ec, srv := engines[0], servers[0]
			if prev, dup := indexes[ec.DataParallelIndex]; dup {
				t.Fatalf("%s: replicas %s and %s share DP index %d", l.desc, prev, name, ec.DataParallelIndex)
			}
			indexes[ec.DataParallelIndex] = name
			if prev, dup := engineIDs[ec.EngineID]; dup {
				t.Fatalf("%s: replicas %s and %s share engine_id %s", l.desc, prev, name, ec.EngineID)
			}
			engineIDs[ec.EngineID] = name
			for _, p := range g {
				if p.Role == report.RoleHeadless {
					continue
				}
				if p.MooncakeDPIndex == nil || *p.MooncakeDPIndex != ec.DataParallelIndex {
					t.Fatalf("%s: %s mooncake index %s, replica's data_parallel_index %d", l.desc, p.ID, optStr(p.MooncakeDPIndex), ec.DataParallelIndex)
				}
				if p.EngineID != ec.EngineID {
					t.Fatalf("%s: %s engine_id %s, replica's %s", l.desc, p.ID, p.EngineID, ec.EngineID)
				}
			}
			if ec.LookupPath != srv.LookupPath || ec.Host != srv.Host {
				t.Fatalf("%s: client %s at %s:%s, server %s at %s:%s", l.desc, ec.ID, ec.Host, ec.LookupPath, srv.ID, srv.Host, srv.LookupPath)
			}
			if ec.Lookup == nil || ec.Lookup.ServedBy != srv.ID {
				t.Fatalf("%s: %s lookup %+v, want served by %s", l.desc, ec.ID, ec.Lookup, srv.ID)
			}
		}
		for i := 0; i < l.dp; i++ {
			if _, ok := indexes[i]; !ok {
				t.Fatalf("%s: no replica has DP index %d", l.desc, i)
			}
		}
		paths := map[string]string{}
		for _, p := range procs {
			if p.LookupRole == report.LookupServer && p.Live() {
				k := p.Host + " " + p.LookupPath
				if prev, dup := paths[k]; dup {
					t.Fatalf("%s: %s and %s bind %s", l.desc, prev, p.ID, k)
				}
				paths[k] = p.ID
			}
			for _, r := range p.Rendezvous {
				if r.Error != "" {
					t.Fatalf("%s: %s rendezvous %s: %s", l.desc, p.ID, r.Address, r.Error)
				}
			}
		}
	})
}

// TestPropertyLegacyOnlyBreaksLocalEnginesOnly: under pre-48061 the Mooncake index differs from
// data_parallel_index only for local_engines_only processes, and only they can crash computing
// it (mooncake_utils.py get_mooncake_dp_engine_index before PR #48061).
func TestPropertyLegacyOnlyBreaksLocalEnginesOnly(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := genLaunch(t)
		procs := predictLaunch(t, l, "pre-48061")
		for _, p := range procs {
			if p.LocalEnginesOnly {
				continue
			}
			if p.MooncakeDPIndex != nil && *p.MooncakeDPIndex != p.DataParallelIndex {
				t.Fatalf("%s: %s is not local_engines_only but uses index %d, not %d", l.desc, p.ID, *p.MooncakeDPIndex, p.DataParallelIndex)
			}
			if p.Exit != nil && strings.HasPrefix(p.Exit.Error, "AssertionError") && p.Exit.Error == "AssertionError" {
				t.Fatalf("%s: %s asserts without local_engines_only", l.desc, p.ID)
			}
		}
	})
}
