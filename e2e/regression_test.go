package e2e_test

import (
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/widetp/widetp/harness/matchers"
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/scenarios"
)

// loadAs loads a shipped scenario under another profile (`--profile`).
func loadAs(name, profile string) *scenarios.Scenario {
	GinkgoHelper()
	return loadFileAs(filepath.Join(scenarioDir, name+".yaml"), profile)
}

// loadFileAs loads the scenario file at path under profile.
func loadFileAs(path, profile string) *scenarios.Scenario {
	GinkgoHelper()
	spec, err := scenarios.ParseProfileSpec(profile)
	Expect(err).NotTo(HaveOccurred())
	s, err := scenarios.Load(path, scenarios.WithProfile(spec))
	Expect(err).NotTo(HaveOccurred())
	return s
}

func byID(rep report.Report) map[string]report.Process {
	m := map[string]report.Process{}
	for _, p := range rep.Processes {
		m[p.ID] = p
	}
	return m
}

// vLLM#48061 as reported: 2 replicas of TP 16, each a `vllm serve` head and a `--headless`
// follower, external LB, Mooncake store connector. Before the fix the connector's DP engine index
// was data_parallel_rank_local under external LB (mooncake_utils.py get_mooncake_dp_engine_index):
// the followers have none and assert; replica 1's head uses 0 for global index 1.
var _ = Describe("the vLLM#48061 regression", Label(scenarios.BugLabel("vllm#48061"), "regression"), func() {
	const wideTP = "vllm48061-external-lb-wide-tp-buggy"

	// The bug as it was: an older vLLM's behaviour, which only the model (under pre-48061) reproduces.
	It("catches pre-48061 with exactly process-crashed and dp-index-mismatch, naming the followers' workers and replica 1's head", Label(labelPlannerModel), func(ctx SpecContext) {
		r := runScenario(ctx, loadAs(wideTP, "pre-48061"), primaryRuntime())
		Expect(r.report).To(matchers.HaveViolationKinds(report.ProcessCrashed, report.DPIndexMismatch))

		// Every worker of both followers is gone; the first to reach connector init died of the
		// bare assert, and no worker of a head did.
		asserted := map[string]int{}
		for _, p := range r.report.Processes {
			if p.Role != report.RoleWorker {
				continue
			}
			if strings.HasSuffix(p.Host, "-follower") {
				Expect(p.Exit).NotTo(BeNil(), "%s on %s is still up", p.ID, p.Host)
				if p.Exit.Error == "AssertionError" {
					asserted[p.Host]++
				}
			} else {
				Expect(p.Exit).To(BeNil(), "head worker %s exited: %+v", p.ID, p.Exit)
			}
		}
		Expect(asserted).To(HaveKey("r0-follower"))
		Expect(asserted).To(HaveKey("r1-follower"))
		crash := matchers.HaveNoCrashedProcess()
		Expect(crash.Match(r.report)).To(BeFalse())
		Expect(crash.FailureMessage(r.report)).To(MatchRegexp(`host r0-follower, r0-follower/0/headless-0/worker-\d+: exited 1: AssertionError`))

		// Replica 1's head processes use 0 (their local rank) where the replica's index is 1;
		// replica 0 is right by accident (its local rank is its index).
		dp := matchers.HaveConsistentDPIndex()
		Expect(dp.Match(r.report)).To(BeFalse())
		msg := dp.FailureMessage(r.report)
		Expect(msg).To(ContainSubstring("host r1-head, r1-head/0/engine-core-1/worker-0: Mooncake DP index 0, but replica r0-head:29500/dp1"))
		Expect(msg).To(ContainSubstring("has global DP index 1"))
		Expect(msg).NotTo(ContainSubstring("host r0-head"))
	}, SpecTimeout(runBound))

	// Main's behaviour, with both planners: the model under main, and vLLM's own launch code (the
	// snapshot, or vLLM main in nightly CI): a vLLM that re-breaks #48061 fails here.
	for _, pl := range bothPlanners {
		It("is healthy on main: every process of both replicas comes up and uses its replica's global DP index ("+pl.name+" planner)", Label(pl.label), func(ctx SpecContext) {
			p := plan(ctx, pl, wideTP, "main")
			r := p.run(ctx, primaryRuntime())
			Expect(r.report).To(matchers.HaveViolationKinds())
			Expect(r.report).To(matchers.HaveConsistentDPIndex())
			Expect(r.report).To(matchers.HaveUniqueLookupSockets())
			expectAsPlanned(p, r.report)
			// The run has settled, so this holds at once; the poller would stop at a crash.
			Eventually(matchers.Processes(r.cluster.Store())).WithContext(ctx).WithTimeout(10 * time.Second).
				Should(matchers.HaveReadyProcesses(len(p.predicted)))
			for _, p := range r.report.Processes {
				if p.Role != report.RoleWorker {
					continue
				}
				want := 0
				if strings.HasPrefix(p.Host, "r1-") {
					want = 1
				}
				Expect(p.MooncakeDPIndex).To(HaveValue(Equal(want)), "%s on %s", p.ID, p.Host)
			}
		}, SpecTimeout(runBound+vllmBound))
	}
})

