package vllm

import (
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/widetp/widetp/report"
)

// The paper execution of a fault timeline (a scenario's `faults:`): what vLLM and the Mooncake
// client do when a node dies, comes back, or the store forgets them. It runs after Predict's
// start-up, step after step, each on the records the previous one left.

// Fault actions, as scenario files name them.
const (
	FaultKill         = "kill"
	FaultRestart      = "restart"
	FaultPause        = "pause"
	FaultResume       = "resume"
	FaultPartition    = "partition"
	FaultHeal         = "heal"
	FaultStoreRestart = "store-restart"
	FaultStoreWipe    = "store-wipe"
	FaultStoreFault   = "store-fault"
	FaultStealPort    = "steal-port"
)

// FaultStep is one step of a timeline as the model takes it.
type FaultStep struct {
	Name   string
	Action string
	// Targets are hosts and process IDs (kill, restart, pause, resume); a heal's is the name of
	// the partition step it ends.
	Targets []string
	// Hosts, From and FromStore are a partition's sides.
	Hosts, From []string
	FromStore   bool
	// Process and Channel are what a steal-port takes: the address of that channel the process
	// is about to bind.
	Process, Channel string
	// StoreFault is the kind of a store-fault step; StoreSegment its segment scope (lose-keys).
	StoreFault, StoreSegment string
	// AfterEvent is the store event the step waits for ("" when it waits for none): a heal that
	// waits for "expired" comes after the store expired the clients it could not hear.
	AfterEvent string
}

// StepPrediction is what one step leaves: what it did and every record after it.
type StepPrediction struct {
	Effects   []string
	Processes []report.Process
}

// Timeline is a deployment's prediction with its faults.
type Timeline struct {
	// Settled is the deployment after start-up (steal-port steps act during it).
	Settled []report.Process
	Steps   []StepPrediction
}

// PredictTimeline is PredictPlans with a fault timeline: steal-port steps take their address
// during start-up; every other step acts on the settled deployment, in order.
func PredictTimeline(d Deployment, plans []*NodePlan, steps []FaultStep) (*Timeline, error) {
	s := &sim{steals: newSteals(steps)}
	settled, err := s.predict(d, plans)
	if err != nil {
		return nil, err
	}
	t := &Timeline{Settled: settled}
	cur := settled
	// cuts are the partitions between hosts in force, by step name.
	cuts := map[string][2][]string{}
	for i, st := range steps {
		next := clone(cur)
		var effects []string
		switch st.Action {
		case FaultStealPort:
			effects = []string{s.stealEffect(st)}
		case FaultKill:
			effects = kill(next, st.Targets, "killed by step "+st.Name)
		case FaultRestart:
			effects, err = restart(d, plans, next, st, cutBetween(cuts))
			if err != nil {
				return nil, err
			}
		case FaultHeal:
			if len(st.Targets) > 0 {
				delete(cuts, st.Targets[0])
			}
			effects = heal(next, d.Profile, steps, i)
		case FaultPause, FaultPartition:
			if st.Action == FaultPartition && !st.FromStore {
				cuts[st.Name] = [2][]string{st.Hosts, st.From}
			}
			// vLLM's processes exchange nothing while idle (no heartbeat between a head and its
			// followers), so a cut or a freeze changes nothing until traffic or a restart needs
			// the other side; the Mooncake clients stop pinging, and the store expires them only
			// after its client TTL (10 s), which a step's length decides and the paper does not know.
			effects = []string{"no change while the deployment is idle: vLLM sends nothing between its nodes then; " +
				"Mooncake clients cut off longer than the store's client TTL expire and remount when they are back"}
		case FaultResume:
			effects = resume(next, d.Profile, steps, i)
		case FaultStoreRestart:
			effects = storeLost(next, d.Profile, func(report.Process) bool { return true }, "the store restarted empty")
		case FaultStoreWipe:
			effects = storeWiped(next)
		case FaultStoreFault:
			if st.StoreFault == "lose-keys" && st.StoreSegment != "" {
				effects = storeLost(next, d.Profile, func(p report.Process) bool { return p.Segment == st.StoreSegment },
					"the store lost segment "+st.StoreSegment)
			} else {
				effects = []string{"a transient store fault (" + st.StoreFault + "): the Mooncake clients retry their next ping; no registration changes"}
			}
		default:
			return nil, fmt.Errorf("predict %s: step %s: unknown action %q", d.Name, st.Name, st.Action)
		}
		t.Steps = append(t.Steps, StepPrediction{Effects: effects, Processes: next})
		cur = next
	}
	return t, nil
}

