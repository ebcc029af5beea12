package simnode

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/widetp/widetp/fakestore/client"
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/simnode/lookup"
	"github.com/widetp/widetp/simnode/mooncake"
	"github.com/widetp/widetp/simnode/rendezvous"
	"github.com/widetp/widetp/vllm"
)

// Exit codes of `simnode process` outside a Python exception.
const (
	// exitBadSpec: the process could not read its spec (a bug in its parent, not in vLLM).
	exitBadSpec = 2
)

// RunProcess is one simulated vLLM process (the internal `simnode process` command): it reads its
// spec from stdin, writes status lines to status (fd 3, read by its parent), logs and tracebacks to
// stderr, executes its plan in vLLM's order and serves until told to stop. It returns the exit code.
func RunProcess(stdin io.Reader, status io.Writer, stderr io.Writer) int {
	dec := json.NewDecoder(stdin)
	var spec procSpec
	if err := dec.Decode(&spec); err != nil || spec.Plan == nil {
		if err == nil {
			err = errors.New("no plan")
		}
		fmt.Fprintf(stderr, "simnode process: read spec from stdin: %v\n", err)
		return exitBadSpec
	}
	// Signals are caught before anything starts, so that a teardown that races the start-up is
	// still a clean, reported exit.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	spec.Runtime = spec.Runtime.withNameCache()
	p := newProc(spec, status, stderr)
	return p.run(dec, sigs)
}

// proc is the state of one simulated process.
type proc struct {
	spec procSpec
	plan *vllm.ProcessPlan
	// readyRefusal is the exception a front end raises once its engines are up: its handshake
	// completed with an engine whose READY it refuses (rendezvous.Result.Late).
	readyRefusal string
	// remoteEngines are the engines of other hosts (or of other commands) on the handshakes this
	// front end served, by process ID: it serves only once each of them is up (waitEnginesUp).
	remoteEngines []string
	id            string
	log           *slog.Logger
	stderr        io.Writer
	store         *client.Client

	statusMu sync.Mutex
	status   io.Writer

	postMu sync.Mutex
	final  bool // the exit record was posted: later posts would hide it

	recMu sync.Mutex
	rec   report.Process

	seq *seqClient
	fam *family
	// tearingDown is set once the harness's teardown (a signal) reached this process: the exits
	// it then posts for its children were asked for too.
	tearingDown atomic.Bool

	// handshakes are the rendezvous sockets bound at StageHandshakeBind, by index in
	// plan.Rendezvous; joinRendezvous serves each barrier from its socket.
	handshakes map[int]*rendezvous.Listener

	// held are the addresses the process binds or opens (process_addresses.go).
	held addrHeld

	server  *lookup.Server
	lclient *lookup.Client
	mc      *mooncake.Client
	hbStop  context.CancelFunc
	hbDone  chan struct{}
}

func newProc(spec procSpec, status, stderr io.Writer) *proc {
	p := &proc{spec: spec, plan: spec.Plan, id: spec.Plan.Identity.ID, stderr: stderr, status: status}
	p.log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("host", spec.Host, "process", p.id)
	p.rec = spec.Plan.Identity
	p.rec.Addresses = vllm.AddressRecords(spec.Plan)
	p.rec.PID = os.Getpid()
	p.rec.Exit, p.rec.Lookup, p.rec.Ready = nil, nil, false
	return p
}

func (p *proc) timeouts() (rdv, lookupT, store time.Duration) {
	t := p.spec.Timeouts.WithDefaults()
	return time.Duration(t.Rendezvous), time.Duration(t.Lookup), time.Duration(t.Store)
}

// waitBound bounds the waits on other processes of the host (a bind turn, the serving phase, the
// children settling): each of them ends once some process joins its rendezvous and registers, or
// dies, so twice the rendezvous bound plus a few store round trips covers every legitimate case.
func (p *proc) waitBound() time.Duration {
	rdv, lk, st := p.timeouts()
	return 2*rdv + 4*st + lk
}

// update changes the record under its lock.
func (p *proc) update(f func(r *report.Process)) {
	p.recMu.Lock()
	defer p.recMu.Unlock()
	f(&p.rec)
}

// snapshot copies the record deep enough that later updates do not race its encoding.
func (p *proc) snapshot() report.Process {
	p.recMu.Lock()
	defer p.recMu.Unlock()
	r := p.rec
	r.Served = append([]string(nil), r.Served...)
	r.Rendezvous = append([]report.Rendezvous(nil), r.Rendezvous...)
	if r.Lookup != nil {
		l := *r.Lookup
		r.Lookup = &l
	}
	if r.Exit != nil {
		e := *r.Exit
		r.Exit = &e
	}
	r.Addresses = append([]report.Address(nil), r.Addresses...)
	for i := range r.Addresses {
		r.Addresses[i].Served = append([]string(nil), r.Addresses[i].Served...)
		r.Addresses[i].Ports = append([]int(nil), r.Addresses[i].Ports...)
	}
	if r.Hung != nil {
		h := *r.Hung
		r.Hung = &h
	}
	return r
}

