package harness_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"

	"github.com/widetp/widetp/harness"
)

// dockerLabelled lists what the engine holds labelled with run runID (every run when ""), by kind:
// what the specs check behind the runtime's back.
func dockerLabelled(ctx context.Context, runID string) map[string][]harness.Resource {
	rs, err := harness.Labelled(ctx, harness.RuntimeDocker, runID)
	Expect(err).NotTo(HaveOccurred())
	by := map[string][]harness.Resource{}
	for _, r := range rs {
		by[r.Kind] = append(by[r.Kind], r)
	}
	return by
}

func labelled(ctx context.Context, runID string) (containers, networks int) {
	by := dockerLabelled(ctx, runID)
	return len(by["container"]), len(by["network"])
}

// newRun starts a runtime whose Close is checked to leave nothing of the run behind.
func newRun(ctx context.Context, opts ...harness.Option) *harness.Docker {
	d, err := harness.NewDocker(ctx, opts...)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) {
		Expect(d.Close(ctx)).To(Succeed())
		c, n := labelled(ctx, d.RunID())
		Expect(c).To(BeZero(), "containers of run %s left after Close", d.RunID())
		Expect(n).To(BeZero(), "networks of run %s left after Close", d.RunID())
		Expect(d.Close(ctx)).To(Succeed(), "a second Close")
	}, NodeTimeout(time.Minute))
	return d
}

func logsOf(ctx context.Context, d harness.Runtime, host string) string {
	b, err := d.Logs(ctx, host)
	Expect(err).NotTo(HaveOccurred())
	return string(b)
}

