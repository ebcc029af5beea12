package htmlreport

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/widetp/widetp/check"
	"github.com/widetp/widetp/report"
)

var (
	//go:embed page.html
	pageHTML string
	//go:embed page.css
	pageCSS string
	//go:embed page.js
	pageJS string

	pageTemplate = sync.OnceValue(func() *template.Template { return template.Must(template.New("page").Parse(pageHTML)) })
)

// compactAbove is the number of processes above which the page opens on the compact picture:
// 150 processes are about 16 hosts of 8 workers, which still fit a screen one rank a square.
const compactAbove = 150

// Option configures Write.
type Option func(*config)

type config struct {
	pageDir string
}

// LinkFrom says in which directory the page will be read, so that its links to the artifacts are
// relative to it (WriteFile sets it to the file's directory). Without it, links are relative to the
// current directory.
func LinkFrom(dir string) Option { return func(c *config) { c.pageDir = dir } }

// WriteFile renders doc into path (written whole or not at all: a temporary file renamed over it),
// linking the artifacts relative to path's directory.
func WriteFile(path string, doc *Document, opts ...Option) error {
	var buf bytes.Buffer
	opts = append([]Option{LinkFrom(filepath.Dir(path))}, opts...)
	if err := Write(&buf, doc, opts...); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".report-*.html")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, werr := tmp.Write(buf.Bytes())
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Write renders doc as one self-contained HTML page: inline CSS, script and SVG, no request to
// anywhere, every string of the report escaped.
func Write(w io.Writer, doc *Document, opts ...Option) error {
	if doc == nil {
		return fmt.Errorf("render report: no document")
	}
	var c config
	for _, o := range opts {
		o(&c)
	}
	data, err := newPage(doc, c)
	if err != nil {
		return fmt.Errorf("render report %s: %w", doc.Report.Scenario, err)
	}
	if err := pageTemplate().Execute(w, data); err != nil {
		return fmt.Errorf("render report %s: %w", doc.Report.Scenario, err)
	}
	return nil
}

// page is what the template reads.
type page struct {
	Rep        *report.Report
	Title      string
	Predicted  bool
	Expected   string
	Observed   string
	AsExpected bool
	Extra      []Field
	Planner    string
	Summary    string
	Findings   []finding

	Pictures    template.HTML
	Toggle      bool
	DefaultView string

	Groups    []group
	StepCols  []string
	StepRows  [][]string
	Rows      []procRow
	Hosts     []string
	Replicas  []string
	Kinds     []string
	RepRows   []replicaRow
	Timings   []timing
	ArtFiles  []link
	ArtHosts  []hostLinks
	ArtDir    string
	HasArts   bool
	Records   template.JS
	CSS       template.CSS
	JS        template.JS
	ProcCount int
}

type finding struct{ Class, Text, Full string }

type group struct {
	Kind    string
	About   string
	Count   int
	Procs   int
	Items   []groupItem
	Unknown bool
}

type groupItem struct {
	Message string
	Procs   []procRef
}

type procRef struct {
	Index int
	ID    string
}

type procRow struct {
	Index                                int
	ID, Role, Host, Replica              string
	DPRank, RankLocal, DPIndex, Mooncake string
	Ranks, Lookup, EngineID, Exit        string
	Kinds                                string
	Mismatch, Crashed, LookupBad         bool
}

type replicaRow struct {
	Name, Index, Engine, Hosts, Mooncake string
	Workers                              int
	Mismatch                             bool
}

type timing struct {
	Name, Seconds string
	Pct           float64
}

type link struct{ Name, Href string }

type hostLinks struct {
	Host  string
	Links []link
}

// kindAbout says in a few words what each violation kind means (README, "widetp explain").
var kindAbout = map[report.Kind]string{
	report.ProcessCrashed:           "a process exited with an error nobody asked for",
	report.DPIndexMismatch:          "a process's Mooncake DP index differs from its replica's global DP index",
	report.LookupPathCollision:      "two live lookup servers on one host bound the same ipc path",
	report.LookupMisrouted:          "an engine's lookup was answered by another replica's server",
	report.LookupUnreachable:        "an engine's lookup got no answer",
	report.SegmentNameCollision:     "two live workers hold the same Mooncake segment name",
	report.EngineIDCollision:        "engines of different replicas share a KV engine_id",
	report.EngineIDMismatch:         "processes of one replica hold different KV engine_ids",
	report.DPIndexDuplicate:         "two replicas of one deployment have the same global DP index",
	report.RendezvousFailed:         "a barrier's members did not all arrive",
	report.StoreRegistrationLost:    "a worker did not register again after a store fault",
	report.IdentityChangedOnRestart: "a restarted process came back with another identity",
}

