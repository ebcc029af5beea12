package htmlreport

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// Colours. The palette is for DP indices (index mod its length: past ten replicas colours repeat,
// and the numbers are in the band headers, the notes, the tooltips and the table); red is kept for
// what is wrong.
var palette = []string{"#3366cc", "#e67300", "#2ca02c", "#8e44ad", "#0e8c8c", "#b8860b", "#c2185b", "#6d4c41", "#546e7a", "#558b2f"}

const (
	colourBad     = "#d50000"
	colourWarn    = "#b26a00"
	colourNeutral = "#8a8a8a"
	colourInk     = "#222"
)

func dpColour(i int) string {
	n := len(palette)
	return palette[((i%n)+n)%n]
}

// svgWriter builds the picture's markup. Every string that comes from a report goes through
// attr or text, which escape it: the SVG is inlined in an HTML page.
type svgWriter struct {
	b strings.Builder
	// id prefixes the ids of the picture's defs: a page holds two pictures (compact and expanded).
	id string
}

func (w *svgWriter) raw(s string)                 { w.b.WriteString(s) }
func (w *svgWriter) printf(f string, args ...any) { fmt.Fprintf(&w.b, f, args...) }
func (w *svgWriter) text(s string)                { w.b.WriteString(html.EscapeString(s)) }
func (w *svgWriter) attr(name, value string) {
	w.b.WriteString(" " + name + `="` + html.EscapeString(value) + `"`)
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// pictureOptions are what the picture needs from the page.
type pictureOptions struct {
	id     string              // prefix of the defs' ids, unique in the page
	view   string              // "expanded" or "compact"
	logs   func(string) string // the href of a host's logs, "" when there are none
	hidden bool
	label  string
}

// svg draws the placed topology.
func (t *topology) svg(o pictureOptions) string {
	w := &svgWriter{id: o.id}
	w.printf(`<svg xmlns="http://www.w3.org/2000/svg" class="topology" viewBox="0 0 %s %s" width="%s" height="%s" role="img"`,
		num(t.w), num(t.h), num(t.w), num(t.h))
	w.attr("id", o.id)
	w.attr("data-view", o.view)
	w.attr("aria-label", o.label)
	if o.hidden {
		w.raw(` style="display:none"`)
	}
	w.raw(">")
	w.defs()
	t.drawLegend(w)
	y := legendHeight(t.collapsed)
	for _, n := range t.notes {
		w.drawNote(n, 0, y+11, t.w)
		y += noteH
	}
	for _, b := range t.bands {
		t.drawBand(w, b, o)
	}
	w.raw("</svg>")
	return w.b.String()
}

func (w *svgWriter) defs() {
	w.raw("<defs>")
	w.printf(`<pattern id="%s-hatch" width="5" height="5" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="5" height="5" fill="#fff"/><line x1="0" y1="0" x2="0" y2="5" stroke="#d6d6d6" stroke-width="1.6"/></pattern>`, w.id)
	for _, m := range []struct{ name, colour string }{{"arrow", "#555"}, {"arrow-bad", colourBad}} {
		w.printf(`<marker id="%s-%s" viewBox="0 0 8 8" refX="7" refY="4" markerUnits="userSpaceOnUse" markerWidth="8" markerHeight="8" orient="auto-start-reverse"><path d="M0,0 L8,4 L0,8 z" fill="%s"/></marker>`, w.id, m.name, m.colour)
	}
	w.raw("</defs>")
}

func bandTitle(b *band) string {
	switch n := len(b.replicas); {
	case n == 0:
		return "no replica (front ends and processes that joined no rendezvous)"
	case n == 1:
		return "replica " + b.replicas[0].name + " · global DP index " + replicaIndexText(b.replicas[0])
	case n <= 3:
		parts := make([]string, n)
		for i, r := range b.replicas {
			parts[i] = r.name + " (" + replicaIndexText(r) + ")"
		}
		return "replicas " + strings.Join(parts, ", ")
	default:
		idx := make([]string, 0, n)
		for _, r := range b.replicas {
			idx = append(idx, replicaIndexText(r))
		}
		return fmt.Sprintf("%d replicas · global DP indices %s", n, strings.Join(idx, ", "))
	}
}

func replicaIndexText(r replicaTag) string {
	if !r.indexKnown {
		return "undecided"
	}
	return strconv.Itoa(r.index)
}

// maxBandSwatches bounds the colour swatches of a band's header.
const maxBandSwatches = 8

func bandSwatchesW(b *band) float64 {
	n := 0
	for i, r := range b.replicas {
		if i < maxBandSwatches && r.indexKnown {
			n++
		}
	}
	return float64(14*n + 2)
}

func (t *topology) drawBand(w *svgWriter, b *band, o pictureOptions) {
	w.printf(`<g class="band" transform="translate(%s,%s)">`, num(b.x), num(b.y))
	w.printf(`<rect class="band-bg" width="%s" height="%s" rx="8" fill="#f4f5f7" stroke="#d5d8de"/>`, num(b.w), num(b.h))
	x := float64(bandPad)
	for i, r := range b.replicas {
		if i >= maxBandSwatches || !r.indexKnown {
			continue
		}
		w.printf(`<rect x="%s" y="7" width="11" height="11" rx="2" fill="%s"/>`, num(x), dpColour(r.index))
		x += 14
	}
	title := bandTitle(b)
	w.raw(`<text class="band-title" y="16" font-size="11.5" font-weight="600" fill="#333"`)
	w.attr("x", num(x+2))
	w.raw(">")
	w.text(fit(title, b.w-x-bandPad, bandCharW))
	w.raw("<title>")
	w.text(title)
	w.raw("</title></text>")
	for _, h := range b.hosts {
		t.drawHost(w, h, o)
	}
	y := bandHeadH + b.hosts[0].h
	for _, n := range b.notes {
		w.drawNote(n, bandPad, y+12, b.w-2*bandPad)
		y += noteH
	}
	w.raw("</g>")
}

func (t *topology) drawHost(w *svgWriter, h *hostBox, o pictureOptions) {
	w.printf(`<g class="host" transform="translate(%s,%s)"`, num(h.x), num(h.y))
	w.attr("data-host", h.name)
	w.raw(">")
	w.printf(`<rect class="host-bg" width="%s" height="%s" rx="6" fill="#fff" stroke="#9aa0a8"/>`, num(h.w), num(h.h))
	href := ""
	if o.logs != nil {
		href = o.logs(h.name)
	}
	if href != "" {
		w.raw("<a")
		w.attr("href", href)
		w.raw(">")
	}
	w.printf(`<text class="host-name" x="%d" y="15" font-size="12" font-weight="700" fill="%s">`, hostPad, colourInk)
	w.text(h.name)
	if href != "" {
		w.raw(`<tspan font-weight="400" fill="#2a62c9" font-size="10"> logs</tspan>`)
	}
	w.raw("</text>")
	if href != "" {
		w.raw("</a>")
	}
	for _, r := range h.rows {
		drawRings(w, r)
		for _, g := range r.glyphs {
			t.drawGlyph(w, g)
		}
	}
	for _, e := range h.edges {
		w.drawEdge(e)
	}
	y := h.h - float64(len(h.notes))*noteH - hostPad
	for _, n := range h.notes {
		w.drawNote(n, hostPad, y+11, h.w-2*hostPad)
		y += noteH
	}
	w.raw("</g>")
}

// drawRings circles in red each stretch of a row's glyphs that disagree with their replica on the
// DP index: one ring a stretch, so that eight disagreeing ranks read as one group. Launchers and
// engines get a ring each: they are distinct levels of the process tree.
func drawRings(w *svgWriter, r *row) {
	for i := 0; i < len(r.glyphs); {
		if !r.glyphs[i].mismatch {
			i++
			continue
		}
		j := i
		if r.glyphs[i].worker {
			for j+1 < len(r.glyphs) && r.glyphs[j+1].mismatch && r.glyphs[j+1].worker {
				j++
			}
		}
		a, b := r.glyphs[i], r.glyphs[j]
		top := a.y
		for _, g := range r.glyphs[i : j+1] {
			if g.run() {
				top = math.Min(top, g.y-6)
			}
		}
		w.printf(`<rect class="ring" x="%s" y="%s" width="%s" height="%s" rx="6" fill="none" stroke="%s" stroke-width="2.2"/>`,
			num(a.x-4), num(top-4), num(b.x+b.w-a.x+8), num(a.y+a.h-top+8), colourBad)
		i = j + 1
	}
}

func (t *topology) drawGlyph(w *svgWriter, g *glyph) {
	classes := []string{"p"}
	if g.worker {
		classes = append(classes, "worker")
	}
	if g.run() {
		classes = append(classes, "run")
	}
	if g.mismatch {
		classes = append(classes, "mismatch")
	}
	if g.crashed {
		classes = append(classes, "crashed")
	}
	if g.flagged {
		classes = append(classes, "flagged")
	}
	w.raw("<g")
	w.attr("class", strings.Join(classes, " "))
	ids := make([]string, len(g.members))
	for i, m := range g.members {
		ids[i] = strconv.Itoa(m)
	}
	w.attr("data-p", strings.Join(ids, " "))
	w.raw(` tabindex="0"><title>`)
	w.text(t.glyphTitle(g))
	w.raw("</title>")

	fill, ink := "#fff", colourInk
	switch {
	case g.fill != nil:
		fill, ink = dpColour(*g.fill), "#fff"
	case g.crashed:
		fill = "url(#" + w.id + "-hatch)"
	}
	stroke, sw := colourNeutral, 1.5
	if g.outline != nil {
		stroke, sw = dpColour(*g.outline), 3.5
	}
	if g.run() {
		// A stack of cards: the run is several processes.
		for k := 2; k >= 1; k-- {
			off := float64(3 * k)
			w.printf(`<rect x="%s" y="%s" width="%s" height="%s" rx="3" fill="%s" stroke="%s" stroke-width="1" opacity="0.55"/>`,
				num(g.x+off), num(g.y-off), num(g.w), num(g.h), fill, stroke)
		}
	}
	w.printf(`<rect class="body" x="%s" y="%s" width="%s" height="%s" rx="3" fill="%s" stroke="%s" stroke-width="%s"/>`,
		num(g.x+sw/2), num(g.y+sw/2), num(g.w-sw), num(g.h-sw), fill, stroke, num(sw))
	label := g.label
	w.printf(`<text x="%s" y="%s" font-size="11" text-anchor="middle" fill="%s" class="label">`, num(g.x+g.w/2), num(g.y+15), ink)
	w.text(label)
	w.raw("</text>")
	if g.run() {
		w.printf(`<text x="%s" y="%s" font-size="9.5" font-weight="700" text-anchor="end" fill="%s" class="count">×%d</text>`,
			num(g.x+g.w+6), num(g.y-7), colourInk, len(g.members))
	}
	if g.server || g.client {
		fillDot := colourInk
		if g.client {
			fillDot = "#fff"
		}
		w.printf(`<circle class="socket" cx="%s" cy="%s" r="3.2" fill="%s" stroke="%s" stroke-width="1.4"/>`, num(g.x+g.w/2), num(g.y), fillDot, colourInk)
	}
	if g.crashed {
		cx, cy := g.x+g.w-1, g.y+1
		w.printf(`<g class="crash-badge"><circle cx="%s" cy="%s" r="6" fill="%s"/><path d="M%s %s l6 6 M%s %s l-6 6" stroke="#fff" stroke-width="1.8"/></g>`,
			num(cx), num(cy), colourBad, num(cx-3), num(cy-3), num(cx+3), num(cy-3))
	}
	if g.flagged {
		w.printf(`<path class="flag" d="M%s %s l5 -9 l5 9 z" fill="%s" stroke="#fff" stroke-width="0.8"/>`, num(g.x-4), num(g.y+g.h+3), colourWarn)
	}
	w.raw("</g>")
}

func (w *svgWriter) drawEdge(e edge) {
	x1, y1 := e.from.x+e.from.w/2, e.from.y
	colour, width, marker := "#555", 1.3, "arrow"
	if e.misrouted || e.unanswered {
		colour, width, marker = colourBad, 2.4, "arrow-bad"
	}
	var d string
	switch {
	case e.to == nil:
		d = fmt.Sprintf("M%s %s l12 -12", num(x1), num(y1))
	case math.Abs(e.to.y-e.from.y) < 1:
		x2 := e.to.x + e.to.w/2
		lift := math.Min(float64(rowGap)-2, 8+math.Abs(x2-x1)/20)
		d = fmt.Sprintf("M%s %s C%s %s %s %s %s %s", num(x1), num(y1), num(x1), num(y1-lift*1.3), num(x2), num(y1-lift*1.3), num(x2), num(y1-2))
	case e.to.y > e.from.y:
		y1 = e.from.y + e.from.h
		x2, y2 := e.to.x+e.to.w/2, e.to.y
		mid := (y1 + y2) / 2
		d = fmt.Sprintf("M%s %s C%s %s %s %s %s %s", num(x1), num(y1), num(x1), num(mid), num(x2), num(mid), num(x2), num(y2-2))
	default:
		x2, y2 := e.to.x+e.to.w/2, e.to.y+e.to.h
		mid := (y1 + y2) / 2
		d = fmt.Sprintf("M%s %s C%s %s %s %s %s %s", num(x1), num(y1), num(x1), num(mid), num(x2), num(mid), num(x2), num(y2+2))
	}
	class := "edge"
	switch {
	case e.misrouted:
		class += " misrouted"
	case e.unanswered:
		class += " unanswered"
	}
	w.raw("<path")
	w.attr("class", class)
	w.attr("d", d)
	w.printf(` fill="none" stroke="%s" stroke-width="%s"`, colour, num(width))
	if e.unanswered {
		w.raw(` stroke-dasharray="3 2">`)
	} else {
		w.printf(` marker-end="url(#%s-%s)">`, w.id, marker)
	}
	w.raw("<title>")
	w.text(e.title)
	w.raw("</title></path>")
	if e.to == nil {
		mark := "?" // an answer from a process that left no record
		if e.unanswered {
			mark = "✖" // no answer at all
		}
		w.printf(`<text x="%s" y="%s" font-size="12" font-weight="700" fill="%s">%s</text>`, num(x1+13), num(y1-10), colourBad, mark)
	}
}

func (w *svgWriter) drawNote(n note, x, y, width float64) {
	fill := "#333"
	switch n.class {
	case "bad":
		fill = colourBad
	case "warn":
		fill = colourWarn
	}
	w.raw("<text")
	w.attr("class", strings.TrimSpace("note "+n.class))
	w.printf(` x="%s" y="%s" font-size="11" fill="%s">`, num(x), num(y), fill)
	if n.title != "" {
		w.raw("<title>")
		w.text(n.title)
		w.raw("</title>")
	}
	w.text(fit(n.text, width, noteCharW))
	w.raw("</text>")
}

// glyphTitle is a glyph's tooltip: who its processes are and what they hold.
func (t *topology) glyphTitle(g *glyph) string {
	var b strings.Builder
	p, f := &t.procs[g.members[0]], &t.facts[g.members[0]]
	if g.run() {
		last := &t.procs[g.members[len(g.members)-1]]
		fmt.Fprintf(&b, "%d identical %ss: %s … %s (click to show each)\n", len(g.members), p.Role, p.ID, last.ID)
	} else {
		fmt.Fprintf(&b, "%s (%s)\n", p.ID, p.Role)
	}
	rep := "none"
	if f.replica != "" {
		rep = f.replica + ", global DP index " + replicaIndexText(replicaTag{index: f.index, indexKnown: f.indexKnown})
	}
	fmt.Fprintf(&b, "replica %s\nMooncake DP index %s", rep, optText(p.MooncakeDPIndex))
	if f.mismatch {
		b.WriteString("  ≠ replica's")
	}
	fmt.Fprintf(&b, "\ndata_parallel_rank %d, rank_local %s, index %d", p.DataParallelRank, optText(p.DataParallelRankLocal), p.DataParallelIndex)
	if !g.run() && (p.Rank != nil || p.TPRank != nil) {
		fmt.Fprintf(&b, "\nrank %s, TP rank %s, PP rank %s", optText(p.Rank), optText(p.TPRank), optText(p.PPRank))
	}
	if p.LookupRole != "" {
		fmt.Fprintf(&b, "\nlookup %s %s", p.LookupRole, p.LookupPath)
		if p.Lookup != nil && p.Lookup.ServedBy != "" {
			fmt.Fprintf(&b, ", answered by %s", p.Lookup.ServedBy)
		}
		if p.Lookup != nil && p.Lookup.Error != "" {
			fmt.Fprintf(&b, ", no answer: %s", p.Lookup.Error)
		}
	}
	if e := exitText(p.Exit); e != "" {
		fmt.Fprintf(&b, "\nexit: %s", e)
		if p.Exit.Expected {
			b.WriteString(" (asked for)")
		}
	}
	if len(f.kinds) > 0 {
		ks := make([]string, len(f.kinds))
		for i, k := range f.kinds {
			ks[i] = string(k)
		}
		fmt.Fprintf(&b, "\nviolations: %s", strings.Join(ks, ", "))
	}
	return b.String()
}

// The legend: a flow of samples with their meaning, wrapped to the picture's width.
type legendItem struct {
	draw  func(w *svgWriter, x, y float64) float64 // draws the sample, returns its width
	label string
}

const (
	legendRowH = 26
	legendPadB = 8
)

func legendItems(collapsed bool) []legendItem {
	sample := func(fill, stroke string, sw float64, ring, crash bool) func(w *svgWriter, x, y float64) float64 {
		return func(w *svgWriter, x, y float64) float64 {
			if ring {
				w.printf(`<rect x="%s" y="%s" width="26" height="24" rx="5" fill="none" stroke="%s" stroke-width="2"/>`, num(x), num(y-3), colourBad)
				x += 4
			}
			w.printf(`<rect x="%s" y="%s" width="%s" height="%s" rx="3" fill="%s" stroke="%s" stroke-width="%s"/>`,
				num(x+sw/2), num(y+1+sw/2), num(18-sw), num(18-sw), fill, stroke, num(sw))
			if crash {
				w.printf(`<circle cx="%s" cy="%s" r="5" fill="%s"/><path d="M%s %s l5 5 M%s %s l-5 5" stroke="#fff" stroke-width="1.6"/>`,
					num(x+17), num(y+2), colourBad, num(x+14.5), num(y-0.5), num(x+19.5), num(y-0.5))
			}
			if ring {
				return 26
			}
			return 20
		}
	}
	items := []legendItem{
		{func(w *svgWriter, x, y float64) float64 {
			for i := 0; i < 4; i++ {
				w.printf(`<rect x="%s" y="%s" width="16" height="16" rx="3" fill="%s"/><text x="%s" y="%s" font-size="10" text-anchor="middle" fill="#fff">%d</text>`,
					num(x+float64(i)*18), num(y+2), dpColour(i), num(x+float64(i)*18+8), num(y+14), i)
			}
			return 72
		}, "fill: the Mooncake DP index a process uses"},
		{sample(dpColour(1), dpColour(1), 3.5, false, false), "outline: its replica's global DP index"},
		{sample(dpColour(0), dpColour(1), 3.5, true, false), "disagrees with its replica"},
		{sample("#fff", colourNeutral, 1.5, false, false), "no Mooncake index (None)"},
		{func(w *svgWriter, x, y float64) float64 {
			w.printf(`<rect x="%s" y="%s" width="18" height="18" rx="3" fill="url(#%s-hatch)" stroke="%s" stroke-width="3.5"/>`, num(x+1.75), num(y+2.75), w.id, dpColour(0))
			w.printf(`<circle cx="%s" cy="%s" r="5" fill="%s"/><path d="M%s %s l5 5 M%s %s l-5 5" stroke="#fff" stroke-width="1.6"/>`,
				num(x+19), num(y+2), colourBad, num(x+16.5), num(y-0.5), num(x+21.5), num(y-0.5))
			return 24
		}, "crashed (exception below the host)"},
		{func(w *svgWriter, x, y float64) float64 {
			w.printf(`<circle cx="%s" cy="%s" r="3.2" fill="#fff" stroke="%s" stroke-width="1.4"/>`, num(x+4), num(y+12), colourInk)
			w.printf(`<path d="M%s %s C%s %s %s %s %s %s" fill="none" stroke="#555" stroke-width="1.3" marker-end="url(#%s-arrow)"/>`,
				num(x+4), num(y+12), num(x+4), num(y), num(x+30), num(y), num(x+30), num(y+10), w.id)
			w.printf(`<circle cx="%s" cy="%s" r="3.2" fill="%s" stroke="%s" stroke-width="1.4"/>`, num(x+30), num(y+12), colourInk, colourInk)
			return 36
		}, "lookup client ○ → the server ● that answered"},
		{func(w *svgWriter, x, y float64) float64 {
			w.printf(`<path d="M%s %s C%s %s %s %s %s %s" fill="none" stroke="%s" stroke-width="2.4" marker-end="url(#%s-arrow-bad)"/>`,
				num(x+2), num(y+12), num(x+2), num(y), num(x+28), num(y), num(x+28), num(y+10), colourBad, w.id)
			return 34
		}, "answered by another replica (misrouted)"},
		{func(w *svgWriter, x, y float64) float64 {
			w.printf(`<path d="M%s %s l5 -9 l5 9 z" fill="%s"/>`, num(x+2), num(y+15), colourWarn)
			return 14
		}, "named by another violation"},
	}
	if collapsed {
		items = append(items, legendItem{func(w *svgWriter, x, y float64) float64 {
			for k := 2; k >= 0; k-- {
				op := "1"
				if k > 0 {
					op = "0.55"
				}
				w.printf(`<rect x="%s" y="%s" width="26" height="16" rx="3" fill="%s" stroke="%s" opacity="%s"/>`, num(x+float64(3*k)), num(y+4-float64(3*k)), dpColour(0), dpColour(0), op)
			}
			return 34
		}, "identical consecutive ranks, folded (click to show each)"})
	}
	return items
}

// legendFlow places the legend items on lines of at most maxWidth.
func legendFlow(collapsed bool) (pos [][2]float64, width, height float64) {
	items := legendItems(collapsed)
	x, y := 0.0, 4.0
	for _, it := range items {
		sw := sampleWidth(it)
		iw := sw + 6 + textWidth(it.label, noteCharW) + 18
		if x > 0 && x+iw > maxWidth {
			x, y = 0, y+legendRowH
		}
		pos = append(pos, [2]float64{x, y})
		x += iw
		width = math.Max(width, x)
	}
	return pos, width, y + legendRowH + legendPadB
}

// sampleWidth measures a sample by drawing it into a throwaway writer.
func sampleWidth(it legendItem) float64 {
	return it.draw(&svgWriter{id: "m"}, 0, 0)
}

func legendHeight(collapsed bool) float64 { _, _, h := legendFlow(collapsed); return h }
func legendWidth(collapsed bool) float64  { _, w, _ := legendFlow(collapsed); return w }

func (t *topology) drawLegend(w *svgWriter) {
	items := legendItems(t.collapsed)
	pos, _, _ := legendFlow(t.collapsed)
	w.raw(`<g class="legend">`)
	for i, it := range items {
		x, y := pos[i][0], pos[i][1]
		sw := it.draw(w, x, y)
		w.printf(`<text x="%s" y="%s" font-size="11" fill="#333">`, num(x+sw+6), num(y+14))
		w.text(it.label)
		w.raw("</text>")
	}
	w.raw("</g>")
}