// toParent writes one status line to the parent.
func (p *proc) toParent(m statusMsg) {
	p.statusMu.Lock()
	defer p.statusMu.Unlock()
	b, _ := json.Marshal(m)
	// A parent that is gone reads nothing; this process is about to die with it (Pdeathsig).
	p.status.Write(append(b, '\n'))
}

// publish posts the current record to the store and tells the parent. Posts are serialised so
// the store sees a process's records in order, and none follows its exit record. A failed post is
// logged, not fatal: reporting is the harness's side channel, not vLLM behaviour, and the next
// post carries the whole record again.
func (p *proc) publish(phase Phase) {
	p.postMu.Lock()
	defer p.postMu.Unlock()
	if p.final {
		return
	}
	rec := p.snapshot()
	_, _, st := p.timeouts()
	ctx, cancel := context.WithTimeout(context.Background(), st)
	err := p.store.PostReport(ctx, rec)
	cancel()
	if err != nil {
		p.log.Error("post report", "err", err)
	}
	if rec.Exit != nil {
		p.final = true
	}
	p.toParent(statusMsg{ID: p.id, Phase: phase, Record: &rec, Posted: err == nil})
}

// seed is this process's random source: the node's seed and the process id, so that a scenario
// run again draws the same ports and ids.
func (p *proc) seed() *rand.Rand { return vllm.ProcessRand(uint64(p.spec.Seed), p.id) }

// ending is why a process stops.
type ending struct {
	kind   endKind
	err    *pyError       // endCrash
	signal syscall.Signal // endTeardown
	failed []childExit    // endChildFailure, endStopOnChild
}

type endKind int

const (
	endNone endKind = iota
	endCrash
	endChildFailure
	endStopOnChild
	endTeardown
	endShutdown
)

func (p *proc) run(dec *json.Decoder, sigs <-chan os.Signal) int {
	_, _, st := p.timeouts()
	store, err := newStoreClient(p.spec.Store, p.spec.Runtime, client.WithBackoff(st/20))
	if err != nil {
		return p.die(&pyError{Exception: "RuntimeError: " + err.Error(), Where: "connect_store"})
	}
	p.store = store
	exe, err := os.Executable()
	if err != nil {
		return p.die(&pyError{Exception: "RuntimeError: " + err.Error(), Where: "start"})
	}
	p.fam = newFamily(familyConfig{
		exe:      exe,
		spec:     p.childSpec,
		post:     store.PostReport,
		forward:  p.toParent,
		exited:   func(id string) { p.seq.Exited(id) },
		stderr:   p.stderr,
		log:      p.log,
		expected: p.tearingDown.Load,
	})
	seq, err := dialSequencer(p.spec.Sequencer, p.id)
	if err != nil {
		return p.die(&pyError{Exception: "RuntimeError: " + err.Error(), Where: "start"})
	}
	p.seq = seq
	defer seq.Close()
	p.publish(PhaseStarted)

	control := make(chan string, 1)
	go func() {
		for {
			var m controlMsg
			if err := dec.Decode(&m); err != nil {
				control <- "eof" // the parent is gone
				return
			}
			if m.Op == opShutdown {
				control <- opShutdown
				return
			}
		}
	}()

	flowCtx, stopFlow := context.WithCancel(context.Background())
	defer stopFlow()
	flowDone := make(chan *pyError, 1)
	go func() { flowDone <- p.flow(flowCtx) }()

	var end ending
	flowRunning := true
	var failed []childExit
	for end.kind == endNone {
		select {
		case e := <-flowDone:
			flowRunning = false
			if e != nil {
				end = ending{kind: endCrash, err: e}
			}
		case ev := <-p.fam.events:
			if !ev.failed {
				continue
			}
			failed = append(failed, ev)
			switch {
			case p.plan.ChildFailure != "":
				end = ending{kind: endChildFailure}
			case p.plan.StopsOnChildFailure:
				end = ending{kind: endStopOnChild}
			}
		case s := <-sigs:
			p.tearingDown.Store(true)
			end = ending{kind: endTeardown, signal: s.(syscall.Signal)}
		case <-control:
			end = ending{kind: endShutdown}
		}
	}
	stopFlow()
	if flowRunning {
		// An exception the flow raised before it saw the cancellation is how this process ends:
		// the parent's shutdown or the signal came too late for it.
		if e := <-flowDone; e != nil {
			end = ending{kind: endCrash, err: e}
		}
	}
	end.failed = failed
	return p.finish(end, sigs)
}

