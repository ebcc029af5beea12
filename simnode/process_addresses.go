package simnode

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/widetp/widetp/fakestore/api"
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/simnode/address"
	"github.com/widetp/widetp/vllm"
)

// A process's address steps (vllm.AddressPlan), executed for real: at each stage its exercised
// binds and opens (in its host's step order, through the sequencer), probes (vLLM's allocators
// against real binds, a hang caught by the hang bound), and once it serves, its dials.

// addrHeld is what a process holds open until it exits.
type addrHeld struct {
	listeners []address.Listener
	shared    []*address.Shared
	// bound are sockets bound that listen later (by plan index).
	bound map[int]*address.TCPSocket
}

func (p *proc) addrNet() address.Net {
	return address.Net{ListenIP: p.spec.Runtime.ListenIP, Resolve: p.spec.Runtime.resolver(), IPCRoot: p.spec.Runtime.IPCRoot}
}

// hangBound is how long an allocator may spin before the run calls the process hung.
func (p *proc) hangBound() time.Duration { return time.Duration(p.spec.Timeouts.WithDefaults().Hang) }

// addressStage runs the process's exercised steps of stage st. hung is set when an allocator
// never returned within the hang bound: the process then makes no further progress.
func (p *proc) addressStage(ctx context.Context, st vllm.Stage) (hung bool, failed *pyError) {
	steps := p.stepsAt(st)
	if len(steps) == 0 {
		return false, nil
	}
	turnTaken := false
	release := func() {
		if turnTaken {
			p.seq.AddrBound(st)
			turnTaken = false
		}
	}
	defer release()
	for _, i := range steps {
		a := p.plan.Addresses[i]
		if ctx.Err() != nil {
			return false, nil
		}
		if (a.Role == report.AddressBind || a.Role == report.AddressOpen) && !turnTaken {
			turn, err := p.seq.AddrTurn(ctx, st, p.waitBound())
			if ctx.Err() != nil {
				return false, nil
			}
			if err != nil {
				// Determinism is lost, the bind is not: it still shows who holds what.
				p.log.Warn("no address bind turn; binding anyway", "stage", st, "err", err)
			}
			turnTaken = true
			p.update(func(r *report.Process) {
				for _, j := range steps {
					if k := p.plan.Addresses[j].Role; k == report.AddressBind || k == report.AddressOpen {
						r.Addresses[j].BindSeq = turn
					}
				}
			})
		}
		var hang *report.Hang
		var e *pyError
		switch a.Role {
		case report.AddressProbe:
			hang, e = p.probe(ctx, i, a)
		case report.AddressBind:
			e = p.bindAddress(ctx, i, a)
		case report.AddressOpen:
			e = p.openAddress(ctx, i, a)
		}
		if hang != nil {
			release()
			p.update(func(r *report.Process) { r.Hung = hang })
			p.publish("")
			// No later binder of the host waits for a process that will never get there.
			p.seq.Exited(p.id)
			return true, nil
		}
		if e != nil {
			p.publish("")
			return false, e
		}
		if a.Raises != "" {
			p.publish("")
			return false, &pyError{Exception: a.Raises, Where: a.Channel}
		}
	}
	p.publish("")
	return false, nil
}

// stepsAt lists the indexes of the exercised non-dial steps of stage st, in plan order.
func (p *proc) stepsAt(st vllm.Stage) []int {
	var out []int
	for i, a := range p.plan.Addresses {
		if a.Exercised && a.Stage == st && a.Role != report.AddressConnect && a.Role != report.AddressAdvertise {
			out = append(out, i)
		}
	}
	return out
}

// resolve fills the plan's KeyEngineID placeholders with the process's engine_id now.
func (p *proc) resolve(s string) string {
	return strings.ReplaceAll(s, vllm.KeyEngineID, p.snapshot().EngineID)
}

func (p *proc) probe(ctx context.Context, i int, a vllm.AddressPlan) (*report.Hang, *pyError) {
	if a.Alloc == nil {
		return nil, &pyError{Exception: "RuntimeError: probe " + a.Channel + " has no allocator", Where: a.Channel}
	}
	bound := p.hangBound()
	start := time.Now()
	prober := &address.Prober{Net: p.addrNet()}
	ports, err := a.Alloc.Run(prober, func(int) bool { return ctx.Err() != nil || time.Since(start) >= bound })
	var spin *vllm.SpinError
	switch {
	case ctx.Err() != nil:
		return nil, nil
	case errors.As(err, &spin):
		return &report.Hang{Where: spin.Where, Deadline: bound.String(),
			Detail: fmt.Sprintf("%s; %d binds in %v", spin.Detail, prober.Tries, time.Since(start).Round(time.Millisecond))}, nil
	case err != nil:
		p.update(func(r *report.Process) { r.Addresses[i].Error = err.Error() })
		return nil, &pyError{Exception: err.Error(), Where: a.Alloc.Func + " (vllm/utils/network_utils.py)"}
	}
	p.update(func(r *report.Process) { r.Addresses[i].Ports = ports })
	return nil, nil
}

