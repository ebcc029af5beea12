package e2e_test

import (
	"fmt"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/widetp/widetp/harness/matchers"
	"github.com/widetp/widetp/report"
)

// VLLM_USE_RUST_FRONTEND=1 (vllm/entrypoints/cli/serve.py ServeSubcommand.cmd, vllm/envs.py
// _resolve_rust_cli_path): one API server whatever the DP size, run_multi_api_server, and the
// engine-io TCP ports probed with get_open_port before the engines start
// (get_engine_zmq_addresses(defer_api_server_ports=False)), because the Rust process
// (vllm/v1/utils.py RustFrontendProcessManager) cannot report a port it bound back. The runs
// probe those ports and bind them for real.
var _ = Describe("Rust front end", Label("rust-frontend"), func() {
	dir := filepath.Join(moduleRoot, "e2e", "testdata", "rust")

	for _, pl := range bothPlanners {
		It("binds the engine-io ports probed up front, one pair for the whole front end ("+pl.name+" planner)", Label(pl.label), func(ctx SpecContext) {
			p := planFile(ctx, pl, filepath.Join(dir, "rust-frontend-two-nodes.yaml"), "main")
			r := p.run(ctx, primaryRuntime())
			Expect(r.report).To(matchers.HaveViolationKinds())
			expectAsPlanned(p, r.report)
			procs := byID(r.report)
			Expect(procs).To(HaveKey("follower/0/engine-core-3"))
			probed := map[string]int{}
			var bound []string
			for _, a := range procs["head/0/api-server-0"].Addresses {
				if a.Channel != "engine-io" {
					continue
				}
				switch a.Role {
				case report.AddressProbe:
					Expect(a.Ports).To(HaveLen(1), a.Key)
					probed[a.Key] = a.Ports[0]
				case report.AddressBind:
					Expect(a.Error).To(BeEmpty(), a.Key)
					Expect(a.BindSeq).To(BeNumerically(">", 0), "%s bound for real", a.Key)
					Expect(probed).To(HaveKey(a.Key), "the port was probed before its bind")
					Expect(a.Endpoint).To(Equal(fmt.Sprintf("tcp://head:%d", probed[a.Key])), "the bind takes the probed port")
					bound = append(bound, a.Key)
				}
			}
			Expect(bound).To(Equal([]string{"input", "output"}), "one input and one output socket, not one pair per DP rank")
		}, SpecTimeout(runBound+vllmBound))
	}
})
