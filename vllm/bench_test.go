package vllm

import (
	"fmt"
	"testing"
)

// bigDeployment is 8 replicas x TP 64 over 64 nodes of 8 GPUs: each replica a head and seven
// headless followers, internal LB, the Mooncake store connector on every process.
func bigDeployment(b testing.TB) Deployment {
	var nodes []Node
	for k := 0; k < 64; k++ {
		cmd := fmt.Sprintf("vllm serve org/M -tp 64 -dp 8 --nnodes 64 --node-rank %d --master-addr n0 --data-parallel-address n0 %s", k, store)
		if k > 0 {
			cmd += " --headless"
		}
		nodes = append(nodes, Node{Host: fmt.Sprintf("n%d", k), GPUs: 8, Commands: []string{cmd}})
	}
	return Deployment{Name: "big", Model: Model{Name: "org/M", MoE: true}, Profile: profileOf(b, "main"), Seed: "s", Nodes: nodes}
}

// BenchmarkPredict64Nodes: target under 10 ms per Predict (issue 2, "Benchmark").
func BenchmarkPredict64Nodes(b *testing.B) {
	d := bigDeployment(b)
	b.ReportAllocs()
	for b.Loop() {
		procs, err := Predict(d)
		if err != nil {
			b.Fatal(err)
		}
		if len(procs) != 1+63+8+512 { // API server, headless launchers, engine cores, workers
			b.Fatalf("%d processes", len(procs))
		}
	}
}

// TestBigDeploymentIsHealthy keeps the benchmark's deployment honest: it must predict a healthy run.
func TestBigDeploymentIsHealthy(t *testing.T) {
	procs, err := Predict(bigDeployment(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if p.Exit != nil {
			t.Fatalf("%s: %s", p.ID, exitText(p))
		}
	}
}