func clone(procs []report.Process) []report.Process {
	out := make([]report.Process, len(procs))
	copy(out, procs)
	return out
}

// heal ends the partition step steps[i] names; resume thaws what an earlier pause of the same
// hosts froze. Cut off from the store (or frozen) until a step waited for the store to expire a
// client, the cut-off workers were expired: their segments unmounted and their keys deleted
// (mooncake-store/src/master_service.cpp); their next Ping answers NEED_REMOUNT and the profile's
// mooncake_remount decides the rest. A shorter cut, or one between hosts of an idle deployment,
// changes nothing.
func heal(procs []report.Process, prof Profile, steps []FaultStep, i int) []string {
	for j := i - 1; j >= 0; j-- {
		if steps[j].Name == steps[i].Targets[0] && steps[j].Action == FaultPartition && steps[j].FromStore {
			return reconnect(procs, prof, steps, j, i, steps[j].Hosts)
		}
	}
	return []string{"no change: nothing was lost while the deployment was idle"}
}

func resume(procs []report.Process, prof Profile, steps []FaultStep, i int) []string {
	for j := i - 1; j >= 0; j-- {
		if steps[j].Action == FaultPause && slices.Equal(steps[j].Targets, steps[i].Targets) {
			return reconnect(procs, prof, steps, j, i, steps[i].Targets)
		}
	}
	return []string{"no change: nothing was lost while the deployment was idle"}
}

// reconnect is hosts back in touch with the store at step i after the cut of step start.
func reconnect(procs []report.Process, prof Profile, steps []FaultStep, start, i int, hosts []string) []string {
	expired := false
	for j := start + 1; j <= i; j++ {
		expired = expired || steps[j].AfterEvent == "expired"
	}
	if !expired {
		return []string{"no change: " + strings.Join(hosts, ", ") + " was out of touch for less than the store's client TTL"}
	}
	return storeLost(procs, prof, func(p report.Process) bool { return slices.Contains(hosts, p.Host) },
		"the store expired the clients of "+strings.Join(hosts, ", ")+" while it could not hear them")
}

// kill ends the live processes of the targets with SIGKILL: a host's every process; for a
// process, every process of its command on that host. Whatever vLLM process dies, the rest of
// its command goes down with it: a worker's executor sees its worker die and shuts down,
// terminating every other worker (vllm/v1/executor/multiproc_executor.py start_worker_monitor,
// MultiprocExecutor.shutdown), and calls the engine core's failure callback; the front end or
// headless launcher whose engine died shuts down its other engines (vllm/v1/engine/utils.py
// CoreEngineProcManager); and the children of a process that died exit with it. The exits are
// Expected: the step asked for them.
func kill(procs []report.Process, targets []string, why string) []string {
	byID := map[string]int{}
	children := map[string][]int{}
	for i, p := range procs {
		byID[p.ID] = i
		if p.Parent != "" {
			children[p.Parent] = append(children[p.Parent], i)
		}
	}
	dead := map[int]bool{}
	var down func(i int)
	down = func(i int) {
		dead[i] = true
		for _, c := range children[procs[i].ID] {
			down(c)
		}
	}
	for _, t := range targets {
		for i, p := range procs {
			switch {
			case !strings.Contains(t, "/"):
				if p.Host == t {
					dead[i] = true
				}
			case p.ID == t:
				// Up to the command's top process on this host, then its whole tree.
				root := i
				for par := p.Parent; par != ""; {
					j, ok := byID[par]
					if !ok || procs[j].Host != p.Host {
						break
					}
					root = j
					par = procs[j].Parent
				}
				down(root)
			}
		}
	}
	var ids []string
	for i := range procs {
		if dead[i] && procs[i].Exit == nil {
			procs[i].Exit = &report.Exit{Code: -9, Signal: "SIGKILL", Expected: true, Error: why}
			ids = append(ids, procs[i].ID)
		}
	}
	if len(ids) == 0 {
		return []string{"nothing to kill: " + strings.Join(targets, ", ") + " had no live process"}
	}
	return []string{fmt.Sprintf("killed %d process(es): %s", len(ids), summarize(ids))}
}

