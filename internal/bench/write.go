package bench

import (
	"encoding/json"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// Write puts the figures into dir: bench.json (every point), bench.md (the README's table) and
// bench.svg (time to verdict, floor and held floor against node count, per runtime).
func Write(dir string, points []Point, note string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(points, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "bench.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "bench.md"), []byte(Table(points, note)), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "bench.svg"), []byte(SVG(points)), 0o644)
}

// Table is the points as a Markdown table.
func Table(points []Point, note string) string {
	var b strings.Builder
	b.WriteString("| runtime | deployment | hosts | time to verdict (median) | floor (median) | ratio | held floor (median) | held ratio | peak memory (PSS) |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range points {
		fmt.Fprintf(&b, "| %s | %s | %d | %.2f s | %.2f s | %.2f× | %.2f s | %.2f× | %.0f MiB (%d processes) |\n",
			p.Runtime, p.Scenario, p.Hosts, p.Run, p.Floor, p.Ratio, p.Held, p.HeldRatio, p.PeakMiB, p.Processes)
	}
	if note != "" {
		b.WriteString("\n" + note + "\n")
	}
	return b.String()
}

// SVG draws, per runtime, the median time to verdict (solid), the floor (dashed) and the held
// floor (dotted) against the
// node count of the wide-TP series, on a log2 x axis.
func SVG(points []Point) string {
	const w, h, left, right, top, bottom = 670.0, 400.0, 60.0, 180.0, 30.0, 50.0
	var series []Point
	maxY, minN, maxN := 0.0, math.MaxInt, 0
	for _, p := range points {
		if !strings.HasPrefix(p.Scenario, "wide-tp-") {
			continue
		}
		series = append(series, p)
		maxY = max(maxY, p.Run, p.Floor, p.Held)
		minN, maxN = min(minN, p.Nodes), max(maxN, p.Nodes)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>` + "\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="18" font-size="14">widetp: start to verdict (teardown included) vs. the floor</text>`+"\n", left)
	if len(series) == 0 || maxY == 0 {
		b.WriteString("</svg>\n")
		return b.String()
	}
	maxY = niceCeil(maxY)
	x := func(n int) float64 {
		if maxN == minN {
			return left
		}
		return left + (math.Log2(float64(n))-math.Log2(float64(minN)))/(math.Log2(float64(maxN))-math.Log2(float64(minN)))*(w-left-right)
	}
	y := func(v float64) float64 { return h - bottom - v/maxY*(h-top-bottom) }
	// Axes, ticks and grid.
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", left, y(0), w-right, y(0))
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", left, y(0), left, y(maxY))
	for n := minN; n <= maxN; n *= 2 {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n", x(n), y(0)+16, n)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">nodes (plus the store)</text>`+"\n", (left+w-right)/2, h-12)
	for i := 0; i <= 5; i++ {
		v := maxY * float64(i) / 5
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, y(v), w-right, y(v))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%.3gs</text>`+"\n", left-6, y(v)+4, v)
	}
	colors := map[string]string{"docker": "#1f77b4", "local": "#d62728"}
	runtimes := []string{}
	seen := map[string]bool{}
	for _, p := range series {
		if !seen[p.Runtime] {
			seen[p.Runtime] = true
			runtimes = append(runtimes, p.Runtime)
		}
	}
	ly := top + 10
	for _, rt := range runtimes {
		c := colors[rt]
		if c == "" {
			c = "#555"
		}
		var run, floor, held []string
		for _, p := range series {
			if p.Runtime == rt {
				run = append(run, fmt.Sprintf("%.1f,%.1f", x(p.Nodes), y(p.Run)))
				floor = append(floor, fmt.Sprintf("%.1f,%.1f", x(p.Nodes), y(p.Floor)))
				if p.Held > 0 {
					held = append(held, fmt.Sprintf("%.1f,%.1f", x(p.Nodes), y(p.Held)))
				}
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s %d nodes: %.2fs, floor %.2fs (%.2f×), held floor %.2fs</title></circle>`+"\n",
					x(p.Nodes), y(p.Run), c, html.EscapeString(rt), p.Nodes, p.Run, p.Floor, p.Ratio, p.Held)
			}
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", c, strings.Join(run, " "))
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" stroke-dasharray="5,4" points="%s"/>`+"\n", c, strings.Join(floor, " "))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/><text x="%.1f" y="%.1f">%s run</text>`+"\n", w-right+10, ly, w-right+30, ly, c, w-right+35, ly+4, html.EscapeString(rt))
		ly += 18
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="5,4"/><text x="%.1f" y="%.1f">%s floor</text>`+"\n", w-right+10, ly, w-right+30, ly, c, w-right+35, ly+4, html.EscapeString(rt))
		if len(held) > 0 {
			ly += 18
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" stroke-dasharray="1,3" points="%s"/>`+"\n", c, strings.Join(held, " "))
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="1,3"/><text x="%.1f" y="%.1f">%s held floor</text>`+"\n", w-right+10, ly, w-right+30, ly, c, w-right+35, ly+4, html.EscapeString(rt))
		}
		ly += 24
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}