// childSpec is the spec of one of this process's children: the same node, the child's plan.
func (p *proc) childSpec(plan *vllm.ProcessPlan) procSpec {
	s := p.spec
	s.Plan = plan
	return s
}

// die ends a process that could not even start its steps; it reports the exit when it can
// reach the store (its parent reports it otherwise).
func (p *proc) die(e *pyError) int {
	if p.store != nil {
		code := exitCode(e.Exception)
		p.update(func(r *report.Process) { r.Exit = &report.Exit{Code: code, Error: e.Exception} })
		p.publish(PhaseExited)
	}
	writeTraceback(p.stderr, p.id, e)
	return exitCode(e.Exception)
}

// crashAt returns the plan's exception if it is raised at stage st.
func (p *proc) crashAt(st vllm.Stage) *pyError {
	if c := p.plan.Crash; c != nil && c.Stage == st {
		return &pyError{Exception: c.Error, Where: string(st)}
	}
	return nil
}

// flow runs the start-up steps in vLLM's order. It returns the exception that ends the process, or
// nil once the process is ready (or when ctx was cancelled: the caller knows why).
func (p *proc) flow(ctx context.Context) *pyError {
	// Argument parsing and config validation come first; an engine core's run_engine_core checks
	// come before its executor starts any worker (vllm.StageEngineInit).
	if e := p.crashAt(vllm.StageConfig); e != nil {
		return e
	}
	// Address steps (process_addresses.go): a hung step parks the process until it is stopped.
	if hung, e := p.addressStage(ctx, vllm.StageConfig); hung || e != nil || ctx.Err() != nil {
		return parkIfHung(ctx, hung, e)
	}
	if e := p.crashAt(vllm.StageEngineInit); e != nil {
		return e
	}
	// An engine core starts its executor (its engine-init address steps, then its workers) only
	// once its handshakes and DP group are done (vllm.ProcessPlan.ChildrenAfterRendezvous); a
	// front end starts its engines first.
	late := p.plan.ChildrenAfterRendezvous
	if !late {
		if hung, e := p.addressStage(ctx, vllm.StageEngineInit); hung || e != nil || ctx.Err() != nil {
			return parkIfHung(ctx, hung, e)
		}
	}
	if e := p.bindHandshakes(ctx); e != nil || ctx.Err() != nil {
		return e
	}
	if !late {
		if e := p.startChildren(ctx); e != nil || ctx.Err() != nil {
			return e
		}
	}
	if e := p.joinRendezvous(ctx); e != nil || ctx.Err() != nil {
		return e
	}
	if late {
		if hung, e := p.addressStage(ctx, vllm.StageEngineInit); hung || e != nil || ctx.Err() != nil {
			return parkIfHung(ctx, hung, e)
		}
		if e := p.startChildren(ctx); e != nil || ctx.Err() != nil {
			return e
		}
	}
	if len(p.stepsAt(vllm.StageConnectorInit)) > 0 || p.crashAt(vllm.StageConnectorInit) != nil {
		// An engine core builds its scheduler-side connector and KV event publisher
		// (Scheduler.__init__, vllm/v1/core/sched/scheduler.py) only after its executor's workers
		// came up, whether that step binds something or fails; when one of the workers failed or
		// hung it never does (its own failure path ends it).
		if len(p.plan.Children) > 0 && !p.waitChildrenUp(ctx) {
			return p.park(ctx)
		}
		if hung, e := p.addressStage(ctx, vllm.StageConnectorInit); hung || e != nil || ctx.Err() != nil {
			return parkIfHung(ctx, hung, e)
		}
	}
	if e := p.crashAt(vllm.StageConnectorInit); e != nil {
		return e
	}
	if p.plan.RegistersSegment {
		if e := p.registerSegment(ctx); e != nil || ctx.Err() != nil {
			return e
		}
	}
	if p.plan.BindsLookup {
		if e := p.bindLookup(ctx); e != nil || ctx.Err() != nil {
			return e
		}
	}
	if p.plan.ConnectsLookup {
		p.lookup(ctx)
		if ctx.Err() != nil {
			return nil
		}
	}
	// A process serves once everything below it came up: vLLM's front end leaves
	// wait_for_engine_startup when its engines sent READY, which an engine core sends once its
	// executor's workers and its scheduler are up (vllm/v1/engine/core.py, vllm/v1/engine/utils.py).
	// When one of them failed its failure path ends this process; when one hung, this one waits
	// for ever as well. (A headless launcher, which serves nothing, waits for nobody.)
	if len(p.plan.Children) > 0 && (p.servesLater() || p.sendsReady()) && !p.waitDescendantsUp(ctx) {
		return p.park(ctx)
	}
	// The engines of other hosts send their READY over the handshake too; the front end does not
	// watch them (only its local processes' sentinels), so one that died or hung keeps it waiting.
	if len(p.remoteEngines) > 0 && !p.waitEnginesUp(ctx, p.remoteEngines) {
		if ctx.Err() != nil {
			return nil
		}
		return p.parkWaiting(ctx)
	}
	if p.readyRefusal != "" {
		// The front end refuses an engine's READY (vllm.HandshakeExpect.RefuseReady) there.
		return &pyError{Exception: p.readyRefusal, Where: "wait_for_engine_startup"}
	}
	if e := p.listenStage(ctx); e != nil || ctx.Err() != nil {
		return e
	}
	if p.dials() {
		// A request names the peer only once the deployment serves: the process is up for its
		// parent, and dials once every start-up bind of its host happened (or its binder died).
		p.publish(PhaseUp)
		if err := p.seq.HostBound(ctx, p.waitBound()); err != nil && ctx.Err() == nil {
			p.log.Warn("host's binds not all seen; dialling anyway", "err", err)
		}
	}
	p.connectAddresses(ctx)
	if ctx.Err() != nil {
		return nil
	}
	p.update(func(r *report.Process) { r.Ready = true })
	p.publish(PhaseReady)
	return nil
}

