package simnode

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// pyError is a Python exception a simulated process raises, in vLLM's words ("AssertionError",
// "ValueError: ...", "torch.distributed.DistStoreError: ...").
type pyError struct {
	// Exception is the traceback's last line.
	Exception string
	// Where names the step that raised it (the traceback's frame).
	Where string
}

func (e *pyError) Error() string { return e.Exception }

// exitCrashed is the exit status of a Python process that dies of an uncaught exception.
const exitCrashed = 1

// exitCode is the status a process ends with when it raises exc: SystemExit carries its own
// (argparse's "SystemExit: 2 (...)"), every other exception is 1.
func exitCode(exc string) int {
	if rest, ok := strings.CutPrefix(exc, "SystemExit: "); ok {
		num, _, _ := strings.Cut(rest, " ")
		if n, err := strconv.Atoi(num); err == nil {
			return n
		}
	}
	return exitCrashed
}

// writeTraceback prints a Python-style traceback whose last line is the exception, as a crashing
// vLLM process leaves on stderr.
func writeTraceback(w io.Writer, id string, e *pyError) {
	fmt.Fprintf(w, "(%s pid=%d) Traceback (most recent call last):\n  File \"simnode/%s\", in %s\n%s\n",
		id, os.Getpid(), id, e.Where, e.Exception)
}

// signalNames are the signals a supervisor or a fault sends; others print as SIG<n>.
var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT", syscall.SIGABRT: "SIGABRT",
	syscall.SIGKILL: "SIGKILL", syscall.SIGSEGV: "SIGSEGV", syscall.SIGPIPE: "SIGPIPE", syscall.SIGTERM: "SIGTERM",
	syscall.SIGUSR1: "SIGUSR1", syscall.SIGUSR2: "SIGUSR2",
}

func signalName(s syscall.Signal) string {
	if n, ok := signalNames[s]; ok {
		return n
	}
	return "SIG" + strconv.Itoa(int(s))
}
