package simnode

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"time"

	"github.com/widetp/widetp/vllm"
)

// The bind sequencer makes one host's lookup-server binds happen in the model's BindSeq order, and
// holds its lookup clients back until every planned bind happened or its process died (the
// "serving" phase: vLLM's schedulers look up when requests arrive, after start-up). With it, the
// last binder of a colliding path is the one libzmq routes new clients to — the takeover itself is
// libzmq's — and a run reproduces. A process that died before its turn is skipped.
//
// It orders the host's handshake binds the same way (vllm.RendezvousPlan.BindsEarly): binders
// bind in plan order (commands in order, then tree order), and each starts its children only
// once every other binder of the host bound or died — so no child's failure ends a binder (and
// frees its address) before a later binder of that address tried it, and the later binder in
// plan order is the one whose bind fails, as the model predicts.
//
// The supervisor runs it on a unix socket; every process of the host says hello on start and keeps
// the connection for its life, so a closed connection is a dead process. A process that never said
// hello is dead once any ancestor is (vLLM's children die with their parents; Pdeathsig here), and
// parents report every child exit they see.
type sequencer struct {
	ln net.Listener

	mu      sync.Mutex
	binders []string          // bind order
	isBind  map[string]bool   //
	parent  map[string]string // every planned process of the host -> its parent ("" for a top process)
	hello   map[string]bool
	dead    map[string]bool
	bound   map[string]bool
	next    int // index into binders of the bind that is due
	granted int // binds granted so far
	turns   map[string]chan int
	serving []chan struct{}
	// hostBound are the processes waiting for every address step of the host (HostBound).
	hostBound []chan struct{}

	// The handshake binds: hsBinders in plan order, hsNext the one that is due.
	hsBinders []string
	hsIsBind  map[string]bool
	hsBound   map[string]bool
	hsNext    int
	hsTurns   map[string]chan int
	hsWaiters []hsWaiter
	conns     map[net.Conn]bool
	// addr orders the address binds and opens of each stage (addrseq.go).
	addr        map[vllm.Stage]*stepSeq
	addrGranted int
	// reach is the host's rendezvous relay, by address (reach.go).
	reach  map[string]*reachWait
	closed bool
	wg     sync.WaitGroup
	// changed is broadcast after every state change, for whoever waits on the state (await).
	changed *sync.Cond
}

// hsWaiter is a binder waiting for every other binder of the host to bind or die.
type hsWaiter struct {
	id string
	ch chan struct{}
}

// seqRequest and seqReply are the sequencer's line protocol.
type seqRequest struct {
	// Tag is the client's number for a request it awaits an answer to; the answer carries it back,
	// so that answers reach the wait that asked, whatever order they come in, and an answer to a
	// wait that gave up is dropped instead of being taken for the next one.
	Tag uint64 `json:"tag,omitempty"`
	Op  string `json:"op"` // hello, turn, bound, serving, host-bound, exited, hs-turn, hs-bound, hs-all, addr-turn, addr-bound, reach, reached, reach-quit
	ID  string `json:"id,omitempty"`
	// Addr names the rendezvous address of reach, reached and reach-quit.
	Addr string `json:"addr,omitempty"`
	// Stage names the address stage of addr-turn and addr-bound.
	Stage vllm.Stage `json:"stage,omitempty"`
}

type seqReply struct {
	// Tag is the request's (seqRequest.Tag). It is 0 on an error that answers a request nobody
	// awaits (a refused hello) or a line the sequencer could not read; the sequencer closes the
	// connection after either.
	Tag     uint64 `json:"tag,omitempty"`
	Turn    int    `json:"turn,omitempty"`
	Serving bool   `json:"serving,omitempty"`
	// HandshakesBound answers hs-all.
	HandshakesBound bool `json:"handshakes_bound,omitempty"`
	// Lead and Reached answer reach: keep trying the address yourself, or another process of the
	// host just connected to it.
	Lead    bool   `json:"lead,omitempty"`
	Reached bool   `json:"reached,omitempty"`
	Error   string `json:"error,omitempty"`
}

