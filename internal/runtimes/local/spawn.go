//go:build linux

package local

import "github.com/widetp/widetp/internal/spawn"

// spawner starts every local host, so that a host's Pdeathsig is tied to a thread that ends only
// with the harness (package spawn). Its thread has the timer slack of the hosts' own processes
// (spawn.TimerSlack), which each host's program inherits.
var spawner = spawn.New(spawn.SetTimerSlack)
