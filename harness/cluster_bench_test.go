//go:build linux

package harness_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/widetp/widetp/harness"
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/scenarios"
)

// benchBound bounds one iteration: a cached run of the 4-node scenario takes seconds, the
// 64-node one under a minute; beyond that the machine is wedged.
const benchBound = 5 * time.Minute

// pr48061 is vLLM#48061's deployment as reported: 2 replicas of TP 16 over 4 nodes.
func pr48061(b *testing.B) *scenarios.Scenario {
	s, err := scenarios.Load("../scenarios/vllm48061-external-lb-wide-tp-buggy.yaml")
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// runToVerdict runs s on a fresh runtime from its start to its report's verdict, then tears it
// down with the timer stopped.
func runToVerdict(b *testing.B, ctx context.Context, name string, s *scenarios.Scenario, sample func(harness.Runtime) func()) report.Report {
	rt, err := harness.NewRuntime(ctx, name, harness.WithoutSweep())
	if err != nil {
		b.Fatal(err)
	}
	var stop func()
	if sample != nil {
		stop = sample(rt)
	}
	c, err := harness.StartCluster(ctx, s, rt)
	if err == nil {
		err = c.Settle(ctx)
	}
	var rep report.Report
	if err == nil {
		rep, err = c.Report(ctx)
	}
	b.StopTimer()
	if stop != nil {
		stop()
	}
	if c != nil {
		err = errors.Join(err, c.Close(ctx))
	}
	if err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	return rep
}

// BenchmarkPR48061Docker runs the 4-node vLLM#48061 scenario on Docker from start (a new runtime,
// its network, the store and four node containers) to the verdict, and, on the side, a plain
// parallel `docker run -d` of as many scratch containers (the store and the four nodes) of the
// simnode image: the ratio is what the harness costs over the engine's own floor (goal: ≤ 3 s
// and ≤ 1.5×). Images are built before the timer starts.
func BenchmarkPR48061Docker(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), benchBound)
	defer cancel()
	if err := harness.Ping(ctx, 5*time.Second); err != nil {
		b.Skip("no reachable Docker engine: ", err)
	}
	imgs, err := harness.BuildImages(ctx, []harness.Program{harness.Widetp})
	if err != nil {
		b.Fatal(err)
	}
	owner, err := harness.CurrentOwner()
	if err != nil {
		b.Fatal(err)
	}
	s := pr48061(b)
	containers := len(s.Nodes) + 1
	var plain time.Duration
	b.ResetTimer()
	for b.Loop() {
		rep := runToVerdict(b, ctx, harness.RuntimeDocker, s, nil)
		if rep.Verdict != "fail" || len(rep.Processes) == 0 {
			b.Fatalf("verdict %q over %d processes", rep.Verdict, len(rep.Processes))
		}
		b.StopTimer()
		plain += plainDockerRun(b, imgs[0].Ref, owner, containers)
		b.StartTimer()
	}
	perRun := b.Elapsed() / time.Duration(b.N)
	perPlain := plain / time.Duration(b.N)
	b.ReportMetric(float64(perPlain.Milliseconds()), "plain-ms/op")
	b.ReportMetric(float64(perRun)/float64(perPlain), "ratio")
}

// plainDockerRun times `docker run -d` of n containers of image at once, then removes them.
func plainDockerRun(b *testing.B, image string, owner harness.Owner, n int) time.Duration {
	run := fmt.Sprintf("bench-plain-%d", os.Getpid())
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Labelled like the runtime's, so that a killed benchmark is swept too.
			out, err := exec.Command("docker", "run", "-d", "--label", harness.LabelRun+"="+run,
				"--label", harness.LabelOwner+"="+owner.String(), image).CombinedOutput()
			if err != nil {
				errs[i] = fmt.Errorf("docker run: %w: %s", err, out)
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	ids, err := exec.Command("docker", "ps", "-aq", "--filter", "label="+harness.LabelRun+"="+run).Output()
	if err == nil && len(strings.Fields(string(ids))) > 0 {
		err = exec.Command("docker", append([]string{"rm", "-f"}, strings.Fields(string(ids))...)...).Run()
	}
	for _, e := range append(errs, err) {
		if e != nil {
			b.Fatal(e)
		}
	}
	return took
}

// BenchmarkPR48061Local is the same scenario on the local runtime (goal: under 1 s).
func BenchmarkPR48061Local(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), benchBound)
	defer cancel()
	s := pr48061(b)
	runToVerdict(b, ctx, harness.RuntimeLocal, s, nil) // builds the binaries
	b.ResetTimer()
	for b.Loop() {
		if rep := runToVerdict(b, ctx, harness.RuntimeLocal, s, nil); rep.Verdict != "fail" {
			b.Fatalf("verdict %q", rep.Verdict)
		}
	}
}

