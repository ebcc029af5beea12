package simnode

import (
	"errors"
	"os"
	"syscall"
	"unsafe"
)

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

// Linux's pidfd_open(2) and waitid(2) idtype P_PIDFD.
const (
	sysPidfdOpen  = 434
	pidfdNonblock = syscall.O_NONBLOCK
	pPIDFD        = 3
)

// waitExited returns once the child pid has exited, without reaping it (the caller's
// exec.Cmd.Wait does that, at once): it waits on a pidfd of its own in the runtime's poller, where
// a Wait would keep an OS thread in waitid(2) for as long as the child lives — a thread per child
// of every parent. errNoPidfd says the kernel cannot (pidfd_open is Linux 5.3, PIDFD_NONBLOCK 5.10):
// the caller then just waits.
func waitExited(pid int) error {
	fd, _, e := syscall.Syscall(sysPidfdOpen, uintptr(pid), pidfdNonblock, 0)
	if e != 0 {
		return errNoPidfd
	}
	f := os.NewFile(fd, "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return errNoPidfd
	}
	var werr error
	err = rc.Read(func(fd uintptr) bool {
		// siginfo_t: si_pid is the int32 at byte 16 on 64-bit Linux; waitid leaves it 0 while the
		// child runs (WNOHANG), and WNOWAIT leaves an exited child to be reaped.
		var info [128]byte
		_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pPIDFD, fd, uintptr(unsafe.Pointer(&info[0])),
			syscall.WEXITED|syscall.WNOHANG|syscall.WNOWAIT, 0, 0)
		switch {
		case e == syscall.EINTR || e == syscall.EAGAIN:
			return false
		case e != 0:
			werr = e
			return true
		}
		return *(*int32)(unsafe.Pointer(&info[16])) != 0
	})
	if err != nil {
		return errNoPidfd
	}
	if werr != nil {
		return errNoPidfd
	}
	return nil
}

var errNoPidfd = errors.New("no pidfd to wait on")
