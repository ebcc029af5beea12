// Package matchers holds Gomega matchers over what a widetp run observed — a report.Report, a
// *report.Report or the []report.Process records themselves — and a polling helper over the fake
// store. Their failure messages name the host, the process and the values, so a red spec says
// which rank disagreed with which, not only that something did. It is the only package besides
// the e2e suite that imports Gomega.
package matchers

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/onsi/gomega/types"

	"github.com/widetp/widetp/check"
	"github.com/widetp/widetp/report"
)

// processesOf reads the records out of what a matcher was given.
func processesOf(actual any) ([]report.Process, error) {
	switch a := actual.(type) {
	case report.Report:
		return a.Processes, nil
	case *report.Report:
		if a == nil {
			return nil, fmt.Errorf("want a report, got a nil *report.Report")
		}
		return a.Processes, nil
	case []report.Process:
		return a, nil
	}
	return nil, fmt.Errorf("want a report.Report, *report.Report or []report.Process, got %T", actual)
}

// violationsOf is the report's violations, or the checks' over bare records.
func violationsOf(actual any) ([]report.Violation, error) {
	switch a := actual.(type) {
	case report.Report:
		return a.Violations, nil
	case *report.Report:
		if a == nil {
			return nil, fmt.Errorf("want a report, got a nil *report.Report")
		}
		return a.Violations, nil
	case []report.Process:
		return check.Run(a), nil
	}
	return nil, fmt.Errorf("want a report.Report, *report.Report or []report.Process, got %T", actual)
}

// finding is one thing a matcher found wrong, about one process.
type finding struct {
	host, process, what string
}

func (f finding) String() string { return fmt.Sprintf("host %s, %s: %s", f.host, f.process, f.what) }

// processMatcher is a matcher that lists findings; it succeeds when there are none.
type processMatcher struct {
	name     string
	find     func([]report.Process) []finding
	findings []finding
	count    int
}

func (m *processMatcher) Match(actual any) (bool, error) {
	procs, err := processesOf(actual)
	if err != nil {
		return false, fmt.Errorf("%s: %w", m.name, err)
	}
	m.count = len(procs)
	m.findings = m.find(procs)
	return len(m.findings) == 0, nil
}

func (m *processMatcher) FailureMessage(any) string {
	lines := make([]string, len(m.findings))
	for i, f := range m.findings {
		lines[i] = "  " + f.String()
	}
	return fmt.Sprintf("Expected the %d process records to %s, but:\n%s", m.count, m.name, strings.Join(lines, "\n"))
}

func (m *processMatcher) NegatedFailureMessage(any) string {
	return fmt.Sprintf("Expected the %d process records not to %s, but they do", m.count, m.name)
}

// HaveConsistentDPIndex succeeds when every process of every replica that computed a Mooncake DP
// index uses its replica's global DP index (the data_parallel_index of the replica's engine core,
// as the checks group replicas: check.Replicas) — the invariant vLLM#48061 broke. A replica whose
// global index the records cannot decide must at least agree with itself. Each failure names the
// host, the process, its index and the replica's.
func HaveConsistentDPIndex() types.GomegaMatcher {
	return &processMatcher{name: "have a consistent DP index in every replica", find: inconsistentDPIndex}
}

func inconsistentDPIndex(procs []report.Process) []finding {
	byID := make(map[string]report.Process, len(procs))
	for _, p := range procs {
		byID[p.ID] = p
	}
	// A process that died before it built its KV connector never used its index (as the
	// dp-index-mismatch check judges it: check.ConnectorUsers).
	used := check.ConnectorUsers(procs)
	var out []finding
	for _, r := range check.Replicas(procs) {
		if r.IndexKnown {
			for _, id := range r.Members {
				p := byID[id]
				if p.MooncakeDPIndex != nil && *p.MooncakeDPIndex != r.Index && used[id] {
					out = append(out, finding{p.Host, p.ID, fmt.Sprintf("Mooncake DP index %d, but replica %s (engine %s) has global DP index %d",
						*p.MooncakeDPIndex, r.Name, orDash(r.Engine), r.Index)})
				}
			}
			continue
		}
		seen := map[int][]string{}
		for _, id := range r.Members {
			if p := byID[id]; p.MooncakeDPIndex != nil && used[id] {
				seen[*p.MooncakeDPIndex] = append(seen[*p.MooncakeDPIndex], id)
			}
		}
		if len(seen) > 1 {
			for idx, ids := range seen {
				for _, id := range ids {
					out = append(out, finding{byID[id].Host, id, fmt.Sprintf("Mooncake DP index %d, while replica %s (global index unknown) also holds %v",
						idx, r.Name, otherKeys(seen, idx))})
				}
			}
		}
	}
	sortFindings(out)
	return out
}

