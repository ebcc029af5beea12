package e2e_test

import (
	"path/filepath"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/widetp/widetp/harness"
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/scenarios"
)

// faultDir holds one small deployment per fault action (the bug library in scenarios/ has the
// fault-triggered bugs): each runs like every scenario, on both runtimes with parity, and its
// timeline must go as the model predicts it, step by step.
var faultDir = filepath.Join(moduleRoot, "e2e", "testdata", "faults")

var faultScenarios, faultLoadErr = scenarios.LoadAll(faultDir)

var _ = It("loads every fault scenario of e2e/testdata/faults", Label("fault"), func() {
	Expect(faultLoadErr).NotTo(HaveOccurred())
	// Every action a live runtime takes has a spec here or in the bug library.
	covered := map[scenarios.Action]bool{}
	for _, s := range append(slices.Clone(allScenarios), faultScenarios...) {
		for _, st := range s.Faults {
			covered[st.Action] = true
		}
	}
	for _, a := range scenarios.Actions {
		Expect(covered).To(HaveKey(a), "no scenario exercises the %s action", a)
	}
})

var _ = Describe("fault timelines", func() {
	for _, s := range faultScenarios {
		describeScenario(s)
	}
})

// faultLabels label a scenario with a timeline `fault` and `fault:<action>` for each action it
// takes, so `--label-filter=fault` runs every faulted deployment and `fault:restart` one kind.
func faultLabels(s *scenarios.Scenario) []string {
	if len(s.Faults) == 0 {
		return nil
	}
	out := []string{"fault"}
	for _, st := range s.Faults {
		if l := "fault:" + string(st.Action); !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}

// expectTimelineAsPredicted: a run of a scenario with faults took every step, in order, and found
// after each the violation kinds the model predicts after it.
func expectTimelineAsPredicted(s *scenarios.Scenario, pred *harness.Prediction, rep report.Report) {
	GinkgoHelper()
	Expect(rep.Steps).To(HaveLen(len(s.Faults)), "the run records every step of the timeline")
	for i, st := range rep.Steps {
		Expect(st.Name).To(Equal(pred.Steps[i].Name), "step %d", i)
		Expect(st.Action).To(Equal(pred.Steps[i].Action), "step %s", st.Name)
		Expect(report.KindSet(st.Violations)).To(Equal(report.KindSet(pred.Steps[i].Violations)),
			"violation kinds found after step %s (%s), observed then predicted", st.Name, st.Action)
		if i > 0 {
			Expect(st.At).To(BeNumerically(">=", rep.Steps[i-1].At), "steps in order")
		}
	}
}
