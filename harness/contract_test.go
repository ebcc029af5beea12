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

	zmq "github.com/pebbe/zmq4"

	"github.com/widetp/widetp/harness"
)

// runtimeContract is what every Runtime promises, as specs over a factory: the Docker runtime runs
// them now (docker_test.go), the local runtime will run the same ones. A factory registers its
// own cleanup checks (that Close leaves nothing of the run behind).
func runtimeContract(newRun func(ctx context.Context, opts ...harness.Option) harness.Runtime) {
	It("gives every node its host name, an alias its peers resolve through libzmq, and a private /tmp", func(ctx SpecContext) {
		d := newRun(ctx)
		Expect(d.StartNodes(ctx,
			node("r0-head", "-bind", "ipc:///tmp/lookup.ipc", "-bind", "tcp://*:5555", "-print-env", "WIDETP_HOST"),
		)).To(Succeed())
		Expect(d.StartNodes(ctx,
			node("r0-follower-1", "-bind", "ipc:///tmp/lookup.ipc", "-ping", "tcp://r0-head:5555", "-ping", "ipc:///tmp/lookup.ipc"),
			node("r1-head"),
		)).To(Succeed())
		Expect(d.Hosts()).To(Equal([]string{"r0-head", "r0-follower-1", "r1-head"}))

		head := logsOf(ctx, d, "r0-head")
		Expect(head).To(ContainSubstring("ready r0-head\n"), "hostname")
		Expect(head).To(ContainSubstring("env WIDETP_HOST=r0-head\n"))
		follower := logsOf(ctx, d, "r0-follower-1")
		// The head answered by name over TCP...
		Expect(follower).To(ContainSubstring("pong tcp://r0-head:5555 r0-head got ping from r0-follower-1\n"))
		// ...and the follower's own bind of the same ipc path answered on its host: no collision.
		Expect(follower).To(ContainSubstring("pong ipc:///tmp/lookup.ipc r0-follower-1 got ping from r0-follower-1\n"))

		for host, sockets := range map[string][]string{"r0-head": {"lookup.ipc"}, "r0-follower-1": {"lookup.ipc"}, "r1-head": nil} {
			l, err := d.IPCDir(ctx, host)
			Expect(err).NotTo(HaveOccurred())
			Expect(l.Sockets()).To(Equal(sockets), "sockets in %s's /tmp", host)
		}
	}, SpecTimeout(3*time.Minute))

	It("fails a node that dies early with its exit code and last log lines, and starts the others", func(ctx SpecContext) {
		d := newRun(ctx)
		err := d.StartNodes(ctx, node("good"), node("bad", "-fail", "AssertionError: data_parallel_rank"))
		var ne *harness.NodeExitedError
		Expect(errors.As(err, &ne)).To(BeTrue(), "error %v", err)
		Expect(ne.Host).To(Equal("bad"))
		Expect(ne.ExitCode).To(Equal(3))
		Expect(ne.Tail).To(ContainElements("log line 2", "zmqbind: AssertionError: data_parallel_rank"))
		Expect(err.Error()).To(ContainSubstring("node bad exited with code 3 before it was ready"))
		Expect(err.Error()).NotTo(ContainSubstring("good"))
		st, err := d.State(ctx, "good")
		Expect(err).NotTo(HaveOccurred())
		Expect(st.Running).To(BeTrue())
	}, SpecTimeout(3*time.Minute))

	It("fails a node that is never ready within the bound, naming what it waited for", func(ctx SpecContext) {
		d := newRun(ctx, harness.WithStartTimeout(3*time.Second))
		spec := node("slow")
		spec.Ready = regexp.MustCompile(`^never printed$`)
		err := d.StartNodes(ctx, spec)
		Expect(err).To(MatchError(ContainSubstring(`not ready within 3s (no line matching "^never printed$")`)))
		Expect(err.Error()).To(ContainSubstring("ready slow"), "the last log lines")
	}, SpecTimeout(time.Minute))

	It("rejects bad specs before starting anything", func(ctx SpecContext) {
		d := newRun(ctx)
		Expect(d.StartNodes(ctx, node("a"), node("a"))).To(MatchError(ContainSubstring("node a: host listed twice")))
		Expect(d.StartNodes(ctx, node("R0_Head"))).To(MatchError(ContainSubstring(`node host "R0_Head": want a DNS label`)))
		Expect(d.Hosts()).To(BeEmpty())
		Expect(d.StartNodes(ctx, node("a"))).To(Succeed())
		Expect(d.StartNodes(ctx, node("a"))).To(MatchError(ContainSubstring("node a: host already started in this run")))
		Expect(d.Stop(ctx, "nope")).To(MatchError(ContainSubstring("host nope: not started in run " + d.RunID())))
		Expect(d.Kill(ctx, "nope", "SIGKILL")).To(MatchError(ContainSubstring("host nope")))
		_, err := d.Logs(ctx, "nope")
		Expect(err).To(MatchError(ContainSubstring("host nope")))
		_, err = d.IPCDir(ctx, "nope")
		Expect(err).To(MatchError(ContainSubstring("host nope")))
	}, SpecTimeout(2*time.Minute))

	It("lets only one of two concurrent starts take a host name", func(ctx SpecContext) {
		d := newRun(ctx)
		errs := make(chan error, 2)
		for range 2 {
			go func() { errs <- d.StartNodes(ctx, node("x")) }()
		}
		first, second := <-errs, <-errs
		Expect([]error{first, second}).To(ContainElement(BeNil()))
		Expect([]error{first, second}).To(ContainElement(MatchError(ContainSubstring("node x: host already started in this run"))))
		Expect(d.Hosts()).To(Equal([]string{"x"}))
	}, SpecTimeout(2*time.Minute))

	It("pauses, unpauses, restarts, stops and kills nodes", func(ctx SpecContext) {
		d := newRun(ctx, harness.WithStopGrace(10*time.Second))
		Expect(d.StartNodes(ctx, node("a", "-bind", "ipc:///tmp/a.ipc"), node("b"))).To(Succeed())
		state := func(host string) harness.State {
			st, err := d.State(ctx, host)
			Expect(err).NotTo(HaveOccurred())
			return st
		}

		Expect(d.Pause(ctx, "a")).To(Succeed())
		Expect(state("a")).To(MatchFields(IgnoreExtras, Fields{"Status": Equal("paused"), "Paused": BeTrue()}))
		Expect(d.Unpause(ctx, "a")).To(Succeed())
		Expect(state("a")).To(MatchFields(IgnoreExtras, Fields{"Status": Equal("running"), "Paused": BeFalse()}))

		Expect(d.Restart(ctx, "a")).To(Succeed())
		Expect(strings.Count(logsOf(ctx, d, "a"), "ready a\n")).To(Equal(2), "a ready line per start")
		Expect(logsOf(ctx, d, "a")).To(ContainSubstring("stopping on terminated"), "SIGTERM first")
		l, err := d.IPCDir(ctx, "a")
		Expect(err).NotTo(HaveOccurred())
		Expect(l.Sockets()).To(Equal([]string{"a.ipc"}))

		Expect(d.Stop(ctx, "a")).To(Succeed())
		Expect(state("a")).To(MatchFields(IgnoreExtras, Fields{"Status": Equal("exited"), "ExitCode": Equal(0)}))
		Expect(d.Kill(ctx, "b", "SIGKILL")).To(Succeed())
		Eventually(func() string { return state("b").Status }).WithContext(ctx).WithTimeout(10 * time.Second).Should(Equal("exited"))
		Expect(state("b").ExitCode).To(Equal(137), "128 + SIGKILL, the State contract")
	}, SpecTimeout(3*time.Minute))

	It("publishes the store's ports on loopback, where the harness reaches it over TCP", func(ctx SpecContext) {
		d := newRun(ctx)
		store, err := d.StartStore(ctx, harness.NodeSpec{Host: "store", Program: zmqbind(), Args: []string{"-bind", "tcp://*:7000"}, Ready: readyLine, Ports: []int{7000}})
		Expect(err).NotTo(HaveOccurred())
		Expect(store.Host).To(Equal("store"))
		Expect(store.Addrs).To(HaveKeyWithValue(7000, MatchRegexp(`^127\.0\.0\.1:\d+$`)))

		req, err := zmq.NewSocket(zmq.REQ)
		Expect(err).NotTo(HaveOccurred())
		defer req.Close()
		Expect(req.SetLinger(0)).To(Succeed())
		Expect(req.SetRcvtimeo(10 * time.Second)).To(Succeed())
		Expect(req.Connect("tcp://" + store.Addrs[7000])).To(Succeed())
		_, err = req.Send("ping from the harness", 0)
		Expect(err).NotTo(HaveOccurred())
		Expect(req.Recv(0)).To(Equal("store got ping from the harness"))
	}, SpecTimeout(2*time.Minute))

	It("writes every host's logs, inspect output and ipc listing, and the given files, as artifacts", func(ctx SpecContext) {
		d := newRun(ctx)
		Expect(d.StartNodes(ctx, node("a", "-bind", "ipc:///tmp/lookup.ipc"), node("b"))).To(Succeed())
		Expect(d.Stop(ctx, "b")).To(Succeed())
		dir := filepath.Join(GinkgoT().TempDir(), "artifacts")
		err := harness.WriteArtifacts(ctx, d, dir, map[string][]byte{"report.json": []byte(`{"verdict":"pass"}`), "store/snapshot.json": []byte("{}")})
		// A stopped host cannot list its /tmp; that costs only its ipc.json.
		Expect(err).To(MatchError(ContainSubstring("write ipc.json of host b")))
		Expect(err.Error()).NotTo(ContainSubstring("host a"))

		read := func(rel string) []byte {
			b, err := os.ReadFile(filepath.Join(dir, rel))
			Expect(err).NotTo(HaveOccurred())
			return b
		}
		Expect(string(read("report.json"))).To(Equal(`{"verdict":"pass"}`))
		Expect(read("store/snapshot.json")).To(Equal([]byte("{}")))
		Expect(string(read("a/logs.txt"))).To(ContainSubstring("ready a\n"))
		Expect(string(read("b/logs.txt"))).To(ContainSubstring("stopping on terminated"))
		Expect(json.Valid(read("b/inspect.json"))).To(BeTrue(), "inspect.json is JSON")
		var listing struct {
			Entries []struct{ Path, Type string }
		}
		Expect(json.Unmarshal(read("a/ipc.json"), &listing)).To(Succeed())
		Expect(listing.Entries).To(ContainElement(MatchFields(IgnoreExtras, Fields{"Path": Equal("lookup.ipc"), "Type": Equal("socket")})))
		Expect(filepath.Join(dir, "b/ipc.json")).NotTo(BeAnExistingFile())

		Expect(harness.WriteArtifacts(ctx, d, dir, map[string][]byte{"../escape": nil})).To(MatchError(ContainSubstring(`"../escape": not a local file name`)))
	}, SpecTimeout(2*time.Minute))
}
