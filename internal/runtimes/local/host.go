//go:build linux

package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/widetp/widetp/internal/childexit"
	"github.com/widetp/widetp/internal/runtimes"
)

// localHost is one host of a local run: its identity, fixed for the run, and its current program
// (an instance per start).
type localHost struct {
	name    string
	spec    runtimes.NodeSpec
	addr    netip.Addr
	root    string // the ipc root: the host's "/", holding tmp/
	logPath string

	mu         sync.Mutex
	bin        localBinary
	log        *os.File // appended to by every start's output
	inst       *localInstance
	paused     bool
	restarting bool
	closed     bool
}

// localInstance is one start of a host's program.
type localInstance struct {
	cmd     *exec.Cmd
	pid     int // also its process group and session
	argv    []string
	env     []string
	started time.Time
	out     *os.File      // the read end of the output pipe
	ready   chan struct{} // closed at the first output line matching the spec's Ready
	outDone chan struct{} // closed when the output is drained: every writer is gone
	done    chan struct{} // closed when the program and every process of its session are gone

	// sigMu orders signals against the reap: a signal goes out only while the leader is unreaped,
	// so that its pid, the session id, cannot belong to anyone else yet.
	sigMu  sync.Mutex
	reaped bool

	// Set before done closes; read after.
	exitCode    int
	finished    time.Time
	teardownErr error
	logErr      error // set before outDone closes
}

func (h *localHost) started() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.inst != nil
}

func (h *localHost) current() *localInstance {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.inst
}

func (h *localHost) binary() localBinary {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bin
}

func (h *localHost) setRestarting(v bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.restarting = v
}

// spawn starts the host's program; fresh empties its private /tmp first (a restart).
func (l *Local) spawn(h *localHost, bin localBinary, fresh bool) (*localInstance, error) {
	hosts := l.hostsMap()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, errors.New("the runtime is closed")
	}
	tmp := filepath.Join(h.root, "tmp")
	if fresh {
		if err := os.RemoveAll(tmp); err != nil {
			return nil, fmt.Errorf("empty the private /tmp: %w", err)
		}
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("make the private /tmp: %w", err)
	}
	// World-writable and sticky, as a /tmp is (MkdirAll is subject to the umask).
	if err := os.Chmod(tmp, 0o777|os.ModeSticky); err != nil {
		return nil, fmt.Errorf("make the private /tmp: %w", err)
	}
	envMap := localEnv(h.name, h.addr, h.root, hosts, h.spec.Env)
	if _, set := h.spec.Env[runtimes.EnvRun]; !set {
		envMap[runtimes.EnvRun] = l.cfg.RunID
	}
	args, err := runtimes.ExpandArgs(h.spec.Args, envMap)
	if err != nil {
		return nil, err
	}
	if h.log == nil {
		f, err := os.OpenFile(h.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("open the log file: %w", err)
		}
		h.log = f
	}
	// One pipe for stdout and stderr: lines interleave in the order they were written, as in a
	// container's log, and the harness sees each line as it comes (the Ready line).
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("make the output pipe: %w", err)
	}
	in := &localInstance{
		argv: append([]string{bin.Path}, args...), env: envList(envMap),
		out: pr, ready: make(chan struct{}), outDone: make(chan struct{}), done: make(chan struct{}),
	}
	in.cmd = &exec.Cmd{
		Path: bin.Path, Args: in.argv, Env: in.env, Dir: h.root,
		// Stdin is /dev/null, as in a container started without -i.
		Stdout: pw, Stderr: pw,
		SysProcAttr: &syscall.SysProcAttr{
			// A session of its own, and so a process group of its own (see local_session.go).
			Setsid: true,
			// Dies with the harness, however the harness ends; simnode gives its own children
			// the same, so a host's whole tree goes.
			Pdeathsig: syscall.SIGKILL,
		},
	}
	err = spawner.Start(in.cmd)
	pw.Close() // the child has its copy; the pipe ends when the last process of the host closes it
	if err != nil {
		pr.Close()
		return nil, fmt.Errorf("exec %s: %w", bin.Path, err)
	}
	in.pid = in.cmd.Process.Pid
	in.started = time.Now()
	if err := recordSession(filepath.Dir(h.root), in.pid); err != nil {
		// Without the record a sweep could not find what this host leaves if the harness is
		// killed: better no host than one that may leak.
		// The watcher reaps it once this returns (it takes h.mu).
		_ = syscall.Kill(-in.pid, syscall.SIGKILL)
		go in.copyOutput(h.log, nil)
		go in.watch(h)
		return nil, fmt.Errorf("record its session: %w", err)
	}
	h.bin, h.inst, h.paused = bin, in, false
	go in.copyOutput(h.log, h.spec.Ready)
	go in.watch(h)
	return in, nil
}

// maxMatchLine bounds how much of one output line is kept for the Ready match: a ready line is
// short, and a program printing a megabyte without a newline must not grow the harness.
const maxMatchLine = 64 * 1024

