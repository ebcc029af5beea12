package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/widetp/widetp/check"
	"github.com/widetp/widetp/fakestore/api"
	"github.com/widetp/widetp/internal/nodeapi"
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/scenarios"
	"github.com/widetp/widetp/simnode/mooncake"
)

// The fault timeline of a scenario (its `faults:`), followed on a settled cluster: each step waits
// for its trigger on the store's event log, acts through the Runtime or the store, and the
// cluster settles again before the checks run; the deaths a step caused are the step's, not
// infrastructure failures. The Runtime's Kill, Restart, Pause and Unpause act on hosts; its Exec
// reaches a host's node program for single processes (`widetp node ctl`).

// timeline is what a cluster remembers of the steps it ran, to rewrite the records the store
// holds: the store keeps each process's last word, and a process killed with its node never
// says that it died.
type timeline struct {
	mu sync.Mutex
	// killed maps a host whose program a step killed to the step.
	killed map[string]string
	// restarts are the processes of restarted hosts: how often, and who they were before.
	restarts map[string]int
	before   map[string]report.Identity
	// storeStep is the time of the last store step (zero: none ran); registrations are read
	// then, and remounts counted from it.
	storeStep time.Time
	// partitions are the store faults each partition step added, by step name (a heal removes them).
	partitions map[string][]string
	// hostCuts are the partition steps between hosts that the runtime holds, by step name.
	hostCuts map[string]bool
	steps    []report.Step
	// ended are the processes a kill step of single processes ended (the target and what went
	// down with it), by the pid of the instance that step ended.
	ended map[string]endedBy
	// found is every violation found after start-up or after a step.
	found []report.Violation
}

type endedBy struct {
	pid  int
	step string
}

// ErrFaultUnsupported is a step a live runtime cannot take yet; the run reports it as an
// infrastructure failure, never as a pass.
var ErrFaultUnsupported = errors.New("not supported by the live runtimes yet")

// RunTimeline follows the scenario's fault steps on a settled cluster, in order. Each step is
// recorded with its time, what it did and the violations first found after it (report.Step);
// Report then carries the steps, the records as the steps left them and every violation found
// at any point. A scenario without faults does nothing. The whole timeline is bounded by one
// settle bound per step.
func (c *Cluster) RunTimeline(ctx context.Context) error {
	if len(c.s.Faults) == 0 {
		return nil
	}
	if c.client == nil {
		return errors.New("timeline: the cluster's store never started")
	}
	t := c.timeline()
	origin := time.Now()
	defer c.timing("timeline", origin)
	procs, err := c.records(ctx)
	if err != nil {
		return fmt.Errorf("timeline: %w", err)
	}
	prev := check.Run(procs)
	t.mu.Lock()
	t.found = prev
	t.mu.Unlock()
	stolen := prev
	var from uint64 // where the previous step began in the store's event log
	for i, st := range c.s.Faults {
		since, err := c.lastSeq(ctx)
		if err != nil {
			return fmt.Errorf("timeline: step %s: %w", st.Name, err)
		}
		if err := c.waitTrigger(ctx, st, from); err != nil {
			return fmt.Errorf("timeline: step %s: wait for %s: %w", st.Name, st.After, err)
		}
		at := time.Since(c.born).Seconds()
		c.progressf("step %d/%d %s: %s", i+1, len(c.s.Faults), st.Name, st.Describe())
		effects, err := c.act(ctx, st, procs, since)
		if err != nil {
			return fmt.Errorf("timeline: step %s (%s): %w", st.Name, st.Describe(), err)
		}
		c.progressf("step %d/%d %s done: %s", i+1, len(c.s.Faults), st.Name, strings.Join(effects, "; "))
		if procs, err = c.records(ctx); err != nil {
			return fmt.Errorf("timeline: step %s: %w", st.Name, err)
		}
		vs := check.Run(procs)
		found := check.New(prev, vs)
		if st.Action == scenarios.ActStealPort {
			// It acted during start-up: what the settled deployment showed is its doing.
			found, stolen = stolen, []report.Violation{}
			effects = stealEffect(st, procs)
		}
		t.mu.Lock()
		t.steps = append(t.steps, report.Step{Name: st.Name, Action: st.Describe(), After: st.After.String(), At: at,
			Effects: effects, Violations: found})
		t.found = check.Union(t.found, vs)
		t.mu.Unlock()
		prev, from = vs, since
	}
	return nil
}

