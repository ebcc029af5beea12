package docker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/widetp/widetp/internal/runtimes"
)

// runFilter selects what any widetp run made (value "") or what one run made.
func runFilter(runID string) filters {
	if runID == "" {
		return filters{"label": {runtimes.LabelRun: true}}
	}
	return filters{"label": {runtimes.LabelRun + "=" + runID: true}}
}

// Swept counts what a sweep or a clean removed.
type Swept struct {
	Containers, Networks, Images, Volumes int
	// Stuck names the leftover networks the engine would not remove although no container is
	// attached: an endpoint the engine kept after a container create was cut short (its owner
	// SIGKILLed mid-start). Only restarting the Docker daemon releases it.
	Stuck []string
}

// sweep removes the containers and networks of runs whose owner process is gone (a run killed
// before its Close). Runs whose owner lives — parallel suites, another terminal — are left alone.
// Images and their volumes are kept: they are a cache keyed by content, not a run's state.
func sweep(ctx context.Context, api *engine, alive func(runtimes.Owner) bool) (Swept, error) {
	return removeLabelled(ctx, api, func(labels map[string]string) bool { return runtimes.Orphaned(labels, alive) }, false)
}

// Clean removes everything labelled io.widetp.run, whoever made it, images and their volumes
// included (`make clean`).
// Do not call it while runs are in flight: it removes their nodes too.
func Clean(ctx context.Context, opts ...runtimes.Option) (Swept, error) {
	cfg := runtimes.NewConfig(opts...)
	cli, err := newEngineClient()
	if err != nil {
		return Swept{}, err
	}
	defer cli.Close()
	if err := ping(ctx, cli, cfg.PingTimeout); err != nil {
		return Swept{}, err
	}
	s, err := removeLabelled(ctx, cli, func(map[string]string) bool { return true }, true)
	if len(s.Stuck) > 0 {
		err = errors.Join(err, fmt.Errorf("the engine will not remove network(s) %s: each holds an endpoint of a container that no longer exists (moby/moby#42119); restarting the Docker daemon releases them", strings.Join(s.Stuck, ", ")))
	}
	return s, err
}

func removeLabelled(ctx context.Context, api *engine, remove func(map[string]string) bool, images bool) (Swept, error) {
	var s Swept
	var errs []error
	cs, err := api.ContainerList(ctx, runFilter(""))
	if err != nil {
		return s, fmt.Errorf("list labelled containers: %w", err)
	}
	for _, c := range cs {
		if !remove(c.Labels) {
			continue
		}
		// Force: a leftover may still run (its owner was SIGKILLed, not its containers).
		if err := api.ContainerRemove(ctx, c.ID); err != nil && !removedElsewhere(err) {
			errs = append(errs, fmt.Errorf("remove leftover container %s (run %s): %w", c.ID[:12], c.Labels[runtimes.LabelRun], err))
			continue
		}
		s.Containers++
	}
	ns, err := api.NetworkList(ctx, runFilter(""))
	if err != nil {
		return s, errors.Join(append(errs, fmt.Errorf("list labelled networks: %w", err))...)
	}
	for _, n := range ns {
		if !remove(n.Labels) {
			continue
		}
		if err := api.NetworkRemove(ctx, n.ID); err != nil {
			if staleEndpoints(ctx, api, n.ID, err) {
				s.Stuck = append(s.Stuck, fmt.Sprintf("%s (run %s)", n.Name, n.Labels[runtimes.LabelRun]))
				continue
			}
			if !removedElsewhere(err) {
				errs = append(errs, fmt.Errorf("remove leftover network %s (run %s): %w", n.Name, n.Labels[runtimes.LabelRun], err))
				continue
			}
		}
		s.Networks++
	}
	if images {
		// The volumes go with the images they copy (imageBuilder.volumes), after the containers
		// that mount them.
		vs, err := api.VolumeList(ctx, runFilter(""))
		if err != nil {
			return s, errors.Join(append(errs, fmt.Errorf("list labelled volumes: %w", err))...)
		}
		for _, v := range vs {
			if err := api.VolumeRemove(ctx, v.Name); err != nil && !isNotFound(err) {
				errs = append(errs, fmt.Errorf("remove volume %s: %w", v.Name, err))
				continue
			}
			s.Volumes++
		}
		is, err := api.ImageList(ctx, runFilter(""))
		if err != nil {
			return s, errors.Join(append(errs, fmt.Errorf("list labelled images: %w", err))...)
		}
		for _, im := range is {
			if err := api.ImageRemove(ctx, im.ID); err != nil && !isNotFound(err) {
				errs = append(errs, fmt.Errorf("remove image %s: %w", im.ID, err))
				continue
			}
			s.Images++
		}
	}
	return s, errors.Join(errs...)
}

