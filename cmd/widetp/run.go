package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/widetp/widetp/harness"
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/scenarios"
	"github.com/widetp/widetp/vllm"
)

const runDescription = `
Runs the scenario for real: the fake Mooncake store, then one simulated node per scenario node (a
container on Docker, a process tree with its own address and /tmp on the local runtime), each
starting every process its vllm serve lines start. The processes meet at real TCP rendezvous, bind
and reach real ZMQ lookup sockets and register with the store; once every node has settled, the
checks run over what they reported. Progress goes to stderr, the report to stdout (the tables of
explain, observed instead of predicted; --json for one report object).

The exit code compares the observed violation kinds with the scenario's expect: 0 equal, 1
different, 2 bad input, 3 infrastructure (no Docker with --runtime docker, an image that does not
build, a node program that died). SIGINT or SIGTERM tears the run down (nothing is left) and exits
130 or 143. Artifacts (every node's logs, inspect output and ipc listing, the store snapshot,
report.json) go to --artifacts DIR, and on any failure to a directory named on stderr.

--runtime: docker, local, or (default) docker when an engine answers and local otherwise.
--profile overrides the file's profile: a name (main, main-455edc0, pre-48061) or base,change=value,...`

func init() {
	register(&command{
		name:    "run",
		summary: "run the scenario on Docker or locally and check what its processes report",
		usage:   "run FILE [--runtime docker|local] [--profile P] [--planner model|vllm[:PATH]] [--json] [--artifacts DIR]",
		run:     runScenario,
	})
}

// Exit codes of an interrupted run: the shell's 128+N for the signal that asked for it.
const (
	exitInterrupted = 130 // SIGINT
	exitTerminated  = 143 // SIGTERM
)

