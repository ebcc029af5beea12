package htmlreport

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/widetp/widetp/check"
	"github.com/widetp/widetp/report"
)

// topology is the model of the picture: the deployment's hosts grouped into bands by the replicas
// they serve, each host's processes as glyphs in rows (a launcher or engine followed by its
// workers), the lookup edges, and the notes that say in words what the colours show. It is built
// from the records and violations alone (the same the checks read), then placed (place) and drawn
// (svg.go).
type topology struct {
	procs []report.Process
	facts []facts
	bands []*band
	// notes are the failed barriers whose members span bands (a DP group across replicas).
	notes []note
	// collapsed says whether runs of identical workers were folded into one glyph.
	collapsed bool

	w, h float64
}

// facts are what the picture needs of one process beyond its record.
type facts struct {
	replica    string // check.Replicas' name; "" for none
	index      int    // the replica's global DP index, when indexKnown
	indexKnown bool
	// mismatch: the process's Mooncake DP index differs from its replica's global DP index (or,
	// where the replica's index is undecided, the checks named it in a dp-index-mismatch).
	mismatch bool
	kinds    []report.Kind // violation kinds that name the process, in report.Kinds order
}

// band is the hosts that serve one set of replicas: hosts joined by a replica that spans them.
type band struct {
	replicas []replicaTag
	hosts    []*hostBox
	notes    []note
	geom
}

type replicaTag struct {
	name       string
	index      int
	indexKnown bool
}

type hostBox struct {
	name  string
	rows  []*row
	edges []edge
	notes []note
	geom
}

// row is one line of a host: a non-worker process at its depth in the process tree (with its only
// child when it has one and no workers, and so on down the chain), then the workers of the last
// in rank order; or, for workers whose parent did not report, the workers alone.
type row struct {
	depth  int
	glyphs []*glyph
}

// glyph is one drawn process, or a collapsed run of identical workers.
type glyph struct {
	members []int // indices into topology.procs
	worker  bool
	label   string
	// fill is the Mooncake DP index the members use (nil: None); outline the global DP index of
	// their replica (nil: no replica, or undecided).
	fill, outline *int
	mismatch      bool
	crashed       bool
	server        bool // binds a lookup server
	client        bool // connects a lookup client
	// flagged: named by a violation other than a crash or a DP index mismatch (which have their
	// own marks).
	flagged bool
	geom
}

func (g *glyph) run() bool { return len(g.members) > 1 }

// edge is a lookup: from the client to the server that answered it.
type edge struct {
	from, to  *glyph // to is nil when the answering server left no record, or nothing answered
	misrouted bool
	// unanswered: the lookup got no answer (lookup-unreachable).
	unanswered bool
	title      string
}

// note is a line of text under a host or a band; class picks its colour ("bad", "warn", "").
type note struct {
	text, title, class string
}

type geom struct{ x, y, w, h float64 }

// collapseAt is the shortest run of identical consecutive workers that the compact picture folds
// into one glyph: shorter runs cost no more drawn than folded.
const collapseAt = 3

// newTopology builds the picture's model of procs. With collapse, runs of at least collapseAt
// consecutive workers of one parent that look the same (same indices, marks and exit) become one
// glyph; every process is in exactly one glyph either way.
func newTopology(procs []report.Process, violations []report.Violation, collapse bool) *topology {
	t := &topology{procs: procs, facts: make([]facts, len(procs)), collapsed: collapse}
	t.computeFacts(violations)

	// Hosts in order of first appearance: reports list processes in the scenario's node order.
	var hostOrder []string
	byHost := map[string][]int{}
	for i, p := range procs {
		if _, ok := byHost[p.Host]; !ok {
			hostOrder = append(hostOrder, p.Host)
		}
		byHost[p.Host] = append(byHost[p.Host], i)
	}
	boxes := map[string]*hostBox{}
	for _, h := range hostOrder {
		boxes[h] = t.buildHost(h, byHost[h], violations, collapse)
	}
	t.buildBands(hostOrder, byHost, boxes)
	t.barrierNotes(boxes)
	t.place()
	return t
}

