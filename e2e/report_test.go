package e2e_test

import (
	"encoding/json"
	"fmt"
	"html/template"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	. "github.com/onsi/gomega"

	"github.com/widetp/widetp/check"
	"github.com/widetp/widetp/harness"
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/report/htmlreport"
	"github.com/widetp/widetp/report/htmlreport/browser"
)

// The HTML report (README, "Reading the HTML report"), checked in a real headless Chromium:
// what a reader of a nightly failure opens.

// entryReport names the report entry that points at a spec's report.html.
const entryReport = "report.html"

// recordReport writes a run's report.json and report.html into dir, the spec's artifacts
// directory (a failed spec adds its logs there, and its report.html then links them), and names
// the page in the spec's report for the index that ReportAfterSuite writes.
func recordReport(dir string, rep report.Report) {
	GinkgoHelper()
	Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	b, err := json.MarshalIndent(rep, "", "  ")
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(filepath.Join(dir, htmlreport.ArtifactReport), append(b, '\n'), 0o644)).To(Succeed())
	Expect(htmlreport.WriteDir(dir, rep)).To(Succeed())
	AddReportEntry(entryReport, filepath.Join(dir, htmlreport.ArtifactHTML), ReportEntryVisibilityNever)
}

func scenarioNamed(name string) int {
	for i, s := range allScenarios {
		if s.Name == name {
			return i
		}
	}
	return -1
}

// pageBound bounds a browser step: Chromium opens a report in well under a second.
const pageBound = 30 * time.Second