func (c *Cluster) timeline() *timeline {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tl == nil {
		c.tl = &timeline{killed: map[string]string{}, restarts: map[string]int{}, before: map[string]report.Identity{},
			partitions: map[string][]string{}, ended: map[string]endedBy{}, hostCuts: map[string]bool{}}
	}
	return c.tl
}

// records reads every process's record and rewrites it as the steps so far left it.
func (c *Cluster) records(ctx context.Context) ([]report.Process, error) {
	procs, err := c.client.Reports(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the processes' records: %w", err)
	}
	report.ResolveLookups(procs)
	report.ResolveAddresses(procs)
	if err := c.applyTimeline(ctx, procs); err != nil {
		return nil, err
	}
	return procs, nil
}

// current is the cluster's timeline, nil before RunTimeline.
func (c *Cluster) current() *timeline {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tl
}

// follow long-polls the store's event log after seq since and hands fn every event in order,
// until fn reports done (or fails) or ctx ends.
func (c *Cluster) follow(ctx context.Context, since uint64, fn func(api.Event) (done bool, err error)) error {
	for {
		resp, err := c.client.Events(ctx, since, eventSlice)
		if err != nil {
			return err
		}
		for _, e := range resp.Events {
			since = e.Seq
			if done, err := fn(e); done || err != nil {
				return err
			}
		}
		if len(resp.Events) == 0 && resp.LastSeq > since {
			since = resp.LastSeq
		}
	}
}

// splitTargets separates a step's host targets from its process targets.
func splitTargets(targets []string) (hosts, procs []string) {
	for _, t := range targets {
		if scenarios.IsProcess(t) {
			procs = append(procs, t)
		} else {
			hosts = append(hosts, t)
		}
	}
	return hosts, procs
}

// actProcesses kills or restarts single processes: the node program of each target's host does it
// (`widetp node ctl`, reached with the Runtime's Exec), and the step waits until that host posted a
// settled status that counts the request. A kill's consequences are the node's simulation of
// vLLM (a worker's executor and its engine go down with it); every process that was live before
// the step and exited after it, in the same instance (pid), exited because of the step.
func (c *Cluster) actProcesses(ctx context.Context, st scenarios.Step, targets []string, procs []report.Process, since uint64) ([]string, error) {
	t := c.timeline()
	op := nodeapi.CtlKill
	if st.Action == scenarios.ActRestart {
		op = nodeapi.CtlRestart
	}
	livePID := map[string]int{}
	for _, p := range procs {
		if p.Exit == nil {
			livePID[p.ID] = p.PID
		}
	}
	if op == nodeapi.CtlRestart {
		t.mu.Lock()
		for _, p := range procs {
			for _, tg := range targets {
				if p.ID == tg || strings.HasPrefix(p.ID, tg+"/") {
					if t.restarts[p.ID] == 0 {
						t.before[p.ID] = report.IdentityOf(p)
					}
					t.restarts[p.ID]++
				}
			}
		}
		t.mu.Unlock()
	}
	var effects []string
	for _, tg := range targets {
		host, _, _ := strings.Cut(tg, "/")
		from, err := c.lastSeq(ctx)
		if err != nil {
			return nil, err
		}
		out, err := c.rt.Exec(ctx, host, "node", nodeapi.CtlCommand, op, tg)
		var rep nodeapi.CtlReply
		if jerr := json.Unmarshal(bytes.TrimSpace(out), &rep); jerr != nil && err == nil {
			err = fmt.Errorf("the node's reply %q: %w", out, jerr)
		}
		if err != nil {
			if rep.Error != "" {
				return nil, fmt.Errorf("%s %s: the node of %s refused: %s", op, tg, host, rep.Error)
			}
			return nil, fmt.Errorf("%s %s: %w", op, tg, err)
		}
		if err := c.waitActs(ctx, host, rep.Acts, from); err != nil {
			return nil, fmt.Errorf("%s %s: %w", op, tg, err)
		}
		effects = append(effects, rep.Detail)
	}
	if op == nodeapi.CtlKill {
		after, err := c.client.Reports(ctx)
		if err != nil {
			return nil, fmt.Errorf("read the processes' records: %w", err)
		}
		var ended []string
		t.mu.Lock()
		for _, p := range after {
			if pid, ok := livePID[p.ID]; ok && p.Exit != nil && p.PID == pid {
				t.ended[p.ID] = endedBy{pid: pid, step: st.Name}
				ended = append(ended, p.ID)
			}
		}
		t.mu.Unlock()
		sort.Strings(ended)
		effects = append(effects, fmt.Sprintf("%d process(es) ended: %s", len(ended), strings.Join(ended, ", ")))
	} else {
		effects = append(effects, "the deployment settled again")
	}
	return effects, nil
}

