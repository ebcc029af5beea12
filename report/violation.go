package report

import "sort"

// Kind is a stable violation identifier (the README lists the kinds and what each means).
type Kind string

const (
	ProcessCrashed        Kind = "process-crashed"
	DPIndexMismatch       Kind = "dp-index-mismatch"
	LookupPathCollision   Kind = "lookup-path-collision"
	LookupMisrouted       Kind = "lookup-misrouted"
	LookupUnreachable     Kind = "lookup-unreachable"
	SegmentNameCollision  Kind = "segment-name-collision"
	EngineIDCollision     Kind = "engine-id-collision"
	EngineIDMismatch      Kind = "engine-id-mismatch"
	DPIndexDuplicate      Kind = "dp-index-duplicate"
	RendezvousFailed      Kind = "rendezvous-failed"
	StoreRegistrationLost Kind = "store-registration-lost"
	AddressCollision      Kind = "address-collision"
	AddressMisrouted      Kind = "address-misrouted"
	AddressUnreachable    Kind = "address-unreachable"
	ProcessHung           Kind = "process-hung"
)

// Kinds lists every known kind, in the order of the design contract.
var Kinds = []Kind{ProcessCrashed, DPIndexMismatch, LookupPathCollision, LookupMisrouted, LookupUnreachable,
	SegmentNameCollision, EngineIDCollision, EngineIDMismatch, DPIndexDuplicate, RendezvousFailed, StoreRegistrationLost,
	AddressCollision, AddressMisrouted, AddressUnreachable, ProcessHung}

// Known reports whether k is one of the contract's kinds.
func (k Kind) Known() bool {
	for _, c := range Kinds {
		if c == k {
			return true
		}
	}
	return false
}

// Violation is one broken invariant.
type Violation struct {
	Kind    Kind   `json:"kind"`
	Message string `json:"message"`
	// Processes are the IDs of the processes involved.
	Processes []string `json:"processes"`
}

// KindSet returns the sorted distinct kinds of vs: what a scenario's `expect.violations` is compared with.
func KindSet(vs []Violation) []Kind {
	seen := map[Kind]bool{}
	out := []Kind{}
	for _, v := range vs {
		if !seen[v.Kind] {
			seen[v.Kind] = true
			out = append(out, v.Kind)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Report is the JSON object `widetp explain --json` and `widetp run --json` print (its fields are in the README, "Reading a report").
type Report struct {
	Scenario   string             `json:"scenario"`
	Profile    string             `json:"profile"`
	Runtime    string             `json:"runtime"`
	Verdict    string             `json:"verdict"` // "pass" when there are no violations
	Expected   []Kind             `json:"expected"`
	Violations []Violation        `json:"violations"`
	Processes  []Process          `json:"processes"`
	Timings    map[string]float64 `json:"timings"` // seconds, by phase
	// Planner says who turned the vllm serve lines into process plans: the Go model, or vLLM's own
	// launch code (its version, commit and where it was imported from). Absent in older reports.
	Planner *Planner `json:"planner,omitempty"`
}

// Planner is who planned a report's processes (vllm.PlannerSource).
type Planner struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	Commit  string `json:"commit,omitempty"`
	Path    string `json:"path,omitempty"`
	Digest  string `json:"digest,omitempty"`
}
