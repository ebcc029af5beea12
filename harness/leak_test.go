package harness_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/moby/moby/client"

	"github.com/widetp/widetp/harness"
)

var _ = Describe("leak safety", Label("docker"), func() {
	BeforeEach(requireEngine)

	It("sweeps what a run SIGKILLed half-way left behind, and leaves live runs alone", func(ctx SpecContext) {
		cli := engine()
		live, err := harness.NewDocker(ctx)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) { _ = live.Close(ctx) })
		Expect(live.StartNodes(ctx, node("live-node"))).To(Succeed())

		// The child is this test binary acting as a harness run (TestMain): store and two nodes up,
		// then it says so and blocks, never reaching Close.
		childRun := "leak-" + live.RunID()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+childRun)
		stdin, err := cmd.StdinPipe()
		Expect(err).NotTo(HaveOccurred())
		stdout, err := cmd.StdoutPipe()
		Expect(err).NotTo(HaveOccurred())
		stderr := &lockedBuffer{}
		cmd.Stderr = stderr
		Expect(cmd.Start()).To(Succeed())
		DeferCleanup(func() {
			_ = cmd.Process.Kill()
			_ = stdin.Close()
		})
		said := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "half-way ") {
					said <- sc.Text()
					return
				}
			}
			close(said)
		}()
		select {
		case line, ok := <-said:
			Expect(ok).To(BeTrue(), "the child ended before half-way: %s", stderr.String())
			Expect(line).To(Equal("half-way " + childRun))
		case <-time.After(2 * time.Minute): // a cached image and three scratch containers take seconds
			Fail("the child did not get half-way within 2m: " + stderr.String())
		case <-ctx.Done():
			Fail("spec timed out waiting for the child")
		}
		c, n := labelled(ctx, cli, childRun)
		Expect(c).To(Equal(3), "the child's store and nodes")
		Expect(n).To(Equal(1), "the child's network")

		Expect(cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
		Expect(cmd.Wait()).To(MatchError(ContainSubstring("killed")))
		c, n = labelled(ctx, cli, childRun)
		Expect([]int{c, n}).To(Equal([]int{3, 1}), "a killed run cleans up nothing itself")

		next, err := harness.NewDocker(ctx)
		Expect(err).NotTo(HaveOccurred())
		c, n = labelled(ctx, cli, childRun)
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
		all := make(client.Filters).Add("label", harness.LabelRun)
		cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: all})
		Expect(err).NotTo(HaveOccurred())
		ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: all})
		Expect(err).NotTo(HaveOccurred())
		var left []map[string]string
		for _, c := range cs.Items {
			left = append(left, c.Labels)
		}
		for _, n := range ns.Items {
			left = append(left, n.Labels)
		}
		for _, labels := range left {
			o, err := harness.ParseOwner(labels[harness.LabelOwner])
			Expect(err).NotTo(HaveOccurred())
			Expect(o).NotTo(Equal(me), "run %s of this process is still there", labels[harness.LabelRun])
			Expect(o.Alive(me.Machine)).To(BeTrue(), "run %s of dead process %s is still there", labels[harness.LabelRun], o)
		}
	}, SpecTimeout(4*time.Minute))
})

// lockedBuffer is a child's stderr, written by exec's copier while the spec may read it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
