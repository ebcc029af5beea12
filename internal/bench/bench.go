// Package bench measures widetp runs against a floor (widetp bench, make bench): the time from a
// new runtime to a run's verdict, teardown included, for deployments of 2 to 64 nodes on each
// runtime; the floor, measured in the same session, is what starting as many hosts costs with no
// harness around it (harness.Floor); the held floor, what keeping them up until the last one is
// and then stopping them together costs (harness.Held), the engine's own share of any run; and
// the peak memory of the run's processes. It writes the
// figures as JSON and Markdown and draws them as an SVG.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/widetp/widetp/harness"
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/scenarios"
)

// Config is one benchmark session.
type Config struct {
	// Runtimes to measure ("docker", "local").
	Runtimes []string
	// Nodes are the deployment sizes of the wide-TP series (2 to 64).
	Nodes []int
	// Scenario, when set, is measured too under its own name (vLLM#48061's file).
	Scenario string
	// Reps is how many times each point is measured; the median counts.
	Reps int
	// Options are passed to every runtime (the widetp binary, progress).
	Options  []harness.Option
	Progress io.Writer
}

// Point is one measured deployment on one runtime.
type Point struct {
	Runtime  string `json:"runtime"`
	Scenario string `json:"scenario"`
	Nodes    int    `json:"nodes"`
	// Hosts is nodes plus the store: the floor starts as many.
	Hosts int `json:"hosts"`
	// Run and Floor are medians in seconds; Runs and Floors every measurement.
	Run    float64   `json:"run_s"`
	Floor  float64   `json:"floor_s"`
	Ratio  float64   `json:"ratio"`
	Runs   []float64 `json:"runs_s"`
	Floors []float64 `json:"floors_s"`
	// Held is the median held floor (harness.Held: as many hosts kept up until the last is, then
	// stopped together, as a run's are), Helds every measurement; HeldRatio is Held over Floor,
	// the part of Ratio that is the engine's own.
	Held      float64   `json:"held_s"`
	Helds     []float64 `json:"helds_s"`
	HeldRatio float64   `json:"held_ratio"`
	// PeakMiB is the largest sum of the proportional set sizes of the run's processes (every
	// process carrying its run id) seen during a run of its own, before the timed ones.
	PeakMiB float64 `json:"peak_mib"`
	// Processes is the most processes of the run one sweep saw: the whole deployment once it has
	// settled (a sweep is taken then), for a run that loses none on the way.
	Processes int `json:"processes"`
}

