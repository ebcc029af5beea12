package simnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/widetp/widetp/fakestore/api"
	"github.com/widetp/widetp/fakestore/client"
	"github.com/widetp/widetp/internal/nodeapi"
	"github.com/widetp/widetp/simnode/pace"
	"github.com/widetp/widetp/vllm"
)

// Exit codes of `simnode node`.
const (
	// ExitOK: every process ended cleanly, or as the teardown asked.
	ExitOK = 0
	// ExitCrashed: at least one simulated process crashed (its record says how).
	ExitCrashed = 1
	// ExitBadInput: the node's config or environment is unusable.
	ExitBadInput = 2
	// ExitInfra: the store was unreachable at start, or a process could not be started.
	ExitInfra = 3
)

// ReadyLine starts the line a node prints on stdout once the store answered and its plan is made,
// before it waits at the start gate or starts any process (the harness waits for it, then opens
// the gate): "simnode: node <host> up: <n> commands".
const ReadyLine = nodeapi.NodeReady

// NodeOptions are the parts of a node's run that are not its config.
type NodeOptions struct {
	// Executable is the simnode binary each process re-executes (default: os.Executable()).
	Executable string
	// Environ is the environment the model's env is filtered from (default: os.Environ()).
	Environ []string
	Stdout  io.Writer
	Stderr  io.Writer
	// Signals, when set, replaces the SIGTERM/SIGINT subscription (tests drive teardown with it).
	Signals <-chan os.Signal
}

// teardownBound is how long a node gives its processes to stop after forwarding SIGTERM before it
// kills them: each process posts its exit and unregisters from the store, and waits for its own
// children first, so a few store round trips per level.
func teardownBound(t Timeouts) time.Duration { return 8*time.Duration(t.Store) + drainBound }

