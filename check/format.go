package check

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/widetp/widetp/report"
)

// listLimit bounds how many process IDs a message spells out: a wide-TP replica has dozens of
// processes and a message is read by a person; Violation.Processes still names every one.
const listLimit = 4

// optInt renders a Python optional int the way vLLM would print it.
func optInt(p *int) string {
	if p == nil {
		return "None"
	}
	return strconv.Itoa(*p)
}

// idList renders ids for a message, eliding past listLimit.
func idList(ids []string) string {
	if len(ids) <= listLimit {
		return strings.Join(ids, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ids[:listLimit], ", "), len(ids)-listLimit)
}

// replicaName renders a process's replica for a message; an empty one is said so rather than
// printed as nothing.
func replicaName(r string) string {
	if r == "" {
		return "(no replica)"
	}
	return r
}

// uniqueSorted returns the distinct ids in order.
func uniqueSorted(ids []string) []string {
	seen := map[string]bool{}
	out := []string{}
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// ids returns the IDs of ps in order.
func ids(ps []*report.Process) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.ID
	}
	return out
}

// sortedKeys returns the keys of a map in order, for deterministic iteration.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
