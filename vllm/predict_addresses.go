package vllm

import (
	"strings"

	"github.com/widetp/widetp/report"
)

// The paper execution of the address steps (plan_addresses.go), in the order a live run takes
// them: each stage's steps of one host in plan order (commands in order, then tree order), which
// is the order simnode's sequencer imposes.

// HangBoundText is what a prediction says caught a hang: the run's bound, which the paper does not
// know.
const HangBoundText = "the run's hang bound"

// addrState is the paper state of one deployment's addresses.
type addrState struct {
	// binds are the live binds (tcp and ipc) by host.
	binds map[string][]*heldBind
	// opened are the shm resources by host and path: who created each.
	opened map[string]map[string]*simProc
	// seq counts binds and opens per host.
	seq map[string]int
}

type heldBind struct {
	p        *simProc
	endpoint string
	key      string
	// listening: the socket listens (a ZMQ or rendezvous listener at once; a front end's HTTP
	// socket from StageServing on); reusePort: it set SO_REUSEPORT.
	listening bool
	reusePort bool
}

func (s *sim) addr() *addrState {
	if s.addrs == nil {
		s.addrs = &addrState{binds: map[string][]*heldBind{}, opened: map[string]map[string]*simProc{}, seq: map[string]int{}}
	}
	return s.addrs
}

// addressesAt runs p's exercised steps of one bind/open/probe stage. It reports false when the
// process ended (a failed bind raises; the event is returned for the caller to end it with its
// stage) or hung.
func (s *sim) addressesAt(p *simProc, st Stage) (ok bool, ev *exitEvent) {
	st2 := s.addr()
	for i := range p.plan.Addresses {
		a := &p.plan.Addresses[i]
		if !a.Exercised || a.Stage != st {
			continue
		}
		rec := &p.rec.Addresses[i]
		switch a.Role {
		case report.AddressProbe:
			ports, err := a.Alloc.Run(paperProber{s: st2, host: p.rec.Host}, func(tries int) bool { return tries >= paperSpinLimit })
			if se, spun := err.(*SpinError); spun {
				p.hung = true
				p.rec.Hung = &report.Hang{Where: se.Where, Deadline: HangBoundText, Detail: se.Detail}
				return false, nil
			}
			if err != nil {
				rec.Error = err.Error()
				return false, &exitEvent{p, 1, err.Error()}
			}
			rec.Ports = ports
		case report.AddressBind:
			key := resolveKey(a.Key, p)
			rec.Key = key
			endpoint, _ := ResolveProbed(a.Endpoint, a.Channel, a.Key, p.rec.Addresses)
			rec.Endpoint = endpoint
			// Linux refuses a bind next to a listener of the port (SO_REUSEADDR or not), unless
			// both set SO_REUSEPORT; an ipc bind never fails (libzmq takes the path over). A
			// steal-port step holds a port the process learnt before it binds it.
			held := st2.listener(p.rec.Host, endpoint, a.ReusePort) != nil || s.steals.take(p, a.Channel, endpoint)
			if held && a.Flavor != "" && !strings.HasPrefix(endpoint, "ipc://") {
				rec.Error = BindErrorText(a.Flavor, endpoint, AddrInUseErrno, "Address already in use")
				rec.Errno = AddrInUseErrno
				return false, &exitEvent{p, 1, rec.Error}
			}
			st2.seq[p.rec.Host]++
			rec.BindSeq = st2.seq[p.rec.Host]
			st2.binds[p.rec.Host] = append(st2.binds[p.rec.Host], &heldBind{p: p, endpoint: endpoint, key: key,
				listening: a.ListenAt == "", reusePort: a.ReusePort})
		case report.AddressOpen:
			rec.Key = resolveKey(a.Key, p)
			path := resolveKey(a.Endpoint, p)
			rec.Endpoint = path
			if st2.opened[p.rec.Host] == nil {
				st2.opened[p.rec.Host] = map[string]*simProc{}
			}
			st2.seq[p.rec.Host]++
			rec.BindSeq = st2.seq[p.rec.Host]
			creator := st2.opened[p.rec.Host][path]
			if creator == nil {
				creator = p
				st2.opened[p.rec.Host][path] = p
			}
			rec.ServedBy = creator.rec.ID
		}
		if a.Raises != "" {
			return false, &exitEvent{p, 1, a.Raises}
		}
	}
	return true, nil
}

