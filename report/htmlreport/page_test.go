package htmlreport

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/widetp/widetp/report"
)

// hostile is a string that would run script, load a resource or break out of an attribute, a
// script element or a JSON string if any place of the page inserted it unescaped.
const hostile = `x"'><script>alert(1)</script><img src=x onerror=alert(2)></title></style><svg onload=alert(3)>` +
	"\u2028</script><!--&amp;{{.}}`${alert(4)}`"

// hostileReport puts hostile in every string a report carries.
func hostileReport() report.Report {
	h := func(s string) string { return s + hostile }
	procs := []report.Process{
		{ID: h("host/0/api-server-0"), Host: h("host"), Role: report.Role(h("api-server")), Replica: h("rep"),
			MooncakeDPIndex: report.Int(0), LookupRole: report.LookupClient, LookupPath: h("ipc://"),
			Lookup: &report.Lookup{ServedBy: h("gone"), Error: h("timeout")}, EngineID: h("eid"), Segment: h("seg"),
			Rendezvous: []report.Rendezvous{{Kind: h("dp"), Address: h("a:1"), Error: h("timed out"), Missing: []string{h("rank 1")}}},
			Exit:       &report.Exit{Code: 1, Error: h("AssertionError: "), Signal: h("SIG")}},
		{ID: h("host/0/api-server-0/worker-0"), Parent: h("host/0/api-server-0"), Host: h("host"), Role: report.RoleWorker,
			Replica: h("rep"), MooncakeDPIndex: report.Int(1), DataParallelIndex: 2, Rank: report.Int(0), TPRank: report.Int(0)},
	}
	return report.Report{
		Scenario: h("scenario"), Profile: h("profile"), Runtime: h("runtime"), Verdict: h("fail"),
		Expected: []report.Kind{report.Kind(h("kind"))},
		Violations: []report.Violation{
			{Kind: report.Kind(h("kind")), Message: h("message"), Processes: []string{procs[0].ID, h("no-such")}},
			{Kind: report.DPIndexMismatch, Message: h("mismatch"), Processes: []string{procs[1].ID}},
		},
		Processes: procs,
		Timings:   map[string]float64{h("phase"): 1},
	}
}

func render(t *testing.T, doc *Document, opts ...Option) string {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, doc, opts...); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// Every string of a report is escaped wherever the page puts it: parsed as a browser would, the
// page has only its own two script elements (the records as JSON, the page's script), no event
// handler attribute, no element the page does not make, and the records read back unchanged.
func TestHostileStringsAreEscaped(t *testing.T) {
	rep := hostileReport()
	raw, _ := json.Marshal(rep)
	// A timeline and extra fields come from the JSON too.
	var top map[string]any
	if err := json.Unmarshal(raw, &top); err != nil {
		t.Fatal(err)
	}
	top["planner"+hostile] = hostile
	top["steps"] = []map[string]string{{"action" + hostile: hostile}}
	raw, _ = json.Marshal(top)
	doc, err := Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	hostDir := filepath.Join(dir, rep.Processes[0].Host)
	if err := os.MkdirAll(hostDir, 0o755); err == nil {
		os.WriteFile(filepath.Join(hostDir, ArtifactLogs), []byte("log"), 0o644)
	}
	if doc.Artifacts, err = ScanArtifacts(dir); err != nil {
		t.Fatal(err)
	}
	out := render(t, doc, LinkFrom(dir))

	allowed := map[string]bool{}
	for _, e := range strings.Fields(`html head meta title style body header h1 h2 span dl div dt dd p ul li section button
		svg defs pattern rect line marker path g text tspan circle a details summary code pre form label select option input
		table thead tbody tr th td footer script strong`) {
		allowed[e] = true
	}
	z := html.NewTokenizer(strings.NewReader(out))
	var scripts []string
	inScript := false
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		tok := z.Token()
		switch tt {
		case html.StartTagToken, html.SelfClosingTagToken:
			if !allowed[tok.Data] {
				t.Errorf("element <%s> the page never makes", tok.Data)
			}
			for _, a := range tok.Attr {
				if strings.HasPrefix(strings.ToLower(a.Key), "on") {
					t.Errorf("<%s %s=%q>: an event handler attribute", tok.Data, a.Key, a.Val)
				}
				if (a.Key == "href" || a.Key == "src") && strings.Contains(strings.ToLower(a.Val), "javascript:") {
					t.Errorf("<%s %s=%q>", tok.Data, a.Key, a.Val)
				}
			}
			inScript = tok.Data == "script"
		case html.TextToken:
			if inScript {
				scripts = append(scripts, tok.Data)
			}
		case html.EndTagToken:
			inScript = false
		}
	}
	if len(scripts) != 2 {
		t.Fatalf("%d script elements with content, want 2 (records, page script)", len(scripts))
	}
	if scripts[1] != pageJS {
		t.Error("the second script is not the page's own")
	}
	var records []report.Process
	if err := json.Unmarshal([]byte(scripts[0]), &records); err != nil {
		t.Fatalf("the records script is not the records' JSON: %v", err)
	}
	if len(records) != 2 || records[0].ID != rep.Processes[0].ID || records[0].Exit.Error != rep.Processes[0].Exit.Error {
		t.Errorf("records read back %+v", records)
	}
	// "<" starts markup only unescaped; the tokenizer above saw the rest.
	if strings.Contains(out, "<script>alert") || strings.Contains(out, "<img") || strings.Contains(out, "<svg onload") {
		t.Error("a hostile fragment appears unescaped")
	}
}

