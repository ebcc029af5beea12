package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/widetp/widetp/harness"
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/report/htmlreport"
	"github.com/widetp/widetp/scenarios"
	"github.com/widetp/widetp/vllm"
)

const explainDescription = `
Prints, without starting anything, every process the scenario's vllm serve lines start and the
identity vLLM gives each one under the profile, the addresses each binds, opens, dials, probes or
advertises (API ports, handshakes, port allocators, KV connector side channels, shared regions),
the replicas they form, and the violations the checks find in that prediction. A scenario with
faults: also gets its timeline: each step, what the model predicts it does, and the violations
found after it (the tables then show the deployment after the last step). The exit code compares
the predicted violation kinds with the scenario's expect: 0 equal, 1 different, 2 bad input.

--profile overrides the file's profile: a name (main, main-455edc0, pre-48061) or base,change=value,...
(main,mooncake_dp_index=legacy). --html FILE also writes the prediction as a self-contained HTML
page (the picture of widetp report).`

func init() {
	register(&command{
		name:    "explain",
		summary: "print every process's predicted identity and the violations (no containers)",
		usage:   "explain FILE [--profile P] [--planner model|vllm[:PATH]] [--json] [--html FILE]",
		run:     explain,
	})
}

// profileHelp lists the named profiles and every change with its values, from the model itself so
// that --help never falls behind it.
func profileHelp() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Profiles: %s. Changes (older behaviour first):", strings.Join(vllm.ProfileNames(), ", "))
	for _, ch := range vllm.Changes() {
		fmt.Fprintf(&b, "\n  %s=%s", ch.Name, strings.Join(ch.Values, "|"))
	}
	return b.String()
}

func explain(args []string, stdout, stderr io.Writer) int {
	c := commands["explain"]
	fs := newFlagSet(c, explainDescription+"\n\n"+plannerHelp+"\n\n"+profileHelp())
	profile := fs.String("profile", "", "model the scenario under this `profile` instead of the file's: a name, or base,change=value,...")
	asJSON := fs.Bool("json", false, "print one JSON report object instead of tables")
	htmlOut := fs.String("html", "", "also write the prediction as a self-contained HTML page to `FILE`")
	plannerSpec := fs.String("planner", "model", "who plans the processes: model, vllm or vllm:`PATH` (see above)")
	pos, done, code := parseArgs(fs, args, stdout, stderr)
	if done {
		return code
	}
	if len(pos) != 1 {
		fmt.Fprintf(stderr, "widetp explain: want one scenario FILE, got %d arguments\n", len(pos))
		fs.SetOutput(stderr)
		fs.Usage()
		return exitBadInput
	}
	var opts []scenarios.Option
	if *profile != "" {
		spec, err := scenarios.ParseProfileSpec(*profile)
		if err != nil {
			fmt.Fprintf(stderr, "widetp explain: --profile: %v\n", err)
			return exitBadInput
		}
		opts = append(opts, scenarios.WithProfile(spec))
	}

	start := time.Now()
	s, err := scenarios.Load(pos[0], opts...)
	if err != nil {
		fmt.Fprintf(stderr, "widetp explain: %v\n", err)
		return exitBadInput
	}
	loaded := time.Now()
	pl, release, err := openPlanner(context.Background(), *plannerSpec)
	if err != nil {
		fmt.Fprintf(stderr, "widetp explain: --planner: %v\n", err)
		return plannerExit(err)
	}
	defer release()
	pred, err := harness.Predict(context.Background(), pl, s)
	if err != nil {
		fmt.Fprintf(stderr, "widetp explain: %s: predict: %v\n", s.File, err)
		return exitBadInput
	}
	procs, violations := pred.Processes, pred.Violations
	checked := time.Now()
	predicted := checked.Add(-pred.Checking)

	rep := report.Report{
		Scenario:   s.Name,
		Profile:    s.Profile.String(),
		Runtime:    "none",
		Verdict:    "pass",
		Expected:   append([]report.Kind{}, s.Expect...),
		Violations: violations,
		Processes:  procs,
		Timings: map[string]float64{
			"load":    loaded.Sub(start).Seconds(),
			"predict": predicted.Sub(loaded).Seconds(),
			"check":   checked.Sub(predicted).Seconds(),
		},
		Planner: reportPlanner(pl),
		Steps:   pred.Steps,
	}
	if len(violations) > 0 {
		rep.Verdict = "fail"
	}
	got := report.KindSet(violations)
	match := slices.Equal(got, rep.Expected)

	if *htmlOut != "" {
		if err := htmlreport.WriteFile(*htmlOut, htmlreport.FromReport(rep)); err != nil {
			fmt.Fprintf(stderr, "widetp explain: --html: %v\n", err)
			return exitInfra
		}
	}
	if *asJSON {
		// Compact: a 64-node report is ~1,100 records, and indenting it costs as much as predicting
		// it (the explain benchmark's budget is 10 ms); `jq .` indents for a reader.
		if err := json.NewEncoder(stdout).Encode(rep); err != nil {
			fmt.Fprintf(stderr, "widetp explain: write report: %v\n", err)
			return exitInfra
		}
	} else {
		writeExplain(stdout, s, rep, got, match)
	}
	if !match {
		return exitDiffer
	}
	return exitMatch
}