// copyOutput appends the program's output to the host's log as it comes and closes ready at the
// first line matching re. It reads until every process of the host has closed the pipe, never
// stopping early: a program blocked on a full pipe would hang.
func (in *localInstance) copyOutput(log io.Writer, re *regexp.Regexp) {
	defer close(in.outDone)
	defer in.out.Close()
	br := bufio.NewReaderSize(in.out, maxMatchLine)
	var line []byte
	seen := false
	match := func() {
		l := line
		if n := len(l); n > 0 && l[n-1] == '\n' {
			l = l[:n-1]
		}
		if n := len(l); n > 0 && l[n-1] == '\r' {
			l = l[:n-1]
		}
		if re != nil && !seen && re.Match(l) {
			seen = true
			close(in.ready)
		}
		line = line[:0]
	}
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			if _, werr := log.Write(chunk); werr != nil && in.logErr == nil {
				in.logErr = werr
			}
			if room := maxMatchLine - len(line); room > 0 {
				line = append(line, chunk[:min(room, len(chunk))]...)
			}
			if chunk[len(chunk)-1] == '\n' {
				match()
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			if len(line) > 0 {
				match()
			}
			return
		}
	}
}

// watch waits for the program to exit, ends what it left in its session (a container's processes
// end with its init), reaps it, waits for its output, and records how it ended.
func (in *localInstance) watch(h *localHost) {
	var errs []error
	if err := childexit.Wait(in.pid); err != nil && !errors.Is(err, unix.ECHILD) {
		errs = append(errs, fmt.Errorf("wait for pid %d: %w", in.pid, err))
	}
	ctx, cancel := context.WithTimeout(context.Background(), teardownBound)
	if err := endSession(ctx, in.pid, in.pid); err != nil {
		errs = append(errs, fmt.Errorf("end what pid %d left in its session: %w", in.pid, err))
	}
	cancel()
	in.sigMu.Lock()
	_ = in.cmd.Wait() // a non-zero exit is an error here; ProcessState has it either way
	in.reaped = true
	in.sigMu.Unlock()
	t := time.NewTimer(drainBound)
	select {
	case <-in.outDone:
	case <-t.C:
		in.out.Close()
		<-in.outDone
		errs = append(errs, fmt.Errorf("output pipe still open %s after every process of the host ended", drainBound))
	}
	t.Stop()
	if in.logErr != nil {
		errs = append(errs, fmt.Errorf("write %s: %w", h.logPath, in.logErr))
	}
	h.mu.Lock()
	in.exitCode, in.finished, in.teardownErr = exitStatus(in.cmd.ProcessState), time.Now(), errors.Join(errs...)
	if h.inst == in {
		h.paused = false
	}
	h.mu.Unlock()
	close(in.done)
}

