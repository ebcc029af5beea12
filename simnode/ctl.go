package simnode

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/widetp/widetp/internal/nodeapi"
	"github.com/widetp/widetp/vllm"
)

// The node program's control socket: `widetp node ctl kill|restart ID`, run on the host (docker
// exec in a container, the host's environment locally), asks the node program to SIGKILL one of
// its processes, or to kill one command's process tree and start that command again, as an
// operator (or a supervisor such as Kubernetes) restarts one `vllm serve`. The socket is
// ctl.sock in the node's private directory (simnode-*/ under the host's /tmp); one request per
// connection, one JSON line each way. The reply comes once the node saw the process exit (kill)
// or started the command again (restart); the node's next status carries Acts, so a harness waits
// for a settled status with Acts at least the reply's.

// The control protocol's names, from the harness↔node contract.
const (
	CtlCommand = nodeapi.CtlCommand
	CtlKill    = nodeapi.CtlKill
	CtlRestart = nodeapi.CtlRestart
)

// ctlSocket is the control socket's name in the node's private directory.
const ctlSocket = "ctl.sock"

// ctlIOBound bounds reading a request and writing a reply on the control socket.
const ctlIOBound = 5 * time.Second

// CtlRequest and CtlReply are the control protocol's lines.
type (
	CtlRequest = nodeapi.CtlRequest
	CtlReply   = nodeapi.CtlReply
)

type ctlCall struct {
	req   CtlRequest
	reply chan CtlReply
}

// serveCtl accepts control connections until ln closes and hands each request to calls.
func serveCtl(ln net.Listener, calls chan<- ctlCall, done <-chan struct{}) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(ctlIOBound))
			var req CtlRequest
			line, err := bufio.NewReader(io.LimitReader(conn, 64<<10)).ReadBytes('\n')
			if err == nil {
				err = json.Unmarshal(line, &req)
			}
			var rep CtlReply
			if err != nil {
				rep = CtlReply{Error: fmt.Sprintf("bad control request: %v", err)}
			} else {
				call := ctlCall{req: req, reply: make(chan CtlReply, 1)}
				select {
				case calls <- call:
				case <-done:
					return
				}
				// The act itself is not bounded here: the node's loop bounds it (a kill ends
				// when the process exits; SIGKILL cannot be ignored).
				conn.SetDeadline(time.Time{})
				select {
				case rep = <-call.reply:
				case <-done:
					rep = CtlReply{Error: "the node program is ending"}
				}
				conn.SetDeadline(time.Now().Add(ctlIOBound))
			}
			b, _ := json.Marshal(rep)
			conn.Write(append(b, '\n'))
		}()
	}
}

// ctlUsage documents `widetp node ctl`.
const ctlUsage = `usage: widetp node ctl kill|restart PROCESS

Asks the node program of this host to act on one of its processes (the IDs widetp explain lists):
  kill     SIGKILL the process; what follows (its parent's reaction) is the node's simulation of vLLM
  restart  SIGKILL the process tree of the command PROCESS is the top process of, then start that
           command again with the same command line
It finds the node's control socket under $WIDETP_IPC_ROOT (default /tmp), prints the node's JSON reply
and exits 0 when the node did it, 1 when it refused (the reply says why), 2 on bad usage and 3 when no
node program answers.
`

// CtlMain is `widetp node ctl ARGS`.
func CtlMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprint(stdout, ctlUsage)
		return 0
	}
	if len(args) != 2 || (args[0] != CtlKill && args[0] != CtlRestart) || args[1] == "" {
		fmt.Fprintf(stderr, "widetp node ctl: want kill|restart PROCESS, got %q\n%s", args, ctlUsage)
		return ExitBadInput
	}
	root := os.Getenv(EnvIPCRoot)
	if root == "" {
		root = os.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rep, err := Ctl(ctx, root, CtlRequest{Op: args[0], Process: args[1]})
	if err != nil {
		fmt.Fprintf(stderr, "widetp node ctl: %v\n", err)
		return ExitInfra
	}
	b, _ := json.Marshal(rep)
	fmt.Fprintln(stdout, string(b))
	if !rep.OK {
		fmt.Fprintf(stderr, "widetp node ctl: %s\n", rep.Error)
		return ExitCrashed
	}
	return ExitOK
}