// Run measures every point of cfg, interleaving each run with its floor and held floor so that
// all three see the same machine load.
func Run(ctx context.Context, cfg Config) ([]Point, error) {
	if cfg.Reps <= 0 {
		cfg.Reps = 1
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	type item struct {
		name string
		s    *scenarios.Scenario
	}
	var items []item
	if cfg.Scenario != "" {
		s, err := scenarios.Load(cfg.Scenario)
		if err != nil {
			return nil, err
		}
		items = append(items, item{s.Name, s})
	}
	for _, n := range cfg.Nodes {
		s, err := WideTP(n)
		if err != nil {
			return nil, err
		}
		items = append(items, item{s.Name, s})
	}
	stale := &staleNetworks{progress: cfg.Progress}
	var points []Point
	for _, rt := range cfg.Runtimes {
		if rt == harness.RuntimeDocker {
			// The image is a cache that a run finds by content hash: built before the clock runs.
			if _, err := harness.BuildImages(ctx, []harness.Program{harness.Widetp}, cfg.Options...); err != nil {
				return nil, err
			}
		}
		for _, it := range items {
			p := Point{Runtime: rt, Scenario: it.name, Nodes: len(it.s.Nodes), Hosts: len(it.s.Nodes) + 1}
			// The memory is measured in a run of its own, untimed: reading every process's
			// smaps five times a second costs CPU the floor does not pay (a tenth of a core at
			// 17 hosts). It also warms the machine up for the timed runs that follow.
			took, peak, procs, err := runOnce(ctx, rt, it.s, cfg.Options, true)
			if err = stale.keep(err, took); err != nil {
				return points, stale.join(fmt.Errorf("%s on %s: %w", it.name, rt, err))
			}
			p.PeakMiB, p.Processes = peak, procs
			fmt.Fprintf(cfg.Progress, "bench: %s on %s (%d hosts): peak %.0f MiB over %d processes (untimed)\n",
				it.name, rt, p.Hosts, peak, procs)
			for i := 0; i < cfg.Reps; i++ {
				took, _, _, err := runOnce(ctx, rt, it.s, cfg.Options, false)
				if err = stale.keep(err, took); err != nil {
					return points, stale.join(fmt.Errorf("%s on %s: %w", it.name, rt, err))
				}
				floor, err := harness.Floor(ctx, rt, p.Hosts, cfg.Options...)
				if err = stale.keep(err, floor); err != nil {
					return points, stale.join(fmt.Errorf("floor of %d hosts on %s: %w", p.Hosts, rt, err))
				}
				held, err := harness.Held(ctx, rt, p.Hosts, cfg.Options...)
				if err = stale.keep(err, held); err != nil {
					return points, stale.join(fmt.Errorf("held floor of %d hosts on %s: %w", p.Hosts, rt, err))
				}
				p.Runs = append(p.Runs, took.Seconds())
				p.Floors = append(p.Floors, floor.Seconds())
				p.Helds = append(p.Helds, held.Seconds())
				fmt.Fprintf(cfg.Progress, "bench: %s on %s (%d hosts): run %.2fs, floor %.2fs, held floor %.2fs\n",
					it.name, rt, p.Hosts, took.Seconds(), floor.Seconds(), held.Seconds())
			}
			p.Run, p.Floor, p.Held = median(p.Runs), median(p.Floors), median(p.Helds)
			if p.Floor > 0 {
				p.Ratio = p.Run / p.Floor
				p.HeldRatio = p.Held / p.Floor
			}
			points = append(points, p)
		}
	}
	return points, stale.join(nil)
}

// runOnce runs s from a new runtime to its verdict and teardown (harness.Run), and samples its
// memory when asked to (the peak and its process count are 0 otherwise).
func runOnce(ctx context.Context, rt string, s *scenarios.Scenario, opts []harness.Option, memory bool) (time.Duration, float64, int, error) {
	runID := fmt.Sprintf("bench%d-%d", os.Getpid(), benchSeq.Add(1))
	var sampler *sampler
	if memory {
		sampler = startSampler(runID)
	}
	start := time.Now()
	// A refused run leaves its artifacts (every node's logs) to say why; a healthy one writes none.
	runOpts := []harness.RunOption{harness.WithRuntime(rt), harness.WithArtifactsOnFailure(harness.DefaultArtifactsBase()),
		harness.WithRuntimeOptions(append([]harness.Option{harness.WithoutSweep(), harness.WithRunID(runID)}, opts...)...)}
	if sampler != nil {
		// Once more with the deployment settled and every host up, before the teardown: a large
		// run is settled for a moment only, which the background sweeps can miss.
		runOpts = append(runOpts, harness.WithSettled(sampler.sweep))
	}
	res, err := harness.Run(ctx, s, runOpts...)
	took := time.Since(start)
	var peak float64
	var procs int
	if sampler != nil {
		peak, procs = sampler.stop()
	}
	// A network the engine kept at the teardown (harness.ErrStaleNetwork) spoils nothing the run
	// measured: it counts when the run went as its scenario expects.
	var stale error
	if errors.Is(err, harness.ErrStaleNetwork) && res != nil && res.Report != nil {
		stale, err = err, nil
	}
	if err == nil {
		err = unexpected(res)
	}
	if err == nil {
		err = stale
	}
	return took, peak, procs, err
}

// unexpected refuses a run that did not go as its scenario expects: a time to a wrong verdict (a
// healthy deployment that timed out somewhere, say) is not a measurement of the harness.
func unexpected(res *harness.Result) error {
	if res == nil || res.Report == nil || len(res.Report.Processes) == 0 {
		return errors.New("the run reported no process")
	}
	if res.Match {
		return nil
	}
	rep := res.Report
	err := fmt.Errorf("the run observed %v where the scenario expects %v", report.KindSet(rep.Violations), rep.Expected)
	if len(rep.Violations) > 0 {
		err = fmt.Errorf("%w; the first: %s", err, rep.Violations[0].Message)
	}
	if res.Artifacts != "" {
		err = fmt.Errorf("%w (its artifacts: %s)", err, res.Artifacts)
	}
	return err
}

// benchSeq numbers this process's runs (their run ids, which the memory sampler looks for).
var benchSeq atomic.Int64

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// WideTP is a deployment of n nodes (n even, at least 2) in the shape of vLLM#48061: n/2
// external-LB replicas of TP 16, each over a head and a --headless follower of 8 GPUs, with the
// Mooncake store connector, under main (healthy).
func WideTP(n int) (*scenarios.Scenario, error) {
	if n < 2 || n%2 != 0 {
		return nil, fmt.Errorf("wide-tp deployment of %d nodes: want an even number, at least 2", n)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "name: wide-tp-%d\ndescription: %d nodes, %d external-LB replicas of TP 16 (vLLM#48061's shape)\nprofile: main\nmodel: {name: deepseek-ai/DeepSeek-V3}\nnodes:\n", n, n, n/2)
	for k := 0; k < n; k++ {
		headless := ""
		if k%2 == 1 {
			headless = " --headless"
		}
		// One replica (2 nodes) is not data parallel: vLLM refuses a DP rank without DP.
		dp := fmt.Sprintf(" -dp %d --data-parallel-rank %d\n      --data-parallel-address n0 --data-parallel-rpc-port 13345", n/2, k/2)
		if n == 2 {
			dp = ""
		}
		fmt.Fprintf(&b, "  - host: n%d\n    command: >-\n      vllm serve deepseek-ai/DeepSeek-V3 -tp 16 --enable-expert-parallel%s\n      --nnodes %d --node-rank %d --master-addr n0 --master-port 29500%s\n      --kv-transfer-config '{\"kv_connector\":\"MooncakeStoreConnector\",\"kv_role\":\"kv_both\"}'\n",
			k, dp, n, k, headless)
	}
	dir, err := os.MkdirTemp("", "widetp-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, fmt.Sprintf("wide-tp-%d.yaml", n))
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return nil, err
	}
	return scenarios.Load(path)
}

// staleNetworks are the networks the engine kept at a teardown (harness.ErrStaleNetwork): the
// measurement that met one is whole, so the benchmark goes on, and its error says at the end what
// is left to remove.
type staleNetworks struct {
	progress io.Writer
	errs     []error
}

// keep returns err, or nil when err is only the engine keeping a network at the end of a
// measurement that took took (it is noted for join).
func (s *staleNetworks) keep(err error, took time.Duration) error {
	if err != nil && errors.Is(err, harness.ErrStaleNetwork) && took > 0 {
		s.errs = append(s.errs, err)
		fmt.Fprintf(s.progress, "bench: %v (measured; going on)\n", err)
		return nil
	}
	return err
}

// join is err with every network kept so far.
func (s *staleNetworks) join(err error) error { return errors.Join(append([]error{err}, s.errs...)...) }
