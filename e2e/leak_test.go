package e2e_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/widetp/widetp/harness"
	"github.com/widetp/widetp/internal/procfs"
)

// Nothing a run made outlives it: not after the suite's own runs, not after a `widetp run` that is
// SIGKILLed half-way (the next run sweeps what it left), not after one interrupted with SIGINT
// (it tears its run down itself). Serial: Ginkgo runs these on process 1 after every parallel
// spec has finished, so the last one sees what the whole suite left.
var _ = Describe("nothing outlives a run", Serial, Ordered, ContinueOnFailure, Label("leak"), func() {
	var widetp string

	BeforeAll(func() {
		// The suite's widetp binary (the hosts run it too).
		widetp = os.Getenv(harness.EnvBinary)
		Expect(widetp).NotTo(BeEmpty())
	})

	for _, rt := range harness.RuntimeNames() {
		It("sweeps, at the next run, what a `widetp run` SIGKILLed half-way left on "+rt, Label(rt), func(ctx SpecContext) {
			if !hasRuntime(rt) {
				Skip("no Docker engine answered")
			}
			expectSweptAfterKill(ctx, rt, startWidetpRun(ctx, widetp, rt, healthyRun, nodeUpLine))
		}, SpecTimeout(4*time.Minute))

		It("tears down a `widetp run` interrupted with SIGINT half-way on "+rt, Label(rt), func(ctx SpecContext) {
			if !hasRuntime(rt) {
				Skip("no Docker engine answered")
			}
			child := startWidetpRun(ctx, widetp, rt, healthyRun, nodeUpLine)
			Expect(child.cmd.Process.Signal(syscall.SIGINT)).To(Succeed())
			// Its last line says how it ended: read to the end before Wait closes the pipe.
			Eventually(child.read).WithTimeout(leftoverBound).Should(BeClosed(), "the interrupted run's stderr to end:\n%s", child.stderr())
			err := child.cmd.Wait()
			var ee *exec.ExitError
			Expect(err).To(BeAssignableToTypeOf(ee), "widetp run ended without an exit status: %v", err)
			Expect(child.cmd.ProcessState.ExitCode()).To(Equal(130), "stderr:\n%s", child.stderr())
			Expect(child.stderr()).To(ContainSubstring("interrupted by SIGINT; torn down"))
			Eventually(func(ctx context.Context) []string { return leftovers(ctx, rt, child) }).WithContext(ctx).
				WithTimeout(leftoverBound).Should(BeEmpty(), "what the interrupted run %s left", child.runID)
		}, SpecTimeout(4*time.Minute))

		It("sweeps, at the next run, what a `widetp run` SIGKILLed while a step cut two hosts apart left on "+rt, Label(rt, "fault", "fault:partition"), func(ctx SpecContext) {
			if !hasRuntime(rt) {
				Skip("no Docker engine answered")
			}
			if err := harness.PartitionsAvailable(ctx); err != nil {
				Skip(err.Error())
			}
			// The run's nftables table outlives its owner: the next run's sweep removes it.
			child := startWidetpRun(ctx, widetp, rt, partitionedRun, pausedLine)
			tables, err := harness.PartitionTables(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(tables).To(ContainElement(HaveField("Name", ContainSubstring("widetp_"+child.runID+"_"))), "the cut's table while the run lives")
			expectSweptAfterKill(ctx, rt, child)
		}, SpecTimeout(4*time.Minute))

		It("sweeps, at the next run, what a `widetp run` SIGKILLed while a step froze a node left on "+rt, Label(rt, "fault", "fault:pause"), func(ctx SpecContext) {
			if !hasRuntime(rt) {
				Skip("no Docker engine answered")
			}
			// A frozen container or process tree is the hardest thing to remove: a paused
			// container refuses a plain kill, a stopped process tree ignores every signal but
			// SIGKILL until it is continued.
			expectSweptAfterKill(ctx, rt, startWidetpRun(ctx, widetp, rt, pausedRun, pausedLine))
		}, SpecTimeout(4*time.Minute))
	}

	It("finds nothing labelled io.widetp.run and no widetp node or store process of this suite's runs", func(ctx SpecContext) {
		Expect(suiteLeftovers(ctx)).To(BeEmpty())
	}, SpecTimeout(time.Minute))
})

// expectSweptAfterKill SIGKILLs a `widetp run` child, which cleans up nothing itself, and expects
// the next run's sweep on rt to leave nothing of it.
func expectSweptAfterKill(ctx context.Context, rt string, child *widetpRun) {
	GinkgoHelper()
	Expect(child.cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
	Expect(child.cmd.Wait()).To(MatchError(ContainSubstring("killed")))
	Expect(leftovers(ctx, rt, child)).NotTo(BeEmpty(), "a SIGKILLed run cleans up nothing itself")

	next, err := harness.NewRuntime(ctx, rt, harness.WithRunID(nextRunID()), harness.WithProgress(GinkgoWriter))
	Expect(err).NotTo(HaveOccurred())
	Expect(next.Close(ctx)).To(Succeed())
	Eventually(func(ctx context.Context) []string { return leftovers(ctx, rt, child) }).WithContext(ctx).
		WithTimeout(leftoverBound).Should(BeEmpty(), "what the killed run %s left, after the next run's sweep", child.runID)
}

// leftoverBound bounds the wait for the processes of a run that just ended to be gone: a killed
// process is reaped within milliseconds; the bound only matters on a wedged machine.
const leftoverBound = 30 * time.Second

// widetpRun is a `widetp run` child, stopped half-way: its store and at least one node are up.
type widetpRun struct {
	cmd    *exec.Cmd
	runID  string
	dir    string // the local run's directory
	errBuf *syncBuffer
	// read is closed once the child's stderr ended and every line of it is in errBuf: Wait closes
	// the pipe as soon as the child exited, so a Wait before that can lose its last lines.
	read chan struct{}
}

func (w *widetpRun) stderr() string { return w.errBuf.String() }

// The progress lines that tell a child's run apart and say it is half-way.
var (
	runLine      = regexp.MustCompile(`^widetp: starting the fake store \(\w+ flavor\) and \d+ node\(s\) on \w+, run ([a-z0-9-]+): `)
	localDirLine = regexp.MustCompile(`^widetp: local run \S+ in (\S+) on `)
	nodeUpLine   = regexp.MustCompile(`^widetp: node (\S+) up`)
)

// The runs the leak specs interrupt: a healthy four-node scenario once a node is up, and a
// scenario whose first step froze its follower (e2e/testdata/leak) once that step is done.
var (
	healthyRun = filepath.Join(scenarioDir, "vllm48061-external-lb-wide-tp-fixed.yaml")
	pausedRun  = filepath.Join(moduleRoot, "e2e", "testdata", "leak", "paused-follower.yaml")
	pausedLine = regexp.MustCompile(`^widetp: step 1/\d+ \S+ done: `)
	// partitionedRun's first step cuts its follower off from its head; its next ones wait for the
	// store to expire the frozen follower, so the run is still cut when it is killed.
	partitionedRun = filepath.Join(moduleRoot, "e2e", "testdata", "leak", "partitioned-follower.yaml")
)

// halfWay bounds a child's way to half-way: a cached image or binary and a few node starts.
const halfWay = 2 * time.Minute

// startWidetpRun starts `widetp run` of a scenario on rt and returns once a progress line matches
// halfway (nodeUpLine: a node, not the store, is up).
func startWidetpRun(ctx context.Context, widetp, rt, scenario string, halfway *regexp.Regexp) *widetpRun {
	GinkgoHelper()
	cmd := exec.Command(widetp, "run", "--runtime", rt, scenario)
	cmd.Dir = moduleRoot
	pipe, err := cmd.StderrPipe()
	Expect(err).NotTo(HaveOccurred())
	w := &widetpRun{cmd: cmd, errBuf: &syncBuffer{}, read: make(chan struct{})}
	Expect(cmd.Start()).To(Succeed())
	DeferCleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	up := make(chan struct{})
	ids := make(chan [2]string, 1)
	go func() {
		defer GinkgoRecover()
		defer close(w.read)
		sc := bufio.NewScanner(pipe)
		var id, dir string
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			w.errBuf.WriteLine(line)
			if m := runLine.FindStringSubmatch(line); m != nil {
				id = m[1]
			}
			if m := localDirLine.FindStringSubmatch(line); m != nil {
				dir = m[1]
			}
			if m := halfway.FindStringSubmatch(line); m != nil && (halfway != nodeUpLine || m[1] != harness.StoreHost) && !signalled {
				signalled = true
				ids <- [2]string{id, dir}
				close(up)
			}
		}
		_, _ = io.Copy(io.Discard, pipe)
	}()
	select {
	case <-up:
	case <-time.After(halfWay):
		Fail("widetp run did not get half-way within " + halfWay.String() + ":\n" + w.stderr())
	case <-ctx.Done():
		Fail("the spec ran out waiting for widetp run to get half-way")
	}
	got := <-ids
	w.runID, w.dir = got[0], got[1]
	Expect(w.runID).NotTo(BeEmpty(), "the run id in the progress:\n%s", w.stderr())
	if rt == harness.RuntimeLocal {
		Expect(w.dir).NotTo(BeEmpty(), "the local run's directory in the progress:\n%s", w.stderr())
	}
	return w
}

// leftovers lists what the child's run still has: containers and networks labelled with its run
// id (Docker), its run directory and every process whose ipc root is inside it (local).
func leftovers(ctx context.Context, rt string, w *widetpRun) []string {
	GinkgoHelper()
	var out []string
	rs, err := harness.Labelled(ctx, rt, w.runID)
	Expect(err).NotTo(HaveOccurred())
	for _, r := range rs {
		if !r.Cache() { // a cache, kept on purpose
			out = append(out, r.String())
		}
	}
	tables, err := harness.PartitionTables(ctx)
	Expect(err).NotTo(HaveOccurred())
	for _, t := range tables {
		if strings.Contains(t.Name, "widetp_"+w.runID+"_") {
			out = append(out, "nftables table "+t.Name)
		}
	}
	if rt == harness.RuntimeDocker {
		return out
	}
	if _, err := os.Stat(w.dir); err == nil {
		out = append(out, "directory "+w.dir)
	}
	for _, p := range simulatedProcesses() {
		if strings.HasPrefix(p.ipcRoot, w.dir+"/") {
			out = append(out, p.String())
		}
	}
	return out
}

// simProcess is a host program of a run on this machine: `widetp node` (with its simulated
// processes, `widetp node process`) or `widetp store`.
type simProcess struct {
	pid     int
	name    string
	ipcRoot string // WIDETP_IPC_ROOT: set on local runs' hosts only
}

func (p simProcess) String() string {
	return fmt.Sprintf("process %d (%s, ipc root %q)", p.pid, p.name, p.ipcRoot)
}

// simulatedProcesses scans /proc for widetp node and store processes (a container's show up too),
// by their command line: the binary is widetp's (a test build in a temp directory included).
func simulatedProcesses() []simProcess {
	pids, err := procfs.PIDs()
	if err != nil {
		return nil
	}
	var out []simProcess
	for _, pid := range pids {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		argv := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if len(argv) < 2 || filepath.Base(argv[0]) != "widetp" || (argv[1] != "node" && argv[1] != "store") {
			continue
		}
		name := "widetp " + argv[1]
		p := simProcess{pid: pid, name: name}
		if env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); err == nil {
			for _, kv := range strings.Split(string(env), "\x00") {
				if v, ok := strings.CutPrefix(kv, harness.EnvIPCRoot+"="); ok {
					p.ipcRoot = v
				}
			}
		}
		out = append(out, p)
	}
	return out
}