func (p *proc) bindAddress(ctx context.Context, i int, a vllm.AddressPlan) *pyError {
	key := p.resolve(a.Key)
	// A probe-then-bind binds the port its probe returned.
	a.Endpoint, _ = vllm.ResolveProbed(a.Endpoint, a.Channel, a.Key, p.snapshot().Addresses)
	p.update(func(r *report.Process) { r.Addresses[i].Key, r.Addresses[i].Endpoint = key, a.Endpoint })
	if slices.Contains(p.spec.Steal, a.Channel) {
		p.steal(ctx, a)
	}
	var l address.Listener
	var err error
	switch {
	case a.ListenAt != "":
		// Python's socket.bind now, listen later (listenStage).
		var s *address.TCPSocket
		if s, err = address.BindTCP(ctx, p.addrNet(), a.Endpoint, a.ReusePort); err == nil {
			if p.held.bound == nil {
				p.held.bound = map[int]*address.TCPSocket{}
			}
			p.held.bound[i] = s
			return nil
		}
	case a.Flavor == vllm.BindFlavorSocket || strings.HasPrefix(a.Endpoint, "http://"):
		l, err = address.ListenTCP(ctx, p.addrNet(), a.Endpoint)
	default:
		l, err = address.ListenSideChannel(ctx, p.addrNet(), a.Endpoint, key, func(nonce string) {
			p.update(func(r *report.Process) { r.Addresses[i].Served = append(r.Addresses[i].Served, nonce) })
			p.publish("")
		})
	}
	if err != nil {
		return p.bindFailed(i, a, err)
	}
	p.held.listeners = append(p.held.listeners, l)
	return nil
}

// steal is a steal-port step: the port of a TCP endpoint is bound by someone else (a listener the
// process holds apart from its sockets, released when it exits) just before the process binds it.
// Port 0 and ipc paths leave nothing to take (the kernel picks at the bind; libzmq takes a path
// over). Only the first bind of the channel is taken, as the step acts once.
func (p *proc) steal(ctx context.Context, a vllm.AddressPlan) {
	p.spec.Steal = slices.DeleteFunc(p.spec.Steal, func(c string) bool { return c == a.Channel })
	if !strings.HasPrefix(a.Endpoint, "tcp://") || strings.HasSuffix(a.Endpoint, ":0") {
		p.log.Info("steal-port: nothing to take", "endpoint", a.Endpoint)
		return
	}
	l, err := address.ListenTCP(ctx, p.addrNet(), a.Endpoint)
	if err != nil {
		p.log.Warn("steal-port: could not take the port", "endpoint", a.Endpoint, "err", err)
		return
	}
	p.log.Info("steal-port: took the port", "endpoint", a.Endpoint)
	p.held.listeners = append(p.held.listeners, l)
}

// bindFailed records a refused bind or listen and returns the exception the process raises.
func (p *proc) bindFailed(i int, a vllm.AddressPlan, err error) *pyError {
	var be *address.BindError
	text, errno := "RuntimeError: "+err.Error(), 0
	if errors.As(err, &be) && be.Errno != 0 {
		errno = int(be.Errno)
		text = vllm.BindErrorText(a.Flavor, a.Endpoint, errno, address.Strerror(be.Errno))
	}
	p.update(func(r *report.Process) { r.Addresses[i].Error, r.Addresses[i].Errno = text, errno })
	return &pyError{Exception: text, Where: a.Channel}
}

// listenStage is StageServing, once the process serves, in the host's order: it binds that
// stage's sockets (a gRPC front end's, bound once its engines are up) and makes every socket
// bound earlier listen (a front end's HTTP socket, when uvicorn starts).
func (p *proc) listenStage(ctx context.Context) *pyError {
	binds := p.stepsAt(vllm.StageServing)
	if len(p.held.bound) == 0 && len(binds) == 0 {
		return nil
	}
	turn, err := p.seq.AddrTurn(ctx, vllm.StageServing, p.waitBound())
	if err != nil && ctx.Err() == nil {
		p.log.Warn("no listen turn; listening anyway", "err", err)
	}
	defer p.seq.AddrBound(vllm.StageServing)
	for _, i := range binds {
		a := p.plan.Addresses[i]
		if a.Role != report.AddressBind || ctx.Err() != nil {
			continue
		}
		p.update(func(r *report.Process) { r.Addresses[i].BindSeq = turn })
		if e := p.bindAddress(ctx, i, a); e != nil {
			p.publish("")
			return e
		}
	}
	for i, a := range p.plan.Addresses {
		s := p.held.bound[i]
		if s == nil || ctx.Err() != nil {
			continue
		}
		if err := s.Listen(); err != nil {
			p.publish("")
			return p.bindFailed(i, a, err)
		}
	}
	return nil
}

