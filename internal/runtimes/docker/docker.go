package docker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/widetp/widetp/harness/ipcdir"
	"github.com/widetp/widetp/internal/runtimes"
	"github.com/widetp/widetp/internal/runtimes/netcut"
)

// Docker is the Runtime on a Docker engine, through the Engine API calls of api.go (the calls the
// floor makes, nothing in between): one user-defined bridge
// network per run, one container per host (hostname and network alias = the host, so libzmq and
// the rendezvous resolve peers by name through the engine's DNS), a tmpfs at /tmp as the host's
// private ipc directory, and labels that let a later run sweep what a killed one left.
type Docker struct {
	cfg     runtimes.Config
	owner   runtimes.Owner
	machine string
	api     *engine
	netID   string
	netName string
	images  *imageBuilder
	cuts    *netcut.Partitions
	// direct: the harness reaches the hosts' ports at their addresses on the run's network, which
	// it shares a network namespace with (see bridgeIsLocal), so no port is published.
	direct bool
	// untracked keeps the connection tracker out of the hosts' traffic (untrack), or is nil.
	untracked *netcut.Table

	mu     sync.Mutex
	nodes  map[string]*dockerNode
	order  []string
	closed bool
}

type dockerNode struct {
	spec runtimes.NodeSpec
	id   string
}

var _ runtimes.Runtime = (*Docker)(nil)

// ipcRoot is the host's private ipc directory inside a container: its own tmpfs.
const ipcRoot = "/tmp"

// New connects to the engine (a bounded ping first: no engine is an EngineUnavailableError),
// sweeps the leftovers of dead runs, and creates the run's network. Images are built on first use.
func New(ctx context.Context, opts ...runtimes.Option) (*Docker, error) {
	cfg := runtimes.NewConfig(opts...)
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("configure docker runtime: %w", err)
	}
	cli, err := newEngineClient()
	if err != nil {
		return nil, err
	}
	if err := ping(ctx, cli, cfg.PingTimeout); err != nil {
		cli.Close()
		return nil, err
	}
	owner, err := runtimes.CurrentOwner()
	if err != nil {
		cli.Close()
		return nil, err
	}
	d := &Docker{cfg: cfg, owner: owner, machine: owner.Machine, api: cli, nodes: map[string]*dockerNode{}}
	d.cuts = netcut.NewPartitions(netcut.Bridge, cfg.RunID, owner, d.address)
	if cfg.Sweep {
		sctx, cancel := context.WithTimeout(ctx, cfg.OpTimeout)
		s, err := sweep(sctx, d.api, func(o runtimes.Owner) bool { return o.Alive(d.machine) })
		cancel()
		if err != nil {
			cli.Close()
			return nil, fmt.Errorf("sweep leftovers of earlier runs: %w", err)
		}
		if s.Containers+s.Networks > 0 {
			d.progressf("swept %d container(s) and %d network(s) left by dead runs", s.Containers, s.Networks)
		}
		sctx, cancel = context.WithTimeout(ctx, cfg.OpTimeout)
		n, err := netcut.Sweep(sctx, d.machine, func(o runtimes.Owner) bool { return o.Alive(d.machine) })
		cancel()
		if err != nil {
			cli.Close()
			return nil, fmt.Errorf("sweep partitions of earlier runs: %w", err)
		}
		if n > 0 {
			d.progressf("swept %d nftables table(s) left by dead runs", n)
		}
		for _, n := range s.Stuck {
			d.progressf("the engine will not remove network %s, left by a dead run: it holds an endpoint of a container that no longer exists (restarting the Docker daemon releases it)", n)
		}
	}
	d.images = newImageBuilder(d.api, cfg, d.labels())
	netID, err := cli.NetworkCreate(ctx, d.NetworkName(), d.labels())
	if err != nil {
		return nil, errors.Join(fmt.Errorf("create the run's network: %w", err), d.Close(ctx))
	}
	d.netID, d.netName = netID, d.NetworkName()
	nw, local := bridgeIsLocal(ctx, cli, netID, localAddrs)
	d.direct = !cfg.Publish && os.Getenv(EnvPublish) == "" && local
	if d.direct {
		d.untrack(ctx, nw)
	}
	return d, nil
}

