package e2e_test

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/widetp/widetp/check"
	"github.com/widetp/widetp/harness"
	"github.com/widetp/widetp/harness/matchers"
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/scenarios"
	"github.com/widetp/widetp/vllm"
)

// Every scenario, on every runtime the suite has: it runs, its observed violation kinds are its
// expect and are what `widetp explain` predicts, and every process that ran is who the model says
// it is. With both runtimes, a parity spec compares their violations.
var _ = Describe("every scenario", func() {
	for _, s := range allScenarios {
		labels := Labels{"scenario:" + s.Name}
		for _, b := range s.Bugs {
			labels = append(labels, scenarios.BugLabel(b))
		}
		Describe(s.Name, labels, Ordered, ContinueOnFailure, func() {
			observed := map[string]report.Report{}
			for _, rt := range []string{harness.RuntimeDocker, harness.RuntimeLocal} {
				It("runs on "+rt+" and shows exactly its expected violations, as predicted", Label(rt), func(ctx SpecContext) {
					if !hasRuntime(rt) {
						Skip("no Docker engine answered: the scenario runs on the local runtime")
					}
					r := runScenario(ctx, s, rt)
					observed[rt] = r.report
					expectAsPredicted(s, r.report)
				}, SpecTimeout(runBound))
			}
			It("shows the same violations on docker and local", Label("parity", harness.RuntimeDocker, harness.RuntimeLocal), func() {
				if !hasRuntime(harness.RuntimeDocker) {
					Skip("no Docker engine answered: nothing to compare the local runtime with")
				}
				d, okD := observed[harness.RuntimeDocker]
				l, okL := observed[harness.RuntimeLocal]
				if !okD || !okL {
					Fail("a run of this scenario failed before its report (see its spec): no parity to check")
				}
				Expect(violationSet(l)).To(Equal(violationSet(d)), "violations (kind: processes) on local, then on docker")
			})
		})
	}
})

// expectAsPredicted asserts what every run of s must show: the exact expected kinds, the kinds the
// model predicts, and per process the identity fields the model derives (vllm.Predict over the
// scenario, seeded with its name as explain does). The invariant matchers agree with the checks.
func expectAsPredicted(s *scenarios.Scenario, rep report.Report) {
	GinkgoHelper()
	Expect(rep).To(matchers.HaveViolationKinds(s.Expect...), "observed against the scenario's expect")
	predicted, err := vllm.Predict(s.Deployment())
	Expect(err).NotTo(HaveOccurred())
	Expect(rep).To(matchers.HaveViolationKinds(report.KindSet(check.Run(predicted))...), "observed against explain's prediction")
	Expect(identityDiffs(predicted, rep.Processes)).To(BeEmpty(), "processes whose identity differs from the prediction")

	// The invariant matchers fail exactly where the checks found the invariant broken.
	if slices.Contains(s.Expect, report.DPIndexMismatch) {
		Expect(rep).NotTo(matchers.HaveConsistentDPIndex())
	} else {
		Expect(rep).To(matchers.HaveConsistentDPIndex())
	}
	if slices.Contains(s.Expect, report.LookupPathCollision) {
		Expect(rep).NotTo(matchers.HaveUniqueLookupSockets())
	} else {
		Expect(rep).To(matchers.HaveUniqueLookupSockets())
	}
	if slices.Contains(s.Expect, report.ProcessCrashed) {
		Expect(rep).NotTo(matchers.HaveNoCrashedProcess())
	} else {
		Expect(rep).To(matchers.HaveNoCrashedProcess())
	}
}

// identityDiffs lists every difference between the model's processes and the observed ones: a
// process the model starts that did not report, one that reported but the model never starts,
// and, for every process in both, each identity field that differs — the DP rank, local rank and
// index, the Mooncake DP index, the worker ranks, the lookup path and role, the KV engine_id.
func identityDiffs(predicted, observed []report.Process) []string {
	pred := map[string]report.Process{}
	for _, p := range predicted {
		pred[p.ID] = p
	}
	obs := map[string]report.Process{}
	for _, o := range observed {
		obs[o.ID] = o
	}
	var diffs []string
	for _, p := range predicted {
		if _, ok := obs[p.ID]; !ok && startedInPrediction(p, pred) {
			diffs = append(diffs, fmt.Sprintf("%s (host %s): the model starts it, it never reported", p.ID, p.Host))
		}
	}
	for _, o := range observed {
		p, ok := pred[o.ID]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("%s (host %s): reported, the model never starts it", o.ID, o.Host))
			continue
		}
		field := func(name string, got, want any) {
			if fmt.Sprint(got) != fmt.Sprint(want) {
				diffs = append(diffs, fmt.Sprintf("%s (host %s): %s %v, predicted %v", o.ID, o.Host, name, got, want))
			}
		}
		field("role", o.Role, p.Role)
		field("data_parallel_rank", o.DataParallelRank, p.DataParallelRank)
		field("data_parallel_rank_local", deref(o.DataParallelRankLocal), deref(p.DataParallelRankLocal))
		field("data_parallel_index", o.DataParallelIndex, p.DataParallelIndex)
		field("mooncake_dp_index", deref(o.MooncakeDPIndex), deref(p.MooncakeDPIndex))
		field("rank", deref(o.Rank), deref(p.Rank))
		field("tp_rank", deref(o.TPRank), deref(p.TPRank))
		field("pp_rank", deref(o.PPRank), deref(p.PPRank))
		field("lookup", string(o.LookupRole)+" "+o.LookupPath, string(p.LookupRole)+" "+p.LookupPath)
		field("engine_id", o.EngineID, p.EngineID)
	}
	sort.Strings(diffs)
	return diffs
}

// startedInPrediction: the model's paper run starts p — a child of a process that ends before
// starting it (its parent crashed, and so has an exit) never runs.
func startedInPrediction(p report.Process, pred map[string]report.Process) bool {
	if p.Parent == "" || p.Exit != nil {
		return true
	}
	parent, ok := pred[p.Parent]
	return !ok || parent.Exit == nil || parent.Exit.Expected
}

func deref(p *int) any {
	if p == nil {
		return "None"
	}
	return *p
}

// violationSet is a report's violations as "kind: process, process": what two runtimes must agree
// on (messages name addresses, which differ between runtimes).
func violationSet(rep report.Report) []string {
	var out []string
	for _, v := range rep.Violations {
		ps := append([]string(nil), v.Processes...)
		sort.Strings(ps)
		out = append(out, string(v.Kind)+": "+strings.Join(ps, ", "))
	}
	sort.Strings(out)
	return slices.Compact(out)
}
