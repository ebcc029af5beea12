package simnode

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/widetp/widetp/internal/childexit"
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/vllm"
)

// drainBound is how long a parent waits, after a child exited, for the rest of the child's status
// lines: the child wrote them before it exited, so they are already in the pipe unless a
// grandchild that outlived it still holds the pipe open.
const drainBound = 2 * time.Second

// member is what a parent knows of one process of its subtree, from the status lines.
type member struct {
	record *report.Process
	phase  Phase
	posted bool // the store accepted a record carrying this process's exit
}

// child is a started child process.
type child struct {
	plan    *vllm.ProcessPlan
	cmd     *exec.Cmd
	control io.WriteCloser
	cmu     sync.Mutex
	exited  chan struct{} // closed once the process was reaped and its status lines drained
	state   *os.ProcessState
}

func (c *child) id() string { return c.plan.Identity.ID }

// send writes a control line; a child that is gone cannot be told anything.
func (c *child) send(m controlMsg) {
	c.cmu.Lock()
	defer c.cmu.Unlock()
	b, _ := json.Marshal(m)
	c.control.Write(append(b, '\n'))
}

// childExit is a child that exited, as its parent's main loop learns it.
type childExit struct {
	child *child
	exit  report.Exit
	// failed: it exited with an error or was killed (not a clean shutdown).
	failed bool
}

// family starts and watches the children of one parent (a simulated process or the supervisor):
// it keeps the latest record of every process below, forwards status lines upward, and posts the
// exits that processes could not post themselves.
type family struct {
	familyConfig
	events chan childExit
	// changed is signalled (without blocking) whenever a status line or an exit arrives, for a
	// parent waiting on its children's phases.
	changed chan struct{}

	mu       sync.Mutex
	members  map[string]*member
	children []*child
	owner    map[string]*child // descendant id -> the child whose subtree holds it
}

// familyConfig is how a parent starts and reports its children.
type familyConfig struct {
	exe     string
	setpgid bool // the supervisor's children lead their own process groups
	spec    func(*vllm.ProcessPlan) procSpec
	post    func(context.Context, report.Process) error
	forward func(statusMsg) // to this parent's own parent; nil for the supervisor
	exited  func(id string) // tell the bind sequencer a process is gone
	stderr  io.Writer
	log     *slog.Logger
	// expected marks the exits this parent posts as asked for (the harness's teardown).
	expected func() bool
}

func newFamily(cfg familyConfig) *family {
	return &family{familyConfig: cfg, members: map[string]*member{}, owner: map[string]*child{},
		events: make(chan childExit, 64), changed: make(chan struct{}, 1)}
}

// processTunables caps a simulated process's glibc malloc arenas at one (see family.start).
const processTunables = "GLIBC_TUNABLES=glibc.malloc.arena_max=1"

// start starts one child and its watchers.
func (f *family) start(plan *vllm.ProcessPlan) (*child, error) {
	spec := f.spec(plan)
	spec.Runtime.Resolved = spec.Runtime.names.snapshot()
	specLine, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("start %s: encode spec: %w", plan.Identity.ID, err)
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: status pipe: %w", plan.Identity.ID, err)
	}
	cmd := exec.Command(f.exe, ProcessArgs...)
	cmd.Stdout = f.stderr
	cmd.Stderr = f.stderr
	cmd.ExtraFiles = []*os.File{statusW}
	// A simulated process idles once it is up: one P keeps its threads and per-P caches (and so
	// its resident memory, a target of the issue) small, and leaves the machine's cores to the
	// processes that are starting. One malloc arena: glibc would give each of its threads (cgo
	// makes them with pthread_create, which frees into a new arena) an arena of its own, a mapping,
	// its trimming and fresh pages each, some 40 of a process's 600 page faults.
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1", processTunables)
	cmd.SysProcAttr = sysProcAttr(f.setpgid)
	control, err := cmd.StdinPipe()
	if err != nil {
		statusR.Close()
		statusW.Close()
		return nil, fmt.Errorf("start %s: control pipe: %w", plan.Identity.ID, err)
	}
	if err := spawner.Start(cmd); err != nil {
		statusR.Close()
		statusW.Close()
		return nil, fmt.Errorf("start %s: %w", plan.Identity.ID, err)
	}
	statusW.Close()
	c := &child{plan: plan, cmd: cmd, control: control, exited: make(chan struct{})}
	f.mu.Lock()
	f.children = append(f.children, c)
	f.owner[plan.Identity.ID] = c
	f.mu.Unlock()
	// The spec is the first line of stdin; control lines may follow it.
	c.cmu.Lock()
	control.Write(append(specLine, '\n'))
	c.cmu.Unlock()

	drained := make(chan struct{})
	go func() {
		defer close(drained)
		f.read(c, statusR)
	}()
	go func() {
		// The exit is awaited in the poller (childexit); the Wait after it only reaps.
		childexit.Wait(c.cmd.Process.Pid)
		c.cmd.Wait()
		c.state = c.cmd.ProcessState
		t := time.NewTimer(drainBound)
		select {
		case <-drained:
			t.Stop()
		case <-t.C:
			statusR.Close()
			<-drained
		}
		statusR.Close()
		c.control.Close()
		ev := f.reap(c)
		close(c.exited)
		f.notify()
		f.events <- ev
	}()
	return c, nil
}

