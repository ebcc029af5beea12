package docker

import (
	"context"
	"fmt"
	"time"
)

// EngineUnavailableError says no Docker engine answered. The CLI maps it to exit 3 (infrastructure)
// and prints it: it says how to fix the engine or how to run without one.
type EngineUnavailableError struct {
	// Host is the engine address that was tried ("unix:///var/run/docker.sock").
	Host string
	Err  error
}

func (e *EngineUnavailableError) Error() string {
	return fmt.Sprintf("no reachable Docker engine at %s: %v\n"+
		"Start the Docker daemon (systemctl start docker, or run dockerd), make sure this user may use its socket, "+
		"or point DOCKER_HOST at a running engine; or run without Docker: --runtime local", e.Host, e.Err)
}

func (e *EngineUnavailableError) Unwrap() error { return e.Err }

// newEngineClient reaches the engine the environment names (DOCKER_HOST, or the default socket);
// the first ping negotiates the API version down to the engine's (Debian's engine speaks 1.41).
func newEngineClient() (*engine, error) {
	cli, err := newEngine()
	if err != nil {
		return nil, &EngineUnavailableError{Host: "(from environment)", Err: err}
	}
	return cli, nil
}

// Ping checks, within timeout, that a Docker engine answers. Suites call it to skip their Docker
// specs with a reason; NewDocker calls it before anything else.
func Ping(ctx context.Context, timeout time.Duration) error {
	cli, err := newEngineClient()
	if err != nil {
		return err
	}
	defer cli.Close()
	return ping(ctx, cli, timeout)
}

func ping(ctx context.Context, cli *engine, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := cli.Ping(ctx); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("no answer within %s: %w", timeout, err)
		}
		return &EngineUnavailableError{Host: cli.DaemonHost(), Err: err}
	}
	return nil
}
