package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/widetp/widetp/fakestore"
	"github.com/widetp/widetp/harness"
	"github.com/widetp/widetp/harness/ipcdir"
	"github.com/widetp/widetp/internal/runtimes"
	"github.com/widetp/widetp/simnode"
)

// The programs a run starts on its hosts. They are subcommands of this binary, so that one
// installed widetp carries everything a run needs: the Docker runtime builds its FROM scratch
// image from this very binary (and the libraries it links), the local runtime executes it. They
// are listed apart in the help: a user never starts them by hand.
func init() {
	register(&command{
		name:    "node",
		summary: "one simulated vLLM host (started by the runtime on every node)",
		usage:   "node [--config FILE]",
		hidden:  true,
		run:     simnode.Command,
	})
	register(&command{
		name:    "store",
		summary: "the fake Mooncake store (started by the runtime as the store host)",
		usage:   "store [flags]",
		hidden:  true,
		run: func(args []string, stdout, stderr io.Writer) int {
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return fakestore.Command(ctx, args, stdout, stderr)
		},
	})
	register(&command{
		name:    "ipcls",
		summary: "list a directory as JSON (run inside a node's container for its /tmp)",
		usage:   "ipcls DIR",
		hidden:  true,
		run:     ipcdir.Command,
	})
	register(&command{
		name:    "idle",
		summary: "wait until stopped (the program of widetp bench's held floor)",
		usage:   "idle",
		hidden:  true,
		run:     idle,
	})
}

// idle says "idle" once it handles SIGTERM and SIGINT, then waits for one and exits 0: the hosts
// of the held floor (widetp bench) stay up as a run's do, until they are stopped.
func idle(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "widetp idle: unexpected arguments %q\n", args)
		return exitBadInput
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	fmt.Fprintln(stdout, runtimes.IdleLine)
	<-ctx.Done()
	return 0
}

// self is the binary the hosts of a run execute: this one, unless $WIDETP_BIN names another (the
// tests of this package run as widetp.test, which carries no node program).
func self() string {
	if p := os.Getenv(harness.EnvBinary); p != "" {
		return p
	}
	exe, err := os.Executable()
	if err != nil {
		// The harness then says that no binary was found, and how to name one.
		return ""
	}
	return exe
}
