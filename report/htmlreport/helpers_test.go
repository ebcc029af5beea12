package htmlreport

import (
	"encoding/xml"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/widetp/widetp/check"
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/scenarios"
	"github.com/widetp/widetp/vllm"
)

const scenarioDir = "../../scenarios"

// predicted is the report `widetp explain --json` prints for a scenario file: the model's records
// and the checks' violations.
func predicted(tb testing.TB, file string, opts ...scenarios.Option) report.Report {
	tb.Helper()
	s, err := scenarios.Load(file, opts...)
	if err != nil {
		tb.Fatalf("load %s: %v", file, err)
	}
	procs, err := vllm.Predict(s.Deployment())
	if err != nil {
		tb.Fatalf("predict %s: %v", file, err)
	}
	vs := check.Run(procs)
	verdict := "pass"
	if len(vs) > 0 {
		verdict = "fail"
	}
	return report.Report{Scenario: s.Name, Profile: s.Profile.String(), Runtime: "none", Verdict: verdict,
		Expected: s.Expect, Violations: vs, Processes: procs, Timings: map[string]float64{"predict": 0.001}}
}

func shipped(tb testing.TB) []string {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(scenarioDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no scenarios in %s: %v", scenarioDir, err)
	}
	return files
}

const buggy48061 = scenarioDir + "/vllm48061-external-lb-wide-tp-buggy.yaml"

// wide64 is the 64-node deployment the README times (scenarios/testdata/wide-64.yaml: 32
// external-LB replicas of TP 16 over a head and a --headless follower each, 512 workers, 608
// processes), predicted under profile (pre-48061 shows the bug on every replica but the first).
func wide64(tb testing.TB, profile string) report.Report {
	tb.Helper()
	spec, err := scenarios.ParseProfileSpec(profile)
	if err != nil {
		tb.Fatal(err)
	}
	return predicted(tb, scenarioDir+"/testdata/wide-64.yaml", scenarios.WithProfile(spec))
}

// drawn is one process glyph as the SVG shows it.
type drawn struct {
	host    string
	classes map[string]bool
	members []int
	fill    string // the body's fill
	stroke  string // the body's outline
	count   string // the "×N" of a folded run
	title   string
}

// svgPicture is what a test reads back from a picture's markup.
type svgPicture struct {
	hosts  []string
	glyphs []drawn
	edges  []drawnEdge
	rings  int
}

type drawnEdge struct {
	host       string
	misrouted  bool
	unanswered bool
	title      string
}

// parseSVG reads a picture back with a real XML parser: the markup must be well-formed, and the
// test sees what a browser would.
func parseSVG(tb testing.TB, svg string) svgPicture {
	tb.Helper()
	dec := xml.NewDecoder(strings.NewReader(svg))
	var pic svgPicture
	type frame struct {
		name  string
		class string
	}
	var stack []frame
	host := ""
	var cur *drawn
	var curEdge *drawnEdge
	inTitle := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			tb.Fatalf("the picture is not well-formed XML: %v", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			attr := map[string]string{}
			for _, a := range el.Attr {
				attr[a.Name.Local] = a.Value
			}
			class := attr["class"]
			stack = append(stack, frame{el.Name.Local, class})
			classes := map[string]bool{}
			for _, c := range strings.Fields(class) {
				classes[c] = true
			}
			switch {
			case el.Name.Local == "g" && classes["host"]:
				host = attr["data-host"]
				pic.hosts = append(pic.hosts, host)
			case el.Name.Local == "g" && classes["p"]:
				cur = &drawn{host: host, classes: classes}
				for _, f := range strings.Fields(attr["data-p"]) {
					i, err := strconv.Atoi(f)
					if err != nil {
						tb.Fatalf("data-p %q: %v", attr["data-p"], err)
					}
					cur.members = append(cur.members, i)
				}
			case el.Name.Local == "rect" && classes["body"] && cur != nil:
				cur.fill, cur.stroke = attr["fill"], attr["stroke"]
			case el.Name.Local == "rect" && classes["ring"]:
				pic.rings++
			case el.Name.Local == "path" && classes["edge"]:
				curEdge = &drawnEdge{host: host, misrouted: classes["misrouted"], unanswered: classes["unanswered"]}
			case el.Name.Local == "title":
				inTitle = true
			case el.Name.Local == "text" && classes["count"] && cur != nil:
				cur.count = "pending"
			}
		case xml.CharData:
			switch {
			case inTitle && curEdge != nil:
				curEdge.title += string(el)
			case inTitle && cur != nil:
				cur.title += string(el)
			case cur != nil && cur.count == "pending":
				cur.count = string(el)
			}
		case xml.EndElement:
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			switch {
			case top.name == "title":
				inTitle = false
			case top.name == "g" && strings.Contains(" "+top.class+" ", " p ") && cur != nil:
				pic.glyphs = append(pic.glyphs, *cur)
				cur = nil
			case top.name == "path" && curEdge != nil:
				pic.edges = append(pic.edges, *curEdge)
				curEdge = nil
			}
		}
	}
	return pic
}

func picture(tb testing.TB, rep report.Report, collapse bool) (*topology, svgPicture) {
	tb.Helper()
	topo := newTopology(rep.Processes, rep.Violations, collapse)
	return topo, parseSVG(tb, topo.svg(pictureOptions{id: "t", view: "v", label: rep.Scenario}))
}

func ids(rep report.Report, members []int) []string {
	out := make([]string, len(members))
	for i, m := range members {
		out[i] = rep.Processes[m].ID
	}
	return out
}
