//go:build linux

package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/widetp/widetp/internal/procfs"
)

// A local host is a session. Its program starts as the leader of a new session (Setsid), so its
// process group is its own, and every process it starts stays in that session: setpgid(2) cannot
// leave a session, only setsid(2) can, and neither simnode nor vLLM calls it. The session, not the
// program's process group, is what holds a host's whole tree: simnode puts each command's tree in
// a process group of its own (so that it can signal one command), and a signal to the leader's
// group would miss those. Signalling a host means signalling every process group of its session;
// /proc is the only place that lists them.
//
// A session id is the leader's pid, which the kernel does not hand out again while any process
// still uses it as its pid, process group or session. The runtime reaps a leader only after its
// session is empty (childexit.Wait looks without reaping), so a session id it signals is always its own.

// sessionProcs lists the processes of session sid, zombies included. A process that ends during
// the scan is left out: the listing is a snapshot of a live table.
func sessionProcs(sid int) ([]procfs.Stat, error) {
	return sessionsProcs(map[int]bool{sid: true})
}

// sessionsProcs lists the processes of every session in sids with one scan of /proc (a scan costs
// a few microseconds per process of the machine: one per host of a large run adds up).
func sessionsProcs(sids map[int]bool) ([]procfs.Stat, error) {
	all, err := procScans.fresh()
	if err != nil {
		return nil, err
	}
	var out []procfs.Stat
	for _, st := range all {
		if sids[st.SID] {
			out = append(out, st)
		}
	}
	return out, nil
}

// procScans shares scans of /proc between the hosts that look at once: at a large run's teardown
// every host's watcher polls its session (watch), and 65 hosts scanning a table of 700 processes
// each, round after round, took a tenth of a local 64-host run's CPU.
var procScans = scanShare{scan: procfs.All}

// scanShare runs scan for concurrent callers: each gets a scan that began after its call (a caller
// has just signalled, and must see what the signal did), and callers that arrive while a scan runs
// share the next one.
type scanShare struct {
	scan func() ([]procfs.Stat, error)

	mu      sync.Mutex
	running bool       // a loop goroutine is running the rounds
	next    *scanRound // the round a caller joins; the loop takes it when the running scan ends
}

type scanRound struct {
	done    chan struct{}
	waiters int           // callers that joined (under scanShare.mu)
	procs   []procfs.Stat // shared by the round's callers: read only
	err     error
}

// fresh returns a scan that began after the call.
func (s *scanShare) fresh() ([]procfs.Stat, error) {
	s.mu.Lock()
	if s.next == nil {
		s.next = &scanRound{done: make(chan struct{})}
		if !s.running {
			s.running = true
			go s.loop()
		}
	}
	r := s.next
	r.waiters++
	s.mu.Unlock()
	<-r.done
	return r.procs, r.err
}

// loop scans for the waiting round until no caller waits. A round is taken (next set to nil)
// before its scan begins, so every caller that joined it had called by then.
func (s *scanShare) loop() {
	for {
		s.mu.Lock()
		r := s.next
		s.next = nil
		if r == nil {
			s.running = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		r.procs, r.err = s.scan()
		close(r.done)
	}
}

// signalSession sends sig to every process group of session sid that has a live process, and
// returns the session's processes as they were just before. A group signal reaches every member
// at once, including one forked while the signal is sent (fork(2) restarts when a group signal
// arrives during it), so a tree cannot outrun it within one group.
func signalSession(sid int, sig syscall.Signal) ([]procfs.Stat, error) {
	return signalSessions(map[int]bool{sid: true}, sig)
}

// signalSessions is signalSession for several sessions, with one scan.
func signalSessions(sids map[int]bool, sig syscall.Signal) ([]procfs.Stat, error) {
	procs, err := sessionsProcs(sids)
	if err != nil {
		return nil, err
	}
	groups := map[int]bool{}
	for _, p := range procs {
		if p.Live() {
			groups[p.PGID] = true
		}
	}
	var errs []error
	for g := range groups {
		if err := syscall.Kill(-g, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("send %s to process group %d: %w", unix.SignalName(sig), g, err))
		}
	}
	return procs, errors.Join(errs...)
}