// waitActs waits until host posted, after seq since, a settled status that counts acts control
// requests.
func (c *Cluster) waitActs(ctx context.Context, host string, acts int, since uint64) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.settle)
	defer cancel()
	err := c.follow(ctx, since, func(e api.Event) (bool, error) {
		if e.Plane != api.PlaneTest || e.Op != "nodes" || e.Method != "POST" || e.Key != host {
			return false, nil
		}
		sts, err := c.client.NodeStatuses(ctx)
		if err != nil {
			return false, err
		}
		for _, st := range sts {
			if st.Host == host && st.Acts >= acts && st.Settled {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("wait for %s to settle: %w", host, err)
	}
	return nil
}

// applyTimeline rewrites records as the steps left them: a process whose node a step killed has
// exited by that step (it could not report it), a process of a restarted node carries who it was
// before, and after a store step each worker carries what the store holds of its registration.
func (c *Cluster) applyTimeline(ctx context.Context, procs []report.Process) error {
	t := c.current()
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range procs {
		p := &procs[i]
		if step, ok := t.killed[p.Host]; ok && p.Exit == nil {
			p.Exit = &report.Exit{Code: -9, Signal: "SIGKILL", Expected: true, Error: "killed by step " + step}
		}
		if e, ok := t.ended[p.ID]; ok && p.Exit != nil && p.PID == e.pid && !p.Exit.Expected {
			x := *p.Exit
			x.Expected = true
			x.Error = strings.TrimSuffix("ended by step "+e.step+": "+x.Error, ": ")
			p.Exit = &x
		}
		if n := t.restarts[p.ID]; n > 0 {
			id := t.before[p.ID]
			p.Restarts, p.BeforeRestart = n, &id
		}
	}
	if t.storeStep.IsZero() {
		return nil
	}
	regs, _, err := c.client.Registrations(ctx)
	if err != nil {
		return fmt.Errorf("read the store's registrations: %w", err)
	}
	live := map[[2]string]bool{}
	remounts := map[string]int{}
	for _, r := range regs {
		live[[2]string{r.Kind, r.Name}] = r.Live
		if r.Kind == "segment" {
			for _, h := range r.History {
				if h.Op == "remount" && !h.Time.Before(t.storeStep) {
					remounts[r.Name]++
				}
			}
		}
	}
	for i := range procs {
		p := &procs[i]
		if p.Segment == "" || p.Exit != nil {
			continue
		}
		p.Registration = &report.Registration{
			Mounted:   live[[2]string{"segment", p.Segment}],
			Published: live[[2]string{"rpc_meta", p.Segment}] && live[[2]string{"ram", p.Segment}],
			Remounts:  remounts[p.Segment],
		}
	}
	return nil
}

func (c *Cluster) lastSeq(ctx context.Context) (uint64, error) {
	resp, err := c.client.Events(ctx, ^uint64(0)>>1, 0)
	if err != nil {
		return 0, fmt.Errorf("read the store's event log: %w", err)
	}
	return resp.LastSeq, nil
}

// waitTrigger waits for a step's trigger. The cluster is settled when a step's turn comes, so
// `settled` and `step` (an earlier one, done) hold already; an event is looked for in the log
// after seq from (the start of the previous step: an event of a node's run before a restart does
// not count), on the store's long poll, within the settle bound.
func (c *Cluster) waitTrigger(ctx context.Context, st scenarios.Step, from uint64) error {
	if st.After.Kind != scenarios.AfterEvent {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.settle)
	defer cancel()
	if st.After.Event == scenarios.EventExpired {
		var w expiryWait
		return c.follow(ctx, from, func(e api.Event) (bool, error) { return c.expiredAll(ctx, st.After, e, &w) })
	}
	return c.follow(ctx, from, func(e api.Event) (bool, error) { return c.matches(ctx, st.After, e) })
}

// matches reports whether event e is the trigger's event (scenarios.Events).
func (c *Cluster) matches(ctx context.Context, tr scenarios.Trigger, e api.Event) (bool, error) {
	inScope := func(id string) bool {
		return (tr.Process == "" || id == tr.Process) && (tr.Host == "" || strings.HasPrefix(id, tr.Host+"/"))
	}
	switch tr.Event {
	case scenarios.EventReady, scenarios.EventExited:
		if e.Plane != api.PlaneTest || e.Op != "reports" || e.Method != "POST" || !inScope(e.Process) {
			return false, nil
		}
		p, ok, err := c.latestReport(ctx, e.Process)
		if !ok || err != nil {
			return false, err
		}
		return tr.Event == scenarios.EventReady && p.Ready || tr.Event == scenarios.EventExited && p.Exit != nil, nil
	case scenarios.EventRegistered, scenarios.EventRemounted:
		op := api.OpMountSegment
		if tr.Event == scenarios.EventRemounted {
			op = api.OpReMountSegment
		}
		if e.Op != op || e.Code != api.OK {
			return false, nil
		}
		return c.segmentInScope(ctx, tr, segmentOf(e))
	case scenarios.EventExpired:
		if e.Op != "expire" {
			return false, nil
		}
		if tr.Host == "" && tr.Process == "" {
			return true, nil
		}
		for _, seg := range strings.Fields(strings.TrimPrefix(e.Detail, "segments:")) {
			if in, err := c.segmentInScope(ctx, tr, seg); in || err != nil {
				return in, err
			}
		}
	}
	return false, nil
}

// segmentInScope reports whether a Mooncake segment belongs to the trigger's scope: any segment
// when it has none, a host's segments (named host:port, the worker's local_hostname), or the one
// segment a process registered (its report says which).
func (c *Cluster) segmentInScope(ctx context.Context, tr scenarios.Trigger, seg string) (bool, error) {
	if tr.Host != "" && !strings.HasPrefix(seg, tr.Host+":") {
		return false, nil
	}
	if tr.Process == "" {
		return true, nil
	}
	p, ok, err := c.latestReport(ctx, tr.Process)
	return ok && p.Segment != "" && p.Segment == seg, err
}

// latestReport is the store's latest record of one process (ok false: it has none).
func (c *Cluster) latestReport(ctx context.Context, id string) (report.Process, bool, error) {
	procs, err := c.client.Reports(ctx)
	if err != nil {
		return report.Process{}, false, err
	}
	for _, p := range procs {
		if p.ID == id {
			return p, true, nil
		}
	}
	return report.Process{}, false, nil
}

// silentAfter is how long the store must not have heard a client before an `expired` trigger
// counts it as cut off: two of the Mooncake client's heartbeat periods.
const silentAfter = 2 * mooncake.HeartbeatInterval

// expiryWait is the state of an `expired` trigger between events.
type expiryWait struct {
	seen    bool      // an expire event in scope came
	checked time.Time // the store's time of the last look at its clients
}

// expiredAll is the `expired` trigger: it holds once the store expired a client in scope and no
// client in scope that the store has stopped hearing is left. Mooncake's master expires each
// client on its own TTL, one monitor pass at a time (master_service.cpp, ClientMonitorFunc), so
// workers cut off together expire over one pass or two, and a step after the trigger must not act
// between the passes. After the first expire event every event (the live clients' pings among
// them) is a chance to look again, at most twice a heartbeat period.
func (c *Cluster) expiredAll(ctx context.Context, tr scenarios.Trigger, e api.Event, w *expiryWait) (bool, error) {
	if !w.seen {
		in, err := c.matches(ctx, tr, e)
		if !in || err != nil {
			return false, err
		}
		w.seen = true
	} else if e.Op != "expire" && e.Time.Sub(w.checked) < mooncake.HeartbeatInterval/2 {
		return false, nil
	}
	snap, err := c.client.Snapshot(ctx)
	if err != nil {
		return false, fmt.Errorf("read the store's clients: %w", err)
	}
	w.checked = snap.Time
	segs := map[string][]string{}
	for _, s := range snap.Segments {
		segs[s.ClientID] = append(segs[s.ClientID], s.Segment.Name)
	}
	for _, cl := range snap.Clients {
		if snap.Time.Sub(cl.Heard) <= silentAfter {
			continue
		}
		in := tr.Host == "" && tr.Process == ""
		for _, seg := range segs[cl.ID] {
			if in {
				break
			}
			if in, err = c.segmentInScope(ctx, tr, seg); err != nil {
				return false, err
			}
		}
		if in {
			return false, nil // a silent client in scope is still to expire
		}
	}
	return true, nil
}

// segmentOf is the segment name an event names (its key when that is a host:port).
func segmentOf(e api.Event) string {
	if strings.Contains(e.Key, ":") {
		return e.Key
	}
	return e.Detail
}

// act takes one step and waits until the cluster settled after it.
func (c *Cluster) act(ctx context.Context, st scenarios.Step, procs []report.Process, since uint64) ([]string, error) {
	t := c.timeline()
	switch st.Action {
	case scenarios.ActStealPort:
		return nil, nil // the node took the port during start-up (simnode Config.Steals)
	case scenarios.ActPause, scenarios.ActResume:
		for _, target := range st.Targets {
			if scenarios.IsProcess(target) {
				return nil, fmt.Errorf("%s of one process (%s): %w; name its host", st.Action, target, ErrFaultUnsupported)
			}
		}
	case scenarios.ActKill, scenarios.ActRestart:
		if hosts, procTargets := splitTargets(st.Targets); len(procTargets) > 0 {
			if len(hosts) > 0 {
				// One mechanism per step keeps the step's effects readable; the loader allows
				// both, so take the processes first, then the hosts.
				effects, err := c.actProcesses(ctx, st, procTargets, procs, since)
				if err != nil {
					return nil, err
				}
				hostStep := st
				hostStep.Targets = hosts
				more, err := c.act(ctx, hostStep, procs, since)
				return append(effects, more...), err
			}
			return c.actProcesses(ctx, st, procTargets, procs, since)
		}
	}
	switch st.Action {
	case scenarios.ActKill:
		for _, h := range st.Targets {
			if err := c.rt.Kill(ctx, h, "SIGKILL"); err != nil {
				return nil, err
			}
			if err := c.waitStopped(ctx, h); err != nil {
				return nil, err
			}
			t.mu.Lock()
			t.killed[h] = st.Name
			t.mu.Unlock()
		}
		return []string{"killed the node program of " + strings.Join(st.Targets, ", ") + " and every process it ran"}, nil
	case scenarios.ActRestart:
		t.mu.Lock()
		for _, p := range procs {
			if slices.Contains(st.Targets, p.Host) {
				if t.restarts[p.ID] == 0 {
					t.before[p.ID] = report.IdentityOf(p)
				}
				t.restarts[p.ID]++
			}
		}
		for _, h := range st.Targets {
			delete(t.killed, h)
		}
		t.mu.Unlock()
		// The boots of the runs being replaced, read before the restart: the new runs post as
		// soon as they are up.
		old, err := c.boots(ctx)
		if err != nil {
			return nil, err
		}
		var wg sync.WaitGroup
		errs := make([]error, len(st.Targets))
		for i, h := range st.Targets {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = c.rt.Restart(ctx, h)
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		if err := c.settleHosts(ctx, st.Targets, since, old); err != nil {
			return nil, err
		}
		return []string{"restarted " + strings.Join(st.Targets, ", ") + " with the same command lines; the deployment settled again"}, nil
	case scenarios.ActPause:
		for _, h := range st.Targets {
			if err := c.rt.Pause(ctx, h); err != nil {
				return nil, err
			}
		}
		return []string{"froze every process of " + strings.Join(st.Targets, ", ")}, nil
	case scenarios.ActResume:
		for _, h := range st.Targets {
			if err := c.rt.Unpause(ctx, h); err != nil {
				return nil, err
			}
		}
		// A frozen worker missed its pings; once thawed its heartbeat goes on (and remounts, if
		// the store expired it meanwhile): settled is when each pinged again.
		if err := c.waitPings(ctx, procs, since, func(p report.Process) bool { return slices.Contains(st.Targets, p.Host) }); err != nil {
			return nil, err
		}
		return []string{"thawed " + strings.Join(st.Targets, ", ") + "; its Mooncake clients pinged again"}, nil
	case scenarios.ActStoreRestart, scenarios.ActStoreWipe, scenarios.ActStoreFault:
		f := api.Fault{Kind: api.FaultRestart}
		switch st.Action {
		case scenarios.ActStoreWipe:
			f = api.Fault{Kind: api.FaultWipe}
		case scenarios.ActStoreFault:
			f = *st.StoreFault
		}
		t.mu.Lock()
		t.storeStep = time.Now()
		t.mu.Unlock()
		added, err := c.client.AddFault(ctx, f)
		if err != nil {
			return nil, err
		}
		if err := c.waitPings(ctx, procs, since, func(report.Process) bool { return true }); err != nil {
			return nil, err
		}
		return []string{fmt.Sprintf("store fault %s (%s); every live worker's Mooncake client pinged twice since", added.ID, added)}, nil
	case scenarios.ActPartition:
		if !st.FromStore {
			// Between hosts: the runtime drops their packets both ways (nftables). Nothing is
			// waited for: vLLM's idle processes exchange nothing between nodes, and a step that
			// needs the other side (a restart) finds it cut.
			if err := c.rt.Partition(ctx, st.Name, st.Hosts, st.From); err != nil {
				return nil, err
			}
			t.mu.Lock()
			t.hostCuts[st.Name] = true
			t.mu.Unlock()
			return []string{fmt.Sprintf("every packet between %s and %s is dropped, both ways", strings.Join(st.Hosts, ", "), strings.Join(st.From, ", "))}, nil
		}
		// The store refuses every connection from the hosts' addresses, on every plane: the same
		// cut on both runtimes, with no rule inside a FROM scratch container.
		ips, err := c.hostIPs(ctx, st.Hosts)
		if err != nil {
			return nil, err
		}
		var ids []string
		for _, h := range st.Hosts {
			f, err := c.client.AddFault(ctx, api.Fault{Kind: api.FaultRefuse, Peer: ips[h]})
			if err != nil {
				return nil, err
			}
			ids = append(ids, f.ID)
		}
		t.mu.Lock()
		t.partitions[st.Name] = ids
		t.mu.Unlock()
		return []string{fmt.Sprintf("the store refuses every connection from %s (%s)", strings.Join(st.Hosts, ", "), mapValues(ips, st.Hosts))}, nil
	case scenarios.ActHeal:
		t.mu.Lock()
		between := t.hostCuts[st.Heals]
		delete(t.hostCuts, st.Heals)
		t.mu.Unlock()
		if between {
			if err := c.rt.Heal(ctx, st.Heals); err != nil {
				return nil, err
			}
			return []string{"the hosts of " + st.Heals + " reach each other again"}, nil
		}
		t.mu.Lock()
		ids := t.partitions[st.Heals]
		delete(t.partitions, st.Heals)
		t.mu.Unlock()
		for _, id := range ids {
			if err := c.client.RemoveFault(ctx, id); err != nil {
				return nil, err
			}
		}
		var cut []string
		for _, f := range c.s.Faults {
			if f.Name == st.Heals {
				cut = f.Hosts
			}
		}
		// Back in touch, each cut-off worker pings again; one the store expired meanwhile is
		// answered NEED_REMOUNT and does what its client does about it.
		t.mu.Lock()
		t.storeStep = time.Now()
		t.mu.Unlock()
		if err := c.waitPings(ctx, procs, since, func(p report.Process) bool { return slices.Contains(cut, p.Host) }); err != nil {
			return nil, err
		}
		return []string{"the store takes connections from " + strings.Join(cut, ", ") + " again; their Mooncake clients pinged twice since"}, nil
	}
	return nil, fmt.Errorf("unknown action %q", st.Action)
}

// waitStopped waits until a host's program is no longer running, on the runtime's own wait: a
// SIGKILL is delivered at once, but the runtime reaps the program asynchronously.
func (c *Cluster) waitStopped(ctx context.Context, host string) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.settle)
	defer cancel()
	for {
		st, err := c.rt.State(ctx, host)
		if err != nil {
			return err
		}
		if !st.Running {
			return nil
		}
		// The store's long poll is the only clock here: one quiet slice between two looks.
		if _, err := c.client.Events(ctx, ^uint64(0)>>1, eventSlice/4); err != nil {
			return fmt.Errorf("wait for %s to stop: %w", host, err)
		}
	}
}

// boots are the Boot of every node's latest status.
func (c *Cluster) boots(ctx context.Context) (map[string]int64, error) {
	sts, err := c.client.NodeStatuses(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, st := range sts {
		out[st.Host] = st.Boot
	}
	return out, nil
}

// settleHosts waits until each host posted, after seq, a settled status of a program run other
// than the one in old (a restarted node's new Boot), on the store's event log.
func (c *Cluster) settleHosts(ctx context.Context, hosts []string, since uint64, old map[string]int64) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.settle)
	defer cancel()
	fresh := map[string]bool{}
	err := c.follow(ctx, since, func(e api.Event) (bool, error) {
		if e.Plane != api.PlaneTest || e.Op != "nodes" || e.Method != "POST" || !slices.Contains(hosts, e.Key) {
			return false, nil
		}
		fresh[e.Key] = true
		sts, err := c.client.NodeStatuses(ctx)
		if err != nil {
			return false, err
		}
		done := 0
		for _, st := range sts {
			if slices.Contains(hosts, st.Host) && fresh[st.Host] && st.Boot != old[st.Host] && st.Settled {
				done++
			}
		}
		return done == len(hosts), nil
	})
	if err != nil {
		return fmt.Errorf("wait for %s to settle: %w", strings.Join(hosts, ", "), err)
	}
	return nil
}