// untrack keeps the kernel's connection tracker out of the traffic between the run's hosts
// (netcut.Untrack: the engine reads the whole tracker table each time it detaches a container,
// and a run's connections fill it), when this process may make nftables rules and shares the
// bridge's kernel (direct; nw is the network as bridgeIsLocal inspected it). Without, a run
// works the same, its teardown is slower.
func (d *Docker) untrack(ctx context.Context, nw networkSummary) {
	if netcut.Available(ctx) != nil {
		return
	}
	for _, c := range nw.IPAM.Config {
		subnet, serr := netip.ParsePrefix(c.Subnet)
		gw, gerr := netip.ParseAddr(c.Gateway)
		if serr != nil || gerr != nil || !subnet.Addr().Is4() || !subnet.Contains(gw) {
			continue
		}
		t, err := netcut.Untrack(ctx, d.cfg.RunID, d.owner, subnet, gw)
		if err != nil {
			d.progressf("the kernel's connection tracker stays on the run's network: %v", err)
			return
		}
		d.untracked = t
		return
	}
}

// EnvPublish, set to anything, makes every Docker run publish the store's ports on loopback
// (runtimes.WithPublishedPorts for the widetp command and the suites).
const EnvPublish = "WIDETP_DOCKER_PUBLISH"

// bridgeIsLocal inspects the run's network and says whether it is reachable from this process
// without published ports: the engine gave the bridge its gateway address on an interface of this process's own
// network namespace, so every container address of the network is routed here directly. That is
// the case for a harness on the engine's own Linux host; not for a rootless engine (its bridge
// lives in another namespace), Docker Desktop (in a VM), a remote engine or a harness in a
// container of its own, which reach the store through published loopback ports instead.
// Publishing costs the engine a proxy process and NAT rules per port (about 0.3 CPU-s a run on
// two cores), work a real deployment's hosts do not do. Any doubt (no gateway reported, an
// interface listing that fails) means publishing.
func bridgeIsLocal(ctx context.Context, cli *engine, netID string, local func() ([]netip.Addr, error)) (networkSummary, bool) {
	nw, err := cli.NetworkInspect(ctx, netID)
	if err != nil {
		return nw, false
	}
	addrs, err := local()
	if err != nil {
		return nw, false
	}
	for _, c := range nw.IPAM.Config {
		gw, err := netip.ParseAddr(c.Gateway)
		if err != nil {
			continue
		}
		if slices.Contains(addrs, gw.Unmap()) {
			return nw, true
		}
	}
	return nw, false
}

// localAddrs are the addresses of this process's network interfaces.
func localAddrs() ([]netip.Addr, error) {
	ifAddrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, a := range ifAddrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out, nil
}

// labels are put on everything this run makes.
func (d *Docker) labels() map[string]string {
	return map[string]string{runtimes.LabelRun: d.cfg.RunID, runtimes.LabelOwner: d.owner.String()}
}

// Name implements Runtime.
func (d *Docker) Name() string { return "docker" }

// RunID implements Runtime.
func (d *Docker) RunID() string { return d.cfg.RunID }

// NetworkName is the run's Docker network.
func (d *Docker) NetworkName() string { return "widetp-" + d.cfg.RunID }

// Image returns p's image, building it if no image has its content hash yet. StartNodes calls it;
// callers use it to build ahead (`widetp images`) or to tell a build failure from a start failure.
func (d *Docker) Image(ctx context.Context, p runtimes.Program) (Image, error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.BuildTimeout)
	defer cancel()
	return d.images.image(ctx, p)
}

// StartStore starts the store host alone (harness.StartStore).
func (d *Docker) StartStore(ctx context.Context, spec runtimes.NodeSpec) (runtimes.Store, error) {
	return runtimes.StartStore(ctx, d, spec)
}

// DirectNetwork reports whether the harness reaches the hosts' Ports at their addresses on the
// run's network (it shares a network namespace with the bridge) rather than through ports
// published on loopback.
func (d *Docker) DirectNetwork() bool { return d.direct }

