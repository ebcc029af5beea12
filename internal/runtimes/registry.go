package runtimes

import (
	"context"
	"sync"
)

// live holds the runtimes of this process that are not closed yet, so that a SIGINT or SIGTERM
// handler can close them all before the process exits: the CLI's handler calls CloseAll. (Without
// a handler the hosts still die with the process, through Pdeathsig, but their run directories
// stay until the next run's sweep.)
var live = struct {
	sync.Mutex
	rts map[Runtime]struct{}
}{rts: map[Runtime]struct{}{}}

func Register(rt Runtime) {
	live.Lock()
	defer live.Unlock()
	live.rts[rt] = struct{}{}
}

func Unregister(rt Runtime) {
	live.Lock()
	defer live.Unlock()
	delete(live.rts, rt)
}

// LiveRuntimes is how many runtimes of this process are open.
func LiveRuntimes() int {
	live.Lock()
	defer live.Unlock()
	return len(live.rts)
}

// CloseAll closes every runtime of this process that is still open, all at once, and joins their
// errors. A runtime leaves the registry when its Close succeeds, so CloseAll may be called again
// after a failure.
func CloseAll(ctx context.Context) error {
	live.Lock()
	steps := make([]func() error, 0, len(live.rts))
	for rt := range live.rts {
		steps = append(steps, func() error { return rt.Close(ctx) })
	}
	live.Unlock()
	return RunConcurrently(steps)
}