func (t *topology) computeFacts(violations []report.Violation) {
	byID := map[string][]int{}
	for i, p := range t.procs {
		byID[p.ID] = append(byID[p.ID], i)
	}
	for _, r := range check.Replicas(t.procs) {
		for _, id := range r.Members {
			for _, i := range byID[id] {
				t.facts[i].replica, t.facts[i].index, t.facts[i].indexKnown = r.Name, r.Index, r.IndexKnown
			}
		}
	}
	named := make([]map[report.Kind]bool, len(t.procs))
	for _, v := range violations {
		for _, id := range v.Processes {
			for _, i := range byID[id] {
				if named[i] == nil {
					named[i] = map[report.Kind]bool{}
				}
				named[i][v.Kind] = true
			}
		}
	}
	for i, p := range t.procs {
		f := &t.facts[i]
		for _, k := range report.Kinds {
			if named[i][k] {
				f.kinds = append(f.kinds, k)
			}
		}
		// Unknown kinds (a newer report) still flag the process.
		var unknown []string
		for k := range named[i] {
			if !k.Known() {
				unknown = append(unknown, string(k))
			}
		}
		sort.Strings(unknown)
		for _, k := range unknown {
			f.kinds = append(f.kinds, report.Kind(k))
		}
		m := p.MooncakeDPIndex
		switch {
		case m == nil:
		case f.indexKnown:
			f.mismatch = *m != f.index
		default:
			f.mismatch = named[i][report.DPIndexMismatch]
		}
	}
}

// pictureOrder lists every process index in the order the picture draws them: band by band,
// host by host, row by row.
func (t *topology) pictureOrder() []int {
	out := make([]int, 0, len(t.procs))
	for _, b := range t.bands {
		for _, h := range b.hosts {
			for _, r := range h.rows {
				for _, g := range r.glyphs {
					out = append(out, g.members...)
				}
			}
		}
	}
	return out
}

// roleOrder sorts a host's top-level processes: front ends before the processes they start.
var roleOrder = map[report.Role]int{
	report.RoleDPSupervisor: 0, report.RoleAPIServer: 1, report.RoleHeadless: 2,
	report.RoleEngineCore: 3, report.RoleRayActor: 4, report.RoleWorker: 5,
}

func (t *topology) lessProc(a, b int) bool {
	pa, pb := &t.procs[a], &t.procs[b]
	if pa.Command != pb.Command {
		return pa.Command < pb.Command
	}
	ra, oka := roleOrder[pa.Role]
	rb, okb := roleOrder[pb.Role]
	if !oka {
		ra = len(roleOrder)
	}
	if !okb {
		rb = len(roleOrder)
	}
	if ra != rb {
		return ra < rb
	}
	if pa.Role == report.RoleWorker {
		if ka, kb := optKey(pa.Rank), optKey(pb.Rank); ka != kb {
			return ka < kb
		}
		if ka, kb := optKey(pa.PPRank), optKey(pb.PPRank); ka != kb {
			return ka < kb
		}
		if ka, kb := optKey(pa.TPRank), optKey(pb.TPRank); ka != kb {
			return ka < kb
		}
	}
	if pa.DataParallelRank != pb.DataParallelRank {
		return pa.DataParallelRank < pb.DataParallelRank
	}
	if pa.ID != pb.ID {
		return pa.ID < pb.ID
	}
	return a < b
}

func optKey(p *int) int {
	if p == nil {
		return -1 << 31
	}
	return *p
}

