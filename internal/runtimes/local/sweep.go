//go:build linux

package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/widetp/widetp/internal/runtimes"
)

// sweepLocal removes what runs whose harness process is gone (killed before its Close) left under
// base, and returns how many runs it swept. Their programs died with the harness (Pdeathsig), and
// so did every descendant that dies with its parent (simnode's all do); a descendant that does not
// is killed here, through the sessions the run recorded.
//
// A run directory is named after its address block, whose lock a live run holds from before the
// directory exists until after it is gone: the sweep takes the lock before it looks, so it never
// races a run being created or closed. It also leaves a directory whose owner file names a live
// process (a run that closed but could not remove it: not ours to judge) or another machine (a
// /tmp shared with another network namespace, where the lock says nothing).
func sweepLocal(base, machine string) (int, error) {
	entries, err := os.ReadDir(base)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, nil
		}
		return 0, fmt.Errorf("list %s: %w", base, err)
	}
	n := 0
	var errs []error
	uid := os.Getuid()
	for _, e := range entries {
		b, ok := parseBlockName(e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		// Another user's run is theirs to sweep (and the sticky base would refuse anyway).
		if fi, err := e.Info(); err != nil || fi.Sys().(*syscall.Stat_t).Uid != uint32(uid) {
			continue
		}
		swept, err := sweepRun(filepath.Join(base, e.Name()), b, machine)
		if err != nil {
			errs = append(errs, err)
		}
		if swept {
			n++
		}
	}
	return n, errors.Join(errs...)
}

// parseBlockName reads a run directory's name, "<A>.<B>" of its block 127.A.B.0/24.
func parseBlockName(name string) (*addrBlock, bool) {
	var a, b int
	if _, err := fmt.Sscanf(name, "%d.%d", &a, &b); err != nil || a < 1 || a > 254 || b < 0 || b > 255 || fmt.Sprintf("%d.%d", a, b) != name {
		return nil, false
	}
	return &addrBlock{a: byte(a), b: byte(b)}, true
}

func sweepRun(dir string, b *addrBlock, machine string) (bool, error) {
	ln, err := net.Listen("unix", b.lockName())
	if err != nil {
		return false, nil // a live run holds the block
	}
	defer ln.Close()
	if raw, err := os.ReadFile(filepath.Join(dir, ownerFile)); err == nil {
		if o, err := runtimes.ParseOwner(strings.TrimSpace(string(raw))); err == nil && o.Alive(machine) {
			return false, nil
		}
	}
	if err := endRecordedSessions(dir); err != nil {
		// Kept, so that the next sweep tries again.
		return false, fmt.Errorf("end what the dead run in %s left: %w", dir, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return false, fmt.Errorf("remove %s: %w", dir, err)
	}
	return true, nil
}

// sessionsFile lists, one "<session id> <leader start time>" a line, the session of every start
// of every host of a run: what a sweep needs to find a dead run's leftover processes.
const sessionsFile = ".sessions"

// recordSession appends a host's new session to its run's list.
func recordSession(dir string, sid int) error {
	start, err := runtimes.ProcessStart(sid)
	if err != nil {
		return fmt.Errorf("read the start time of pid %d: %w", sid, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, sessionsFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%d %d\n", sid, start)
	return errors.Join(err, f.Close())
}

// endRecordedSessions kills every process left in the sessions a dead run recorded. A session id
// is the run's own while any process of the session lives (the kernel does not hand out a pid still
// used as a session id); it may have been handed out again only once the session was empty, and
// then its new owner leads it with another start time: that session is left alone.
func endRecordedSessions(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, sessionsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	sids := map[int]bool{}
	var errs []error
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var sid int
		var start uint64
		if _, err := fmt.Sscanf(line, "%d %d", &sid, &start); err != nil || sid <= 1 {
			errs = append(errs, fmt.Errorf("%s line %d %q: want <session id> <start time>", sessionsFile, i+1, line))
			continue
		}
		if now, err := runtimes.ProcessStart(sid); err == nil && now != start {
			continue
		}
		sids[sid] = true
	}
	if len(sids) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), teardownBound)
		defer cancel()
		errs = append(errs, endSessions(ctx, sids, 0))
	}
	return errors.Join(errs...)
}
