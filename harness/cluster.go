package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/widetp/widetp/check"
	"github.com/widetp/widetp/fakestore/api"
	"github.com/widetp/widetp/fakestore/client"
	"github.com/widetp/widetp/internal/nodeapi"
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/report/htmlreport"
	"github.com/widetp/widetp/scenarios"
)

// Cluster is one scenario deployed on a Runtime: the fake store and one simulated node per
// scenario node. It is the thin public API over the runtimes (kind's pkg/cluster over its
// providers): StartCluster, then Settle, Report, WriteArtifacts as needed, and always Close.
type Cluster struct {
	s   *scenarios.Scenario
	rt  Runtime
	cfg clusterConfig

	store  Store
	client *client.Client

	mu      sync.Mutex
	timings map[string]float64
	// dead are nodes whose program ended before they settled, with why.
	dead map[string]error
	// born is when StartCluster began (a timeline step's time counts from it); tl is what the
	// fault steps did (timeline.go), nil until RunTimeline.
	born time.Time
	tl   *timeline
}

// StartCluster starts the fake store of s (its flavor) and every node of s on rt in one round,
// each node running `widetp node` with its config, waits until every host printed its ready line,
// then opens the store's start gate: the nodes wait there before they start any process, so the
// processes of all hosts start together once the runtime is done starting hosts (a Docker engine
// starts a round's containers a few at a time: without the gate, the processes of the first hosts
// would idle, heartbeats and all, through the start of the last ones). On error
// the cluster is returned with it whenever anything started, so that the caller can Close it (and
// write its artifacts first): a node that died early carries its last log lines in the error.
// The cluster owns rt from here on: Close closes it.
func StartCluster(ctx context.Context, s *scenarios.Scenario, rt Runtime, opts ...ClusterOption) (*Cluster, error) {
	if s == nil || rt == nil {
		return nil, errors.New("start cluster: no scenario or no runtime")
	}
	cfg := clusterDefaults(s)
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(s); err != nil {
		return nil, fmt.Errorf("start cluster %s: %w", s.Name, err)
	}
	specs := make([]NodeSpec, 0, len(s.Nodes))
	for _, n := range s.Nodes {
		if n.Host == StoreHost {
			return nil, fmt.Errorf("start cluster %s: node %s: the name is the fake store's host; rename the node", s.Name, n.Host)
		}
		spec, err := nodeSpec(s, n, cfg.timeouts, cfg.plans[n.Host])
		if err != nil {
			return nil, fmt.Errorf("start cluster %s: %w", s.Name, err)
		}
		specs = append(specs, spec)
	}
	c := &Cluster{s: s, rt: rt, cfg: cfg, timings: map[string]float64{}, dead: map[string]error{}, born: time.Now()}

	// One round: the store and every node start together. A node that comes up first waits for
	// the store by name (its store_start bound), so nothing waits for a round of its own.
	start := time.Now()
	hosts := make([]string, len(specs))
	for i, sp := range specs {
		hosts[i] = sp.Host
	}
	c.progressf("starting the fake store (%s flavor) and %d node(s) on %s, run %s: %s", s.Store.Flavor, len(specs), rt.Name(), rt.RunID(), strings.Join(hosts, ", "))
	err := rt.StartNodes(ctx, append([]NodeSpec{storeSpec(s)}, specs...)...)
	c.timing("start", start)
	// The store's client, whenever the store came up: a failed node's artifacts need it.
	if serr := c.connectStore(ctx); serr != nil && err == nil {
		err = serr
	}
	if err != nil {
		return c, fmt.Errorf("start cluster %s: %w", s.Name, err)
	}
	c.progressf("every host is up: opening the start gate")
	gctx, cancel := context.WithTimeout(ctx, c.cfg.timeouts.Store)
	defer cancel()
	if err := c.client.OpenGate(gctx); err != nil {
		return c, fmt.Errorf("start cluster %s: %w", s.Name, err)
	}
	return c, nil
}