// RunNode runs one simulated host until all its processes have exited: it checks the store, plans
// the node with the vLLM model, runs the bind sequencer, starts one process tree per command, and
// forwards SIGTERM/SIGINT to them for a clean teardown. It returns the node's exit code; the error
// says why when the code is not ExitOK or ExitCrashed.
func RunNode(ctx context.Context, cfg *Config, rt Runtime, opts NodeOptions) (int, error) {
	if opts.Stdout == nil {
		opts.Stdout = os.Stdout
	}
	if opts.Stderr == nil {
		opts.Stderr = os.Stderr
	}
	if opts.Environ == nil {
		opts.Environ = os.Environ()
	}
	if opts.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return ExitInfra, fmt.Errorf("node %s: find own executable: %w", cfg.Host, err)
		}
		opts.Executable = exe
	}
	sigs := opts.Signals
	if sigs == nil {
		ch := make(chan os.Signal, 2)
		signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
		defer signal.Stop(ch)
		sigs = ch
	}
	log := slog.New(slog.NewTextHandler(opts.Stderr, nil)).With("host", cfg.Host)

	store, err := newStoreClient(cfg.Store, rt, client.WithRetries(0))
	if err != nil {
		return ExitBadInput, fmt.Errorf("node %s: %w", cfg.Host, err)
	}
	if err := waitStore(ctx, store, cfg); err != nil {
		return ExitInfra, fmt.Errorf("node %s: %w", cfg.Host, err)
	}

	plan, err := planNode(cfg, opts.Environ)
	if err != nil {
		return ExitBadInput, fmt.Errorf("node %s: %w", cfg.Host, err)
	}

	// The sequencer's socket lives in the host's private directory when it has one, so that a
	// killed node leaves nothing outside it.
	if rt.IPCRoot != "" {
		if err := os.MkdirAll(rt.IPCRoot, 0o755); err != nil {
			return ExitInfra, fmt.Errorf("node %s: ipc root: %w", cfg.Host, err)
		}
	}
	dir, err := os.MkdirTemp(rt.IPCRoot, "simnode-")
	if err != nil {
		return ExitInfra, fmt.Errorf("node %s: sequencer directory: %w", cfg.Host, err)
	}
	defer os.RemoveAll(dir)
	seq, err := newSequencer(plan, filepath.Join(dir, "seq.sock"))
	if err != nil {
		return ExitInfra, fmt.Errorf("node %s: %w", cfg.Host, err)
	}
	defer seq.close()
	// A command started again by a control request binds in an order of its own, among its own
	// processes (the others bound long ago): it gets a sequencer over its plan alone.
	seqs := &commandSequencers{main: seq, dir: dir, plan: plan, of: map[string]*sequencer{}}
	defer seqs.close()

	var tearingDown sync.Mutex
	teardown := false
	isTeardown := func() bool {
		tearingDown.Lock()
		defer tearingDown.Unlock()
		return teardown
	}
	spec := procSpec{Host: cfg.Host, Runtime: rt, Store: cfg.Store, Timeouts: cfg.Timeouts, Seed: seedNumber(cfg.Seed), Sequencer: seq.ln.Addr().String()}
	fam := newFamily(familyConfig{
		exe:     opts.Executable,
		setpgid: true,
		spec: func(p *vllm.ProcessPlan) procSpec {
			s := spec
			s.Plan = p
			s.Sequencer = seqs.addr(p.Identity.ID)
			for _, st := range cfg.Steals {
				if st.Process == p.Identity.ID {
					s.Steal = append(s.Steal, st.Channel)
				}
			}
			return s
		},
		post:     store.PostReport,
		exited:   seqs.exited,
		stderr:   opts.Stderr,
		log:      log,
		expected: isTeardown,
	})
	fmt.Fprintf(opts.Stdout, "%s%s up: %d commands\n", ReadyLine, cfg.Host, len(plan.Commands))
	if cfg.Gate {
		if done, err := waitGate(ctx, store, cfg, sigs, log); done {
			return ExitOK, nil
		} else if err != nil {
			return ExitInfra, fmt.Errorf("node %s: %w", cfg.Host, err)
		}
	}

	var startErr error
	started := 0
	failedStart := map[string]bool{}
	for _, top := range plan.Commands {
		if _, err := fam.start(top); err != nil {
			startErr = errors.Join(startErr, err)
			seq.exited(top.Identity.ID)
			failedStart[top.Identity.ID] = true
			continue
		}
		started++
	}
	// The node's status on the store tells a harness when nothing more happens here by itself.
	status := newStatusPoster(store, time.Duration(cfg.Timeouts.Store), unsettledGap, log)
	defer status.close()
	acts := 0
	postStatus := func() {
		st := nodeStatus(cfg.Host, plan, fam.view(), failedStart)
		st.Acts = acts
		status.update(st)
	}
	postStatus()

	// The control socket (ctl.go): kill or restart one process on request.
	ctlLn, err := net.Listen("unix", filepath.Join(dir, ctlSocket))
	if err != nil {
		return ExitInfra, fmt.Errorf("node %s: control socket: %w", cfg.Host, err)
	}
	ctlDone := make(chan struct{})
	defer func() { close(ctlDone); ctlLn.Close() }()
	calls := make(chan ctlCall)
	go serveCtl(ctlLn, calls, ctlDone)
	var tops []string
	for _, top := range plan.Commands {
		tops = append(tops, top.Identity.ID)
	}
	var pending []*pendingAct
	// A host whose processes a control request ended stays up, as the machine would, until the
	// harness tears it down; without requests the node ends with its last process, as before.
	controlled := false

	var bound <-chan time.Time
	for len(fam.live()) > 0 || len(pending) > 0 || (controlled && !isTeardown()) {
		postStatus()
		select {
		case <-fam.events:
		case <-fam.changed:
		case call := <-calls:
			if isTeardown() {
				call.reply <- CtlReply{Error: "the node is tearing down"}
				break
			}
			var act *pendingAct
			var err error
			switch call.req.Op {
			case CtlKill:
				act, err = ctlKill(fam, cfg.Host, call.req.Process)
			case CtlRestart:
				var cur *child
				if cur, err = ctlRestartTarget(fam, tops, cfg.Host, call.req.Process); err == nil {
					act = &pendingAct{old: cur}
					if cur != nil && !cur.exitedNow() {
						// The command's whole tree: its top leads a process group of its own.
						act.pid = cur.cmd.Process.Pid
						if err = syscall.Kill(-act.pid, syscall.SIGKILL); errors.Is(err, syscall.ESRCH) {
							err = nil
						}
					}
				}
			default:
				err = fmt.Errorf("unknown control operation %q (kill or restart)", call.req.Op)
			}
			if err != nil {
				call.reply <- CtlReply{Error: err.Error()}
				break
			}
			act.call = call
			controlled = true
			log.Info("control request", "op", call.req.Op, "process", call.req.Process, "pid", act.pid)
			pending = append(pending, act)
		case s := <-sigs:
			tearingDown.Lock()
			first := !teardown
			teardown = true
			tearingDown.Unlock()
			if first {
				log.Info("tearing down", "signal", signalName(s.(syscall.Signal)))
				fam.signal(syscall.SIGTERM)
				bound = time.After(teardownBound(cfg.Timeouts))
			}
		case <-ctx.Done():
			tearingDown.Lock()
			teardown = true
			tearingDown.Unlock()
			fam.signal(syscall.SIGTERM)
			bound = time.After(teardownBound(cfg.Timeouts))
			ctx = context.Background()
		case <-bound:
			log.Warn("processes did not stop in time; killing them", "bound", teardownBound(cfg.Timeouts))
			fam.signal(syscall.SIGKILL)
			bound = time.After(drainBound)
		}
		pending = carryOut(pending, fam, seqs, plan, failedStart, isTeardown(), &acts, postStatus)
	}
	for _, act := range pending {
		act.call.reply <- CtlReply{Error: "the node program is ending"}
	}
	for {
		select {
		case <-fam.events:
			continue
		default:
		}
		break
	}
	postStatus()
	if startErr != nil {
		return ExitInfra, fmt.Errorf("node %s: %w", cfg.Host, startErr)
	}
	var crashed []string
	for _, r := range fam.records() {
		if r.Crashed() {
			crashed = append(crashed, r.ID)
		}
	}
	if len(crashed) > 0 {
		return ExitCrashed, fmt.Errorf("node %s: crashed: %s", cfg.Host, strings.Join(crashed, ", "))
	}
	return ExitOK, nil
}