var _ = Describe("the HTML report", Label("report", "browser"), func() {
	var br *browser.Browser
	BeforeEach(func(ctx SpecContext) {
		if _, err := browser.Chromium(); err != nil {
			Skip("no Chromium to check the page in (scripts/deps.sh installs Debian's chromium): " + err.Error())
		}
		var err error
		br, err = browser.Start(ctx)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(br.Close)
	}, NodeTimeout(time.Minute))

	It("shows vLLM#48061 in one screen: replica 1's head on DP index 0, its followers crashed", Label("bug:vllm#48061"), func(ctx SpecContext) {
		i := scenarioNamed("vllm48061-external-lb-wide-tp-buggy")
		Expect(i).To(BeNumerically(">=", 0), "the scenario is shipped")
		s := allScenarios[i]
		// The local runtime runs anywhere and is the fastest: this spec is about the page.
		r := runScenario(ctx, s, harness.RuntimeLocal)
		dir := filepath.Join(artifactsDir(), "html-report-"+s.Name)
		Expect(os.RemoveAll(dir)).To(Succeed())
		Expect(r.cluster.WriteArtifacts(ctx, dir, &r.report)).To(Succeed())
		page := filepath.Join(dir, htmlreport.ArtifactHTML)
		AddReportEntry(entryReport, page, ReportEntryVisibilityNever)

		_, err := br.Open(ctx, page)
		Expect(err).NotTo(HaveOccurred())
		shot := filepath.Join(dir, "report.png")
		Expect(br.Screenshot(ctx, shot, false)).To(Succeed())
		Expect(br.Screenshot(ctx, filepath.Join(dir, "report-full.png"), true)).To(Succeed())
		AddReportEntry("screenshot", shot)
		Expect(br.Problems()).To(BeEmpty(), "console errors, exceptions, dialogs or requests")

		// Every host has its box in the picture shown, and the whole picture fits the first
		// screen (1400x1000).
		hosts := map[string]bool{}
		for _, p := range r.report.Processes {
			hosts[p.Host] = true
		}
		type box struct {
			Host         string
			Top, Bottom  float64
			Left, Right  float64
			ViewW, ViewH float64
		}
		boxes, err := browser.Eval[[]box](ctx, br, `Array.from(document.querySelectorAll("svg.topology:not([style*='none']) g.host")).map(g => {
			const r = g.getBoundingClientRect();
			return {Host: g.dataset.host, Top: r.top, Bottom: r.bottom, Left: r.left, Right: r.right, ViewW: innerWidth, ViewH: innerHeight};
		})`)
		Expect(err).NotTo(HaveOccurred())
		var drawn []string
		for _, b := range boxes {
			drawn = append(drawn, b.Host)
			Expect(b.Top).To(BeNumerically(">=", 0), "host %s above the screen", b.Host)
			Expect(b.Bottom).To(BeNumerically("<=", b.ViewH), "host %s below the first screen", b.Host)
			Expect(b.Right).To(BeNumerically("<=", b.ViewW), "host %s right of the screen", b.Host)
		}
		Expect(drawn).To(ConsistOf(keys(hosts)), "one box per host")

		// The highlighted ranks are exactly those whose Mooncake DP index differs from their
		// replica's global DP index (check.Replicas): replica 1's head.
		want := disagreeing(r.report)
		Expect(want).NotTo(BeEmpty())
		for _, id := range want {
			Expect(id).To(HavePrefix("r1-head/"), "the bug is on replica 1's head")
		}
		highlighted, err := browser.Eval[[]string](ctx, br, `(() => {
			const recs = JSON.parse(document.getElementById("widetp-records").textContent);
			const out = [];
			document.querySelectorAll("svg.topology:not([style*='none']) g.p.mismatch").forEach(g => {
				const r = g.querySelector("rect.body").getBoundingClientRect();
				if (r.width > 0 && r.height > 0) g.dataset.p.split(" ").forEach(i => out.push(recs[+i].id));
			});
			return out;
		})()`)
		Expect(err).NotTo(HaveOccurred())
		Expect(highlighted).To(ConsistOf(want), "processes highlighted as disagreeing with their replica")
		rings, err := browser.Eval[int](ctx, br, `document.querySelectorAll("svg.topology:not([style*='none']) rect.ring").length`)
		Expect(err).NotTo(HaveOccurred())
		Expect(rings).To(BeNumerically(">", 0), "red rings around them")

		// The followers' crash is drawn (a badge per crashed process) and said in words.
		var crashed []string
		for _, p := range r.report.Processes {
			if p.Crashed() {
				crashed = append(crashed, p.ID)
			}
		}
		badges, err := browser.Eval[int](ctx, br, `document.querySelectorAll("svg.topology:not([style*='none']) g.p.crashed .crash-badge").length`)
		Expect(err).NotTo(HaveOccurred())
		Expect(badges).To(Equal(len(crashed)))
		findings, err := browser.Eval[string](ctx, br, `document.querySelector("ul.findings").innerText`)
		Expect(err).NotTo(HaveOccurred())
		Expect(findings).To(ContainSubstring("on r1-head use Mooncake DP index 0, but their replica r0-head:29500/dp1 has global DP index 1"))
		Expect(findings).To(MatchRegexp(`on r0-follower, r1-follower crashed: AssertionError`))

		// Clicking a disagreeing rank shows its record and filters the table to it.
		Expect(br.Click(ctx, "svg.topology:not([style*='none']) g.p.mismatch.worker")).To(Succeed())
		detail, err := browser.Eval[string](ctx, br, `document.getElementById("detail-body").textContent`)
		Expect(err).NotTo(HaveOccurred())
		Expect(detail).To(ContainSubstring(`"mooncake_dp_index": 0`))
		shown, err := browser.Eval[int](ctx, br, `Array.from(document.querySelectorAll("table.procs tbody tr")).filter(r => !r.hidden).length`)
		Expect(err).NotTo(HaveOccurred())
		Expect(shown).To(Equal(1))

		// The violation filter shows the processes a kind names.
		Expect(br.Click(ctx, "#f-reset")).To(Succeed())
		shown, err = browser.Eval[int](ctx, br, `(() => { const s = document.getElementById("f-kind"); s.value = "dp-index-mismatch";
			s.dispatchEvent(new Event("change")); return Array.from(document.querySelectorAll("table.procs tbody tr")).filter(r => !r.hidden).length; })()`)
		Expect(err).NotTo(HaveOccurred())
		Expect(shown).To(Equal(len(named(r.report, report.DPIndexMismatch))))

		// The folded picture still has every host; a folded run expands on a click.
		Expect(br.Click(ctx, `.views button[data-view="compact"]`)).To(Succeed())
		compactHosts, err := browser.Eval[[]string](ctx, br, `Array.from(document.querySelectorAll("svg.topology:not([style*='none']) g.host")).map(g => g.dataset.host)`)
		Expect(err).NotTo(HaveOccurred())
		Expect(compactHosts).To(ConsistOf(keys(hosts)))
		Expect(br.Click(ctx, "svg.topology:not([style*='none']) g.p.run")).To(Succeed())
		view, err := browser.Eval[string](ctx, br, `document.querySelector("svg.topology:not([style*='none'])").dataset.view`)
		Expect(err).NotTo(HaveOccurred())
		Expect(view).To(Equal("expanded"))

		// The links to each host's logs and inspect output resolve to the artifacts.
		links, err := browser.Eval[[]string](ctx, br, `Array.from(document.querySelectorAll("#artifacts a")).map(a => a.href)`)
		Expect(err).NotTo(HaveOccurred())
		for h := range hosts {
			for _, f := range []string{htmlreport.ArtifactLogs, htmlreport.ArtifactInspect} {
				Expect(links).To(ContainElement(HaveSuffix("/"+h+"/"+f)), "a link to %s of %s", f, h)
			}
		}
		for _, l := range links {
			u, err := url.Parse(l)
			Expect(err).NotTo(HaveOccurred())
			Expect(u.Path).To(BeAnExistingFile())
		}
		Expect(br.Problems()).To(BeEmpty())
	}, SpecTimeout(runBound))

	It("escapes hostile strings: no script of the report runs, nothing is requested", func(ctx SpecContext) {
		const hostile = `"'><img src=http://127.0.0.1:9/x onerror=alert(1)><script>alert(2)</script></title><svg onload=alert(3)>`
		procs := []report.Process{{ID: "h" + hostile + "/0/engine-core-0", Host: "h" + hostile, Role: report.RoleEngineCore,
			Replica: "r" + hostile, MooncakeDPIndex: report.Int(0), DataParallelIndex: 1, LookupRole: report.LookupClient,
			LookupPath: "ipc://" + hostile, Lookup: &report.Lookup{ServedBy: "gone" + hostile},
			Exit: &report.Exit{Code: 1, Error: "ValueError: " + hostile}}}
		rep := report.Report{Scenario: "s" + hostile, Profile: hostile, Runtime: hostile, Verdict: "fail",
			Expected: []report.Kind{report.Kind(hostile)}, Violations: check.Run(procs), Processes: procs,
			Timings: map[string]float64{hostile: 1}}
		page := filepath.Join(GinkgoT().TempDir(), "hostile.html")
		Expect(htmlreport.WriteFile(page, htmlreport.FromReport(rep))).To(Succeed())
		_, err := br.Open(ctx, page)
		Expect(err).NotTo(HaveOccurred())
		Expect(br.Problems()).To(BeEmpty(), "a dialog, a request or an error means a hostile string ran")
		title, err := browser.Eval[string](ctx, br, `document.title`)
		Expect(err).NotTo(HaveOccurred())
		Expect(title).To(ContainSubstring("s" + hostile))
		injected, err := browser.Eval[int](ctx, br, `document.querySelectorAll("img, iframe, [onload], [onerror]").length`)
		Expect(err).NotTo(HaveOccurred())
		Expect(injected).To(BeZero(), "elements from the report's strings")
		scripts, err := browser.Eval[int](ctx, br, `document.scripts.length`)
		Expect(err).NotTo(HaveOccurred())
		Expect(scripts).To(Equal(2), "the records and the page's own script, nothing else")
	}, SpecTimeout(2*time.Minute))
})

