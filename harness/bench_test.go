package harness_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/widetp/widetp/harness"
)

// benchNodes is the 4 hosts of the PR #48061 scenario (two replicas, head and follower each).
const benchNodes = 4

// BenchmarkStart compares starting benchNodes nodes through the runtime with a plain parallel
// `docker run -d` of as many containers of the same image: the overhead of names, aliases, tmpfs,
// labels and testcontainers (the goal for a whole run is at most 1.5x). "runtime-ready" also waits
// for every node's ready line, which `docker run -d` does not.
func BenchmarkStart(b *testing.B) {
	ctx := context.Background()
	if err := harness.Ping(ctx, 5*time.Second); err != nil {
		b.Skip("no reachable Docker engine: ", err)
	}
	prog, err := hostprobeProgram()
	if err != nil {
		b.Fatal(err)
	}
	warm, err := harness.NewDocker(ctx)
	if err != nil {
		b.Fatal(err)
	}
	img, err := warm.Image(ctx, prog)
	if cerr := warm.Close(ctx); err != nil || cerr != nil {
		b.Fatal(err, cerr)
	}
	owner, err := harness.CurrentOwner()
	if err != nil {
		b.Fatal(err)
	}

	b.Run(fmt.Sprintf("plain-docker-run-%d", benchNodes), func(b *testing.B) {
		run := fmt.Sprintf("bench-plain-%d", os.Getpid())
		for b.Loop() {
			var wg sync.WaitGroup
			errs := make([]error, benchNodes)
			for i := range benchNodes {
				wg.Add(1)
				go func() {
					defer wg.Done()
					// Labelled like the runtime's, so that a killed benchmark is swept too.
					out, err := exec.Command("docker", "run", "-d", "--label", harness.LabelRun+"="+run,
						"--label", harness.LabelOwner+"="+owner.String(), img.Ref).CombinedOutput()
					if err != nil {
						errs[i] = fmt.Errorf("docker run: %w: %s", err, out)
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			ids, err := exec.Command("docker", "ps", "-aq", "--filter", "label="+harness.LabelRun+"="+run).Output()
			if err == nil && len(strings.Fields(string(ids))) > 0 {
				err = exec.Command("docker", append([]string{"rm", "-f"}, strings.Fields(string(ids))...)...).Run()
			}
			for _, e := range append(errs, err) {
				if e != nil {
					b.Fatal(e)
				}
			}
			b.StartTimer()
		}
	})

	for _, ready := range []bool{false, true} {
		name := fmt.Sprintf("runtime-%d", benchNodes)
		if ready {
			name = fmt.Sprintf("runtime-ready-%d", benchNodes)
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				d, err := harness.NewDocker(ctx, harness.WithoutSweep())
				if err != nil {
					b.Fatal(err)
				}
				if _, err := d.Image(ctx, prog); err != nil {
					b.Fatal(err)
				}
				specs := make([]harness.NodeSpec, benchNodes)
				for i := range specs {
					specs[i] = harness.NodeSpec{Host: fmt.Sprintf("node-%d", i), Program: prog}
					if ready {
						specs[i].Ready = readyLine
					}
				}
				b.StartTimer()
				err = d.StartNodes(ctx, specs...)
				b.StopTimer()
				if cerr := d.Close(ctx); err != nil || cerr != nil {
					b.Fatal(err, cerr)
				}
				b.StartTimer()
			}
		})
	}
}
