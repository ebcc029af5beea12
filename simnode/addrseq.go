package simnode

import (
	"context"
	"fmt"
	"time"

	"github.com/widetp/widetp/vllm"
)

// The sequencer also orders each stage's address binds and opens on the host (vllm.StepOrder):
// a process binds when every earlier one of its stage bound or died, so that the later binder of
// one port is the one the kernel refuses, and the first opener of a shared file is the one the
// model names — every run. The turn numbers run across stages: they are the host's BindSeq.

// stepSeq is one stage's order.
type stepSeq struct {
	order []string
	in    map[string]bool
	bound map[string]bool
	next  int
	turns map[string]chan int
}

func newAddrSeqs(plan *vllm.NodePlan) map[vllm.Stage]*stepSeq {
	out := map[vllm.Stage]*stepSeq{}
	for _, st := range []vllm.Stage{vllm.StageConfig, vllm.StageEngineInit, vllm.StageConnectorInit, vllm.StageServing} {
		ss := &stepSeq{order: vllm.StepOrder(plan, st), in: map[string]bool{}, bound: map[string]bool{}, turns: map[string]chan int{}}
		for _, id := range ss.order {
			ss.in[id] = true
		}
		out[st] = ss
	}
	return out
}

// addrOpLocked handles addr-turn and addr-bound; it returns an error text for a request the plan
// does not allow.
func (s *sequencer) addrOpLocked(id string, req seqRequest, reply func(seqReply)) string {
	ss := s.addr[req.Stage]
	if ss == nil || !ss.in[id] {
		return fmt.Sprintf("%s asked for %s at stage %q, where its plan binds nothing", id, req.Op, req.Stage)
	}
	if req.Op == "addr-bound" {
		ss.bound[id] = true
		return ""
	}
	ch := make(chan int, 1)
	ss.turns[id] = ch
	go func() {
		if t, ok := <-ch; ok {
			reply(seqReply{Turn: t})
		}
	}()
	return ""
}

// advanceAddrLocked grants each stage's due turn when its process asks for it.
func (s *sequencer) advanceAddrLocked() {
	for _, st := range []vllm.Stage{vllm.StageConfig, vllm.StageEngineInit, vllm.StageConnectorInit, vllm.StageServing} {
		ss := s.addr[st]
		if ss == nil {
			continue
		}
		for ss.next < len(ss.order) {
			id := ss.order[ss.next]
			if ss.bound[id] || s.deadLocked(id) {
				if ch, ok := ss.turns[id]; ok {
					close(ch) // a dead asker gets no turn
					delete(ss.turns, id)
				}
				ss.next++
				continue
			}
			if ch, ok := ss.turns[id]; ok {
				s.addrGranted++
				ch <- s.addrGranted
				close(ch)
				delete(ss.turns, id)
			}
			break
		}
	}
}

// hostBoundLocked: every address step of the host's plan, at every stage, happened or its
// process died.
func (s *sequencer) hostBoundLocked() bool {
	for _, ss := range s.addr {
		if ss.next < len(ss.order) {
			return false
		}
	}
	return true
}

// HostBound waits until every address step the host's plan has, at every stage, happened or its
// process died: what a request finds once the deployment serves.
func (c *seqClient) HostBound(ctx context.Context, bound time.Duration) error {
	_, err := c.await(ctx, seqRequest{Op: "host-bound"}, bound)
	return err
}

// AddrTurn waits for this process's bind turn at stage st and returns the host's bind order.
func (c *seqClient) AddrTurn(ctx context.Context, st vllm.Stage, bound time.Duration) (int, error) {
	rep, err := c.await(ctx, seqRequest{Op: "addr-turn", Stage: st}, bound)
	return rep.Turn, err
}

// AddrBound tells the sequencer this process's binds of stage st happened (or failed: it is about
// to die, and the next binder must not wait for that).
func (c *seqClient) AddrBound(st vllm.Stage) error {
	return c.send(seqRequest{Op: "addr-bound", Stage: st})
}
