package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/widetp/widetp/check"
	"github.com/widetp/widetp/harness"
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/scenarios"
	"github.com/widetp/widetp/vllm"
	"github.com/widetp/widetp/vllm/probe"
	"github.com/widetp/widetp/vllm/probe/probetest"
)

// The planners the regression specs run with (README, "Planners and widetp conform"): the Go
// model, and vLLM's own launch code run by widetp's probe. The vLLM is $WIDETP_VLLM (a source tree
// or site-packages directory: nightly CI points it at vLLM main) or else the source snapshot the
// tests use (probetest: ../shared/vllm/ beside the repository, or $WIDETP_VLLM_SNAPSHOT), unpacked
// once into the user cache directory so that every run reuses the probe's bytecode cache. Without
// python3 or any vLLM the vllm-planner specs skip, saying why.
const (
	labelPlannerModel = "planner-model"
	labelPlannerVLLM  = "planner-vllm"
)

// envVLLMProfile names the model profile of the vLLM in $WIDETP_VLLM (default main: nightly CI
// runs vLLM main); the snapshot's is probetest.SnapshotProfile.
const envVLLMProfile = "WIDETP_VLLM_PROFILE"

// e2ePlanner is one planner a spec runs with.
type e2ePlanner struct {
	name  string
	label string
}

var (
	modelPlanner = e2ePlanner{"model", labelPlannerModel}
	vllmPlanner  = e2ePlanner{"vllm", labelPlannerVLLM}
	bothPlanners = []e2ePlanner{modelPlanner, vllmPlanner}
)

// suiteVLLM is this process's vllm planner, started by the first spec that needs it (starting one
// imports vLLM: seconds) and stopped after the suite.
var suiteVLLM struct {
	once    sync.Once
	planner *probe.Planner
	profile string
	skip    string
	err     error
}

// vllmBound bounds the probe's start and each deployment's planning in a spec.
const vllmBound = 2 * time.Minute

func openSuiteVLLM() {
	path, profile := os.Getenv(probe.EnvVLLM), os.Getenv(envVLLMProfile)
	explicit := path != ""
	if explicit {
		if profile == "" {
			profile = "main"
		}
	} else {
		path, suiteVLLM.skip = probetest.UnpackCached()
		if suiteVLLM.skip != "" {
			suiteVLLM.skip = "no vLLM for the vllm planner (" + suiteVLLM.skip + "; set $" + probe.EnvVLLM + " to a vLLM checkout)"
			return
		}
		if profile == "" {
			profile = probetest.SnapshotProfile
		}
	}
	suiteVLLM.profile = profile
	suiteVLLM.planner, suiteVLLM.err = probe.New(context.Background(), probe.WithVLLM(path), probe.WithTimeouts(vllmBound, vllmBound))
	if suiteVLLM.err != nil && !explicit && errors.Is(suiteVLLM.err, probe.ErrUnavailable) {
		// The snapshot is there but this python3 cannot import it (no pydantic 2, say): a machine
		// that cannot run the vllm planner, not a failure of it. $WIDETP_VLLM asks for it: that fails.
		suiteVLLM.skip, suiteVLLM.err = suiteVLLM.err.Error(), nil
	}
}

// theVLLMPlanner is the suite's vllm planner and the model profile of its vLLM; it skips the spec
// (and says why on stderr, once) when there is no vLLM or no python3 to run it.
func theVLLMPlanner() (*probe.Planner, string) {
	GinkgoHelper()
	first := false
	suiteVLLM.once.Do(func() { first = true; openSuiteVLLM() })
	if suiteVLLM.skip != "" {
		if first {
			fmt.Fprintf(os.Stderr, "e2e: the %s specs skip: %s\n", labelPlannerVLLM, suiteVLLM.skip)
		}
		Skip(suiteVLLM.skip)
	}
	Expect(suiteVLLM.err).NotTo(HaveOccurred(), "start the vllm planner")
	return suiteVLLM.planner, suiteVLLM.profile
}

// closeSuiteVLLM ends this process's vllm planner, if it started one (SynchronizedAfterSuite).
func closeSuiteVLLM() {
	if suiteVLLM.planner != nil {
		Expect(suiteVLLM.planner.Close()).To(Succeed())
	}
}

// planned is a shipped scenario and its plans by one planner, with the processes those plans run
// as on paper (vllm.PredictPlans): what a live run of them must show.
type planned struct {
	s       *scenarios.Scenario
	planner e2ePlanner
	// plans are vLLM's plans, handed to the nodes (harness.WithPlans); nil for the model, which
	// simnode runs itself.
	plans     []*vllm.NodePlan
	predicted []report.Process
	// install is the installation vLLM's plans were made from, which the model plans for when
	// it is compared with them (as widetp conform does).
	install vllm.Install
}

// plan loads the shipped scenario called name for pl. The model runs it under profile; vLLM's own
// launch code has its own behaviour, so the scenario is loaded under that vLLM's profile (the
// profile then only tells the model which vLLM it is compared with).
func plan(ctx context.Context, pl e2ePlanner, name, profile string) planned {
	GinkgoHelper()
	return planFile(ctx, pl, filepath.Join(scenarioDir, name+".yaml"), profile)
}