// Endpoints implements Runtime: the host's Ports at its address on the run's network when the
// harness reaches that network directly (bridgeIsLocal), else the loopback ports the engine
// published them on.
func (d *Docker) Endpoints(ctx context.Context, host string) (map[int]string, error) {
	n, err := d.node(host)
	if err != nil {
		return nil, fmt.Errorf("endpoints of %w", err)
	}
	if d.direct {
		ip, err := d.address(ctx, host)
		if err != nil {
			return nil, fmt.Errorf("endpoints of host %s: %w", host, err)
		}
		addrs := map[int]string{}
		for _, p := range n.spec.Ports {
			addrs[p] = netip.AddrPortFrom(ip, uint16(p)).String()
			// The host printed its ready line, so its ports listen: a connection that fails here
			// is something between this process and the bridge, which only publishing avoids.
			var dialer net.Dialer
			dctx, cancel := context.WithTimeout(ctx, d.cfg.PingTimeout)
			conn, err := dialer.DialContext(dctx, "tcp", addrs[p])
			cancel()
			if err != nil {
				return nil, fmt.Errorf("endpoints of host %s: this process shares the network namespace of the run's bridge but cannot reach %s on it (%w): a firewall between this machine and its Docker bridges? Set %s=1 to reach the store through ports published on 127.0.0.1", host, addrs[p], err, EnvPublish)
			}
			conn.Close()
		}
		return addrs, nil
	}
	ins, _, err := d.api.ContainerInspect(ctx, n.id)
	if err != nil {
		return nil, fmt.Errorf("endpoints of host %s: inspect: %w", host, err)
	}
	if ins.NetworkSettings == nil {
		return nil, fmt.Errorf("endpoints of host %s: the engine reported no network settings", host)
	}
	addrs, err := publishedAddrs(ins.NetworkSettings.Ports, n.spec.Ports)
	if err != nil {
		return nil, fmt.Errorf("endpoints of host %s: %w", host, err)
	}
	return addrs, nil
}

// publishedAddrs maps each wanted container port to the loopback address the engine published it on.
// ports is the engine's map of "PORT/PROTO" to the bindings of the port.
func publishedAddrs(ports map[string][]portBinding, want []int) (map[int]string, error) {
	addrs := map[int]string{}
	for _, p := range want {
		found := false
		for _, b := range ports[strconv.Itoa(p)+"/tcp"] {
			if b.HostPort == "" {
				continue
			}
			host := "127.0.0.1"
			if ip, err := netip.ParseAddr(b.HostIP); err == nil && !ip.IsUnspecified() {
				host = ip.String()
			}
			addrs[p] = net.JoinHostPort(host, b.HostPort)
			found = true
			break
		}
		if !found {
			return nil, fmt.Errorf("port %d/tcp was not published", p)
		}
	}
	return addrs, nil
}

// StartNodes implements Runtime: plan every node (validate, resolve its image), then start them
// all at once as []func() error, the way kind creates its nodes.
func (d *Docker) StartNodes(ctx context.Context, specs ...runtimes.NodeSpec) error {
	if err := d.reserve(specs); err != nil {
		return err
	}
	// Each distinct program's image, built at once (simnode's cgo build dominates a cold start).
	var programs []runtimes.Program
	seen := map[string]bool{}
	for _, s := range specs {
		if !seen[s.Program.Name] {
			seen[s.Program.Name] = true
			programs = append(programs, s.Program)
		}
	}
	built := make([]Image, len(programs))
	steps := make([]func() error, len(programs))
	for i, p := range programs {
		steps[i] = func() (err error) {
			built[i], err = d.Image(ctx, p)
			return err
		}
	}
	if err := runtimes.RunConcurrently(steps); err != nil {
		d.release(specs)
		return err
	}
	images := map[string]Image{}
	for _, img := range built {
		images[img.Program.Name] = img
	}
	plan := make([]func() error, len(specs))
	for i, s := range specs {
		plan[i] = func() error { return d.startNode(ctx, s, images[s.Program.Name], len(specs)) }
	}
	return runtimes.RunConcurrently(plan)
}

// reserve validates specs and claims their host names, so that two concurrent starts cannot both
// take one name.
func (d *Docker) reserve(specs []runtimes.NodeSpec) error {
	var errs []error
	seen := map[string]bool{}
	for _, s := range specs {
		if err := s.Validate(); err != nil {
			errs = append(errs, err)
		}
		if _, err := runtimes.ExpandArgs(s.Args, containerEnv(s, d.cfg.RunID)); err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", s.Host, err))
		}
		if seen[s.Host] {
			errs = append(errs, fmt.Errorf("node %s: host listed twice", s.Host))
		}
		seen[s.Host] = true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		errs = append(errs, errors.New("the runtime is closed"))
	}
	for _, s := range specs {
		if _, ok := d.nodes[s.Host]; ok {
			errs = append(errs, fmt.Errorf("node %s: host already started in this run", s.Host))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("start nodes: %w", err)
	}
	for _, s := range specs {
		d.nodes[s.Host] = &dockerNode{spec: s}
		d.order = append(d.order, s.Host)
	}
	return nil
}

