package harness

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// Runtime names for NewRuntime.
const (
	RuntimeDocker = "docker"
	RuntimeLocal  = "local"
	// RuntimeAuto is Docker when an engine answers, local otherwise.
	RuntimeAuto = ""
)

// RuntimeKind is a registered runtime: its name, what it gives a host, how to open it and whether
// this machine can run it now.
type RuntimeKind struct {
	Name    string
	Summary string
	Open    func(ctx context.Context, opts ...Option) (Runtime, error)
	// Available is nil when the runtime can run here; else why not (no Docker engine answers).
	Available func(ctx context.Context) error
}

// Runtimes are the registered runtimes, the preferred first. The CLI, the e2e suite and its leak
// specs loop over them rather than naming them.
func Runtimes() []RuntimeKind {
	return []RuntimeKind{
		{Name: RuntimeDocker, Summary: "one container per host (FROM scratch), a network per run",
			Open:      func(ctx context.Context, opts ...Option) (Runtime, error) { return NewDocker(ctx, opts...) },
			Available: func(ctx context.Context) error { return Ping(ctx, defaultConfig().pingTimeout) }},
		{Name: RuntimeLocal, Summary: "one process tree per host, with its own loopback address and /tmp",
			Open:      NewLocal,
			Available: func(context.Context) error { return nil }},
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

// NewRuntime opens the runtime called name: "docker" (NewDocker: no engine is an
// EngineUnavailableError, which says how to fix it or to use --runtime local), "local" (NewLocal),
// or "" for Docker when an engine answers its bounded ping and local otherwise — saying so, and
// why, on the progress writer (WithProgress), since the two differ in what they isolate.
func NewRuntime(ctx context.Context, name string, opts ...Option) (Runtime, error) {
	for _, k := range Runtimes() {
		if k.Name == name {
			return k.Open(ctx, opts...)
		}
	}
	switch name {
	case RuntimeAuto:
		cfg := defaultConfig()
		for _, o := range opts {
			o(&cfg)
		}
		if cfg.progress == nil {
			cfg.progress = io.Discard
		}
		err := Ping(ctx, cfg.pingTimeout)
		if err == nil {
			return NewDocker(ctx, opts...)
		}
		why := strings.SplitN(err.Error(), "\n", 2)[0]
		progressLine(cfg.progress, "%s; using the local runtime (--runtime docker to insist)", why)
		return NewLocal(ctx, opts...)
	default:
		return nil, fmt.Errorf("runtime %q: want %s", name, strings.Join(RuntimeNames(), " or "))
	}
}
