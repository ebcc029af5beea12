//go:build linux

package harness_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/widetp/widetp/harness"
	"github.com/widetp/widetp/internal/procfs"
)

// The local runtime passes the conformance specs; whatever a run started must be gone after
// Close, and so must its directory.
var _ = runtimeConformance(runtimeUnderTest{
	name:   "local",
	labels: Label("local"),
	newRuntime: func(ctx context.Context, opts ...harness.Option) (harness.Runtime, error) {
		return harness.NewLocal(ctx, opts...)
	},
	leftovers: localLeftovers,
})

// localLeftovers records every process of every host and the run directory; after Close it lists
// those still there.
func localLeftovers(ctx context.Context, rt harness.Runtime) func(context.Context) []string {
	dir := rt.(*harness.Local).Dir()
	var procs []procID
	for _, h := range rt.Hosts() {
		procs = append(procs, processesOf(ctx, rt, h)...)
	}
	return func(context.Context) []string {
		var left []string
		for _, p := range procs {
			if p.running() {
				left = append(left, "process "+p.String())
			}
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			left = append(left, "run directory "+dir)
		}
		return left
	}
}

// procID is a process across pid reuse: its pid and start time (procfs.Stat.Start).
type procID struct {
	pid   int
	start uint64
}

func (p procID) String() string { return fmt.Sprintf("%d (started at tick %d)", p.pid, p.start) }

func newProcID(pid int) procID {
	st, err := procfs.Read(pid)
	Expect(err).NotTo(HaveOccurred(), "process %d is gone already", pid)
	return procID{pid: pid, start: st.Start}
}

// running reports whether the process still runs (or is stopped). A zombie holds nothing but its
// pid; one whose parent is this process (a child subreaper) is reaped here, so that specs leave
// no zombies.
func (p procID) running() bool {
	st, err := procfs.Read(p.pid)
	if err != nil || st.Start != p.start {
		return false
	}
	if !st.Live() {
		if st.PPID == os.Getpid() {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(p.pid, &ws, syscall.WNOHANG, nil)
		}
		return false
	}
	return true
}

func inspectLocal(ctx context.Context, rt harness.Runtime, host string) harness.LocalInspect {
	b, err := rt.Inspect(ctx, host)
	Expect(err).NotTo(HaveOccurred())
	var ins harness.LocalInspect
	Expect(json.Unmarshal(b, &ins)).To(Succeed())
	return ins
}

// processesOf lists the live processes of a host.
func processesOf(ctx context.Context, rt harness.Runtime, host string) []procID {
	var out []procID
	for _, p := range inspectLocal(ctx, rt, host).Processes {
		if p.State != "Z" {
			if st, err := procfs.Read(p.Pid); err == nil {
				out = append(out, procID{pid: p.Pid, start: st.Start})
			}
		}
	}
	return out
}

func allGone(procs []procID) func() []procID {
	return func() []procID {
		var left []procID
		for _, p := range procs {
			if p.running() {
				left = append(left, p)
			}
		}
		return left
	}
}

func newLocal(ctx context.Context, opts ...harness.Option) *harness.Local {
	rt, err := harness.NewLocal(ctx, opts...)
	Expect(err).NotTo(HaveOccurred())
	l := rt.(*harness.Local)
	DeferCleanup(func(ctx SpecContext) {
		check := localLeftovers(ctx, l)
		Expect(l.Close(ctx)).To(Succeed())
		Expect(check(ctx)).To(BeEmpty())
	}, NodeTimeout(time.Minute))
	return l
}

