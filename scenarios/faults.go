package scenarios

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/widetp/widetp/fakestore/api"
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/vllm"
)

// The `faults:` section: an ordered timeline of steps, each fired by a trigger and acting on a
// target (README, "Faults"). The loader checks the shape here and the targets against the model's
// plan in validateFaults, so a step that names a process the deployment never starts is an error
// before anything runs.

// Action is what a step does.
type Action string

const (
	// ActKill kills a node (every process of the host) or one process and its children with SIGKILL.
	ActKill Action = vllm.FaultKill
	// ActRestart kills a node or a process and starts it again with the same command line.
	ActRestart Action = vllm.FaultRestart
	// ActPause freezes a node (the cgroup freezer on Docker, SIGSTOP of its tree locally).
	ActPause Action = vllm.FaultPause
	// ActResume thaws a node an earlier step paused.
	ActResume Action = vllm.FaultResume
	// ActPartition cuts every connection between two sets of hosts (or a set and the store).
	ActPartition Action = vllm.FaultPartition
	// ActHeal undoes an earlier partition step.
	ActHeal Action = vllm.FaultHeal
	// ActStoreRestart restarts the fake Mooncake store: it comes back empty, and the clients that
	// ping get NEED_REMOUNT (Mooncake's master keeps its state in memory only).
	ActStoreRestart Action = vllm.FaultStoreRestart
	// ActStoreWipe loses every metadata key (rpc_meta, ram) while the master keeps its clients:
	// the metadata server alone lost its state, so no ping asks anyone to re-register.
	ActStoreWipe Action = vllm.FaultStoreWipe
	// ActStoreFault adds one of the store's faults (latency, drop, refuse, status, lose-keys,
	// ignore-pings) in the store's flag syntax.
	ActStoreFault Action = vllm.FaultStoreFault
	// ActStealPort binds the address a process is about to bind, between the moment it learns the
	// address and the bind: a probe-then-bind race (vLLM#40443) made deterministic.
	ActStealPort Action = vllm.FaultStealPort
)

// Actions lists every action, in the README's order.
var Actions = []Action{ActKill, ActRestart, ActPause, ActResume, ActPartition, ActHeal,
	ActStoreRestart, ActStoreWipe, ActStoreFault, ActStealPort}

// Trigger kinds: what a step waits for before it acts.
const (
	// AfterSettled: the deployment settled (every process ready or exited).
	AfterSettled = "settled"
	// AfterEvent: a named event in the store's event log, optionally of one host or process.
	AfterEvent = "event"
	// AfterStep: another (earlier) step finished and the deployment settled again after it.
	AfterStep = "step"
	// AfterStart: armed when the deployment starts, acting at the moment its target reaches the
	// point it waits for (a steal-port: the process learnt the address it is about to bind).
	AfterStart = "start"
)

// Events a trigger can wait for: each is an entry of the fake store's event log (README,
// "Test endpoints").
const (
	// EventReady: a process reported that it completed its start-up (report.Process Ready).
	EventReady = "ready"
	// EventExited: a process reported its exit.
	EventExited = "exited"
	// EventRegistered: a worker mounted its Mooncake segment (MountSegment).
	EventRegistered = "registered"
	// EventRemounted: a worker remounted its segment after NEED_REMOUNT (ReMountSegment).
	EventRemounted = "remounted"
	// EventExpired: the store expired the clients that stopped pinging; as a trigger it holds once
	// every client in scope the store no longer hears is expired (the harness's waitTrigger).
	EventExpired = "expired"
)

// Events lists the event names a trigger accepts.
var Events = []string{EventReady, EventExited, EventRegistered, EventRemounted, EventExpired}

// storeEvents are the events about Mooncake segments (the store's own), as against a process's.
var storeEvents = map[string]bool{EventRegistered: true, EventRemounted: true, EventExpired: true}

// Trigger is when a step fires.
type Trigger struct {
	// Kind is AfterSettled, AfterEvent or AfterStep.
	Kind string
	// Event (AfterEvent) is one of Events; Host and Process, when set, scope it.
	Event   string
	Host    string
	Process string
	// Step (AfterStep) is the name of an earlier step.
	Step string
}

