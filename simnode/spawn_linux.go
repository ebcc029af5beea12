package simnode

import "github.com/widetp/widetp/internal/spawn"

// ProcessTimerSlack is the timer slack of every simulated process (spawn.TimerSlack).
const ProcessTimerSlack = spawn.TimerSlack

// spawner starts every child of this process, from a thread with the timer slack, which the child
// and every thread of it inherit (package spawn).
var spawner = spawn.New(spawn.SetTimerSlack)
