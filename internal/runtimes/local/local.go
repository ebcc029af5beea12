//go:build linux

package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/widetp/widetp/harness/ipcdir"
	"github.com/widetp/widetp/internal/runtimes"
	"github.com/widetp/widetp/internal/runtimes/netcut"
	"github.com/widetp/widetp/internal/zmq"
)

// Local is the Runtime without containers: every host is a real OS process tree of its program on
// this machine, with its own host name (WIDETP_HOST), its own directory as its filesystem for ipc
// paths (WIDETP_IPC_ROOT=<run dir>/<n>, holding tmp/), its own loopback address
// (WIDETP_LISTEN_IP=127.A.B.n from the run's block) and a map of every host's address
// (WIDETP_HOSTS), so rendezvous and handshakes between hosts cross real sockets.
//
// A host's program leads a session of its own (see local_session.go): signals reach every process
// it started; it dies with the harness (Pdeathsig); when it ends, what it left in its session is
// killed, as a container's processes end with its init. Its output (stdout and stderr, interleaved
// as written) is kept in <run dir>/<host>.log.
//
// Hosts started in one StartNodes call know each other and every host started before; a host
// started earlier does not learn later ones (an environment is fixed at exec) until it restarts.
// The harness starts the store first and every node in one call, so every node resolves all.
//
// A program must listen at its own address: a flag that takes a listen address is given
// "$(WIDETP_LISTEN_IP):port" (expandArgs); a wildcard bind (":8080") would take the port from every
// host of every run on the machine.
//
// What it does not give: memory or CPU limits, a network namespace (a program that ignores
// WIDETP_LISTEN_IP and WIDETP_HOSTS sees the machine's loopback), or a hostname (gethostname(2)
// is the machine's; simnode reads WIDETP_HOST). If the harness is SIGKILLed, a descendant that
// does not die with its parent (no Pdeathsig, unlike simnode's processes) lives on until the next
// local run's sweep kills it.
type Local struct {
	cfg   runtimes.Config
	owner runtimes.Owner
	dir   string
	block *addrBlock
	cuts  *netcut.Partitions

	// closeMu makes Close calls (the owner's and CloseAll's from a signal handler) one at a time.
	closeMu sync.Mutex

	mu     sync.Mutex
	hosts  map[string]*localHost
	order  []string
	next   int // index of the next host's address in the block
	closed bool
}

var _ runtimes.Runtime = (*Local)(nil)

// Run directory layout: <base>/<A>.<B>/, named after the run's address block 127.A.B.0/24, holds
// ownerFile, runIDFile, sessionsFile, one directory per host named after the last byte of its
// address (127.A.B.n: <run dir>/<n>, its ipc root) and one <host>.log per host. Every name is
// short because an ipc path becomes <run dir>/<n>/tmp/<vLLM's file name>, that file name carries
// the host name (lookup_rpc_port_<port>_host_<hostname>_dp_rank<i>), and a unix socket path holds
// at most 107 bytes: with these names a 40-byte host name (a Kubernetes pod's, in scenarios/)
// still fits. The block is held by this run alone, so the run directory's name is free.
const (
	ownerFile = ".owner"
	runIDFile = ".run-id"
)

// Bounds of a host's end. A process that survives SIGKILL for teardownBound is in uninterruptible
// sleep (a hung disk or FUSE): the harness reports it instead of hanging. Once every process of a
// host is gone the output pipe has no writer left, so draining it takes microseconds; drainBound
// only matters if something outside the session kept the pipe open.
const (
	teardownBound = 10 * time.Second
	drainBound    = 2 * time.Second
)