// Two external-LB replicas on one host (`--data-parallel-rank 0` and `1`): before vLLM#48061 both
// engines' Mooncake index is their local rank, 0, so both rank-0 workers bind
// ipc:///tmp/lookup_rpc_port_0_host_node0_dp_rank0 (mooncake_utils.py get_zmq_rpc_path_lookup).
// libzmq lets the second bind take the path over: one socket file, and engine 0's scheduler is
// answered by replica 1's server.
var _ = Describe("two co-located engines that bind one lookup path", Label(scenarios.BugLabel("vllm#48061"), "regression"), func() {
	const colocated = "vllm48061-external-lb-colocated-buggy"
	const path = "ipc:///tmp/lookup_rpc_port_0_host_node0_dp_rank0"

	It("are caught as lookup-path-collision plus lookup-misrouted, and the host's /tmp holds one socket for both", Label(labelPlannerModel), func(ctx SpecContext) {
		r := runScenario(ctx, loadAs(colocated, "pre-48061"), primaryRuntime())
		Expect(r.report).To(matchers.HaveViolationKinds(report.DPIndexMismatch, report.LookupPathCollision, report.LookupMisrouted))
		var collision, misrouted []report.Violation
		for _, v := range r.report.Violations {
			switch v.Kind {
			case report.LookupPathCollision:
				collision = append(collision, v)
			case report.LookupMisrouted:
				misrouted = append(misrouted, v)
			}
		}
		Expect(collision).To(HaveLen(1))
		Expect(collision[0].Processes).To(Equal([]string{"node0/0/engine-core-0/worker-0", "node0/1/engine-core-1/worker-0"}))
		Expect(collision[0].Message).To(ContainSubstring("on host node0"))
		Expect(collision[0].Message).To(ContainSubstring(path))
		Expect(misrouted).To(HaveLen(1))
		procs := byID(r.report)
		Expect(procs["node0/0/engine-core-0"].Lookup).To(HaveField("ServedBy", "node0/1/engine-core-1/worker-0"), "the later binder answers engine 0")
		Expect(procs["node0/1/engine-core-1"].Lookup).To(HaveField("ServedBy", "node0/1/engine-core-1/worker-0"))

		sockets := matchers.HaveUniqueLookupSockets()
		Expect(sockets.Match(r.report)).To(BeFalse())
		Expect(sockets.FailureMessage(r.report)).To(ContainSubstring("host node0, node0/0/engine-core-0/worker-0: bound " + path + " (bind 1"))

		listing, err := r.cluster.Runtime().IPCDir(ctx, "node0")
		Expect(err).NotTo(HaveOccurred())
		Expect(lookupSockets(listing.Sockets())).To(Equal([]string{"lookup_rpc_port_0_host_node0_dp_rank0"}), "one file for two binds")
	}, SpecTimeout(runBound))

	for _, pl := range bothPlanners {
		It("bind a path each on main ("+pl.name+" planner)", Label(pl.label), func(ctx SpecContext) {
			p := plan(ctx, pl, colocated, "main")
			r := p.run(ctx, primaryRuntime())
			Expect(r.report).To(matchers.HaveViolationKinds())
			Expect(r.report).To(matchers.HaveUniqueLookupSockets())
			expectAsPlanned(p, r.report)
			listing, err := r.cluster.Runtime().IPCDir(ctx, "node0")
			Expect(err).NotTo(HaveOccurred())
			Expect(lookupSockets(listing.Sockets())).To(Equal([]string{"lookup_rpc_port_0_host_node0_dp_rank0", "lookup_rpc_port_0_host_node0_dp_rank1"}))
		}, SpecTimeout(runBound+vllmBound))
	}
})

// lookupSockets keeps the Mooncake lookup sockets of a listing (simnode keeps its own sequencer
// socket in the host's directory too).
func lookupSockets(names []string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(filepath.Base(n), "lookup_rpc_port_") {
			out = append(out, filepath.Base(n))
		}
	}
	return out
}
