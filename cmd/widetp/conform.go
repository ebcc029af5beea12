package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/widetp/widetp/scenarios"
	"github.com/widetp/widetp/vllm"
	"github.com/widetp/widetp/vllm/conform"
)

const conformDescription = `
Plans each deployment twice, with vLLM's own launch code (the vllm planner) and with the Go
model, and compares every process field by field: which processes exist, identity, crash
(stage, exception type and message), rendezvous (members, world size, rank; addresses vLLM
fixes exactly, the simulation's derived ports by structure), the KV connector (lookup path and
role, engine_id, Mooncake DP index). First it compares the model's catalog of ` + "`vllm serve`" + `
options (what its command-line parser accepts; ` + "`make flags`" + ` regenerates it) with that vLLM's
own parser: an option only one has, or that they read differently, is a disagreement of area
options. Prints a table of disagreements.

Deployments: the scenario FILES given (with neither FILES nor --generate: every shipped
scenario, --scenarios DIR), plus --generate N seeded deployments over every launch path
(--write DIR saves them as scenario files so a disagreement can be replayed with widetp
explain FILE --planner vllm:PATH). The model runs under one profile for every deployment
(the vLLM under test is one version, whatever a scenario pins): --profile auto, the default,
finds the profile that vLLM behaves as. For every change a profile pins, generated deployments
the model plans differently under the change's values (its witnesses) are planned with that
vLLM, and the value under which the model agrees with it best is kept (on a tie, main's); a
change no witness tells apart keeps main's value. The report names the profile found and how
each change was told. The finding is kept in the user's cache directory for that vLLM's launch
code and this widetp binary, so it is made once.

Exit codes: 0 no disagreement, 1 disagreements, 2 bad input or no vLLM/python3.`

func init() {
	register(&command{
		name:    "conform",
		summary: "compare the Go model with vLLM's own launch code, field by field",
		usage:   "conform [--vllm PATH] [FILES...] [--generate N --seed S] [--write DIR] [--profile P] [--json]",
		run:     conformCmd,
	})
}

type conformReport struct {
	Profile       string                  `json:"profile"`
	Detection     []conform.Finding       `json:"profile_detection,omitempty"`
	VLLM          vllm.PlannerSource      `json:"vllm"`
	Counts        conform.Counts          `json:"counts"`
	ByArea        map[string]int          `json:"by_area"`
	Disagreements []conform.Disagreement  `json:"disagreements"`
	Errors        []conform.PlannerFailed `json:"errors,omitempty"`
	Seconds       float64                 `json:"seconds"`
}

func conformCmd(args []string, stdout, stderr io.Writer) int {
	c := commands["conform"]
	fs := newFlagSet(c, conformDescription+"\n\n"+profileHelp())
	vllmPath := fs.String("vllm", "", "the vLLM to run: a source tree or site-packages `dir` (default $WIDETP_VLLM, else python3's vllm)")
	profile := fs.String("profile", "auto", "the `profile` the model runs under: auto (the one the vLLM under test behaves as), a name, or base,change=value,...")
	generate := fs.Int("generate", 0, "also compare `N` generated deployments")
	seed := fs.String("seed", "1", "the `seed` of the generated deployments")
	write := fs.String("write", "", "write the generated deployments as scenario files into `dir`")
	dir := fs.String("scenarios", "scenarios", "where the shipped scenarios are, when neither FILES nor --generate are given (`dir`)")
	asJSON := fs.Bool("json", false, "print one JSON object instead of the table")
	pos, done, code := parseArgs(fs, args, stdout, stderr)
	if done {
		return code
	}
	auto := *profile == "auto"
	spec := scenarios.ProfileSpec{Base: "main"}
	if !auto {
		var err error
		if spec, err = scenarios.ParseProfileSpec(*profile); err != nil {
			fmt.Fprintf(stderr, "widetp conform: --profile: %v\n", err)
			return exitBadInput
		}
	}
	prof, err := vllm.ResolveProfile(spec.Base, spec.Changes)
	if err != nil {
		fmt.Fprintf(stderr, "widetp conform: --profile: %v\n", err)
		return exitBadInput
	}
	if *generate < 0 {
		fmt.Fprintf(stderr, "widetp conform: --generate must be >= 0, got %d\n", *generate)
		return exitBadInput
	}
	var deps []vllm.Deployment
	files := pos
	if len(files) == 0 && *generate == 0 {
		matches, _ := filepath.Glob(filepath.Join(*dir, "*.yaml"))
		if len(matches) == 0 {
			fmt.Fprintf(stderr, "widetp conform: no scenario files in %s: give FILES, --scenarios DIR or --generate N\n", *dir)
			return exitBadInput
		}
		sort.Strings(matches)
		files = matches
	}
	for _, f := range files {
		s, err := scenarios.Load(f, scenarios.WithProfile(spec))
		if err != nil {
			fmt.Fprintf(stderr, "widetp conform: %v\n", err)
			return exitBadInput
		}
		deps = append(deps, s.Deployment())
	}
	ctx := context.Background()
	start := time.Now()
	pl, release, err := openProbe(ctx, *vllmPath)
	if err != nil {
		fmt.Fprintf(stderr, "widetp conform: %v\n", err)
		return plannerExit(err)
	}
	defer release()
	var findings []conform.Finding
	if auto {
		if prof, findings, err = detectProfile(ctx, pl, prof); err != nil {
			fmt.Fprintf(stderr, "widetp conform: --profile auto: %v\n", err)
			return exitInfra
		}
		spec = profileSpecOf(prof)
	}
	if *generate > 0 {
		gen := conform.Generate(*generate, *seed, prof)
		if *write != "" {
			if err := conform.WriteScenarios(*write, gen, spec.String()); err != nil {
				fmt.Fprintf(stderr, "widetp conform: --write: %v\n", err)
				return exitBadInput
			}
		}
		deps = append(deps, gen...)
	}
	rep := conformReport{Profile: prof.Name, Detection: findings, VLLM: pl.Source(), Disagreements: []conform.Disagreement{}}
	// The options first: the catalog the model parses every command line with.
	if ds, err := conform.Options(ctx, pl, &rep.Counts); err != nil {
		rep.Errors = append(rep.Errors, conform.PlannerFailed{Scenario: "(parser options)", Error: err.Error()})
	} else {
		rep.Disagreements = append(rep.Disagreements, ds...)
	}
	for _, d := range deps {
		d.Profile = prof
		ds, err := conform.Deployment(ctx, d, pl, &rep.Counts)
		if err != nil {
			rep.Errors = append(rep.Errors, conform.PlannerFailed{Scenario: d.Name, Error: err.Error()})
			continue
		}
		rep.Disagreements = append(rep.Disagreements, ds...)
	}
	rep.ByArea = conform.Summary(rep.Disagreements)
	rep.Seconds = time.Since(start).Seconds()
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(rep); err != nil {
			return exitInfra
		}
	} else {
		writeConform(stdout, rep)
	}
	if len(rep.Disagreements) > 0 || len(rep.Errors) > 0 {
		return exitDiffer
	}
	return exitMatch
}

