//go:build linux

package procfs

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// Rows follow proc(5): pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
// cmajflt utime stime cutime cstime priority nice num_threads itrealvalue starttime ...
func TestParse(t *testing.T) {
	tests := []struct {
		name, line string
		want       Stat
		wantErr    string
	}{
		{name: "plain", line: "10792 (cat) R 10781 10781 8403 0 -1 4194304 99 0 0 0 0 0 0 0 20 0 1 0 56828 3133440 381 18446744073709551615",
			want: Stat{PID: 10792, Comm: "cat", State: 'R', PPID: 10781, PGID: 10781, SID: 8403, Start: 56828}},
		{name: "command with spaces and parentheses", line: "77 (a) b (c)) T 1 70 60 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 777 0 0",
			want: Stat{PID: 77, Comm: "a) b (c)", State: 'T', PPID: 1, PGID: 70, SID: 60, Start: 777}},
		{name: "zombie", line: "9 (hostprobe) Z 1 9 9 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 12 0 0",
			want: Stat{PID: 9, Comm: "hostprobe", State: 'Z', PPID: 1, PGID: 9, SID: 9, Start: 12}},
		{name: "no command", line: "12 S 1 2 3", wantErr: "no (command name)"},
		{name: "garbage", line: "garbage", wantErr: "no (command name)"},
		{name: "bad pid", line: "x (a) S 1 2 3 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0", wantErr: "pid"},
		{name: "cut short", line: "12 (a) S 1 2", wantErr: "want a state letter and at least 19 more"},
		{name: "bad session", line: "12 (a) S 1 2 three 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0", wantErr: "field 6"},
		{name: "bad start time", line: "1 (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 notanumber 0", wantErr: "field 22"},
	}
	for _, tt := range tests {
		got, err := Parse(tt.line)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%s: got %+v, %v; want %+v", tt.name, got, err, tt.want)
		}
	}
}

func TestLiveAndStopped(t *testing.T) {
	for _, tc := range []struct {
		state         byte
		live, stopped bool
	}{{'R', true, false}, {'S', true, false}, {'D', true, false}, {'T', true, true}, {'t', true, true}, {'Z', false, false}, {'X', false, false}} {
		st := Stat{State: tc.state}
		if st.Live() != tc.live || st.Stopped() != tc.stopped {
			t.Errorf("state %c: live %v stopped %v, want %v %v", tc.state, st.Live(), st.Stopped(), tc.live, tc.stopped)
		}
	}
}

// Read and All see a child this test starts, as the kernel describes it: its parent, its own
// group (Setpgid), this process's session, and a start time no earlier than this process's.
func TestReadAndAllSeeAChild(t *testing.T) {
	self, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	st, err := Read(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if st.PPID != os.Getpid() || st.PGID != cmd.Process.Pid || st.SID != self.SID || st.Start < self.Start || !st.Live() {
		t.Errorf("child %+v: want parent %d, its own group, session %d, a start no earlier than %d, live", st, os.Getpid(), self.SID, self.Start)
	}
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range all {
		found = found || p.PID == st.PID && p.Start == st.Start && p.PPID == st.PPID
	}
	if !found {
		t.Errorf("All (%d processes) does not list the child %+v", len(all), st)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if _, err := Read(cmd.Process.Pid); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Read of a reaped child: %v, want an error wrapping os.ErrNotExist", err)
	}
}

// TestMemoryOfThisProcess: Pss and RSS read this test's own process; what it holds resident
// includes what it just touched, and its proportional share never exceeds what it holds. The
// bound is checked within one read of smaps_rollup (its Rss and Pss lines come from the same walk
// of the process's pages): VmRSS is a separate counter, read at another moment, which the kernel
// updates lazily, so Pss may exceed the RSS read just before it by the pages touched in between.
func TestMemoryOfThisProcess(t *testing.T) {
	held := make([]byte, 8<<20)
	for i := range held {
		held[i] = 1
	}
	rss, err := RSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if rss < 8<<10 {
		t.Errorf("RSS %d KiB, less than the 8 MiB just touched", rss)
	}
	pss, err := Pss(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if pss < 8<<10 {
		t.Errorf("Pss %d KiB, less than the 8 MiB just touched (and not shared)", pss)
	}
	path := "/proc/self/smaps_rollup"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	walkRSS, err := kibField(b, path, "Rss:")
	if err != nil {
		t.Fatal(err)
	}
	walkPss, err := kibField(b, path, "Pss:")
	if err != nil {
		t.Fatal(err)
	}
	if walkPss <= 0 || walkPss > walkRSS {
		t.Errorf("Pss %d KiB, want in (0, Rss %d KiB] of the same read of %s", walkPss, walkRSS, path)
	}
	runtime.KeepAlive(held)
	if _, err := Pss(-1); err == nil {
		t.Error("the Pss of a process that cannot exist read without an error")
	}
}
