package simnode_test

import (
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/widetp/widetp/internal/testport"
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/simnode"
	"github.com/widetp/widetp/vllm"
)

// freePort returns a TCP port free on ip that stays free for the rendezvous master to listen on
// (testport: outside the kernel's ephemeral range).
func freePort(t testing.TB, ip string) int { return testport.Free(t, ip) }

// enginePlan is one engine core of host with `workers` workers meeting at addr, the rank-0 worker
// binding the lookup path the engine core connects to: the process tree run_engine_core starts
// (vllm/v1/engine/core.py, vllm/v1/executor/multiproc_executor.py), built by hand.
func enginePlan(host string, cmd, dp int, addr, lookupPath string, workers int) *vllm.ProcessPlan {
	id := host + "/" + strconv.Itoa(cmd) + "/engine-core-" + strconv.Itoa(dp)
	replica := "replica-" + strconv.Itoa(dp)
	ec := &vllm.ProcessPlan{
		Identity: report.Process{ID: id, Host: host, Command: cmd, Role: report.RoleEngineCore, Replica: replica,
			DataParallelIndex: dp, DataParallelSize: 1, LookupPath: lookupPath, LookupRole: report.LookupClient},
		ConnectsLookup: true,
		ChildFailure:   "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): " + vllm.ChildFailurePlaceholder,
	}
	for r := range workers {
		w := &vllm.ProcessPlan{
			Identity: report.Process{ID: id + "/worker-" + strconv.Itoa(r), Parent: id, Host: host, Command: cmd, Role: report.RoleWorker,
				Replica: replica, DataParallelIndex: dp, MooncakeDPIndex: report.Int(dp), Rank: report.Int(r), TPRank: report.Int(r), PPRank: report.Int(0)},
			Rendezvous:       []vllm.RendezvousPlan{{Kind: "workers", Address: addr, WorldSize: workers, Rank: r}},
			RegistersSegment: true,
			SegmentHost:      host,
		}
		if r == 0 {
			w.BindsLookup = true
			w.Identity.LookupPath = lookupPath
			w.Identity.LookupRole = report.LookupServer
		}
		ec.Children = append(ec.Children, w)
	}
	return ec
}

func TestHandBuiltEngineComesUpAndTearsDown(t *testing.T) {
	s := newStore(t)
	h := hostEnv{name: "h1", ip: "127.0.0.1"}
	addr := net.JoinHostPort(h.ip, strconv.Itoa(freePort(t, h.ip)))
	ec := enginePlan(h.name, 0, 0, addr, "ipc:///tmp/lookup_rpc_port_0_host_h1_dp_rank0", 2)
	cfg := s.config(h.name)
	cfg.Plan = &vllm.NodePlan{Host: h.name, Commands: []*vllm.ProcessPlan{ec}}
	n := startNode(t, h, cfg)

	recs := s.waitRecords(t, "3 processes ready", func(m map[string]report.Process) bool {
		ready := 0
		for _, r := range m {
			if r.Ready {
				ready++
			}
		}
		return ready == 3
	})
	all := make([]report.Process, 0, len(recs))
	for _, r := range recs {
		all = append(all, r)
	}
	report.ResolveLookups(all)
	for _, r := range all {
		if r.PID == 0 || r.Exit != nil {
			t.Errorf("%s: pid %d exit %+v", r.ID, r.PID, r.Exit)
		}
		switch r.Role {
		case report.RoleEngineCore:
			if r.Lookup == nil || r.Lookup.ServedBy != ec.Children[0].Identity.ID || r.Lookup.Error != "" {
				t.Errorf("engine core lookup %+v, want served by %s", r.Lookup, ec.Children[0].Identity.ID)
			}
		case report.RoleWorker:
			if r.Segment == "" || len(r.Rendezvous) != 1 || r.Rendezvous[0].Error != "" {
				t.Errorf("%s: segment %q rendezvous %+v", r.ID, r.Segment, r.Rendezvous)
			}
			if *r.Rank == 0 && r.BindSeq != 1 {
				t.Errorf("%s: bind seq %d, want 1", r.ID, r.BindSeq)
			}
		}
	}
	if code := n.stop(); code != 0 {
		t.Fatalf("node exit %d after SIGTERM", code)
	}
	recs = s.waitRecords(t, "every exit", func(m map[string]report.Process) bool {
		for _, r := range m {
			if r.Exit == nil {
				return false
			}
		}
		return true
	})
	for _, r := range recs {
		if !r.Exit.Expected || r.Crashed() {
			t.Errorf("%s: exit %+v after teardown, want expected", r.ID, r.Exit)
		}
	}
	segs, err := s.c.AllSegments(t.Context())
	if err != nil || len(segs) != 0 {
		t.Errorf("segments after a clean teardown: %v, %v", segs, err)
	}
}

