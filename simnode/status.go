package simnode

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/widetp/widetp/fakestore/api"
	"github.com/widetp/widetp/fakestore/client"
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/vllm"
)

// maxPending caps the processes a node status names as keeping it from settling: enough to tell
// which step hangs, short enough for a one-line time-out message.
const maxPending = 5

// memberView is what the supervisor knows of one process from the status lines.
type memberView struct {
	record *report.Process
	phase  Phase
}

// view copies the supervisor's knowledge of every process below it.
func (f *family) view() map[string]memberView {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]memberView, len(f.members))
	for id, mb := range f.members {
		out[id] = memberView{record: mb.record, phase: mb.phase}
	}
	return out
}

// nodeStatus derives the node's status from its plan and what its processes said, without any
// outside prediction: the node's own plan says which processes can start and which react to a
// child's failure. A process is settled when it exited; when it hung (a step that never returns:
// nothing more happens there by itself), or waits for a process below it that hung
// (PhaseWaiting); when it is ready and will not react to a failed child (vLLM's engine managers
// raise, or stop their other children, when one dies: ChildFailure, StopsOnChildFailure); or when
// it never said anything and never will, because an ancestor (or its own start) is gone. Anything else — started but silent, starting, about to
// react — keeps the node unsettled.
func nodeStatus(host string, plan *vllm.NodePlan, members map[string]memberView, failedStart map[string]bool) api.NodeStatus {
	st := api.NodeStatus{Host: host, Settled: true}
	pending := func(id string) {
		st.Settled = false
		if len(st.Pending) < maxPending {
			st.Pending = append(st.Pending, id)
		}
	}
	exited := func(id string) bool {
		m, ok := members[id]
		return ok && (m.phase == PhaseExited || (m.record != nil && m.record.Exit != nil))
	}
	failed := func(id string) bool {
		m := members[id]
		if m.record == nil || m.record.Exit == nil {
			// Its parent posted the exit of a child that died silently; the parent saw it fail.
			return m.phase == PhaseExited
		}
		return m.record.Exit.Code != 0 || m.record.Exit.Signal != ""
	}
	var walk func(p *vllm.ProcessPlan, gone bool)
	walk = func(p *vllm.ProcessPlan, gone bool) {
		id := p.Identity.ID
		m, seen := members[id]
		switch {
		case failedStart[id]:
			gone = true
		case exited(id):
			st.Processes++
			st.Exited++
			gone = true
		case !seen || m.record == nil:
			if !gone {
				pending(id)
			}
		case m.record.Hung != nil:
			// A hung process never moves again by itself, and never starts its children.
			st.Processes++
			gone = true
		case m.record.Ready:
			st.Processes++
			st.Ready++
			if p.ChildFailure != "" || p.StopsOnChildFailure {
				if slices.ContainsFunc(p.Children, func(c *vllm.ProcessPlan) bool { return exited(c.Identity.ID) && failed(c.Identity.ID) }) {
					pending(id)
				}
			}
		case m.phase == PhaseWaiting:
			// It waits for a process below it that hung: nothing more happens there either.
			st.Processes++
		default:
			st.Processes++
			pending(id)
		}
		for _, c := range p.Children {
			walk(c, gone)
		}
	}
	for _, c := range plan.Commands {
		walk(c, false)
	}
	return st
}

// unsettledGap is the least time between two posts of an unsettled status. Only settled statuses
// decide anything (a harness waits for them; a status of a later step is told apart by its Acts
// and Boot, not by its time); an unsettled one says which processes keep the node busy, for the
// harness's time-out message, and at most this stale serves that as well. A node's status changes
// with every step of every process: posting each change was 1,060 posts in a 64-host run (some 17
// a node), each one also a wake-up of the harness's wait; 407 now.
const unsettledGap = 500 * time.Millisecond

// statusPoster posts a node's status whenever it changes, from its own goroutine so that a slow
// store never holds up the supervisor's loop; a status that changes again before it was posted is
// replaced by the newer one (each carries everything). A settled status is posted at once; an
// unsettled one no sooner than its gap (unsettledGap) after the previous unsettled post.
type statusPoster struct {
	store   *client.Client
	timeout time.Duration
	log     *slog.Logger
	gap     time.Duration

	mu     sync.Mutex
	last   api.NodeStatus // the last status handed in
	next   *api.NodeStatus
	seq    int
	boot   int64
	wake   chan struct{}
	closed chan struct{}
	done   chan struct{}
}

// newStatusPoster posts through store, each post bounded by timeout, unsettled ones gap apart
// (unsettledGap).
func newStatusPoster(store *client.Client, timeout, gap time.Duration, log *slog.Logger) *statusPoster {
	s := &statusPoster{store: store, timeout: timeout, log: log, gap: gap, boot: time.Now().UnixNano(),
		wake: make(chan struct{}, 1), closed: make(chan struct{}), done: make(chan struct{})}
	go s.run()
	return s
}

// update hands in the current status; it is posted when it differs from the previous one.
func (s *statusPoster) update(st api.NodeStatus) {
	s.mu.Lock()
	if s.seq > 0 && sameStatus(s.last, st) {
		s.mu.Unlock()
		return
	}
	s.seq++
	st.Seq, st.Boot = s.seq, s.boot
	s.last = st
	s.next = &st
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func sameStatus(a, b api.NodeStatus) bool {
	return a.Settled == b.Settled && a.Acts == b.Acts && a.Processes == b.Processes && a.Ready == b.Ready && a.Exited == b.Exited &&
		slices.Equal(a.Pending, b.Pending)
}

func (s *statusPoster) run() {
	defer close(s.done)
	// hold runs out the gap after an unsettled post; nil when none runs.
	var hold <-chan time.Time
	for {
		select {
		case <-s.wake:
			if hold != nil && !s.nextSettled() {
				continue // posted when the gap ends
			}
		case <-hold:
		case <-s.closed:
			s.post()
			return
		}
		hold = nil
		if s.post() {
			hold = time.After(s.gap)
		}
	}
}

// nextSettled reports whether the status waiting to be posted is a settled one.
func (s *statusPoster) nextSettled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next != nil && s.next.Settled
}

// post posts the status waiting to be posted, if any, and reports whether it was an unsettled one.
func (s *statusPoster) post() (unsettled bool) {
	s.mu.Lock()
	st := s.next
	s.next = nil
	s.mu.Unlock()
	if st == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	if err := s.store.PostNodeStatus(ctx, *st); err != nil {
		// The next change posts everything again; a harness that misses the last one runs into
		// its own bound and says which node never settled.
		s.log.Warn("post node status", "err", err)
	}
	return !st.Settled
}

// close posts the last status handed in, if it is not posted yet, and stops.
func (s *statusPoster) close() {
	close(s.closed)
	<-s.done
}
