//go:build linux

package childexit

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/widetp/widetp/internal/procfs"
	"golang.org/x/sys/unix"
)

// Wait returns once the child has exited and leaves it to be reaped: the Wait after it still
// reads the child's own exit status, for a child that exits while Wait waits and for one that had
// exited before.
func TestWaitLeavesTheExitToBeReaped(t *testing.T) {
	cmd, stdin := startReading(t, "read x; exit 3")
	done := make(chan error, 1)
	go func() { done <- Wait(cmd.Process.Pid) }()
	select {
	case err := <-done:
		t.Fatalf("Wait returned (%v) while the child still waits for its input", err)
	default:
	}
	stdin.Close()
	if err := <-done; err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if err := cmd.Wait(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 3 {
		t.Fatalf("the reap after Wait: %v, state %v; want exit 3", err, cmd.ProcessState)
	}

	gone := exec.Command("/bin/sh", "-c", "exit 5")
	if err := gone.Start(); err != nil {
		t.Fatal(err)
	}
	if err := Wait(gone.Process.Pid); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if err := Wait(gone.Process.Pid); err != nil {
		t.Fatalf("Wait on a child that had exited already: %v", err)
	}
	if gone.Wait(); gone.ProcessState.ExitCode() != 5 {
		t.Fatalf("the reap after Wait: exit %d, want 5", gone.ProcessState.ExitCode())
	}
	if err := Wait(gone.Process.Pid); !errors.Is(err, unix.ECHILD) {
		t.Fatalf("Wait on a reaped child: %v, want ECHILD", err)
	}
}

// Waiting on 16 children holds no thread of this process in waitid(2): every thread is looked at
// (procfs.Calls), again and again, until the children are let go.
func TestWaitHoldsNoThreadInWaitid(t *testing.T) {
	var cmds []*exec.Cmd
	var inputs []io.Closer
	done := make(chan error, 16)
	for range 16 {
		cmd, in := startReading(t, "read x")
		cmds, inputs = append(cmds, cmd), append(inputs, in)
		go func() { done <- Wait(cmd.Process.Pid) }()
	}
	for range 200 {
		calls, err := procfs.Calls(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range calls {
			if c.NR == syscall.SYS_WAITID {
				t.Fatalf("thread %d is blocked in waitid(2)", c.TID)
			}
		}
	}
	for i, in := range inputs {
		in.Close()
		if err := <-done; err != nil {
			t.Errorf("Wait: %v", err)
		}
		cmds[i].Wait()
	}
}

// startReading starts a shell running script, which reads a line from the returned stdin first:
// the child lives until the test closes it.
func startReading(t *testing.T, script string) (*exec.Cmd, io.WriteCloser) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, stdin
}
