package htmlreport

import (
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/widetp/widetp/check"
	"github.com/widetp/widetp/report"
)

// Every process of a report is drawn exactly once, on its own host, in both pictures (every rank
// and folded runs), and every host has its box: over every shipped scenario and the 64-node one.
func TestEveryProcessDrawnOnceOnItsHost(t *testing.T) {
	reps := map[string]report.Report{"wide-64": wide64(t, "pre-48061")}
	for _, f := range shipped(t) {
		reps[filepath.Base(f)] = predicted(t, f)
	}
	for name, rep := range reps {
		for _, collapse := range []bool{false, true} {
			t.Run(name+"/collapse="+strconv.FormatBool(collapse), func(t *testing.T) {
				_, pic := picture(t, rep, collapse)
				seen := make([]int, len(rep.Processes))
				for _, g := range pic.glyphs {
					if len(g.members) == 0 {
						t.Fatalf("a glyph on %s draws no process", g.host)
					}
					for _, m := range g.members {
						if m < 0 || m >= len(rep.Processes) {
							t.Fatalf("glyph member %d out of range", m)
						}
						seen[m]++
						if h := rep.Processes[m].Host; h != g.host {
							t.Errorf("%s of host %s drawn in host %s", rep.Processes[m].ID, h, g.host)
						}
					}
				}
				for i, n := range seen {
					if n != 1 {
						t.Errorf("%s drawn %d times, want once", rep.Processes[i].ID, n)
					}
				}
				var want []string
				for _, p := range rep.Processes {
					if !slices.Contains(want, p.Host) {
						want = append(want, p.Host)
					}
				}
				got := append([]string(nil), pic.hosts...)
				sort.Strings(got)
				sort.Strings(want)
				if !slices.Equal(got, want) {
					t.Errorf("host boxes %v, want one per host %v", got, want)
				}
			})
		}
	}
}

// Each process is filled with the colour of the Mooncake DP index it uses (white or hatched for
// None) and outlined with the colour of its replica's global DP index as the checks decide it
// (check.Replicas): the rule over every shipped scenario.
func TestColoursFollowTheDPIndex(t *testing.T) {
	for _, f := range append(shipped(t), "wide-64") {
		rep := wide64(t, "pre-48061")
		if f != "wide-64" {
			rep = predicted(t, f)
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			replicaIndex := map[string]*int{}
			for _, r := range check.Replicas(rep.Processes) {
				for _, id := range r.Members {
					if r.IndexKnown {
						replicaIndex[id] = report.Int(r.Index)
					}
				}
			}
			for _, collapse := range []bool{false, true} {
				_, pic := picture(t, rep, collapse)
				for _, g := range pic.glyphs {
					for _, m := range g.members {
						p := rep.Processes[m]
						wantFill := "#fff"
						switch {
						case p.MooncakeDPIndex != nil:
							wantFill = dpColour(*p.MooncakeDPIndex)
						case p.Crashed():
							wantFill = "url(#t-hatch)"
						}
						if g.fill != wantFill {
							t.Errorf("%s (Mooncake DP index %s) filled %s, want %s", p.ID, optText(p.MooncakeDPIndex), g.fill, wantFill)
						}
						wantStroke := colourNeutral
						if idx := replicaIndex[p.ID]; idx != nil {
							wantStroke = dpColour(*idx)
						}
						if g.stroke != wantStroke {
							t.Errorf("%s outlined %s, want %s (its replica's global DP index)", p.ID, g.stroke, wantStroke)
						}
					}
				}
			}
		})
	}
}

