//go:build linux

package harness_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"

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
			rs, err := harness.Labelled(ctx, harness.RuntimeDocker, rt.RunID())
			if err != nil {
				return []string{"list what the engine holds: " + err.Error()}
			}
			var left []string
			for _, r := range rs {
				if !r.Cache() { // images and their volumes are a cache, kept on purpose
					left = append(left, r.String())
				}
			}
			return left
		}
	},
})
