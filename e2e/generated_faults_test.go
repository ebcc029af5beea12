package e2e_test

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/widetp/widetp/check"
	"github.com/widetp/widetp/harness"
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/scenarios"
	"github.com/widetp/widetp/vllm"
	"github.com/widetp/widetp/vllm/conform"
)

// Every generated deployment the model predicts healthy also runs with a fault timeline drawn
// from the same seed: one or two of kill (a host or a process), restart (a host or a command's
// top process), pause and resume, a partition between two hosts (with a restart across it or
// not) or from the store (healed at once or after the store expired the cut-off clients),
// store-restart, store-wipe and a transient store fault. The run must take every step and find
// after each the violation kinds the model's paper execution of the timeline finds
// (vllm/predict_faults.go), and end with every process as the model says. These run on the local
// runtime, whose faults take the same harness steps as Docker's (e2e/testdata/faults runs each
// action on both), to keep the suite short.
var _ = Describe("generated deployments with faults", Label("generated", "fault", harness.RuntimeLocal), func() {
	seed, deps := generatedSet()
	for _, d := range deps {
		procs, err := vllm.Predict(d)
		if err != nil || len(check.Run(procs)) > 0 {
			continue // a deployment that fails at start-up has nothing for the faults to break
		}
		steps := drawFaults(seed, d, procs)
		It(d.Name+" takes a generated fault timeline as the model predicts", func(ctx SpecContext) {
			b, err := conform.ScenarioYAML(d, "main", steps)
			Expect(err).NotTo(HaveOccurred())
			AddReportEntry("scenario (save it as a file to replay with widetp run or explain)", string(b), ReportEntryVisibilityFailureOrVerbose)
			AddReportEntry("seed", fmt.Sprintf("$%s=%s", envGeneratedSeed, seed), ReportEntryVisibilityFailureOrVerbose)
			s, err := scenarios.Parse(d.Name+".yaml", b)
			Expect(err).NotTo(HaveOccurred(), "the generated timeline loads")
			if cutsHosts(s) {
				if err := harness.PartitionsAvailable(ctx); err != nil {
					Skip(err.Error())
				}
			}
			r := runScenario(ctx, s, harness.RuntimeLocal)
			pred, err := harness.Predict(ctx, vllm.ModelPlanner{}, s)
			Expect(err).NotTo(HaveOccurred())
			Expect(report.KindSet(r.report.Violations)).To(Equal(report.KindSet(pred.Violations)), "observed against explain's prediction")
			expectTimelineAsPredicted(s, pred, r.report)
			Expect(identityDiffs(pred.Processes, r.report.Processes)).To(BeEmpty(), "processes whose identity differs from the prediction")
		}, SpecTimeout(runBound))
	}
})

// drawFaults draws one or two kinds of fault steps for deployment d (procs: the model's processes
// of it), reproducibly from seed and d's name, in the scenario format (README, "Faults").
func drawFaults(seed string, d vllm.Deployment, procs []report.Process) []map[string]any {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%s/faults", seed, d.Name)
	r := rand.New(rand.NewPCG(h.Sum64(), 7))
	var hosts, tops []string
	for _, n := range d.Nodes {
		hosts = append(hosts, n.Host)
	}
	// segments: the hosts whose workers register a Mooncake segment (a Segment in the model's
	// records), the only ones the store can expire.
	segments := map[string]bool{}
	for _, p := range procs {
		if p.Parent == "" {
			tops = append(tops, p.ID)
		}
		if p.Segment != "" {
			segments[p.Host] = true
		}
	}
	pick := func(xs []string) string { return xs[r.IntN(len(xs))] }
	kinds := []string{"kill-host", "kill-process", "restart-host", "restart-top", "pause", "partition",
		"partition-store", "store-restart", "store-wipe", "store-fault"}
	if len(hosts) < 2 {
		kinds = append(kinds[:5], kinds[6:]...) // no second host to cut a host from
	}
	var steps []map[string]any
	r.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	kinds = kinds[:1+r.IntN(2)]
	// A killed host is gone for the steps after it: its kill comes last.
	if i := slices.Index(kinds, "kill-host"); i >= 0 {
		kinds = append(append(kinds[:i:i], kinds[i+1:]...), "kill-host")
	}
	for _, k := range kinds {
		name := fmt.Sprintf("cut%d", len(steps))
		switch k {
		case "kill-host":
			steps = append(steps, map[string]any{"kill": pick(hosts)})
		case "kill-process":
			steps = append(steps, map[string]any{"kill": procs[r.IntN(len(procs))].ID})
		case "restart-host":
			steps = append(steps, map[string]any{"restart": pick(hosts)})
		case "restart-top":
			steps = append(steps, map[string]any{"restart": pick(tops)})
		case "pause":
			h := pick(hosts)
			steps = append(steps, map[string]any{"pause": h}, map[string]any{"resume": h})
		case "partition":
			i := r.IntN(len(hosts))
			j := (i + 1 + r.IntN(len(hosts)-1)) % len(hosts)
			steps = append(steps, map[string]any{"name": name, "partition": map[string]any{"hosts": []string{hosts[i]}, "from": []string{hosts[j]}}})
			if r.IntN(2) == 0 {
				steps = append(steps, map[string]any{"restart": hosts[i]})
			}
			steps = append(steps, map[string]any{"heal": name})
		case "partition-store":
			h := pick(hosts)
			steps = append(steps, map[string]any{"name": name, "partition": map[string]any{"hosts": []string{h}, "from": "store"}})
			heal := map[string]any{"heal": name}
			if segments[h] && r.IntN(2) == 0 {
				heal["after"] = map[string]any{"event": "expired", "host": h}
			}
			steps = append(steps, heal)
		case "store-restart":
			steps = append(steps, map[string]any{"store-restart": map[string]any{}})
		case "store-wipe":
			steps = append(steps, map[string]any{"store-wipe": map[string]any{}})
		case "store-fault":
			steps = append(steps, map[string]any{"store-fault": "kind=latency,plane=metadata,latency=200ms,count=3"})
		}
	}
	return steps
}
