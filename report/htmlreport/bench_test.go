package htmlreport

import (
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/widetp/widetp/report/htmlreport/browser"
)

// BenchmarkWrite64Nodes renders the 64-node report (608 processes, both pictures, the table).
func BenchmarkWrite64Nodes(b *testing.B) {
	doc := FromReport(wide64(b, "pre-48061"))
	b.ReportAllocs()
	for b.Loop() {
		if err := Write(io.Discard, doc); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBrowserRender64Nodes opens the 64-node report in headless Chromium (issue 13's target:
// under 2 s): each iteration navigates to the page and waits until its script ran and two frames
// were painted. ms/paint is the page's own measure (performance.now() at that paint, counted from
// the navigation start); ns/op adds the DevTools round trips.
func BenchmarkBrowserRender64Nodes(b *testing.B) {
	if _, err := browser.Chromium(); err != nil {
		b.Skipf("no Chromium on this machine: %v", err)
	}
	path := filepath.Join(b.TempDir(), ArtifactHTML)
	if err := WriteFile(path, FromReport(wide64(b, "pre-48061"))); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	br, err := browser.Start(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	var paint time.Duration
	for b.Loop() {
		d, err := br.Open(ctx, path)
		if err != nil {
			b.Fatal(err)
		}
		paint += d
	}
	b.ReportMetric(float64(paint.Milliseconds())/float64(b.N), "ms/paint")
	if p := br.Problems(); len(p) > 0 {
		b.Fatalf("the page has problems: %q", p)
	}
}