// A process whose Mooncake DP index differs from its replica's global DP index is highlighted
// (class mismatch, inside a red ring), and no other: in vLLM#48061 (pre-48061, the legacy index
// of vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_utils.py) the engine core and
// the eight workers of replica 1's head use index 0, the followers crash before they have one.
func TestDisagreeingRanksHighlighted(t *testing.T) {
	rep := predicted(t, buggy48061)
	_, pic := picture(t, rep, false)
	var got []string
	for _, g := range pic.glyphs {
		if g.classes["mismatch"] {
			got = append(got, ids(rep, g.members)...)
		}
	}
	sort.Strings(got)
	want := []string{"r1-head/0/engine-core-1"}
	for w := 0; w < 8; w++ {
		want = append(want, "r1-head/0/engine-core-1/worker-"+strconv.Itoa(w))
	}
	if !slices.Equal(got, want) {
		t.Errorf("highlighted %v, want %v", got, want)
	}
	// Every process a dp-index-mismatch violation is about is highlighted (a violation also names
	// the engine core it compares with, which may agree).
	for _, v := range rep.Violations {
		if v.Kind == report.DPIndexMismatch && !slices.Contains(got, v.Processes[len(v.Processes)-1]) {
			t.Errorf("violation %q: %s not highlighted", v.Message, v.Processes[len(v.Processes)-1])
		}
	}
	// One ring for the engine, one for its eight workers: a stretch is circled once.
	if pic.rings != 2 {
		t.Errorf("%d red rings, want 2 (engine-core-1, and its workers 0-7 together)", pic.rings)
	}

	// The rule, not the example: one worker of four disagrees with an agreeing engine.
	procs := []report.Process{
		{ID: "h/0/engine-core-1", Host: "h", Role: report.RoleEngineCore, Replica: "h:1/dp1", DataParallelIndex: 1, MooncakeDPIndex: report.Int(1)},
	}
	for w, mc := range []int{1, 1, 0, 1} {
		procs = append(procs, report.Process{ID: "h/0/engine-core-1/worker-" + strconv.Itoa(w), Parent: "h/0/engine-core-1", Host: "h",
			Role: report.RoleWorker, Replica: "h:1/dp1", DataParallelIndex: 1, MooncakeDPIndex: report.Int(mc), Rank: report.Int(w), TPRank: report.Int(w), PPRank: report.Int(0)})
	}
	rep = report.Report{Processes: procs, Violations: check.Run(procs)}
	for _, collapse := range []bool{false, true} {
		_, pic := picture(t, rep, collapse)
		got = nil
		for _, g := range pic.glyphs {
			if g.classes["mismatch"] {
				got = append(got, ids(rep, g.members)...)
			}
		}
		if !slices.Equal(got, []string{"h/0/engine-core-1/worker-2"}) {
			t.Errorf("collapse=%v: highlighted %v, want only worker-2", collapse, got)
		}
		if pic.rings != 1 {
			t.Errorf("collapse=%v: %d rings, want 1", collapse, pic.rings)
		}
	}
}

// Every lookup is an edge from the client to the server that answered it; an answer from another
// replica's server is red (lookup-misrouted), so are answers from a process that left no record.
// vLLM#48061's hybrid-LB host: two co-located launches bind the same paths and the later binds
// take them over (libzmq), so the first launch's engines are answered by the second's servers.
func TestLookupEdgesAndMisroutes(t *testing.T) {
	rep := predicted(t, scenarioDir+"/vllm48061-hybrid-lb-one-host-buggy.yaml")
	topo, pic := picture(t, rep, false)
	clients := 0
	for _, p := range rep.Processes {
		if p.Lookup != nil && p.Lookup.ServedBy != "" {
			clients++
		}
	}
	if len(pic.edges) != clients {
		t.Fatalf("%d edges, want one per answered client (%d)", len(pic.edges), clients)
	}
	var misrouted []string
	for _, e := range pic.edges {
		if e.misrouted {
			misrouted = append(misrouted, e.title)
		}
	}
	var want []report.Violation
	for _, v := range rep.Violations {
		if v.Kind == report.LookupMisrouted {
			want = append(want, v)
		}
	}
	if len(want) == 0 || len(misrouted) != len(want) {
		t.Fatalf("%d red edges %v, want one per lookup-misrouted violation (%d)", len(misrouted), misrouted, len(want))
	}
	for _, v := range want {
		client, server := v.Processes[0], v.Processes[1]
		found := false
		for _, e := range topo.bands[0].hosts[0].edges {
			if e.misrouted && slices.Contains(ids(rep, e.from.members), client) && slices.Contains(ids(rep, e.to.members), server) {
				found = true
			}
		}
		if !found {
			t.Errorf("no red edge from %s to %s", client, server)
		}
	}

	// An answer from a process without a record: a red edge to nowhere.
	procs := []report.Process{
		{ID: "h/0/engine-core-0", Host: "h", Role: report.RoleEngineCore, Replica: "h:1/dp0", MooncakeDPIndex: report.Int(0),
			LookupRole: report.LookupClient, LookupPath: "ipc:///tmp/x", Lookup: &report.Lookup{ServedBy: "h/9/gone"}},
	}
	rep = report.Report{Processes: procs, Violations: check.Run(procs)}
	_, pic = picture(t, rep, false)
	if len(pic.edges) != 1 || !pic.edges[0].misrouted || !strings.Contains(pic.edges[0].title, "h/9/gone") {
		t.Errorf("edges %+v, want one red edge naming h/9/gone", pic.edges)
	}

	// No answer at all (lookup-unreachable): a red stub saying so.
	procs[0].Lookup = &report.Lookup{Error: "timeout after 2s"}
	rep = report.Report{Processes: procs, Violations: check.Run(procs)}
	_, pic = picture(t, rep, false)
	if len(pic.edges) != 1 || !pic.edges[0].unanswered || pic.edges[0].misrouted || !strings.Contains(pic.edges[0].title, "no answer: timeout after 2s") {
		t.Errorf("edges %+v, want one unanswered stub", pic.edges)
	}
}