// New prepares a local run: it sweeps the run directories of dead harness processes (unless
// WithoutSweep), makes this run's directory, and reserves the run's block of loopback addresses.
// It returns a *Local.
func New(ctx context.Context, opts ...runtimes.Option) (runtimes.Runtime, error) {
	cfg := runtimes.NewConfig(opts...)
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("configure local runtime: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("start local runtime: %w", err)
	}
	// The hosts run on this machine, and their processes need libzmq: say which package is
	// missing before anything starts.
	if err := zmq.Load(); err != nil {
		return nil, fmt.Errorf("start local runtime: %w", err)
	}
	owner, err := runtimes.CurrentOwner()
	if err != nil {
		return nil, err
	}
	if err := becomeSubreaper(); err != nil {
		return nil, fmt.Errorf("start local runtime: %w", err)
	}
	l := &Local{cfg: cfg, owner: owner, hosts: map[string]*localHost{}}
	l.cuts = netcut.NewPartitions(netcut.Loopback, cfg.RunID, owner, func(_ context.Context, host string) (netip.Addr, error) {
		return l.Address(host)
	})
	base := localBase()
	if err := makeLocalBase(base); err != nil {
		return nil, fmt.Errorf("start local runtime: %w", err)
	}
	if cfg.Sweep {
		n, err := sweepLocal(base, owner.Machine)
		if err != nil {
			return nil, fmt.Errorf("sweep leftovers of earlier local runs: %w", err)
		}
		if n > 0 {
			l.progressf("swept %d run directory(ies) left by dead runs", n)
		}
		sctx, cancel := context.WithTimeout(ctx, cfg.OpTimeout)
		n, err = netcut.Sweep(sctx, owner.Machine, func(o runtimes.Owner) bool { return o.Alive(owner.Machine) })
		cancel()
		if err != nil {
			return nil, fmt.Errorf("sweep partitions of earlier runs: %w", err)
		}
		if n > 0 {
			l.progressf("swept %d nftables table(s) left by dead runs", n)
		}
	}
	if l.block, err = reserveBlock(cfg.RunID); err != nil {
		return nil, err
	}
	if err := l.block.checkBindable(); err != nil {
		return nil, errors.Join(err, l.block.release())
	}
	dir := filepath.Join(base, l.block.dirName())
	// A directory of this name is a leftover: a live run would hold the block. Its owner is dead
	// or closed the run without removing it (even when the sweep is off).
	if _, err := os.Stat(dir); err == nil {
		if err := errors.Join(endRecordedSessions(dir), os.RemoveAll(dir)); err != nil {
			return nil, errors.Join(fmt.Errorf("start local run %s: remove the leftover %s: %w", cfg.RunID, dir, err), l.block.release())
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, errors.Join(fmt.Errorf("start local run %s: %w", cfg.RunID, err), l.block.release())
	}
	l.dir = dir
	err = errors.Join(
		os.WriteFile(filepath.Join(dir, ownerFile), []byte(owner.String()+"\n"), 0o644),
		os.WriteFile(filepath.Join(dir, runIDFile), []byte(cfg.RunID+"\n"), 0o644))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("start local run %s: %w", cfg.RunID, err), os.RemoveAll(dir), l.block.release())
	}
	runtimes.Register(l)
	l.progressf("local run %s in %s on %s", cfg.RunID, dir, l.block)
	return l, nil
}

// localBase holds every local run directory of the machine, shared by its users as /tmp is
// (world-writable, sticky): the blocks that name the run directories are machine-wide anyway, and
// every byte of the path counts (see ownerFile).
func localBase() string {
	return filepath.Join(os.TempDir(), "widetp")
}

// makeLocalBase makes the base directory, or checks the one that is there.
func makeLocalBase(base string) error {
	err := os.Mkdir(base, 0o777)
	switch {
	case err == nil:
		// Mkdir is subject to the umask.
		if err := os.Chmod(base, 0o777|os.ModeSticky); err != nil {
			return fmt.Errorf("make %s: %w", base, err)
		}
	case !errors.Is(err, os.ErrExist):
		return fmt.Errorf("make %s: %w", base, err)
	}
	fi, err := os.Stat(base)
	if err != nil {
		return fmt.Errorf("local runs' directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory (mode %s): the local runtime keeps its runs there; remove it, or set TMPDIR to another directory", base, fi.Mode())
	}
	return nil
}

