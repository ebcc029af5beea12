package simnode_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/simnode"
)

// externalLBWideTP is vLLM#48061 as reported (scenarios/pr48061-external-lb-wide-tp-*.yaml),
// scaled to 2-GPU hosts: 2 replicas of TP 4, each over a head and a --headless follower, external
// load balancing (every node of replica N passes --data-parallel-rank N).
func externalLBWideTP() []host {
	cmd := func(rank, nodeRank int, extra string) string {
		return fmt.Sprintf("vllm serve org/moe --tensor-parallel-size 4 --enable-expert-parallel "+
			"--data-parallel-size 2 --data-parallel-rank %d --data-parallel-address r0-head --data-parallel-rpc-port 13345 "+
			"--nnodes 4 --node-rank %d --master-addr r%d-head --master-port 29500 %s %s", rank, nodeRank, rank, extra, kvStore)
	}
	return []host{
		{name: "r0-head", ip: "127.0.0.20", commands: []string{cmd(0, 0, "--port 8000")}},
		{name: "r0-follower", ip: "127.0.0.21", commands: []string{cmd(0, 1, "--headless")}},
		{name: "r1-head", ip: "127.0.0.22", commands: []string{cmd(1, 2, "--port 8000")}},
		{name: "r1-follower", ip: "127.0.0.23", commands: []string{cmd(1, 3, "--headless")}},
	}
}

// TestExternalLBWideTP runs the four hosts of vLLM#48061's deployment and holds the run to the
// model's paper run of the same commands: whatever the model says these processes do — meet,
// time out, crash, bind, answer — the real processes do too, and the checks find the same kinds.
// Independently of how the replicas' workers meet, replica 1's head processes compute their
// Mooncake DP index alone: 1 under main, the legacy helper's data_parallel_rank_local 0 before
// the fix (vllm/distributed/kv_transfer/kv_connector/v1/mooncake/).
func TestExternalLBWideTP(t *testing.T) {
	for _, profile := range []string{"main", "pre-48061"} {
		t.Run(profile, func(t *testing.T) {
			// Short bounds: if the model has the replicas' workers wait for each other in vain,
			// the run shows it in seconds instead of torch's ten minutes. Five, not two: on a
			// loaded machine (make test runs every package at once) a barrier that does complete
			// must not time out first.
			bound := 5 * time.Second
			o := deployment{profile: profile, model: moe, gpus: 2, hosts: externalLBWideTP(), timeouts: simnode.Timeouts{
				Rendezvous: simnode.Duration(bound), Lookup: simnode.Duration(time.Second), Store: simnode.Duration(5 * time.Second)}}.run(t)
			o.agreesWithPrediction(t)
			want := 1
			if profile == "pre-48061" {
				want = 0
			}
			seen := 0
			for _, r := range records(o.observed) {
				if r.Host != "r1-head" || r.Role == report.RoleAPIServer {
					continue
				}
				seen++
				if r.DataParallelIndex != 1 || r.MooncakeDPIndex == nil || *r.MooncakeDPIndex != want {
					t.Errorf("%s: DP index %d, Mooncake DP index %v; want 1 and %d", r.ID, r.DataParallelIndex, deref(r.MooncakeDPIndex), want)
				}
			}
			if seen != 3 {
				t.Errorf("%d engine core and worker records on r1-head, want 3", seen)
			}
		})
	}
}