// release forgets reserved hosts that never got a container.
func (d *Docker) release(specs []runtimes.NodeSpec) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range specs {
		if n, ok := d.nodes[s.Host]; ok && n.id == "" {
			delete(d.nodes, s.Host)
			for i, h := range d.order {
				if h == s.Host {
					d.order = append(d.order[:i], d.order[i+1:]...)
					break
				}
			}
		}
	}
}

// containerEnv is the program's environment: the runtime's facts, then the spec's.
func containerEnv(s runtimes.NodeSpec, runID string) map[string]string {
	env := map[string]string{
		runtimes.EnvHost: s.Host,
		runtimes.EnvRun:  runID,
		// Inside its own network namespace a node binds every interface; peers reach it by name.
		runtimes.EnvListenIP: "0.0.0.0",
		// No runtimes.EnvIPCRoot: it prefixes ipc paths, and in a container ipc:///tmp/... is already the
		// host's private /tmp.
	}
	for k, v := range s.Env {
		env[k] = v
	}
	return env
}

// engineQueuePerHost is what each host of a round of starts adds to the bound on one engine call
// (create, start) of that round. The engine works through a round's creations and starts a few at
// a time, so a call waits behind the rest of the round: the floor of 65 hosts took 38 s on 2 shared
// cores (0.6 s a host), and one start call of a 65-host run waited more than a minute while the
// run's processes loaded the machine. 2 s a host leaves three times the floor's pace.
const engineQueuePerHost = 2 * time.Second

// roundBound bounds one engine call (create, start) of a round of round starts: the start timeout
// plus the round's queue. A run's node starts and the floor's container starts share it, so that
// an engine slow enough to fail the one fails the other.
func roundBound(startTimeout time.Duration, round int) time.Duration {
	return startTimeout + time.Duration(round)*engineQueuePerHost
}

// startNode creates and starts s's container, one of a round of round hosts, and waits for its
// ready line. The create and start calls are each bounded by the start timeout plus the round's
// queue (engineQueuePerHost a host); the ready line by the start timeout from the container's own
// start, so that the queue of the other hosts never counts against this one.
func (d *Docker) startNode(ctx context.Context, s runtimes.NodeSpec, img Image, round int) error {
	engineBound := roundBound(d.cfg.StartTimeout, round)
	step := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, engineBound) }
	labels := d.labels()
	labels[runtimes.LabelHost] = s.Host
	env := containerEnv(s, d.cfg.RunID)
	args, err := runtimes.ExpandArgs(s.Args, env)
	if err != nil {
		return fmt.Errorf("start node %s: %w", s.Host, err)
	}
	envList := make([]string, 0, len(env))
	for k, v := range env {
		envList = append(envList, k+"="+v)
	}
	sort.Strings(envList)
	var exposed map[string]struct{}
	var bindings map[string][]portBinding
	if !d.direct {
		// Published ports listen on loopback only: the harness is the only outside client.
		exposed, bindings = map[string]struct{}{}, map[string][]portBinding{}
		for _, p := range s.Ports {
			port := strconv.Itoa(p) + "/tcp"
			exposed[port] = struct{}{}
			bindings[port] = []portBinding{{HostIP: "127.0.0.1"}}
		}
	}
	cctx, cancel := step()
	id, err := d.api.ContainerCreate(cctx, "widetp-"+d.cfg.RunID+"-"+s.Host, containerCreate{
		Image: img.Ref,
		Cmd:   args,
		Env:   envList,
		// The hostname is what vLLM's processes see as their host (gethostname).
		Hostname:     s.Host,
		Labels:       labels,
		ExposedPorts: exposed,
		HostConfig: hostConfig{
			// A scratch image has no /tmp; the tmpfs is also the host's private ipc directory, so
			// two hosts binding one ipc path do not collide, as on two real machines.
			Tmpfs:        map[string]string{ipcRoot: "rw,mode=1777,size=" + d.cfg.TmpfsSize},
			Mounts:       volumeMounts(img, d.labels()),
			PortBindings: bindings,
			Sysctls:      hostSysctls,
		},
		// Peers resolve the host by name through the engine's DNS: its alias on the run's network.
		NetworkingConfig: networkingConfig{EndpointsConfig: map[string]endpointConfig{
			d.netName: {Aliases: []string{s.Host}},
		}},
	})
	cancel()
	if err != nil {
		return fmt.Errorf("start node %s: create container: %w", s.Host, err)
	}
	d.mu.Lock()
	closed := d.closed
	if n, ok := d.nodes[s.Host]; ok && !closed {
		n.id = id
	}
	d.mu.Unlock()
	if closed {
		// Close ran while the engine created this container: it did not see it, so remove it here.
		err := d.api.ContainerRemove(context.WithoutCancel(ctx), id)
		return errors.Join(fmt.Errorf("start node %s: the runtime was closed during the start", s.Host), err)
	}
	sctx, cancel := step()
	err = d.api.ContainerStart(sctx, id)
	cancel()
	if err != nil {
		return d.startFailure(s.Host, id, fmt.Errorf("start container: %w", err))
	}
	rctx, cancel := context.WithTimeout(ctx, d.cfg.StartTimeout)
	defer cancel()
	if err := d.waitReady(rctx, s, id, 0); err != nil {
		return err
	}
	d.progressf("node %s up", s.Host)
	return nil
}