// restart kills the targets' commands and runs them again from their plans: vLLM derives every
// identity from the command line, so the same line gives the same DP ranks, indices and lookup
// paths; the paper keeps the seeded engine_id (vLLM would draw a new uuid4, which only the
// restarted replica then shares). A restarted process rejoins its rendezvous as a new member: a
// replica (or MoE DP group) whose other members did not restart with it never completes it, and
// the restarted ranks fail with torch's time-out, as vLLM's do — vLLM cannot add a rank to a
// running world.
func restart(d Deployment, plans []*NodePlan, procs []report.Process, st FaultStep, cut func(a, b string) bool) ([]string, error) {
	var tops []*ProcessPlan
	for _, np := range plans {
		for _, top := range np.Commands {
			for _, t := range st.Targets {
				if t == np.Host || t == top.Identity.ID {
					tops = append(tops, top)
					break
				}
			}
		}
	}
	effects := kill(procs, st.Targets, "stopped by step "+st.Name+" (restart)")
	sub := &sim{cut: cut}
	again, err := sub.predictTops(d, tops)
	if err != nil {
		return nil, err
	}
	byID := map[string]int{}
	for i, p := range procs {
		byID[p.ID] = i
	}
	failed := 0
	for _, np := range again {
		i, ok := byID[np.ID]
		if !ok {
			continue
		}
		old := procs[i]
		np.Restarts = old.Restarts + 1
		np.BeforeRestart = old.BeforeRestart
		if np.BeforeRestart == nil {
			id := report.IdentityOf(old)
			np.BeforeRestart = &id
		}
		if old.Registration != nil && np.Segment != "" && np.Exit == nil {
			np.Registration = &report.Registration{Mounted: true, Published: true}
		}
		if np.Crashed() {
			failed++
		}
		procs[i] = np
	}
	effects = append(effects, fmt.Sprintf("started %d command(s) again: %d process(es), %d of them failed", len(tops), len(again), failed))
	return effects, nil
}

// cutBetween tells whether a partition in force separates hosts a and b (nil when none is).
func cutBetween(cuts map[string][2][]string) func(a, b string) bool {
	if len(cuts) == 0 {
		return nil
	}
	return func(a, b string) bool {
		for _, sides := range cuts {
			if (slices.Contains(sides[0], a) && slices.Contains(sides[1], b)) || (slices.Contains(sides[0], b) && slices.Contains(sides[1], a)) {
				return true
			}
		}
		return false
	}
}

// predictTops runs the paper execution over some commands' plans only (a restart).
func (s *sim) predictTops(d Deployment, tops []*ProcessPlan) ([]report.Process, error) {
	for _, top := range tops {
		s.add(top, nil)
	}
	s.run()
	return s.records(), nil
}

// storeLost is the store forgetting the registration of the live workers match selects: the next
// ping of each answers NEED_REMOUNT (mooncake-store/src/master_service.cpp), and what the client
// does then is the profile's mooncake_remount.
func storeLost(procs []report.Process, prof Profile, match func(report.Process) bool, what string) []string {
	n := 0
	for i := range procs {
		p := &procs[i]
		if p.Exit != nil || p.Segment == "" || !match(*p) {
			continue
		}
		n++
		prev := 0
		if p.Registration != nil {
			prev = p.Registration.Remounts
		}
		switch prof.MooncakeRemount {
		case MooncakeRemountRepublish:
			p.Registration = &report.Registration{Mounted: true, Published: true, Remounts: prev + 1}
		case MooncakeRemountMount:
			p.Registration = &report.Registration{Mounted: true, Published: false, Remounts: prev + 1}
		default:
			p.Registration = &report.Registration{Remounts: prev}
		}
	}
	how := map[string]string{
		MooncakeRemountRepublish: "each remounts its segment and re-publishes its rpc_meta and ram keys",
		MooncakeRemountMount:     "each remounts its segment but leaves its rpc_meta and ram keys unpublished",
		MooncakeRemountNone:      "none pings, so none registers again",
	}[prof.MooncakeRemount]
	return []string{fmt.Sprintf("%s: %d live worker(s) lose their registration; %s (mooncake_remount=%s)", what, n, how, prof.MooncakeRemount)}
}

