package harness_test

import (
	"context"
	"strings"
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

		// Every run whose owner is dead now, the killed child's and any other a dead process left
		// on this engine, is the next run's sweep to remove. (Runs whose owner dies after the sweep
		// are the sweep after that one's: other processes may share the engine.)
		me, err := harness.CurrentOwner()
		Expect(err).NotTo(HaveOccurred())
		deadRuns := map[string]string{}
		for _, labels := range labelsOfAll(ctx) {
			o, err := harness.ParseOwner(labels[harness.LabelOwner])
			Expect(err).NotTo(HaveOccurred(), "owner label of run %s", labels[harness.LabelRun])
			if !o.Alive(me.Machine) {
				deadRuns[labels[harness.LabelRun]] = o.String()
			}
		}
		Expect(deadRuns).To(HaveKey(childRun))

		var progress strings.Builder
		next, err := harness.NewDocker(ctx, harness.WithProgress(&progress))
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
		by := dockerLabelled(ctx, "")
		for _, kind := range []string{"container", "network"} {
			for _, r := range by[kind] {
				run := r.Labels[harness.LabelRun]
				o, err := harness.ParseOwner(r.Labels[harness.LabelOwner])
				Expect(err).NotTo(HaveOccurred())
				Expect(o).NotTo(Equal(me), "%s of run %s of this process is still there", kind, run)
				if _, dead := deadRuns[run]; dead && kind == "network" {
					// A network the engine would not remove (an endpoint it kept of a container
					// whose create was cut short) is beyond a sweep; it must at least say so.
					Expect(progress.String()).To(ContainSubstring("will not remove network widetp-"+run+" "),
						"run %s of %s, dead before the sweep, still has its network, and the sweep did not say why", run, deadRuns[run])
					continue
				}
				Expect(deadRuns).NotTo(HaveKey(run), "%s of run %s of %s, dead before the sweep, is still there", kind, run, deadRuns[run])
			}
		}
	}, SpecTimeout(4*time.Minute))
})

// labelsOfAll is the labels of every container and network labelled io.widetp.run on the engine.
func labelsOfAll(ctx context.Context) []map[string]string {
	GinkgoHelper()
	by := dockerLabelled(ctx, "")
	var out []map[string]string
	for _, r := range append(by["container"], by["network"]...) {
		out = append(out, r.Labels)
	}
	return out
}