// startChildren starts the plan's children in order.
func (p *proc) startChildren(ctx context.Context) *pyError {
	for _, c := range p.plan.Children {
		if ctx.Err() != nil {
			return nil
		}
		if _, err := p.fam.start(c); err != nil {
			return &pyError{Exception: "RuntimeError: " + err.Error(), Where: "start_children"}
		}
	}
	return nil
}

func (p *proc) rendezvousConfig() rendezvous.Config {
	rdv, _, _ := p.timeouts()
	cfg := rendezvous.Config{Timeout: rdv, ListenIP: p.spec.Runtime.ListenIP, Resolve: p.spec.Runtime.resolver(), Forget: p.spec.Runtime.forget,
		StoppedWith: func(id string) bool { return sameCommand(id, p.id) }}
	if p.seq != nil {
		cfg.Relay = seqRelay{c: p.seq, bound: p.waitBound()}
	}
	return cfg
}

// bindHandshakes is vllm.StageHandshakeBind: the process binds the rendezvous it serves with
// BindsEarly, in its host's plan order (the sequencer's turn), and then waits for every other
// binder of the host to bind or die before it starts its children. A bind that fails is the
// process's own crash, with pyzmq's ZMQError as vLLM's front end raises it, not a failed barrier.
func (p *proc) bindHandshakes(ctx context.Context) *pyError {
	var early []int
	for i, rp := range p.plan.Rendezvous {
		if rp.BindsEarly && rp.Rank == 0 {
			early = append(early, i)
		}
	}
	if len(early) == 0 {
		return nil
	}
	const where = "launch_core_engines"
	if _, err := p.seq.HandshakeTurn(ctx, p.waitBound()); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return &pyError{Exception: "RuntimeError: " + err.Error(), Where: where}
	}
	cfg := p.rendezvousConfig()
	p.handshakes = map[int]*rendezvous.Listener{}
	var failed *pyError
	for _, i := range early {
		rp := p.plan.Rendezvous[i]
		l, err := rendezvous.Listen(ctx, rendezvous.Member{Kind: rp.Kind, Address: rp.Address, WorldSize: rp.WorldSize, Rank: rp.Rank, ID: p.id,
			Screen: screen(rp.Expect)}, cfg)
		if err != nil {
			failed = &pyError{Exception: bindErrorText(rp.Address, err), Where: where}
			break
		}
		p.handshakes[i] = l
	}
	// Told even when a bind failed: this process is about to die, and the next binder must not
	// wait for that.
	p.seq.HandshakeBound()
	if failed != nil {
		return failed
	}
	if err := p.seq.HandshakesBound(ctx, p.waitBound()); err != nil && ctx.Err() == nil {
		return &pyError{Exception: "RuntimeError: " + err.Error(), Where: where}
	}
	return nil
}

// screen is a front end's judgement of the HELLOs on the handshake it serves
// (vllm.HandshakeExpect.Refuse, vLLM's wait_for_engine_startup); nil when it expects nothing. When
// it refuses one, its own engines (Local) are stopped with it, and every other engine hears nothing
// more and gives up as vLLM's does. A READY it would refuse (RefuseReady: another parallel config
// hash) lets the handshake complete and is raised right after it (joinRendezvous).
func screen(x *vllm.HandshakeExpect) func([]byte) rendezvous.Screening {
	if x == nil {
		return nil
	}
	return func(raw []byte) rendezvous.Screening {
		var h vllm.EngineHello
		if err := json.Unmarshal(raw, &h); err != nil {
			return rendezvous.Screening{Refuse: "RuntimeError: unreadable HELLO on the handshake: " + err.Error(), Answer: vllm.HandshakeNoAnswer}
		}
		return rendezvous.Screening{Refuse: x.Refuse(h), Answer: vllm.HandshakeNoAnswer, Hold: h.Local, Late: x.RefuseReady(h)}
	}
}