// replicaOverTwoHosts hand-builds what vLLM starts for replica `dp` of an external-LB wide-TP
// deployment (every node of the replica passes --data-parallel-rank dp; the follower runs
// --headless): the head's API server, engine core and ranks 0-1, the follower's headless process
// and ranks 2-3, all meeting at the head's --master-addr:--master-port. legacy applies the
// Mooncake DP index helper from before vLLM#48061 (get_mooncake_dp_engine_index in
// vllm/distributed/kv_transfer/kv_connector/v1/mooncake/): under external LB it returns
// data_parallel_rank_local, which is 0 on the head and None on the follower, whose workers then
// fail its bare assert at connector init.
func replicaOverTwoHosts(head, follower string, dp int, addr string, legacy bool) (*vllm.NodePlan, *vllm.NodePlan) {
	idx := dp
	if legacy {
		idx = 0
	}
	path := "ipc:///tmp/lookup_rpc_port_0_host_" + head + "_dp_rank" + strconv.Itoa(idx)
	ec := enginePlan(head, 0, dp, addr, path, 0)
	ec.Identity.ID = head + "/0/api-server-0/engine-core-" + strconv.Itoa(dp)
	ec.Identity.Parent = head + "/0/api-server-0"
	ec.Identity.MooncakeDPIndex = report.Int(idx)
	ec.ChildFailure = "Exception: WorkerProc initialization failed due to an exception in a background process. See stack trace for root cause."
	for r := range 2 {
		w := &vllm.ProcessPlan{
			Identity: report.Process{ID: ec.Identity.ID + "/worker-" + strconv.Itoa(r), Parent: ec.Identity.ID, Host: head, Role: report.RoleWorker,
				Replica: "replica-1", DataParallelIndex: dp, MooncakeDPIndex: report.Int(idx), Rank: report.Int(r), TPRank: report.Int(r), PPRank: report.Int(0)},
			Rendezvous:       []vllm.RendezvousPlan{{Kind: "workers", Address: addr, WorldSize: 4, Rank: r}},
			RegistersSegment: true,
			SegmentHost:      head,
		}
		if r == 0 {
			w.BindsLookup = true
			w.Identity.LookupPath, w.Identity.LookupRole = path, report.LookupServer
		}
		ec.Children = append(ec.Children, w)
	}
	ec.Identity.Replica = "replica-1"
	api := &vllm.ProcessPlan{
		Identity:     report.Process{ID: head + "/0/api-server-0", Host: head, Role: report.RoleAPIServer, DataParallelIndex: dp, DataParallelSize: 2},
		ChildFailure: "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): " + vllm.ChildFailurePlaceholder,
		Children:     []*vllm.ProcessPlan{ec},
	}
	hl := &vllm.ProcessPlan{
		Identity:     report.Process{ID: follower + "/0/headless-0", Host: follower, Role: report.RoleHeadless, DataParallelIndex: dp},
		ChildFailure: "Exception: WorkerProc initialization failed due to an exception in a background process. See stack trace for root cause.",
	}
	for r := 2; r < 4; r++ {
		w := &vllm.ProcessPlan{
			Identity: report.Process{ID: hl.Identity.ID + "/worker-" + strconv.Itoa(r-2), Parent: hl.Identity.ID, Host: follower, Role: report.RoleWorker,
				Replica: "replica-1", DataParallelIndex: dp, MooncakeDPIndex: report.Int(dp), Rank: report.Int(r), TPRank: report.Int(r), PPRank: report.Int(0)},
			Rendezvous:       []vllm.RendezvousPlan{{Kind: "workers", Address: addr, WorldSize: 4, Rank: r}},
			RegistersSegment: true,
			SegmentHost:      follower,
		}
		if legacy {
			w.Identity.MooncakeDPIndex = nil
			w.Crash = &vllm.Crash{Stage: vllm.StageConnectorInit, Error: "AssertionError"}
		}
		hl.Children = append(hl.Children, w)
	}
	return &vllm.NodePlan{Host: head, Commands: []*vllm.ProcessPlan{api}}, &vllm.NodePlan{Host: follower, Commands: []*vllm.ProcessPlan{hl}}
}