// Folding keeps every count right at 64 nodes: the folded runs hold every worker once, their
// "×N" is their size, the highlighted and crashed processes are the same as in the full picture,
// and folding draws fewer glyphs.
func TestCollapseKeepsCounts(t *testing.T) {
	rep := wide64(t, "pre-48061")
	_, full := picture(t, rep, false)
	_, folded := picture(t, rep, true)
	if len(folded.glyphs) >= len(full.glyphs) {
		t.Fatalf("folded picture has %d glyphs, full %d: nothing folded", len(folded.glyphs), len(full.glyphs))
	}
	count := func(pic svgPicture, class string) (n int) {
		for _, g := range pic.glyphs {
			if g.classes[class] {
				n += len(g.members)
			}
		}
		return n
	}
	for _, class := range []string{"mismatch", "crashed", "worker", "flagged"} {
		if a, b := count(full, class), count(folded, class); a != b {
			t.Errorf("%s: %d processes in the full picture, %d folded", class, a, b)
		}
	}
	// pre-48061 over 32 external-LB replicas: every head but replica 0's disagrees (engine core
	// and 8 workers), every follower's launcher and 8 workers crash.
	if n := count(folded, "mismatch"); n != 31*9 {
		t.Errorf("%d highlighted, want %d", n, 31*9)
	}
	if n := count(folded, "crashed"); n != 32*9 {
		t.Errorf("%d crashed, want %d", n, 32*9)
	}
	runs := 0
	for _, g := range folded.glyphs {
		if len(g.members) > 1 {
			runs++
			if !g.classes["run"] || g.count != "×"+strconv.Itoa(len(g.members)) {
				t.Errorf("run of %d shows %q (classes %v)", len(g.members), g.count, g.classes)
			}
			if len(g.members) < collapseAt {
				t.Errorf("run of %d folded, shorter than %d", len(g.members), collapseAt)
			}
			first := rep.Processes[g.members[0]]
			for _, m := range g.members {
				p := rep.Processes[m]
				if p.Role != report.RoleWorker || p.Parent != first.Parent || optText(p.MooncakeDPIndex) != optText(first.MooncakeDPIndex) || p.Crashed() != first.Crashed() {
					t.Errorf("run of %s folds %s, which differs", first.ID, p.ID)
				}
			}
		}
	}
	if runs == 0 {
		t.Error("no run folded")
	}
}

// Bad records never break the picture: a Parent cycle, a repeated ID, a parent on another host,
// empty fields. Every record is still drawn once.
func TestOddRecords(t *testing.T) {
	procs := []report.Process{
		{ID: "a/0/api-server-0", Parent: "a/0/engine-core-0", Host: "a", Role: report.RoleAPIServer},
		{ID: "a/0/engine-core-0", Parent: "a/0/api-server-0", Host: "a", Role: report.RoleEngineCore, Replica: "r"},
		{ID: "a/0/engine-core-0", Host: "a", Role: report.RoleEngineCore, Replica: "r"},
		{ID: "b/0/headless-0/worker-0", Parent: "a/0/engine-core-0", Host: "b", Role: report.RoleWorker, Replica: "r"},
		{ID: "", Host: "", Role: "mystery", Exit: &report.Exit{Code: 1}},
	}
	rep := report.Report{Processes: procs, Violations: check.Run(procs)}
	for _, collapse := range []bool{false, true} {
		_, pic := picture(t, rep, collapse)
		seen := make([]int, len(procs))
		for _, g := range pic.glyphs {
			for _, m := range g.members {
				seen[m]++
			}
		}
		for i, n := range seen {
			if n != 1 {
				t.Errorf("record %d (%q) drawn %d times", i, procs[i].ID, n)
			}
		}
	}
	_, pic := picture(t, report.Report{}, false)
	if len(pic.glyphs) != 0 || len(pic.hosts) != 0 {
		t.Errorf("empty report drew %d glyphs, %d hosts", len(pic.glyphs), len(pic.hosts))
	}
}

// Hosts that serve one replica share a band; the bands follow the replicas' global DP indices and
// each band's head (the host of rank 0) comes first.
func TestBandsByReplica(t *testing.T) {
	rep := predicted(t, buggy48061)
	topo := newTopology(rep.Processes, rep.Violations, false)
	var got [][]string
	for _, b := range topo.bands {
		var hs []string
		for _, h := range b.hosts {
			hs = append(hs, h.name)
		}
		got = append(got, hs)
	}
	want := [][]string{{"r0-head", "r0-follower"}, {"r1-head", "r1-follower"}}
	if len(got) != len(want) || !slices.Equal(got[0], want[0]) || !slices.Equal(got[1], want[1]) {
		t.Errorf("bands %v, want %v", got, want)
	}
	// Boxes never overlap within a band, and glyphs stay inside their host.
	for _, b := range topo.bands {
		for i, h := range b.hosts {
			if i > 0 && h.x < b.hosts[i-1].x+b.hosts[i-1].w {
				t.Errorf("host %s overlaps %s", h.name, b.hosts[i-1].name)
			}
			for _, r := range h.rows {
				for _, g := range r.glyphs {
					if g.x < 0 || g.x+g.w > h.w || g.y < 0 || g.y+g.h > h.h {
						t.Errorf("glyph %q at %v outside host %s (%vx%v)", g.label, g.geom, h.name, h.w, h.h)
					}
				}
			}
		}
	}
}
