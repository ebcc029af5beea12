package simnode

import (
	"os/exec"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// ProcessTimerSlack is the timer slack (prctl(2) PR_SET_TIMERSLACK) of every simulated process:
// how late the kernel may fire its timers, to fire several at once. A Go runtime's monitor thread
// (sysmon) sleeps 20 µs at a time, fifty times over, each time its process wakes from idle; with
// hundreds of processes on two cores those sleeps were a third of all system calls and half the
// context switches of a run. 4 ms lets the kernel group them: a local 16-host run made 12,500
// sleeps instead of 33,700 and 40,000 context switches instead of 80,000, and used 15% less CPU.
// The simulation's own timers are a 5 ms poll at the least, its bounds are seconds: no outcome
// depends on 4 ms.
const ProcessTimerSlack = 4 * time.Millisecond

// spawner starts every child of this process from one OS thread, locked and never released:
// a child inherits the timer slack of the thread that forked it (every thread of the child is
// then cloned from its first), and Pdeathsig fires when that thread ends (prctl(2)), which a
// thread that lives as long as the process never does.
var spawner struct {
	once sync.Once
	reqs chan spawnReq
}

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

// startChild starts cmd from the spawner's thread.
func startChild(cmd *exec.Cmd) error {
	spawner.once.Do(func() {
		spawner.reqs = make(chan spawnReq)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread must outlive every child
			// A slack this thread cannot take leaves the children with the default: slower, not wrong.
			_ = unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(ProcessTimerSlack.Nanoseconds()), 0, 0, 0)
			for r := range spawner.reqs {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	spawner.reqs <- spawnReq{cmd: cmd, done: done}
	return <-done
}