// paperSpinLimit is how many fruitless tries the paper allocator makes before calling it a spin:
// its prober never changes, so a loop that came back around once with nothing changed would do
// so for ever.
const paperSpinLimit = 3

// resolveKey fills KeyEngineID with the process's engine_id at the time of the step.
func resolveKey(k string, p *simProc) string {
	return strings.ReplaceAll(k, KeyEngineID, p.rec.EngineID)
}

// holder returns a live bind of host on endpoint's socket.
func (a *addrState) holder(host, endpoint string) *heldBind {
	for _, b := range a.binds[host] {
		if b.p.alive() && report.SameSocket(b.endpoint, endpoint) {
			return b
		}
	}
	return nil
}

// listener returns the live listener of host that a bind or listen of endpoint collides with:
// one on the same socket, unless both set SO_REUSEPORT.
func (a *addrState) listener(host, endpoint string, reusePort bool) *heldBind {
	for _, b := range a.binds[host] {
		if b.listening && b.p.alive() && report.SameSocket(b.endpoint, endpoint) && !(reusePort && b.reusePort) {
			return b
		}
	}
	return nil
}

// listenAddresses is StageServing: the binds of that stage (a gRPC front end's socket) and the
// sockets bound earlier that listen only now (a front end's HTTP socket, once its engines are
// up), in step order (StepOrder: a process once everything below it came up); a bind or listen
// next to a listener of the port fails, and the process exits with the OSError its server raises.
func (s *sim) listenAddresses() {
	st := s.addr()
	var events []exitEvent
	for _, p := range s.postOrder() {
		if !p.serving() {
			continue
		}
		if _, ev := s.addressesAt(p, StageServing); ev != nil {
			events = append(events, *ev)
			continue
		}
		for i := range p.plan.Addresses {
			a := &p.plan.Addresses[i]
			rec := &p.rec.Addresses[i]
			if !a.Exercised || a.ListenAt != StageServing || rec.Error != "" || rec.BindSeq == 0 {
				continue
			}
			var mine *heldBind
			for _, b := range st.binds[p.rec.Host] {
				if b.p == p && b.endpoint == a.Endpoint {
					mine = b
				}
			}
			if held := st.listener(p.rec.Host, a.Endpoint, a.ReusePort); held != nil && held != mine {
				rec.Error = BindErrorText(a.Flavor, a.Endpoint, AddrInUseErrno, "Address already in use")
				rec.Errno = AddrInUseErrno
				events = append(events, exitEvent{p, 1, rec.Error})
				break
			}
			if mine != nil {
				mine.listening = true
			}
		}
	}
	s.exitAll(events)
}

// paperProber binds on paper: a port is free unless a live bind of the host holds it; the kernel
// hands out ports from the top of the ephemeral range, each once.
type paperProber struct {
	s    *addrState
	host string
}

func (pp paperProber) Bind(port int) bool {
	return pp.s.holder(pp.host, "tcp://"+hostPort("0.0.0.0", port)) == nil
}

func (pp paperProber) Ephemeral() (int, error) {
	pp.s.seq["ephemeral/"+pp.host]++
	return 60999 - pp.s.seq["ephemeral/"+pp.host], nil
}

// connectAddresses runs the StageServing connects of every live process that came up: each is
// answered by the live bind its endpoint reaches, or gets no answer.
func (s *sim) connectAddresses() {
	st := s.addr()
	for _, p := range s.procs {
		if !p.serving() {
			continue
		}
		for i := range p.plan.Addresses {
			a := &p.plan.Addresses[i]
			if !a.Exercised || a.Role != report.AddressConnect {
				continue
			}
			rec := &p.rec.Addresses[i]
			if srv := st.reach(p.rec.Host, a.Endpoint); srv != nil {
				rec.ServedBy = srv.p.rec.ID
			} else {
				rec.Error = "no answer at " + a.Endpoint
			}
		}
	}
}