// Name implements Runtime.
func (l *Local) Name() string { return "local" }

// RunID implements Runtime.
func (l *Local) RunID() string { return l.cfg.RunID }

// Dir is the run's directory (removed by Close).
func (l *Local) Dir() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dir
}

// Block is the run's /24 of loopback addresses ("127.A.B.0/24").
func (l *Local) Block() string { return l.block.String() }

// Address is the loopback address of a host of the run.
func (l *Local) Address(host string) (netip.Addr, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.hosts[host]
	if !ok {
		return netip.Addr{}, fmt.Errorf("address of host %s: not started in run %s", host, l.cfg.RunID)
	}
	return h.addr, nil
}

// storeDialTimeout bounds the check that a host listens where Endpoints says: a listening port on
// loopback answers in microseconds.
const storeDialTimeout = 5 * time.Second

// StartStore starts the store host alone (harness.StartStore).
func (l *Local) StartStore(ctx context.Context, spec runtimes.NodeSpec) (runtimes.Store, error) {
	return runtimes.StartStore(ctx, l, spec)
}

// Endpoints implements Runtime. A host's Ports are the ports it listens on at its own address (its
// args say where, with $(WIDETP_LISTEN_IP)); each is dialed once, so that a program listening
// elsewhere fails here, by name, rather than later in every client.
func (l *Local) Endpoints(ctx context.Context, host string) (map[int]string, error) {
	h, err := l.host(host)
	if err != nil {
		return nil, fmt.Errorf("endpoints of %w", err)
	}
	addrs := map[int]string{}
	for _, p := range h.spec.Ports {
		a := net.JoinHostPort(h.addr.String(), strconv.Itoa(p))
		dctx, cancel := context.WithTimeout(ctx, storeDialTimeout)
		var d net.Dialer
		c, err := d.DialContext(dctx, "tcp", a)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("host %s: port %d: nothing listens at %s (pass $(%s):%d to the program as its listen address): %w", host, p, a, runtimes.EnvListenIP, p, err)
		}
		c.Close()
		addrs[p] = a
	}
	return addrs, nil
}

// StartNodes implements Runtime: plan every node (validate, claim its name and address, build
// its program), then start them all at once.
func (l *Local) StartNodes(ctx context.Context, specs ...runtimes.NodeSpec) error {
	hosts, err := l.reserve(specs)
	if err != nil {
		return err
	}
	// Arguments are expanded for real at each start (WIDETP_HOSTS grows); a reference to a
	// variable no host has is bad input, refused before anything runs.
	var errs []error
	for _, h := range hosts {
		if _, err := runtimes.ExpandArgs(h.spec.Args, localEnv(h.name, h.addr, h.root, "", h.spec.Env)); err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", h.name, err))
		}
	}
	if len(errs) > 0 {
		l.release(hosts)
		return fmt.Errorf("start nodes: %w", errors.Join(errs...))
	}
	bins := map[string]localBinary{}
	for _, h := range hosts {
		if _, ok := bins[h.spec.Program.Name]; ok {
			continue
		}
		path, err := runtimes.ProgramPath(h.spec.Program, l.cfg.Binary)
		if err != nil {
			errs = append(errs, &runtimes.ImageBuildError{Image: h.spec.Program.Name, Step: "binary", Err: err})
		}
		bins[h.spec.Program.Name] = localBinary{Name: h.spec.Program.Name, Path: path}
	}
	if len(errs) > 0 {
		l.release(hosts)
		return errors.Join(errs...)
	}
	plan := make([]func() error, len(hosts))
	for i, h := range hosts {
		plan[i] = func() error { return l.startHost(ctx, h, bins[h.spec.Program.Name]) }
	}
	return runtimes.RunConcurrently(plan)
}

