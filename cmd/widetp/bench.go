package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/widetp/widetp/harness"
	"github.com/widetp/widetp/internal/bench"
)

const benchDescription = `
Measures how long a run takes from a new runtime to its verdict, teardown included, for wide-TP
deployments in vLLM#48061's shape (N/2 external-LB replicas of TP 16, a head and a --headless
follower each) of each --nodes size, and --scenario FILE if given, on each --runtime. Each
measurement is followed by the floor of as many hosts on that runtime: on Docker a new network and
N+1 FROM scratch containers of the widetp image started in parallel, waited for and removed;
locally N+1 processes of this binary. Then the held floor: the same hosts, but each stays up
(widetp idle) until every one has started, and all are then stopped together, as a run's hosts are
at its teardown; it is the engine's own share of any run of that size. The ratio is run over floor,
the held ratio held floor over floor (medians of --reps). Peak memory is the largest sum of the
proportional set sizes of the run's processes, sampled in one more run before the timed ones
(sampling would slow a timed run; the floors are not sampled). Writes bench.json, bench.md (a
Markdown table) and bench.svg (the plot) into --out, and prints the table. A network the engine
will not remove after a measurement, though no container is attached to it (moby/moby#42119),
does not stop the benchmark: the measurement counts, and the network is named at the end (exit 3;
restart the Docker daemon, then widetp clean).`

func init() {
	register(&command{
		name:    "bench",
		summary: "measure time to verdict against the runtime's floor, for 2 to 64 nodes",
		usage:   "bench [--runtime docker,local] [--nodes 2,4,...] [--scenario FILE] [--reps N] [--out DIR]",
		run:     runBench,
	})
}

func runBench(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet(commands["bench"], benchDescription)
	runtimes := fs.String("runtime", "docker,local", "comma-separated `runtimes` to measure")
	nodes := fs.String("nodes", "2,4,8,16,32,64", "comma-separated node `counts` of the wide-TP series")
	scenario := fs.String("scenario", "", "also measure this scenario `FILE` (vLLM#48061's)")
	reps := fs.Int("reps", 3, "measurements per point; the median counts")
	out := fs.String("out", "docs/bench", "write bench.json, bench.md and bench.svg into `DIR`")
	pos, done, code := parseArgs(fs, args, stdout, stderr)
	if done {
		return code
	}
	if len(pos) != 0 {
		fmt.Fprintf(stderr, "widetp bench: takes no arguments, got %q\n", pos)
		return exitBadInput
	}
	cfg := bench.Config{Scenario: *scenario, Reps: *reps, Progress: stderr,
		Options: []harness.Option{harness.WithBinary(self())}}
	for _, r := range strings.Split(*runtimes, ",") {
		if !slices.Contains(harness.RuntimeNames(), r) {
			fmt.Fprintf(stderr, "widetp bench: --runtime %q: want %s\n", r, strings.Join(harness.RuntimeNames(), " or "))
			return exitBadInput
		}
		cfg.Runtimes = append(cfg.Runtimes, r)
	}
	for _, n := range strings.Split(*nodes, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(n))
		if err != nil || v < 2 || v%2 != 0 {
			fmt.Fprintf(stderr, "widetp bench: --nodes %q: want even counts of at least 2\n", n)
			return exitBadInput
		}
		cfg.Nodes = append(cfg.Nodes, v)
	}
	if *reps < 1 {
		fmt.Fprintf(stderr, "widetp bench: --reps %d: want at least 1\n", *reps)
		return exitBadInput
	}
	points, err := bench.Run(context.Background(), cfg)
	if len(points) > 0 {
		note := fmt.Sprintf("Medians of %d measurements each; `widetp bench --nodes %s --reps %d`.", *reps, *nodes, *reps)
		if werr := bench.Write(*out, points, note); werr != nil {
			fmt.Fprintf(stderr, "widetp bench: write %s: %v\n", *out, werr)
			return exitInfra
		}
		fmt.Fprint(stdout, bench.Table(points, note))
	}
	if err != nil {
		fmt.Fprintf(stderr, "widetp bench: %v\n", err)
		if harness.Infrastructure(err) {
			return exitInfra
		}
		return exitDiffer
	}
	return exitMatch
}