// reach returns the live bind a client on host reaches when it dials endpoint: on the host the
// endpoint names (this host for a loopback or wildcard address), a bind of that port on every
// interface, on loopback when the client dialled loopback from the same host, or on the
// interface the client named.
func (a *addrState) reach(client, endpoint string) *heldBind {
	if strings.HasPrefix(endpoint, "ipc://") {
		// An ipc path is a file of the client's host: the last live binder took it over.
		var last *heldBind
		for _, b := range a.binds[client] {
			if b.p.alive() && report.SameSocket(b.endpoint, endpoint) {
				last = b
			}
		}
		return last
	}
	h, port, ok := splitEndpoint(endpoint)
	if !ok {
		return nil
	}
	dial := report.IfaceClass(h)
	target := h
	if dial == report.IfaceLoopback || dial == report.IfaceAny {
		target, dial = client, report.IfaceLoopback
	}
	for _, b := range a.binds[target] {
		bh, bport, ok := splitEndpoint(b.endpoint)
		if !ok || bport != port || !b.p.alive() {
			continue
		}
		switch bi := report.IfaceClass(bh); {
		case bi == report.IfaceAny,
			bi == report.IfaceLoopback && dial == report.IfaceLoopback,
			bi == dial:
			return b
		}
	}
	return nil
}

// AddressRecords copies the plan's addresses into a record (outcomes empty): a process reports
// every address of its plan, exercised or listed.
func AddressRecords(plan *ProcessPlan) []report.Address {
	if len(plan.Addresses) == 0 {
		return nil
	}
	out := make([]report.Address, len(plan.Addresses))
	for i, a := range plan.Addresses {
		out[i] = a.Address
	}
	return out
}

// stepAddresses runs p's steps of a start-up stage (config, engine init) and ends the process when
// one fails; it reports whether p goes on (false also when it hung).
func (s *sim) stepAddresses(p *simProc, st Stage) bool {
	ok, ev := s.addressesAt(p, st)
	if ev != nil {
		s.exit(p, ev.code, ev.err)
	}
	return ok
}

// connectorAddresses runs the connector-init steps of every ready process in step order
// (StepOrder): workers before their engine core, which builds its scheduler-side connector only
// once its executor's workers are up (EngineCore.__init__: executor, KV caches, then the
// scheduler) — so it takes no step when one of its children failed or never came up. The
// failures are returned to end with the stage's other failures, and marked so that the process
// takes no further connector-init step.
func (s *sim) connectorAddresses(ready func(*simProc) bool) ([]exitEvent, map[*simProc]bool) {
	var events []exitEvent
	failed := map[*simProc]bool{}
	for _, p := range s.postOrder() {
		if !ready(p) {
			continue
		}
		up := true
		for _, c := range p.children {
			up = up && c.cameUp() && !failed[c]
		}
		if !up && hasStep(p.plan, StageConnectorInit) {
			continue
		}
		if _, ev := s.addressesAt(p, StageConnectorInit); ev != nil {
			events = append(events, *ev)
			failed[p] = true
		}
	}
	return events, failed
}

// postOrder lists every process children first, commands in order.
func (s *sim) postOrder() []*simProc {
	out := make([]*simProc, 0, len(s.procs))
	var walk func(p *simProc)
	walk = func(p *simProc) {
		for _, c := range p.children {
			walk(c)
		}
		out = append(out, p)
	}
	for _, p := range s.procs {
		if p.parent == nil {
			walk(p)
		}
	}
	return out
}

// hasStep: the plan has an exercised bind or open at stage st.
func hasStep(p *ProcessPlan, st Stage) bool {
	for _, a := range p.Addresses {
		if a.Exercised && (a.Stage == st || a.ListenAt == st) && (a.Role == report.AddressBind || a.Role == report.AddressOpen) {
			return true
		}
	}
	return false
}

// StepOrder lists the processes of one host that bind or open an address at stage st, in the order
// they take their turns in a run and on paper: commands in order, each tree in pre-order for the
// start-up stages (a parent binds before it starts its children) and in post-order for connector
// init (an engine core builds its scheduler's connector after its workers built theirs) and
// serving (a process serves once everything below it came up).
func StepOrder(np *NodePlan, st Stage) []string {
	var out []string
	late := st == StageConnectorInit || st == StageServing
	var walk func(p *ProcessPlan)
	walk = func(p *ProcessPlan) {
		if !late && hasStep(p, st) {
			out = append(out, p.Identity.ID)
		}
		for _, c := range p.Children {
			walk(c)
		}
		if late && hasStep(p, st) {
			out = append(out, p.Identity.ID)
		}
	}
	for _, c := range np.Commands {
		walk(c)
	}
	return out
}

// hungAbove: an ancestor of p hung before starting its children.
func hungAbove(p *simProc) bool {
	for a := p.parent; a != nil; a = a.parent {
		if a.hung {
			return true
		}
	}
	return false
}
