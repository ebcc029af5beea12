package harness

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/widetp/widetp/internal/runtimes"
	"github.com/widetp/widetp/internal/runtimes/docker"
	"github.com/widetp/widetp/internal/runtimes/local"
)

// Runtime names for NewRuntime.
const (
	RuntimeDocker = "docker"
	RuntimeLocal  = "local"
	// RuntimeAuto is Docker when an engine answers, local otherwise.
	RuntimeAuto = ""
)

// RuntimeKind is a registered runtime: its name, what it gives a host, how to open it, whether
// this machine can run it now, and its floor (what starting n bare hosts costs it, the bar
// `widetp bench` compares a run with).
type RuntimeKind struct {
	Name    string
	Summary string
	Open    func(ctx context.Context, opts ...Option) (Runtime, error)
	// Available is nil when the runtime can run here; else why not (no Docker engine answers).
	Available func(ctx context.Context) error
	Floor     func(ctx context.Context, n int, opts ...Option) (time.Duration, error)
	// Held is the held floor: n bare hosts kept up until every one is, then stopped together, as
	// a run's hosts are at its teardown (widetp bench reports it beside the floor).
	Held func(ctx context.Context, n int, opts ...Option) (time.Duration, error)
	// Labelled lists what the runtime holds of run runID (of every run when ""): containers,
	// networks, images and volumes on Docker, run directories locally. Leak checks loop over it.
	Labelled func(ctx context.Context, runID string) ([]Resource, error)
}

// Runtimes are the registered runtimes, the preferred first. The CLI, the e2e suite and its leak
// specs loop over them rather than naming them.
func Runtimes() []RuntimeKind {
	return []RuntimeKind{
		{Name: RuntimeDocker, Summary: "one container per host (FROM scratch), a network per run",
			Open:      func(ctx context.Context, opts ...Option) (Runtime, error) { return docker.New(ctx, opts...) },
			Available: func(ctx context.Context) error { return docker.Ping(ctx, runtimes.DefaultConfig().PingTimeout) },
			Floor:     docker.Floor,
			Held:      docker.Held,
			Labelled:  docker.Labelled},
		{Name: RuntimeLocal, Summary: "one process tree per host, with its own loopback address and /tmp",
			Open:      local.New,
			Available: func(context.Context) error { return nil },
			Floor:     local.Floor,
			Held:      local.Held,
			Labelled:  local.Labelled},
	}
}

// RuntimeNames are the registered runtimes' names.
func RuntimeNames() []string {
	var names []string
	for _, k := range Runtimes() {
		names = append(names, k.Name)
	}
	return names
}

// runtimeKind is the registered runtime called name.
func runtimeKind(name string) (RuntimeKind, error) {
	for _, k := range Runtimes() {
		if k.Name == name {
			return k, nil
		}
	}
	return RuntimeKind{}, fmt.Errorf("runtime %q: want %s", name, strings.Join(RuntimeNames(), " or "))
}

// NewRuntime opens the runtime called name: "docker" (no engine is an EngineUnavailableError,
// which says how to fix it or to use --runtime local), "local", or "" for Docker when an engine
// answers its bounded ping and local otherwise — saying so, and why, on the progress writer
// (WithProgress), since the two differ in what they isolate.
func NewRuntime(ctx context.Context, name string, opts ...Option) (Runtime, error) {
	if name != RuntimeAuto {
		k, err := runtimeKind(name)
		if err != nil {
			return nil, err
		}
		return k.Open(ctx, opts...)
	}
	cfg := runtimes.NewConfig(opts...)
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	err := docker.Ping(ctx, cfg.PingTimeout)
	if err == nil {
		return docker.New(ctx, opts...)
	}
	why := strings.SplitN(err.Error(), "\n", 2)[0]
	progressLine(cfg.Progress, "%s; using the local runtime (--runtime docker to insist)", why)
	return local.New(ctx, opts...)
}

// ErrStaleNetwork is in the error of a run's or a floor's teardown when the engine would not
// remove the network for an endpoint it kept of a removed container (moby/moby#42119): the
// measurement is whole, the network stays until the daemon restarts. A Floor or Held that returns
// it returns the time it measured too.
var ErrStaleNetwork = runtimes.ErrStaleNetwork

// Floor measures what starting n bare hosts costs the runtime called name, with no harness
// around it (RuntimeKind.Floor): the bar `widetp bench` compares a run with.
func Floor(ctx context.Context, name string, n int, opts ...Option) (time.Duration, error) {
	k, err := runtimeKind(name)
	if err != nil {
		return 0, fmt.Errorf("floor: %w", err)
	}
	return k.Floor(ctx, n, opts...)
}

// Held measures what keeping n bare hosts up until the last one is, then stopping them together,
// costs the runtime called name (RuntimeKind.Held): the engine's own share of a run, whose hosts
// live until its verdict.
func Held(ctx context.Context, name string, n int, opts ...Option) (time.Duration, error) {
	k, err := runtimeKind(name)
	if err != nil {
		return 0, fmt.Errorf("held floor: %w", err)
	}
	return k.Held(ctx, n, opts...)
}

// Labelled lists what the runtime called name holds of run runID, or of every run when runID is
// "" (RuntimeKind.Labelled): what a leak check looks for.
func Labelled(ctx context.Context, name, runID string) ([]Resource, error) {
	k, err := runtimeKind(name)
	if err != nil {
		return nil, err
	}
	return k.Labelled(ctx, runID)
}
