//go:build linux

package harness_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/widetp/widetp/fakestore/client"
	"github.com/widetp/widetp/harness"
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/simnode"
)

// simNode is a host of the real node program with its config in the environment.
func simNode(host string, cfg simnode.Config) harness.NodeSpec {
	b, err := json.Marshal(cfg)
	Expect(err).NotTo(HaveOccurred())
	return harness.NodeSpec{
		Host: host, Program: harness.Widetp, Args: []string{"node"},
		Env:   map[string]string{simnode.EnvConfig: string(b)},
		Ready: regexp.MustCompile("^" + regexp.QuoteMeta(simnode.ReadyLine)),
	}
}

var _ = Describe("the local runtime with the real node program", Label("local"), func() {
	// One replica of PR #48061's shape: TP 4 over two 2-GPU hosts, a head running `vllm serve` and
	// a `--headless` follower (vLLM's multi-node docs: --nnodes/--node-rank/--master-addr). The
	// follower's workers reach the head's rendezvous by its host name, through WIDETP_HOSTS, at
	// the head's own loopback address: a real TCP rendezvous between two "hosts".
	It("runs a wide-TP replica over two hosts whose workers meet at the head's rendezvous and report to the store", func(ctx SpecContext) {
		l := newLocal(ctx)
		store, err := l.StartStore(ctx, fakeStore())
		Expect(err).NotTo(HaveOccurred())
		urls := simnode.StoreURLs{
			Metadata: "http://" + store.Addrs[metadataPort],
			Master:   "http://" + store.Addrs[masterPort],
			Admin:    "http://" + store.Addrs[adminPort],
		}
		const kvStore = `--kv-transfer-config '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both"}'`
		serve := func(rank int, extra string) string {
			return fmt.Sprintf("vllm serve org/moe --tensor-parallel-size 4 --enable-expert-parallel --nnodes 2 --node-rank %d --master-addr r0-head --master-port 29500 %s %s", rank, extra, kvStore)
		}
		cfg := func(command string) simnode.Config {
			return simnode.Config{GPUs: 2, Commands: []string{command}, Model: simnode.Model{Name: "org/moe", MoE: true},
				Profile: json.RawMessage(`"main"`), Store: urls}
		}
		Expect(l.StartNodes(ctx, simNode("r0-head", cfg(serve(0, ""))), simNode("r0-follower", cfg(serve(1, "--headless"))))).To(Succeed())

		c, err := client.New(client.WithAdminURL(urls.Admin))
		Expect(err).NotTo(HaveOccurred())
		readyWorkers := func(ctx context.Context) ([]report.Process, error) {
			recs, err := c.Reports(ctx)
			var ws []report.Process
			for _, r := range recs {
				if r.Role == report.RoleWorker && r.Ready {
					ws = append(ws, r)
				}
			}
			return ws, err
		}
		// The store's report log fills as workers come up; 60 s is simnode's own rendezvous bound.
		Eventually(readyWorkers).WithContext(ctx).WithTimeout(60 * time.Second).Should(HaveLen(4))
		workers, err := readyWorkers(ctx)
		Expect(err).NotTo(HaveOccurred())
		hosts := map[string]int{}
		for _, w := range workers {
			hosts[w.Host]++
			Expect(w.Rendezvous).To(HaveLen(1), "worker %s", w.ID)
			Expect(w.Rendezvous[0].Address).To(Equal("r0-head:29500"), "worker %s", w.ID)
			Expect(w.Rendezvous[0].Error).To(BeEmpty(), "worker %s", w.ID)
			Expect(w.DataParallelIndex).To(Equal(workers[0].DataParallelIndex), "every TP rank of the replica agrees on its DP index")
		}
		Expect(hosts).To(Equal(map[string]int{"r0-head": 2, "r0-follower": 2}))

		for _, h := range []string{"r0-follower", "r0-head"} {
			Expect(l.Stop(ctx, h)).To(Succeed())
			Expect(stateOf(ctx, l, h).ExitCode).To(Equal(simnode.ExitOK), "node %s after SIGTERM; its logs:\n%s", h, logsOfRT(ctx, l, h))
		}
	}, SpecTimeout(3*time.Minute))
})