// connectStore makes the store's client from the addresses the runtime gives for its ports.
func (c *Cluster) connectStore(ctx context.Context) error {
	addrs, err := c.rt.Endpoints(ctx, StoreHost)
	if err != nil {
		return err
	}
	c.store = Store{Host: StoreHost, Addrs: addrs}
	c.client, err = client.New(
		client.WithMetadataURL("http://"+addrs[nodeapi.StoreMetadataPort]),
		client.WithMasterURL("http://"+addrs[nodeapi.StoreMasterPort]),
		client.WithAdminURL("http://"+addrs[nodeapi.StoreAdminPort]))
	if err != nil {
		c.client = nil
		return fmt.Errorf("store client: %w", err)
	}
	return nil
}

// Scenario is the scenario the cluster runs.
func (c *Cluster) Scenario() *scenarios.Scenario { return c.s }

// Runtime is the runtime the cluster runs on.
func (c *Cluster) Runtime() Runtime { return c.rt }

// Store is the fake store's client (nil when the store did not start).
func (c *Cluster) Store() *client.Client { return c.client }

// Timeouts are the bounds the cluster's processes wait with.
func (c *Cluster) Timeouts() NodeTimeouts { return c.cfg.timeouts }

// SettleTimeout bounds Settle.
func (c *Cluster) SettleTimeout() time.Duration { return c.cfg.settle }

func (c *Cluster) timing(phase string, since time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timings[phase] = time.Since(since).Seconds()
}

func (c *Cluster) progressf(format string, args ...any) {
	progressLine(c.cfg.progress, format, args...)
}

// eventSlice is how long one long poll of the store's event log waits when nothing happens. After
// a quiet slice Settle asks the runtime whether each unsettled node's program still runs: a node
// that died cannot post that it settled. 2 s: a dead node is noticed quickly, and a quiet
// cluster costs one state query per unsettled node per slice.
const eventSlice = 2 * time.Second

// SettleTimeoutError is a cluster in which some node did not settle within the bound: a process
// that hangs past every bound of its own, which is a bug of the node program, not of vLLM.
type SettleTimeoutError struct {
	Bound time.Duration
	// Pending maps each unsettled node to the processes it last named as keeping it busy (none
	// when it never posted a status).
	Pending map[string][]string
}

