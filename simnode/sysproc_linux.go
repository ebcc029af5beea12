package simnode

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// sysProcAttr makes a child die with its parent (Pdeathsig: no simulated process outlives the
// process that started it, hence none outlives its supervisor) and, for a supervisor's children,
// lead a process group of its own, so that the supervisor can signal one command's whole tree and
// a terminal's Ctrl-C reaches the supervisor alone, which then tears down in order.
func sysProcAttr(setpgid bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: setpgid}
}

// pollableStdin is fd 0 in the runtime's poller: the control pipe a parent writes a process's spec
// and its shutdown to. os.Stdin reads a pipe with a blocking read, which keeps an OS thread in
// the kernel for the process's whole life and makes the scheduler hand its P to a new thread; a
// process waits on it from start to end, and a run has hundreds of them on two cores. It returns
// os.Stdin when fd 0 cannot be made non-blocking.
func pollableStdin() *os.File {
	if err := syscall.SetNonblock(0, true); err != nil {
		return os.Stdin
	}
	return os.NewFile(0, "control")
}

// waitExited returns once the child pid has exited, without reaping it (the caller's
// exec.Cmd.Wait does that, at once): it waits on a pidfd of its own in the runtime's poller, where
// a Wait would keep an OS thread in waitid(2) for as long as the child lives — a thread per child
// of every parent. errNoPidfd says the kernel cannot (pidfd_open is Linux 5.3, PIDFD_NONBLOCK 5.10,
// and a seccomp profile may refuse it): the caller then just waits.
func waitExited(pid int) error {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return errNoPidfd
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return errNoPidfd
	}
	var werr error
	err = rc.Read(func(fd uintptr) bool {
		// WNOHANG: a child still running leaves si_signo 0; WNOWAIT leaves an exited child to be
		// reaped by Wait.
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
	if err != nil || werr != nil {
		return errNoPidfd
	}
	return nil
}

var errNoPidfd = errors.New("no pidfd to wait on")
