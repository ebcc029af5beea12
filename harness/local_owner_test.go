//go:build linux

package harness_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/widetp/widetp/harness"
)

// localOwnerEnv makes the test binary act as a harness process that owns a local run (the
// leak specs below): "kill" blocks until it is SIGKILLed; "signal" closes every run through
// CloseAll on SIGINT or SIGTERM, as the CLI's handler does.
const localOwnerEnv = "WIDETP_LOCAL_TEST_OWNER"

// init, not TestMain (the suite's own, in harness_suite_test.go): the owner must not start Ginkgo.
func init() {
	if mode := os.Getenv(localOwnerEnv); mode != "" {
		os.Exit(runLocalOwner(mode))
	}
}

// ownerReport is what the owner reports: every process of every host, and its run directory.
type ownerReport struct {
	Dir  string
	Pids []int
	// Orphans are the pids (among Pids) of the processes that do not die with their parent.
	Orphans []int
	RunID   string
}

var orphanLine = regexp.MustCompile(`(?m)^orphan (\d+)$`)

func runLocalOwner(mode string) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "owner:", err); return 1 }
	// Subscribed before the run exists: a signal that comes early still closes it.
	sigs := make(chan os.Signal, 1)
	if mode == "signal" {
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	}
	// 2 min: a cold build of the two programs on 2 shared cores, and the start.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rt, err := harness.NewLocal(ctx)
	if err != nil {
		return fail(err)
	}
	p, err := hostprobeProgram()
	if err != nil {
		return fail(err)
	}
	if _, err := harness.StartStore(ctx, rt, fakeStore()); err != nil {
		return fail(err)
	}
	// Children in process groups of their own, dying with their parent, as simnode's are, and an
	// orphan, which dies with nothing: only Close, or the next run's sweep, ends it.
	args := []string{"-child-bind", "tcp://*:5556", "-child-bind", "tcp://*:5557", "-orphan"}
	nodes := []harness.NodeSpec{
		{Host: "r0-head", Program: p, Args: args, Ready: readyLine},
		{Host: "r0-follower", Program: p, Args: args, Ready: readyLine},
	}
	if err := rt.StartNodes(ctx, nodes...); err != nil {
		return fail(err)
	}
	rep := ownerReport{Dir: rt.(*harness.Local).Dir(), RunID: rt.RunID()}
	for _, h := range rt.Hosts() {
		b, err := rt.Inspect(ctx, h)
		if err != nil {
			return fail(err)
		}
		var ins harness.LocalInspect
		if err := json.Unmarshal(b, &ins); err != nil {
			return fail(err)
		}
		for _, proc := range ins.Processes {
			rep.Pids = append(rep.Pids, proc.Pid)
		}
		logs, err := rt.Logs(ctx, h)
		if err != nil {
			return fail(err)
		}
		for _, m := range orphanLine.FindAllStringSubmatch(string(logs), -1) {
			pid, _ := strconv.Atoi(m[1])
			rep.Orphans = append(rep.Orphans, pid)
		}
	}
	b, err := json.Marshal(rep)
	if err != nil {
		return fail(err)
	}
	fmt.Printf("half-way %s\n", b)
	if mode == "signal" {
		<-sigs
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer ccancel()
		if err := harness.CloseAll(cctx); err != nil {
			return fail(err)
		}
		return 0
	}
	// Block until killed; the parent holds stdin open. Nothing here closes the run: that is the point.
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	return 2
}

// startOwner runs the test binary as an owner and returns it once its run is up.
func startOwner(ctx context.Context, mode string) (*exec.Cmd, ownerReport) {
	cmd, line := startHalfWay(ctx, localOwnerEnv+"="+mode)
	var rep ownerReport
	Expect(json.Unmarshal([]byte(line), &rep)).To(Succeed())
	return cmd, rep
}

var _ = Describe("a local run whose owner goes away", Label("local"), func() {
	It("leaves no process behind when its owner is SIGKILLed: Pdeathsig ends the hosts, the next run's sweep what outlived them", func(ctx SpecContext) {
		cmd, rep := startOwner(ctx, "kill")
		var procs, dieWithParent []procID
		for _, pid := range rep.Pids {
			p := newProcID(pid)
			procs = append(procs, p)
			if !slices.Contains(rep.Orphans, pid) {
				dieWithParent = append(dieWithParent, p)
			}
		}
		// The store; two programs, each with two children and an orphan: every process of the run.
		Expect(procs).To(HaveLen(9))
		Expect(rep.Orphans).To(HaveLen(2))
		Expect(rep.Dir).To(BeADirectory())

		Expect(cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
		Expect(cmd.Wait()).To(MatchError(ContainSubstring("killed")))
		// Pdeathsig ends each program when the owner dies, and each child when its program
		// does; the kernel does it in microseconds, but asynchronously.
		Eventually(allGone(dieWithParent)).WithContext(ctx).WithTimeout(10 * time.Second).Should(BeEmpty())

		// The orphans die with nothing; the next run's sweep (this one's, or a parallel
		// suite process's) ends them through the sessions the dead run recorded, and returns
		// only once they are gone.
		next := newLocal(ctx)
		Expect(allGone(procs)()).To(BeEmpty())
		Expect(rep.Dir).NotTo(BeAnExistingFile(), "the sweep removes the dead run's directory")
		Expect(filepath.Dir(rep.Dir)).To(Equal(filepath.Dir(next.Dir())))
	}, SpecTimeout(3*time.Minute))

	DescribeTable("closes every run through CloseAll when its owner is told to stop",
		func(ctx SpecContext, sig syscall.Signal) {
			cmd, rep := startOwner(ctx, "signal")
			var procs []procID
			for _, pid := range rep.Pids {
				procs = append(procs, newProcID(pid))
			}
			// The store; two programs, each with two children and an orphan.
			Expect(procs).To(HaveLen(9))
			Expect(cmd.Process.Signal(sig)).To(Succeed())
			Expect(cmd.Wait()).To(Succeed(), "the owner's CloseAll failed")
			// CloseAll returned only once every process was gone.
			Expect(allGone(procs)()).To(BeEmpty())
			Expect(rep.Dir).NotTo(BeAnExistingFile())
		},
		Entry("SIGINT (Ctrl-C)", syscall.SIGINT, SpecTimeout(3*time.Minute)),
		Entry("SIGTERM (a CI runner's cancel)", syscall.SIGTERM, SpecTimeout(3*time.Minute)),
	)
})