func (e *SettleTimeoutError) Error() string {
	hosts := make([]string, 0, len(e.Pending))
	for h := range e.Pending {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	parts := make([]string, len(hosts))
	for i, h := range hosts {
		if len(e.Pending[h]) == 0 {
			parts[i] = h + " (no status posted)"
		} else {
			parts[i] = h + " (waiting on " + strings.Join(e.Pending[h], ", ") + ")"
		}
	}
	return fmt.Sprintf("not every node settled within %s: %s", e.Bound, strings.Join(parts, "; "))
}

// Settle waits, on the store's event log and never on a clock, until every node has settled —
// each process that started is ready or has exited, nothing is still starting and nothing is
// about to react to a failure — as the nodes themselves post it (simnode's node status). It knows
// nothing of what the model predicts: a run that goes differently still settles, and its report
// shows the difference. A node whose program ends before it settled counts as settled (nothing
// more can happen there) and its death, with its last log lines, is in the returned error. The
// wait is bounded by the settle timeout derived from the scenario.
func (c *Cluster) Settle(ctx context.Context) error {
	if c.client == nil {
		return errors.New("settle: the cluster's store never started")
	}
	start := time.Now()
	defer c.timing("settle", start)
	ctx, cancel := context.WithTimeout(ctx, c.cfg.settle)
	defer cancel()
	want := map[string]bool{}
	for _, n := range c.s.Nodes {
		want[n.Host] = true
	}
	settled := map[string]bool{}
	last := map[string]api.NodeStatus{}
	var since uint64
	reread := true // read the statuses on the first pass
	for {
		if reread {
			sts, err := c.client.NodeStatuses(ctx)
			if err != nil {
				return c.settleFailure(ctx, fmt.Errorf("settle: read node statuses: %w", err), last)
			}
			for _, st := range sts {
				if !want[st.Host] {
					continue
				}
				last[st.Host] = st
				if st.Settled && !settled[st.Host] {
					c.progressf("node %s settled: %d process(es), %d up, %d exited", st.Host, st.Processes, st.Ready, st.Exited)
				}
				settled[st.Host] = st.Settled
			}
			if c.allSettled(want, settled) {
				return c.deadErr()
			}
		}
		resp, err := c.client.Events(ctx, since, eventSlice)
		if err != nil {
			return c.settleFailure(ctx, fmt.Errorf("settle: wait on the store's events: %w", err), last)
		}
		reread = false
		for _, e := range resp.Events {
			since = e.Seq
			if e.Plane == api.PlaneTest && e.Op == "nodes" && e.Method == "POST" {
				reread = true
			}
		}
		if len(resp.Events) == 0 && resp.LastSeq > since {
			since = resp.LastSeq
		}
		if len(resp.Events) == 0 {
			// A quiet slice: a node that died cannot say so.
			if c.reapDead(ctx, want, settled) {
				reread = true
			}
		}
	}
}

func (c *Cluster) allSettled(want, settled map[string]bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for h := range want {
		if !settled[h] && c.dead[h] == nil {
			return false
		}
	}
	return true
}

// deadTail is how many of a dead node's last log lines its error carries: enough for a Go panic's
// header or the node's own error line, short enough to read.
const deadTail = 20

// reapDead asks the runtime about every unsettled node and records the ones whose program ended;
// it reports whether it found any.
func (c *Cluster) reapDead(ctx context.Context, want, settled map[string]bool) bool {
	found := false
	for h := range want {
		c.mu.Lock()
		known := c.dead[h] != nil
		c.mu.Unlock()
		if settled[h] || known {
			continue
		}
		st, err := c.rt.State(ctx, h)
		if err != nil || st.Running {
			continue
		}
		tail := lastLines(c.logs(ctx, h), deadTail)
		e := &NodeExitedError{Host: h, ExitCode: st.ExitCode, Tail: tail}
		c.mu.Lock()
		c.dead[h] = e
		c.mu.Unlock()
		c.progressf("node %s's program ended (exit %d) before it settled", h, st.ExitCode)
		found = true
	}
	return found
}

func (c *Cluster) logs(ctx context.Context, host string) string {
	b, err := c.rt.Logs(ctx, host)
	if err != nil {
		return "(logs unavailable: " + err.Error() + ")"
	}
	return string(b)
}

// deadErr joins the deaths of nodes that ended before they settled.
func (c *Cluster) deadErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	hosts := make([]string, 0, len(c.dead))
	for h := range c.dead {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	var errs []error
	for _, h := range hosts {
		errs = append(errs, fmt.Errorf("settle: %w", c.dead[h]))
	}
	return errors.Join(errs...)
}

// settleFailure explains why Settle stopped early: the bound (naming what each node waited on),
// the caller's context, or err.
func (c *Cluster) settleFailure(ctx context.Context, err error, last map[string]api.NodeStatus) error {
	if ctx.Err() == nil || errors.Is(context.Cause(ctx), context.Canceled) {
		return errors.Join(err, c.deadErr())
	}
	te := &SettleTimeoutError{Bound: c.cfg.settle, Pending: map[string][]string{}}
	for _, n := range c.s.Nodes {
		c.mu.Lock()
		dead := c.dead[n.Host] != nil
		c.mu.Unlock()
		if st, ok := last[n.Host]; dead || (ok && st.Settled) {
			continue
		}
		te.Pending[n.Host] = last[n.Host].Pending
	}
	return errors.Join(fmt.Errorf("settle: %w", te), c.deadErr())
}

// Report reads every process's latest record from the store, resolves which server answered each
// lookup (report.ResolveLookups), runs the checks and builds the report. Processes come in
// scenario node order, then in the order of their IDs with numbers compared as numbers.
func (c *Cluster) Report(ctx context.Context) (report.Report, error) {
	rep := report.Report{
		Scenario:   c.s.Name,
		Profile:    c.s.Profile.String(),
		Runtime:    c.rt.Name(),
		Verdict:    "pass",
		Expected:   append([]report.Kind{}, c.s.Expect...),
		Violations: []report.Violation{},
		Processes:  []report.Process{},
	}
	if c.client == nil {
		rep.Timings = c.Timings()
		return rep, errors.New("report: the cluster's store never started")
	}
	start := time.Now()
	procs, err := c.client.Reports(ctx)
	c.timing("collect", start)
	if err != nil {
		rep.Timings = c.Timings()
		return rep, fmt.Errorf("report: read the processes' records from the store: %w", err)
	}
	order := map[string]int{}
	for i, n := range c.s.Nodes {
		order[n.Host] = i
	}
	SortProcesses(procs, order)
	report.ResolveLookups(procs)
	report.ResolveAddresses(procs)
	if err := c.applyTimeline(ctx, procs); err != nil {
		rep.Timings = c.Timings()
		return rep, fmt.Errorf("report: %w", err)
	}
	c.progressf("running the checks over %d process record(s)", len(procs))
	start = time.Now()
	rep.Violations = c.withTimeline(&rep, check.Run(procs))
	c.timing("check", start)
	if rep.Violations == nil {
		rep.Violations = []report.Violation{}
	}
	if len(rep.Violations) > 0 {
		rep.Verdict = "fail"
	}
	rep.Processes = procs
	rep.Timings = c.Timings()
	return rep, nil
}

// Timings are the seconds each phase took so far: start (the store and every node, one round),
// settle, collect, check (and teardown after Close).
func (c *Cluster) Timings() map[string]float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]float64, len(c.timings))
	for k, v := range c.timings {
		out[k] = v
	}
	return out
}