func writeConform(w io.Writer, rep conformReport) {
	src := rep.VLLM
	commit := src.Commit
	if commit == "" {
		commit = "unknown commit"
	}
	fmt.Fprintf(w, "vLLM %s (%s) from %s, launch code sha256 %.12s; model profile %s\n", src.Version, commit, src.Path, src.Digest, rep.Profile)
	if len(rep.Detection) > 0 {
		main, _ := vllm.ProfileNamed("main")
		var told, unlike, kept []string
		for _, fd := range rep.Detection {
			if !fd.Told() {
				kept = append(kept, fd.Change)
				continue
			}
			told = append(told, fd.Change)
			if m, _ := main.Value(fd.Change); fd.Value != m {
				unlike = append(unlike, fmt.Sprintf("%s=%s (%s)", fd.Change, fd.Value, strings.Join(fd.Witnesses, ", ")))
			}
		}
		fmt.Fprintf(w, "profile found by --profile auto: %d changes told apart by planning their witnesses with vLLM", len(told))
		if len(unlike) > 0 {
			fmt.Fprintf(w, ", unlike main: %s", strings.Join(unlike, "; "))
		}
		if len(kept) > 0 {
			fmt.Fprintf(w, "; main's value kept for %d no witness tells apart: %s", len(kept), strings.Join(kept, ", "))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "%d parser options, %d deployments, %d processes, %d fields compared in %.1fs: %d disagreements",
		rep.Counts.Options, rep.Counts.Deployments, rep.Counts.Processes, rep.Counts.Fields, rep.Seconds, len(rep.Disagreements))
	if len(rep.ByArea) > 0 {
		var parts []string
		for a, n := range rep.ByArea {
			parts = append(parts, fmt.Sprintf("%s %d", a, n))
		}
		sort.Strings(parts)
		fmt.Fprintf(w, " (%s)", strings.Join(parts, ", "))
	}
	fmt.Fprintln(w)
	for _, e := range rep.Errors {
		fmt.Fprintf(w, "PLANNER FAILED %s: %s\n", e.Scenario, e.Error)
	}
	if len(rep.Disagreements) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "\nSCENARIO\tPROCESS\tFIELD\tVLLM\tMODEL")
	for _, d := range rep.Disagreements {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", d.Scenario, d.Process, d.Field, cell(d.VLLM), cell(d.Model))
	}
	tw.Flush()
}

func cell(s string) string {
	if s == "" {
		return "-"
	}
	if len(s) > 160 {
		return s[:157] + "..."
	}
	return strings.ReplaceAll(s, "\n", " ")
}
