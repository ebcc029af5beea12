package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// widetp report renders a saved report.json, or a run's artifacts directory, as one page: beside
// the report by default, to -o FILE, or to stdout with -o -. `explain --html FILE` writes the
// prediction's page. Bad input exits 2 and names what.
func TestReportCommand(t *testing.T) {
	dir := t.TempDir()
	scenario := filepath.Join(scenarioDir, "vllm48061-external-lb-wide-tp-buggy.yaml")
	var js, errOut bytes.Buffer
	if code := run([]string{"explain", "--json", scenario}, &js, &errOut); code != exitMatch {
		t.Fatalf("explain: exit %d: %s", code, errOut.String())
	}
	saved := filepath.Join(dir, "report.json")
	must(t, os.WriteFile(saved, js.Bytes(), 0o644))
	must(t, os.MkdirAll(filepath.Join(dir, "r1-head"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "r1-head", "logs.txt"), []byte("AssertionError"), 0o644))

	page := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("no page at %s: %v", path, err)
		}
		s := string(b)
		if !strings.Contains(s, "<svg") || !strings.Contains(s, "vllm48061-external-lb-wide-tp-buggy") {
			t.Fatalf("%s is not the scenario's page", path)
		}
		return s
	}
	for _, arg := range []string{dir, saved} {
		var out, errOut bytes.Buffer
		os.Remove(filepath.Join(dir, "report.html"))
		if code := run([]string{"report", arg}, &out, &errOut); code != exitMatch {
			t.Fatalf("report %s: exit %d: %s", arg, code, errOut.String())
		}
		if s := page(filepath.Join(dir, "report.html")); !strings.Contains(s, `href="r1-head/logs.txt"`) {
			t.Errorf("report %s: the page does not link the host's logs", arg)
		}
		if !strings.Contains(errOut.String(), "wrote "+filepath.Join(dir, "report.html")) {
			t.Errorf("report %s: stderr %q does not name the page", arg, errOut.String())
		}
	}

	other := filepath.Join(t.TempDir(), "page.html")
	var out bytes.Buffer
	if code := run([]string{"report", "-o", other, dir}, &out, &errOut); code != exitMatch {
		t.Fatalf("report -o: exit %d", code)
	}
	if s := page(other); !strings.Contains(s, "/r1-head/logs.txt") {
		t.Error("report -o elsewhere: the page does not link the host's logs")
	}
	out.Reset()
	if code := run([]string{"report", saved, "-o", "-"}, &out, &errOut); code != exitMatch || !strings.HasPrefix(out.String(), "<!DOCTYPE html>") {
		t.Errorf("report -o -: exit %d, stdout starts %.40q", code, out.String())
	}

	explained := filepath.Join(t.TempDir(), "explain.html")
	out.Reset()
	if code := run([]string{"explain", scenario, "--html", explained}, &out, &errOut); code != exitMatch {
		t.Fatalf("explain --html: exit %d", code)
	}
	if s := page(explained); !strings.Contains(s, "a prediction of widetp explain") {
		t.Error("explain --html: the page does not say it is a prediction")
	}
	if !strings.Contains(out.String(), "violations (27)") {
		t.Error("explain --html: the tables are still printed")
	}

	notReport := filepath.Join(dir, "x.json")
	must(t, os.WriteFile(notReport, []byte(`{"hello":1}`), 0o644))
	for _, r := range []struct {
		args []string
		says string
	}{
		{[]string{"report"}, "want one artifacts DIR or report.json, got 0"},
		{[]string{"report", filepath.Join(dir, "nope")}, "no such file"},
		{[]string{"report", t.TempDir()}, "no report.json"},
		{[]string{"report", notReport}, `no "scenario" field`},
		{[]string{"report", "--bogus", dir}, "flag provided but not defined"},
	} {
		var out, errOut bytes.Buffer
		if code := run(r.args, &out, &errOut); code != exitBadInput || !strings.Contains(errOut.String(), r.says) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", r.args, code, errOut.String(), r.says)
		}
	}
	var errs bytes.Buffer
	if code := run([]string{"report", dir, "-o", filepath.Join(dir, "missing", "p.html")}, &out, &errs); code != exitInfra {
		t.Errorf("an unwritable -o: exit %d, want 3", code)
	}
	if code := run([]string{"explain", scenario, "--html", filepath.Join(dir, "missing", "p.html")}, &out, &errs); code != exitInfra {
		t.Errorf("an unwritable --html: exit %d, want 3", code)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
