package simnode_test

import (
	"net"
	"strconv"
	"testing"

	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/vllm"
)

// freePort returns a TCP port free on ip a moment ago (the rendezvous master's port).
func freePort(t testing.TB, ip string) int {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

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