// disagreeing lists the processes whose Mooncake DP index differs from their replica's global DP
// index, as the checks group replicas.
func disagreeing(rep report.Report) []string {
	byID := map[string]report.Process{}
	for _, p := range rep.Processes {
		byID[p.ID] = p
	}
	var out []string
	for _, r := range check.Replicas(rep.Processes) {
		for _, id := range r.Members {
			if m := byID[id].MooncakeDPIndex; m != nil && r.IndexKnown && *m != r.Index {
				out = append(out, id)
			}
		}
	}
	sort.Strings(out)
	return out
}

func named(rep report.Report, k report.Kind) []string {
	var out []string
	for _, v := range rep.Violations {
		if v.Kind == k {
			for _, id := range v.Processes {
				if !slices.Contains(out, id) {
					out = append(out, id)
				}
			}
		}
	}
	return out
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// The index: a page beside the JUnit report (in Ginkgo's --output-dir; the CLI merges the suite's
// JUnit file there under its final name after the suite, so the page does not link it) that links
// every spec's report.html, failed specs first.
var _ = ReportAfterSuite("an index of the specs' HTML reports", func(r Report) {
	_, rc := GinkgoConfiguration()
	dir := filepath.Dir(artifactsDir())
	if rc.JUnitReport != "" {
		dir = filepath.Dir(rc.JUnitReport)
	}
	Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	type row struct {
		Spec, State, Duration string
		Failed                bool
		Links                 []string
	}
	var rows []row
	for _, s := range r.SpecReports {
		if s.LeafNodeType != types.NodeTypeIt {
			continue
		}
		rw := row{Spec: s.FullText(), State: s.State.String(), Duration: s.RunTime.Round(time.Millisecond).String(), Failed: s.State.Is(types.SpecStateFailureStates)}
		for _, e := range s.ReportEntries {
			if e.Name != entryReport {
				continue
			}
			href := e.Value.String()
			if rel, err := filepath.Rel(dir, href); err == nil {
				href = filepath.ToSlash(rel)
			} else {
				href = (&url.URL{Scheme: "file", Path: filepath.ToSlash(href)}).String()
			}
			rw.Links = append(rw.Links, href)
		}
		rows = append(rows, rw)
	}
	// Failed specs first, then those with a report, then the rest (skipped ones last).
	rank := func(r row) int {
		switch {
		case r.Failed:
			return 0
		case len(r.Links) > 0:
			return 1
		case r.State == types.SpecStateSkipped.String():
			return 3
		}
		return 2
	}
	sort.SliceStable(rows, func(i, j int) bool { return rank(rows[i]) < rank(rows[j]) })
	f, err := os.Create(filepath.Join(dir, "index.html"))
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	Expect(indexPage.Execute(f, map[string]any{"Suite": r.SuiteDescription, "Rows": rows,
		"Start": r.StartTime.Format(time.RFC3339), "Passed": r.SuiteSucceeded})).To(Succeed())
	fmt.Fprintf(GinkgoWriter, "index of the HTML reports: %s\n", filepath.Join(dir, "index.html"))
})

var indexPage = template.Must(template.New("index").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>{{.Suite}}: HTML reports</title>
<style>body{font:13px/1.45 system-ui,sans-serif;margin:16px 20px}table{border-collapse:collapse}td,th{text-align:left;padding:3px 8px;border-bottom:1px solid #e4e6ea}.failed{color:#d50000;font-weight:600}</style>
</head><body>
<h1>{{.Suite}} <small>{{if .Passed}}passed{{else}}<span class="failed">failed</span>{{end}} · {{.Start}}</small></h1>
<table><thead><tr><th>spec</th><th>state</th><th>time</th><th>report</th></tr></thead><tbody>
{{range .Rows}}<tr><td>{{.Spec}}</td><td{{if .Failed}} class="failed"{{end}}>{{.State}}</td><td>{{.Duration}}</td><td>{{range .Links}}<a href="{{.}}">report.html</a> {{end}}</td></tr>
{{end}}</tbody></table></body></html>
`))
