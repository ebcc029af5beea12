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

// NewRuntime opens the runtime called name: "docker" (NewDocker: no engine is an
// EngineUnavailableError, which says how to fix it or to use --runtime local), "local" (NewLocal),
// or "" for Docker when an engine answers its bounded ping and local otherwise — saying so, and
// why, on the progress writer (WithProgress), since the two differ in what they isolate.
func NewRuntime(ctx context.Context, name string, opts ...Option) (Runtime, error) {
	switch name {
	case RuntimeDocker:
		return NewDocker(ctx, opts...)
	case RuntimeLocal:
		return NewLocal(ctx, opts...)
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
		return nil, fmt.Errorf("runtime %q: want docker or local", name)
	}
}