// read consumes a child's status lines until the pipe closes.
func (f *family) read(c *child, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var m statusMsg
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			f.log.Warn("bad status line from child", "child", c.id(), "err", err)
			continue
		}
		f.mu.Lock()
		mb := f.members[m.ID]
		if mb == nil {
			mb = &member{}
			f.members[m.ID] = mb
			f.owner[m.ID] = c
		}
		if m.Record != nil {
			mb.record = m.Record
			if m.Posted && m.Record.Exit != nil {
				mb.posted = true
			}
		}
		if m.Phase != "" {
			mb.phase = m.Phase
		}
		f.mu.Unlock()
		if f.forward != nil {
			f.forward(m)
		}
		f.notify()
	}
}

func (f *family) notify() {
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

// reap handles a child's exit: it posts the exit of every process of the child's subtree that did
// not post its own (the child itself, killed or unable to reach the store; its descendants, which
// die with it through Pdeathsig), tells the sequencer, and hands the exit to the main loop.
func (f *family) reap(c *child) childExit {
	exit := report.Exit{Code: c.state.ExitCode(), Expected: f.expected()}
	failed := !c.state.Success()
	if ws, ok := c.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		exit.Signal = signalName(ws.Signal())
		exit.Code = -int(ws.Signal()) // Python's returncode for a process killed by a signal
	}
	f.mu.Lock()
	var orphans []report.Process
	for id, mb := range f.members {
		if f.owner[id] != c || mb.posted || mb.record == nil {
			continue
		}
		rec := *mb.record
		if id == c.id() {
			e := exit
			if rec.Exit != nil && rec.Exit.Signal == "" && exit.Signal == "" {
				e.Error = rec.Exit.Error // it knew why it died but could not say so
			}
			rec.Exit = &e
		} else {
			rec.Exit = &report.Exit{Code: -int(syscall.SIGKILL), Signal: "SIGKILL", Expected: f.expected()}
		}
		orphans = append(orphans, rec)
		mb.posted = true
		mb.phase = PhaseExited
	}
	if mb := f.members[c.id()]; mb == nil && c.state != nil {
		// It died before its first status line: its plan's identity is all there is.
		rec := c.plan.Identity
		rec.PID = c.cmd.Process.Pid
		e := exit
		rec.Exit = &e
		orphans = append(orphans, rec)
		f.members[c.id()] = &member{record: &rec, phase: PhaseExited, posted: true}
	}
	f.mu.Unlock()
	for _, rec := range orphans {
		ctx, cancel := context.WithTimeout(context.Background(), drainBound)
		err := f.post(ctx, rec)
		cancel()
		if err != nil {
			f.log.Error("post exit of a child", "process", rec.ID, "err", err)
		}
		if f.forward != nil {
			f.forward(statusMsg{ID: rec.ID, Phase: PhaseExited, Record: &rec, Posted: err == nil})
		}
		f.exited(rec.ID)
	}
	f.exited(c.id())
	return childExit{child: c, exit: exit, failed: failed}
}

// phase returns the last phase a process reported.
func (f *family) phase(id string) Phase {
	f.mu.Lock()
	defer f.mu.Unlock()
	if mb := f.members[id]; mb != nil {
		return mb.phase
	}
	return ""
}

// record returns the latest record of a process below (nil when it sent none).
func (f *family) record(id string) *report.Process {
	f.mu.Lock()
	defer f.mu.Unlock()
	if mb := f.members[id]; mb != nil {
		return mb.record
	}
	return nil
}

// live returns the children that have not exited.
func (f *family) live() []*child {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*child
	for _, c := range f.children {
		select {
		case <-c.exited:
		default:
			out = append(out, c)
		}
	}
	return out
}

// records returns the latest record of every process below.
func (f *family) records() []report.Process {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []report.Process
	for _, mb := range f.members {
		if mb.record != nil {
			out = append(out, *mb.record)
		}
	}
	return out
}

// signal sends sig to every live child (or, for the supervisor, to its process group).
func (f *family) signal(sig syscall.Signal) {
	for _, c := range f.live() {
		pid := c.cmd.Process.Pid
		if f.setpgid {
			pid = -pid
		}
		if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			f.log.Warn("signal child", "child", c.id(), "signal", signalName(sig), "err", err)
		}
	}
}

// forget drops what the family knows of c's subtree, once c exited: its command starts again,
// and the new processes (with the same IDs) report afresh.
func (f *family) forget(c *child) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, o := range f.owner {
		if o == c {
			delete(f.owner, id)
			delete(f.members, id)
		}
	}
	delete(f.members, c.id())
}

// exitedNow reports whether c was reaped.
func (c *child) exitedNow() bool {
	select {
	case <-c.exited:
		return true
	default:
		return false
	}
}
