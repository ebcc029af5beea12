package simnode_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/widetp/widetp/internal/procfs"
	"github.com/widetp/widetp/simnode"
)

// A simulated process waits for its parent's control lines and for its own children's exits in
// the Go runtime's poller, never in a blocking read(2) of its stdin or a waitid(2): either holds an
// OS thread for the whole life of the process, and a 64-node run has 608 of them on two cores
// (simnode/sysproc_linux.go). Every thread of every process of a running wide-TP replica is
// looked at where it is blocked (procfs.Calls, from /proc/PID/task/TID/syscall).
func TestProcessesWaitForControlAndChildrenWithoutAThread(t *testing.T) {
	o := deployment{profile: "main", model: moe, gpus: 2, hosts: wideTP(true, true)}.run(t)
	looked, parents := 0, 0
	for name, n := range o.nodes {
		for _, pid := range descendants(t, n.cmd.Process.Pid) {
			looked++
			if len(descendants(t, pid)) > 0 {
				parents++
			}
			calls, err := procfs.Calls(pid)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range calls {
				switch {
				case c.NR == syscall.SYS_WAITID:
					t.Errorf("host %s: process %d has thread %d blocked in waitid(2)", name, pid, c.TID)
				case c.NR == syscall.SYS_READ && c.Arg0 == 0:
					t.Errorf("host %s: process %d has thread %d blocked reading its stdin", name, pid, c.TID)
				}
			}
		}
	}
	// Every process of the replica was looked at, parents among them: the head's API server, its
	// engine core and the follower's launcher have children.
	if want := len(o.predicted); looked < want || parents < 3 {
		t.Errorf("looked at %d processes (%d with children), want the %d the model starts, 3 with children", looked, parents, want)
	}
	for name, n := range o.nodes {
		if code := n.stop(); code != 0 {
			t.Errorf("node %s exit %d after SIGTERM", name, code)
		}
	}
}

// descendants are the processes below pid (procfs.All).
func descendants(t *testing.T, pid int) []int {
	t.Helper()
	procs, err := procfs.All()
	if err != nil {
		t.Fatal(err)
	}
	children := map[int][]int{}
	for _, p := range procs {
		children[p.PPID] = append(children[p.PPID], p.PID)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// Every simulated process has the timer slack simnode gives its processes
// (simnode.ProcessTimerSlack) from its fork on: the Go runtime's monitor thread, which the slack
// is for, is cloned from the process's first thread and inherits its slack (the kernel shows the
// first thread's, in /proc/PID/timerslack_ns). The node program itself is the runtime's to start.
// Every one also starts with glibc capped at one malloc arena (its threads would each make one).
func TestEveryProcessHasTheTimerSlack(t *testing.T) {
	o := deployment{profile: "main", model: moe, gpus: 2, hosts: wideTP(true, true)}.run(t)
	want := strconv.FormatInt(simnode.ProcessTimerSlack.Nanoseconds(), 10)
	looked := 0
	for name, n := range o.nodes {
		for _, pid := range descendants(t, n.cmd.Process.Pid) {
			b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "timerslack_ns"))
			if err != nil {
				t.Fatal(err)
			}
			looked++
			if got := strings.TrimSpace(string(b)); got != want {
				t.Errorf("host %s: process %d: timer slack %s ns, want %s", name, pid, got, want)
			}
			// glibc reads its tunables from the environment the process started with.
			env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(strings.Split(string(env), "\x00"), "GLIBC_TUNABLES=glibc.malloc.arena_max=1") {
				t.Errorf("host %s: process %d runs without the one-arena tunable", name, pid)
			}
		}
	}
	if want := len(o.predicted); looked < want {
		t.Errorf("looked at %d processes, want the %d the model starts", looked, want)
	}
	for name, n := range o.nodes {
		if code := n.stop(); code != 0 {
			t.Errorf("node %s exit %d after SIGTERM", name, code)
		}
	}
}