// SortProcesses orders records by their host's position in hostOrder (unknown hosts last, by
// name), then by ID with runs of digits compared as numbers (worker-2 before worker-10), which is
// the order the model plans them in.
func SortProcesses(procs []report.Process, hostOrder map[string]int) {
	pos := func(h string) int {
		if i, ok := hostOrder[h]; ok {
			return i
		}
		return len(hostOrder)
	}
	sort.SliceStable(procs, func(i, j int) bool {
		a, b := procs[i], procs[j]
		if pa, pb := pos(a.Host), pos(b.Host); pa != pb {
			return pa < pb
		}
		if a.Host != b.Host {
			return a.Host < b.Host
		}
		return naturalLess(a.ID, b.ID)
	})
}

// naturalLess compares strings with runs of digits as numbers.
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			na, _ := strconv.Atoi(a[:da])
			nb, _ := strconv.Atoi(b[:db])
			if na != nb {
				return na < nb
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func digitRun(s string) int {
	n := 0
	for n < len(s) && n < 9 && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

// Artifact file names at the top of an artifacts directory (htmlreport reads the directory, so
// the names are its).
const (
	ArtifactReport   = htmlreport.ArtifactReport
	ArtifactSnapshot = htmlreport.ArtifactSnapshot
)

// WriteArtifacts writes what a human needs to see why a run went as it did into dir: rep as
// report.json (when given), the store's snapshot (every record, registration, event and node
// status), and for every host its logs, the runtime's inspect output and its ipc directory's
// listing (WriteArtifacts of the runtime), then report.html: rep as a page linking all of them.
// Call it before Close: Close removes the hosts. What cannot be had costs only its own file; the
// error names each.
func (c *Cluster) WriteArtifacts(ctx context.Context, dir string, rep *report.Report) error {
	extra := map[string][]byte{}
	var errs []error
	if rep != nil {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			errs = append(errs, fmt.Errorf("write %s: %w", ArtifactReport, err))
		} else {
			extra[ArtifactReport] = append(b, '\n')
		}
	}
	if c.client != nil {
		snap, err := c.client.Snapshot(ctx)
		if err == nil {
			var b []byte
			if b, err = json.MarshalIndent(snap, "", "  "); err == nil {
				extra[ArtifactSnapshot] = append(b, '\n')
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("write %s: %w", ArtifactSnapshot, err))
		}
	}
	errs = append(errs, WriteArtifacts(ctx, c.rt, dir, extra))
	if rep != nil {
		// The page last: it links the files written above (widetp report renders the same).
		errs = append(errs, htmlreport.WriteDir(dir, *rep))
	}
	return errors.Join(errs...)
}

// Close tears the cluster down: the runtime's Close removes every host at once (their programs
// are killed: the report was read before), then the network and scratch files. It runs even when
// ctx is done (after an interrupt), bounded by its own teardown bound, and joins every failure.
func (c *Cluster) Close(ctx context.Context) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.teardown)
	defer cancel()
	c.progressf("tearing down %d host(s)", len(c.rt.Hosts()))
	err := c.rt.Close(ctx)
	c.timing("teardown", start)
	if err != nil {
		return fmt.Errorf("close cluster %s: %w", c.s.Name, err)
	}
	return nil
}