// Ctl sends one request to the node program whose private directory is under root (a host's
// /tmp) and returns its reply. Sockets of node programs that are gone (a killed node leaves its
// directory behind) refuse the connection and are skipped.
func Ctl(ctx context.Context, root string, req CtlRequest) (CtlReply, error) {
	socks, err := filepath.Glob(filepath.Join(root, "simnode-*", ctlSocket))
	if err != nil {
		return CtlReply{}, err
	}
	sort.Strings(socks)
	if len(socks) == 0 {
		return CtlReply{}, fmt.Errorf("no node program's control socket under %s (simnode-*/%s): is the node running on this host?", root, ctlSocket)
	}
	var errs []error
	for _, s := range socks {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "unix", s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		defer conn.Close()
		stop := context.AfterFunc(ctx, func() { conn.Close() })
		defer stop()
		b, _ := json.Marshal(req)
		if _, err := conn.Write(append(b, '\n')); err != nil {
			return CtlReply{}, fmt.Errorf("send to %s: %w", s, err)
		}
		line, err := bufio.NewReader(io.LimitReader(conn, 64<<10)).ReadBytes('\n')
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return CtlReply{}, fmt.Errorf("read the reply of %s: %w", s, err)
		}
		var rep CtlReply
		if err := json.Unmarshal(line, &rep); err != nil {
			return CtlReply{}, fmt.Errorf("reply of %s: %w", s, err)
		}
		return rep, nil
	}
	return CtlReply{}, fmt.Errorf("no node program answers under %s: %w", root, errors.Join(errs...))
}

// pendingAct is a control request the node's loop carries out over several turns.
type pendingAct struct {
	call ctlCall
	pid  int
	// old is the command's top process being replaced (restart); nil for a kill.
	old *child
}

// ctlKill starts a kill: SIGKILL to the process's pid, as the node's records know it.
func ctlKill(fam *family, host, id string) (*pendingAct, error) {
	rec := fam.record(id)
	if rec == nil {
		return nil, fmt.Errorf("host %s has no process %s (widetp explain lists the IDs)", host, id)
	}
	if rec.Exit != nil || fam.phase(id) == PhaseExited {
		return nil, fmt.Errorf("process %s on host %s has already exited", id, host)
	}
	if rec.PID <= 0 {
		return nil, fmt.Errorf("process %s on host %s reported no pid", id, host)
	}
	if err := syscall.Kill(rec.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return nil, fmt.Errorf("SIGKILL to %s (pid %d): %w", id, rec.PID, err)
	}
	return &pendingAct{pid: rec.PID}, nil
}

// ctlRestartTarget finds the live child a restart replaces: the request must name a command's
// top process (vLLM restarts nothing below it on its own).
func ctlRestartTarget(fam *family, tops []string, host, id string) (*child, error) {
	found := false
	for _, t := range tops {
		if t == id {
			found = true
		}
	}
	if !found {
		return nil, fmt.Errorf("%s is not the top process of a command on host %s (those are %s): vLLM restarts no process below a command's top on its own",
			id, host, strings.Join(tops, ", "))
	}
	var cur *child
	fam.mu.Lock()
	for _, c := range fam.children {
		if c.id() == id {
			cur = c // the latest start of the command
		}
	}
	fam.mu.Unlock()
	return cur, nil
}

// commandSequencers are a node's bind sequencers: the one of the whole plan, and one for each
// command a control request started again.
type commandSequencers struct {
	main *sequencer
	dir  string
	plan *vllm.NodePlan

	mu sync.Mutex
	of map[string]*sequencer // top process ID -> the sequencer of its latest start
	n  int
}

// topOf is the ID of the command's top process that id belongs to ("" when none).
func (c *commandSequencers) topOf(id string) string {
	for _, t := range c.plan.Commands {
		if tid := t.Identity.ID; id == tid || strings.HasPrefix(id, tid+"/") {
			return tid
		}
	}
	return ""
}

func (c *commandSequencers) get(id string) *sequencer {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.of[c.topOf(id)]; ok {
		return s
	}
	return c.main
}

// addr is the sequencer socket of process id.
func (c *commandSequencers) addr(id string) string { return c.get(id).ln.Addr().String() }

// exited tells process id's sequencer that it is gone.
func (c *commandSequencers) exited(id string) { c.get(id).exited(id) }

// renew gives the command of top a new sequencer, over its plan alone.
func (c *commandSequencers) renew(top *vllm.ProcessPlan) error {
	sub := *c.plan
	sub.Commands = []*vllm.ProcessPlan{top}
	c.mu.Lock()
	c.n++
	path := filepath.Join(c.dir, fmt.Sprintf("seq-%d.sock", c.n))
	c.mu.Unlock()
	s, err := newSequencer(&sub, path)
	if err != nil {
		return err
	}
	c.mu.Lock()
	old := c.of[top.Identity.ID]
	c.of[top.Identity.ID] = s
	c.mu.Unlock()
	if old != nil {
		old.close()
	}
	return nil
}

func (c *commandSequencers) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.of {
		s.close()
	}
}