// Polling /proc: the kernel has no event for "every process of a session has stopped" or "has
// ended" (a pidfd covers one process, and a wait only one's own children). Signals take effect
// within microseconds to a few milliseconds, so the first look comes soon and later ones back off
// to spare the machine's cores.
const (
	pollFirst = time.Millisecond
	pollMax   = 25 * time.Millisecond
)

// pollWait waits *d, or until ctx ends, and doubles *d up to pollMax.
func pollWait(ctx context.Context, d *time.Duration) error {
	t := time.NewTimer(*d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
	}
	*d = min(2**d, pollMax)
	return nil
}

// endSession SIGKILLs every process of session sid until none lives, reaping those that were
// re-parented to this process (see becomeSubreaper); leader is left to its exec.Cmd. It gives up
// when ctx ends, naming the survivors (a process in uninterruptible sleep outlives SIGKILL).
func endSession(ctx context.Context, sid, leader int) error {
	return endSessions(ctx, map[int]bool{sid: true}, leader)
}

// endSessions is endSession for several sessions, with one scan a round.
func endSessions(ctx context.Context, sids map[int]bool, leader int) error {
	self := os.Getpid()
	d := pollFirst
	for {
		procs, err := signalSessions(sids, syscall.SIGKILL)
		if err != nil {
			return err
		}
		var live []string
		for _, p := range procs {
			switch {
			case p.Live():
				live = append(live, p.String())
			case p.PPID == self && p.PID != leader:
				// Ours since its parent died: only this process can reap it, and it is in no
				// exec.Cmd, so no Wait of anyone else's is robbed.
				var ws unix.WaitStatus
				_, _ = unix.Wait4(p.PID, &ws, unix.WNOHANG, nil)
			}
		}
		if len(live) == 0 {
			return nil
		}
		if err := pollWait(ctx, &d); err != nil {
			return fmt.Errorf("still alive after SIGKILL: %s: %w", strings.Join(live, ", "), err)
		}
	}
}

// freezeSession SIGSTOPs every process group of session sid until every live process of it is
// stopped: a process forked into a new group between a scan and the signal is caught by the next
// round, and a stopped process forks nothing more.
func freezeSession(ctx context.Context, sid int) error {
	d := pollFirst
	for {
		procs, err := signalSession(sid, syscall.SIGSTOP)
		if err != nil {
			return err
		}
		var running []string
		for _, p := range procs {
			if p.Live() && !p.Stopped() {
				running = append(running, p.String())
			}
		}
		if len(running) == 0 {
			return nil
		}
		if err := pollWait(ctx, &d); err != nil {
			return fmt.Errorf("freeze session %d: not stopped: %s: %w", sid, strings.Join(running, ", "), err)
		}
	}
}

var subreaper struct {
	once sync.Once
	err  error
}

// becomeSubreaper makes this process the reaper of its descendants' orphans (PR_SET_CHILD_SUBREAPER):
// when a host's program dies first, its children are re-parented here rather than to PID 1, which
// in a container or a micro-VM often reaps nothing, so every ended run would leave its processes
// behind as zombies until the pid table fills. endSession reaps them. It is process-wide and set once.
func becomeSubreaper() error {
	subreaper.once.Do(func() {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			subreaper.err = fmt.Errorf("become a child subreaper: %w", err)
		}
	})
	return subreaper.err
}

// parseSignal reads a signal as Docker's kill does: "SIGKILL", "KILL" or "9", any case.
func parseSignal(s string) (syscall.Signal, error) {
	if n, err := strconv.Atoi(s); err == nil {
		// 1..64: the standard and real-time signals of Linux (SIGRTMAX is 64).
		if n < 1 || n > 64 {
			return 0, fmt.Errorf("signal %q: out of range 1-64", s)
		}
		return syscall.Signal(n), nil
	}
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return sig, nil
	}
	return 0, fmt.Errorf("signal %q: unknown (want a name like SIGTERM or a number)", s)
}