// parkIfHung returns e, or, for a process whose step never returned, waits until it is stopped
// (vLLM's would spin for ever) and returns nil: the run loop knows why it stopped.
func parkIfHung(ctx context.Context, hung bool, e *pyError) *pyError {
	if hung {
		<-ctx.Done()
		return nil
	}
	return e
}

// bindErrorText is the exception of a failed handshake bind: pyzmq's ZMQError with libzmq's
// strerror of the socket error (vllm.ZMQBindError); anything that is no bind failure is a
// RuntimeError naming it.
func bindErrorText(address string, err error) string {
	var be *rendezvous.BindError
	if !errors.As(err, &be) {
		return "RuntimeError: " + err.Error()
	}
	var errno syscall.Errno
	if errors.As(be.Err, &errno) {
		if errno == syscall.EADDRINUSE {
			return vllm.ZMQBindError(address, vllm.AddressInUse)
		}
		// Go spells strerror in lower case; libc (and so pyzmq) capitalises it.
		msg := errno.Error()
		return vllm.ZMQBindError(address, strings.ToUpper(msg[:1])+msg[1:])
	}
	return vllm.ZMQBindError(address, be.Err.Error())
}

func (p *proc) joinRendezvous(ctx context.Context) *pyError {
	cfg := p.rendezvousConfig()
	for i, rp := range p.plan.Rendezvous {
		// A member reads back only the engine_id it adopts (below), if any.
		m := rendezvous.Member{Kind: rp.Kind, Address: rp.Address, WorldSize: rp.WorldSize, Rank: rp.Rank, ID: p.id, Want: []int{}}
		if rp.Kind == "workers" {
			m.Value = p.snapshot().EngineID
			if from := p.plan.EngineIDFromRank; from != nil {
				m.Want = []int{*from}
			}
		}
		if rp.Hello != nil {
			m.Hello, _ = json.Marshal(rp.Hello) // a struct of ints and bools always marshals
			// The engine's handshake socket is ZMQ (vllm/v1/engine/core.py startup_handshake): a
			// front end that goes away is never seen to, and the engine waits out its time.
			m.Lost = vllm.HandshakeNoAnswer
		}
		if rp.Rank == 0 {
			m.Screen = screen(rp.Expect)
		}
		var res rendezvous.Result
		var err error
		if l := p.handshakes[i]; l != nil {
			res, err = l.Join(ctx, m.Value, cfg)
		} else {
			res, err = rendezvous.Join(ctx, m, cfg)
		}
		if err != nil && ctx.Err() != nil {
			return nil
		}
		entry := report.Rendezvous{Kind: rp.Kind, Address: rp.Address}
		var re *rendezvous.Error
		switch {
		case errors.As(err, &re):
			entry.Error, entry.Missing = re.Python, re.Missing
		case err != nil:
			entry.Error = "RuntimeError: " + err.Error()
		}
		p.update(func(r *report.Process) {
			r.Rendezvous = append(r.Rendezvous, entry)
			// vLLM broadcasts the KV engine_id from one rank of the worker group at worker init.
			if from := p.plan.EngineIDFromRank; err == nil && rp.Kind == "workers" && from != nil {
				if v, ok := res.Values[*from]; ok {
					r.EngineID = v
				}
			}
		})
		if entry.Error != "" {
			p.publish("")
			return &pyError{Exception: entry.Error, Where: "init_distributed_environment"}
		}
		if res.Late != "" {
			p.readyRefusal = res.Late
		}
		if rp.Rank == 0 && rp.Expect != nil {
			p.remoteEngines = append(p.remoteEngines, p.notBelow(res.IDs)...)
		}
		// A barrier that completed is recorded (and its engine_id adopted) even when the parent
		// stopped this process at that moment: like vLLM's collective, it completed for every
		// member at once.
		if ctx.Err() != nil {
			p.publish("")
			return nil
		}
	}
	p.publish(PhaseRendezvous)
	return nil
}

func (p *proc) registerSegment(ctx context.Context) *pyError {
	_, _, st := p.timeouts()
	// Each request of the setup has the store bound, as each of Mooncake's has its own.
	mc, err := mooncake.Setup(ctx, p.store, mooncake.Config{
		LocalHostname:  p.plan.SegmentHost,
		Remount:        p.plan.SegmentRemount,
		ListenIP:       p.spec.Runtime.ListenIP,
		Rand:           p.seed(),
		Log:            p.log,
		RequestTimeout: st,
	})
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return &pyError{Exception: "RuntimeError: Mooncake store setup failed: " + err.Error(), Where: "MooncakeStoreWorker.__init__"}
	}
	p.mc = mc
	p.update(func(r *report.Process) { r.Segment = mc.Name() })
	// The first ping after a mount answers NEED_REMOUNT: until the client acted on it, a store
	// fault would race its own re-publication, so the worker is ready only after that beat.
	if err := mc.Beat(ctx); err != nil && ctx.Err() == nil {
		p.log.Warn("mooncake first heartbeat failed", "segment", mc.Name(), "err", err)
	}
	hctx, stop := context.WithCancel(context.Background())
	p.hbStop, p.hbDone = stop, make(chan struct{})
	go func() {
		defer close(p.hbDone)
		mc.Run(hctx)
	}()
	p.publish("")
	return nil
}