// newSequencer plans the binds of a node and listens at path.
func newSequencer(plan *vllm.NodePlan, path string) (*sequencer, error) {
	s := &sequencer{
		isBind: map[string]bool{}, parent: map[string]string{}, hello: map[string]bool{},
		dead: map[string]bool{}, bound: map[string]bool{}, turns: map[string]chan int{}, conns: map[net.Conn]bool{},
		hsIsBind: map[string]bool{}, hsBound: map[string]bool{}, hsTurns: map[string]chan int{},
		reach: map[string]*reachWait{},
	}
	s.changed = sync.NewCond(&s.mu)
	type binder struct {
		id       string
		seq, ord int
	}
	var bs []binder
	var walk func(p *vllm.ProcessPlan, parent string)
	walk = func(p *vllm.ProcessPlan, parent string) {
		id := p.Identity.ID
		s.parent[id] = parent
		if p.BindsLookup {
			bs = append(bs, binder{id, p.Identity.BindSeq, len(bs)})
		}
		if bindsEarly(p) {
			s.hsBinders = append(s.hsBinders, id)
			s.hsIsBind[id] = true
		}
		for _, c := range p.Children {
			walk(c, id)
		}
	}
	for _, c := range plan.Commands {
		walk(c, "")
	}
	// BindSeq first (the model's order); plan order breaks ties, so a plan without BindSeqs binds
	// in command order, then depth-first.
	sort.SliceStable(bs, func(i, j int) bool { return bs[i].seq < bs[j].seq })
	for _, b := range bs {
		s.binders = append(s.binders, b.id)
		s.isBind[b.id] = true
	}
	s.addr = newAddrSeqs(plan)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("start bind sequencer at %s: %w", path, err)
	}
	s.ln = ln
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

func (s *sequencer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(c)
	}
}

func (s *sequencer) serve(c net.Conn) {
	defer s.wg.Done()
	id := ""
	defer func() {
		c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		if id != "" {
			s.dead[id] = true
			s.quitAllReachLocked(id)
			s.advanceLocked()
		}
		s.mu.Unlock()
	}()
	enc := json.NewEncoder(c)
	var wmu sync.Mutex
	reply := func(r seqReply) {
		wmu.Lock()
		defer wmu.Unlock()
		enc.Encode(r)
	}
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		var req seqRequest
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			reply(seqReply{Error: fmt.Sprintf("bad request %q: %v", sc.Text(), err)})
			return
		}
		answer := func(r seqReply) {
			r.Tag = req.Tag
			reply(r)
		}
		s.mu.Lock()
		switch {
		case req.Op == "hello":
			if _, planned := s.parent[req.ID]; !planned || id != "" {
				s.mu.Unlock()
				answer(seqReply{Error: fmt.Sprintf("hello from %q: not a planned process of this host, or a second hello", req.ID)})
				return
			}
			id = req.ID
			s.hello[id] = true
		case id == "":
			s.mu.Unlock()
			answer(seqReply{Error: fmt.Sprintf("%s before hello", req.Op)})
			return
		case req.Op == "turn":
			if !s.isBind[id] {
				s.mu.Unlock()
				answer(seqReply{Error: fmt.Sprintf("%s asked for a bind turn but its plan binds nothing", id)})
				return
			}
			ch := make(chan int, 1)
			s.turns[id] = ch
			go func() {
				if t, ok := <-ch; ok {
					answer(seqReply{Turn: t})
				}
			}()
		case req.Op == "bound":
			s.bound[id] = true
		case req.Op == "hs-turn" || req.Op == "hs-all":
			if !s.hsIsBind[id] {
				s.mu.Unlock()
				answer(seqReply{Error: fmt.Sprintf("%s asked for %s but its plan binds no handshake", id, req.Op)})
				return
			}
			if req.Op == "hs-turn" {
				ch := make(chan int, 1)
				s.hsTurns[id] = ch
				go func() {
					if t, ok := <-ch; ok {
						answer(seqReply{Turn: t})
					}
				}()
				break
			}
			w := hsWaiter{id: id, ch: make(chan struct{})}
			s.hsWaiters = append(s.hsWaiters, w)
			go func() {
				<-w.ch
				answer(seqReply{HandshakesBound: true})
			}()
		case req.Op == "hs-bound":
			s.hsBound[id] = true
		case req.Op == "addr-turn" || req.Op == "addr-bound":
			if e := s.addrOpLocked(id, req, answer); e != "" {
				s.mu.Unlock()
				answer(seqReply{Error: e})
				return
			}
		case req.Op == "serving" || req.Op == "host-bound":
			ch := make(chan struct{})
			if req.Op == "serving" {
				s.serving = append(s.serving, ch)
			} else {
				s.hostBound = append(s.hostBound, ch)
			}
			go func() {
				<-ch
				answer(seqReply{Serving: true})
			}()
		case req.Op == "reach":
			s.reachLocked(id, req.Addr, answer)
		case req.Op == "reached":
			s.reachedLocked(req.Addr)
		case req.Op == "reach-quit":
			s.quitReachLocked(id, req.Addr)
		case req.Op == "exited":
			if _, planned := s.parent[req.ID]; planned {
				s.dead[req.ID] = true
			}
		default:
			s.mu.Unlock()
			answer(seqReply{Error: fmt.Sprintf("unknown op %q", req.Op)})
			return
		}
		s.advanceLocked()
		s.mu.Unlock()
	}
}