func newPage(doc *Document, c config) (*page, error) {
	rep := &doc.Report
	p := &page{
		Rep:       rep,
		Predicted: rep.Runtime == "none",
		Extra:     doc.Extra,
		Planner:   plannerText(rep.Planner),
		CSS:       template.CSS(pageCSS),
		JS:        template.JS(pageJS),
		ProcCount: len(rep.Processes),
	}
	got := report.KindSet(rep.Violations)
	want := append([]report.Kind(nil), rep.Expected...)
	sort.Slice(want, func(i, j int) bool { return want[i] < want[j] })
	p.AsExpected = slices.Equal(got, want) && rep.Error == ""
	p.Expected, p.Observed = kindList(want), kindList(got)
	verdict := rep.Verdict
	if verdict == "" {
		verdict = "pass"
		if len(rep.Violations) > 0 {
			verdict = "fail"
		}
	}
	p.Title = fmt.Sprintf("widetp · %s · %s", rep.Scenario, verdict)

	expanded := newTopology(rep.Processes, rep.Violations, false)
	compact := newTopology(rep.Processes, rep.Violations, true)
	p.Summary = summary(expanded)
	p.Findings = findings(expanded, rep.Violations)

	var arts *Artifacts
	if doc.Artifacts != nil {
		arts = doc.Artifacts
	}
	links := newLinker(arts, c.pageDir)
	logs := func(host string) string {
		if arts == nil || !slices.Contains(arts.Hosts[host], ArtifactLogs) {
			return ""
		}
		return links.href(host, ArtifactLogs)
	}
	label := fmt.Sprintf("Topology of %s: %s", rep.Scenario, p.Summary)
	p.Toggle = glyphCount(compact) < glyphCount(expanded)
	p.DefaultView = "expanded"
	if p.Toggle && len(rep.Processes) > compactAbove {
		p.DefaultView = "compact"
	}
	pics := expanded.svg(pictureOptions{id: "topo-expanded", view: "expanded", logs: logs, hidden: p.DefaultView != "expanded", label: label})
	if p.Toggle {
		pics += compact.svg(pictureOptions{id: "topo-compact", view: "compact", logs: logs, hidden: p.DefaultView != "compact", label: label})
	}
	p.Pictures = template.HTML(pics)

	p.Groups = groups(rep)
	p.StepCols, p.StepRows = stepTable(doc.Steps)
	p.Rows, p.Hosts, p.Replicas, p.Kinds = procRows(expanded)
	p.RepRows = replicaRows(expanded)
	p.Timings = timings(rep.Timings)
	if arts != nil {
		p.HasArts = true
		p.ArtDir = arts.Dir
		for _, f := range arts.Files {
			p.ArtFiles = append(p.ArtFiles, link{Name: f, Href: links.href(f)})
		}
		for _, h := range arts.hostNames() {
			hl := hostLinks{Host: h}
			for _, f := range arts.Hosts[h] {
				hl.Links = append(hl.Links, link{Name: f, Href: links.href(h, f)})
			}
			p.ArtHosts = append(p.ArtHosts, hl)
		}
	}

	records := doc.Records
	if records == nil {
		records = make([]json.RawMessage, len(rep.Processes))
		for i := range rep.Processes {
			b, err := json.Marshal(rep.Processes[i])
			if err != nil {
				return nil, fmt.Errorf("encode process %s: %w", rep.Processes[i].ID, err)
			}
			records[i] = b
		}
	}
	// encoding/json escapes <, > and & (and U+2028/9), so no string of the report can end the
	// script element or start markup inside it.
	b, err := json.Marshal(records)
	if err != nil {
		return nil, fmt.Errorf("encode the processes: %w", err)
	}
	p.Records = template.JS(b)
	return p, nil
}

func glyphCount(t *topology) int {
	n := 0
	for _, b := range t.bands {
		for _, h := range b.hosts {
			for _, r := range h.rows {
				n += len(r.glyphs)
			}
		}
	}
	return n
}

func kindList(ks []report.Kind) string {
	if len(ks) == 0 {
		return "none (healthy)"
	}
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = string(k)
	}
	return strings.Join(parts, ", ")
}

