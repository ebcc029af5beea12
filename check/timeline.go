package check

import (
	"slices"
	"sort"

	"github.com/widetp/widetp/report"
)

// A run with a fault timeline runs every check once the deployment settled and again after each
// step: a violation a step caused is reported with that step (New), and the run's violations are
// every one found at any point (Union), so that a fault whose harm a later step hides is still
// seen.

// New returns the violations of after that before does not have (same kind and message), in
// after's order; never nil.
func New(before, after []report.Violation) []report.Violation {
	seen := map[[2]string]bool{}
	for _, v := range before {
		seen[key(v)] = true
	}
	out := []report.Violation{}
	for _, v := range after {
		if !seen[key(v)] {
			out = append(out, v)
		}
	}
	return out
}

// Union returns every distinct violation of the lists, in Run's order (kind, first process,
// message).
func Union(lists ...[]report.Violation) []report.Violation {
	seen := map[[2]string]bool{}
	out := []report.Violation{}
	for _, l := range lists {
		for _, v := range l {
			if !seen[key(v)] {
				seen[key(v)] = true
				out = append(out, v)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		ki, kj := slices.Index(report.Kinds, out[i].Kind), slices.Index(report.Kinds, out[j].Kind)
		if ki != kj {
			return ki < kj
		}
		if a, b := first(out[i].Processes), first(out[j].Processes); a != b {
			return a < b
		}
		return out[i].Message < out[j].Message
	})
	return out
}

func key(v report.Violation) [2]string { return [2]string{string(v.Kind), v.Message} }