// exitStatus is the exit code as Docker reports it: 128 + the signal for a killed program.
func exitStatus(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

func (in *localInstance) exited() bool {
	select {
	case <-in.done:
		return true
	default:
		return false
	}
}

var errNotRunning = errors.New("not running")

// signalGroup sends sig to the program's process group.
func (in *localInstance) signalGroup(sig syscall.Signal) error {
	in.sigMu.Lock()
	defer in.sigMu.Unlock()
	if in.reaped || in.exited() {
		return errNotRunning
	}
	if err := syscall.Kill(-in.pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// signalSession sends sig to every process group of the host.
func (in *localInstance) signalSession(sig syscall.Signal) error {
	in.sigMu.Lock()
	defer in.sigMu.Unlock()
	if in.reaped {
		return nil
	}
	_, err := signalSession(in.pid, sig)
	return err
}

// waitReady waits for the instance's ready line (if the spec has one), its end, or ctx.
func (l *Local) waitReady(ctx context.Context, h *localHost, in *localInstance) error {
	if h.spec.Ready == nil {
		if in.exited() {
			return l.exitedError(h, in)
		}
		return nil
	}
	select {
	case <-in.ready:
		return nil
	case <-in.done:
		// The output is drained by now: a ready line printed just before the end counts, as
		// in a container's log.
		select {
		case <-in.ready:
			return nil
		default:
		}
		return l.exitedError(h, in)
	case <-ctx.Done():
		if errors.Is(context.Cause(ctx), errStartTimeout) {
			return l.startFailure(h, fmt.Errorf("not ready within %s (no line matching %q)", l.cfg.StartTimeout, h.spec.Ready))
		}
		return l.startFailure(h, fmt.Errorf("wait for a line matching %q: %w", h.spec.Ready, context.Cause(ctx)))
	}
}

// tail is the last cfg.LogTail lines of a host's log.
func (l *Local) tail(h *localHost) ([]string, error) {
	b, err := os.ReadFile(h.logPath)
	if err != nil {
		return nil, err
	}
	return runtimes.LastLines(string(b), l.cfg.LogTail), nil
}

// startFailure wraps a start error with the host's last log lines, when it printed any.
func (l *Local) startFailure(h *localHost, err error) error {
	if tail, terr := l.tail(h); terr == nil && len(tail) > 0 {
		return fmt.Errorf("start node %s: %w; its last log lines:\n%s", h.name, err, runtimes.Indent(tail))
	}
	return fmt.Errorf("start node %s: %w", h.name, err)
}

func (l *Local) exitedError(h *localHost, in *localInstance) error {
	tail, err := l.tail(h)
	e := &runtimes.NodeExitedError{Host: h.name, ExitCode: in.exitCode, Tail: tail}
	if err != nil {
		return fmt.Errorf("start node %s: %w (and reading its logs failed: %v)", h.name, e, err)
	}
	return fmt.Errorf("start node %s: %w", h.name, e)
}

// stop ends an instance: SIGTERM to its process group (and SIGCONT to a paused host, which
// could not act on it), then SIGKILL to the whole host after the stop grace.
func (l *Local) stop(ctx context.Context, h *localHost, in *localInstance) error {
	if in.exited() {
		return nil
	}
	if err := in.signalGroup(syscall.SIGTERM); err != nil && !errors.Is(err, errNotRunning) {
		return fmt.Errorf("send SIGTERM: %w", err)
	}
	h.mu.Lock()
	wasPaused := h.paused
	h.paused = false
	h.mu.Unlock()
	if wasPaused {
		if err := in.signalSession(syscall.SIGCONT); err != nil {
			return fmt.Errorf("send SIGCONT: %w", err)
		}
	}
	grace := time.NewTimer(l.cfg.StopGrace)
	defer grace.Stop()
	select {
	case <-in.done:
		return in.teardownErr
	case <-ctx.Done():
		return fmt.Errorf("wait for the end after SIGTERM: %w", ctx.Err())
	case <-grace.C:
	}
	if err := in.signalSession(syscall.SIGKILL); err != nil {
		return fmt.Errorf("send SIGKILL after %s: %w", l.cfg.StopGrace, err)
	}
	select {
	case <-in.done:
		return in.teardownErr
	case <-ctx.Done():
		return fmt.Errorf("wait for the end after SIGKILL: %w", ctx.Err())
	}
}

func (h *localHost) pause(ctx context.Context) error {
	h.mu.Lock()
	in, paused := h.inst, h.paused
	h.mu.Unlock()
	if in.exited() {
		return errNotRunning
	}
	if paused {
		return errors.New("already paused")
	}
	in.sigMu.Lock()
	var err error
	if in.reaped {
		err = errNotRunning
	} else {
		err = freezeSession(ctx, in.pid)
	}
	in.sigMu.Unlock()
	if errors.Is(err, errNotRunning) {
		return err
	}
	// Even a partial freeze is a pause to undo: Unpause continues whatever was stopped.
	h.mu.Lock()
	if h.inst == in && !in.exited() {
		h.paused = true
	}
	h.mu.Unlock()
	return err
}

func (h *localHost) unpause() error {
	h.mu.Lock()
	in, paused := h.inst, h.paused
	h.mu.Unlock()
	if in.exited() {
		return errNotRunning
	}
	if !paused {
		return errors.New("not paused")
	}
	if err := in.signalSession(syscall.SIGCONT); err != nil {
		return err
	}
	h.mu.Lock()
	h.paused = false
	h.mu.Unlock()
	return nil
}

// state is the host's State, in Docker's words.
func (h *localHost) state() runtimes.State {
	h.mu.Lock()
	defer h.mu.Unlock()
	in := h.inst
	switch {
	case h.restarting:
		return runtimes.State{Status: "restarting", Running: !in.exited()}
	case in.exited():
		return runtimes.State{Status: "exited", ExitCode: in.exitCode}
	case h.paused:
		return runtimes.State{Status: "paused", Running: true, Paused: true}
	default:
		return runtimes.State{Status: "running", Running: true}
	}
}

// killHosts marks hosts closed, so that no start races with their end, and SIGKILLs every
// process of every one with one scan of /proc. Each host's watcher then ends what is left.
func killHosts(hosts []*localHost) error {
	sids := map[int]bool{}
	var locked []*localInstance
	for _, h := range hosts {
		h.mu.Lock()
		h.closed = true
		in := h.inst
		h.mu.Unlock()
		if in == nil {
			continue
		}
		// Held until the signals are out: no leader is reaped meanwhile (see sigMu).
		in.sigMu.Lock()
		locked = append(locked, in)
		if !in.reaped {
			sids[in.pid] = true
		}
	}
	defer func() {
		for _, in := range locked {
			in.sigMu.Unlock()
		}
	}()
	if len(sids) == 0 {
		return nil
	}
	_, err := signalSessions(sids, syscall.SIGKILL)
	return err
}

// close waits until every process of the host is gone (bounded by ctx), after killHosts, and
// closes its log.
func (h *localHost) close(ctx context.Context) error {
	h.mu.Lock()
	in := h.inst
	h.mu.Unlock()
	if in != nil && !in.exited() {
		select {
		case <-in.done:
		case <-ctx.Done():
			return fmt.Errorf("wait for pid %d and its session to end: %w", in.pid, ctx.Err())
		}
	}
	var err error
	if in != nil {
		err = in.teardownErr
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.log != nil {
		if cerr := h.log.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		h.log = nil
	}
	return err
}