// exited marks a process dead (the supervisor saw a top process exit).
func (s *sequencer) exited(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dead[id] = true
	s.advanceLocked()
}

// deadLocked: the process died, or never started and never will (an ancestor is dead).
func (s *sequencer) deadLocked(id string) bool {
	if s.dead[id] {
		return true
	}
	if s.hello[id] {
		return false
	}
	for a := s.parent[id]; a != ""; a = s.parent[a] {
		if s.dead[a] {
			return true
		}
	}
	return false
}

// await blocks until cond holds over the sequencer's state (evaluated under its lock) or bound
// passes, and reports whether it held.
func (s *sequencer) await(cond func() bool, bound time.Duration) bool {
	t := time.AfterFunc(bound, func() {
		s.mu.Lock()
		s.changed.Broadcast()
		s.mu.Unlock()
	})
	defer t.Stop()
	deadline := time.Now().Add(bound)
	s.mu.Lock()
	defer s.mu.Unlock()
	for !cond() {
		if !time.Now().Before(deadline) {
			return false
		}
		s.changed.Wait()
	}
	return true
}

// advanceLocked grants the due turn when its process asks for it and, once no bind is left,
// releases the lookup clients.
func (s *sequencer) advanceLocked() {
	defer s.changed.Broadcast()
	s.advanceHandshakesLocked()
	s.advanceAddrLocked()
	if len(s.hostBound) > 0 && s.hostBoundLocked() {
		for _, ch := range s.hostBound {
			close(ch)
		}
		s.hostBound = nil
	}
	for s.next < len(s.binders) {
		id := s.binders[s.next]
		if s.bound[id] || s.deadLocked(id) {
			if ch, ok := s.turns[id]; ok {
				close(ch) // a dead asker gets no turn
				delete(s.turns, id)
			}
			s.next++
			continue
		}
		if ch, ok := s.turns[id]; ok {
			s.granted++
			ch <- s.granted
			close(ch)
			delete(s.turns, id)
		}
		return
	}
	for _, ch := range s.serving {
		close(ch)
	}
	s.serving = nil
}

// advanceHandshakesLocked grants the due handshake bind turn when its process asks for it, and
// releases each waiting binder once every other binder bound or died. A binder below the waiter
// (none in vLLM's trees) does not hold it up: it cannot start before the waiter starts its children.
func (s *sequencer) advanceHandshakesLocked() {
	for s.hsNext < len(s.hsBinders) {
		id := s.hsBinders[s.hsNext]
		if s.hsBound[id] || s.deadLocked(id) {
			if ch, ok := s.hsTurns[id]; ok {
				close(ch)
				delete(s.hsTurns, id)
			}
			s.hsNext++
			continue
		}
		if ch, ok := s.hsTurns[id]; ok {
			ch <- s.hsNext + 1
			close(ch)
			delete(s.hsTurns, id)
		}
		break
	}
	waiting := s.hsWaiters[:0]
	for _, w := range s.hsWaiters {
		done := true
		for _, id := range s.hsBinders[s.hsNext:] {
			if id != w.id && !s.below(id, w.id) {
				done = false
				break
			}
		}
		if done {
			close(w.ch)
		} else {
			waiting = append(waiting, w)
		}
	}
	s.hsWaiters = waiting
}

// below: id is a descendant of ancestor.
func (s *sequencer) below(id, ancestor string) bool {
	for a := s.parent[id]; a != ""; a = s.parent[a] {
		if a == ancestor {
			return true
		}
	}
	return false
}

// bindsEarly: the process binds a handshake before it starts its children.
func bindsEarly(p *vllm.ProcessPlan) bool {
	for _, r := range p.Rendezvous {
		if r.BindsEarly && r.Rank == 0 {
			return true
		}
	}
	return false
}

// close stops the sequencer and drops every connection.
func (s *sequencer) close() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.ln.Close()
	s.wg.Wait()
}

// seqClient is a process's connection to its host's sequencer. Its waits may overlap: each
// request it awaits carries a tag, and one reader hands every answer to the wait with that tag.
type seqClient struct {
	conn net.Conn
	wmu  sync.Mutex

	mu      sync.Mutex
	tag     uint64
	pending map[uint64]chan seqReply
	// done is closed when the connection ends; err, written before, says why.
	done chan struct{}
	err  error
}