// localBinary is a program as the local runtime runs it: the binary itself, executed in place
// (the widetp binary for `widetp node` and `widetp store`). Nothing is copied or built.
type localBinary struct {
	Name string
	Path string
}

// reserve validates specs and claims their names and addresses, so that two concurrent starts
// cannot both take one name.
func (l *Local) reserve(specs []runtimes.NodeSpec) ([]*localHost, error) {
	var errs []error
	seen := map[string]bool{}
	for _, s := range specs {
		if err := s.Validate(); err != nil {
			errs = append(errs, err)
		}
		if seen[s.Host] {
			errs = append(errs, fmt.Errorf("node %s: host listed twice", s.Host))
		}
		seen[s.Host] = true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		errs = append(errs, errors.New("the runtime is closed"))
	}
	for _, s := range specs {
		if _, ok := l.hosts[s.Host]; ok {
			errs = append(errs, fmt.Errorf("node %s: host already started in this run", s.Host))
		}
	}
	if n := l.next + len(specs); n > maxLocalHosts {
		errs = append(errs, fmt.Errorf("%d hosts: a local run has at most %d (the addresses of its block %s)", n, maxLocalHosts, l.block))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("start nodes: %w", err)
	}
	hosts := make([]*localHost, len(specs))
	for i, s := range specs {
		addr, err := l.block.host(l.next)
		if err != nil {
			return nil, fmt.Errorf("start nodes: %w", err)
		}
		l.next++
		root := filepath.Join(l.dir, strconv.Itoa(int(addr.As4()[3])))
		h := &localHost{name: s.Host, spec: s, addr: addr, root: root, logPath: filepath.Join(l.dir, s.Host+".log")}
		l.hosts[s.Host] = h
		l.order = append(l.order, s.Host)
		hosts[i] = h
	}
	return hosts, nil
}

// release forgets reserved hosts that never ran. Their addresses are not handed out again: a
// block has room for every host of any run, and an address stays one host's for the whole run.
func (l *Local) release(hosts []*localHost) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, h := range hosts {
		if h.started() {
			continue
		}
		delete(l.hosts, h.name)
		for i, n := range l.order {
			if n == h.name {
				l.order = append(l.order[:i], l.order[i+1:]...)
				break
			}
		}
	}
}

// hostsMap is the WIDETP_HOSTS value: every host claimed so far, in start order.
func (l *Local) hostsMap() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	pairs := make([]string, 0, len(l.order))
	for _, n := range l.order {
		pairs = append(pairs, n+"="+l.hosts[n].addr.String())
	}
	return strings.Join(pairs, ",")
}

// startHost runs a host's program and waits until it is ready, within the start timeout.
func (l *Local) startHost(ctx context.Context, h *localHost, bin localBinary) error {
	ctx, cancel := context.WithTimeoutCause(ctx, l.cfg.StartTimeout, errStartTimeout)
	defer cancel()
	in, err := l.spawn(h, bin, false)
	if err != nil {
		return fmt.Errorf("start node %s: %w", h.name, err)
	}
	if err := l.waitReady(ctx, h, in); err != nil {
		return err
	}
	l.progressf("node %s up at %s", h.name, h.addr)
	return nil
}

// errStartTimeout tells the start bound from the caller's context.
var errStartTimeout = errors.New("start timeout")

// host finds a host that has run.
func (l *Local) host(name string) (*localHost, error) {
	l.mu.Lock()
	h, ok := l.hosts[name]
	l.mu.Unlock()
	if !ok || !h.started() {
		return nil, fmt.Errorf("host %s: not started in run %s", name, l.cfg.RunID)
	}
	return h, nil
}