// hostSysctls are every host's kernel settings that differ from the defaults. A run starts all
// its hosts at once, and a peer's name resolves (the engine registers it as the container joins
// the network) a moment before its interface answers: a packet sent into that moment leaves the
// sender's neighbour entry unresolved until the next ARP probe, a second later by default, and
// every connection to that peer waits with it (a run of five hosts was a second slower on one
// start in two; SYNs to the store were retransmitted a second later). Real hosts are up long
// before vLLM starts on them; probing every 50 ms makes the hosts of a run meet as soon as they
// are up. eth0 is a host's only interface: it is on the run's network alone.
var hostSysctls = map[string]string{"net.ipv4.neigh.eth0.retrans_time_ms": "50"}

// startFailure wraps a start error with the node's last log lines, when it printed any.
func (d *Docker) startFailure(host, id string, err error) error {
	// A fresh bound: the start's own context may be what ran out.
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.PingTimeout)
	defer cancel()
	if tail, terr := d.tail(ctx, id); terr == nil && len(tail) > 0 {
		return fmt.Errorf("start node %s: %w; its last log lines:\n%s", host, err, runtimes.Indent(tail))
	}
	return fmt.Errorf("start node %s: %w", host, err)
}

// waitReady follows the node's output until the (seen+1)-th line matching spec.Ready, the program
// exits (the stream ends), or the start bound runs out. seen is how many ready lines earlier starts
// printed: counting is immune to clocks, unlike the engine's "since" (a container's StartedAt is
// recorded after its process may already have printed). Without Ready, a node that is still
// running right after start counts as up.
func (d *Docker) waitReady(ctx context.Context, s runtimes.NodeSpec, id string, seen int) error {
	if s.Ready == nil {
		ins, _, err := d.api.ContainerInspect(ctx, id)
		if err != nil {
			return d.startFailure(s.Host, id, fmt.Errorf("inspect: %w", err))
		}
		if st := ins.State; st != nil && !st.Running {
			return d.exited(s.Host, id, st.ExitCode)
		}
		return nil
	}
	logs, err := d.api.ContainerLogs(ctx, id, true)
	if err != nil {
		return d.startFailure(s.Host, id, fmt.Errorf("follow logs: %w", err))
	}
	defer logs.Close()
	found, err := scanForLine(logs, s.Ready, seen+1)
	switch {
	case found:
		return nil
	case ctx.Err() != nil:
		return d.startFailure(s.Host, id, fmt.Errorf("not ready within %s (no line matching %q)", d.cfg.StartTimeout, s.Ready))
	case err != nil:
		return d.startFailure(s.Host, id, fmt.Errorf("follow logs: %w", err))
	}
	// The stream ended: the program is gone. Its exit code comes from the engine.
	ictx, cancel := context.WithTimeout(context.Background(), d.cfg.PingTimeout)
	defer cancel()
	ins, _, err := d.api.ContainerInspect(ictx, id)
	if err != nil {
		return d.startFailure(s.Host, id, fmt.Errorf("output ended before a line matching %q; inspect: %w", s.Ready, err))
	}
	code := -1
	if ins.State != nil {
		code = ins.State.ExitCode
	}
	return d.exited(s.Host, id, code)
}

// countLines counts the lines of a container's output so far that match re.
func (d *Docker) countLines(ctx context.Context, id string, re *regexp.Regexp) (int, error) {
	b, err := d.logs(ctx, id)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if re.MatchString(line) {
			n++
		}
	}
	return n, nil
}

