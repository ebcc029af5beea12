//go:build linux

// Package childexit waits for a child process to exit without reaping it: while the child is a
// zombie its pid cannot be handed out again, and the caller reaps it afterwards (exec.Cmd.Wait,
// os.Process.Wait), at once. The simulated processes of a node wait on their children this way,
// and the local runtime on its hosts' programs.
package childexit

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// Wait returns once child pid has exited, leaving it to be reaped. It waits on a pidfd in the Go
// runtime's poller, where a blocking waitid(2) would hold an OS thread for as long as the child
// lives: a thread per child of every parent, and a run has hundreds of parents on two cores. Where
// the kernel has no pidfd to poll (pidfd_open is Linux 5.3, PIDFD_NONBLOCK 5.10; a seccomp profile
// may refuse it), it blocks in waitid(2) instead. The error is waitid's (ECHILD: pid is not a child
// of this process, or was reaped already).
func Wait(pid int) error {
	if err, polled := poll(pid); polled {
		return err
	}
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// poll waits on a pidfd of pid in the poller; polled is false when it could not.
func poll(pid int) (err error, polled bool) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return nil, false
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, false
	}
	var werr error
	err = rc.Read(func(fd uintptr) bool {
		// WNOHANG: a child still running leaves si_signo 0; WNOWAIT leaves an exited child to be
		// reaped.
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		switch {
		case errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN):
			return false
		case err != nil:
			werr = err
			return true
		}
		return info.Signo != 0
	})
	if err != nil {
		// The pidfd is not pollable here: wait the blocking way.
		return nil, false
	}
	return werr, true
}