// Stop implements Runtime: SIGTERM to the program's process group, then, after the stop grace,
// SIGKILL to every process of the host. A stopped host stays stopped (no error), as in Docker.
func (l *Local) Stop(ctx context.Context, host string) error {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.OpTimeout)
	defer cancel()
	h, err := l.host(host)
	if err != nil {
		return fmt.Errorf("stop %w", err)
	}
	if err := l.stop(ctx, h, h.current()); err != nil {
		return fmt.Errorf("stop host %s: %w", host, err)
	}
	return nil
}

// Kill implements Runtime: the signal goes to the program's process group (SIGKILL included: the
// rest of the host ends with its program).
func (l *Local) Kill(ctx context.Context, host, signal string) error {
	h, err := l.host(host)
	if err != nil {
		return fmt.Errorf("kill %w", err)
	}
	sig, err := parseSignal(signal)
	if err != nil {
		return fmt.Errorf("kill host %s: %w", host, err)
	}
	if err := h.current().signalGroup(sig); err != nil {
		return fmt.Errorf("kill host %s with %s: %w", host, signal, err)
	}
	return nil
}

// Pause implements Runtime: SIGSTOP to every process group of the host, until every process of it
// is stopped. Peers see a silent host, as with the cgroup freezer.
func (l *Local) Pause(ctx context.Context, host string) error {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.OpTimeout)
	defer cancel()
	h, err := l.host(host)
	if err != nil {
		return fmt.Errorf("pause %w", err)
	}
	if err := h.pause(ctx); err != nil {
		return fmt.Errorf("pause host %s: %w", host, err)
	}
	return nil
}

// Unpause implements Runtime: SIGCONT to every process group of the host.
func (l *Local) Unpause(ctx context.Context, host string) error {
	h, err := l.host(host)
	if err != nil {
		return fmt.Errorf("unpause %w", err)
	}
	if err := h.unpause(); err != nil {
		return fmt.Errorf("unpause host %s: %w", host, err)
	}
	return nil
}

// Restart implements Runtime: Stop, an empty private /tmp, the program again with the same
// address, and a wait for its ready line as in StartNodes. Its WIDETP_HOSTS names every host
// claimed by then.
func (l *Local) Restart(ctx context.Context, host string) error {
	h, err := l.host(host)
	if err != nil {
		return fmt.Errorf("restart %w", err)
	}
	h.setRestarting(true)
	defer h.setRestarting(false)
	stopCtx, cancelStop := context.WithTimeout(ctx, l.cfg.OpTimeout)
	err = l.stop(stopCtx, h, h.current())
	cancelStop()
	if err != nil {
		return fmt.Errorf("restart host %s: stop: %w", host, err)
	}
	sctx, cancel := context.WithTimeoutCause(ctx, l.cfg.StartTimeout, errStartTimeout)
	defer cancel()
	in, err := l.spawn(h, h.binary(), true)
	if err != nil {
		return fmt.Errorf("restart host %s: %w", host, err)
	}
	return l.waitReady(sctx, h, in)
}

// Partition implements Runtime: a chain of the run's nftables table (family ip) on loopback
// input, between the hosts' own addresses (a host keeps its address across restarts).
func (l *Local) Partition(ctx context.Context, name string, a, b []string) error {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.OpTimeout)
	defer cancel()
	return l.cuts.Partition(ctx, name, a, b)
}

// Heal implements Runtime.
func (l *Local) Heal(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.OpTimeout)
	defer cancel()
	return l.cuts.Heal(ctx, name)
}

// State implements Runtime. Running is true while the program lives, paused or not, as in Docker;
// OOMKilled is always false (no memory cgroup: the kernel's OOM killer shows as SIGKILL, 137).
func (l *Local) State(ctx context.Context, host string) (runtimes.State, error) {
	h, err := l.host(host)
	if err != nil {
		return runtimes.State{}, fmt.Errorf("state of %w", err)
	}
	return h.state(), nil
}

