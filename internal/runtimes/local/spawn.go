//go:build linux

package local

import (
	"os/exec"
	"runtime"
	"sync"
)

// spawner starts every local host from one OS thread that lives as long as this process. Pdeathsig
// fires when the thread that forked the child ends, not the process (prctl(2)), and Go ends a
// thread whose goroutine locked it and returned (golang/go#27505): a host forked from an ordinary
// goroutine could be SIGKILLed in the middle of a run, whenever some unrelated code's locked
// thread went away. A locked goroutine that never returns makes "the parent thread" and "the
// harness process" end together.
var spawner struct {
	once sync.Once
	reqs chan spawnReq
}

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

// startPinned starts cmd on the spawner's thread. Starting is a fork and an exec: milliseconds,
// so one thread serializing every start of the process costs nothing next to a host's start-up.
func startPinned(cmd *exec.Cmd) error {
	spawner.once.Do(func() {
		spawner.reqs = make(chan spawnReq)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread must outlive every child
			for r := range spawner.reqs {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	spawner.reqs <- spawnReq{cmd: cmd, done: done}
	return <-done
}
