package matchers_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	"github.com/onsi/gomega/types"

	"github.com/widetp/widetp/fakestore"
	"github.com/widetp/widetp/fakestore/api"
	"github.com/widetp/widetp/fakestore/client"
	"github.com/widetp/widetp/harness/matchers"
	"github.com/widetp/widetp/report"
)

// replica1 is replica 1 of vLLM#48061's deployment as a run records it: its engine core's
// data_parallel_index is 1 (the replica's global DP index); mooncake is what the Mooncake store
// connector computed (vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_utils.py
// get_mooncake_dp_engine_index: before the fix, data_parallel_rank_local — 0 — under external LB).
func replica1(mooncake int) []report.Process {
	ec := report.Process{ID: "r1-head/0/engine-core-1", Host: "r1-head", Role: report.RoleEngineCore, Replica: "r0-head:29500/dp1",
		DataParallelIndex: 1, DataParallelRank: 1, MooncakeDPIndex: report.Int(mooncake), Ready: true,
		LookupRole: report.LookupClient, LookupPath: "ipc:///tmp/lookup_rpc_port_0_host_r1-head_dp_rank0"}
	w := report.Process{ID: "r1-head/0/engine-core-1/worker-0", Parent: ec.ID, Host: "r1-head", Role: report.RoleWorker, Replica: ec.Replica,
		DataParallelIndex: 1, DataParallelRank: 1, MooncakeDPIndex: report.Int(mooncake), Rank: report.Int(0), TPRank: report.Int(0), PPRank: report.Int(0), Ready: true,
		LookupRole: report.LookupServer, LookupPath: ec.LookupPath, BindSeq: 1}
	ec.Lookup = &report.Lookup{Nonce: "n1", ServedBy: w.ID}
	w.Served = []string{"n1"}
	return []report.Process{ec, w}
}

// diedInRendezvous is replica1 under the old index whose worker failed the replica's torch
// rendezvous; completedRendezvous is the same worker after the barrier completed.
func diedInRendezvous() []report.Process {
	procs := replica1(0)
	procs[0].Lookup, procs[1].Served = nil, nil
	procs[1].Exit = &report.Exit{Code: 1, Error: "RuntimeError: rendezvous timed out"}
	procs[1].Rendezvous = []report.Rendezvous{{Kind: "workers", Address: "r1-head:29500", Error: "timed out", Missing: []string{"r1-follower/0/headless-0/worker-8"}}}
	return procs
}

func completedRendezvous() []report.Process {
	procs := replica1(0)
	procs[1].Rendezvous = []report.Rendezvous{{Kind: "workers", Address: "r1-head:29500"}}
	return procs
}