// The page is self-contained: no URL but the SVG namespace, no element that loads anything, and
// a Content-Security-Policy that forbids every request.
func TestPageLoadsNothing(t *testing.T) {
	out := render(t, FromReport(predicted(t, buggy48061)))
	for _, bad := range []string{"<link", "src=", "@import", "url(http", "fetch(", "XMLHttpRequest", "@font-face"} {
		if strings.Contains(out, bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	rest := strings.ReplaceAll(out, `xmlns="http://www.w3.org/2000/svg"`, "")
	if strings.Contains(rest, "http://") || strings.Contains(rest, "https://") {
		i := strings.Index(rest, "http")
		t.Errorf("page names a URL: %q", rest[max(0, i-40):min(len(rest), i+60)])
	}
	if !strings.Contains(out, `http-equiv="Content-Security-Policy" content="default-src 'none';`) {
		t.Error("no Content-Security-Policy forbidding requests")
	}
}

// Decode keeps what report.Report does not know: the extra header fields (here a made-up
// "vllm_abi"), the timeline, each record's unknown fields; and refuses what is no report.
func TestDecode(t *testing.T) {
	in := `{"scenario":"s","profile":"main","runtime":"local","verdict":"pass","expected":[],"violations":[],
		"processes":[{"id":"h/0/api-server-0","host":"h","role":"api-server","addresses":[{"bind":"tcp://h:8000"}]}],
		"timings":{"total":1.5},"planner":{"name":"vllm","version":"0.11.1","commit":"455edc0","path":"/src/vllm"},"vllm_abi":"cu129",
		"steps":[{"at":0.5,"action":"kill","target":"h"},{"action":"restart","target":"h","violations":["process-crashed"]}]}`
	doc, err := Decode([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if want := []Field{{"vllm_abi", "cu129"}}; !slices.Equal(doc.Extra, want) {
		t.Errorf("extra %v, want %v", doc.Extra, want)
	}
	if len(doc.Steps) != 2 || !slices.Equal(doc.Steps[0].Fields, []Field{{"at", "0.5"}, {"action", "kill"}, {"target", "h"}}) ||
		doc.Steps[1].Fields[2] != (Field{"violations", `["process-crashed"]`}) {
		t.Errorf("steps %+v", doc.Steps)
	}
	if len(doc.Records) != 1 || !strings.Contains(string(doc.Records[0]), "tcp://h:8000") {
		t.Errorf("records %s: the unknown field is lost", doc.Records)
	}
	out := render(t, doc)
	for _, want := range []string{`id="timeline"`, "<th>action</th>", "restart", "vllm_abi", "cu129",
		"<dt>planner</dt><dd>vLLM&#39;s own launch code (vllm), version 0.11.1, commit 455edc0, from /src/vllm</dd>"} {
		if !strings.Contains(out, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(render(t, FromReport(doc.Report)), `id="timeline"`) {
		t.Error("a timeline section without steps")
	}

	for name, bad := range map[string]string{
		"not JSON":     `{"scenario":`,
		"not object":   `[1,2]`,
		"no processes": `{"scenario":"s"}`,
		"no scenario":  `{"processes":[]}`,
		"bad steps":    `{"scenario":"s","processes":[],"steps":[1]}`,
		"bad process":  `{"scenario":"s","processes":[{"pid":"x"}]}`,
		"bad planner":  `{"scenario":"s","processes":[],"planner":"vllm"}`,
	} {
		if _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("%s: decoded %s", name, bad)
		}
	}
}

// Read takes a run's artifacts directory or its report.json and links the files that exist,
// relative to where the page is written, so the directory can be moved or uploaded whole.
func TestReadLinksArtifacts(t *testing.T) {
	dir := t.TempDir()
	rep := predicted(t, buggy48061)
	b, _ := json.Marshal(rep)
	must(t, os.WriteFile(filepath.Join(dir, ArtifactReport), b, 0o644))
	must(t, os.WriteFile(filepath.Join(dir, ArtifactSnapshot), []byte("{}"), 0o644))
	for _, h := range []string{"r0-head", "r1-head"} {
		must(t, os.MkdirAll(filepath.Join(dir, h), 0o755))
		must(t, os.WriteFile(filepath.Join(dir, h, ArtifactLogs), []byte("x"), 0o644))
	}
	must(t, os.WriteFile(filepath.Join(dir, "r1-head", ArtifactInspect), []byte("{}"), 0o644))
	must(t, os.MkdirAll(filepath.Join(dir, "empty"), 0o755))

	for _, arg := range []string{dir, filepath.Join(dir, ArtifactReport)} {
		doc, err := Read(arg)
		if err != nil {
			t.Fatal(err)
		}
		a := doc.Artifacts
		if a == nil || !slices.Equal(a.Files, []string{ArtifactReport, ArtifactSnapshot}) ||
			!slices.Equal(a.hostNames(), []string{"r0-head", "r1-head"}) || !slices.Equal(a.Hosts["r1-head"], []string{ArtifactLogs, ArtifactInspect}) {
			t.Fatalf("Read(%s) artifacts %+v", arg, a)
		}
		in := render(t, doc, LinkFrom(dir))
		for _, want := range []string{`href="r1-head/inspect.json"`, `href="r0-head/logs.txt"`, `href="store-snapshot.json"`} {
			if !strings.Contains(in, want) {
				t.Errorf("page in the directory lacks %s", want)
			}
		}
		other := filepath.Join(t.TempDir(), "pages")
		must(t, os.MkdirAll(other, 0o755))
		rel, _ := filepath.Rel(other, dir)
		out := render(t, doc, LinkFrom(other))
		if want := `href="` + filepath.ToSlash(rel) + `/r0-head/logs.txt"`; !strings.Contains(out, want) {
			t.Errorf("page elsewhere lacks %s", want)
		}
	}
	if _, err := Read(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no report.json") {
		t.Errorf("a directory without report.json: %v", err)
	}
	if _, err := Read(filepath.Join(dir, "nope.json")); err == nil {
		t.Error("a missing file read")
	}
}

// WriteDir, the artifacts hook, writes report.html beside the report and links what is there.
func TestWriteDir(t *testing.T) {
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "r0-head"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "r0-head", ArtifactLogs), []byte("x"), 0o644))
	if err := WriteDir(dir, predicted(t, buggy48061)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, ArtifactHTML))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `href="r0-head/logs.txt"`) {
		t.Error("report.html does not link the host's logs")
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".report-*"))
	if len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	if err := WriteDir(filepath.Join(dir, "missing"), report.Report{}); err == nil {
		t.Error("WriteDir into a missing directory succeeded")
	}
}

// The page says what the picture shows in words first: the findings of vLLM#48061 name replica
// 1's head and its Mooncake index, and the followers' crash.
func TestFindings48061(t *testing.T) {
	out := render(t, FromReport(predicted(t, buggy48061)))
	for _, want := range []string{
		"9 processes on r1-head use Mooncake DP index 0, but their replica r0-head:29500/dp1 has global DP index 1",
		"16 processes on r0-follower, r1-follower crashed: AssertionError",
		`<code class="kind">process-crashed</code> <span class="count">18</span>`,
		`<code class="kind">dp-index-mismatch</code> <span class="count">9</span>`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