func (p *proc) openAddress(ctx context.Context, i int, a vllm.AddressPlan) *pyError {
	key, endpoint := p.resolve(a.Key), p.resolve(a.Endpoint)
	file, err := address.SharedFile(endpoint, p.spec.Runtime.IPCRoot)
	var sh *address.Shared
	if err == nil {
		_, _, st := p.timeouts()
		sh, err = address.OpenShared(ctx, file, p.id, key, st)
	}
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		text := err.Error()
		if !strings.Contains(text, "Error: ") {
			text = "OSError: " + text
		}
		p.update(func(r *report.Process) {
			r.Addresses[i].Key, r.Addresses[i].Endpoint, r.Addresses[i].Error = key, endpoint, text
		})
		return &pyError{Exception: text, Where: a.Channel}
	}
	p.held.shared = append(p.held.shared, sh)
	p.update(func(r *report.Process) {
		r.Addresses[i].Key, r.Addresses[i].Endpoint, r.Addresses[i].ServedBy = key, endpoint, sh.CreatorID
	})
	return nil
}

// dials reports whether the process dials a peer once up (connectAddresses).
func (p *proc) dials() bool { return slices.ContainsFunc(p.plan.Addresses, isDial) }

// isDial: a connect the process makes once up (connectAddresses).
func isDial(a vllm.AddressPlan) bool { return a.Exercised && a.Role == report.AddressConnect }

// connectAddresses dials the process's StageServing connects: each once the process it must
// reach is up (or gone), as vLLM's clients dial once a request names their peer.
func (p *proc) connectAddresses(ctx context.Context) {
	// A peer that completed the handshake but answers late is waited for up to the rendezvous
	// bound: on a loaded machine it is slow, not absent.
	rdv, lookupT, _ := p.timeouts()
	for i, a := range p.plan.Addresses {
		if !isDial(a) || ctx.Err() != nil {
			continue
		}
		if a.Peer != "" {
			if err := p.waitPeer(ctx, a.Peer); err != nil && ctx.Err() == nil {
				p.log.Warn("peer not seen up; dialling anyway", "peer", a.Peer, "err", err)
			}
		}
		nonce := address.Nonce(p.spec.Seed, p.id, i)
		_, err := address.Dial(ctx, p.addrNet(), a.Endpoint, nonce, lookupT, rdv)
		if ctx.Err() != nil {
			return
		}
		p.update(func(r *report.Process) {
			r.Addresses[i].Nonce = nonce
			if err != nil {
				r.Addresses[i].Error = err.Error()
			}
		})
		p.publish("")
	}
}

// waitPeer waits, bounded, until the store has a record of peer that is ready, hung or exited.
func (p *proc) waitPeer(ctx context.Context, peer string) error {
	return p.watchRecords(ctx, map[string]bool{peer: true}, func(recs []report.Process) bool {
		for _, r := range recs {
			if r.ID == peer && (r.Ready || r.Exit != nil || r.Hung != nil) {
				return true
			}
		}
		return false
	})
}

// watchRecords reads the store's records until done says so, waking on each post by one of ids,
// bounded by waitBound; it returns the store's or the context's error when it stops otherwise.
func (p *proc) watchRecords(ctx context.Context, ids map[string]bool, done func([]report.Process) bool) error {
	ctx, cancel := context.WithTimeout(ctx, p.waitBound())
	defer cancel()
	for {
		// The newest sequence number, before the records are read: a post after it wakes the wait.
		ev, err := p.store.Events(ctx, math.MaxUint64, 0)
		if err != nil {
			return err
		}
		recs, err := p.store.Reports(ctx)
		if err != nil {
			return err
		}
		if done(recs) {
			return nil
		}
		if _, err := p.store.WaitFor(ctx, ev.LastSeq, func(e api.Event) bool { return ids[e.Process] }); err != nil {
			return err
		}
	}
}

// waitChildrenUp waits, bounded, until every child is ready, and reports whether they all are:
// an engine core builds its scheduler-side connector once its executor's workers are up. A child
// that failed or hung means they never will be: the failure reaches this process through its own
// path (the run loop ends it), and a hung child holds it as vLLM's executor would be held.
func (p *proc) waitChildrenUp(ctx context.Context) bool {
	return p.waitUp(ctx, p.plan.Children)
}

// waitDescendantsUp is waitChildrenUp over the whole tree below the process: a front end's engines
// report READY once their executors' workers are up too.
func (p *proc) waitDescendantsUp(ctx context.Context) bool {
	var all []*vllm.ProcessPlan
	for _, c := range p.plan.Children {
		eachPlan(c, func(q *vllm.ProcessPlan) { all = append(all, q) })
	}
	return p.waitUp(ctx, all)
}

