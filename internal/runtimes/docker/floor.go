package docker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/widetp/widetp/internal/runtimes"
)

// Floor measures what starting n hosts costs Docker with no harness around it — the bar a run is
// compared with (widetp bench): a new network and n FROM scratch containers of the widetp image
// (each on the network with a tmpfs /tmp, as a host), created and started in parallel, waited for
// until their program (`widetp ipcls /tmp`, which lists and exits) ends, then removed with the
// network. Everything it makes carries the run and owner labels, so the sweep removes it if the
// measurement dies half-way. The image is built (or found) first, untimed.
func Floor(ctx context.Context, n int, opts ...runtimes.Option) (time.Duration, error) {
	cfg, err := runtimes.FloorConfig(opts...)
	if err != nil {
		return 0, err
	}
	return dockerFloor(ctx, cfg, n, false, nil)
}

// Held measures what keeping n hosts up until the last one is costs Docker: the floor's network
// and containers, but each runs `widetp idle`, which waits until it is stopped, and once every
// container has started all of them are removed (killed) in parallel, then the network. A run's
// hosts live until its verdict and its teardown kills them: the engine then releases every
// container's network endpoint at the end, where the floor's (whose program exits at once)
// are released while the others start. The held floor is the engine's own share of any run of
// n hosts; widetp bench reports it beside the floor.
func Held(ctx context.Context, n int, opts ...runtimes.Option) (time.Duration, error) {
	cfg, err := runtimes.FloorConfig(opts...)
	if err != nil {
		return 0, err
	}
	return dockerFloor(ctx, cfg, n, true, nil)
}