// Logs implements Runtime: the host's log file, every start of it.
func (l *Local) Logs(ctx context.Context, host string) ([]byte, error) {
	h, err := l.host(host)
	if err != nil {
		return nil, fmt.Errorf("logs of %w", err)
	}
	b, err := os.ReadFile(h.logPath)
	if err != nil {
		return nil, fmt.Errorf("logs of host %s: %w", host, err)
	}
	return b, nil
}

// IPCDir implements Runtime: the listing of the host's private /tmp (<ipc root>/tmp), so paths
// read as on Docker ("lookup.ipc"); Root is the real directory. It works on a stopped host too.
func (l *Local) IPCDir(ctx context.Context, host string) (ipcdir.Listing, error) {
	h, err := l.host(host)
	if err != nil {
		return ipcdir.Listing{}, fmt.Errorf("list ipc dir of %w", err)
	}
	ls, err := ipcdir.List(filepath.Join(h.root, "tmp"))
	if err != nil {
		return ipcdir.Listing{}, fmt.Errorf("list ipc dir of host %s: %w", host, err)
	}
	return ls, nil
}

// Exec implements Runtime: the host's binary with args, in the host's environment and directory
// (its WIDETP_IPC_ROOT is the host's private /tmp), outside the host's session: it is the
// runtime's tool, not one of the host's processes.
func (l *Local) Exec(ctx context.Context, host string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.OpTimeout)
	defer cancel()
	h, err := l.host(host)
	if err != nil {
		return nil, fmt.Errorf("exec on %w", err)
	}
	in := h.current()
	if in == nil {
		return nil, fmt.Errorf("exec on host %s: it never started", host)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, h.binary().Path, args...)
	cmd.Env, cmd.Dir = in.env, h.root
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("exec widetp %s on host %s: %w: %s", strings.Join(args, " "), host, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// Hosts implements Runtime.
func (l *Local) Hosts() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, n := range l.order {
		if h := l.hosts[n]; h != nil && h.started() {
			out = append(out, n)
		}
	}
	return out
}

// Close implements Runtime: every host's processes are SIGKILLed at once (a graceful end is the
// caller's Stop) and waited for, then the run directory goes and the address block is freed. A
// host whose processes do not end keeps the run open: its error names them, and Close may be
// called again.
func (l *Local) Close(ctx context.Context) error {
	// The run goes even when the caller's context is done (a spec past its deadline, a CLI after
	// Ctrl-C): the SIGKILLs go out at once, and the wait for their end is bounded by opTimeout.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.OpTimeout)
	defer cancel()
	l.closeMu.Lock()
	defer l.closeMu.Unlock()
	l.mu.Lock()
	l.closed = true
	hosts := make([]*localHost, 0, len(l.order))
	for _, n := range l.order {
		hosts = append(hosts, l.hosts[n])
	}
	l.mu.Unlock()
	errs := []error{killHosts(hosts), l.cuts.Close(ctx)}
	var steps []func() error
	for _, h := range hosts {
		n := h.name
		steps = append(steps, func() error {
			if err := h.close(ctx); err != nil {
				return fmt.Errorf("remove host %s: %w", n, err)
			}
			l.mu.Lock()
			delete(l.hosts, n)
			l.mu.Unlock()
			return nil
		})
	}
	errs = append(errs, runtimes.RunConcurrently(steps))
	l.mu.Lock()
	remaining, dir := len(l.hosts), l.dir
	if remaining == 0 {
		l.order = nil
	}
	l.mu.Unlock()
	if remaining == 0 {
		if dir != "" {
			if err := os.RemoveAll(dir); err != nil {
				errs = append(errs, fmt.Errorf("remove run directory: %w", err))
			}
		}
		if err := l.block.release(); err != nil {
			errs = append(errs, fmt.Errorf("release address block %s: %w", l.block, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close run %s: %w", l.cfg.RunID, err)
	}
	runtimes.Unregister(l)
	return nil
}

func (l *Local) progressf(format string, args ...any) {
	runtimes.ProgressLine(l.cfg.Progress, format, args...)
}
