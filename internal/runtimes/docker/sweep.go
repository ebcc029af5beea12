package docker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/widetp/widetp/internal/runtimes"
)

// runFilter selects what any widetp run made (value "") or what one run made.
func runFilter(runID string) client.Filters {
	if runID == "" {
		return make(client.Filters).Add("label", runtimes.LabelRun)
	}
	return make(client.Filters).Add("label", runtimes.LabelRun+"="+runID)
}

// Swept counts what a sweep or a clean removed.
type Swept struct {
	Containers, Networks, Images int
	// Stuck names the leftover networks the engine would not remove although no container is
	// attached: an endpoint the engine kept after a container create was cut short (its owner
	// SIGKILLed mid-start). Only restarting the Docker daemon releases it.
	Stuck []string
}

// sweep removes the containers and networks of runs whose owner process is gone (a run killed
// before its Close). Runs whose owner lives — parallel suites, another terminal — are left alone.
// Images are kept: they are a cache keyed by content, not a run's state.
func sweep(ctx context.Context, api client.APIClient, alive func(runtimes.Owner) bool) (Swept, error) {
	return removeLabelled(ctx, api, func(labels map[string]string) bool { return runtimes.Orphaned(labels, alive) }, false)
}

// Clean removes everything labelled io.widetp.run, whoever made it, images included (`make clean`).
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
		err = errors.Join(err, fmt.Errorf("the engine will not remove network(s) %s: each holds an endpoint of a container that no longer exists; restarting the Docker daemon releases them", strings.Join(s.Stuck, ", ")))
	}
	return s, err
}

func removeLabelled(ctx context.Context, api client.APIClient, remove func(map[string]string) bool, images bool) (Swept, error) {
	var s Swept
	var errs []error
	cs, err := api.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: runFilter("")})
	if err != nil {
		return s, fmt.Errorf("list labelled containers: %w", err)
	}
	for _, c := range cs.Items {
		if !remove(c.Labels) {
			continue
		}
		// Force: a leftover may still run (its owner was SIGKILLed, not its containers).
		if _, err := api.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !removedElsewhere(err) {
			errs = append(errs, fmt.Errorf("remove leftover container %s (run %s): %w", c.ID[:12], c.Labels[runtimes.LabelRun], err))
			continue
		}
		s.Containers++
	}
	ns, err := api.NetworkList(ctx, client.NetworkListOptions{Filters: runFilter("")})
	if err != nil {
		return s, errors.Join(append(errs, fmt.Errorf("list labelled networks: %w", err))...)
	}
	for _, n := range ns.Items {
		if !remove(n.Labels) {
			continue
		}
		if _, err := api.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err != nil {
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
		is, err := api.ImageList(ctx, client.ImageListOptions{All: true, Filters: runFilter("")})
		if err != nil {
			return s, errors.Join(append(errs, fmt.Errorf("list labelled images: %w", err))...)
		}
		for _, im := range is.Items {
			if _, err := api.ImageRemove(ctx, im.ID, client.ImageRemoveOptions{Force: true, PruneChildren: true}); err != nil && !cerrdefs.IsNotFound(err) {
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
	return cerrdefs.IsNotFound(err) || cerrdefs.IsConflict(err) || strings.Contains(err.Error(), "active endpoints")
}

// staleEndpoints tells a network the engine refuses to remove for "active endpoints" while no
// container is attached to it (another sweep removing its containers would show them).
func staleEndpoints(ctx context.Context, api client.APIClient, id string, err error) bool {
	if !strings.Contains(err.Error(), "active endpoints") {
		return false
	}
	ni, ierr := api.NetworkInspect(ctx, id, client.NetworkInspectOptions{})
	return ierr == nil && len(ni.Network.Containers) == 0
}

// Labelled lists the containers, networks and images on the engine labelled with run runID (any
// run when runID is ""): what the leak checks look for (images stay: they are a cache).
func Labelled(ctx context.Context, runID string) ([]runtimes.Resource, error) {
	cli, err := newEngineClient()
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	var out []runtimes.Resource
	cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: runFilter(runID)})
	if err != nil {
		return nil, fmt.Errorf("list labelled containers: %w", err)
	}
	for _, c := range cs.Items {
		out = append(out, runtimes.Resource{Kind: "container", Name: strings.TrimPrefix(strings.Join(c.Names, ","), "/"), Labels: c.Labels})
	}
	ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: runFilter(runID)})
	if err != nil {
		return nil, fmt.Errorf("list labelled networks: %w", err)
	}
	for _, n := range ns.Items {
		out = append(out, runtimes.Resource{Kind: "network", Name: n.Name, Labels: n.Labels})
	}
	is, err := cli.ImageList(ctx, client.ImageListOptions{All: true, Filters: runFilter(runID)})
	if err != nil {
		return nil, fmt.Errorf("list labelled images: %w", err)
	}
	for _, im := range is.Items {
		name := im.ID
		if len(im.RepoTags) > 0 {
			name = im.RepoTags[0]
		}
		out = append(out, runtimes.Resource{Kind: "image", Name: name, Labels: im.Labels})
	}
	return out, nil
}
