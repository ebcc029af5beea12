// Package procfs reads what widetp uses of Linux's /proc (proc(5)). From /proc/<pid>/stat: a
// process's identity across pid reuse (its start time), its parent, process group and session,
// and its state; the local runtime finds a host's processes and signals them with it, the harness
// labels what it starts with its owner's start time, and the tests find leftovers and descendants.
// From status and smaps_rollup: a process's resident and proportional memory (widetp bench,
// simnode's benchmarks). From task/<tid>/syscall: the system call each thread is blocked in (the
// tests that check that a process holds no thread in a blocking wait).
package procfs

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/widetp/widetp/internal/ellipsis"
)

// Stat is what /proc/<pid>/stat says about one process.
type Stat struct {
	PID int
	// Comm is the command name (field 2), at most 15 bytes, possibly with spaces and parentheses.
	Comm string
	// State is proc(5)'s letter: R running, S sleeping, D disk sleep, T stopped, t tracing stop,
	// Z zombie, X dead.
	State byte
	// PPID, PGID and SID are the parent, the process group and the session (fields 4-6).
	PPID, PGID, SID int
	// Start is the start time in clock ticks after boot (field 22): with PID, it tells a process
	// from a later one that was given the same pid.
	Start uint64
}

// Live reports whether the process still runs (or is stopped): a zombie or a dead entry only
// waits to be reaped and holds nothing but its pid.
func (s Stat) Live() bool { return s.State != 'Z' && s.State != 'X' }

// Stopped reports whether the process is stopped (SIGSTOP, or a tracer's stop).
func (s Stat) Stopped() bool { return s.State == 'T' || s.State == 't' }

func (s Stat) String() string { return fmt.Sprintf("%d (%s, state %c)", s.PID, s.Comm, s.State) }

// Parse reads one /proc/<pid>/stat line. Field 2, the command name, is in parentheses and may
// itself hold spaces and ')', so the fields after it are counted from the last ')'.
func Parse(line string) (Stat, error) {
	open, end := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
	if open < 0 || end < open {
		return Stat{}, fmt.Errorf("parse /proc stat %q: no (command name)", ellipsis.Cut(line, 80))
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line[:open]))
	if err != nil {
		return Stat{}, fmt.Errorf("parse /proc stat %q: pid: %w", ellipsis.Cut(line, 80), err)
	}
	// After ") " come state (field 3), ppid, pgrp, session (6), ..., starttime (22).
	f := strings.Fields(line[end+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return Stat{}, fmt.Errorf("parse /proc stat %q: %d fields after the command name, want a state letter and at least 19 more", ellipsis.Cut(line, 80), len(f))
	}
	st := Stat{PID: pid, Comm: line[open+1 : end], State: f[0][0]}
	for i, p := range []*int{&st.PPID, &st.PGID, &st.SID} {
		if *p, err = strconv.Atoi(f[i+1]); err != nil {
			return Stat{}, fmt.Errorf("parse /proc stat %q: field %d: %w", ellipsis.Cut(line, 80), i+4, err)
		}
	}
	if st.Start, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return Stat{}, fmt.Errorf("parse /proc stat %q: field 22 (start time): %w", ellipsis.Cut(line, 80), err)
	}
	return st, nil
}

// Read reads process pid's stat. A process that is gone is an error wrapping os.ErrNotExist.
func Read(pid int) (Stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, err
	}
	return Parse(string(b))
}

// PIDs lists the processes in /proc, as a snapshot of a live table: any of them may be gone by
// the time it is read.
func PIDs() ([]int, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	pids := make([]int, 0, len(names))
	for _, n := range names {
		if pid, err := strconv.Atoi(n); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// All reads the stat of every process in /proc. A process that ends while it is read is left
// out (as is an entry that does not parse, which proc(5)'s format rules out).
func All() ([]Stat, error) {
	pids, err := PIDs()
	if err != nil {
		return nil, err
	}
	out := make([]Stat, 0, len(pids))
	for _, pid := range pids {
		if st, err := Read(pid); err == nil {
			out = append(out, st)
		}
	}
	return out, nil
}