var _ = Describe("the Docker runtime", Label("docker"), func() {
	BeforeEach(requireEngine)

	It("gives the program its host name and listen address, and no ipc prefix (its /tmp is its own)", func(ctx SpecContext) {
		d := newRun(ctx)
		Expect(d.StartNodes(ctx, node("r0-head", "-print-env", "WIDETP_HOST,WIDETP_IPC_ROOT,WIDETP_LISTEN_IP"))).To(Succeed())
		Expect(logsOf(ctx, d, "r0-head")).To(ContainSubstring("env WIDETP_HOST=r0-head\nenv WIDETP_IPC_ROOT=\nenv WIDETP_LISTEN_IP=0.0.0.0\n"))
		l, err := d.IPCDir(ctx, "r0-head")
		Expect(err).NotTo(HaveOccurred())
		Expect(l.Root).To(Equal("/tmp"))
		b, err := d.Inspect(ctx, "r0-head")
		Expect(err).NotTo(HaveOccurred())
		var ins struct {
			Config     struct{ Hostname string }
			HostConfig struct{ Tmpfs map[string]string }
		}
		Expect(json.Unmarshal(b, &ins)).To(Succeed())
		Expect(ins.Config.Hostname).To(Equal("r0-head"))
		Expect(ins.HostConfig.Tmpfs).To(HaveKey("/tmp"))
	}, SpecTimeout(2*time.Minute))

	// A run starts its hosts at once, and a peer's name resolves a moment before its interface
	// answers: a host probes an unresolved neighbour every 50 ms, not every second, so that its
	// first connection to a peer that was not up yet waits for the peer, not for the next probe.
	It("has its hosts probe an unresolved neighbour every 50 ms", func(ctx SpecContext) {
		d := newRun(ctx)
		const knob = "/proc/sys/net/ipv4/neigh/eth0/retrans_time_ms"
		Expect(d.StartNodes(ctx, node("a", "-print-file", knob))).To(Succeed())
		// The kernel keeps the interval in jiffies: 50 ms reads back as 50 or a jiffy more.
		Expect(logsOf(ctx, d, "a")).To(MatchRegexp(`file ` + knob + `=5[0-9]\n`))
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

	It("labels every container, the network and the image with the run and its owner", func(ctx SpecContext) {
		d := newRun(ctx)
		Expect(d.StartNodes(ctx, node("a"), node("b"))).To(Succeed())
		me, err := harness.CurrentOwner()
		Expect(err).NotTo(HaveOccurred())
		by := dockerLabelled(ctx, d.RunID())
		Expect(by["container"]).To(HaveLen(2))
		var hosts []string
		for _, c := range by["container"] {
			Expect(c.Labels).To(HaveKeyWithValue(harness.LabelOwner, me.String()))
			hosts = append(hosts, c.Labels[harness.LabelHost])
		}
		Expect(hosts).To(ConsistOf("a", "b"))
		Expect(by["network"]).To(HaveLen(1))
		Expect(by["network"][0].Name).To(Equal(d.NetworkName()))
		Expect(by["network"][0].Labels).To(HaveKeyWithValue(harness.LabelOwner, me.String()))

		img, err := d.Image(ctx, hostprobe())
		Expect(err).NotTo(HaveOccurred())
		var labels map[string]string
		for _, im := range dockerLabelled(ctx, "")["image"] {
			if im.Name == img.Ref {
				labels = im.Labels
			}
		}
		Expect(labels).To(HaveKey(harness.LabelRun), "image %s among the labelled ones", img.Ref)
		Expect(labels).To(HaveKeyWithValue(harness.LabelContent, img.Hash))
		Expect(img.Ref).To(HavePrefix("widetp-hostprobe:" + img.Hash[:16]))
	}, SpecTimeout(3*time.Minute))

	It("builds an image once per content hash and reuses it in the next run", func(ctx SpecContext) {
		first := newRun(ctx)
		a, err := first.Image(ctx, hostprobe())
		Expect(err).NotTo(HaveOccurred())
		second := newRun(ctx)
		b, err := second.Image(ctx, hostprobe())
		Expect(err).NotTo(HaveOccurred())
		Expect(b.Ref).To(Equal(a.Ref))
		Expect(b.Cached).To(BeTrue(), "the second run rebuilt %s", b.Ref)
	}, SpecTimeout(5*time.Minute))

	// Each host would otherwise read the binaries and libraries through a file system of its own
	// (fuse-overlayfs) into a page cache of its own: its largest directories come from volumes,
	// filled once per content hash, labelled for widetp clean, mounted read-only.
	It("mounts the image's binaries and libraries from volumes kept by content, read-only", func(ctx SpecContext) {
		d := newRun(ctx)
		Expect(d.StartNodes(ctx, node("a"))).To(Succeed())
		img, err := d.Image(ctx, hostprobe())
		Expect(err).NotTo(HaveOccurred())
		Expect(img.Volumes).To(ContainElement(HaveField("Dir", "/usr/local/bin")))
		b, err := d.Inspect(ctx, "a")
		Expect(err).NotTo(HaveOccurred())
		var ins struct {
			Mounts []struct {
				Type, Name, Destination string
				RW                      bool
			}
		}
		Expect(json.Unmarshal(b, &ins)).To(Succeed())
		labels := map[string]map[string]string{}
		for _, v := range dockerLabelled(ctx, "")["volume"] {
			labels[v.Name] = v.Labels
		}
		for _, v := range img.Volumes {
			Expect(ins.Mounts).To(ContainElement(MatchFields(IgnoreExtras, Fields{
				"Type": Equal("volume"), "Name": Equal(v.Name), "Destination": Equal(v.Dir), "RW": BeFalse()})), "volume %s", v.Name)
			Expect(labels).To(HaveKey(v.Name))
			Expect(labels[v.Name]).To(HaveKeyWithValue(harness.LabelContent, img.Hash))
			Expect(labels[v.Name]).To(HaveKey(harness.LabelRun))
		}
		again, err := newRun(ctx).Image(ctx, hostprobe())
		Expect(err).NotTo(HaveOccurred())
		Expect(again.Volumes).To(Equal(img.Volumes))
	}, SpecTimeout(3*time.Minute))

	It("names a program whose binary is missing as an infrastructure failure, and starts nothing", func(ctx SpecContext) {
		d := newRun(ctx)
		p := harness.Program{Name: "gone", Path: filepath.Join(GinkgoT().TempDir(), "gone")}
		err := d.StartNodes(ctx, harness.NodeSpec{Host: "a", Program: p})
		var be *harness.ImageBuildError
		Expect(errors.As(err, &be)).To(BeTrue(), "error %v", err)
		Expect(err.Error()).To(ContainSubstring("program gone"))
		Expect(harness.Infrastructure(err)).To(BeTrue())
		Expect(d.Hosts()).To(BeEmpty())
	}, SpecTimeout(3*time.Minute))
})

var _ = Describe("the real images", Label("docker"), func() {
	BeforeEach(requireEngine)

	// Where the harness shares the engine's network namespace (its Linux host) it dials the store
	// at its address on the run's network and publishes nothing; WithPublishedPorts, and every
	// other set-up, goes through ports published on loopback.
	DescribeTable("runs the fake store as the store, reachable over HTTP from the harness",
		func(ctx SpecContext, option, env bool) {
			var opts []harness.Option
			if option {
				opts = append(opts, harness.WithPublishedPorts())
			}
			if env {
				GinkgoT().Setenv("WIDETP_DOCKER_PUBLISH", "1")
			}
			publish := option || env
			d := newRun(ctx, opts...)
			store, err := d.StartStore(ctx, harness.NodeSpec{Host: "store", Program: harness.Widetp, Args: []string{"store"},
				Ready: regexp.MustCompile(`^fakestore: flavor=`), Ports: []int{8080, 50052, 9003}})
			Expect(err).NotTo(HaveOccurred())
			Expect(store.Addrs).To(HaveLen(3))
			raw, err := d.Inspect(ctx, "store")
			Expect(err).NotTo(HaveOccurred())
			var ins struct {
				HostConfig      struct{ PortBindings map[string]any }
				NetworkSettings struct {
					Networks map[string]struct{ IPAddress string }
				}
			}
			Expect(json.Unmarshal(raw, &ins)).To(Succeed())
			wantHost := "127.0.0.1"
			if publish {
				Expect(d.DirectNetwork()).To(BeFalse())
			}
			if d.DirectNetwork() {
				Expect(ins.HostConfig.PortBindings).To(BeEmpty())
				wantHost = ins.NetworkSettings.Networks[d.NetworkName()].IPAddress
			} else {
				Expect(ins.HostConfig.PortBindings).To(HaveLen(3))
			}
			for port, addr := range store.Addrs {
				host, p, err := net.SplitHostPort(addr)
				Expect(err).NotTo(HaveOccurred())
				Expect(host).To(Equal(wantHost), "port %d", port)
				if d.DirectNetwork() {
					Expect(p).To(Equal(strconv.Itoa(port)))
				}
			}
			resp, err := httpGet(ctx, "http://"+store.Addrs[9003]+"/health")
			Expect(err).NotTo(HaveOccurred())
			Expect(resp).To(ContainSubstring(`"status":"ok"`))
		},
		Entry("as the machine allows", false, false, SpecTimeout(5*time.Minute)),
		Entry("through published ports (WithPublishedPorts)", true, false, SpecTimeout(5*time.Minute)),
		Entry("through published ports (WIDETP_DOCKER_PUBLISH)", false, true, SpecTimeout(5*time.Minute)))

	It("runs widetp node from a scratch image: the binary, libzmq and the loader are all there", func(ctx SpecContext) {
		d := newRun(ctx)
		// Without a config `widetp node` says so and exits 2 (bad input); a missing library
		// would be the loader's exit 127 instead.
		err := d.StartNodes(ctx, harness.NodeSpec{Host: "r0-head", Program: harness.Widetp, Args: []string{"node"}, Ready: readyLine})
		var ne *harness.NodeExitedError
		Expect(errors.As(err, &ne)).To(BeTrue(), "error %v", err)
		Expect(ne.ExitCode).To(Equal(2), "tail: %v", ne.Tail)
		Expect(logsOf(ctx, d, "r0-head")).To(ContainSubstring("widetp node: no config"))
	}, SpecTimeout(5*time.Minute))
})

func httpGet(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), err
}

var _ = Describe("building images ahead of a run", Label("docker"), func() {
	BeforeEach(requireEngine)

	It("builds or finds every program's image by content hash, with no network or container", func(ctx SpecContext) {
		imgs, err := harness.BuildImages(ctx, []harness.Program{hostprobe(), harness.Widetp}, harness.WithRunID("images-spec"))
		Expect(err).NotTo(HaveOccurred())
		Expect(imgs).To(HaveLen(2))
		Expect(imgs[0].Ref).To(HavePrefix("widetp-hostprobe:"))
		Expect(imgs[1].Ref).To(HavePrefix("widetp:"))
		again, err := harness.BuildImages(ctx, []harness.Program{hostprobe()})
		Expect(err).NotTo(HaveOccurred())
		Expect(again[0].Ref).To(Equal(imgs[0].Ref))
		Expect(again[0].Cached).To(BeTrue())
		c, n := labelled(ctx, "images-spec")
		Expect([]int{c, n}).To(Equal([]int{0, 0}))
	}, SpecTimeout(5*time.Minute))
})
