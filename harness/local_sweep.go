//go:build linux

package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// sweepLocal removes what runs whose harness process is gone (killed before its Close) left under
// base, and returns how many runs it swept. Their programs died with the harness (Pdeathsig), and
// so did every descendant that dies with its parent (simnode's all do); a descendant that does not
// is killed here, through the sessions the run recorded. A directory without a readable owner is
// left alone: it may be a run being created right now (its owner file is written just after the
// directory), and an empty directory costs nothing.
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
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(base, e.Name())
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		o, err := ParseOwner(strings.TrimSpace(string(b)))
		if err != nil || o.Alive(machine) {
			continue
		}
		if err := endRecordedSessions(dir); err != nil {
			// Kept, so that the next sweep tries again.
			errs = append(errs, fmt.Errorf("end what run %s of dead process %s left: %w", e.Name(), o, err))
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("remove %s (run of dead process %s): %w", dir, o, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// sessionsFile lists, one "<session id> <leader start time>" a line, the session of every start
// of every host of a run: what a sweep needs to find a dead run's leftover processes.
const sessionsFile = ".sessions"

// recordSession appends a host's new session to its run's list.
func recordSession(dir string, sid int) error {
	start, err := processStart(sid)
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
		if now, err := processStart(sid); err == nil && now != start {
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
