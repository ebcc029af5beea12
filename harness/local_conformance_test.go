package harness_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"

	"github.com/widetp/widetp/fakestore/client"
	"github.com/widetp/widetp/harness"
	"github.com/widetp/widetp/internal/testbin"
)

// runtimeUnderTest is what the conformance specs need from a Runtime implementation. The specs
// speak only the Runtime interface, and their nodes (hostprobe, the real fakestore) learn where
// they are only from the runtime's environment, so one spec means the same on every runtime.
type runtimeUnderTest struct {
	name   string
	labels Labels
	// skip, when set, runs first in every spec (the Docker runtime skips without an engine).
	skip func()
	// newRuntime starts a run.
	newRuntime func(ctx context.Context, opts ...harness.Option) (harness.Runtime, error)
	// leftovers is called before Close; what it returns, called after Close, lists what the run
	// left behind (processes, containers, networks, files): nothing, when Close did its job.
	leftovers func(ctx context.Context, rt harness.Runtime) func(ctx context.Context) []string
}

// hostprobe is the harness's own cgo test node (harness/testdata/hostprobe): it uses libzmq as
// simnode does, binds where told, pings peers by name and prints "ready <hostname>". Every spec and
// benchmark of both runtimes uses it.
func hostprobe() harness.Program {
	p, err := hostprobeProgram()
	Expect(err).NotTo(HaveOccurred())
	return p
}

// hostprobeProgram is hostprobe for code that runs outside a spec (benchmarks, a child run),
// built once per test process.
func hostprobeProgram() (harness.Program, error) {
	p, err := testbin.Build("./harness/testdata/hostprobe")
	if err != nil {
		return harness.Program{}, err
	}
	return harness.Program{Name: "hostprobe", Path: p}, nil
}

func probe(host string, args ...string) harness.NodeSpec {
	return harness.NodeSpec{Host: host, Program: hostprobe(), Args: args, Ready: readyLine}
}

// The fake store's ports: its defaults (fakestore.Default*Addr), each bound at the host's own
// address, so that parallel local runs do not collide and a container binds every interface.
const (
	metadataPort = 8080
	masterPort   = 50052
	adminPort    = 9003
)

func fakeStore() harness.NodeSpec {
	return harness.NodeSpec{
		Host:    "store",
		Program: harness.Widetp,
		Args: []string{
			"store",
			"-metadata-addr=$(WIDETP_LISTEN_IP):8080",
			"-master-addr=$(WIDETP_LISTEN_IP):50052",
			"-admin-addr=$(WIDETP_LISTEN_IP):9003",
		},
		// `widetp store` prints this once every listener is up.
		Ready: regexp.MustCompile(`^fakestore: flavor=`),
		Ports: []int{metadataPort, masterPort, adminPort},
	}
}

func logsOfRT(ctx context.Context, rt harness.Runtime, host string) string {
	b, err := rt.Logs(ctx, host)
	Expect(err).NotTo(HaveOccurred())
	return string(b)
}

func stateOf(ctx context.Context, rt harness.Runtime, host string) harness.State {
	st, err := rt.State(ctx, host)
	Expect(err).NotTo(HaveOccurred())
	return st
}