// envOf reads the "env NAME=value" lines hostprobe's -print-env prints.
func envOf(logs string) map[string]string {
	env := map[string]string{}
	for _, line := range strings.Split(logs, "\n") {
		if kv, ok := strings.CutPrefix(line, "env "); ok {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
	}
	return env
}

var _ = Describe("the local runtime", Label("local"), func() {
	It("gives every host its own loopback address, a map of every host, a private directory, and none of the harness's environment", func(ctx SpecContext) {
		Expect(os.Setenv("VLLM_LEAK_CHECK", "from the harness")).To(Succeed())
		DeferCleanup(os.Unsetenv, "VLLM_LEAK_CHECK")
		l := newLocal(ctx)
		store, err := l.StartStore(ctx, fakeStore())
		Expect(err).NotTo(HaveOccurred())
		printEnv := "-print-env=WIDETP_HOST,WIDETP_LISTEN_IP,WIDETP_IPC_ROOT,WIDETP_HOSTS,TMPDIR,PATH,VLLM_LEAK_CHECK"
		Expect(l.StartNodes(ctx, probe("a", printEnv), probe("b", printEnv))).To(Succeed())

		block := netip.MustParsePrefix(l.Block())
		Expect(block.Bits()).To(Equal(24))
		Expect(block.Addr().IsLoopback()).To(BeTrue())
		Expect(block.Contains(netip.MustParseAddr("127.0.0.1"))).To(BeFalse(), "the machine's own 127.0.0.1")
		storeAddr, err := l.Address("store")
		Expect(err).NotTo(HaveOccurred())
		Expect(store.Addrs).To(Equal(map[int]string{
			metadataPort: storeAddr.String() + ":8080", masterPort: storeAddr.String() + ":50052", adminPort: storeAddr.String() + ":9003"}))

		seen := map[string]string{}
		for _, host := range []string{"a", "b"} {
			env := envOf(logsOfRT(ctx, l, host))
			addr := netip.MustParseAddr(env["WIDETP_LISTEN_IP"])
			Expect(block.Contains(addr)).To(BeTrue(), "%s's address %s in the run's block %s", host, addr, block)
			Expect(seen).NotTo(HaveKey(addr.String()), "%s shares its address", host)
			seen[addr.String()] = host
			Expect(env["WIDETP_HOST"]).To(Equal(host))
			Expect(env["WIDETP_HOSTS"]).To(Equal(fmt.Sprintf("store=%s,a=%s,b=%s", storeAddr, mustAddr(l, "a"), mustAddr(l, "b"))))
			// The host's directory is named after the last byte of its address (short: ipc paths).
			root := filepath.Join(l.Dir(), strconv.Itoa(int(addr.As4()[3])))
			Expect(env["WIDETP_IPC_ROOT"]).To(Equal(root))
			Expect(env["TMPDIR"]).To(Equal(filepath.Join(root, "tmp")))
			Expect(env["PATH"]).To(Equal("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"), "Docker's default, not the user's")
			Expect(env["VLLM_LEAK_CHECK"]).To(BeEmpty(), "the harness's VLLM_* variables reach no host")
			Expect(filepath.Join(l.Dir(), host+".log")).To(BeAnExistingFile())

			ins := inspectLocal(ctx, l, host)
			Expect(ins.Runtime).To(Equal("local"))
			Expect(ins.Pid).To(BeNumerically(">", 1))
			Expect([]int{ins.Pgid, ins.Sid, ins.State.Pid}).To(Equal([]int{ins.Pid, ins.Pid, ins.Pid}), "the program leads its group and session")
			Expect(ins.Processes).NotTo(BeEmpty())
			Expect(ins.Processes[0].Pid).To(Equal(ins.Pid))
			Expect(ins.NetworkSettings.IPAddress).To(Equal(addr.String()))
			Expect(ins.NetworkSettings.Hosts).To(HaveKeyWithValue("store", storeAddr.String()))
			Expect(ins.Config.Cmd[0]).To(Equal(ins.Binary))
			Expect(ins.Config.Env).To(ContainElement("WIDETP_HOST=" + host))
			Expect(ins.Config.WorkingDir).To(Equal(ins.IPCRoot))
		}
	}, SpecTimeout(3*time.Minute))

	It("runs parallel runs side by side on distinct blocks and directories, each store on the same ports", func(ctx SpecContext) {
		// Even under one run id: a local run is named by its block, which it holds alone.
		runs := []*harness.Local{newLocal(ctx), newLocal(ctx, harness.WithRunID("same-id")), newLocal(ctx, harness.WithRunID("same-id"))}
		blocks, dirs := map[string]bool{}, map[string]bool{}
		for _, l := range runs {
			blocks[l.Block()], dirs[l.Dir()] = true, true
			Expect(filepath.Base(l.Dir()) + ".0/24").To(Equal(strings.TrimPrefix(l.Block(), "127.")))
			_, err := l.StartStore(ctx, fakeStore())
			Expect(err).NotTo(HaveOccurred(), "store of run %s on %s", l.RunID(), l.Block())
		}
		Expect(blocks).To(HaveLen(3))
		Expect(dirs).To(HaveLen(3))
	}, SpecTimeout(2*time.Minute))

	It("binds the ipc paths of a host with a 40-byte name, as a Kubernetes pod has", func(ctx SpecContext) {
		// scenarios/ holds field reports whose hosts are pods: vllm-inference-pytorchjob-final-worker-0.
		const host = "vllm-inference-pytorchjob-final-worker-0"
		Expect(host).To(HaveLen(40))
		// vLLM's lookup path (vllm/mooncake.go): ipc://{VLLM_RPC_BASE_PATH}/lookup_rpc_port_{port}_host_{hostname}_dp_rank{idx}.
		ipc := "ipc:///tmp/lookup_rpc_port_65535_host_" + host + "_dp_rank0"
		l := newLocal(ctx)
		Expect(l.StartNodes(ctx, probe(host, "-bind", ipc, "-ping", ipc))).To(Succeed())
		Expect(logsOfRT(ctx, l, host)).To(ContainSubstring("pong " + ipc + " " + host + " got ping from " + host + "\n"))
	}, SpecTimeout(2*time.Minute))

	It("expands $(VAR) in a program's arguments from the host's environment", func(ctx SpecContext) {
		l := newLocal(ctx)
		Expect(l.StartNodes(ctx, probe("a", "-bind", "tcp://$(WIDETP_LISTEN_IP):5555", "-print-env", "$$(WIDETP_HOST)"))).To(Succeed())
		logs := logsOfRT(ctx, l, "a")
		Expect(logs).To(ContainSubstring("bound tcp://" + mustAddr(l, "a").String() + ":5555\n"))
		Expect(logs).To(ContainSubstring("env $(WIDETP_HOST)=\n"), "$$ is a literal $")
	}, SpecTimeout(2*time.Minute))

	It("refuses a store that does not listen at its own address", func(ctx SpecContext) {
		l := newLocal(ctx)
		_, err := l.StartStore(ctx, harness.NodeSpec{Host: "store", Program: hostprobe(), Ready: readyLine, Ports: []int{7000}})
		Expect(err).To(MatchError(MatchRegexp(`start store: host store: port 7000: nothing listens at 127\.\d+\.\d+\.1:7000 \(pass \$\(WIDETP_LISTEN_IP\):7000`)))
	}, SpecTimeout(2*time.Minute))

	It("stops every process of a paused host, in every process group, and continues them all", func(ctx SpecContext) {
		l := newLocal(ctx)
		Expect(l.StartNodes(ctx, probe("a", "-child-bind", "tcp://*:5556", "-child-bind", "tcp://*:5557", "-orphan"))).To(Succeed())
		before := inspectLocal(ctx, l, "a").Processes
		groups := map[int]bool{}
		for _, p := range before {
			groups[p.Pgid] = true
		}
		Expect(len(groups)).To(BeNumerically(">=", 4), "the program, two children and the orphan each lead a group: %+v", before)

		Expect(l.Pause(ctx, "a")).To(Succeed())
		paused := inspectLocal(ctx, l, "a").Processes
		Expect(paused).To(HaveLen(len(before)))
		for _, p := range paused {
			Expect(p.State).To(Equal("T"), "process %d (%s) of the paused host", p.Pid, p.Comm)
		}
		Expect(l.Unpause(ctx, "a")).To(Succeed())
		for _, p := range inspectLocal(ctx, l, "a").Processes {
			Expect(p.State).NotTo(Equal("T"), "process %d (%s) after unpause", p.Pid, p.Comm)
		}
	}, SpecTimeout(2*time.Minute))

	It("ends what a program leaves behind when it exits, as a container ends with its init", func(ctx SpecContext) {
		l := newLocal(ctx)
		Expect(l.StartNodes(ctx, probe("a", "-orphan"))).To(Succeed())
		m := regexp.MustCompile(`(?m)^orphan (\d+)$`).FindStringSubmatch(logsOfRT(ctx, l, "a"))
		Expect(m).NotTo(BeNil())
		pid, _ := strconv.Atoi(m[1])
		orphan := newProcID(pid)
		Expect(orphan.running()).To(BeTrue())
		Expect(l.Kill(ctx, "a", "SIGKILL")).To(Succeed())
		Eventually(func() string { return stateOf(ctx, l, "a").Status }).WithContext(ctx).WithTimeout(15 * time.Second).Should(Equal("exited"))
		// The host is "exited" only once its session is empty: no wait is needed here.
		Expect(orphan.running()).To(BeFalse(), "the orphan %s outlived its host's program", orphan)
		_, err := procfs.Read(pid)
		Expect(err).To(MatchError(os.ErrNotExist), "the orphan was re-parented to the harness and reaped, not left a zombie")
	}, SpecTimeout(2*time.Minute))

	It("kills every process of every host at Close, even one that ignores SIGTERM and would outlive its parent", func(ctx SpecContext) {
		rt, err := harness.NewLocal(ctx)
		Expect(err).NotTo(HaveOccurred())
		l := rt.(*harness.Local)
		open := harness.LiveRuntimes()
		Expect(l.StartNodes(ctx, probe("a", "-child-bind", "tcp://*:5556", "-orphan"), probe("b", "-orphan"))).To(Succeed())
		procs := append(processesOf(ctx, l, "a"), processesOf(ctx, l, "b")...)
		Expect(len(procs)).To(BeNumerically(">=", 5))
		dir := l.Dir()
		Expect(l.Close(ctx)).To(Succeed())
		Expect(allGone(procs)()).To(BeEmpty(), "Close returns once every process is gone")
		Expect(dir).NotTo(BeAnExistingFile())
		Expect(harness.LiveRuntimes()).To(Equal(open-1), "Close takes the run out of CloseAll's registry")
		Expect(l.StartNodes(ctx, probe("c"))).To(MatchError(ContainSubstring("the runtime is closed")))
	}, SpecTimeout(2*time.Minute))

	It("runs the program's binary in place, compiling nothing", func(ctx SpecContext) {
		var progress bytes.Buffer
		l := newLocal(ctx, harness.WithProgress(&progress))
		Expect(l.StartNodes(ctx, probe("a"))).To(Succeed())
		a := inspectLocal(ctx, l, "a")
		Expect(a.Binary).To(Equal(hostprobe().Path))
		Expect(a.BinaryHash).To(HaveLen(64))
		Expect(progress.String()).NotTo(ContainSubstring("built"))
		Expect(progress.String()).To(ContainSubstring("node a up at " + mustAddr(l, "a").String()))
	}, SpecTimeout(3*time.Minute))

	It("names a program whose binary is missing as an infrastructure failure, and starts nothing", func(ctx SpecContext) {
		l := newLocal(ctx)
		p := harness.Program{Name: "gone", Path: filepath.Join(GinkgoT().TempDir(), "gone")}
		err := l.StartNodes(ctx, harness.NodeSpec{Host: "a", Program: p}, probe("b"))
		Expect(err).To(MatchError(ContainSubstring("program gone")))
		Expect(harness.Infrastructure(err)).To(BeTrue())
		Expect(l.Hosts()).To(BeEmpty())
		Expect(l.StartNodes(ctx, probe("a"))).To(Succeed(), "a failed plan releases its names")
	}, SpecTimeout(3*time.Minute))
})

func mustAddr(l *harness.Local, host string) netip.Addr {
	a, err := l.Address(host)
	Expect(err).NotTo(HaveOccurred())
	return a
}
