// Package spawn starts child processes from one OS thread that lives as long as the process.
//
// Two things a child takes from the very thread that forked it, not from its parent process:
// Pdeathsig fires when that thread ends (prctl(2)), and Go ends a thread whose goroutine locked
// it and returned (golang/go#27505), so a child forked from an ordinary goroutine could be
// SIGKILLed whenever some unrelated code's locked thread went away; and the timer slack
// (PR_SET_TIMERSLACK), which the child's first thread, and every thread cloned from it, inherit.
// A Spawner's thread is locked and never released, and set up once before its first start.
package spawn

import (
	"os/exec"
	"runtime"
	"sync"
)

// Spawner starts commands on its own thread. The zero value is not usable: see New.
type Spawner struct {
	setup func()
	once  sync.Once
	reqs  chan req
}

type req struct {
	cmd  *exec.Cmd
	done chan error
}

// New returns a Spawner whose thread runs setup (if not nil) before its first start: what the
// thread sets for itself (a timer slack) every child then inherits.
func New(setup func()) *Spawner { return &Spawner{setup: setup} }

// Start starts cmd from the spawner's thread. Starting is a fork and an exec, milliseconds: one
// thread serializing every start costs nothing next to what a child then does.
func (s *Spawner) Start(cmd *exec.Cmd) error {
	s.once.Do(func() {
		s.reqs = make(chan req)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread must outlive every child
			if s.setup != nil {
				s.setup()
			}
			for r := range s.reqs {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	s.reqs <- req{cmd: cmd, done: done}
	return <-done
}
