package harness_test

import (
	"context"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/widetp/widetp/harness"
)

var _ = Describe("leak safety", Label("docker"), func() {
	BeforeEach(requireEngine)

	It("sweeps what a run SIGKILLed half-way left behind, and leaves live runs alone", func(ctx SpecContext) {
		live, err := harness.NewDocker(ctx)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) { _ = live.Close(ctx) })
		Expect(live.StartNodes(ctx, node("live-node"))).To(Succeed())

		// The child is this test binary acting as a harness run (TestMain): store and two nodes up,
		// then it says so and blocks, never reaching Close.
		childRun := "leak-" + live.RunID()
		// 2 minutes: a cached image and three scratch containers take seconds.
		halfCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		cmd, said := startHalfWay(halfCtx, childEnv+"="+childRun)
		Expect(said).To(Equal(childRun))
		c, n := labelled(ctx, childRun)
		Expect(c).To(Equal(3), "the child's store and nodes")
		Expect(n).To(Equal(1), "the child's network")

		Expect(cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
		Expect(cmd.Wait()).To(MatchError(ContainSubstring("killed")))
		c, n = labelled(ctx, childRun)
		Expect([]int{c, n}).To(Equal([]int{3, 1}), "a killed run cleans up nothing itself")

		next, err := harness.NewDocker(ctx)
		Expect(err).NotTo(HaveOccurred())
		c, n = labelled(ctx, childRun)
		Expect(c).To(BeZero(), "containers of the killed run after the next run's sweep")
		Expect(n).To(BeZero(), "network of the killed run after the next run's sweep")

		st, err := live.State(ctx, "live-node")
		Expect(err).NotTo(HaveOccurred())
		Expect(st.Running).To(BeTrue(), "the sweep removed a live run's node")

		Expect(next.Close(ctx)).To(Succeed())
		Expect(live.Close(ctx)).To(Succeed())
		// What is labelled now belongs to live harness processes only (none when this suite runs
		// alone; parallel `ginkgo -p` processes may have runs in flight). Images stay: a cache.
		me, err := harness.CurrentOwner()
		Expect(err).NotTo(HaveOccurred())
		by := dockerLabelled(ctx, "")
		var left []map[string]string
		for _, r := range append(by["container"], by["network"]...) {
			left = append(left, r.Labels)
		}
		for _, labels := range left {
			o, err := harness.ParseOwner(labels[harness.LabelOwner])
			Expect(err).NotTo(HaveOccurred())
			Expect(o).NotTo(Equal(me), "run %s of this process is still there", labels[harness.LabelRun])
			Expect(o.Alive(me.Machine)).To(BeTrue(), "run %s of dead process %s is still there", labels[harness.LabelRun], o)
		}
	}, SpecTimeout(4*time.Minute))
})