func (t Trigger) String() string {
	switch t.Kind {
	case AfterEvent:
		s := "event " + t.Event
		if t.Process != "" {
			s += " of " + t.Process
		} else if t.Host != "" {
			s += " on " + t.Host
		}
		return s
	case AfterStep:
		return "step " + t.Step
	case AfterStart:
		return "start, when the process learns the address"
	}
	return AfterSettled
}

// Step is one entry of a scenario's fault timeline.
type Step struct {
	// Name is unique within the scenario: as written, or "step-<index>".
	Name   string
	After  Trigger
	Action Action
	// Targets are the hosts and process IDs of kill, restart, pause and resume (several act at
	// once: restarting every node of a replica is not restarting them one after the other).
	// IsProcess tells a process ID from a host.
	Targets []string
	// Target is the process of a steal-port.
	Target string
	// Hosts and From are the sides of a partition; FromStore cuts Hosts from the store instead.
	Hosts, From []string
	FromStore   bool
	// Heals is the partition step a heal undoes.
	Heals string
	// StoreFault is the fault a store-fault step adds.
	StoreFault *api.Fault
	// Channel is the address channel of Target a steal-port step takes (vllm/addresses.go lists
	// the channels: engine-io, dp-coordinator, api-server, ...).
	Channel string
	// Line is where the step starts in the file; actionLine and afterLine are where its action
	// and trigger are (errors about them point there).
	Line                  int
	actionLine, afterLine int
}

// Describe is the step in words: "kill r1-follower/0/headless-0".
func (s Step) Describe() string {
	switch s.Action {
	case ActPartition:
		from := strings.Join(s.From, ",")
		if s.FromStore {
			from = "the store"
		}
		return fmt.Sprintf("partition %s from %s", strings.Join(s.Hosts, ","), from)
	case ActHeal:
		return "heal " + s.Heals
	case ActStoreRestart, ActStoreWipe:
		return string(s.Action)
	case ActStoreFault:
		return "store-fault " + s.StoreFault.Kind
	case ActStealPort:
		return fmt.Sprintf("steal-port %s of %s", s.Channel, s.Target)
	}
	return string(s.Action) + " " + strings.Join(s.Targets, ",")
}

// IsProcess reports whether a target names a process ("host/command/role-index...") rather than
// a host.
func IsProcess(target string) bool { return strings.Contains(target, "/") }

var stepNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`) })

// faults reads the `faults:` list: its shape and the names steps refer to; the targets are
// checked against the plan in validateFaults.
func (p *parser) faults(s *Scenario, v *yaml.Node) {
	items := p.list(v, "faults", "a list of fault steps", "give at least one step, or leave faults out")
	names := map[string]int{}
	for i, sv := range items {
		path := fmt.Sprintf("faults[%d]", i)
		known := []string{"name", "after"}
		for _, a := range Actions {
			known = append(known, string(a))
		}
		m := p.mapping(sv, path, known...)
		if m == nil {
			continue
		}
		st := Step{Name: fmt.Sprintf("step-%d", i), Line: sv.Line}
		if f, ok := m.get("name"); ok {
			if n, ok := p.str(f.value, path+".name"); ok {
				if !stepNameRE().MatchString(n) {
					p.errorf(f.value, path+".name", "%q must match [a-z0-9-]+", n)
				}
				st.Name = n
			}
		}
		if prev, dup := names[st.Name]; dup {
			p.errorf(sv, path+".name", "%q is already the name of faults[%d]", st.Name, prev)
		} else {
			names[st.Name] = i
		}
		var actions []string
		for _, k := range m.order {
			if k != "name" && k != "after" {
				actions = append(actions, k)
			}
		}
		switch len(actions) {
		case 0:
			p.errorf(sv, path, "no action: give one of %s", actionList())
			s.Faults = append(s.Faults, st)
			continue
		case 1:
		default:
			p.errorf(m.byKey[actions[1]].key, path, "one action per step, got %s: put each in its own step", strings.Join(actions, " and "))
			s.Faults = append(s.Faults, st)
			continue
		}
		st.Action = Action(actions[0])
		p.action(&st, m.byKey[actions[0]], path)
		st.After = Trigger{Kind: AfterSettled}
		if i > 0 {
			st.After = Trigger{Kind: AfterStep, Step: s.Faults[i-1].Name}
		}
		if f, ok := m.get("after"); ok {
			if st.Action == ActStealPort {
				p.errorf(f.key, path+".after", "a steal-port takes no trigger: it is armed at start and acts when the process learns the address")
			} else {
				p.trigger(&st, f.value, path+".after", names)
			}
		}
		if st.Action == ActStealPort {
			st.After = Trigger{Kind: AfterStart}
		}
		s.Faults = append(s.Faults, st)
	}
	// A heal names an earlier partition; a resume an earlier pause of its host.
	for i, st := range s.Faults {
		path := fmt.Sprintf("faults[%d]", i)
		switch st.Action {
		case ActHeal:
			j, ok := names[st.Heals]
			switch {
			case st.Heals == "":
			case !ok || j >= i:
				p.errorAt(st.actionLine, path+".heal", "%q is not an earlier step", st.Heals)
			case s.Faults[j].Action != ActPartition:
				p.errorAt(st.actionLine, path+".heal", "%q is a %s step, not a partition", st.Heals, s.Faults[j].Action)
			}
		case ActResume:
			paused := false
			for _, prev := range s.Faults[:i] {
				if prev.Action == ActPause && slices.Equal(prev.Targets, st.Targets) {
					paused = true
				}
			}
			if !paused && len(st.Targets) > 0 {
				p.errorAt(st.actionLine, path+".resume", "%s: not paused by an earlier step (resume what one pause step paused)", strings.Join(st.Targets, ","))
			}
		}
	}
}

func actionList() string {
	parts := make([]string, len(Actions))
	for i, a := range Actions {
		parts[i] = string(a)
	}
	return strings.Join(parts, ", ")
}

func (p *parser) action(st *Step, f field, path string) {
	apath := path + "." + string(st.Action)
	st.actionLine = f.value.Line
	switch st.Action {
	case ActKill, ActRestart, ActPause, ActResume:
		if f.value.Kind == yaml.SequenceNode {
			for i, tv := range p.list(f.value, apath, "a host, a process ID or a list of them", "name at least one target") {
				if t, ok := p.str(tv, fmt.Sprintf("%s[%d]", apath, i)); ok {
					st.Targets = append(st.Targets, t)
				}
			}
		} else if t, ok := p.str(f.value, apath); ok {
			st.Targets = []string{t}
		}
		for _, t := range st.Targets {
			if IsProcess(t) && (st.Action == ActPause || st.Action == ActResume) {
				p.errorf(f.value, apath, "%q: %s acts on a node (a host name), not a process", t, st.Action)
			}
		}
	case ActPartition:
		m := p.mapping(f.value, apath, "hosts", "from")
		if m == nil {
			return
		}
		if h, ok := m.get("hosts"); ok {
			st.Hosts = p.hostList(h.value, apath+".hosts")
		} else {
			p.errorf(f.value, apath+".hosts", "required: the hosts cut off")
		}
		fr, ok := m.get("from")
		switch {
		case !ok:
			p.errorf(f.value, apath+".from", "required: a list of hosts, or store")
		case fr.value.Kind == yaml.ScalarNode && fr.value.Value == "store":
			st.FromStore = true
		default:
			st.From = p.hostList(fr.value, apath+".from")
		}
	case ActHeal:
		st.Heals, _ = p.str(f.value, apath)
	case ActStoreRestart, ActStoreWipe:
		v := f.value
		if !(v.Kind == yaml.ScalarNode && v.ShortTag() == "!!null") && !(v.Kind == yaml.MappingNode && len(v.Content) == 0) {
			p.errorf(v, apath, "takes no settings: write `%s: {}`", st.Action)
		}
	case ActStoreFault:
		spec, ok := p.str(f.value, apath)
		if !ok {
			return
		}
		ft, err := api.ParseFault(spec)
		if err != nil {
			p.errorf(f.value, apath, "%v", err)
			return
		}
		switch ft.Kind {
		case api.FaultRestart:
			p.errorf(f.value, apath, "use the store-restart action for a restart")
			return
		case api.FaultWipe:
			p.errorf(f.value, apath, "use the store-wipe action for a wipe")
			return
		}
		st.StoreFault = &ft
	case ActStealPort:
		m := p.mapping(f.value, apath, "process", "channel")
		if m == nil {
			return
		}
		if v, ok := m.get("process"); ok {
			st.Target, _ = p.str(v.value, apath+".process")
		} else {
			p.errorf(f.value, apath+".process", "required: the ID of the process about to bind")
		}
		if v, ok := m.get("channel"); ok {
			st.Channel, _ = p.str(v.value, apath+".channel")
		} else {
			p.errorf(f.value, apath+".channel", "required: which of its addresses (engine-io, dp-coordinator, api-server, ...)")
		}
	}
}

func (p *parser) hostList(v *yaml.Node, path string) []string {
	var out []string
	for i, hv := range p.list(v, path, "a list of hosts", "name at least one host") {
		if h, ok := p.str(hv, fmt.Sprintf("%s[%d]", path, i)); ok {
			out = append(out, h)
		}
	}
	return out
}

func (p *parser) trigger(st *Step, v *yaml.Node, path string, names map[string]int) {
	st.afterLine = v.Line
	if v.Kind == yaml.ScalarNode {
		if s, ok := p.str(v, path); ok {
			if s != AfterSettled {
				p.errorf(v, path, "%q: want settled, {event: ...} or {step: ...}", s)
				return
			}
			st.After = Trigger{Kind: AfterSettled}
		}
		return
	}
	m := p.mapping(v, path, "event", "host", "process", "step")
	if m == nil {
		return
	}
	ev, hasEv := m.get("event")
	sp, hasStep := m.get("step")
	switch {
	case hasEv && hasStep:
		p.errorf(v, path, "give either event or step, not both")
	case hasStep:
		name, ok := p.str(sp.value, path+".step")
		if !ok {
			return
		}
		if _, known := names[name]; !known || name == st.Name {
			p.errorf(sp.value, path+".step", "%q is not an earlier step (a step waits only on one before it)", name)
			return
		}
		for _, k := range []string{"host", "process"} {
			if f, ok := m.get(k); ok {
				p.errorf(f.key, path+"."+k, "scopes an event, not a step")
			}
		}
		st.After = Trigger{Kind: AfterStep, Step: name}
	case hasEv:
		name, ok := p.str(ev.value, path+".event")
		if !ok {
			return
		}
		if !contains(Events, name) {
			p.errorf(ev.value, path+".event", "%q is not an event (known: %s)", name, strings.Join(Events, ", "))
			return
		}
		t := Trigger{Kind: AfterEvent, Event: name}
		if f, ok := m.get("host"); ok {
			t.Host, _ = p.str(f.value, path+".host")
		}
		if f, ok := m.get("process"); ok {
			t.Process, _ = p.str(f.value, path+".process")
		}
		st.After = t
	default:
		p.errorf(v, path, "want settled, {event: ...} or {step: ...}")
	}
}

// checkFaults checks every step's targets against the deployment the model plans: hosts are
// nodes of the scenario, process IDs are processes it starts, and a steal-port names an address
// channel the process binds.
func (p *parser) checkFaults(s *Scenario) {
	hosts := map[string]bool{}
	for _, n := range s.Nodes {
		hosts[n.Host] = true
	}
	// binds[id] lists the channels process id binds; a process with no entry is not planned.
	binds := map[string][]string{}
	// tops are the top process of every command (what a restart can name).
	tops := map[string]bool{}
	// segments: the processes, and the hosts ("" for the whole deployment), that register a
	// Mooncake segment, which the store's events (registered, remounted, expired) are about.
	segments := map[string]bool{}
	opts := vllm.Options{Model: s.Model, Profile: s.Resolved, Seed: s.Name}
	for _, vn := range s.Deployment().Nodes {
		plan, err := vllm.PlanNode(vn, opts)
		if err != nil {
			continue // checkGPUs reported it
		}
		for _, top := range plan.Commands {
			tops[top.Identity.ID] = true
			walk(top, func(pp *vllm.ProcessPlan) {
				chans := []string{}
				for _, a := range pp.Addresses {
					if a.Role == report.AddressBind && !contains(chans, a.Channel) {
						chans = append(chans, a.Channel)
					}
				}
				binds[pp.Identity.ID] = chans
				if pp.RegistersSegment {
					segments[pp.Identity.ID], segments[vn.Host], segments[""] = true, true, true
				}
			})
		}
	}
	host := func(line int, path, h string) {
		if h != "" && !hosts[h] {
			p.errorAt(line, path, "%q is not a host of this scenario (hosts: %s)", h, strings.Join(sortedKeys(hosts), ", "))
		}
	}
	proc := func(line int, path, id string) bool {
		if _, ok := binds[id]; !ok && id != "" {
			p.errorAt(line, path, "%q is not a process this deployment starts (widetp explain lists their IDs)", id)
			return false
		}
		return true
	}
	// killedBy[h] is the step that killed host h, until a restart of h brings it back: nothing
	// runs there in between (no node program either), so no step can act on it.
	killedBy := map[string]string{}
	for i, st := range s.Faults {
		path := fmt.Sprintf("faults[%d]", i)
		apath := path + "." + string(st.Action)
		switch st.Action {
		case ActKill, ActRestart, ActPause, ActResume:
			for _, t := range st.Targets {
				h, _, _ := strings.Cut(t, "/")
				if by, ok := killedBy[h]; ok && (st.Action != ActRestart || IsProcess(t)) {
					p.errorAt(st.actionLine, apath, "%q: host %s is down since step %s killed it, and nothing runs there until a restart of the host", t, h, by)
				}
				if !IsProcess(t) {
					host(st.actionLine, apath, t)
				} else if proc(st.actionLine, apath, t) && st.Action == ActRestart && !tops[t] {
					// vLLM restarts nothing below a command's top process on its own: a worker or
					// engine core comes back only with the command that started it.
					p.errorAt(st.actionLine, apath, "%q is not the top process of a command: restart its command's top process or its host", t)
				}
			}
			for _, t := range st.Targets {
				switch {
				case IsProcess(t):
				case st.Action == ActKill:
					killedBy[t] = st.Name
				case st.Action == ActRestart:
					delete(killedBy, t)
				}
			}
		case ActPartition:
			side := map[string]bool{}
			for _, h := range st.Hosts {
				host(st.actionLine, apath+".hosts", h)
				side[h] = true
			}
			for _, h := range st.From {
				host(st.actionLine, apath+".from", h)
				if side[h] {
					p.errorAt(st.actionLine, apath+".from", "%q is on both sides of the partition", h)
				}
			}
		case ActStealPort:
			if proc(st.actionLine, apath+".process", st.Target) && st.Channel != "" && !contains(binds[st.Target], st.Channel) {
				p.errorAt(st.actionLine, apath+".channel", "%s binds no %q address (it binds: %s)", st.Target, st.Channel, strings.Join(binds[st.Target], ", "))
			}
		}
		if st.After.Kind == AfterEvent {
			host(st.afterLine, path+".after.host", st.After.Host)
			proc(st.afterLine, path+".after.process", st.After.Process)
			if st.After.Host != "" && st.After.Process != "" && !strings.HasPrefix(st.After.Process, st.After.Host+"/") {
				p.errorAt(st.afterLine, path+".after.process", "%q does not run on host %q", st.After.Process, st.After.Host)
			}
			// The store's events name segments: a scope in which nothing registers one would wait
			// for an event that never comes.
			if storeEvents[st.After.Event] {
				scope, what := st.After.Host, fmt.Sprintf("no process of host %q registers a Mooncake segment", st.After.Host)
				if st.After.Process != "" {
					scope, what = st.After.Process, fmt.Sprintf("%q registers no Mooncake segment", st.After.Process)
				} else if scope == "" {
					what = "no process of this deployment registers a Mooncake segment"
				}
				if _, planned := binds[scope]; (planned || hosts[scope] || scope == "") && !segments[scope] {
					p.errorAt(st.afterLine, path+".after.event", "%s (only the workers of a MooncakeStoreConnector do), so the store's %q event never comes", what, st.After.Event)
				}
			}
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// FaultSteps is the timeline as the model takes it (vllm.PredictTimeline).
func (s *Scenario) FaultSteps() []vllm.FaultStep {
	out := make([]vllm.FaultStep, len(s.Faults))
	for i, st := range s.Faults {
		f := vllm.FaultStep{Name: st.Name, Action: string(st.Action), Targets: st.Targets,
			Hosts: st.Hosts, From: st.From, FromStore: st.FromStore}
		if st.Action == ActStealPort {
			f.Process, f.Channel = st.Target, st.Channel
		}
		if st.StoreFault != nil {
			f.StoreFault, f.StoreSegment = st.StoreFault.Kind, st.StoreFault.Segment
		}
		if st.Action == ActHeal {
			f.Targets = []string{st.Heals}
		}
		if st.After.Kind == AfterEvent {
			f.AfterEvent = st.After.Event
		}
		out[i] = f
	}
	return out
}
