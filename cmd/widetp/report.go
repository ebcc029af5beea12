package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/widetp/widetp/report/htmlreport"
)

const reportDescription = `
Renders a saved report as one self-contained HTML page (inline CSS, script and SVG; it loads
nothing, so it opens offline and as a CI artifact): a picture of the deployment (hosts grouped by
replica, every process coloured by the Mooncake DP index it uses and outlined by its replica's
global DP index, lookup clients joined to the server that answered, crashes and failed
rendezvous marked), the violations by kind, the processes with filters, the replicas, the timings
and links to the run's artifacts.

The argument is a run's artifacts directory (widetp run --artifacts, or the directory a failed run
names on stderr: its report.json, and the page links each host's logs.txt, inspect.json and
ipc.json and the store snapshot) or a report.json file (also the output of widetp run --json or
widetp explain --json saved to a file; the files beside it are linked as well).

-o names the page: by default report.html beside the report.json; "-" writes it to stdout.
Exit codes: 0 written, 2 bad input (no such file or directory, not a widetp report), 3 the page
could not be written.`

func init() {
	register(&command{
		name:    "report",
		summary: "render a saved report (report.json or a run's artifacts directory) as an HTML page",
		usage:   "report DIR|report.json [-o FILE]",
		run:     renderReport,
	})
}

func renderReport(args []string, stdout, stderr io.Writer) int {
	c := commands["report"]
	fs := newFlagSet(c, reportDescription)
	out := fs.String("o", "", "write the page to `FILE` (default: report.html beside the report.json; - for stdout)")
	pos, done, code := parseArgs(fs, args, stdout, stderr)
	if done {
		return code
	}
	if len(pos) != 1 {
		fmt.Fprintf(stderr, "widetp report: want one artifacts DIR or report.json, got %d arguments\n", len(pos))
		fs.SetOutput(stderr)
		fs.Usage()
		return exitBadInput
	}
	doc, err := htmlreport.Read(pos[0])
	if err != nil {
		fmt.Fprintf(stderr, "widetp report: %v\n", err)
		return exitBadInput
	}
	if *out == "-" {
		if err := htmlreport.Write(stdout, doc); err != nil {
			fmt.Fprintf(stderr, "widetp report: %v\n", err)
			return exitInfra
		}
		return exitMatch
	}
	path := *out
	if path == "" {
		dir := pos[0]
		if st, err := os.Stat(dir); err == nil && !st.IsDir() {
			dir = filepath.Dir(dir)
		}
		path = filepath.Join(dir, htmlreport.ArtifactHTML)
	}
	if err := htmlreport.WriteFile(path, doc); err != nil {
		fmt.Fprintf(stderr, "widetp report: %v\n", err)
		return exitInfra
	}
	fmt.Fprintf(stderr, "widetp report: wrote %s\n", path)
	return exitMatch
}
