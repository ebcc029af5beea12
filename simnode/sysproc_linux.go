package simnode

import "syscall"

// sysProcAttr makes a child die with its parent (Pdeathsig: no simulated process outlives the
// process that started it, hence none outlives its supervisor) and, for a supervisor's children,
// lead a process group of its own, so that the supervisor can signal one command's whole tree and
// a terminal's Ctrl-C reaches the supervisor alone, which then tears down in order.
func sysProcAttr(setpgid bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: setpgid}
}
