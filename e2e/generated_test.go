package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/widetp/widetp/harness"
	"github.com/widetp/widetp/vllm"
	"github.com/widetp/widetp/vllm/conform"
)

// envGeneratedSeed picks the generated deployments' seed (default generatedSeed): a nightly run
// may draw another set, and a failing one is replayed with the seed its spec names.
const envGeneratedSeed = "WIDETP_E2E_SEED"

const generatedSeed = "e2e"

// Deployments the scenario catalog does not hold: widetp conform's generator draws one per launch
// path (vllm/conform/generate.go: one-node and headless internal LB, external and hybrid LB, wide
// TP, co-located and multi-port external LB, external-LB replicas sharing nodes, prefill/decode
// disaggregation, offline SPMD, the api_server entry point, refused and mismatched configs), with
// connectors, KV event publishers and node environments drawn by the
// seed. Each runs for real and must show what the paper execution of its plans shows, process by
// process; with vLLM's launch code beside the suite, its plans are run too. No file of them is
// kept: the spec writes the scenario into its own temporary directory and names it on failure.
var _ = Describe("generated deployments", Label("generated"), func() {
	seed, deps := generatedSet()
	n := len(deps)
	for _, d := range deps {
		Describe(d.Name, func() {
			write := func() string {
				GinkgoHelper()
				dir := GinkgoT().TempDir()
				Expect(conform.WriteScenarios(dir, []vllm.Deployment{d}, "main")).To(Succeed())
				path := filepath.Join(dir, d.Name+".yaml")
				yaml, err := os.ReadFile(path)
				Expect(err).NotTo(HaveOccurred())
				AddReportEntry("scenario (save it as a file to replay with widetp run or explain)", string(yaml), ReportEntryVisibilityFailureOrVerbose)
				AddReportEntry("seed", fmt.Sprintf("$%s=%s: widetp conform --generate %d --seed %s --write DIR writes every deployment of this set", envGeneratedSeed, seed, n, seed), ReportEntryVisibilityFailureOrVerbose)
				return path
			}
			for _, rt := range harness.RuntimeNames() {
				It("runs on "+rt+" as its model plans predict", Label(rt, labelPlannerModel), func(ctx SpecContext) {
					if !hasRuntime(rt) {
						Skip("no Docker engine answered: the deployment runs on the local runtime")
					}
					p := planFile(ctx, modelPlanner, write(), "main")
					expectAsPlanned(p, p.run(ctx, rt).report)
				}, SpecTimeout(runBound))
			}
			It("runs with vLLM's plans as they predict, and as the model does", Label(labelPlannerVLLM), func(ctx SpecContext) {
				p := planFile(ctx, vllmPlanner, write(), "main")
				expectAsPlanned(p, p.run(ctx, primaryRuntime()).report)
			}, SpecTimeout(runBound))
		})
	}
})

// generatedSet is the suite's generated deployments under vLLM main's profile, one per launch
// path, and the seed they were drawn from ($WIDETP_E2E_SEED, else generatedSeed).
func generatedSet() (string, []vllm.Deployment) {
	seed := generatedSeed
	if s := os.Getenv(envGeneratedSeed); s != "" {
		seed = s
	}
	prof, err := vllm.ProfileNamed("main")
	if err != nil {
		panic(err) // the built-in profile: a build that lacks it cannot run any spec
	}
	return seed, conform.Generate(len(conform.LaunchPaths()), seed, prof)
}