func (d *Docker) exited(host, id string, code int) error {
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.PingTimeout)
	defer cancel()
	tail, err := d.tail(ctx, id)
	e := &runtimes.NodeExitedError{Host: host, ExitCode: code, Tail: tail}
	if err != nil {
		return fmt.Errorf("start node %s: %w (and reading its logs failed: %v)", host, e, err)
	}
	return fmt.Errorf("start node %s: %w", host, e)
}

// scanForLine demultiplexes a non-TTY log stream and reports whether the n-th line matching re came
// before the stream ended.
func scanForLine(multiplexed io.Reader, re *regexp.Regexp, n int) (bool, error) {
	pr, pw := io.Pipe()
	go func() {
		// Both streams go to one pipe: a ready line may be printed on either.
		err := demux(pw, pw, multiplexed)
		pw.CloseWithError(err)
	}()
	defer pr.Close()
	sc := bufio.NewScanner(pr)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		if re.Match(sc.Bytes()) {
			if n--; n == 0 {
				return true, nil
			}
		}
	}
	return false, sc.Err()
}

func (d *Docker) node(host string) (*dockerNode, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, ok := d.nodes[host]
	if !ok || n.id == "" {
		return nil, fmt.Errorf("host %s: not started in run %s", host, d.cfg.RunID)
	}
	return n, nil
}

// Stop implements Runtime.
func (d *Docker) Stop(ctx context.Context, host string) error {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.OpTimeout)
	defer cancel()
	n, err := d.node(host)
	if err != nil {
		return fmt.Errorf("stop %w", err)
	}
	if err := d.stop(ctx, n.id); err != nil {
		return fmt.Errorf("stop host %s: %w", host, err)
	}
	return nil
}

// Kill implements Runtime.
func (d *Docker) Kill(ctx context.Context, host, signal string) error {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.OpTimeout)
	defer cancel()
	n, err := d.node(host)
	if err != nil {
		return fmt.Errorf("kill %w", err)
	}
	if err := d.api.ContainerKill(ctx, n.id, signal); err != nil {
		return fmt.Errorf("kill host %s with %s: %w", host, signal, err)
	}
	return nil
}

// Pause implements Runtime.
func (d *Docker) Pause(ctx context.Context, host string) error {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.OpTimeout)
	defer cancel()
	n, err := d.node(host)
	if err != nil {
		return fmt.Errorf("pause %w", err)
	}
	if err := d.api.ContainerPause(ctx, n.id); err != nil {
		return fmt.Errorf("pause host %s: %w", host, err)
	}
	return nil
}

// Unpause implements Runtime.
func (d *Docker) Unpause(ctx context.Context, host string) error {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.OpTimeout)
	defer cancel()
	n, err := d.node(host)
	if err != nil {
		return fmt.Errorf("unpause %w", err)
	}
	if err := d.api.ContainerUnpause(ctx, n.id); err != nil {
		return fmt.Errorf("unpause host %s: %w", host, err)
	}
	return nil
}

// Restart implements Runtime.
func (d *Docker) Restart(ctx context.Context, host string) error {
	n, err := d.node(host)
	if err != nil {
		return fmt.Errorf("restart %w", err)
	}
	stopCtx, cancelStop := context.WithTimeout(ctx, d.cfg.OpTimeout)
	defer cancelStop()
	if err := d.stop(stopCtx, n.id); err != nil {
		return fmt.Errorf("restart host %s: stop: %w", host, err)
	}
	seen := 0
	if n.spec.Ready != nil {
		// The container is stopped: its output is complete, so this count is exact.
		if seen, err = d.countLines(stopCtx, n.id, n.spec.Ready); err != nil {
			return fmt.Errorf("restart host %s: read logs: %w", host, err)
		}
	}
	sctx, cancel := context.WithTimeout(ctx, d.cfg.StartTimeout)
	defer cancel()
	if err := d.api.ContainerStart(sctx, n.id); err != nil {
		return d.startFailure(host, n.id, fmt.Errorf("restart: %w", err))
	}
	// The engine may hand the container another address: its partitions follow it at once,
	// while its node program is still waiting for the store.
	if err := d.cuts.Refresh(sctx, host); err != nil {
		return fmt.Errorf("restart host %s: %w", host, err)
	}
	rctx, cancelReady := context.WithTimeout(ctx, d.cfg.StartTimeout)
	defer cancelReady()
	return d.waitReady(rctx, n.spec, n.id, seen)
}

