package htmlreport

import (
	"math"
	"unicode/utf8"
)

// Geometry of the picture, in SVG user units (CSS pixels at scale 1). Text widths are estimated,
// not measured: labels use the page's 11px monospace font (every character 0.6 em wide), notes an
// 11px sans-serif whose average character is narrower; notes longer than their box are cut with
// an ellipsis and keep their full text as a tooltip.
const (
	labelCharW = 6.6
	noteCharW  = 6.1
	titleCharW = 7.4 // the 12px bold host names
	bandCharW  = 6.9 // the 11.5px semi-bold band titles

	glyphH   = 22
	workerW  = 22
	runMinW  = 50
	glyphGap = 4
	stripGap = 10 // between a process and its workers
	indent   = 14 // per level of the process tree
	rowGap   = 16 // room for the lookup arcs above each row

	hostPad   = 8
	hostHeadH = 20
	noteH     = 15
	hostMinW  = 150
	noteMaxW  = 250

	hostGap   = 12
	bandPad   = 10
	bandHeadH = 24
	bandGap   = 16

	// maxWidth is the width the bands are wrapped to: a laptop screen shows it unscaled.
	maxWidth = 1320
	// globalNoteMaxW bounds the width a note above the bands asks for.
	globalNoteMaxW = 900
)

// place computes every box's position and size: glyphs and notes relative to their host, hosts
// relative to their band, bands and the picture in absolute units below the legend.
func (t *topology) place() {
	for _, b := range t.bands {
		x := float64(bandPad)
		inner := 0.0
		for _, h := range b.hosts {
			placeHost(h)
			h.x, h.y = x, bandHeadH
			x += h.w + hostGap
			inner = math.Max(inner, h.h)
		}
		b.w = x - hostGap + bandPad
		b.w = math.Max(b.w, math.Min(float64(bandPad*2)+bandSwatchesW(b)+textWidth(bandTitle(b), bandCharW), maxWidth))
		for _, n := range b.notes {
			b.w = math.Max(b.w, math.Min(float64(bandPad*2)+textWidth(n.text, noteCharW), maxWidth))
		}
		// Every host of the band is as tall as its tallest, so the band reads as one row.
		for _, h := range b.hosts {
			h.h = inner
		}
		b.h = bandHeadH + inner + float64(len(b.notes))*noteH + bandPad
	}

	widest := 0.0
	for _, b := range t.bands {
		widest = math.Max(widest, b.w)
	}
	// Columns: as many as fit the width, but at most half the bands, so that two replicas are
	// compared one above the other, as a reader compares two nodes.
	cols := 1
	if len(t.bands) > 2 && widest > 0 {
		cols = int(math.Floor((maxWidth + bandGap) / (widest + bandGap)))
		cols = max(1, min(cols, (len(t.bands)+1)/2))
	}
	colW := make([]float64, cols)
	for i, b := range t.bands {
		colW[i%cols] = math.Max(colW[i%cols], b.w)
	}
	top := legendHeight(t.collapsed) + float64(len(t.notes))*noteH
	if len(t.notes) > 0 {
		top += 6
	}
	y := top
	for r := 0; r*cols < len(t.bands); r++ {
		x, rowH := 0.0, 0.0
		for c := 0; c < cols && r*cols+c < len(t.bands); c++ {
			b := t.bands[r*cols+c]
			b.x, b.y = x, y
			x += colW[c] + bandGap
			rowH = math.Max(rowH, b.h)
		}
		y += rowH + bandGap
	}
	t.w = 0
	for _, w := range colW {
		t.w += w + bandGap
	}
	t.w = math.Max(t.w-bandGap, legendWidth(t.collapsed))
	for _, n := range t.notes {
		t.w = math.Max(t.w, math.Min(textWidth(n.text, noteCharW), globalNoteMaxW))
	}
	t.h = y - bandGap
	if len(t.bands) == 0 {
		t.h = top
	}
	t.w, t.h = math.Ceil(t.w+2), math.Ceil(t.h+2)
}

// placeHost lays out one host's rows and notes.
func placeHost(h *hostBox) {
	w := math.Max(hostMinW, float64(hostPad*2)+textWidth(h.name, titleCharW)+16)
	y := float64(hostHeadH + rowGap)
	for _, r := range h.rows {
		x := float64(hostPad + r.depth*indent)
		for _, g := range r.glyphs {
			g.w = glyphWidth(g)
			g.h = glyphH
			g.x, g.y = x, y
			x += g.w + glyphGap
			if !g.worker {
				x += stripGap - glyphGap
			}
		}
		w = math.Max(w, x-glyphGap+hostPad)
		y += glyphH + rowGap
	}
	if len(h.rows) > 0 {
		y -= rowGap - 8
	}
	for _, n := range h.notes {
		w = math.Max(w, math.Min(float64(hostPad*2)+textWidth(n.text, noteCharW), noteMaxW))
	}
	h.w = math.Ceil(w)
	h.h = y + float64(len(h.notes))*noteH + hostPad
}

func glyphWidth(g *glyph) float64 {
	n := textWidth(g.label, labelCharW)
	switch {
	case g.run():
		return math.Max(runMinW, n+16)
	case g.worker:
		return math.Max(workerW, n+8)
	}
	return n + 14
}

func textWidth(s string, charW float64) float64 {
	return float64(utf8.RuneCountInString(s)) * charW
}

// fit cuts s to what width shows, with an ellipsis.
func fit(s string, width, charW float64) string {
	n := int(width / charW)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	if n < 2 {
		return "…"
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