// waitPings waits until the Mooncake client of every live worker that match selects has pinged
// the master twice since seq: the first ping after a store fault is answered (NEED_REMOUNT or
// OK), and the heartbeat acts on the answer before it sends the next, so after two the client
// did whatever it does about the fault.
func (c *Cluster) waitPings(ctx context.Context, procs []report.Process, since uint64, match func(report.Process) bool) error {
	regs, _, err := c.client.Registrations(ctx)
	if err != nil {
		return err
	}
	clientOf := map[string]string{}
	for _, r := range regs {
		if r.Kind == "segment" && r.Client != "" {
			clientOf[r.Name] = r.Client
		}
	}
	want := map[string]int{}
	for _, p := range procs {
		if p.Segment != "" && p.Exit == nil && match(p) {
			if id := clientOf[p.Segment]; id != "" {
				want[id] = 2
			}
		}
	}
	if len(want) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.settle)
	defer cancel()
	err = c.follow(ctx, since, func(e api.Event) (bool, error) {
		if e.Op == api.OpPing && want[e.Key] > 0 {
			if want[e.Key]--; want[e.Key] == 0 {
				delete(want, e.Key)
			}
		}
		return len(want) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("wait for %d Mooncake client(s) to ping: %w", len(want), err)
	}
	return nil
}

