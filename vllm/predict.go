package vllm

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/widetp/widetp/report"
)

// Deployment is every node of one scenario with the deployment-wide options.
type Deployment struct {
	Name    string
	Model   Model
	Profile Profile
	Seed    string
	Nodes   []Node
	// Install is the vLLM installation the deployment runs (the zero value: vLLM's images').
	Install Install
}

// Values the paper execution prints where a real run would wait and give up. They mirror what
// vLLM's processes print when a peer never comes; the checks compare violation kinds, never
// these texts.
const (
	// rendezvousTimeoutSeconds is torch.distributed's default TCPStore/process-group timeout
	// (600 s), which vLLM keeps unless --distributed-timeout-seconds is given.
	rendezvousTimeoutSeconds = 600
)

// The port range a Mooncake store client draws its segment's port from when its local_hostname
// carries none (Mooncake's transfer engine: at random in 12300–14300, again while the bind fails,
// 20 draws at most). The paper execution draws as a run's client does (simnode/mooncake Setup,
// whose MinPort, MaxPort and PortAttempts these are), with the same generator: ProcessRand.
const (
	SegmentPortMin      = 12300
	SegmentPortMax      = 14300
	SegmentPortAttempts = 20
)

// SeedNumber is a deployment's seed as the number its processes' generators start from.
func SeedNumber(seed string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(seed))
	return h.Sum64()
}

// ProcessRand is the generator a simulated process draws its random values from (simnode's
// proc.seed): one per process, from the deployment's seed (SeedNumber) and the process's ID, so
// that a paper execution draws what a run draws.
func ProcessRand(seed uint64, id string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(id))
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}

// Predict plans every node and executes the plans on paper, in vLLM's stage order:
//
//  1. config: a process with a Crash at StageConfig exits before starting children; otherwise
//     it binds its BindsEarly rendezvous (StageHandshakeBind): the later binder of one address on
//     one host, in host order, exits with ZMQBindError and never starts its children (nor joins a
//     barrier); otherwise its children start (those of a ChildrenAfterRendezvous process, an
//     engine core, once it completed its rendezvous in stage 3: a barrier waits for them).
//  2. engine init: Crash at StageEngineInit ends the process.
//  3. rendezvous: each process joins its RendezvousPlans in order. A barrier completes when every
//     rank 0..world_size-1 of it arrives, once, with one world size; it fails when a member can
//     never arrive (it exited, never started, or failed an earlier barrier), on conflicting world
//     sizes or duplicate ranks, or in a wait cycle. Every member that arrived at a failed barrier
//     records Error and Missing and exits with the time-out vLLM would raise. A front end's
//     handshake whose rank 0 refuses an arrived member's Hello (HandshakeExpect.Refuse) fails at
//     once: the front end exits with the refusal, its own engines stop with it, and the other
//     members that arrived exit with HandshakeNoAnswer.
//  4. connector init: workers adopt the engine_id their EngineIDFromRank names; a Crash at
//     StageConnectorInit ends the process; the others register their segment and bind their
//     lookup server.
//  5. lookups: each live client is served by the live server with the highest BindSeq at its
//     path on its host (libzmq's silent ipc takeover), else it records Lookup.Error.
//
// After every stage, failures cascade: a child that exits with an error makes its parent raise
// ChildFailure (or stop cleanly when StopsOnChildFailure), and a process that exits shuts its
// children down (exit code 0, as vLLM's workers and engine cores exit when their parent goes).
// Lookup servers get BindSeq in host order: commands in order, processes in tree order. The
// result is sorted by ID. It holds the processes a crash kept from starting too (no Exit, below a
// crashed ancestor), so that a run in which one of them got to start can still be compared —
// except those below a failed handshake bind, which no run ever starts (the bind precedes them).
func Predict(d Deployment) ([]report.Process, error) {
	plans, err := ModelPlanner{}.PlanDeployment(context.Background(), d)
	if err != nil {
		return nil, err
	}
	return PredictPlans(d, plans)
}

// PredictPlans is Predict over plans any Planner made for d (one NodePlan per node, in d's node
// order): the paper execution does not care who planned.
func PredictPlans(d Deployment, plans []*NodePlan) ([]report.Process, error) {
	return (&sim{}).predict(d, plans)
}

