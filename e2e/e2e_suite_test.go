package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/widetp/widetp/harness"
	"github.com/widetp/widetp/internal/testbin"
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/scenarios"
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "widetp e2e")
}

// moduleRoot is the widetp source tree (the suite runs in e2e/): scenarios, artifacts, builds.
var moduleRoot = func() string {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	return filepath.Dir(wd)
}()

// scenarioDir holds the scenarios every spec runs.
var scenarioDir = filepath.Join(moduleRoot, "scenarios")

// allScenarios are loaded when the tree is built: one spec container per file.
var allScenarios = func() []*scenarios.Scenario {
	ss, err := scenarios.LoadAll(scenarioDir)
	if err != nil {
		// A scenario that does not load is a failure of its own, reported by the spec below.
		loadErr = err
	}
	return ss
}()

var loadErr error

var _ = It("loads every scenario of scenarios/", func() {
	Expect(loadErr).NotTo(HaveOccurred())
	Expect(allScenarios).NotTo(BeEmpty())
})

// suiteRuntimes are the runtimes every scenario runs on, decided once for the whole suite (every
// parallel process gets the same answer): Docker when an engine answers, local always.
var suiteRuntimes []string

// engineProbe bounds the check for a Docker engine: a local engine answers in milliseconds.
const engineProbe = 5 * time.Second

// imageBuild bounds building widetp (when $WIDETP_BIN names none: a cold cgo build on two cores
// takes about a minute) and its image ahead of the specs.
const imageBuild = 10 * time.Minute

// suiteSetup is what the first parallel process decides for all of them.
type suiteSetup struct {
	Runtimes []string
	// Binary is the widetp binary every run starts on its hosts ($WIDETP_BIN, or built once).
	Binary string
}

var _ = SynchronizedBeforeSuite(func(ctx SpecContext) []byte {
	bin, err := testbin.Widetp()
	Expect(err).NotTo(HaveOccurred(), "a widetp binary for the hosts")
	// Every registered runtime this machine can run; Docker's image is built once here, not by
	// every parallel process at its first spec.
	var rts []string
	for _, k := range harness.Runtimes() {
		if err := k.Available(ctx); err != nil {
			why := strings.SplitN(err.Error(), "\n", 2)[0]
			AddReportEntry("runtimes", "no "+k.Name+" runtime ("+why+"): its specs skip")
			fmt.Fprintf(os.Stderr, "e2e: no %s runtime (%s): its specs skip\n", k.Name, why)
			continue
		}
		rts = append(rts, k.Name)
		if k.Name == harness.RuntimeDocker {
			_, err := harness.BuildImages(ctx, []harness.Program{harness.Widetp})
			Expect(err).NotTo(HaveOccurred(), "build the image")
		}
	}
	AddReportEntry("runtimes", "every scenario runs on "+strings.Join(rts, " and ")+(map[bool]string{true: ", with parity specs"}[len(rts) > 1]))
	fmt.Fprintf(os.Stderr, "e2e: every scenario runs on %s\n", strings.Join(rts, " and "))
	b, err := json.Marshal(suiteSetup{Runtimes: rts, Binary: bin})
	Expect(err).NotTo(HaveOccurred())
	return b
}, func(b []byte) {
	var setup suiteSetup
	Expect(json.Unmarshal(b, &setup)).To(Succeed())
	suiteRuntimes = setup.Runtimes
	Expect(os.Setenv(harness.EnvBinary, setup.Binary)).To(Succeed())
}, NodeTimeout(imageBuild+engineProbe))

// Every process ends its vllm planner; the first process built the binary (unless $WIDETP_BIN
// named one) and removes it once every process is done.
var _ = SynchronizedAfterSuite(closeSuiteVLLM, func() { testbin.Cleanup() })

func hasRuntime(name string) bool {
	for _, r := range suiteRuntimes {
		if r == name {
			return true
		}
	}
	return false
}

// primaryRuntime is where the specs that need one run go: Docker when there is one.
func primaryRuntime() string { return suiteRuntimes[0] }

// runSeq numbers this process's runs; with the process id it makes run ids unique under
// `ginkgo -p` (the local runtime derives each run's loopback block from it, Docker its names).
var runSeq atomic.Int64

func nextRunID() string {
	return fmt.Sprintf("e2e%d-%d", os.Getpid(), runSeq.Add(1))
}

// run is one cluster of a spec, kept for the spec's own further checks.
type run struct {
	cluster *harness.Cluster
	report  report.Report
}

// runScenario runs s on the runtime called rt (opts: harness.WithPlans for another planner's
// plans) to its report, which it records as report.json and report.html in
// artifacts/e2e/<scenario>-<runtime>-<run id> (recordReport). The cluster's
// teardown is the spec's cleanup, and when the spec fails its artifacts (logs, store snapshot,
// inspect, ipc listings, and the report again, linking them) go to that directory first.
func runScenario(ctx context.Context, s *scenarios.Scenario, rt string, opts ...harness.ClusterOption) *run {
	GinkgoHelper()
	ss, err := harness.StartSession(ctx, s, harness.WithRuntime(rt), harness.WithRunProgress(GinkgoWriter),
		harness.WithRuntimeOptions(harness.WithRunID(nextRunID())), harness.WithClusterOptions(opts...))
	Expect(ss).NotTo(BeNil(), "start %s on %s: %v", s.Name, rt, err)
	r := &run{cluster: ss.Cluster}
	dir := filepath.Join(artifactsDir(), s.Name+"-"+rt+"-"+ss.RunID())
	// The session ends in the spec's cleanup, with the artifacts first when the spec failed.
	DeferCleanup(func(ctx SpecContext) {
		artifacts := ""
		if CurrentSpecReport().Failed() {
			artifacts = dir
			AddReportEntry("artifacts", dir)
		}
		Expect(ss.Finish(ctx, artifacts)).To(Succeed(), "tear down run %s", ss.RunID())
	}, NodeTimeout(4*time.Minute))
	Expect(err).NotTo(HaveOccurred(), "run %s on %s", s.Name, rt)
	r.report = *ss.Report
	recordReport(dir, r.report)
	return r
}

// artifactsDir is where failed specs leave their artifacts: $WIDETP_E2E_ARTIFACTS, or
// artifacts/e2e in the source tree (`make e2e` collects Ginkgo's reports in artifacts/ too).
func artifactsDir() string {
	if d := os.Getenv("WIDETP_E2E_ARTIFACTS"); d != "" {
		return d
	}
	return filepath.Join(moduleRoot, "artifacts", "e2e")
}

// runBound bounds one scenario run in a spec: the cluster's own settle bound (start-up, two
// rendezvous bounds, a lookup, store round trips) is about a minute and a half for the largest
// shipped scenario; teardown and artifacts have their own cleanup bounds.
const runBound = 4 * time.Minute