func TestMatchersNameHostProcessAndValues(t *testing.T) {
	g := gomega.NewWithT(t)
	rows := []struct {
		name    string
		procs   []report.Process
		matcher types.GomegaMatcher
		ok      bool
		mention []string
	}{
		// vllm#48061 fixed: the connector uses data_parallel_index.
		{"main: index 1 on replica 1", replica1(1), matchers.HaveConsistentDPIndex(), true, nil},
		// vllm#48061 before the fix: data_parallel_rank_local, 0.
		{"pre-48061: index 0 on replica 1", replica1(0), matchers.HaveConsistentDPIndex(), false, []string{"host r1-head, r1-head/0/engine-core-1/worker-0: Mooncake DP index 0", "global DP index 1"}},
		// Two co-located engines' rank-0 workers bind one path (mooncake_utils.py get_zmq_rpc_path_lookup
		// names it after the index, which both computed as 0).
		{"two binders of one path on one host", append(replica1(0), report.Process{ID: "r1-head/1/engine-core-2/worker-0", Host: "r1-head", Role: report.RoleWorker,
			Replica: "r0-head:29500/dp2", LookupRole: report.LookupServer, LookupPath: "ipc:///tmp/lookup_rpc_port_0_host_r1-head_dp_rank0", BindSeq: 2}), matchers.HaveUniqueLookupSockets(), false, []string{"host r1-head, r1-head/0/engine-core-1/worker-0: bound ipc:///tmp/lookup_rpc_port_0_host_r1-head_dp_rank0 (bind 1", "r1-head/1/engine-core-2/worker-0 (bind 2"}},
		{"one binder a path", replica1(1), matchers.HaveUniqueLookupSockets(), true, nil},
		// A worker that failed its torch rendezvous never built its connector
		// (vllm/v1/worker/gpu_worker.py init_worker_distributed_environment comes before
		// ensure_kv_transfer_initialized), so its index was never used: the crash is the finding.
		{"index of a worker that died in its rendezvous", diedInRendezvous(), matchers.HaveConsistentDPIndex(), true, nil},
		{"the same worker after its rendezvous", completedRendezvous(), matchers.HaveConsistentDPIndex(), false, []string{"worker-0: Mooncake DP index 0"}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			m := r.matcher
			ok, err := m.Match(r.procs)
			if err != nil || ok != r.ok {
				t.Fatalf("Match = %v, %v; want %v", ok, err, r.ok)
			}
			if !ok {
				msg := m.FailureMessage(r.procs)
				for _, want := range r.mention {
					if !strings.Contains(msg, want) {
						t.Errorf("failure message lacks %q:\n%s", want, msg)
					}
				}
			}
		})
	}

	// Violation kinds: exact set, any order, from a report or from bare records (the checks run).
	rep := report.Report{Violations: []report.Violation{{Kind: report.DPIndexMismatch, Message: "dp-index-mismatch: r1-head/0/engine-core-1 has 0"}, {Kind: report.ProcessCrashed, Message: "x"}}}
	g.Expect(rep).To(matchers.HaveViolationKinds(report.ProcessCrashed, report.DPIndexMismatch))
	g.Expect(&rep).NotTo(matchers.HaveViolationKinds(report.ProcessCrashed))
	g.Expect(replica1(0)).To(matchers.HaveViolationKinds(report.DPIndexMismatch))
	g.Expect(replica1(1)).To(matchers.HaveViolationKinds())
	m := matchers.HaveViolationKinds(report.ProcessCrashed)
	ok, _ := m.Match(rep)
	g.Expect(ok).To(gomega.BeFalse())
	g.Expect(m.FailureMessage(rep)).To(gomega.And(gomega.ContainSubstring("extra [dp-index-mismatch]"), gomega.ContainSubstring("r1-head/0/engine-core-1 has 0")))

	// Anything else is an error, not a silent pass.
	_, err := matchers.HaveConsistentDPIndex().Match("not a report")
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("got string")))
	_, err = matchers.HaveViolationKinds().Match((*report.Report)(nil))
	g.Expect(err).To(gomega.HaveOccurred())

	crashed := replica1(0)
	crashed[1].Exit = &report.Exit{Code: 1, Error: "AssertionError"}
	cm := matchers.HaveNoCrashedProcess()
	ok, _ = cm.Match(crashed)
	g.Expect(ok).To(gomega.BeFalse())
	g.Expect(cm.FailureMessage(crashed)).To(gomega.ContainSubstring("host r1-head, r1-head/0/engine-core-1/worker-0: exited 1: AssertionError"))
}

// The polling helper stops at the first crash instead of running into the timeout.
func TestProcessesStopsPollingOnACrash(t *testing.T) {
	g := gomega.NewWithT(t)
	s, err := fakestore.New(fakestore.Config{MetadataAddr: "127.0.0.1:0", MasterAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0"})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g.Expect(s.Start(ctx)).To(gomega.Succeed())
	defer s.Close(context.Background())
	c, err := client.New(client.WithAdminURL(s.URL(api.PlaneAdmin)))
	g.Expect(err).NotTo(gomega.HaveOccurred())

	procs := replica1(1)
	g.Expect(c.PostReport(ctx, procs[0])).To(gomega.Succeed())
	g.Expect(c.PostReport(ctx, procs[1])).To(gomega.Succeed())
	g.Eventually(matchers.Processes(c)).WithContext(ctx).WithTimeout(5 * time.Second).Should(matchers.HaveReadyProcesses(2))

	procs[1].Exit = &report.Exit{Code: 1, Error: "AssertionError"}
	g.Expect(c.PostReport(ctx, procs[1])).To(gomega.Succeed())
	start := time.Now()
	var failure string
	fg := gomega.NewGomega(func(message string, _ ...int) { failure = message })
	fg.Eventually(matchers.Processes(c)).WithContext(ctx).WithTimeout(20 * time.Second).Should(matchers.HaveReadyProcesses(2))
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("polling went on for %v after a crash", took)
	}
	if !strings.Contains(failure, "r1-head/0/engine-core-1/worker-0 on host r1-head (exited 1: AssertionError)") {
		t.Errorf("failure %q does not name the crash", failure)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Error("the spec's own bound ran out")
	}
}