// predict is PredictPlans on s (which may carry a timeline's steal-port steps).
func (s *sim) predict(d Deployment, plans []*NodePlan) ([]report.Process, error) {
	s.seed = SeedNumber(d.Seed)
	if len(plans) != len(d.Nodes) {
		return nil, fmt.Errorf("predict %s: %d node plans for %d nodes", d.Name, len(plans), len(d.Nodes))
	}
	for i, np := range plans {
		if np == nil || np.Host != d.Nodes[i].Host {
			return nil, fmt.Errorf("predict %s: node %d: plan is not for host %q", d.Name, i, d.Nodes[i].Host)
		}
		for _, top := range np.Commands {
			if top == nil {
				return nil, fmt.Errorf("predict %s: host %s: a command has no plan", d.Name, np.Host)
			}
			s.add(top, nil)
		}
	}
	s.run()
	return s.records(), nil
}

// records are the sim's process records by ID, but those no run ever starts.
func (s *sim) records() []report.Process {
	out := make([]report.Process, 0, len(s.procs))
	for _, p := range s.procs {
		if !p.started && (bindFailedBelow(p) || hungAbove(p)) {
			continue // below a failed handshake bind or a hung process: no run ever starts it
		}
		out = append(out, p.rec)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// simProc is one process during the paper execution.
type simProc struct {
	plan     *ProcessPlan
	rec      report.Process
	parent   *simProc
	children []*simProc
	started  bool
	exited   bool
	// bindFailed: the process raised at StageHandshakeBind; neither it nor anything below it
	// takes part in a barrier.
	bindFailed bool
	// next is the index of the next RendezvousPlan to join; len(plan.Rendezvous) once all done.
	next int
	// hung: an address step never returned (predict_addresses.go); the process lives on without
	// progress and starts no children.
	hung bool
	// engines are the members of the front-end handshakes this process served (rank 0 with an
	// Expect): the engines whose READY it waits for, local or on other hosts.
	engines []*simProc
}

func (p *simProc) alive() bool { return p.started && !p.exited }

type sim struct {
	// readyRefusals are the front ends that refuse a READY (HandshakeExpect.RefuseReady).
	readyRefusals []exitEvent
	procs         []*simProc // every process, host order then tree order (preorder)
	// bound holds the BindsEarly addresses by barrierKey and the process that bound each.
	bound map[string]*simProc
	// addrs is the paper state of the address steps (predict_addresses.go).
	addrs *addrState
	// steals are the steal-port steps of a timeline (predict_faults.go).
	steals *steals
	// cut tells whether a partition step in force separates two hosts (a restart under a cut,
	// predict_faults.go); nil: nothing is cut.
	cut func(a, b string) bool
	// seed is the deployment's SeedNumber: the processes' draws (segment ports) start from it.
	seed uint64
}

func (s *sim) add(plan *ProcessPlan, parent *simProc) *simProc {
	p := &simProc{plan: plan, rec: plan.Identity, parent: parent}
	p.rec.Addresses = AddressRecords(plan)
	s.procs = append(s.procs, p)
	for _, c := range plan.Children {
		p.children = append(p.children, s.add(c, p))
	}
	return p
}

func (s *sim) run() {
	for _, p := range s.procs {
		if p.parent == nil {
			s.start(p)
		}
	}
	var initFailures []exitEvent
	for _, p := range s.procs {
		if p.alive() && p.plan.Crash != nil && p.plan.Crash.Stage == StageEngineInit {
			initFailures = append(initFailures, exitEvent{p, 1, p.plan.Crash.Error})
		}
	}
	s.exitAll(initFailures)
	s.rendezvous()
	s.connectorInit()
	s.lookups()
	// A front end that refuses an engine's READY raises once its engines are up (their start-up
	// is what READY reports), before it serves; one whose engines failed has failed through them
	// already, one whose engines hung waits for ever.
	var refusals []exitEvent
	for _, e := range s.readyRefusals {
		if e.p.alive() && e.p.upBelow() {
			refusals = append(refusals, e)
		}
	}
	s.exitAll(refusals)
	s.listenAddresses()
	s.connectAddresses()
}

// serving: p reached StageServing. It is alive, did not hang, completed its rendezvous, and every
// process below it and every engine of its handshakes came up: vLLM's front end leaves
// wait_for_engine_startup once its engines sent READY, which an engine core sends once its
// executor's workers and its scheduler are up (vllm/v1/engine/core.py EngineCoreProc,
// vllm/v1/engine/utils.py). The engines of other hosts count too: wait_for_engine_startup has no
// deadline and watches only its local processes, so a remote engine that dies or hangs before its
// READY keeps the front end waiting for ever.
func (p *simProc) serving() bool {
	if !p.cameUp() || !p.upBelow() {
		return false
	}
	for _, e := range p.engines {
		if !e.cameUp() || !e.upBelow() {
			return false
		}
	}
	return true
}

// cameUp: p is alive, did not hang and completed its rendezvous.
func (p *simProc) cameUp() bool {
	return p.alive() && !p.hung && p.next == len(p.plan.Rendezvous)
}

// upBelow: every process below p came up.
func (p *simProc) upBelow() bool {
	for _, c := range p.children {
		if !c.cameUp() || !c.upBelow() {
			return false
		}
	}
	return true
}

// start is a process starting: it raises at config, or it starts its children.
func (s *sim) start(p *simProc) {
	p.started = true
	if p.plan.Crash != nil && p.plan.Crash.Stage == StageConfig {
		s.exit(p, 1, p.plan.Crash.Error)
		return
	}
	if !s.stepAddresses(p, StageConfig) {
		return
	}
	if !s.bindEarly(p) {
		return
	}
	if p.plan.ChildrenAfterRendezvous && len(p.plan.Rendezvous) > 0 {
		return // startLate, once p completed its rendezvous
	}
	s.startChildren(p)
}

// startChildren is the rest of p's start once it may start its children: its engine-init address
// steps (an executor's get_open_port comes with the executor, which starts the workers), then the
// children.
func (s *sim) startChildren(p *simProc) {
	if (p.plan.Crash == nil || p.plan.Crash.Stage != StageEngineInit) && !s.stepAddresses(p, StageEngineInit) {
		return
	}
	for _, c := range p.children {
		if !p.alive() {
			return
		}
		s.start(c)
	}
}

// startLate starts the children of a ChildrenAfterRendezvous process that just completed its last
// rendezvous, then ends together the ones that raise at StageEngineInit (as run does for the
// processes that start first).
func (s *sim) startLate(p *simProc) {
	s.startChildren(p)
	var failures []exitEvent
	var walk func(*simProc)
	walk = func(q *simProc) {
		for _, c := range q.children {
			if c.alive() && c.plan.Crash != nil && c.plan.Crash.Stage == StageEngineInit {
				failures = append(failures, exitEvent{c, 1, c.plan.Crash.Error})
			}
			walk(c)
		}
	}
	walk(p)
	s.exitAll(failures)
}

// pendingStart: p has not started yet but will, once its ancestors complete their rendezvous (a
// ChildrenAfterRendezvous parent still in its barriers). A barrier waits for it as for a member busy
// with an earlier barrier.
func pendingStart(p *simProc) bool {
	if p.started {
		return false
	}
	par := p.parent
	if par == nil {
		return false
	}
	if par.started {
		return par.alive() && !par.hung && par.plan.ChildrenAfterRendezvous && par.next < len(par.plan.Rendezvous)
	}
	return pendingStart(par)
}

// bindEarly is StageHandshakeBind: p binds the rendezvous it serves with BindsEarly, in host
// order, and reports whether all of them bound. An address stays held once bound: a binder starts
// its children only after every binder of its host bound or died (simnode waits for that), so no
// child failure frees an address before a later binder tries it.
func (s *sim) bindEarly(p *simProc) bool {
	for _, r := range p.plan.Rendezvous {
		if !r.BindsEarly || r.Rank != 0 {
			continue
		}
		key := barrierKey(p.rec.Host, r.Address)
		if s.bound[key] != nil {
			p.bindFailed = true
			s.exit(p, 1, ZMQBindError(r.Address, AddressInUse))
			return false
		}
		if s.bound == nil {
			s.bound = map[string]*simProc{}
		}
		s.bound[key] = p
	}
	return true
}

// bindFailedBelow: p or one of its ancestors failed its handshake bind, so p never joins a barrier
// (the failed binder raised before any barrier; its children never started).
func bindFailedBelow(p *simProc) bool {
	for ; p != nil; p = p.parent {
		if p.bindFailed {
			return true
		}
	}
	return false
}

// exit ends a process and cascades: its children shut down, and an error reaches its parent.
func (s *sim) exit(p *simProc, code int, errText string) {
	s.exitAll([]exitEvent{{p, code, errText}})
}

// exitEvent is one process ending.
type exitEvent struct {
	p    *simProc
	code int
	err  string
}

// exitAll ends processes that fail at the same stage together, then cascades: a stage is
// simultaneous, so a sibling's cascade must not pre-empt a process's own failure.
func (s *sim) exitAll(events []exitEvent) {
	var ended []*simProc
	for _, e := range events {
		if e.p.exited || !e.p.started {
			continue
		}
		e.p.exited = true
		e.p.rec.Exit = &report.Exit{Code: e.code, Error: e.err}
		ended = append(ended, e.p)
	}
	for _, p := range ended {
		s.cascade(p)
	}
}

func (s *sim) cascade(p *simProc) {
	for _, c := range p.children {
		s.exit(c, 0, "")
	}
	par := p.parent
	if !p.rec.Crashed() || par == nil || !par.alive() {
		return
	}
	switch {
	case par.plan.ChildFailure != "":
		s.exit(par, 1, childFailureText(par))
	case par.plan.StopsOnChildFailure:
		s.exit(par, 0, "")
	}
}

// childFailureText fills ChildFailurePlaceholder with the failed children as vLLM prints them:
// a dict of engine core process names to exit codes.
func childFailureText(par *simProc) string {
	text := par.plan.ChildFailure
	if !strings.HasSuffix(text, ChildFailurePlaceholder) {
		return text
	}
	var names []string
	for _, c := range par.children {
		if c.exited && c.rec.Crashed() {
			names = append(names, fmt.Sprintf("'%s': %d", engineProcName(par.rec.DataParallelSize, c.rec.DataParallelIndex), c.rec.Exit.Code))
		}
	}
	return strings.TrimSuffix(text, ChildFailurePlaceholder) + "{" + strings.Join(names, ", ") + "}"
}

// member is one process's entry in a barrier.
type member struct {
	p    *simProc
	idx  int // index in p.plan.Rendezvous
	plan RendezvousPlan
}

type barrier struct {
	address string
	// key tells barriers apart: the address, qualified by the host for loopback ones (barrierKey).
	key      string
	members  []member
	resolved bool
}

func (s *sim) rendezvous() {
	byAddr := map[string]*barrier{}
	var order []*barrier
	for _, p := range s.procs {
		if bindFailedBelow(p) {
			continue
		}
		for i, r := range p.plan.Rendezvous {
			key := barrierKey(p.rec.Host, r.Address)
			b := byAddr[key]
			if b == nil {
				b = &barrier{address: r.Address, key: key}
				byAddr[key] = b
				order = append(order, b)
			}
			b.members = append(b.members, member{p: p, idx: i, plan: r})
		}
	}
	sort.Slice(order, func(i, j int) bool { return order[i].key < order[j].key })
	for {
		progress := false
		for _, b := range order {
			if !b.resolved && s.settle(b, false) {
				progress = true
			}
		}
		if progress {
			continue
		}
		// Nothing moves: whatever still waits is a cycle of barriers waiting on each other; in a
		// real run every one of them times out.
		stuck := false
		for _, b := range order {
			if !b.resolved {
				s.settle(b, true)
				stuck = true
			}
		}
		if !stuck {
			return
		}
	}
}

// settle resolves a barrier if it can (or, with force, fails it); it reports whether it did.
func (s *sim) settle(b *barrier, force bool) bool {
	var arrived, cutOff []member
	gone := false
	rank0 := ""
	for _, m := range b.members {
		if m.plan.Rank == 0 {
			rank0 = m.p.rec.Host
		}
	}
	for _, m := range b.members {
		switch {
		case pendingStart(m.p) && !force:
			return false // this member starts once its parent is through its own barriers
		case !m.p.alive() || m.p.hung:
			gone = true
		case m.p.next == m.idx && s.cut != nil && rank0 != "" && s.cut(m.p.rec.Host, rank0):
			// A partition separates it from rank 0: its connect times out, and rank 0's side
			// waits for it in vain.
			gone = true
			cutOff = append(cutOff, m)
		case m.p.next == m.idx:
			arrived = append(arrived, m)
		case m.p.next < m.idx && !force:
			return false // this member is still busy with an earlier barrier
		}
	}
	world, conflict := barrierShape(b, arrived)
	if front, why := refusal(arrived); front != nil {
		s.refuse(b, arrived, world, front, why)
		return true
	}
	if !gone && !force && conflict == "" && len(arrived) == world {
		for _, m := range arrived {
			m.p.rec.Rendezvous = append(m.p.rec.Rendezvous, report.Rendezvous{Kind: m.plan.Kind, Address: b.address})
			m.p.next++
		}
		b.resolved = true
		for _, m := range arrived {
			if m.plan.Rank == 0 && m.plan.Expect != nil {
				// A front end's handshake: it waits for every engine's READY, local or not.
				for _, e := range arrived {
					if e.p != m.p {
						m.p.engines = append(m.p.engines, e.p)
					}
				}
			}
		}
		if front, why := readyRefusal(arrived); front != nil {
			// Every engine got its answer; the front end refuses a READY once its engines are up
			// (RefuseReady), at the end of start-up (run).
			s.readyRefusals = append(s.readyRefusals, exitEvent{front.p, 1, why})
		}
		for _, m := range arrived {
			if m.p.alive() && m.p.plan.ChildrenAfterRendezvous && m.p.next == len(m.p.plan.Rendezvous) {
				s.startLate(m.p)
			}
		}
		return true
	}
	missing := missingMembers(b, arrived, world)
	msg := fmt.Sprintf("timed out after %ds: %d/%d members joined", rendezvousTimeoutSeconds, len(arrived), world)
	if conflict != "" {
		msg += "; " + conflict
	}
	b.resolved = true
	for _, m := range arrived {
		m.p.rec.Rendezvous = append(m.p.rec.Rendezvous, report.Rendezvous{
			Kind: m.plan.Kind, Address: b.address, Error: msg, Missing: missing})
	}
	events := make([]exitEvent, 0, len(arrived)+len(cutOff))
	for _, m := range arrived {
		events = append(events, exitEvent{m.p, 1, rendezvousTimeoutError(b, m, len(arrived), world)})
	}
	for _, m := range cutOff {
		m.p.rec.Rendezvous = append(m.p.rec.Rendezvous, report.Rendezvous{
			Kind: m.plan.Kind, Address: b.address, Error: "rank 0's host is cut off", Missing: []string{"rank 0"}})
		// torch's TCPStore client: the connect to rank 0's store never completes. An engine's ZMQ
		// handshake connects without an error and waits for the answer (rendezvousTimeoutError).
		why := fmt.Sprintf("torch.distributed.DistNetworkError: The client socket has timed out after %ds while trying to connect to %s.",
			rendezvousTimeoutSeconds, b.address)
		if m.plan.Hello != nil {
			why = HandshakeNoAnswer
		}
		events = append(events, exitEvent{m.p, 1, why})
	}
	s.exitAll(events)
	return true
}

// refusal finds the HELLO that rank 0 of a front end's handshake refuses among the members that
// arrived (HandshakeExpect.Refuse), the lowest rank first; front is nil when rank 0 is not there or
// refuses no one. vLLM's front end refuses the first offending HELLO it reads; which one that is
// does not change who fails. Two engines with one DP index have one ZMQ identity, and the ROUTER
// socket takes only one of them: they are left to the barrier's rank conflict.
func refusal(arrived []member) (front *member, why string) {
	var rank0 *member
	byIndex := map[int]int{}
	for i := range arrived {
		if arrived[i].plan.Rank == 0 && arrived[i].plan.Expect != nil {
			rank0 = &arrived[i]
		}
		if h := arrived[i].plan.Hello; h != nil {
			byIndex[h.Index]++
		}
	}
	if rank0 == nil {
		return nil, ""
	}
	byRank := append([]member(nil), arrived...)
	sort.SliceStable(byRank, func(i, j int) bool { return byRank[i].plan.Rank < byRank[j].plan.Rank })
	for i := range byRank {
		if h := byRank[i].plan.Hello; h != nil && byIndex[h.Index] == 1 {
			if why := rank0.plan.Expect.Refuse(*h); why != "" {
				return rank0, why
			}
		}
	}
	return nil, ""
}

// readyRefusal finds the READY that rank 0 of a completed handshake refuses
// (HandshakeExpect.RefuseReady), the lowest rank first; front is nil when none is refused.
func readyRefusal(arrived []member) (front *member, why string) {
	var rank0 *member
	for i := range arrived {
		if arrived[i].plan.Rank == 0 && arrived[i].plan.Expect != nil {
			rank0 = &arrived[i]
		}
	}
	if rank0 == nil {
		return nil, ""
	}
	byRank := append([]member(nil), arrived...)
	sort.SliceStable(byRank, func(i, j int) bool { return byRank[i].plan.Rank < byRank[j].plan.Rank })
	for _, m := range byRank {
		if h := m.plan.Hello; h != nil {
			if why := rank0.plan.Expect.RefuseReady(*h); why != "" {
				return rank0, why
			}
		}
	}
	return nil, ""
}

// refuse ends a handshake whose front end refused a HELLO (vllm/v1/engine/utils.py
// wait_for_engine_startup): the front end raises at once and exits, which stops its own (Local)
// engines with it; every other member that joined waits for an answer that never comes and gives
// up (HandshakeNoAnswer). The front end and those members record the handshake as failed.
func (s *sim) refuse(b *barrier, arrived []member, world int, front *member, why string) {
	b.resolved = true
	missing := missingMembers(b, arrived, world)
	front.p.rec.Rendezvous = append(front.p.rec.Rendezvous, report.Rendezvous{Kind: front.plan.Kind, Address: b.address, Error: why, Missing: missing})
	s.exit(front.p, 1, why)
	var events []exitEvent
	for _, m := range arrived {
		if !m.p.alive() {
			continue // the front end's own engines, stopped with it
		}
		m.p.rec.Rendezvous = append(m.p.rec.Rendezvous, report.Rendezvous{Kind: m.plan.Kind, Address: b.address, Error: HandshakeNoAnswer, Missing: missing})
		events = append(events, exitEvent{m.p, 1, HandshakeNoAnswer})
	}
	s.exitAll(events)
}

// barrierShape is the world size the barrier's rank 0 serves (the TCPStore master's), and a
// description of any inconsistency among the members that arrived.
func barrierShape(b *barrier, arrived []member) (int, string) {
	world := 0
	for _, m := range b.members {
		if m.plan.Rank == 0 {
			world = m.plan.WorldSize
			break
		}
	}
	if world == 0 {
		for _, m := range b.members {
			world = max(world, m.plan.WorldSize)
		}
	}
	seen := map[int]string{}
	var problems []string
	for _, m := range arrived {
		if m.plan.WorldSize != world {
			problems = append(problems, fmt.Sprintf("%s expects world size %d, rank 0 serves %d", m.p.rec.ID, m.plan.WorldSize, world))
		}
		if m.plan.Rank < 0 || m.plan.Rank >= world {
			problems = append(problems, fmt.Sprintf("%s has rank %d outside world size %d", m.p.rec.ID, m.plan.Rank, world))
		}
		if other, dup := seen[m.plan.Rank]; dup {
			problems = append(problems, fmt.Sprintf("rank %d claimed by %s and %s", m.plan.Rank, other, m.p.rec.ID))
		}
		seen[m.plan.Rank] = m.p.rec.ID
	}
	return world, strings.Join(problems, "; ")
}

// missingMembers names the ranks 0..world-1 that did not arrive: the process planned for a rank
// when there is one, else "rank N".
func missingMembers(b *barrier, arrived []member, world int) []string {
	present := map[int]bool{}
	for _, m := range arrived {
		present[m.plan.Rank] = true
	}
	planned := map[int][]string{}
	for _, m := range b.members {
		planned[m.plan.Rank] = append(planned[m.plan.Rank], m.p.rec.ID)
	}
	var missing []string
	for r := 0; r < world; r++ {
		if present[r] {
			continue
		}
		if ids := planned[r]; len(ids) > 0 {
			missing = append(missing, ids...)
		} else {
			missing = append(missing, "rank "+strconv.Itoa(r))
		}
	}
	return missing
}

// rendezvousTimeoutError is the exception a member of a failed barrier exits with: the front
// end's and the engine's handshake time-outs (vllm/v1/engine/utils.py, core.py), or torch's
// TCPStore time-out for process groups. An engine on a handshake (its Hello) waits for an answer
// whether or not any front end binds the address: its socket is ZMQ, whose connect succeeds
// with nobody there (core.py startup_handshake polls HANDSHAKE_TIMEOUT_MINS for the answer).
func rendezvousTimeoutError(b *barrier, m member, arrived, world int) string {
	handshake := false
	for _, x := range b.members {
		if x.plan.Rank == 0 && (x.p.rec.Role == report.RoleAPIServer) {
			handshake = true
		}
	}
	switch {
	case handshake && m.p.rec.Role == report.RoleAPIServer:
		return "TimeoutError: Timed out waiting for engines to send initial message on input socket."
	case handshake || m.plan.Hello != nil:
		return HandshakeNoAnswer
	}
	return fmt.Sprintf("torch.distributed.DistStoreError: Timed out after %d seconds waiting for clients. %d/%d clients joined.",
		rendezvousTimeoutSeconds, arrived, world)
}

// connectorInit is stage 4 for every live process that completed its barriers and did not hang
// (simnode parks a hung process where it hung).
func (s *sim) connectorInit() {
	ready := (*simProc).cameUp
	// The engine_id exchange runs over the workers' world, before the connector comes up.
	worldByAddr := map[string]map[int]*simProc{}
	for _, p := range s.procs {
		for _, r := range p.plan.Rendezvous {
			if r.Kind == RendezvousWorkers {
				key := barrierKey(p.rec.Host, r.Address)
				if worldByAddr[key] == nil {
					worldByAddr[key] = map[int]*simProc{}
				}
				worldByAddr[key][r.Rank] = p
			}
		}
	}
	for _, p := range s.procs {
		if !ready(p) || p.plan.EngineIDFromRank == nil {
			continue
		}
		for _, r := range p.plan.Rendezvous {
			if r.Kind != RendezvousWorkers {
				continue
			}
			if src := worldByAddr[barrierKey(p.rec.Host, r.Address)][*p.plan.EngineIDFromRank]; src != nil {
				p.rec.EngineID = src.plan.Identity.EngineID
			}
		}
	}
	crashing, failed := s.connectorAddresses(ready)
	segPorts := map[string]map[int]bool{}
	bindSeq := map[string]int{}
	for _, p := range s.procs {
		if !ready(p) || failed[p] {
			continue
		}
		if c := p.plan.Crash; c != nil && c.Stage == StageConnectorInit {
			crashing = append(crashing, exitEvent{p, 1, c.Error})
			continue
		}
		if p.plan.RegistersSegment {
			p.rec.Segment = s.segmentName(p, segPorts)
		}
		if p.plan.BindsLookup {
			bindSeq[p.rec.Host]++
			p.rec.BindSeq = bindSeq[p.rec.Host]
		}
	}
	s.exitAll(crashing)
}

// segmentName is the Mooncake segment a worker registers: its local_hostname when that carries
// a port, else host:port with the port its client draws (ProcessRand), drawn again while another
// worker of its machine holds it (taken: ports by machine), as the bind fails there. Workers of
// different machines that share a segment host (one VLLM_HOST_IP, say) may draw one port: both
// register the same name (the metadata server takes the same rpc_meta body twice), as Mooncake's
// do now and then.
func (s *sim) segmentName(p *simProc, taken map[string]map[int]bool) string {
	host := p.plan.SegmentHost
	if _, port, err := net.SplitHostPort(host); err == nil && port != "" {
		return host
	}
	if taken[p.rec.Host] == nil {
		taken[p.rec.Host] = map[int]bool{}
	}
	r := ProcessRand(s.seed, p.rec.ID)
	port := 0
	for i := 0; i < SegmentPortAttempts; i++ {
		port = SegmentPortMin + r.IntN(SegmentPortMax-SegmentPortMin+1)
		if !taken[p.rec.Host][port] {
			break
		}
	}
	taken[p.rec.Host][port] = true
	return hostPort(host, port)
}

// lookups is stage 5: every live client looks up once its whole host is up.
func (s *sim) lookups() {
	type key struct{ host, path string }
	served := map[key]*simProc{}
	for _, p := range s.procs {
		if p.alive() && p.rec.BindSeq > 0 {
			// Paths naming one socket file are one socket (libzmq binds the file).
			k := key{p.rec.Host, report.LookupEndpointKey(p.rec.LookupPath)}
			if cur := served[k]; cur == nil || p.rec.BindSeq > cur.rec.BindSeq {
				served[k] = p
			}
		}
	}
	for _, p := range s.procs {
		if !p.alive() || !p.plan.ConnectsLookup || p.next != len(p.plan.Rendezvous) {
			continue
		}
		if srv := served[key{p.rec.Host, report.LookupEndpointKey(p.rec.LookupPath)}]; srv != nil {
			p.rec.Lookup = &report.Lookup{ServedBy: srv.rec.ID}
		} else {
			p.rec.Lookup = &report.Lookup{Error: "no lookup server answered at " + p.rec.LookupPath}
		}
	}
}
