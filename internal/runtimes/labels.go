package runtimes

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/widetp/widetp/internal/procfs"
)

// Labels every Docker resource the harness makes carries (README, "Runtimes"). They are
// the only way a later run can tell our leftovers from anything else on a shared engine.
const (
	// LabelRun names the run that made a container, network, image or volume.
	LabelRun = "io.widetp.run"
	// LabelOwner names the harness process that made it (see Owner): the sweep removes a leftover
	// only when that process is gone, so parallel runs (`ginkgo -p`) never remove each other's nodes.
	LabelOwner = "io.widetp.owner"
	// LabelHost is the node's host name, so `docker ps` and the artifacts read like the scenario.
	LabelHost = "io.widetp.host"
	// LabelContent is an image's content hash (the tag carries a prefix of it), also on the volume
	// that holds a copy of its binaries.
	LabelContent = "io.widetp.content"
)

// Owner identifies a harness process across PID reuse: the kernel recycles PIDs, but never a
// (PID, start time) pair within one boot, and the machine name keeps two machines sharing one
// engine (DOCKER_HOST) from judging each other's processes by their own process table.
type Owner struct {
	Machine string
	PID     int
	// Start is the process start time in clock ticks since boot (/proc/<pid>/stat field 22).
	Start uint64
}

// String is the value of LabelOwner: "<machine>/<pid>/<start>".
func (o Owner) String() string { return fmt.Sprintf("%s/%d/%d", o.Machine, o.PID, o.Start) }

// ParseOwner reads a LabelOwner value.
func ParseOwner(s string) (Owner, error) {
	// The machine name may not contain '/', so split from the right.
	i := strings.LastIndexByte(s, '/')
	if i < 0 {
		return Owner{}, fmt.Errorf("parse owner label %q: want <machine>/<pid>/<start>", s)
	}
	j := strings.LastIndexByte(s[:i], '/')
	if j <= 0 {
		return Owner{}, fmt.Errorf("parse owner label %q: want <machine>/<pid>/<start>", s)
	}
	pid, err := strconv.Atoi(s[j+1 : i])
	if err != nil || pid <= 0 {
		return Owner{}, fmt.Errorf("parse owner label %q: bad pid %q", s, s[j+1:i])
	}
	start, err := strconv.ParseUint(s[i+1:], 10, 64)
	if err != nil {
		return Owner{}, fmt.Errorf("parse owner label %q: bad start time %q", s, s[i+1:])
	}
	return Owner{Machine: s[:j], PID: pid, Start: start}, nil
}

// CurrentOwner is the Owner of this process.
func CurrentOwner() (Owner, error) {
	machine, err := os.Hostname()
	if err != nil {
		return Owner{}, fmt.Errorf("read host name for the owner label: %w", err)
	}
	pid := os.Getpid()
	start, err := ProcessStart(pid)
	if err != nil {
		return Owner{}, fmt.Errorf("read own start time for the owner label: %w", err)
	}
	return Owner{Machine: machine, PID: pid, Start: start}, nil
}

// ProcessStart is a process's start time (procfs.Stat.Start): with its pid, it names the process
// across pid reuse.
func ProcessStart(pid int) (uint64, error) {
	st, err := procfs.Read(pid)
	if err != nil {
		return 0, err
	}
	return st.Start, nil
}

// Alive reports whether o's process still runs. An owner on another machine is taken as alive: its
// process table is not ours to read, and removing a live run's nodes is worse than a leftover.
func (o Owner) Alive(machine string) bool {
	if o.Machine != machine {
		return true
	}
	start, err := ProcessStart(o.PID)
	return err == nil && start == o.Start
}

// orphaned decides whether a labelled resource is a leftover to sweep: it carries LabelRun and its
// owner is gone. A resource whose owner label is missing or unreadable was not made by a live
// harness (every live harness writes a valid one), so it is swept too.
func Orphaned(labels map[string]string, alive func(Owner) bool) bool {
	if _, ok := labels[LabelRun]; !ok {
		return false
	}
	o, err := ParseOwner(labels[LabelOwner])
	if err != nil {
		return true
	}
	return !alive(o)
}