// carryOut finishes the control requests whose process is gone: a kill once the node saw the
// process exit, a restart once the command's old tree exited (its command then starts again). It
// returns the requests still waiting.
func carryOut(pending []*pendingAct, fam *family, seqs *commandSequencers, plan *vllm.NodePlan, failedStart map[string]bool, teardown bool, acts *int, post func()) []*pendingAct {
	var rest []*pendingAct
	for _, act := range pending {
		req := act.call.req
		var rep CtlReply
		switch {
		case teardown:
			rep = CtlReply{Error: "the node is tearing down"}
		case req.Op == CtlKill:
			if fam.phase(req.Process) != PhaseExited {
				rest = append(rest, act)
				continue
			}
			*acts++
			rep = CtlReply{OK: true, Acts: *acts, Detail: fmt.Sprintf("SIGKILL to %s (pid %d); it exited", req.Process, act.pid)}
		case req.Op == CtlRestart:
			if act.old != nil && !act.old.exitedNow() {
				rest = append(rest, act)
				continue
			}
			if act.old != nil {
				fam.forget(act.old)
			}
			var top *vllm.ProcessPlan
			for _, t := range plan.Commands {
				if t.Identity.ID == req.Process {
					top = t
				}
			}
			delete(failedStart, req.Process)
			if err := seqs.renew(top); err != nil {
				rep = CtlReply{Error: fmt.Sprintf("start %s again: %v", req.Process, err)}
				break
			}
			c, err := fam.start(top)
			if err != nil {
				failedStart[req.Process] = true
				rep = CtlReply{Error: fmt.Sprintf("start %s again: %v", req.Process, err)}
				break
			}
			*acts++
			detail := fmt.Sprintf("started %s again (pid %d)", req.Process, c.cmd.Process.Pid)
			if act.pid > 0 {
				detail = fmt.Sprintf("SIGKILL to the process group of %s (pid %d); ", req.Process, act.pid) + detail
			}
			rep = CtlReply{OK: true, Acts: *acts, Detail: detail}
		}
		if rep.OK {
			post()
		}
		act.call.reply <- rep
	}
	return rest
}

// storeFirstRetry and storeMaxRetry bound the pause between the start-up checks of a store that
// may still be starting (pace.Pause): the store starts in the nodes' round, anywhere in it.
const (
	storeFirstRetry = 20 * time.Millisecond
	storeMaxRetry   = 500 * time.Millisecond
)