func runScenario(args []string, stdout, stderr io.Writer) int {
	c := commands["run"]
	fs := newFlagSet(c, runDescription+"\n\n"+profileHelp())
	runtime := fs.String("runtime", "", "`docker` or local (default: docker when an engine answers, else local)")
	profile := fs.String("profile", "", "run the scenario under this `profile` instead of the file's: a name, or base,change=value,...")
	asJSON := fs.Bool("json", false, "print one JSON report object instead of tables")
	artifacts := fs.String("artifacts", "", "write every node's logs, the store snapshot and report.json into `DIR`")
	plannerSpec := fs.String("planner", "model", "who plans the processes the nodes run: model, vllm or vllm:`PATH` (as explain)")
	pos, done, code := parseArgs(fs, args, stdout, stderr)
	if done {
		return code
	}
	if len(pos) != 1 {
		fmt.Fprintf(stderr, "widetp run: want one scenario FILE, got %d arguments\n", len(pos))
		fs.SetOutput(stderr)
		fs.Usage()
		return exitBadInput
	}
	if *runtime != harness.RuntimeAuto && !slices.Contains(harness.RuntimeNames(), *runtime) {
		fmt.Fprintf(stderr, "widetp run: --runtime %q: want %s\n", *runtime, strings.Join(harness.RuntimeNames(), " or "))
		return exitBadInput
	}
	var opts []scenarios.Option
	if *profile != "" {
		spec, err := scenarios.ParseProfileSpec(*profile)
		if err != nil {
			fmt.Fprintf(stderr, "widetp run: --profile: %v\n", err)
			return exitBadInput
		}
		opts = append(opts, scenarios.WithProfile(spec))
	}
	// Everything the loader checks — GPUs a node's commands need, repeated hosts, every flag —
	// fails here, before anything starts.
	s, err := scenarios.Load(pos[0], opts...)
	if err != nil {
		fmt.Fprintf(stderr, "widetp run: %v\n", err)
		return exitBadInput
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Plans first: a planner that cannot start (no python3, no vLLM) is bad input, before anything
	// runs. The model planner leaves planning to the nodes (simnode plans with the same model).
	var plans []*vllm.NodePlan
	var planner *report.Planner
	if *plannerSpec != "" && *plannerSpec != "model" {
		pl, release, err := openPlanner(ctx, *plannerSpec)
		if err != nil {
			fmt.Fprintf(stderr, "widetp run: --planner: %v\n", err)
			return plannerExit(err)
		}
		plans, err = pl.PlanDeployment(ctx, s.Deployment())
		planner = reportPlanner(pl)
		release()
		if err != nil {
			fmt.Fprintf(stderr, "widetp run: %s: plan: %v\n", s.File, err)
			return exitBadInput
		}
	}
	which, stop := interruptions(cancel, stderr)
	r := &runner{s: s, stdout: stdout, stderr: stderr, asJSON: *asJSON, artifacts: *artifacts, plans: plans, planner: planner}
	code = r.run(ctx, *runtime)
	stop()
	if got := which(); got != nil {
		fmt.Fprintf(stderr, "widetp run: interrupted by %s; torn down\n", signalName(got))
		if got == syscall.SIGTERM {
			return exitTerminated
		}
		return exitInterrupted
	}
	return code
}

// interruptions cancels the run on the first SIGINT or SIGTERM and keeps catching them until
// stop, so that a second Ctrl-C cannot cut the teardown short (the run would leave containers for
// the next run's sweep). which says which signal came first, if any.
func interruptions(cancel context.CancelFunc, stderr io.Writer) (which func() os.Signal, stop func()) {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	var first os.Signal
	done := make(chan struct{})
	go func() {
		defer close(done)
		for s := range ch {
			if first == nil {
				first = s
				fmt.Fprintf(stderr, "widetp run: %s: tearing the run down\n", signalName(s))
				cancel()
				continue
			}
			fmt.Fprintf(stderr, "widetp run: %s: still tearing down (bounded); please wait\n", signalName(s))
		}
	}()
	stop = func() {
		signal.Stop(ch)
		close(ch)
		<-done
	}
	return func() os.Signal { return first }, stop
}

func signalName(s os.Signal) string {
	if s == syscall.SIGTERM {
		return "SIGTERM"
	}
	return "SIGINT"
}

// runner is one `widetp run`.
type runner struct {
	s         *scenarios.Scenario
	stdout    io.Writer
	stderr    io.Writer
	asJSON    bool
	artifacts string
	// plans, when set, are the nodes' plans made by a planner other than the model (--planner).
	plans   []*vllm.NodePlan
	planner *report.Planner
}

func (r *runner) run(ctx context.Context, runtime string) int {
	opts := []harness.RunOption{
		harness.WithRuntime(runtime),
		harness.WithRuntimeOptions(harness.WithBinary(self())),
		harness.WithRunProgress(r.stderr),
		harness.WithReportPlanner(r.planner),
		harness.WithArtifactsOnFailure(harness.DefaultArtifactsBase()),
	}
	if r.plans != nil {
		opts = append(opts, harness.WithClusterOptions(harness.WithPlans(r.plans)))
	}
	if r.artifacts != "" {
		opts = append(opts, harness.WithArtifacts(r.artifacts))
	}
	res, runErr := harness.Run(ctx, r.s, opts...)
	var se *harness.ScenarioError
	if errors.As(runErr, &se) {
		fmt.Fprintf(r.stderr, "widetp run: %v\n", runErr)
		return exitBadInput
	}
	if res == nil {
		fmt.Fprintf(r.stderr, "widetp run: %v\n", runErr)
		return exitInfra
	}
	if res.Report != nil {
		if err := r.print(*res.Report, report.KindSet(res.Report.Violations), res.Match); err != nil {
			fmt.Fprintf(r.stderr, "widetp run: write report: %v\n", err)
			return exitInfra
		}
	}
	switch {
	case ctx.Err() != nil:
		return exitInfra // the caller turns this into the signal's code
	case runErr != nil:
		fmt.Fprintf(r.stderr, "widetp run: %v\n", runErr)
		return exitInfra
	case !res.Match:
		return exitDiffer
	}
	return exitMatch
}

func (r *runner) print(rep report.Report, got []report.Kind, match bool) error {
	if r.asJSON {
		return json.NewEncoder(r.stdout).Encode(rep)
	}
	writeExplain(r.stdout, r.s, rep, got, match)
	fmt.Fprintf(r.stdout, "timings  %s\n", timings(rep.Timings))
	return nil
}

// timings renders the phases in the order they happen.
func timings(t map[string]float64) string {
	var parts []string
	for _, k := range []string{"start", "settle", "collect", "check", "teardown", "total"} {
		if v, ok := t[k]; ok {
			parts = append(parts, fmt.Sprintf("%s %.2fs", k, v))
		}
	}
	return strings.Join(parts, ", ")
}