// stealEffect says what a steal-port step did, from the target's records: the port its bind
// found taken, or what it bound when there was nothing to take.
func stealEffect(st scenarios.Step, procs []report.Process) []string {
	for _, p := range procs {
		if p.ID != st.Target {
			continue
		}
		for _, a := range p.Addresses {
			if a.Channel != st.Channel || a.Role != report.AddressBind {
				continue
			}
			if a.AddrInUse() {
				return []string{"bound " + a.Endpoint + " after " + st.Target + " learnt it and before it bound it"}
			}
			return []string{"nothing to take: " + st.Target + " binds " + a.Endpoint}
		}
	}
	return []string{"nothing to take: " + st.Target + " never got to bind its " + st.Channel + " address"}
}

// withTimeline gives a report the steps the cluster ran and returns its violations: vs with every
// one found after start-up or after a step.
func (c *Cluster) withTimeline(rep *report.Report, vs []report.Violation) []report.Violation {
	t := c.current()
	if t == nil {
		return vs
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	rep.Steps = append([]report.Step(nil), t.steps...)
	return check.Union(t.found, vs)
}

// hostIPs are the addresses the store sees each host's connections come from: the peer of the
// host's node status posts, in the store's event log.
func (c *Cluster) hostIPs(ctx context.Context, hosts []string) (map[string]string, error) {
	out := map[string]string{}
	var since uint64
	for {
		resp, err := c.client.Events(ctx, since, 0)
		if err != nil {
			return nil, err
		}
		for _, e := range resp.Events {
			since = e.Seq
			if e.Plane == api.PlaneTest && e.Op == "nodes" && e.Method == "POST" && slices.Contains(hosts, e.Key) && e.Peer != "" {
				out[e.Key] = e.Peer
			}
		}
		if len(resp.Events) == 0 || since >= resp.LastSeq {
			break
		}
	}
	for _, h := range hosts {
		if out[h] == "" {
			return nil, fmt.Errorf("the store never heard from %s: no address to cut", h)
		}
	}
	return out, nil
}

func mapValues(m map[string]string, keys []string) string {
	vs := make([]string, len(keys))
	for i, k := range keys {
		vs[i] = m[k]
	}
	return strings.Join(vs, ", ")
}