func (p *proc) bindLookup(ctx context.Context) *pyError {
	turn, err := p.seq.Turn(ctx, p.waitBound())
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return &pyError{Exception: "RuntimeError: " + err.Error(), Where: "LookupKeyServer.__init__"}
	}
	srv, err := lookup.Listen(p.plan.Identity.LookupPath, lookup.WithRoot(p.spec.Runtime.IPCRoot), lookup.WithLogger(p.log),
		lookup.WithOnServe(func(nonce string) {
			// Posted before the reply leaves: once a client has its answer (and reports it), the
			// store already names the server that gave it, so no reader of the store ever sees
			// an answer nobody claims.
			p.update(func(r *report.Process) { r.Served = append(r.Served, nonce) })
			p.publish("")
		}))
	// Released even when the bind failed: this process is about to die, and the next binder
	// must not wait for that.
	p.seq.Bound()
	if err != nil {
		return &pyError{Exception: "zmq.error.ZMQError: " + err.Error(), Where: "LookupKeyServer.__init__"}
	}
	p.server = srv
	p.update(func(r *report.Process) { r.BindSeq = turn })
	p.publish("")
	return nil
}

// lookupHashes are the block hashes of this process's lookup: 32-byte hashes (vLLM's sha256
// block hashes), the first of which is the nonce the answering server records.
func (p *proc) lookupHashes() [][]byte {
	first := sha256.Sum256([]byte(fmt.Sprintf("widetp-lookup/%d/%s", p.spec.Seed, p.id)))
	second := sha256.Sum256(binary.BigEndian.AppendUint64(first[:], 1))
	return [][]byte{first[:], second[:]}
}

// lookupTokens is the prompt length of the lookup: the two blocks of 16 tokens it names.
const lookupTokens = 32

func (p *proc) lookup(ctx context.Context) {
	if err := p.seq.Serving(ctx, p.waitBound()); err != nil {
		if ctx.Err() != nil {
			return
		}
		// Determinism is lost, the lookup is not: it still shows where requests go.
		p.log.Warn("host did not reach serving; looking up anyway", "err", err)
	}
	// A server that completed the handshake but answers late is waited for up to the rendezvous
	// bound: on a loaded machine it is slow, not absent (vLLM's client waits for ever).
	rdv, lt, _ := p.timeouts()
	hashes := p.lookupHashes()
	res := &report.Lookup{Nonce: hex.EncodeToString(hashes[0])}
	c, err := lookup.Dial(p.plan.Identity.LookupPath, lt, lookup.WithRoot(p.spec.Runtime.IPCRoot), lookup.WithPatience(rdv))
	if err == nil {
		p.lclient = c
		_, err = c.Lookup(ctx, lookup.Request{NumTokens: lookupTokens, Hashes: hashes, ApplyEagle: true})
	}
	switch {
	case ctx.Err() != nil:
		return
	case errors.Is(err, lookup.ErrSilent):
		res.Error = fmt.Sprintf("timeout after %v from a server that completed the handshake", max(lt, rdv))
	case errors.Is(err, lookup.ErrTimeout):
		res.Error = fmt.Sprintf("timeout after %v", lt)
	case err != nil:
		res.Error = err.Error()
	}
	p.update(func(r *report.Process) { r.Lookup = res })
	p.publish("")
}

// finish stops the process: children first (as vLLM's shutdown does), then its own sockets and
// store registration, then the exit record.
func (p *proc) finish(end ending, sigs <-chan os.Signal) int {
	switch end.kind {
	case endChildFailure, endStopOnChild:
		p.settle(end.failed)
	}
	if end.kind == endTeardown {
		p.fam.signal(syscall.SIGTERM)
	} else {
		p.shutdownChildren(sigs)
	}
	p.waitChildren(sigs, &end)

	if p.hbStop != nil {
		p.hbStop()
		<-p.hbDone
	}
	for _, l := range p.handshakes {
		l.Close()
	}
	p.closeAddresses()
	if p.server != nil {
		p.server.Close()
	}
	if p.lclient != nil {
		p.lclient.Close()
	}
	clean := end.kind == endTeardown || end.kind == endShutdown || end.kind == endStopOnChild
	if p.mc != nil && clean {
		_, _, st := p.timeouts()
		ctx, cancel := context.WithTimeout(context.Background(), st)
		if err := p.mc.Close(ctx); err != nil {
			p.log.Warn("unregister from the store", "err", err)
		}
		cancel()
	}

	exit := report.Exit{}
	code := 0
	switch end.kind {
	case endCrash:
		exit.Code, exit.Error = exitCode(end.err.Exception), end.err.Exception
	case endChildFailure:
		exit.Code, exit.Error = exitCrashed, p.childFailure(end.failed)
		end.err = &pyError{Exception: exit.Error, Where: "wait_for_engine_startup"}
	case endTeardown:
		exit.Signal, exit.Expected = signalName(end.signal), true
	}
	code = exit.Code
	p.update(func(r *report.Process) { r.Exit = &exit })
	p.publish(PhaseExited)
	if end.err != nil {
		writeTraceback(p.stderr, p.id, end.err)
	}
	return code
}