// BenchmarkLocal64Nodes runs a 64-node deployment in the shape of vLLM#48061 (32 external-LB
// replicas of TP 16, each a head and a headless follower: 512 worker processes, 608 in all) on
// the local runtime to its verdict, and reports the peak memory of the run's processes: the sum
// of their proportional set sizes (shared pages counted once), sampled while it runs.
func BenchmarkLocal64Nodes(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), benchBound)
	defer cancel()
	s := wide64(b)
	var peak, procs int64
	sample := func(rt harness.Runtime) func() {
		dir := rt.(*harness.Local).Dir()
		done := make(chan struct{})
		finished := make(chan struct{})
		go func() {
			defer close(finished)
			// A sampling period, not a synchronisation: a tenth of a second resolves a start-up
			// of several seconds, and each sample reads ~600 smaps_rollup files.
			t := time.NewTicker(100 * time.Millisecond)
			defer t.Stop()
			for {
				pss, n := runPSS(dir)
				if pss > peak {
					peak = pss
				}
				if n > procs {
					procs = n
				}
				select {
				case <-done:
					return
				case <-t.C:
				}
			}
		}()
		return func() { close(done); <-finished }
	}
	runToVerdict(b, ctx, harness.RuntimeLocal, s, nil) // builds the binaries
	b.ResetTimer()
	for b.Loop() {
		rep := runToVerdict(b, ctx, harness.RuntimeLocal, s, sample)
		workers := 0
		for _, p := range rep.Processes {
			if p.Role == report.RoleWorker {
				workers++
			}
		}
		if rep.Verdict != "pass" || workers != 512 {
			var msgs []string
			for i, v := range rep.Violations {
				if i == 5 {
					break
				}
				msgs = append(msgs, v.Message)
			}
			b.Fatalf("verdict %q with %d workers, want a healthy run of 512; %d violations, first: %s", rep.Verdict, workers, len(rep.Violations), strings.Join(msgs, "\n"))
		}
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-PSS-MiB")
	b.ReportMetric(float64(procs), "processes")
}

// wide64 is the 64-node deployment (the one `widetp explain` is benchmarked on).
func wide64(b *testing.B) *scenarios.Scenario {
	var y strings.Builder
	fmt.Fprintf(&y, "name: wide-64\ndescription: 64 nodes\nprofile: main\nmodel: {name: deepseek-ai/DeepSeek-V3}\nnodes:\n")
	for k := 0; k < 64; k++ {
		headless := ""
		if k%2 == 1 {
			headless = " --headless"
		}
		fmt.Fprintf(&y, "  - host: n%d\n    command: >-\n      vllm serve deepseek-ai/DeepSeek-V3 -tp 16 -dp 32 --data-parallel-rank %d\n      --data-parallel-address n0 --data-parallel-rpc-port 13345 --nnodes 64 --node-rank %d\n      --master-addr n0%s\n      --kv-transfer-config '{\"kv_connector\":\"MooncakeStoreConnector\",\"kv_role\":\"kv_both\"}'\n", k, k/2, k, headless)
	}
	s, err := scenarios.Parse(filepath.Join(b.TempDir(), "wide-64.yaml"), []byte(y.String()))
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// runPSS sums the proportional set size of every process whose ipc root is inside the local run
// directory dir (the run's hosts and every process they started), and counts them.
func runPSS(dir string) (int64, int64) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, 0
	}
	var total, n int64
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil || !strings.Contains(string(env), harness.EnvIPCRoot+"="+dir+"/") {
			continue
		}
		rollup, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(rollup), "\n") {
			if v, ok := strings.CutPrefix(line, "Pss:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				total += kb << 10
				n++
				break
			}
		}
	}
	return total, n
}