// buildHost lays a host's processes out as rows: a depth-first walk of the process tree from the
// processes whose parent is not on the host, each non-worker followed on its row by its workers
// (or its only child).
func (t *topology) buildHost(name string, idx []int, violations []report.Violation, collapse bool) *hostBox {
	hb := &hostBox{name: name}
	first := map[string]int{} // ID -> index of its first record on this host
	commands := map[int]bool{}
	for _, i := range idx {
		if _, ok := first[t.procs[i].ID]; !ok {
			first[t.procs[i].ID] = i
		}
		commands[t.procs[i].Command] = true
	}
	children := map[int][]int{}
	var roots []int
	for _, i := range idx {
		p, ok := first[t.procs[i].Parent]
		if t.procs[i].Parent == "" || !ok || p == i {
			roots = append(roots, i)
			continue
		}
		children[p] = append(children[p], i)
	}
	for _, cs := range children {
		sort.Slice(cs, func(a, b int) bool { return t.lessProc(cs[a], cs[b]) })
	}
	sort.Slice(roots, func(a, b int) bool { return t.lessProc(roots[a], roots[b]) })

	labels := labeler{host: name, multiCommand: len(commands) > 1}
	seen := map[int]bool{}
	var walk func(i, depth int)
	walk = func(i, depth int) {
		if seen[i] {
			return
		}
		r := &row{depth: depth}
		hb.rows = append(hb.rows, r)
		// A launcher with one child and no workers (an API server and its engine core, a DP
		// supervisor's front end) shares its row with the child: the chain reads left to right.
		for {
			seen[i] = true
			r.glyphs = append(r.glyphs, t.single(i, labels))
			var workers, others []int
			for _, c := range children[i] {
				if t.procs[c].Role == report.RoleWorker && len(children[c]) == 0 {
					workers = append(workers, c)
				} else if !seen[c] {
					others = append(others, c)
				}
			}
			if len(workers) == 0 && len(others) == 1 {
				i = others[0]
				continue
			}
			r.glyphs = append(r.glyphs, t.workerGlyphs(workers, seen, collapse)...)
			for _, c := range others {
				walk(c, depth+1)
			}
			return
		}
	}
	// Top-level workers (their parent left no record on this host) share one row.
	var orphans []int
	for _, i := range roots {
		if t.procs[i].Role == report.RoleWorker && len(children[i]) == 0 {
			orphans = append(orphans, i)
			continue
		}
		walk(i, 0)
	}
	if len(orphans) > 0 {
		hb.rows = append(hb.rows, &row{glyphs: t.workerGlyphs(orphans, seen, collapse)})
	}
	// A Parent cycle leaves records no root reaches: each still gets a row of its own.
	for _, i := range idx {
		if !seen[i] {
			walk(i, 0)
		}
	}
	t.hostEdges(hb)
	t.hostNotes(hb, idx, violations)
	return hb
}

// labeler names processes inside their host box: the host and, with one command, the command
// index are the box's, so "r1-head/0/engine-core-1" is drawn as "engine-core-1".
type labeler struct {
	host         string
	multiCommand bool
}

func (l labeler) label(p *report.Process) string {
	rest, ok := strings.CutPrefix(p.ID, l.host+"/")
	if !ok {
		return p.ID
	}
	if l.multiCommand {
		return "c" + rest
	}
	if _, after, ok := strings.Cut(rest, "/"); ok {
		return after
	}
	return rest
}

// single is the glyph of one process.
func (t *topology) single(i int, l labeler) *glyph {
	p := &t.procs[i]
	g := t.glyphOf([]int{i})
	g.worker = p.Role == report.RoleWorker
	if g.worker {
		g.label = workerLabel(p)
	} else {
		g.label = l.label(p)
	}
	return g
}

func (t *topology) glyphOf(members []int) *glyph {
	p, f := &t.procs[members[0]], &t.facts[members[0]]
	g := &glyph{members: members, fill: p.MooncakeDPIndex, mismatch: f.mismatch, crashed: p.Crashed(),
		server: p.LookupRole == report.LookupServer, client: p.LookupRole == report.LookupClient}
	if f.indexKnown {
		g.outline = report.Int(f.index)
	}
	for _, k := range f.kinds {
		if k != report.ProcessCrashed && k != report.DPIndexMismatch {
			g.flagged = true
		}
	}
	return g
}

// workerLabel is a worker's TP rank, prefixed by its PP rank when it has a later stage: vLLM's
// rank = pp_rank * tp_size + tp_rank, so "1:3" is TP rank 3 of the second stage.
func workerLabel(p *report.Process) string {
	tp := "?"
	switch {
	case p.TPRank != nil:
		tp = strconv.Itoa(*p.TPRank)
	case p.Rank != nil:
		tp = strconv.Itoa(*p.Rank)
	}
	if p.PPRank != nil && *p.PPRank > 0 {
		return strconv.Itoa(*p.PPRank) + ":" + tp
	}
	return tp
}