// childFailure is the plan's exception, with vLLM's map of failed children in place of the
// placeholder ({'EngineCore_DP0': 1}).
func (p *proc) childFailure(failed []childExit) string {
	msg := p.plan.ChildFailure
	if !strings.HasSuffix(msg, vllm.ChildFailurePlaceholder) {
		return msg
	}
	parts := make([]string, 0, len(failed))
	for _, f := range failed {
		parts = append(parts, fmt.Sprintf("'%s': %d", pyProcName(p.plan.Identity.DataParallelSize, f.child.plan.Identity), f.exit.Code))
	}
	return strings.TrimSuffix(msg, vllm.ChildFailurePlaceholder) + "{" + strings.Join(parts, ", ") + "}"
}

// pyProcName is the multiprocessing name vLLM gives a child process: CoreEngineProcManager names
// engine cores EngineCore_DP<index> when its front end runs DP, EngineCore otherwise
// (vllm/v1/engine/utils.py); MultiprocExecutor names workers VllmWorker-<rank>.
func pyProcName(frontEndDPSize int, id report.Process) string {
	switch id.Role {
	case report.RoleEngineCore:
		if frontEndDPSize <= 1 {
			return "EngineCore"
		}
		return fmt.Sprintf("EngineCore_DP%d", id.DataParallelIndex)
	case report.RoleWorker:
		if id.Rank != nil {
			return fmt.Sprintf("VllmWorker-%d", *id.Rank)
		}
	}
	return id.ID
}

// settle lets the children that are past their rendezvous finish their start-up before a failing
// parent tears them down — they would crash or come up in the same instant the failed sibling did,
// and letting them get there makes the outcome reproducible. Children still before or in their
// rendezvous are stopped at once: they wait for peers that will not come — unless a failed child
// got through its rendezvous, which proves the barrier complete for every member (vLLM's
// collective completes for all ranks at once): its siblings still in it are only a status line
// behind, and settle like the ones past it. When the failure began before the barriers
// (failedEarly), a child past its own rendezvous whose subtree still has one to get through (an
// engine core whose workers have yet to meet, in a torch world that may span the failed engine's
// workers) is stopped at once too: in vLLM's order the front end stops its engines long before
// any such barrier's time-out.
func (p *proc) settle(failed []childExit) {
	deadline := time.NewTimer(p.waitBound())
	defer deadline.Stop()
	barrierDone := false
	for _, f := range failed {
		if rec := p.fam.record(f.child.id()); rec != nil && len(rec.Rendezvous) > 0 {
			done := true
			for _, r := range rec.Rendezvous {
				done = done && r.Error == ""
			}
			barrierDone = barrierDone || done
		}
	}
	settling := func(ph Phase) bool {
		return ph == PhaseRendezvous || (barrierDone && (ph == "" || ph == PhaseStarted))
	}
	early := p.failedEarly(failed)
	for _, c := range p.fam.live() {
		ph := p.fam.phase(c.id())
		if !ph.up() && (!settling(ph) || early && ph == PhaseRendezvous && !p.subtreePast(c.plan)) {
			c.send(controlMsg{Op: opShutdown})
		}
	}
	for {
		pending := false
		for _, c := range p.fam.live() {
			if settling(p.fam.phase(c.id())) {
				pending = true
			}
		}
		if !pending {
			return
		}
		select {
		case <-p.fam.changed:
		case <-deadline.C:
			p.log.Warn("children did not settle", "bound", p.waitBound())
			return
		}
	}
}

