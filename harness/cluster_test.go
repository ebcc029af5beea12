package harness_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/widetp/widetp/harness"
	"github.com/widetp/widetp/harness/matchers"
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/scenarios"
)

// clusterScenario is a scenario of hosts whose `vllm serve` lines are given, on 2-GPU nodes.
func clusterScenario(name, profile string, hosts map[string]string, order ...string) *scenarios.Scenario {
	GinkgoHelper()
	y := fmt.Sprintf("name: %s\ndescription: d\nprofile: %s\nmodel: {name: org/moe, moe: true}\ngpus_per_node: 4\nnodes:\n", name, profile)
	for _, h := range order {
		y += fmt.Sprintf("  - host: %s\n    command: %s\n", h, hosts[h])
	}
	y += "store: {flavor: cpp}\n"
	s, err := scenarios.Parse(name+".yaml", []byte(y))
	Expect(err).NotTo(HaveOccurred())
	return s
}

const clusterKV = `--kv-transfer-config '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both"}'`

// colocatedScenario is vLLM#48061's co-located launch: two external-LB replicas (TP 2) on one host.
func colocatedScenario(profile string) *scenarios.Scenario {
	cmd := func(rank, port int) string {
		return fmt.Sprintf("vllm serve org/moe --tensor-parallel-size 2 --enable-expert-parallel --data-parallel-size 2 --data-parallel-rank %d --port %d %s", rank, port, clusterKV)
	}
	GinkgoHelper()
	y := fmt.Sprintf("name: colocated\ndescription: d\nprofile: %s\nmodel: {name: org/moe, moe: true}\ngpus_per_node: 4\nnodes:\n  - host: node0\n    commands:\n      - %s\n      - %s\nstore: {flavor: cpp}\n", profile, cmd(0, 8000), cmd(1, 8001))
	s, err := scenarios.Parse("colocated.yaml", []byte(y))
	Expect(err).NotTo(HaveOccurred())
	return s
}

// orphanFollower is a `--headless` follower whose head never starts: its workers wait at the head's
// rendezvous for the rendezvous bound, so the node stays unsettled that long.
func orphanFollower() *scenarios.Scenario {
	return clusterScenario("orphan", "main", map[string]string{
		"r0-follower": "vllm serve org/moe --tensor-parallel-size 8 --enable-expert-parallel --nnodes 2 --node-rank 1 --master-addr r0-head --headless " + clusterKV,
	}, "r0-follower")
}

