//go:build linux

package harness_test

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"

	"github.com/moby/moby/client"

	"github.com/widetp/widetp/harness"
)

// The Docker runtime passes the same conformance specs as the local one; after Close nothing
// labelled with the run may remain, container or network.
var _ = runtimeConformance(runtimeUnderTest{
	name:   "Docker",
	labels: Label("docker"),
	skip:   requireEngine,
	newRuntime: func(ctx context.Context, opts ...harness.Option) (harness.Runtime, error) {
		return harness.NewDocker(ctx, opts...)
	},
	leftovers: func(_ context.Context, rt harness.Runtime) func(context.Context) []string {
		return func(ctx context.Context) []string {
			cli, err := client.New(client.FromEnv)
			if err != nil {
				return []string{"no engine client: " + err.Error()}
			}
			defer cli.Close()
			f := make(client.Filters).Add("label", harness.LabelRun+"="+rt.RunID())
			var left []string
			cs, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
			if err != nil {
				return []string{"list containers: " + err.Error()}
			}
			for _, c := range cs.Items {
				left = append(left, fmt.Sprintf("container %s (%s)", c.ID[:12], c.Labels[harness.LabelHost]))
			}
			ns, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
			if err != nil {
				return append(left, "list networks: "+err.Error())
			}
			for _, n := range ns.Items {
				left = append(left, "network "+n.Name)
			}
			return left
		}
	},
})
