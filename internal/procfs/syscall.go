package procfs

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/widetp/widetp/internal/ellipsis"
)

// Call is a thread blocked in a system call, as /proc/<pid>/task/<tid>/syscall shows it (proc(5)):
// the call's number (syscall.SYS_*) and its first argument (a file descriptor for read(2), the
// id type for waitid(2)).
type Call struct {
	TID  int
	NR   int
	Arg0 uint64
}

// Calls returns the system call each thread of process pid is blocked in. A thread that runs, that
// is blocked outside a system call (a page fault), or that ends while it is read is left out; the
// process's own end is an error wrapping os.ErrNotExist. Reading another process's calls takes
// what ptrace(2) would (root, or the same user without Yama's restriction).
func Calls(pid int) ([]Call, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []Call
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(dir + "/" + task.Name() + "/syscall")
		if err != nil {
			if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
				continue // the thread ended (before the open, or between it and the read)
			}
			return nil, err
		}
		c, blocked, err := parseCall(string(b))
		if err != nil {
			return nil, fmt.Errorf("%s/%d/syscall: %w", dir, tid, err)
		}
		if blocked {
			c.TID = tid
			out = append(out, c)
		}
	}
	return out, nil
}

// parseCall reads one syscall file: "running"; "-1 SP PC" (blocked outside a system call); or
// "NR ARG1 ... ARG6 SP PC" with the arguments in hexadecimal.
func parseCall(s string) (c Call, blocked bool, err error) {
	f := strings.Fields(s)
	if len(f) == 1 && f[0] == "running" {
		return Call{}, false, nil
	}
	if len(f) == 0 {
		return Call{}, false, fmt.Errorf("empty")
	}
	nr, err := strconv.Atoi(f[0])
	if err != nil {
		return Call{}, false, fmt.Errorf("%q: call number: %w", ellipsis.Cut(s, 80), err)
	}
	if nr < 0 {
		return Call{}, false, nil
	}
	if len(f) != 9 {
		return Call{}, false, fmt.Errorf("%q: %d fields, want the call number, 6 arguments, sp and pc", ellipsis.Cut(s, 80), len(f))
	}
	arg0, err := strconv.ParseUint(strings.TrimPrefix(f[1], "0x"), 16, 64)
	if err != nil {
		return Call{}, false, fmt.Errorf("%q: first argument: %w", ellipsis.Cut(s, 80), err)
	}
	return Call{NR: nr, Arg0: arg0}, true, nil
}