// address is a host's address on the run's network, as the engine reports it now.
func (d *Docker) address(ctx context.Context, host string) (netip.Addr, error) {
	n, err := d.node(host)
	if err != nil {
		return netip.Addr{}, err
	}
	ins, _, err := d.api.ContainerInspect(ctx, n.id)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("inspect host %s: %w", host, err)
	}
	if ins.NetworkSettings != nil {
		if ep := ins.NetworkSettings.Networks[d.netName]; ep != nil {
			if ip, err := netip.ParseAddr(ep.IPAddress); err == nil {
				return ip, nil
			}
		}
	}
	return netip.Addr{}, fmt.Errorf("host %s has no address on network %s (is it running?)", host, d.netName)
}

// Partition implements Runtime: a chain of the run's nftables table (family bridge) on the
// forward path of the run's network.
func (d *Docker) Partition(ctx context.Context, name string, a, b []string) error {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.OpTimeout)
	defer cancel()
	return d.cuts.Partition(ctx, name, a, b)
}

// Heal implements Runtime.
func (d *Docker) Heal(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.OpTimeout)
	defer cancel()
	return d.cuts.Heal(ctx, name)
}

// State implements Runtime.
func (d *Docker) State(ctx context.Context, host string) (runtimes.State, error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.OpTimeout)
	defer cancel()
	n, err := d.node(host)
	if err != nil {
		return runtimes.State{}, fmt.Errorf("state of %w", err)
	}
	ins, _, err := d.api.ContainerInspect(ctx, n.id)
	if err != nil {
		return runtimes.State{}, fmt.Errorf("state of host %s: %w", host, err)
	}
	st := ins.State
	if st == nil {
		return runtimes.State{}, fmt.Errorf("state of host %s: the engine reported none", host)
	}
	return runtimes.State{Status: st.Status, Running: st.Running, Paused: st.Paused, ExitCode: st.ExitCode, OOMKilled: st.OOMKilled}, nil
}

// Logs implements Runtime.
func (d *Docker) Logs(ctx context.Context, host string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.OpTimeout)
	defer cancel()
	n, err := d.node(host)
	if err != nil {
		return nil, fmt.Errorf("logs of %w", err)
	}
	b, err := d.logs(ctx, n.id)
	if err != nil {
		return nil, fmt.Errorf("logs of host %s: %w", host, err)
	}
	return b, nil
}

func (d *Docker) logs(ctx context.Context, id string) ([]byte, error) {
	rc, err := d.api.ContainerLogs(ctx, id, false)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var buf bytes.Buffer
	if err := demux(&buf, &buf, rc); err != nil {
		return buf.Bytes(), err
	}
	return buf.Bytes(), nil
}

// tail is the last cfg.LogTail lines of a container's output.
func (d *Docker) tail(ctx context.Context, id string) ([]string, error) {
	b, err := d.logs(ctx, id)
	if err != nil {
		return nil, err
	}
	return runtimes.LastLines(string(b), d.cfg.LogTail), nil
}

// IPCDir implements Runtime: it runs `widetp ipcls` inside the container (every image carries the
// widetp binary), since a scratch image has no ls and the engine's archive API does not see into a tmpfs.
func (d *Docker) IPCDir(ctx context.Context, host string) (ipcdir.Listing, error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.OpTimeout)
	defer cancel()
	n, err := d.node(host)
	if err != nil {
		return ipcdir.Listing{}, fmt.Errorf("list ipc dir of %w", err)
	}
	code, stdout, stderr, err := d.exec(ctx, n.id, runtimes.WidetpPath, "ipcls", ipcRoot)
	if err != nil {
		return ipcdir.Listing{}, fmt.Errorf("list ipc dir of host %s: %w", host, err)
	}
	if code != 0 {
		return ipcdir.Listing{}, fmt.Errorf("list ipc dir of host %s: %s ipcls exited %d: %s", host, runtimes.WidetpPath, code, strings.TrimSpace(stderr.String()))
	}
	l, err := ipcdir.Parse(stdout.Bytes())
	if err != nil {
		return ipcdir.Listing{}, fmt.Errorf("list ipc dir of host %s: %w", host, err)
	}
	return l, nil
}

