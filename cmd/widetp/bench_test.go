package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/widetp/widetp/internal/testbin"
)

// wideScenario writes a 64-node deployment in the shape of vLLM#48061: 32 external-LB replicas of
// TP 16, each over a head and a headless follower of 8 GPUs.
func wideScenario(tb testing.TB, profile string) string {
	tb.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "name: wide-64\ndescription: 64 nodes\nprofile: %s\nmodel: {name: deepseek-ai/DeepSeek-V3}\nnodes:\n", profile)
	for k := 0; k < 64; k++ {
		headless := ""
		if k%2 == 1 {
			headless = " --headless"
		}
		fmt.Fprintf(&b, "  - host: n%d\n    command: >-\n      vllm serve deepseek-ai/DeepSeek-V3 -tp 16 -dp 32 --data-parallel-rank %d\n      --data-parallel-address n0 --data-parallel-rpc-port 13345 --nnodes 64 --node-rank %d\n      --master-addr n0%s\n      --kv-transfer-config '{\"kv_connector\":\"MooncakeStoreConnector\",\"kv_role\":\"kv_both\"}'\n", k, k/2, k, headless)
	}
	path := filepath.Join(tb.TempDir(), "wide.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

// BenchmarkExplain64Nodes: the target is under 10 ms an explain (load, predict, check,
// render) of a 64-node deployment.
func BenchmarkExplain64Nodes(b *testing.B) {
	for _, format := range []string{"table", "json"} {
		b.Run(format, func(b *testing.B) {
			path := wideScenario(b, "main")
			args := []string{"explain", path}
			if format == "json" {
				args = append(args, "--json")
			}
			if code := run(args, io.Discard, os.Stderr); code != exitMatch {
				b.Fatalf("the 64-node scenario does not explain healthy: exit %d", code)
			}
			b.ReportAllocs()
			for b.Loop() {
				run(args, io.Discard, io.Discard)
			}
		})
	}
}

// BenchmarkProcessStart: every simulated process is an exec of the widetp binary, so what the
// runtime and every linked package do before main (package init, the dynamic loader) is paid by
// each of them — 43 at vLLM#48061's 4 hosts, about 670 at 64. It execs `widetp help` (no libzmq,
// no work) and reports the CPU time of a start (cpu-ms/op) besides the wall time.
func BenchmarkProcessStart(b *testing.B) {
	bin, err := testbin.Widetp()
	if err != nil {
		b.Fatal(err)
	}
	var cpu time.Duration
	for b.Loop() {
		cmd := exec.Command(bin, "help")
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		if err := cmd.Run(); err != nil {
			b.Fatalf("%s help: %v", bin, err)
		}
		cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
}
