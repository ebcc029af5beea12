package simnode

import (
	"context"
	"time"
)

// The host's rendezvous relay (rendezvous.Relay): the processes of a host that wait for the same
// rank 0 take turns at trying it, through the sequencer they all keep a connection to. The first
// that asks leads and paces its own attempts; the others wait until one of the host's processes
// connects (then all try at once) or the leader stops trying (then the next in line leads). A
// process that dies stops trying: its connection closes.

// reachWait is one address the host's processes are waiting for.
type reachWait struct {
	leader  string
	waiters []reachWaiter // in the order they asked
}

type reachWaiter struct {
	id    string
	reply func(seqReply)
}

// reachLocked: id's connect to addr failed; it leads, or waits for the leader's news.
func (s *sequencer) reachLocked(id, addr string, reply func(seqReply)) {
	w := s.reach[addr]
	if w == nil {
		w = &reachWait{}
		s.reach[addr] = w
	}
	if w.leader == "" || w.leader == id {
		w.leader = id
		go reply(seqReply{Lead: true})
		return
	}
	w.waiters = append(w.waiters, reachWaiter{id: id, reply: reply})
}

// reachedLocked: a process connected to addr; everyone waiting for it tries now.
func (s *sequencer) reachedLocked(addr string) {
	w := s.reach[addr]
	if w == nil {
		return
	}
	delete(s.reach, addr)
	for _, x := range w.waiters {
		go x.reply(seqReply{Reached: true})
	}
}

// quitReachLocked: id stopped trying addr (it gave up, or died); if it led, the next waiter does.
func (s *sequencer) quitReachLocked(id, addr string) {
	w := s.reach[addr]
	if w == nil {
		return
	}
	kept := w.waiters[:0]
	for _, x := range w.waiters {
		if x.id != id {
			kept = append(kept, x)
		}
	}
	w.waiters = kept
	if w.leader != id {
		return
	}
	w.leader = ""
	if len(w.waiters) == 0 {
		delete(s.reach, addr)
		return
	}
	next := w.waiters[0]
	w.waiters = w.waiters[1:]
	w.leader = next.id
	go next.reply(seqReply{Lead: true})
}

// quitAllReachLocked: id died; it tries nothing any more.
func (s *sequencer) quitAllReachLocked(id string) {
	for addr := range s.reach {
		s.quitReachLocked(id, addr)
	}
}

// seqRelay is a process's side of the relay (rendezvous.Relay).
type seqRelay struct {
	c *seqClient
	// bound is the wait when the caller's context has no deadline.
	bound time.Duration
}

func (r seqRelay) Wait(ctx context.Context, addr string) (bool, error) {
	bound := r.bound
	if d, ok := ctx.Deadline(); ok {
		bound = time.Until(d)
	}
	rep, err := r.c.await(ctx, seqRequest{Op: "reach", Addr: addr}, bound)
	return rep.Lead, err
}

func (r seqRelay) Reached(addr string) { r.c.send(seqRequest{Op: "reached", Addr: addr}) }

func (r seqRelay) Quit(addr string) { r.c.send(seqRequest{Op: "reach-quit", Addr: addr}) }