// workerGlyphs draws workers (one parent's, in rank order), folding runs of identical ones when
// collapse is set.
func (t *topology) workerGlyphs(workers []int, seen map[int]bool, collapse bool) []*glyph {
	var out []*glyph
	for start := 0; start < len(workers); {
		end := start + 1
		if collapse {
			key := t.lookKey(workers[start])
			for end < len(workers) && t.lookKey(workers[end]) == key {
				end++
			}
			if end-start < collapseAt {
				end = start + 1
			}
		}
		members := append([]int(nil), workers[start:end]...)
		for _, m := range members {
			seen[m] = true
		}
		g := t.glyphOf(members)
		g.worker = true
		g.label = workerLabel(&t.procs[members[0]])
		if len(members) > 1 {
			g.label += "–" + workerLabel(&t.procs[members[len(members)-1]])
		}
		out = append(out, g)
		start = end
	}
	return out
}

// lookKey is everything a worker's glyph shows but its rank: workers with equal keys look alike.
func (t *topology) lookKey(i int) string {
	p, f := &t.procs[i], &t.facts[i]
	return fmt.Sprintf("%s|%s|%v|%v|%v|%s|%s|%v", optText(p.MooncakeDPIndex), f.replica, f.mismatch, p.Crashed(),
		p.Live(), exitText(p.Exit), p.LookupRole, f.kinds)
}

// hostEdges connects each lookup client of the host to the server that answered it. Lookups are
// ipc sockets, so the server is on the same host (report.ResolveLookups joins them per host).
func (t *topology) hostEdges(hb *hostBox) {
	glyphOf := map[int]*glyph{}
	byID := map[string]*glyph{}
	for _, r := range hb.rows {
		for _, g := range r.glyphs {
			for _, m := range g.members {
				glyphOf[m] = g
				if _, ok := byID[t.procs[m].ID]; !ok {
					byID[t.procs[m].ID] = g
				}
			}
		}
	}
	for _, r := range hb.rows {
		for _, g := range r.glyphs {
			for _, m := range g.members {
				p := &t.procs[m]
				if p.Lookup != nil && p.Lookup.ServedBy == "" && p.Lookup.Error != "" {
					hb.edges = append(hb.edges, edge{from: g, unanswered: true,
						title: fmt.Sprintf("%s's lookup at %s got no answer: %s", p.ID, p.LookupPath, p.Lookup.Error)})
					continue
				}
				if p.Lookup == nil || p.Lookup.ServedBy == "" {
					continue
				}
				to := byID[p.Lookup.ServedBy]
				e := edge{from: g, to: to}
				if to == nil {
					e.misrouted = true
					e.title = fmt.Sprintf("%s's lookup at %s was answered by %s, which left no record", p.ID, p.LookupPath, p.Lookup.ServedBy)
				} else {
					s := to.members[0]
					for _, sm := range to.members {
						if t.procs[sm].ID == p.Lookup.ServedBy {
							s = sm
						}
					}
					// The checks' rule (README, "How the checks read incomplete records"): an
					// answer from another replica's server, or from a process that binds none.
					e.misrouted = t.facts[s].replica != t.facts[m].replica || t.procs[s].LookupRole != report.LookupServer
					state := "its own replica's server"
					if e.misrouted {
						state = "ANOTHER replica's server (misrouted)"
					}
					e.title = fmt.Sprintf("%s looked up at %s and was answered by %s: %s", p.ID, p.LookupPath, p.Lookup.ServedBy, state)
				}
				hb.edges = append(hb.edges, e)
			}
		}
	}
}

// maxCrashNotes bounds the crash lines of one host; the rest are counted.
const maxCrashNotes = 3