// planFile is plan for the scenario file at path.
func planFile(ctx context.Context, pl e2ePlanner, path, profile string) planned {
	GinkgoHelper()
	name := strings.TrimSuffix(filepath.Base(path), ".yaml")
	if pl != vllmPlanner {
		s := loadFileAs(path, profile)
		predicted, err := vllm.Predict(s.Deployment())
		Expect(err).NotTo(HaveOccurred())
		return planned{s: s, planner: pl, predicted: predicted}
	}
	p, vllmProfile := theVLLMPlanner()
	s := loadFileAs(path, vllmProfile)
	plans, err := p.PlanDeployment(ctx, s.Deployment())
	Expect(err).NotTo(HaveOccurred(), "plan %s with vLLM (%s)", name, p.Source().Path)
	predicted, err := vllm.PredictPlans(s.Deployment(), plans)
	Expect(err).NotTo(HaveOccurred())
	return planned{s: s, planner: pl, plans: plans, predicted: predicted, install: p.Source().Install}
}

// run runs the planned scenario on the runtime called rt: with vLLM's plans, every node runs
// exactly those (simnode's plan config).
func (p planned) run(ctx context.Context, rt string) *run {
	GinkgoHelper()
	var opts []harness.ClusterOption
	if p.plans != nil {
		opts = append(opts, harness.WithPlans(p.plans))
	}
	return runScenario(ctx, p.s, rt, opts...)
}

// expectAsPlanned asserts what a run of p must show: exactly the violation kinds of its plans'
// paper execution, every process as its plans say; and, for vLLM's plans, that the model under the
// same profile predicts the same kinds and the same identities (what `widetp conform` checks on
// paper, here on a live run).
func expectAsPlanned(p planned, rep report.Report) {
	GinkgoHelper()
	kinds := report.KindSet(check.Run(p.predicted))
	Expect(report.KindSet(rep.Violations)).To(Equal(kinds), "observed against the %s planner's paper run", p.planner.name)
	Expect(identityDiffs(p.predicted, rep.Processes)).To(BeEmpty(), "processes whose identity differs from the %s planner's plans", p.planner.name)
	if p.plans == nil {
		return
	}
	d := p.s.Deployment()
	d.Install = p.install
	model, err := vllm.Predict(d)
	Expect(err).NotTo(HaveOccurred())
	// What the model's addresses on the connectors' side channels show (a kv_consumer's NIXL
	// dials, say) is the model's alone, as below.
	Expect(report.KindSet(check.Run(onChannels(model, probe.AddressChannels)))).To(Equal(kinds), "the model under %s predicts what vLLM's plans show", p.s.Profile)
	// The addresses the probe derives with vLLM's code; the connectors' side channels it does not
	// build (probe.AddressChannels) are the model's alone.
	Expect(identityDiffsOf(model, rep.Processes, probe.AddressChannels)).To(BeEmpty(), "processes whose identity differs from the model's under %s", p.s.Profile)
}

// vllmScenarios are the bug-library scenarios the vllm planner runs too: those whose profile is
// `main`, i.e. that describe vLLM main's own behaviour (the fixed twins, the controls, and
// #47692's breakage, which main still has). A scenario under an older behaviour's profile
// reproduces code vLLM no longer has, which vLLM's own launch code cannot plan.
func vllmScenarios() []*scenarios.Scenario {
	var out []*scenarios.Scenario
	for _, s := range allScenarios {
		if s.Profile.String() == "main" {
			out = append(out, s)
		}
	}
	return out
}

// Every bug-library scenario that describes vLLM main, planned by vLLM's own launch code and run
// on the primary runtime: it shows exactly what the plans predict, the model predicts the same,
// and every process is who both planners say.
var _ = Describe("every main scenario planned by vLLM", Label(labelPlannerVLLM), func() {
	for _, s := range vllmScenarios() {
		labels := Labels{"scenario:" + s.Name}
		for _, b := range s.Bugs {
			labels = append(labels, scenarios.BugLabel(b))
		}
		It(s.Name+" runs vLLM's plans as planned", labels, func(ctx SpecContext) {
			p := plan(ctx, vllmPlanner, s.Name, "main")
			r := p.run(ctx, primaryRuntime())
			expectAsPlanned(p, r.report)
			if got := report.KindSet(r.report.Violations); !slices.Equal(got, s.Expect) {
				// The vLLM run is older or newer than the main the file describes (the snapshot lacks
				// #53743): the model under that vLLM's profile agreed, which is what counts here.
				AddReportEntry("vllm planner", fmt.Sprintf("under %s the run shows %v where %s (profile main) expects %v",
					p.s.Profile, got, s.File, s.Expect))
			}
		}, SpecTimeout(runBound+vllmBound))
	}
})

// onChannels is procs with only their addresses on channels.
func onChannels(procs []report.Process, channels []string) []report.Process {
	out := make([]report.Process, len(procs))
	for i, p := range procs {
		p.Addresses = slices.DeleteFunc(slices.Clone(p.Addresses), func(a report.Address) bool {
			return !slices.Contains(channels, a.Channel)
		})
		out[i] = p
	}
	return out
}
