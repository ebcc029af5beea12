package simnode

import (
	"os"
	"syscall"
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