// waitStore checks that the store's master and admin planes answer, retrying for the store
// timeout: a store that is down at start is a clear failure, never a hang.
func waitStore(ctx context.Context, store *client.Client, cfg *Config) error {
	bound := time.Duration(cfg.Timeouts.StoreStart)
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	attempts := 0
	var last error
	started := time.Now()
	for {
		attempts++
		_, err := store.ServiceReady(ctx)
		if err != nil {
			err = fmt.Errorf("master %s: %w", cfg.Store.Master, err)
		} else if _, err = store.Health(ctx); err != nil {
			err = fmt.Errorf("admin %s: %w", cfg.Store.Admin, err)
		}
		if err == nil {
			return nil
		}
		last = err
		t := time.NewTimer(pace.Pause(time.Since(started), storeFirstRetry, storeMaxRetry))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("store unreachable after %d attempts in %v: %w", attempts, bound, last)
		}
	}
}

// waitGate waits at the store's start gate (Config.Gate) until the harness opens it, for at most
// the gate bound. done is true when the node was told to stop first (SIGTERM, SIGINT or ctx): it
// started nothing, so it ends at once. A gate that stays shut is an error naming the bound.
func waitGate(ctx context.Context, store *client.Client, cfg *Config, sigs <-chan os.Signal, log *slog.Logger) (done bool, err error) {
	bound := time.Duration(cfg.Timeouts.Gate)
	gctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	opened := make(chan error, 1)
	go func() { opened <- store.WaitGate(gctx) }()
	select {
	case err := <-opened:
		if err == nil {
			return false, nil
		}
		if ctx.Err() != nil {
			log.Info("stopped at the start gate", "reason", ctx.Err())
			return true, nil
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return false, fmt.Errorf("the start gate stayed shut for %v: no harness opened it (POST %sgate on the store)", bound, api.TestPrefix)
		}
		return false, fmt.Errorf("start gate: %w", err)
	case s := <-sigs:
		log.Info("stopped at the start gate", "signal", signalName(s.(syscall.Signal)))
		return true, nil
	}
}

// planNode is the node's plan: the config's own, or the model's for its commands.
func planNode(cfg *Config, environ []string) (*vllm.NodePlan, error) {
	if cfg.Plan != nil {
		return cfg.Plan, nil
	}
	profile, err := parseProfile(cfg.Profile)
	if err != nil {
		return nil, err
	}
	gpus := cfg.GPUs
	if gpus == 0 {
		gpus = DefaultGPUs
	}
	self := vllm.Node{Host: cfg.Host, GPUs: gpus, Env: modelEnv(environ, cfg.Env), Commands: cfg.Commands}
	opts := vllm.Options{Model: vllm.Model{Name: cfg.Model.Name, MoE: cfg.Model.MoE}, Profile: profile, Seed: cfg.Seed}
	if len(cfg.Deployment) == 0 || !vllm.DialsPeers(self) {
		// Only a node whose processes dial another instance's advertised address needs the
		// others planned (a 64-node deployment would otherwise plan 64 nodes on each).
		return vllm.PlanNode(self, opts)
	}
	nodes := make([]vllm.Node, 0, len(cfg.Deployment))
	for _, n := range cfg.Deployment {
		if n.Host == cfg.Host {
			nodes = append(nodes, self)
			continue
		}
		g := n.GPUs
		if g == 0 {
			g = DefaultGPUs
		}
		nodes = append(nodes, vllm.Node{Host: n.Host, GPUs: g, Env: n.Env, Commands: n.Commands})
	}
	plans, err := vllm.PlanDeployment(nodes, opts)
	if err != nil {
		return nil, err
	}
	for _, np := range plans {
		if np.Host == cfg.Host {
			return np, nil
		}
	}
	return nil, fmt.Errorf("the deployment's plan has no node %q", cfg.Host)
}

// DefaultGPUs is a node's GPU count when its config gives none (the README's scenario default, gpus_per_node 8).
const DefaultGPUs = 8

// parseProfile reads the config's profile: a name ("pre-48061") or a vllm.Profile object; none is
// vLLM main.
func parseProfile(raw json.RawMessage) (vllm.Profile, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return vllm.ProfileNamed("main")
	}
	var name string
	if err := json.Unmarshal(raw, &name); err == nil {
		p, err := vllm.ProfileNamed(name)
		if err != nil {
			return p, fmt.Errorf("profile: %w", err)
		}
		return p, nil
	}
	var p vllm.Profile
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, fmt.Errorf("profile: want a profile name or a vllm.Profile object: %w", err)
	}
	return p, nil
}