// storeWiped is the metadata server losing every key while the master keeps its clients: the
// pings still answer OK, so no client learns it must publish again, whatever it does on
// NEED_REMOUNT (Mooncake issue #2246).
func storeWiped(procs []report.Process) []string {
	n := 0
	for i := range procs {
		p := &procs[i]
		if p.Exit != nil || p.Segment == "" {
			continue
		}
		n++
		r := report.Registration{Mounted: true}
		if p.Registration != nil {
			r.Remounts = p.Registration.Remounts
		}
		p.Registration = &r
	}
	return []string{fmt.Sprintf("the metadata server lost every key: %d live worker(s) unpublished; the master still answers their pings OK, so none publishes again", n)}
}

// summarize lists ids, eliding the middle of a long list.
func summarize(ids []string) string {
	sort.Strings(ids)
	if len(ids) <= 4 {
		return strings.Join(ids, ", ")
	}
	return fmt.Sprintf("%s, ... (%d more), %s", strings.Join(ids[:3], ", "), len(ids)-4, ids[len(ids)-1])
}

// steals are the steal-port steps of a timeline, by process and channel.
type steals struct {
	by map[string]*steal
}

type steal struct {
	// took is the endpoint the thief bound; nothing says why there was nothing to take.
	took, nothing string
	done          bool
}

func newSteals(steps []FaultStep) *steals {
	s := &steals{by: map[string]*steal{}}
	for _, st := range steps {
		if st.Action == FaultStealPort {
			s.by[st.Process+"\x00"+st.Channel] = &steal{}
		}
	}
	return s
}

// take is a steal-port step acting at p's bind of endpoint on channel: it binds the port first
// when the process learnt it before the bind (a port it probed, or one it was given); a bind of
// port 0 or of an ipc path leaves it nothing to take. It acts once, at the first such bind.
func (s *steals) take(p *simProc, channel, endpoint string) bool {
	if s == nil {
		return false
	}
	x := s.by[p.rec.ID+"\x00"+channel]
	if x == nil || x.done {
		return false
	}
	x.done = true
	if strings.HasPrefix(endpoint, "ipc://") {
		x.nothing = "nothing to take: " + endpoint + " is an ipc path (libzmq takes a path over, it does not refuse it)"
		return false
	}
	_, port, err := net.SplitHostPort(strings.TrimPrefix(endpoint, "tcp://"))
	if n, _ := strconv.Atoi(port); err != nil || n == 0 {
		x.nothing = "nothing to take: " + p.rec.ID + " binds " + endpoint + " (the kernel picks the port at the bind and the socket holds it at once)"
		return false
	}
	x.took = endpoint
	return true
}

// stealEffect says what a steal-port step did: the endpoint it took, or why there was nothing to
// take (a bind of port 0 or of an ipc path, which the paper does not execute, or no bind at all).
func (s *sim) stealEffect(st FaultStep) string {
	x := s.steals.by[st.Process+"\x00"+st.Channel]
	switch {
	case x != nil && x.took != "":
		return "bound " + x.took + " after " + st.Process + " learnt it and before it bound it"
	case x != nil && x.done:
		return x.nothing
	}
	for _, p := range s.procs {
		if p.rec.ID != st.Process {
			continue
		}
		if !p.started || p.exited && p.rec.Crashed() {
			break
		}
		for _, a := range p.plan.Addresses {
			if a.Role == report.AddressBind && a.Channel == st.Channel && !a.Exercised {
				return "nothing to take: " + st.Process + " binds " + a.Endpoint + " (the kernel picks the port at the bind, or libzmq takes an ipc path over)"
			}
		}
	}
	return "nothing to take: " + st.Process + " never got to bind its " + st.Channel + " address"
}