// removedElsewhere tells a leftover that another process is removing at the same moment (two runs
// of `ginkgo -p` starting together both sweep): already gone, removal in progress (a conflict), or
// a network whose containers that other sweep has not finished removing. That sweep completes it.
func removedElsewhere(err error) bool {
	return isNotFound(err) || isConflict(err) || strings.Contains(err.Error(), "active endpoints")
}

// staleEndpoints tells a network the engine refuses to remove for "active endpoints" while no
// container is attached to it (another sweep removing its containers would show them).
func staleEndpoints(ctx context.Context, api *engine, id string, err error) bool {
	if !strings.Contains(err.Error(), "active endpoints") {
		return false
	}
	ni, ierr := api.NetworkInspect(ctx, id)
	return ierr == nil && len(ni.Containers) == 0
}

// errStaleEndpoints explains a network the engine will not remove although no container is
// attached to it any more (runtimes.ErrStaleNetwork).
var errStaleEndpoints = runtimes.ErrStaleNetwork

// removeNetwork removes a run's network once its containers are gone; a network that is gone
// already is not an error, and one the engine keeps for a stale endpoint says so
// (errStaleEndpoints) instead of only "has active endpoints".
func removeNetwork(ctx context.Context, api *engine, id, name string) error {
	err := api.NetworkRemove(ctx, id)
	switch {
	case err == nil || isNotFound(err):
		return nil
	case staleEndpoints(ctx, api, id, err):
		return fmt.Errorf("remove network %s: %w; %w", name, err, errStaleEndpoints)
	default:
		return fmt.Errorf("remove network %s: %w", name, err)
	}
}

// RemoveNetwork removes the network called name (a run's, of the engine's Docker network list): a
// network that is gone already is not an error, and one the engine keeps for a stale endpoint
// (moby/moby#42119) is an error that wraps runtimes.ErrStaleNetwork.
func RemoveNetwork(ctx context.Context, name string) error {
	cli, err := newEngineClient()
	if err != nil {
		return err
	}
	defer cli.Close()
	return removeNetwork(ctx, cli, name, name)
}

// Labelled lists the containers, networks, images and volumes on the engine labelled with run runID
// (any run when runID is ""): what the leak checks look for (images and their volumes
// stay: they are a cache, Resource.Cache).
func Labelled(ctx context.Context, runID string) ([]runtimes.Resource, error) {
	cli, err := newEngineClient()
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	var out []runtimes.Resource
	cs, err := cli.ContainerList(ctx, runFilter(runID))
	if err != nil {
		return nil, fmt.Errorf("list labelled containers: %w", err)
	}
	for _, c := range cs {
		out = append(out, runtimes.Resource{Kind: "container", Name: strings.TrimPrefix(strings.Join(c.Names, ","), "/"), Labels: c.Labels})
	}
	ns, err := cli.NetworkList(ctx, runFilter(runID))
	if err != nil {
		return nil, fmt.Errorf("list labelled networks: %w", err)
	}
	for _, n := range ns {
		out = append(out, runtimes.Resource{Kind: "network", Name: n.Name, Labels: n.Labels})
	}
	is, err := cli.ImageList(ctx, runFilter(runID))
	if err != nil {
		return nil, fmt.Errorf("list labelled images: %w", err)
	}
	for _, im := range is {
		name := im.ID
		if len(im.RepoTags) > 0 {
			name = im.RepoTags[0]
		}
		out = append(out, runtimes.Resource{Kind: "image", Name: name, Labels: im.Labels})
	}
	vs, err := cli.VolumeList(ctx, runFilter(runID))
	if err != nil {
		return nil, fmt.Errorf("list labelled volumes: %w", err)
	}
	for _, v := range vs {
		out = append(out, runtimes.Resource{Kind: "volume", Name: v.Name, Labels: v.Labels})
	}
	return out, nil
}