// dockerFloor measures the floor, or with hold the held floor; allUp, when set, is called once
// every container has started (and, with hold, before any is removed).
func dockerFloor(ctx context.Context, cfg runtimes.Config, n int, hold bool, allUp func(runID string)) (took time.Duration, err error) {
	cli, err := newEngineClient()
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	if err := ping(ctx, cli, cfg.PingTimeout); err != nil {
		return 0, err
	}
	owner, err := runtimes.CurrentOwner()
	if err != nil {
		return 0, err
	}
	labels := map[string]string{runtimes.LabelRun: cfg.RunID, runtimes.LabelOwner: owner.String()}
	b := newImageBuilder(cli, cfg, labels)
	img, err := b.image(ctx, runtimes.Widetp)
	if err != nil {
		return 0, err
	}
	// Whatever happens, nothing stays: the removals below are also the cleanup.
	var ids []string
	ids = make([]string, n)
	var netID string
	netName := "widetp-" + cfg.RunID
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.OpTimeout)
		defer cancel()
		var steps []func() error
		for _, id := range ids {
			if id != "" {
				steps = append(steps, func() error { return removeContainer(cctx, cli, id) })
			}
		}
		if cerr := runtimes.RunConcurrently(steps); cerr != nil {
			err = errors.Join(err, cerr)
		}
		if netID != "" {
			if cerr := removeNetwork(cctx, cli, netID, netName); cerr != nil {
				err = errors.Join(err, fmt.Errorf("floor: %w", cerr))
			}
		}
	}()
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, cfg.OpTimeout)
	netID, err = cli.NetworkCreate(cctx, netName, labels)
	err = within(cctx, err, "op timeout", cfg.OpTimeout)
	cancel()
	if err != nil {
		return 0, fmt.Errorf("floor: create network: %w", err)
	}
	cmd := []string{"ipcls", ipcRoot}
	if hold {
		cmd = []string{"idle"}
	}
	// The held hosts' waits end with the measurement, whatever ends it.
	waits, endWaits := context.WithCancel(ctx)
	defer endWaits()
	held := make([]chan error, n)
	for i := range held {
		held[i] = make(chan error, 1)
	}
	steps := make([]func() error, n)
	// The create and start calls wait behind the rest of the round, as a run's do: they have a
	// run's bound for a round of n.
	callBound := roundBound(cfg.StartTimeout, n)
	callName := fmt.Sprintf("start timeout and a round of %d's queue", n)
	for i := range steps {
		steps[i] = func() error {
			// Each step of a host's start — create, start, (unheld) wait — is bounded, as each step
			// of a run's node start is: an engine that stops answering fails the measurement
			// instead of hanging it.
			sctx, cancel := context.WithTimeout(ctx, callBound)
			defer cancel()
			id, err := cli.ContainerCreate(sctx, fmt.Sprintf("widetp-%s-h%d", cfg.RunID, i), containerCreate{
				Image: img.Ref, Cmd: cmd, Labels: labels, Hostname: fmt.Sprintf("h%d", i),
				HostConfig:       hostConfig{Tmpfs: map[string]string{ipcRoot: "rw,mode=1777,size=" + cfg.TmpfsSize}, Mounts: volumeMounts(img, labels)},
				NetworkingConfig: networkingConfig{EndpointsConfig: map[string]endpointConfig{netName: {}}},
			})
			if err != nil {
				return fmt.Errorf("floor: create container %d: %w", i, within(sctx, err, callName, callBound))
			}
			ids[i] = id
			sctx, cancel = context.WithTimeout(ctx, callBound)
			defer cancel()
			if err := cli.ContainerStart(sctx, id); err != nil {
				return fmt.Errorf("floor: start container %d: %w", i, within(sctx, err, callName, callBound))
			}
			if hold {
				// Followed from its start, as the floor waits for its hosts: a host whose program
				// ends before the removals kill it (exit 137) was not held.
				go func() {
					code, err := cli.ContainerWait(waits, id)
					if err == nil && code != 137 {
						err = fmt.Errorf("floor: held container %d ended on its own (exit %d) before it was stopped", i, code)
					}
					held[i] <- err
				}()
				return nil
			}
			sctx, cancel = context.WithTimeout(ctx, cfg.StartTimeout)
			defer cancel()
			code, err := cli.ContainerWait(sctx, id)
			if err != nil {
				return fmt.Errorf("floor: wait for container %d: %w", i, within(sctx, err, "start timeout", cfg.StartTimeout))
			}
			if code != 0 {
				return fmt.Errorf("floor: container %d exited %d", i, code)
			}
			return nil
		}
	}
	if err := runtimes.RunConcurrently(steps); err != nil {
		return 0, err
	}
	if allUp != nil {
		allUp(cfg.RunID)
	}
	// The removals are part of the floor, as a run's teardown is part of a run.
	rm := make([]func() error, 0, n)
	for i, id := range ids {
		rm = append(rm, func() error {
			rctx, cancel := context.WithTimeout(ctx, cfg.OpTimeout)
			defer cancel()
			if err := removeContainer(rctx, cli, id); err != nil {
				return within(rctx, err, "op timeout", cfg.OpTimeout)
			}
			ids[i] = ""
			return nil
		})
	}
	if err := runtimes.RunConcurrently(rm); err != nil {
		return 0, err
	}
	if hold {
		var errs []error
		bound := time.NewTimer(cfg.OpTimeout)
		defer bound.Stop()
		for i := range held {
			select {
			case err := <-held[i]:
				errs = append(errs, err)
			case <-bound.C:
				return 0, fmt.Errorf("floor: the engine did not report the end of held container %d within %v (op timeout) of its removal", i, cfg.OpTimeout)
			}
		}
		if err := errors.Join(errs...); err != nil {
			return 0, err
		}
	}
	nctx, cancel := context.WithTimeout(ctx, cfg.OpTimeout)
	defer cancel()
	if err := removeNetwork(nctx, cli, netID, netName); err != nil {
		if errors.Is(err, errStaleEndpoints) {
			// The measurement is whole (the removal was asked for and answered); the network stays
			// for a daemon restart, which the error says.
			netID = "" // asking again gets the same answer
			return time.Since(start), fmt.Errorf("floor: %w", err)
		}
		return 0, fmt.Errorf("floor: %w", err)
	}
	netID = ""
	return time.Since(start), nil
}

func removeContainer(ctx context.Context, cli *engine, id string) error {
	err := cli.ContainerRemove(ctx, id)
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("remove container %.12s: %w", id, err)
	}
	return nil
}

// within says, of an engine call that failed because its bound (name, d) ran out, that the engine
// did not answer in time; any other error is returned as it is.
func within(ctx context.Context, err error, name string, d time.Duration) error {
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("the engine did not answer within %v (%s): %w", d, name, err)
	}
	return err
}
