package bench

import (
	"strings"
	"testing"

	"github.com/widetp/widetp/check"
	"github.com/widetp/widetp/vllm"
)

// The series is a healthy deployment at every size: a benchmark of failing runs would time the
// failure path.
func TestWideTPIsHealthyAtEverySize(t *testing.T) {
	for _, n := range []int{2, 4, 8, 64} {
		s, err := WideTP(n)
		if err != nil {
			t.Fatalf("%d nodes: %v", n, err)
		}
		if len(s.Nodes) != n {
			t.Fatalf("%d nodes: got %d", n, len(s.Nodes))
		}
		procs, err := vllm.Predict(s.Deployment())
		if err != nil {
			t.Fatalf("%d nodes: %v", n, err)
		}
		if vs := check.Run(procs); len(vs) != 0 {
			t.Errorf("%d nodes: predicted %v", n, vs)
		}
		if len(procs) < 8*n {
			t.Errorf("%d nodes: %d processes, want a worker per GPU at least", n, len(procs))
		}
	}
	for _, n := range []int{0, 3} {
		if _, err := WideTP(n); err == nil || !strings.Contains(err.Error(), "even") {
			t.Errorf("WideTP(%d) = %v, want it refused", n, err)
		}
	}
}