// sendsReady: the process is an engine on a front end's handshake (its HELLO is in the plan): it
// sends READY, and so reports itself up, only once its executor's workers are up.
func (p *proc) sendsReady() bool {
	return slices.ContainsFunc(p.plan.Rendezvous, func(rp vllm.RendezvousPlan) bool { return rp.Hello != nil })
}

// notBelow lists the IDs of a barrier's members (by rank, rank 0 left out) that are not this
// process's descendants, in rank order.
func (p *proc) notBelow(ids map[int]string) []string {
	below := map[string]bool{}
	for _, c := range p.plan.Children {
		eachPlan(c, func(q *vllm.ProcessPlan) { below[q.Identity.ID] = true })
	}
	var out []string
	for r := 1; r < len(ids); r++ {
		if id, ok := ids[r]; ok && !below[id] {
			out = append(out, id)
		}
	}
	return out
}

// waitEnginesUp waits until the store holds every one of ids as ready (true), or one of them as
// exited or hung (false: its READY never comes). Bounded like waitUp: past the bound the process
// goes on, as a simulation too slow to tell.
func (p *proc) waitEnginesUp(ctx context.Context, ids []string) bool {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	up := false
	err := p.watchRecords(ctx, want, func(recs []report.Process) bool {
		ready := 0
		for _, r := range recs {
			switch {
			case !want[r.ID]:
			case r.Exit != nil || r.Hung != nil:
				up = false // its READY never comes
				return true
			case r.Ready:
				ready++
			}
		}
		up = ready == len(want)
		return up
	})
	switch {
	case err == nil:
		return up
	case ctx.Err() != nil:
		return false // stopped
	case errors.Is(err, context.DeadlineExceeded):
		p.log.Warn("remote engines not seen up; serving anyway", "engines", ids, "bound", p.waitBound())
	default:
		p.log.Warn("remote engines not readable; serving anyway", "engines", ids, "err", err)
	}
	return true
}

// parkWaiting holds a process that waits for ever on processes elsewhere (a front end whose
// remote engine never sends READY): it says so, gives up its later bind turns, and waits to be
// stopped.
func (p *proc) parkWaiting(ctx context.Context) *pyError {
	p.publish(PhaseWaiting)
	p.seq.Exited(p.id)
	<-ctx.Done()
	return nil
}

// servesLater: the process does something once it serves — binds or listens at StageServing,
// dials a peer, or refuses an engine's READY.
func (p *proc) servesLater() bool {
	if p.readyRefusal != "" || len(p.held.bound) > 0 || len(p.stepsAt(vllm.StageServing)) > 0 {
		return true
	}
	return slices.ContainsFunc(p.plan.Addresses, func(a vllm.AddressPlan) bool {
		return a.Exercised && a.Role == report.AddressConnect
	})
}

// park holds a process whose children will not all come up until it is stopped: when one of
// them failed, its failure path ends this process; when one hung (below it), it says it waits
// for ever (PhaseWaiting), which settles it.
func (p *proc) park(ctx context.Context) *pyError {
	hung := false
	for _, c := range p.plan.Children {
		eachPlan(c, func(q *vllm.ProcessPlan) {
			if rec := p.fam.record(q.Identity.ID); rec != nil && rec.Hung != nil {
				hung = true
			}
		})
	}
	if hung {
		p.publish(PhaseWaiting)
		// No later binder of the host waits for its turns: it never takes them.
		p.seq.Exited(p.id)
	}
	<-ctx.Done()
	return nil
}

func (p *proc) waitUp(ctx context.Context, procs []*vllm.ProcessPlan) bool {
	deadline := time.NewTimer(p.waitBound())
	defer deadline.Stop()
	for {
		up := true
		for _, c := range procs {
			rec, ph := p.fam.record(c.Identity.ID), p.fam.phase(c.Identity.ID)
			switch {
			case rec != nil && (rec.Exit != nil || rec.Hung != nil), ph == PhaseExited:
				return false
			case !ph.up():
				up = false
			}
		}
		if up {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			p.log.Warn("children not up; going on anyway", "bound", p.waitBound())
			return true
		case <-p.fam.changed:
		}
	}
}

// closeAddresses releases what the process holds; a creator of a shared file unlinks it.
func (p *proc) closeAddresses() {
	for _, s := range p.held.bound {
		s.Close()
	}
	for _, l := range p.held.listeners {
		if err := l.Close(); err != nil {
			p.log.Warn("close address", "endpoint", l.Endpoint(), "err", err)
		}
	}
	for _, s := range p.held.shared {
		if err := s.Close(); err != nil {
			p.log.Warn("release shared file", "err", err)
		}
	}
}
