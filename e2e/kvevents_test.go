package e2e_test

import (
	"fmt"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/widetp/widetp/harness/matchers"
	"github.com/widetp/widetp/report"
)

// KV cache event publishers: every engine core's scheduler binds a ZMQ PUB socket at the
// configured endpoint offset by its data_parallel_index (vllm/distributed/kv_events.py
// ZmqEventPublisher, created in vllm/v1/core/sched/scheduler.py), so the engines of one host
// publish apart only when their global DP indexes differ. The runs bind the sockets for real.
var _ = Describe("KV event publishers", Label("kv-events"), func() {
	kvDir := filepath.Join(moduleRoot, "e2e", "testdata", "kvevents")

	It("of a prefill and a decode instance on one host collide on tcp://*:5557: the later engine core dies of EADDRINUSE", Label(labelPlannerModel), func(ctx SpecContext) {
		p := planFile(ctx, modelPlanner, filepath.Join(kvDir, "pd-one-host.yaml"), "main")
		r := p.run(ctx, primaryRuntime())
		Expect(r.report).To(matchers.HaveViolationKinds(report.AddressCollision, report.ProcessCrashed))
		expectAsPlanned(p, r.report)
		var collisions []report.Violation
		for _, v := range r.report.Violations {
			if v.Kind == report.AddressCollision {
				collisions = append(collisions, v)
			}
		}
		Expect(collisions).To(HaveLen(1))
		Expect(collisions[0].Processes).To(Equal([]string{"pd-host/0/engine-core-0", "pd-host/1/engine-core-0"}))
		Expect(collisions[0].Message).To(ContainSubstring("(kv-events, key publisher dp0) could not bind tcp://*:5557"))
		procs := byID(r.report)
		Expect(procs["pd-host/1/engine-core-0"].Exit).NotTo(BeNil())
		Expect(procs["pd-host/1/engine-core-0"].Exit.Error).To(Equal("zmq.error.ZMQError: Address already in use (addr='tcp://*:5557')"))
		Expect(procs["pd-host/0/engine-core-0"].Exit).To(BeNil(), "the prefill instance, which bound first, lives on")
	}, SpecTimeout(runBound))

	for _, pl := range bothPlanners {
		It("of hybrid-LB engines over two hosts publish and replay on the ports of their global DP index ("+pl.name+" planner)", Label(pl.label), func(ctx SpecContext) {
			p := planFile(ctx, pl, filepath.Join(kvDir, "hybrid-two-hosts.yaml"), "main")
			r := p.run(ctx, primaryRuntime())
			Expect(r.report).To(matchers.HaveViolationKinds())
			expectAsPlanned(p, r.report)
			bound := map[string][]string{}
			for _, proc := range r.report.Processes {
				for _, a := range proc.Addresses {
					if a.Channel != "kv-events" {
						continue
					}
					Expect(a.Error).To(BeEmpty(), "%s %s", proc.ID, a.Endpoint)
					Expect(a.BindSeq).To(BeNumerically(">", 0), "%s bound %s for real", proc.ID, a.Endpoint)
					bound[proc.ID] = append(bound[proc.ID], a.Endpoint)
				}
			}
			want := map[string][]string{}
			for idx := 0; idx < 4; idx++ {
				id := fmt.Sprintf("node%d/0/engine-core-%d", idx/2, idx)
				want[id] = []string{fmt.Sprintf("tcp://*:%d", 5557+idx), fmt.Sprintf("tcp://*:%d", 5600+idx)}
			}
			Expect(bound).To(Equal(want))
		}, SpecTimeout(runBound+vllmBound))
	}
})