// runtimeConformance declares the specs every Runtime passes. Call it at the top level of a test
// file: var _ = runtimeConformance(runtimeUnderTest{...}).
func runtimeConformance(r runtimeUnderTest) bool {
	return Describe("the "+r.name+" runtime", r.labels, Label("conformance"), func() {
		BeforeEach(func() {
			if r.skip != nil {
				r.skip()
			}
		})

		// newRun starts a run whose Close is checked to leave nothing behind, and to be
		// callable again.
		newRun := func(ctx context.Context, opts ...harness.Option) harness.Runtime {
			rt, err := r.newRuntime(ctx, opts...)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func(ctx SpecContext) {
				check := r.leftovers(ctx, rt)
				Expect(rt.Close(ctx)).To(Succeed())
				Expect(check(ctx)).To(BeEmpty(), "what run %s left after Close", rt.RunID())
				Expect(rt.Hosts()).To(BeEmpty(), "hosts after Close")
				Expect(rt.Close(ctx)).To(Succeed(), "a second Close")
			}, NodeTimeout(time.Minute))
			return rt
		}

		It("names every host, gives it a private /tmp, resolves hosts by name, and lets the harness reach the store", func(ctx SpecContext) {
			rt := newRun(ctx)
			store, err := harness.StartStore(ctx, rt, fakeStore())
			Expect(err).NotTo(HaveOccurred())
			Expect(store.Host).To(Equal("store"))
			Expect(store.Addrs).To(HaveLen(3))
			c, err := client.New(client.WithAdminURL("http://" + store.Addrs[adminPort]))
			Expect(err).NotTo(HaveOccurred())
			_, err = c.Health(ctx)
			Expect(err).NotTo(HaveOccurred(), "the harness reaches the store at %s", store.Addrs[adminPort])

			// A name no other spec or run uses: a bind outside the host's private /tmp would show.
			sock := "conformance-" + rt.RunID() + ".ipc"
			ipc := "ipc:///tmp/" + sock
			Expect(rt.StartNodes(ctx, probe("r0-head", "-bind", "tcp://*:5555", "-bind", ipc, "-print-env", "WIDETP_HOST"))).To(Succeed())
			Expect(rt.StartNodes(ctx,
				probe("r0-follower-1", "-bind", ipc, "-ping", "tcp://r0-head:5555", "-ping", ipc, "-get", "http://store:9003/health"),
				probe("r1-head"),
			)).To(Succeed())
			Expect(rt.Hosts()).To(Equal([]string{"store", "r0-head", "r0-follower-1", "r1-head"}))

			head := logsOfRT(ctx, rt, "r0-head")
			Expect(head).To(ContainSubstring("env WIDETP_HOST=r0-head\n"))
			Expect(head).To(ContainSubstring("ready r0-head\n"))
			follower := logsOfRT(ctx, rt, "r0-follower-1")
			// The head answered by name over TCP...
			Expect(follower).To(ContainSubstring("pong tcp://r0-head:5555 r0-head got ping from r0-follower-1\n"))
			// ...the follower's own bind of the same ipc path answered on its own host...
			Expect(follower).To(ContainSubstring("pong " + ipc + " r0-follower-1 got ping from r0-follower-1\n"))
			// ...and the store answered by name.
			Expect(follower).To(ContainSubstring("got http://store:9003/health 200\n"))

			for host, sockets := range map[string][]string{"r0-head": {sock}, "r0-follower-1": {sock}, "r1-head": nil, "store": nil} {
				l, err := rt.IPCDir(ctx, host)
				Expect(err).NotTo(HaveOccurred())
				Expect(l.Sockets()).To(Equal(sockets), "sockets in %s's /tmp", host)
			}
			Expect(filepath.Join(os.TempDir(), sock)).NotTo(BeAnExistingFile(), "a bind in the harness's own /tmp")
		}, SpecTimeout(3*time.Minute))

		It("fails a node that dies early with its exit code and last log lines, and starts the others", func(ctx SpecContext) {
			rt := newRun(ctx)
			err := rt.StartNodes(ctx, probe("good"), probe("bad", "-fail", "AssertionError: data_parallel_rank"))
			var ne *harness.NodeExitedError
			Expect(errors.As(err, &ne)).To(BeTrue(), "error %v", err)
			Expect(ne.Host).To(Equal("bad"))
			Expect(ne.ExitCode).To(Equal(3))
			Expect(ne.Tail).To(ContainElements("log line 2", "hostprobe: AssertionError: data_parallel_rank"))
			Expect(err.Error()).To(ContainSubstring("node bad exited with code 3 before it was ready"))
			Expect(err.Error()).NotTo(ContainSubstring("good"))
			Expect(stateOf(ctx, rt, "good").Running).To(BeTrue())
			Expect(stateOf(ctx, rt, "bad")).To(MatchFields(IgnoreExtras, Fields{"Status": Equal("exited"), "Running": BeFalse(), "ExitCode": Equal(3)}))
		}, SpecTimeout(3*time.Minute))

		It("fails a node that is never ready within the bound, naming what it waited for", func(ctx SpecContext) {
			rt := newRun(ctx, harness.WithStartTimeout(3*time.Second))
			spec := probe("slow")
			spec.Ready = regexp.MustCompile(`^never printed$`)
			err := rt.StartNodes(ctx, spec)
			Expect(err).To(MatchError(ContainSubstring(`not ready within 3s (no line matching "^never printed$")`)))
			Expect(err.Error()).To(ContainSubstring("ready slow"), "the last log lines")
		}, SpecTimeout(time.Minute))

		It("rejects bad specs before starting anything, and names unknown hosts", func(ctx SpecContext) {
			rt := newRun(ctx)
			Expect(rt.StartNodes(ctx, probe("a"), probe("a"))).To(MatchError(ContainSubstring("node a: host listed twice")))
			Expect(rt.StartNodes(ctx, probe("R0_Head"))).To(MatchError(ContainSubstring(`node host "R0_Head": want a DNS label`)))
			Expect(rt.StartNodes(ctx, probe("b", "-bind", "tcp://$(NO_SUCH_VARIABLE):1"))).To(MatchError(ContainSubstring("$(NO_SUCH_VARIABLE): no such variable")))
			Expect(rt.Hosts()).To(BeEmpty())
			Expect(rt.StartNodes(ctx, probe("a"))).To(Succeed())
			Expect(rt.StartNodes(ctx, probe("a"))).To(MatchError(ContainSubstring("node a: host already started in this run")))
			notStarted := "host nope: not started in run " + rt.RunID()
			Expect(rt.Stop(ctx, "nope")).To(MatchError(ContainSubstring(notStarted)))
			Expect(rt.Kill(ctx, "nope", "SIGKILL")).To(MatchError(ContainSubstring(notStarted)))
			Expect(rt.Pause(ctx, "nope")).To(MatchError(ContainSubstring(notStarted)))
			Expect(rt.Unpause(ctx, "nope")).To(MatchError(ContainSubstring(notStarted)))
			Expect(rt.Restart(ctx, "nope")).To(MatchError(ContainSubstring(notStarted)))
			_, err := rt.State(ctx, "nope")
			Expect(err).To(MatchError(ContainSubstring(notStarted)))
			_, err = rt.Logs(ctx, "nope")
			Expect(err).To(MatchError(ContainSubstring(notStarted)))
			_, err = rt.IPCDir(ctx, "nope")
			Expect(err).To(MatchError(ContainSubstring(notStarted)))
			_, err = rt.Inspect(ctx, "nope")
			Expect(err).To(MatchError(ContainSubstring(notStarted)))
			Expect(rt.Kill(ctx, "a", "SIGNOPE")).To(MatchError(ContainSubstring("SIGNOPE")))
		}, SpecTimeout(2*time.Minute))

		It("pauses every process of a host, children in their own process groups included, and unpauses it", func(ctx SpecContext) {
			rt := newRun(ctx)
			Expect(rt.StartNodes(ctx, probe("a", "-bind", "tcp://*:5555", "-child-bind", "tcp://*:5556"))).To(Succeed())
			Expect(rt.Pause(ctx, "a")).To(Succeed())
			Expect(stateOf(ctx, rt, "a")).To(MatchFields(IgnoreExtras, Fields{"Status": Equal("paused"), "Paused": BeTrue(), "Running": BeTrue()}))
			Expect(rt.Pause(ctx, "a")).To(MatchError(ContainSubstring("host a")), "a second pause")

			// A peer's ping of the paused host, and of its child, goes unanswered. The 1 s bound
			// is the probe's own: a running host answers in milliseconds.
			for port, who := range map[string]string{"5555": "the program", "5556": "its child"} {
				err := rt.StartNodes(ctx, probe("asks-"+port, "-ping", "tcp://a:"+port, "-timeout", "1s"))
				var ne *harness.NodeExitedError
				Expect(errors.As(err, &ne)).To(BeTrue(), "%s of a paused host answered: %v", who, err)
				Expect(strings.Join(ne.Tail, "\n")).To(ContainSubstring("no reply from tcp://a:" + port + " within 1s"))
			}

			Expect(rt.Unpause(ctx, "a")).To(Succeed())
			Expect(stateOf(ctx, rt, "a")).To(MatchFields(IgnoreExtras, Fields{"Status": Equal("running"), "Paused": BeFalse()}))
			Expect(rt.Unpause(ctx, "a")).To(MatchError(ContainSubstring("host a")), "unpause of a running host")
			Expect(rt.StartNodes(ctx, probe("asks-again", "-ping", "tcp://a:5555", "-ping", "tcp://a:5556"))).To(Succeed())
			again := logsOfRT(ctx, rt, "asks-again")
			Expect(again).To(ContainSubstring("a got ping from asks-again\n"))
			Expect(again).To(ContainSubstring("a/child got ping from asks-again\n"))
		}, SpecTimeout(2*time.Minute))

		It("restarts a host with SIGTERM first and an empty /tmp, stops it cleanly, and kills", func(ctx SpecContext) {
			rt := newRun(ctx, harness.WithStopGrace(10*time.Second))
			Expect(rt.StartNodes(ctx, probe("a", "-boot", "-bind", "ipc:///tmp/a.ipc"), probe("b"))).To(Succeed())

			Expect(rt.Restart(ctx, "a")).To(Succeed())
			logs := logsOfRT(ctx, rt, "a")
			Expect(strings.Count(logs, "ready a\n")).To(Equal(2), "a ready line per start")
			Expect(logs).To(ContainSubstring("stopping on terminated"), "SIGTERM first")
			Expect(strings.Count(logs, "boot 1\n")).To(Equal(2), "each start found an empty /tmp")
			Expect(logs).NotTo(ContainSubstring("boot 2"))
			l, err := rt.IPCDir(ctx, "a")
			Expect(err).NotTo(HaveOccurred())
			Expect(l.Sockets()).To(Equal([]string{"a.ipc"}))
			Expect(l.Entries).To(ContainElement(MatchFields(IgnoreExtras, Fields{"Path": Equal("boot-1"), "Type": Equal("file")})))

			Expect(rt.Stop(ctx, "a")).To(Succeed())
			Expect(stateOf(ctx, rt, "a")).To(MatchFields(IgnoreExtras, Fields{"Status": Equal("exited"), "Running": BeFalse(), "ExitCode": Equal(0)}))
			Expect(rt.Stop(ctx, "a")).To(Succeed(), "stopping a stopped host")
			Expect(rt.Kill(ctx, "b", "SIGKILL")).To(Succeed())
			Eventually(func() string { return stateOf(ctx, rt, "b").Status }).WithContext(ctx).WithTimeout(10 * time.Second).Should(Equal("exited"))
			Expect(stateOf(ctx, rt, "b").ExitCode).To(Equal(137), "128 + SIGKILL")
			Expect(rt.Kill(ctx, "b", "SIGTERM")).To(MatchError(ContainSubstring("host b")), "kill of an exited host")

			Expect(rt.Restart(ctx, "b")).To(Succeed(), "a restart brings an exited host back")
			Expect(stateOf(ctx, rt, "b").Status).To(Equal("running"))
		}, SpecTimeout(3*time.Minute))

		It("removes the run on Close even when the caller's context is already done", func(ctx SpecContext) {
			rt := newRun(ctx)
			Expect(rt.StartNodes(ctx, probe("a"), probe("b", "-child-bind", "tcp://*:5556"))).To(Succeed())
			check := r.leftovers(ctx, rt)
			done, cancel := context.WithCancel(ctx)
			cancel()
			Expect(rt.Close(done)).To(Succeed())
			Expect(check(ctx)).To(BeEmpty())
		}, SpecTimeout(2*time.Minute))

		It("describes every host as JSON with its host name and state", func(ctx SpecContext) {
			rt := newRun(ctx)
			Expect(rt.StartNodes(ctx, probe("a"), probe("b"))).To(Succeed())
			Expect(rt.Stop(ctx, "b")).To(Succeed())
			for host, status := range map[string]string{"a": "running", "b": "exited"} {
				b, err := rt.Inspect(ctx, host)
				Expect(err).NotTo(HaveOccurred())
				var ins struct {
					Config struct{ Hostname string }
					State  struct{ Status string }
				}
				Expect(json.Unmarshal(b, &ins)).To(Succeed())
				Expect(ins.Config.Hostname).To(Equal(host))
				Expect(ins.State.Status).To(Equal(status))
			}
		}, SpecTimeout(2*time.Minute))
	})
}
