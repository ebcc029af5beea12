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
	return dockerFloor(ctx, cfg, n)
}

func dockerFloor(ctx context.Context, cfg runtimes.Config, n int) (took time.Duration, err error) {
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
			if cerr := cli.NetworkRemove(cctx, netID); cerr != nil && !isNotFound(cerr) {
				err = errors.Join(err, cerr)
			}
		}
	}()
	start := time.Now()
	netName := "widetp-" + cfg.RunID
	netID, err = cli.NetworkCreate(ctx, netName, labels)
	if err != nil {
		return 0, fmt.Errorf("floor: create network: %w", err)
	}
	steps := make([]func() error, n)
	for i := range steps {
		steps[i] = func() error {
			id, err := cli.ContainerCreate(ctx, fmt.Sprintf("widetp-%s-h%d", cfg.RunID, i), containerCreate{
				Image: img.Ref, Cmd: []string{"ipcls", ipcRoot}, Labels: labels, Hostname: fmt.Sprintf("h%d", i),
				HostConfig:       hostConfig{Tmpfs: map[string]string{ipcRoot: "rw,mode=1777,size=" + cfg.TmpfsSize}},
				NetworkingConfig: networkingConfig{EndpointsConfig: map[string]endpointConfig{netName: {}}},
			})
			if err != nil {
				return fmt.Errorf("floor: create container %d: %w", i, err)
			}
			ids[i] = id
			if err := cli.ContainerStart(ctx, id); err != nil {
				return fmt.Errorf("floor: start container %d: %w", i, err)
			}
			code, err := cli.ContainerWait(ctx, id)
			if err != nil {
				return fmt.Errorf("floor: wait for container %d: %w", i, err)
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
	// The removals are part of the floor, as a run's teardown is part of a run.
	rm := make([]func() error, 0, n)
	for i, id := range ids {
		rm = append(rm, func() error {
			if err := removeContainer(ctx, cli, id); err != nil {
				return err
			}
			ids[i] = ""
			return nil
		})
	}
	if err := runtimes.RunConcurrently(rm); err != nil {
		return 0, err
	}
	if err := cli.NetworkRemove(ctx, netID); err != nil {
		return 0, fmt.Errorf("floor: remove network: %w", err)
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