var _ = Describe("a cluster on the local runtime", Label("local", "cluster"), func() {
	newLocalRuntime := func(ctx context.Context) harness.Runtime {
		rt, err := harness.NewLocal(ctx, harness.WithProgress(GinkgoWriter))
		Expect(err).NotTo(HaveOccurred())
		return rt
	}
	start := func(ctx context.Context, s *scenarios.Scenario, opts ...harness.ClusterOption) *harness.Cluster {
		c, err := harness.StartCluster(ctx, s, newLocalRuntime(ctx), append(opts, harness.WithClusterProgress(GinkgoWriter))...)
		Expect(c).NotTo(BeNil())
		DeferCleanup(func(ctx SpecContext) {
			Expect(c.Close(ctx)).To(Succeed())
			Expect(c.Runtime().Hosts()).To(BeEmpty())
		})
		Expect(err).NotTo(HaveOccurred())
		return c
	}

	It("settles on the nodes' own status and reports what they observed, artifacts and all", func(ctx SpecContext) {
		c := start(ctx, colocatedScenario("pre-48061"))
		open, err := c.Store().Gate(ctx, 0)
		Expect(err).NotTo(HaveOccurred())
		Expect(open).To(BeTrue(), "StartCluster opens the start gate the nodes wait at")
		Expect(c.Settle(ctx)).To(Succeed())
		rep, err := c.Report(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(rep.Runtime).To(Equal("local"))
		Expect(rep.Processes).To(HaveLen(8), "two API servers, two engine cores, two workers each")
		Expect(rep.Processes[0].ID).To(Equal("node0/0/api-server-0"), "processes in plan order")
		Expect(rep).To(matchers.HaveViolationKinds(report.DPIndexMismatch, report.LookupPathCollision, report.LookupMisrouted))
		for _, phase := range []string{"start", "settle", "collect", "check"} {
			Expect(rep.Timings).To(HaveKey(phase))
		}
		st, err := c.Store().NodeStatuses(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(st).To(ConsistOf(HaveField("Settled", true)))

		dir := GinkgoT().TempDir()
		Expect(c.WriteArtifacts(ctx, dir, &rep)).To(Succeed())
		for _, f := range []string{harness.ArtifactReport, harness.ArtifactSnapshot, "node0/" + harness.ArtifactLogs, "node0/" + harness.ArtifactIPCDir, harness.StoreHost + "/" + harness.ArtifactLogs} {
			Expect(filepath.Join(dir, f)).To(BeAnExistingFile())
		}
		b, err := os.ReadFile(filepath.Join(dir, "node0", harness.ArtifactLogs))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(b)).To(ContainSubstring("simnode: node node0 up: 2 commands"))
	}, SpecTimeout(2*time.Minute))

	It("says which node did not settle within the bound and what it waits on", func(ctx SpecContext) {
		c := start(ctx, orphanFollower(), harness.WithSettleTimeout(time.Second))
		err := c.Settle(ctx)
		var te *harness.SettleTimeoutError
		Expect(errors.As(err, &te)).To(BeTrue(), "error %v", err)
		Expect(te.Pending).To(HaveKeyWithValue("r0-follower", ContainElement(HavePrefix("r0-follower/0/headless-0/worker-"))))
		Expect(err.Error()).To(ContainSubstring("not every node settled within 1s: r0-follower (waiting on r0-follower/0/headless-0/worker-"))
	}, SpecTimeout(time.Minute))

	It("notices a node whose program died before it settled, with its last log lines", func(ctx SpecContext) {
		c := start(ctx, orphanFollower())
		Expect(c.Runtime().Kill(ctx, "r0-follower", "SIGKILL")).To(Succeed())
		err := c.Settle(ctx)
		var ne *harness.NodeExitedError
		Expect(errors.As(err, &ne)).To(BeTrue(), "error %v", err)
		Expect(ne.Host).To(Equal("r0-follower"))
		Expect(ne.ExitCode).To(Equal(137))
		Expect(ne.Tail).To(ContainElement(ContainSubstring("simnode: node r0-follower up")))
	}, SpecTimeout(time.Minute))

	It("refuses a node named as the store before anything starts", func(ctx SpecContext) {
		// The loader refuses the name with its file:line; a scenario built in code meets this check.
		s := clusterScenario("store-name", "main", map[string]string{"node0": "vllm serve org/moe --tensor-parallel-size 2"}, "node0")
		s.Nodes[0].Host = harness.StoreHost
		rt := newLocalRuntime(ctx)
		DeferCleanup(func(ctx SpecContext) { Expect(rt.Close(ctx)).To(Succeed()) })
		c, err := harness.StartCluster(ctx, s, rt)
		Expect(c).To(BeNil())
		Expect(err).To(MatchError(ContainSubstring("node widetp-store: the name is the fake store's host")))
		Expect(rt.Hosts()).To(BeEmpty())
	}, SpecTimeout(time.Minute))
})

var _ = Describe("a cluster on Docker", Label("docker", "cluster"), func() {
	BeforeEach(requireEngine)

	It("runs the same scenario to the same violations", func(ctx SpecContext) {
		rt, err := harness.NewRuntime(ctx, harness.RuntimeDocker, harness.WithProgress(GinkgoWriter))
		Expect(err).NotTo(HaveOccurred())
		c, err := harness.StartCluster(ctx, colocatedScenario("pre-48061"), rt, harness.WithClusterProgress(GinkgoWriter))
		Expect(c).NotTo(BeNil())
		DeferCleanup(func(ctx SpecContext) { Expect(c.Close(ctx)).To(Succeed()) })
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Settle(ctx)).To(Succeed())
		rep, err := c.Report(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(rep.Runtime).To(Equal("docker"))
		Expect(rep).To(matchers.HaveViolationKinds(report.DPIndexMismatch, report.LookupPathCollision, report.LookupMisrouted))
	}, SpecTimeout(5*time.Minute))
})