// TestReplicaOneOverTwoHosts is vLLM#48061 on the replica that shows both symptoms: under the
// legacy index every follower worker dies of the bare AssertionError (each of them reaches
// connector init, so each reports it) and the head's processes use index 0 for replica 1.
func TestReplicaOneOverTwoHosts(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		t.Run(map[bool]string{false: "main", true: "pre-48061"}[legacy], func(t *testing.T) {
			s := newStore(t)
			hosts := "r1-head=127.0.0.6,r1-follower=127.0.0.7"
			addr := net.JoinHostPort("r1-head", strconv.Itoa(freePort(t, "127.0.0.6")))
			headPlan, followerPlan := replicaOverTwoHosts("r1-head", "r1-follower", 1, addr, legacy)
			cfg := s.config("r1-head")
			cfg.Plan = headPlan
			head := startNode(t, hostEnv{name: "r1-head", ip: "127.0.0.6", hosts: hosts}, cfg)
			cfg = s.config("r1-follower")
			cfg.Plan = followerPlan
			follower := startNode(t, hostEnv{name: "r1-follower", ip: "127.0.0.7", hosts: hosts}, cfg)

			recs := s.waitRecords(t, "7 processes ready or gone", func(m map[string]report.Process) bool {
				n := 0
				for _, r := range m {
					if r.Ready && (!legacy || r.Host == "r1-head") || r.Exit != nil && legacy && r.Host == "r1-follower" {
						n++
					}
				}
				return n == 7
			})
			obs := records(recs)
			want := []report.Kind{}
			if legacy {
				want = []report.Kind{report.DPIndexMismatch, report.ProcessCrashed}
			}
			if got := kinds(obs); !slices.Equal(got, want) {
				t.Fatalf("kinds %v, want %v", got, want)
			}
			for _, r := range obs {
				switch {
				case r.Host == "r1-follower" && r.Role == report.RoleWorker && legacy:
					if r.Exit == nil || r.Exit.Error != "AssertionError" || r.Exit.Code != 1 || r.MooncakeDPIndex != nil {
						t.Errorf("%s: exit %+v, want the bare AssertionError", r.ID, r.Exit)
					}
				case r.Role == report.RoleHeadless && legacy:
					if r.Exit == nil || !strings.HasPrefix(r.Exit.Error, "Exception: WorkerProc initialization failed") {
						t.Errorf("%s: exit %+v, want the executor's start-up failure", r.ID, r.Exit)
					}
				case r.Host == "r1-head":
					wantIdx := 1
					if legacy {
						wantIdx = 0
					}
					if r.Exit != nil || (r.MooncakeDPIndex != nil && *r.MooncakeDPIndex != wantIdx) {
						t.Errorf("%s: exit %+v index %v, want live with index %d", r.ID, r.Exit, deref(r.MooncakeDPIndex), wantIdx)
					}
					if r.Role == report.RoleEngineCore && (r.Lookup == nil || r.Lookup.ServedBy != r.ID+"/worker-0") {
						t.Errorf("%s: lookup %+v", r.ID, r.Lookup)
					}
				}
			}
			if legacy {
				if code := follower.wait(); code != simnode.ExitCrashed {
					t.Errorf("follower node exit %d, want %d", code, simnode.ExitCrashed)
				}
			}
			if code := head.stop(); code != simnode.ExitOK {
				t.Errorf("head node exit %d after SIGTERM", code)
			}
		})
	}
}