// failedEarly reports whether the failure below the failed children began before the barriers:
// unless every process of their subtrees that crashed did so at a stage after every barrier (a
// KV connector's or KV event publisher's failure at connector init, which vLLM reaches only once
// the workers are up), the failure was a crash at config, handshake bind or engine init, a failed
// barrier or a kill, and nothing below a sibling gets through a barrier after it.
func (p *proc) failedEarly(failed []childExit) bool {
	late := false
	early := false
	for _, f := range failed {
		eachPlan(f.child.plan, func(q *vllm.ProcessPlan) {
			rec := p.fam.record(q.Identity.ID)
			if q == f.child.plan && rec == nil {
				rec = &report.Process{Exit: &f.exit}
			}
			if rec == nil || !rec.Crashed() {
				return
			}
			switch {
			case q.Crash != nil && (q.Crash.Stage == vllm.StageConnectorInit || q.Crash.Stage == vllm.StageServing):
				late = true
			case q.Crash != nil:
				early = true
			case len(q.Children) == 0:
				// A leaf that crashed with no crash planned: a failed barrier, a kill.
				early = true
			}
		})
	}
	return early || !late
}

// subtreePast reports whether every process below plan is past its rendezvous (or gone).
func (p *proc) subtreePast(plan *vllm.ProcessPlan) bool {
	past := true
	for _, c := range plan.Children {
		eachPlan(c, func(q *vllm.ProcessPlan) {
			switch p.fam.phase(q.Identity.ID) {
			case PhaseRendezvous, PhaseWaiting, PhaseUp, PhaseReady, PhaseExited:
			default:
				past = false
			}
		})
	}
	return past
}

// sameCommand reports whether two process IDs (host/command/...) belong to one launch line: what
// stops one mid-start-up (its command's failure cascade, the harness's teardown, a restart) stops
// the other too.
func sameCommand(a, b string) bool {
	pa, pb := strings.SplitN(a, "/", 3), strings.SplitN(b, "/", 3)
	return len(pa) == 3 && len(pb) == 3 && pa[0] == pb[0] && pa[1] == pb[1]
}

// eachPlan calls fn on plan and every process below it.
func eachPlan(plan *vllm.ProcessPlan, fn func(*vllm.ProcessPlan)) {
	fn(plan)
	for _, c := range plan.Children {
		eachPlan(c, fn)
	}
}

// waitChildren waits for every child to exit (posting what they could not), bounded; children
// that outlive the bound are killed. A second signal during the wait turns a failure teardown into
// the harness's teardown.
func (p *proc) waitChildren(sigs <-chan os.Signal, end *ending) {
	p.waitFor(sigs, p.fam.live)
	for {
		select {
		case <-p.fam.events:
		default:
			return
		}
	}
}

// shutdownChildren tells every live child to shut down: first those that serve no rendezvous
// (every rank but 0), and once they have exited the rank-0 members, which hold the barriers
// the others joined (a worker of rank 0 holds its replica's torch store). Told together, a
// member could read its server's close before its own shutdown and report the lost rendezvous
// as its crash: the order vLLM's signals race in is not what a shutdown of the whole tree
// decides, so the simulation takes the one that leaves no member behind its server.
func (p *proc) shutdownChildren(sigs <-chan os.Signal) {
	var members, servers []*child
	for _, c := range p.fam.live() {
		if servesRendezvous(c.plan) {
			servers = append(servers, c)
		} else {
			members = append(members, c)
		}
	}
	for _, c := range members {
		c.send(controlMsg{Op: opShutdown})
	}
	if len(servers) == 0 {
		return
	}
	if len(members) > 0 {
		p.waitFor(sigs, func() []*child {
			var left []*child
			for _, c := range p.fam.live() {
				if !servesRendezvous(c.plan) {
					left = append(left, c)
				}
			}
			return left
		})
	}
	for _, c := range servers {
		c.send(controlMsg{Op: opShutdown})
	}
}

// servesRendezvous: the process is rank 0 of one of its barriers, the member that listens.
func servesRendezvous(plan *vllm.ProcessPlan) bool {
	for _, r := range plan.Rendezvous {
		if r.Rank == 0 {
			return true
		}
	}
	return false
}

// waitFor waits until pending() names no child, or kills them all when they outlast the bound;
// a signal meanwhile (the harness's teardown) sends SIGTERM to every child.
func (p *proc) waitFor(sigs <-chan os.Signal, pending func() []*child) {
	_, _, st := p.timeouts()
	// A child's own shutdown posts its exit and waits for its children in turn (three levels at
	// most), each bounded by the store timeout.
	bound := time.NewTimer(6*st + drainBound)
	defer bound.Stop()
	killed := false
	for len(pending()) > 0 {
		select {
		case <-p.fam.events:
		case <-p.fam.changed:
		case <-sigs:
			// The harness's teardown arrived while a failure was being torn down: the children
			// go now, and what they leave is what the teardown asked for.
			p.tearingDown.Store(true)
			p.fam.signal(syscall.SIGTERM)
		case <-bound.C:
			if killed {
				p.log.Error("children survived SIGKILL", "children", len(p.fam.live()))
				return
			}
			p.log.Warn("children did not stop in time; killing them")
			p.fam.signal(syscall.SIGKILL)
			killed = true
			bound.Reset(drainBound)
		}
	}
}
