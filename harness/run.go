package harness

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/scenarios"
)

// RunOption changes how Run and StartSession run a scenario.
type RunOption func(*runConfig)

type runConfig struct {
	runtime   string
	rtOpts    []Option
	clOpts    []ClusterOption
	progress  io.Writer
	artifacts string
	onFailure string
	planner   *report.Planner
	settled   func()
}

// WithRuntime names the runtime to run on (RuntimeNames; default RuntimeAuto: Docker when an
// engine answers, local otherwise).
func WithRuntime(name string) RunOption { return func(c *runConfig) { c.runtime = name } }

// WithRuntimeOptions configures the runtime (WithRunID, WithBinary, timeouts, ...).
func WithRuntimeOptions(opts ...Option) RunOption {
	return func(c *runConfig) { c.rtOpts = append(c.rtOpts, opts...) }
}

// WithClusterOptions configures the cluster (WithPlans, WithNodeTimeouts, ...).
func WithClusterOptions(opts ...ClusterOption) RunOption {
	return func(c *runConfig) { c.clOpts = append(c.clOpts, opts...) }
}

// WithRunProgress receives the runtime's, the cluster's and the run's progress lines.
func WithRunProgress(w io.Writer) RunOption { return func(c *runConfig) { c.progress = w } }

// WithArtifacts writes the run's artifacts (WriteArtifacts) into dir whatever the outcome.
func WithArtifacts(dir string) RunOption { return func(c *runConfig) { c.artifacts = dir } }

// WithArtifactsOnFailure writes the artifacts of a run that failed, or whose observed violation
// kinds differ from the scenario's expect, into base/<scenario>-<run id> (unless WithArtifacts
// named a directory already).
func WithArtifactsOnFailure(base string) RunOption {
	return func(c *runConfig) { c.onFailure = base }
}

// WithSettled calls f once Run has its verdict, before the teardown, while every host is still
// up: widetp bench sweeps the memory of the settled deployment there.
func WithSettled(f func()) RunOption { return func(c *runConfig) { c.settled = f } }

// WithReportPlanner names, in the report, the planner whose plans the nodes ran (WithPlans).
func WithReportPlanner(p *report.Planner) RunOption { return func(c *runConfig) { c.planner = p } }

// ScenarioError is a scenario that could not become a cluster: nothing started (a node named as
// the store, bad bounds). The CLI's exit 2.
type ScenarioError struct{ Err error }

func (e *ScenarioError) Error() string { return e.Err.Error() }
func (e *ScenarioError) Unwrap() error { return e.Err }

// Session is one scenario run in progress: its runtime and cluster, and its report once read.
// StartSession makes one; Finish ends it. Run does both.
type Session struct {
	cfg     runConfig
	s       *scenarios.Scenario
	start   time.Time
	Runtime Runtime
	Cluster *Cluster
	// Report is the run's report; nil when none could be read (the run failed first).
	Report *report.Report
}

// StartSession opens the runtime, starts the cluster of s, waits for it to settle, follows its
// fault timeline (RunTimeline) and reads its report: the first half of Run, for callers that look at the live cluster before Finish (a
// suite's further checks, fault injection). The error is nil only when a report was read; the
// session is nil only when nothing started (a ScenarioError, or the runtime's own error) and
// must otherwise be finished whatever the error.
func StartSession(ctx context.Context, s *scenarios.Scenario, opts ...RunOption) (*Session, error) {
	cfg := runConfig{runtime: RuntimeAuto, progress: io.Discard}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.progress == nil {
		cfg.progress = io.Discard
	}
	ss := &Session{cfg: cfg, s: s, start: time.Now()}
	rt, err := NewRuntime(ctx, cfg.runtime, append([]Option{WithProgress(cfg.progress)}, cfg.rtOpts...)...)
	if err != nil {
		return nil, err
	}
	ss.Runtime = rt
	cl, err := StartCluster(ctx, s, rt, append([]ClusterOption{WithClusterProgress(cfg.progress)}, cfg.clOpts...)...)
	if cl == nil {
		return nil, &ScenarioError{Err: errors.Join(err, rt.Close(ctx))}
	}
	ss.Cluster = cl
	if err != nil {
		return ss, err
	}
	err = cl.Settle(ctx)
	if err == nil && ctx.Err() == nil {
		// The fault timeline, on a settled deployment only: a start that already failed leaves
		// nothing to break on purpose.
		err = cl.RunTimeline(ctx)
	}
	if ctx.Err() != nil {
		return ss, errors.Join(err, context.Cause(ctx))
	}
	rep, rerr := cl.Report(ctx)
	if rerr != nil {
		return ss, errors.Join(err, rerr)
	}
	rep.Planner = cfg.planner
	if err != nil {
		// What the run saw up to where it stopped: no verdict, whatever the records show.
		rep.Verdict, rep.Error = "error", err.Error()
	}
	ss.Report = &rep
	return ss, err
}