// Exec implements Runtime: docker exec of the image's widetp binary in the host's container.
func (d *Docker) Exec(ctx context.Context, host string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.OpTimeout)
	defer cancel()
	n, err := d.node(host)
	if err != nil {
		return nil, fmt.Errorf("exec on %w", err)
	}
	code, stdout, stderr, err := d.exec(ctx, n.id, append([]string{runtimes.WidetpPath}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("exec widetp %s on host %s: %w", strings.Join(args, " "), host, err)
	}
	if code != 0 {
		return stdout.Bytes(), fmt.Errorf("exec widetp %s on host %s: exit status %d: %s", strings.Join(args, " "), host, code, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// Inspect implements Runtime: the engine's own JSON, indented.
func (d *Docker) Inspect(ctx context.Context, host string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.OpTimeout)
	defer cancel()
	n, err := d.node(host)
	if err != nil {
		return nil, fmt.Errorf("inspect %w", err)
	}
	_, raw, err := d.api.ContainerInspect(ctx, n.id)
	if err != nil {
		return nil, fmt.Errorf("inspect host %s: %w", host, err)
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return nil, fmt.Errorf("inspect host %s: %w", host, err)
	}
	return buf.Bytes(), nil
}

// Hosts implements Runtime.
func (d *Docker) Hosts() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, h := range d.order {
		if n := d.nodes[h]; n != nil && n.id != "" {
			out = append(out, h)
		}
	}
	return out
}

// Close implements Runtime: containers go first (at once: a forced remove kills; a graceful end
// is the caller's Stop), then the network.
//
// Close runs even when ctx is already done (a teardown after an interrupt or a spec timeout must
// still remove the run), bounded by the op timeout instead.
func (d *Docker) Close(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.OpTimeout)
	defer cancel()
	d.mu.Lock()
	d.closed = true
	var steps []func() error
	for _, h := range d.order {
		n := d.nodes[h]
		if n == nil || n.id == "" {
			continue
		}
		steps = append(steps, func() error {
			if err := removeContainer(ctx, d.api, n.id); err != nil {
				return fmt.Errorf("host %s: %w", h, err)
			}
			d.mu.Lock()
			delete(d.nodes, h)
			d.mu.Unlock()
			return nil
		})
	}
	d.mu.Unlock()
	err := runtimes.RunConcurrently(steps)
	d.mu.Lock()
	remaining := 0
	for _, n := range d.nodes {
		if n.id != "" {
			remaining++
		}
	}
	d.mu.Unlock()
	var errs []error
	errs = append(errs, err)
	if d.cuts != nil {
		errs = append(errs, d.cuts.Close(ctx))
	}
	if d.untracked != nil {
		errs = append(errs, d.untracked.Close(ctx))
	}
	if d.netID != "" && remaining == 0 {
		if err := removeNetwork(ctx, d.api, d.netID, d.netName); err != nil {
			errs = append(errs, err)
		} else {
			d.netID = ""
		}
	}
	// Only idle connections close: the client stays usable for a retry of Close.
	d.api.Close()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close run %s: %w", d.cfg.RunID, err)
	}
	return nil
}

func (d *Docker) progressf(format string, args ...any) {
	runtimes.ProgressLine(d.cfg.Progress, format, args...)
}

// stop asks a container's program to end (SIGTERM) and kills it after the stop grace.
func (d *Docker) stop(ctx context.Context, id string) error {
	secs := int((d.cfg.StopGrace + time.Second - 1) / time.Second)
	return d.api.ContainerStop(ctx, id, secs)
}

// exec runs argv in a container and returns its exit code and output.
func (d *Docker) exec(ctx context.Context, id string, argv ...string) (int, bytes.Buffer, bytes.Buffer, error) {
	var stdout, stderr bytes.Buffer
	execID, out, err := d.api.Exec(ctx, id, argv)
	if err != nil {
		return 0, stdout, stderr, err
	}
	defer out.Close()
	if err := demux(&stdout, &stderr, out); err != nil {
		return 0, stdout, stderr, fmt.Errorf("read exec output: %w", err)
	}
	// The output ends when the program does; the engine may record its exit a moment later.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		running, code, err := d.api.ExecInspect(ctx, execID)
		if err != nil {
			return 0, stdout, stderr, fmt.Errorf("exec inspect: %w", err)
		}
		if !running {
			return code, stdout, stderr, nil
		}
		select {
		case <-ctx.Done():
			return 0, stdout, stderr, fmt.Errorf("exec: still running: %w", ctx.Err())
		case <-tick.C:
		}
	}
}
