package browser

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The checks the report's browser tests rely on can fail: a page that logs an error, throws,
// opens a dialog and asks for a remote image shows each of these as a problem, and a clean page
// shows none.
func TestProblemsAreSeen(t *testing.T) {
	if _, err := Chromium(); err != nil {
		t.Skipf("no Chromium on this machine: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	dir := t.TempDir()
	clean := filepath.Join(dir, "clean.html")
	bad := filepath.Join(dir, "bad.html")
	write := func(path, body string) {
		if err := os.WriteFile(path, []byte("<!DOCTYPE html><html><head><title>t</title></head><body>"+body+
			`<script>document.documentElement.setAttribute("data-ready", "true")</script></body></html>`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(clean, `<p id="x">hello</p>`)
	write(bad, `<img src="http://127.0.0.1:9/x.png"><script>console.error("boom"); alert("hi"); setTimeout(function(){ null.f(); }, 0);</script>`)

	if _, err := b.Open(ctx, clean); err != nil {
		t.Fatal(err)
	}
	if got, err := Eval[string](ctx, b, `document.getElementById("x").textContent`); err != nil || got != "hello" {
		t.Fatalf("Eval: %q, %v", got, err)
	}
	if p := b.Problems(); len(p) != 0 {
		t.Fatalf("a clean page shows problems: %q", p)
	}
	if _, err := b.Open(ctx, bad); err != nil {
		t.Fatal(err)
	}
	// The timer's exception is thrown after the load; the next page's load orders it before.
	if _, err := b.Open(ctx, clean); err != nil {
		t.Fatal(err)
	}
	all := strings.Join(b.Problems(), "\n")
	for _, want := range []string{"boom", `dialog alert opened: "hi"`, "request to http://127.0.0.1:9/x.png", "exception"} {
		if !strings.Contains(all, want) {
			t.Errorf("problems lack %q:\n%s", want, all)
		}
	}
	shot := filepath.Join(dir, "shot.png")
	if err := b.Screenshot(ctx, shot, false); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(shot); err != nil || st.Size() == 0 {
		t.Errorf("screenshot %v, %v", st, err)
	}
}
