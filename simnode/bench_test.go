package simnode_test

import (
	"testing"
	"time"

	"github.com/widetp/widetp/internal/procfs"
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/simnode"
)

// benchNode is one host serving one engine of TP 8 (API server, engine core, 8 workers) with the
// Mooncake store connector: the node the start-up target is about.
func benchNode(s *store, h hostEnv) simnode.Config {
	cfg := s.config(h.name)
	cfg.GPUs = 8
	cfg.Model = simnode.Model{Name: "org/moe", MoE: true}
	cfg.Commands = []string{"vllm serve org/moe --tensor-parallel-size 8 " + kvStore}
	return cfg
}

func allReady(want int) func(map[string]report.Process) bool {
	return func(m map[string]report.Process) bool {
		n := 0
		for _, r := range m {
			if r.Ready {
				n++
			}
		}
		return n == want
	}
}

// BenchmarkNodeUp measures a node from `widetp node` starting to every process of one engine
// core with 8 workers (and its API server) having reported itself ready to the store. Target:
// under 300 ms (ms/up).
func BenchmarkNodeUp(b *testing.B) {
	s := newStore(b)
	h := hostEnv{name: "bench0", ip: "127.0.0.12", hosts: "bench0=127.0.0.12"}
	cfg := benchNode(s, h)
	var total time.Duration
	for i := 0; i < b.N; i++ {
		s.srv.Reset()
		start := time.Now()
		n := startNode(b, h, cfg)
		s.waitRecords(b, "10 processes ready", allReady(10))
		total += time.Since(start)
		b.StopTimer()
		if code := n.stop(); code != simnode.ExitOK {
			b.Fatalf("node exit %d", code)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/up")
}

// BenchmarkWorkerRSS reports the resident memory of a node's simulated workers once they serve
// (VmRSS of /proc/<pid>/status). Target: under 15 MiB each; the benchmark fails above it.
func BenchmarkWorkerRSS(b *testing.B) {
	const target = 15 << 10 // KiB
	s := newStore(b)
	h := hostEnv{name: "bench1", ip: "127.0.0.13", hosts: "bench1=127.0.0.13"}
	n := startNode(b, h, benchNode(s, h))
	defer n.stop()
	var maxKiB, sumKiB, sumPss, count int64
	for i := 0; i < b.N; i++ {
		recs := s.waitRecords(b, "10 processes ready", allReady(10))
		for _, r := range recs {
			if r.Role != report.RoleWorker {
				continue
			}
			kib, err := procfs.RSS(r.PID)
			if err != nil {
				b.Fatal(err)
			}
			pss, err := procfs.Pss(r.PID)
			if err != nil {
				b.Fatal(err)
			}
			maxKiB = max(maxKiB, kib)
			sumKiB += kib
			sumPss += pss
			count++
		}
	}
	b.ReportMetric(float64(maxKiB)/1024, "MiB-max-worker-RSS")
	b.ReportMetric(float64(sumKiB)/float64(count)/1024, "MiB-mean-worker-RSS")
	// Most of the RSS is the binary's and libzmq's file pages, shared by every process of the
	// host; the proportional share is what each worker really costs.
	b.ReportMetric(float64(sumPss)/float64(count)/1024, "MiB-mean-worker-PSS")
	if maxKiB > target {
		b.Errorf("a worker holds %d KiB resident, over the %d KiB target", maxKiB, target)
	}
}