func dialSequencer(path, id string) (*seqClient, error) {
	if path == "" {
		return nil, errors.New("no bind sequencer given")
	}
	conn, err := net.Dial("unix", path)
	if err != nil {
		return nil, fmt.Errorf("connect to bind sequencer %s: %w", path, err)
	}
	c := &seqClient{conn: conn, pending: map[uint64]chan seqReply{}, done: make(chan struct{})}
	go c.read()
	if err := c.send(seqRequest{Op: "hello", ID: id}); err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// read hands each answer to the wait that asked for it, until the connection ends. An answer
// nobody waits for any more (its wait ran out) is dropped.
func (c *seqClient) read() {
	sc := bufio.NewScanner(c.conn)
	var why error
	for sc.Scan() {
		var rep seqReply
		if err := json.Unmarshal(sc.Bytes(), &rep); err != nil {
			why = fmt.Errorf("unreadable answer %q: %w", sc.Text(), err)
			c.conn.Close()
			break
		}
		if rep.Tag == 0 {
			// An untagged error (a refused hello, an unreadable line): the sequencer closes the
			// connection next, and every wait ends with this error.
			why = errors.New(rep.Error)
			continue
		}
		c.mu.Lock()
		ch := c.pending[rep.Tag]
		delete(c.pending, rep.Tag)
		c.mu.Unlock()
		if ch != nil {
			ch <- rep
		}
	}
	if why == nil {
		why = sc.Err()
	}
	if why == nil {
		why = errors.New("the sequencer closed the connection")
	}
	c.err = why
	close(c.done)
}

func (c *seqClient) send(r seqRequest) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	b, _ := json.Marshal(r)
	if _, err := c.conn.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("bind sequencer %s: %w", r.Op, err)
	}
	return nil
}

// await sends r and waits for its answer, bounded by ctx and bound.
func (c *seqClient) await(ctx context.Context, r seqRequest, bound time.Duration) (seqReply, error) {
	ch := make(chan seqReply, 1)
	c.mu.Lock()
	c.tag++
	r.Tag = c.tag
	c.pending[r.Tag] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, r.Tag)
		c.mu.Unlock()
	}()
	if err := c.send(r); err != nil {
		return seqReply{}, err
	}
	t := time.NewTimer(bound)
	defer t.Stop()
	var rep seqReply
	select {
	case rep = <-ch:
	case <-ctx.Done():
		return seqReply{}, ctx.Err()
	case <-t.C:
		return seqReply{}, fmt.Errorf("bind sequencer %s: no answer within %v", r.Op, bound)
	case <-c.done:
		select {
		case rep = <-ch: // answered just before the end
		default:
			return seqReply{}, fmt.Errorf("bind sequencer %s: no answer: %w", r.Op, c.err)
		}
	}
	if rep.Error != "" {
		return rep, fmt.Errorf("bind sequencer %s: %s", r.Op, rep.Error)
	}
	return rep, nil
}

// Turn waits for this process's bind turn and returns the host-local bind order (1, 2, ...).
func (c *seqClient) Turn(ctx context.Context, bound time.Duration) (int, error) {
	rep, err := c.await(ctx, seqRequest{Op: "turn"}, bound)
	return rep.Turn, err
}

// Bound tells the sequencer this process's bind happened.
func (c *seqClient) Bound() error { return c.send(seqRequest{Op: "bound"}) }

// Serving waits until every planned bind of the host happened or its process died.
func (c *seqClient) Serving(ctx context.Context, bound time.Duration) error {
	_, err := c.await(ctx, seqRequest{Op: "serving"}, bound)
	return err
}

// HandshakeTurn waits for this process's handshake bind turn (1, 2, ... in plan order).
func (c *seqClient) HandshakeTurn(ctx context.Context, bound time.Duration) (int, error) {
	rep, err := c.await(ctx, seqRequest{Op: "hs-turn"}, bound)
	return rep.Turn, err
}

// HandshakeBound tells the sequencer this process's handshake binds happened (or failed: it is
// about to die, and the next binder must not wait for that).
func (c *seqClient) HandshakeBound() error { return c.send(seqRequest{Op: "hs-bound"}) }

// HandshakesBound waits until every other handshake binder of the host bound or died.
func (c *seqClient) HandshakesBound(ctx context.Context, bound time.Duration) error {
	_, err := c.await(ctx, seqRequest{Op: "hs-all"}, bound)
	return err
}

// Exited reports a child's exit.
func (c *seqClient) Exited(id string) error { return c.send(seqRequest{Op: "exited", ID: id}) }

func (c *seqClient) Close() error { return c.conn.Close() }