// ours: a harness process of this suite — this process, a `ginkgo -p` sibling (same parent), or a
// child of this process (the `widetp run`s above).
func ours(o harness.Owner) bool {
	if o.PID == os.Getpid() {
		return true
	}
	st, err := procfs.Read(o.PID)
	return err == nil && (st.PPID == os.Getppid() || st.PPID == os.Getpid())
}

// suiteLeftovers lists every container or network labelled io.widetp.run whose owner is this
// suite or is gone, and every widetp node or store process of a local run directory whose owner is
// this suite or gone (or whose directory is gone). Runs of other live harness processes — another
// terminal on a shared machine — are someone else's. Images stay: they are a cache by content.
//
// One thing of a gone owner that is not this suite's is not counted, and is named in a report
// entry instead: a network the engine refuses to remove although no container is attached to it
// (moby/moby#42119, Docker 20.10). Only a daemon restart releases it; the run that left it failed
// already, saying so, and every later suite would otherwise fail for it too. Any other network of
// a gone owner is counted (and removed, so that the next suite does not count it again).
func suiteLeftovers(ctx context.Context) []string {
	GinkgoHelper()
	me, err := harness.CurrentOwner()
	Expect(err).NotTo(HaveOccurred())
	mine := func(label string) bool {
		o, err := harness.ParseOwner(label)
		return err != nil || !o.Alive(me.Machine) || ours(o)
	}
	var out []string
	if hasRuntime(harness.RuntimeDocker) {
		rs, err := harness.Labelled(ctx, harness.RuntimeDocker, "")
		Expect(err).NotTo(HaveOccurred())
		for _, r := range rs {
			if r.Cache() || !mine(r.Labels[harness.LabelOwner]) {
				continue
			}
			if o, err := harness.ParseOwner(r.Labels[harness.LabelOwner]); err == nil && r.Kind == "network" && !ours(o) {
				if err := harness.RemoveNetwork(ctx, r.Name); errors.Is(err, harness.ErrStaleNetwork) {
					AddReportEntry("stale network of an earlier run", fmt.Sprintf("%s: %v", r, err))
					continue
				}
			}
			out = append(out, r.String())
		}
	}
	tables, err := harness.PartitionTables(ctx)
	Expect(err).NotTo(HaveOccurred())
	for _, t := range tables {
		if !t.Owner.Alive(me.Machine) || ours(t.Owner) {
			out = append(out, "nftables table "+t.Name)
		}
	}
	for _, p := range simulatedProcesses() {
		if p.ipcRoot == "" {
			continue // a container's: the container check covers it
		}
		owner, err := os.ReadFile(filepath.Join(filepath.Dir(p.ipcRoot), ".owner"))
		if err != nil || mine(strings.TrimSpace(string(owner))) {
			out = append(out, p.String())
		}
	}
	return out
}

// syncBuffer collects a child's stderr lines while a spec may read them.
type syncBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *syncBuffer) WriteLine(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, s)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}