// hostNotes says in words what the host's glyphs show: who disagrees on the DP index and how,
// what the crashed processes died of, which other violations name processes of the host.
func (t *topology) hostNotes(hb *hostBox, idx []int, violations []report.Violation) {
	type pair struct{ mc, rep string }
	mism := map[pair]int{}
	var mismOrder []pair
	crashes := map[string]int{}
	var crashOrder []string
	onHost := map[string]bool{}
	for _, i := range idx {
		p, f := &t.procs[i], &t.facts[i]
		onHost[p.ID] = true
		if f.mismatch {
			k := pair{optText(p.MooncakeDPIndex), "undecided"}
			if f.indexKnown {
				k.rep = strconv.Itoa(f.index)
			}
			if mism[k] == 0 {
				mismOrder = append(mismOrder, k)
			}
			mism[k]++
		}
		if p.Crashed() {
			e := exitText(p.Exit)
			if crashes[e] == 0 {
				crashOrder = append(crashOrder, e)
			}
			crashes[e]++
		}
	}
	for _, k := range mismOrder {
		hb.notes = append(hb.notes, note{class: "bad",
			text:  fmt.Sprintf("≠ %d: Mooncake DP index %s, replica's %s", mism[k], k.mc, k.rep),
			title: fmt.Sprintf("%d process(es) of %s use Mooncake DP index %s while their replica's global DP index is %s (dp-index-mismatch)", mism[k], hb.name, k.mc, k.rep)})
	}
	sort.SliceStable(crashOrder, func(a, b int) bool { return crashes[crashOrder[a]] > crashes[crashOrder[b]] })
	for n, e := range crashOrder {
		if n == maxCrashNotes {
			rest := 0
			for _, e := range crashOrder[n:] {
				rest += crashes[e]
			}
			hb.notes = append(hb.notes, note{class: "bad", text: fmt.Sprintf("✖ %d more crashed", rest)})
			break
		}
		hb.notes = append(hb.notes, note{class: "bad", text: fmt.Sprintf("✖ %d× %s", crashes[e], e),
			title: fmt.Sprintf("%d process(es) of %s crashed: %s", crashes[e], hb.name, e)})
	}
	other := map[report.Kind]int{}
	for _, v := range violations {
		if v.Kind == report.ProcessCrashed || v.Kind == report.DPIndexMismatch || v.Kind == report.RendezvousFailed {
			continue
		}
		for _, id := range v.Processes {
			if onHost[id] {
				other[v.Kind]++
				break
			}
		}
	}
	kinds := make([]string, 0, len(other))
	for k := range other {
		kinds = append(kinds, string(k))
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		hb.notes = append(hb.notes, note{class: "warn", text: fmt.Sprintf("⚠ %s ×%d", k, other[report.Kind(k)]),
			title: fmt.Sprintf("%d %s violation(s) name processes of %s (see Violations)", other[report.Kind(k)], k, hb.name)})
	}
}

// buildBands groups hosts that share a replica (union-find over the replicas' hosts), in order of
// each band's first host.
func (t *topology) buildBands(hostOrder []string, byHost map[string][]int, boxes map[string]*hostBox) {
	parent := map[string]string{}
	var find func(string) string
	find = func(h string) string {
		for parent[h] != h {
			parent[h] = parent[parent[h]]
			h = parent[h]
		}
		return h
	}
	for _, h := range hostOrder {
		parent[h] = h
	}
	firstHost := map[string]string{} // replica -> first host seen serving it
	tags := map[string]replicaTag{}
	for _, h := range hostOrder {
		for _, i := range byHost[h] {
			f := &t.facts[i]
			if f.replica == "" {
				continue
			}
			tags[f.replica] = replicaTag{name: f.replica, index: f.index, indexKnown: f.indexKnown}
			if o, ok := firstHost[f.replica]; ok {
				parent[find(h)] = find(o)
			} else {
				firstHost[f.replica] = h
			}
		}
	}
	byRoot := map[string]*band{}
	for _, h := range hostOrder {
		r := find(h)
		b := byRoot[r]
		if b == nil {
			b = &band{}
			byRoot[r] = b
			t.bands = append(t.bands, b)
		}
		b.hosts = append(b.hosts, boxes[h])
	}
	for name, h := range firstHost {
		b := byRoot[find(h)]
		b.replicas = append(b.replicas, tags[name])
	}
	// Within a band, hosts in the order of the lowest worker rank they hold (a replica's head
	// holds rank 0, its followers the later ranks), then of appearance.
	appear := map[string]int{}
	minRank := map[string]int{}
	for n, h := range hostOrder {
		appear[h] = n
		minRank[h] = 1 << 30
		for _, i := range byHost[h] {
			if r := t.procs[i].Rank; r != nil && t.procs[i].Role == report.RoleWorker {
				minRank[h] = min(minRank[h], *r)
			}
		}
	}
	for _, b := range t.bands {
		sort.SliceStable(b.hosts, func(i, j int) bool {
			hi, hj := b.hosts[i].name, b.hosts[j].name
			if minRank[hi] != minRank[hj] {
				return minRank[hi] < minRank[hj]
			}
			return appear[hi] < appear[hj]
		})
	}
	for _, b := range t.bands {
		sort.Slice(b.replicas, func(i, j int) bool {
			ri, rj := b.replicas[i], b.replicas[j]
			if ri.indexKnown != rj.indexKnown {
				return ri.indexKnown
			}
			if ri.index != rj.index {
				return ri.index < rj.index
			}
			return ri.name < rj.name
		})
	}
	// Bands in the order of their lowest global DP index (replica 0 first), then of appearance;
	// bands of no replica last.
	lowest := func(b *band) int {
		for _, r := range b.replicas {
			if r.indexKnown {
				return r.index
			}
		}
		return 1 << 30
	}
	sort.SliceStable(t.bands, func(i, j int) bool { return lowest(t.bands[i]) < lowest(t.bands[j]) })
}