// HaveUniqueLookupSockets succeeds when no two live lookup servers of one host bound the same ipc
// path (libzmq lets the later bind take the path over silently). Each failure names the host, the
// path and every server that bound it, in bind order.
func HaveUniqueLookupSockets() types.GomegaMatcher {
	return &processMatcher{name: "have unique lookup sockets on every host", find: sharedLookupSockets}
}

func sharedLookupSockets(procs []report.Process) []finding {
	type key struct{ host, path string }
	servers := map[key][]report.Process{}
	for _, p := range procs {
		if p.LookupRole == report.LookupServer && p.LookupPath != "" && p.Live() {
			k := key{p.Host, p.LookupPath}
			servers[k] = append(servers[k], p)
		}
	}
	var out []finding
	for k, ps := range servers {
		if len(ps) < 2 {
			continue
		}
		sort.SliceStable(ps, func(i, j int) bool { return ps[i].BindSeq < ps[j].BindSeq })
		for i, p := range ps {
			others := make([]string, 0, len(ps)-1)
			for j, o := range ps {
				if j != i {
					others = append(others, fmt.Sprintf("%s (bind %d, replica %s)", o.ID, o.BindSeq, orDash(o.Replica)))
				}
			}
			out = append(out, finding{k.host, p.ID, fmt.Sprintf("bound %s (bind %d, replica %s), as did %s",
				k.path, p.BindSeq, orDash(p.Replica), strings.Join(others, ", "))})
		}
	}
	sortFindings(out)
	return out
}

// HaveNoCrashedProcess succeeds when no process exited in an error nobody asked for. Each failure
// names the host, the process and the exception it died of.
func HaveNoCrashedProcess() types.GomegaMatcher {
	return &processMatcher{name: "have no crashed process", find: func(procs []report.Process) []finding {
		var out []finding
		for _, p := range procs {
			if p.Crashed() {
				out = append(out, finding{p.Host, p.ID, describeExit(p.Exit)})
			}
		}
		sortFindings(out)
		return out
	}}
}

// HaveViolationKinds succeeds when the distinct kinds of the violations (a report's, or the
// checks' over bare records) are exactly kinds, in any order; none means healthy. The failure
// lists what is missing, what is extra, and every violation's message, which names host,
// process and values.
func HaveViolationKinds(kinds ...report.Kind) types.GomegaMatcher {
	want := append([]report.Kind{}, kinds...)
	sort.Slice(want, func(i, j int) bool { return want[i] < want[j] })
	want = slices.Compact(want)
	return &kindsMatcher{want: want}
}

type kindsMatcher struct {
	want []report.Kind
	got  []report.Kind
	vs   []report.Violation
}

func (m *kindsMatcher) Match(actual any) (bool, error) {
	vs, err := violationsOf(actual)
	if err != nil {
		return false, fmt.Errorf("HaveViolationKinds: %w", err)
	}
	m.vs = vs
	m.got = report.KindSet(vs)
	return slices.Equal(m.got, m.want), nil
}

func (m *kindsMatcher) FailureMessage(any) string {
	var missing, extra []report.Kind
	for _, k := range m.want {
		if !slices.Contains(m.got, k) {
			missing = append(missing, k)
		}
	}
	for _, k := range m.got {
		if !slices.Contains(m.want, k) {
			extra = append(extra, k)
		}
	}
	msgs := make([]string, len(m.vs))
	for i, v := range m.vs {
		msgs[i] = "  " + v.Message
	}
	if len(msgs) == 0 {
		msgs = []string{"  (none)"}
	}
	return fmt.Sprintf("Expected violation kinds %v, got %v (missing %v, extra %v); the violations:\n%s",
		kindList(m.want), kindList(m.got), kindList(missing), kindList(extra), strings.Join(msgs, "\n"))
}

func (m *kindsMatcher) NegatedFailureMessage(any) string {
	return fmt.Sprintf("Expected violation kinds other than %v", kindList(m.want))
}

func kindList(ks []report.Kind) string {
	if len(ks) == 0 {
		return "[]"
	}
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = string(k)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func describeExit(e *report.Exit) string {
	switch {
	case e == nil:
		return "running"
	case e.Error != "":
		return fmt.Sprintf("exited %d: %s", e.Code, e.Error)
	case e.Signal != "":
		return "killed by " + e.Signal
	}
	return fmt.Sprintf("exited %d", e.Code)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func otherKeys(m map[int][]string, except int) []int {
	var out []int
	for k := range m {
		if k != except {
			out = append(out, k)
		}
	}
	sort.Ints(out)
	return out
}

func sortFindings(fs []finding) {
	sort.Slice(fs, func(i, j int) bool {
		if fs[i].host != fs[j].host {
			return fs[i].host < fs[j].host
		}
		if fs[i].process != fs[j].process {
			return fs[i].process < fs[j].process
		}
		return fs[i].what < fs[j].what
	})
}