// Match reports whether the run reached its verdict and its observed violation kinds are the
// scenario's expected ones.
func (ss *Session) Match() bool {
	return ss.Report != nil && ss.Report.Error == "" && slices.Equal(report.KindSet(ss.Report.Violations), ss.Report.Expected)
}

// RunID is the run's id (the io.widetp.run label).
func (ss *Session) RunID() string { return ss.Runtime.RunID() }

// Finish writes the artifacts into dir (none when dir is ""; before the teardown, which removes
// the hosts), closes the cluster and its runtime, and completes the report's timings (teardown,
// total). It runs even when ctx is done (an interrupt still tears down) but writes no artifacts
// then. A missing artifact is reported on the progress writer, not returned: the error is the
// teardown's.
func (ss *Session) Finish(ctx context.Context, dir string) error {
	if dir != "" && ctx.Err() == nil {
		if err := ss.Cluster.WriteArtifacts(ctx, dir, ss.Report); err != nil {
			progressLine(ss.cfg.progress, "some artifacts are missing: %v", err)
		}
		progressLine(ss.cfg.progress, "artifacts in %s", dir)
	}
	err := ss.Cluster.Close(ctx)
	if ss.Report != nil {
		ss.Report.Timings = ss.Cluster.Timings()
		ss.Report.Timings["total"] = time.Since(ss.start).Seconds()
	}
	return err
}

// Result is what Run leaves: the report (nil when none was read), whether its violation kinds
// are the expected ones, the run id and where the artifacts went ("" when none were written).
type Result struct {
	Report    *report.Report
	Match     bool
	RunID     string
	Artifacts string
}

// Run runs s from start to verdict on one runtime — the recipe the widetp CLI, the benchmark and
// the suites share: open the runtime, start the cluster (the store and every node in one round),
// settle, read the report, write artifacts (WithArtifacts; or WithArtifactsOnFailure when the run
// failed or its kinds differ from the scenario's expect), tear everything down. The error is why
// the run did not reach a verdict (a *ScenarioError when nothing could start) joined with any
// teardown failure; a run whose verdict differs from the expect is no error (Result.Match).
func Run(ctx context.Context, s *scenarios.Scenario, opts ...RunOption) (*Result, error) {
	if s == nil {
		return nil, &ScenarioError{Err: errors.New("run: no scenario")}
	}
	ss, err := StartSession(ctx, s, opts...)
	if ss == nil {
		return nil, err
	}
	res := &Result{RunID: ss.RunID(), Match: ss.Match()}
	if err == nil && ss.cfg.settled != nil {
		ss.cfg.settled()
	}
	dir := ss.cfg.artifacts
	if dir == "" && ss.cfg.onFailure != "" && (err != nil || !res.Match) {
		dir = filepath.Join(ss.cfg.onFailure, s.Name+"-"+res.RunID)
	}
	if ctx.Err() == nil {
		res.Artifacts = dir
	}
	if cerr := ss.Finish(ctx, dir); cerr != nil {
		err = errors.Join(err, cerr)
	}
	res.Report = ss.Report
	return res, err
}

// DefaultArtifactsBase is where the widetp command leaves a failed run's artifacts.
func DefaultArtifactsBase() string { return filepath.Join(os.TempDir(), "widetp-artifacts") }