// maxMissing bounds the members a barrier note names; the rest are counted.
const maxMissing = 6

// barrierNotes puts every failed barrier under the band of its members, or above the picture
// when they span bands (a DP group across replicas).
func (t *topology) barrierNotes(boxes map[string]*hostBox) {
	bandOf := map[string]*band{}
	for _, b := range t.bands {
		for _, h := range b.hosts {
			bandOf[h.name] = b
		}
	}
	type failure struct {
		kind, addr string
		errs       []string
		missing    []string
		bands      map[*band]bool
	}
	failures := map[string]*failure{}
	var order []string
	for _, p := range t.procs {
		for _, rz := range p.Rendezvous {
			if rz.Error == "" {
				continue
			}
			key := rz.Kind + " " + report.BarrierKey(p.Host, rz.Address)
			f := failures[key]
			if f == nil {
				f = &failure{kind: rz.Kind, addr: report.BarrierKey(p.Host, rz.Address), bands: map[*band]bool{}}
				failures[key] = f
				order = append(order, key)
			}
			if !contains(f.errs, rz.Error) {
				f.errs = append(f.errs, rz.Error)
			}
			for _, m := range rz.Missing {
				if !contains(f.missing, m) {
					f.missing = append(f.missing, m)
				}
			}
			f.bands[bandOf[p.Host]] = true
		}
	}
	for _, key := range order {
		f := failures[key]
		text := fmt.Sprintf("⊘ %s barrier %s did not complete: %s", f.kind, f.addr, strings.Join(f.errs, "; "))
		title := text
		if len(f.missing) > 0 {
			shown := f.missing
			more := ""
			if len(shown) > maxMissing {
				shown, more = shown[:maxMissing], fmt.Sprintf(" (+%d)", len(f.missing)-maxMissing)
			}
			text += " · missing " + strings.Join(shown, ", ") + more
			title += "; never arrived: " + strings.Join(f.missing, ", ")
		}
		n := note{text: text, title: title, class: "bad"}
		if len(f.bands) == 1 {
			for b := range f.bands {
				b.notes = append(b.notes, n)
			}
			continue
		}
		t.notes = append(t.notes, n)
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// exitText is how a process ended, for a reader: the exception, else the signal, else the code.
func exitText(e *report.Exit) string {
	switch {
	case e == nil:
		return ""
	case e.Error != "":
		return e.Error
	case e.Signal != "":
		return e.Signal
	}
	return "exit " + strconv.Itoa(e.Code)
}

// optText renders a Python optional int: nil is None, distinct from 0.
func optText(p *int) string {
	if p == nil {
		return "None"
	}
	return strconv.Itoa(*p)
}