// summary counts what the picture holds.
func summary(t *topology) string {
	hosts, crashed, workers := 0, 0, 0
	for _, b := range t.bands {
		hosts += len(b.hosts)
	}
	reps := map[string]bool{}
	for i, p := range t.procs {
		if p.Crashed() {
			crashed++
		}
		if p.Role == report.RoleWorker {
			workers++
		}
		if t.facts[i].replica != "" {
			reps[t.facts[i].replica] = true
		}
	}
	s := fmt.Sprintf("%s on %s, %s (%s)", plural(len(reps), "replica"), plural(hosts, "host"), plural(len(t.procs), "process"), plural(workers, "worker"))
	if crashed > 0 {
		s += fmt.Sprintf(", %d crashed", crashed)
	}
	return s
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	if strings.HasSuffix(word, "s") {
		return strconv.Itoa(n) + " " + word + "es"
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// maxHostsNamed bounds the hosts a finding names; the rest are counted.
const maxHostsNamed = 4

func hostList(hosts []string) string {
	if len(hosts) <= maxHostsNamed {
		return strings.Join(hosts, ", ")
	}
	return fmt.Sprintf("%s and %d more hosts", strings.Join(hosts[:maxHostsNamed], ", "), len(hosts)-maxHostsNamed)
}

// findings say in a sentence each what is wrong, grouped so that 64 nodes still read in a few
// lines: the DP index mismatches by the Mooncake index used, the crashes by exception, the other
// kinds by their first message.
func findings(t *topology, violations []report.Violation) []finding {
	var out []finding
	type agg struct {
		count    int
		hosts    []string
		indices  []int
		replicas []string
	}
	add := func(m map[string]*agg, order *[]string, key, host string, f *facts) {
		a := m[key]
		if a == nil {
			a = &agg{}
			m[key] = a
			*order = append(*order, key)
		}
		a.count++
		if !contains(a.hosts, host) {
			a.hosts = append(a.hosts, host)
		}
		if f == nil {
			return
		}
		if f.indexKnown && !slices.Contains(a.indices, f.index) {
			a.indices = append(a.indices, f.index)
		}
		if !contains(a.replicas, f.replica) {
			a.replicas = append(a.replicas, f.replica)
		}
	}
	mism, crash := map[string]*agg{}, map[string]*agg{}
	var mismOrder, crashOrder []string
	// Hosts are named in the picture's order.
	for _, i := range t.pictureOrder() {
		p := &t.procs[i]
		f := &t.facts[i]
		if f.mismatch {
			add(mism, &mismOrder, optText(p.MooncakeDPIndex), p.Host, f)
		}
		if p.Crashed() {
			add(crash, &crashOrder, exitText(p.Exit), p.Host, nil)
		}
	}
	for _, k := range mismOrder {
		a := mism[k]
		idx := "undecided"
		if len(a.indices) > 0 {
			sort.Ints(a.indices)
			idx = ranges(a.indices)
		}
		whose := "their replica's global DP index is"
		if len(a.replicas) == 1 {
			whose = "their replica " + a.replicas[0] + " has global DP index"
		} else if len(a.indices) > 1 {
			whose = "their replicas' global DP indices are"
		}
		out = append(out, finding{Class: "bad", Text: fmt.Sprintf("≠ %s on %s use%s Mooncake DP index %s, but %s %s",
			plural(a.count, "process"), hostList(a.hosts), verbS(a.count), k, whose, idx)})
	}
	sort.SliceStable(crashOrder, func(i, j int) bool { return crash[crashOrder[i]].count > crash[crashOrder[j]].count })
	for _, k := range crashOrder {
		a := crash[k]
		out = append(out, finding{Class: "bad", Text: fmt.Sprintf("✖ %s on %s crashed: %s", plural(a.count, "process"), hostList(a.hosts), k)})
	}
	count := map[report.Kind]int{}
	first := map[report.Kind]string{}
	var kinds []report.Kind
	for _, v := range violations {
		if v.Kind == report.ProcessCrashed || v.Kind == report.DPIndexMismatch {
			continue
		}
		if count[v.Kind] == 0 {
			kinds = append(kinds, v.Kind)
			first[v.Kind] = v.Message
		}
		count[v.Kind]++
	}
	for _, k := range kinds {
		more := ""
		if count[k] > 1 {
			more = fmt.Sprintf(" (and %d more)", count[k]-1)
		}
		out = append(out, finding{Class: "warn", Text: "⚠ " + fit(first[k], findingChars*noteCharW, noteCharW) + more, Full: first[k]})
	}
	return out
}

// findingChars bounds a finding's line: a violation message can name dozens of processes (a
// barrier's members); the full message is its tooltip and in the Violations section.
const findingChars = 240

func verbS(n int) string {
	if n == 1 {
		return "s"
	}
	return ""
}

// ranges renders sorted ints with consecutive runs folded: 1, 3–31.
func ranges(xs []int) string {
	var parts []string
	for i := 0; i < len(xs); {
		j := i
		for j+1 < len(xs) && xs[j+1] == xs[j]+1 {
			j++
		}
		if j-i >= 2 {
			parts = append(parts, fmt.Sprintf("%d–%d", xs[i], xs[j]))
		} else {
			for k := i; k <= j; k++ {
				parts = append(parts, strconv.Itoa(xs[k]))
			}
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

// groups are the violations by kind, in the contract's order (unknown kinds last), each with the
// processes it names.
func groups(rep *report.Report) []group {
	index := map[string]int{}
	for i, p := range rep.Processes {
		if _, ok := index[p.ID]; !ok {
			index[p.ID] = i
		}
	}
	byKind := map[report.Kind]*group{}
	var order []report.Kind
	procs := map[report.Kind]map[string]bool{}
	for _, v := range rep.Violations {
		g := byKind[v.Kind]
		if g == nil {
			g = &group{Kind: string(v.Kind), About: kindAbout[v.Kind], Unknown: !v.Kind.Known()}
			byKind[v.Kind] = g
			order = append(order, v.Kind)
			procs[v.Kind] = map[string]bool{}
		}
		g.Count++
		item := groupItem{Message: v.Message}
		for _, id := range v.Processes {
			procs[v.Kind][id] = true
			ref := procRef{Index: -1, ID: id}
			if i, ok := index[id]; ok {
				ref.Index = i
			}
			item.Procs = append(item.Procs, ref)
		}
		g.Items = append(g.Items, item)
	}
	rank := func(k report.Kind) int {
		if i := slices.Index(report.Kinds, k); i >= 0 {
			return i
		}
		return len(report.Kinds)
	}
	sort.SliceStable(order, func(i, j int) bool { return rank(order[i]) < rank(order[j]) })
	out := make([]group, 0, len(order))
	for _, k := range order {
		g := byKind[k]
		g.Procs = len(procs[k])
		out = append(out, *g)
	}
	return out
}

func stepTable(steps []Step) (cols []string, rows [][]string) {
	for _, s := range steps {
		for _, f := range s.Fields {
			if !contains(cols, f.Name) {
				cols = append(cols, f.Name)
			}
		}
	}
	for _, s := range steps {
		row := make([]string, len(cols))
		for _, f := range s.Fields {
			row[slices.Index(cols, f.Name)] = f.Value
		}
		rows = append(rows, row)
	}
	return cols, rows
}

func procRows(t *topology) (rows []procRow, hosts, replicas, kinds []string) {
	kindSeen := map[report.Kind]bool{}
	for i := range t.procs {
		p, f := &t.procs[i], &t.facts[i]
		r := procRow{
			Index: i, ID: p.ID, Role: string(p.Role), Host: p.Host, Replica: f.replica,
			DPRank: strconv.Itoa(p.DataParallelRank), RankLocal: optText(p.DataParallelRankLocal),
			DPIndex: strconv.Itoa(p.DataParallelIndex), Mooncake: optText(p.MooncakeDPIndex),
			EngineID: p.EngineID, Exit: exitText(p.Exit), Mismatch: f.mismatch, Crashed: p.Crashed(),
		}
		if p.Rank != nil || p.TPRank != nil || p.PPRank != nil {
			r.Ranks = optText(p.Rank) + "/" + optText(p.TPRank) + "/" + optText(p.PPRank)
		}
		if p.LookupRole != "" {
			r.Lookup = string(p.LookupRole) + " " + p.LookupPath
			if p.Lookup != nil && p.Lookup.ServedBy != "" {
				r.Lookup += " → " + p.Lookup.ServedBy
			}
			if p.Lookup != nil && p.Lookup.Error != "" {
				r.Lookup += " ✖ " + p.Lookup.Error
				r.LookupBad = true
			}
		}
		ks := make([]string, len(f.kinds))
		for j, k := range f.kinds {
			ks[j] = string(k)
			if k == report.LookupMisrouted || k == report.LookupUnreachable {
				r.LookupBad = true
			}
			kindSeen[k] = true
		}
		r.Kinds = strings.Join(ks, " ")
		rows = append(rows, r)
		if !contains(hosts, p.Host) {
			hosts = append(hosts, p.Host)
		}
		if f.replica != "" && !contains(replicas, f.replica) {
			replicas = append(replicas, f.replica)
		}
	}
	sort.Strings(replicas)
	for _, k := range report.Kinds {
		if kindSeen[k] {
			kinds = append(kinds, string(k))
			delete(kindSeen, k)
		}
	}
	var rest []string
	for k := range kindSeen {
		rest = append(rest, string(k))
	}
	sort.Strings(rest)
	return rows, hosts, replicas, append(kinds, rest...)
}

func replicaRows(t *topology) []replicaRow {
	var out []replicaRow
	byID := map[string]int{}
	for i, p := range t.procs {
		if _, ok := byID[p.ID]; !ok {
			byID[p.ID] = i
		}
	}
	for _, r := range check.Replicas(t.procs) {
		row := replicaRow{Name: r.Name, Index: "undecided", Engine: r.Engine}
		if r.IndexKnown {
			row.Index = strconv.Itoa(r.Index)
		}
		var hosts []string
		mc := map[string]bool{}
		for _, id := range r.Members {
			i := byID[id]
			p := &t.procs[i]
			if p.Role == report.RoleWorker {
				row.Workers++
			}
			if !contains(hosts, p.Host) {
				hosts = append(hosts, p.Host)
			}
			if p.MooncakeDPIndex != nil {
				mc[strconv.Itoa(*p.MooncakeDPIndex)] = true
			}
			row.Mismatch = row.Mismatch || t.facts[i].mismatch
		}
		row.Hosts = strings.Join(hosts, ", ")
		idx := make([]string, 0, len(mc))
		for k := range mc {
			idx = append(idx, k)
		}
		sort.Slice(idx, func(i, j int) bool { a, _ := strconv.Atoi(idx[i]); b, _ := strconv.Atoi(idx[j]); return a < b })
		row.Mooncake = strings.Join(idx, ", ")
		out = append(out, row)
	}
	return out
}

// phaseOrder lists the timed phases in the order they happen (explain's, then run's); others
// follow in name order, total last.
var phaseOrder = []string{"load", "predict", "start", "start_store", "start_nodes", "settle", "collect", "check", "teardown"}

func timings(t map[string]float64) []timing {
	var names []string
	for _, n := range phaseOrder {
		if _, ok := t[n]; ok {
			names = append(names, n)
		}
	}
	var rest []string
	for n := range t {
		if !slices.Contains(phaseOrder, n) && n != "total" {
			rest = append(rest, n)
		}
	}
	sort.Strings(rest)
	names = append(names, rest...)
	if _, ok := t["total"]; ok {
		names = append(names, "total")
	}
	top := 0.0
	for _, n := range names {
		top = max(top, t[n])
	}
	out := make([]timing, 0, len(names))
	for _, n := range names {
		pct := 0.0
		if top > 0 {
			pct = 100 * t[n] / top
		}
		out = append(out, timing{Name: n, Seconds: formatSeconds(t[n]), Pct: pct})
	}
	return out
}

// WriteDir renders rep into dir/report.html, linking the artifacts that dir holds: what a run
// leaves beside its report.json. Call it after the other artifacts are written.
func WriteDir(dir string, rep report.Report) error {
	doc := FromReport(rep)
	arts, err := ScanArtifacts(dir)
	if err != nil {
		return fmt.Errorf("write %s: %w", ArtifactHTML, err)
	}
	if !arts.empty() {
		doc.Artifacts = arts
	}
	return WriteFile(filepath.Join(dir, ArtifactHTML), doc)
}

// plannerText says who planned the processes (report.Planner): "the Go model", or vLLM's launch
// code with its version, commit and where it was imported from. Empty for an older report
// without the field.
func plannerText(pl *report.Planner) string {
	if pl == nil {
		return ""
	}
	if pl.Name == "model" {
		return "the Go model (model)"
	}
	s := pl.Name
	if pl.Name == "vllm" {
		s = "vLLM's own launch code (vllm)"
	}
	for _, part := range []struct{ label, v string }{{"version", pl.Version}, {"commit", pl.Commit}, {"from", pl.Path}} {
		if part.v != "" {
			s += ", " + part.label + " " + part.v
		}
	}
	return s
}
