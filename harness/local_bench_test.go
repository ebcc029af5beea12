//go:build linux

package harness_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/widetp/widetp/harness"
)

// BenchmarkLocalStart16 starts 16 hosts of the test node at once on a fresh local run and closes
// it: the fixed cost a local scenario of 16 nodes pays before its processes do anything. The
// program is built before the timer starts (a build is once per content hash, not per run).
func BenchmarkLocalStart16(b *testing.B) { benchmarkLocalStart(b, 16) }

// BenchmarkLocalStart64 is the same for the 64 nodes of the largest deployment the README times.
func BenchmarkLocalStart64(b *testing.B) { benchmarkLocalStart(b, 64) }

func benchmarkLocalStart(b *testing.B, n int) {
	p, err := hostprobeProgram()
	if err != nil {
		b.Fatal(err)
	}
	specs := make([]harness.NodeSpec, n)
	for i := range specs {
		specs[i] = harness.NodeSpec{Host: fmt.Sprintf("node-%d", i), Program: p, Args: []string{"-bind", "tcp://*:5555", "-bind", "ipc:///tmp/lookup.ipc"}, Ready: readyLine}
	}
	// Bounds a wedged iteration; 64 cached hosts start in about a second.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run := func() {
		rt, err := harness.NewLocal(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := rt.StartNodes(ctx, specs...); err != nil {
			b.Fatal(err, rt.Close(ctx))
		}
		if err := rt.Close(ctx); err != nil {
			b.Fatal(err)
		}
	}
	run() // build, and warm the page cache
	b.ResetTimer()
	for b.Loop() {
		run()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/host")
}
