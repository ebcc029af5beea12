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
	// IdentityChangedOnRestart: a process a fault step restarted came back with another identity
	// than it had (DP rank, local rank, index, Mooncake DP index, ranks, lookup path, replica).
	IdentityChangedOnRestart Kind = "identity-changed-on-restart"
)

// Kinds lists every known kind, in the order of the design contract.
var Kinds = []Kind{ProcessCrashed, DPIndexMismatch, LookupPathCollision, LookupMisrouted, LookupUnreachable,
	SegmentNameCollision, EngineIDCollision, EngineIDMismatch, DPIndexDuplicate, RendezvousFailed, StoreRegistrationLost,
	AddressCollision, AddressMisrouted, AddressUnreachable, ProcessHung, IdentityChangedOnRestart}

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
	Scenario string `json:"scenario"`
	Profile  string `json:"profile"`
	Runtime  string `json:"runtime"`
	// Verdict is "pass" when there are no violations, "fail" when there are, and "error" when a
	// run did not reach its verdict (Error says why; the records are as far as it got).
	Verdict string `json:"verdict"`
	// Error is why a run stopped short of its verdict: a fault step that could not act or whose
	// trigger never came, a node that died, ... ("" when it completed).
	Error      string             `json:"error,omitempty"`
	Expected   []Kind             `json:"expected"`
	Violations []Violation        `json:"violations"`
	Processes  []Process          `json:"processes"`
	Timings    map[string]float64 `json:"timings"` // seconds, by phase
	// Planner says who turned the vllm serve lines into process plans: the Go model, or vLLM's own
	// launch code (its version, commit and where it was imported from). Absent in older reports.
	Planner *Planner `json:"planner,omitempty"`
	// Steps is the fault timeline, one entry per step in the order the steps ran (or, in a
	// prediction, would run); absent when the scenario has no faults.
	Steps []Step `json:"steps,omitempty"`
}

// Step is one fault step of a report's timeline: what it did, when, and what the checks found
// right after it (the deployment settled again).
type Step struct {
	Name string `json:"name"`
	// Action is the step in words ("restart r1-follower", "steal-port engine-io of r0-head/0/api-server-0").
	Action string `json:"action"`
	// After is its trigger in words ("settled", "step cut", "event ready of r0-head/0/api-server-0").
	After string `json:"after"`
	// At is when the step acted, in seconds from the start of the run (0 in a prediction).
	At float64 `json:"at"`
	// Effects say what the step did to the deployment, one line each.
	Effects []string `json:"effects,omitempty"`
	// Violations are those the checks found after the step that were not there before it.
	Violations []Violation `json:"violations"`
}

// Planner is who planned a report's processes (vllm.PlannerSource).
type Planner struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	Commit  string `json:"commit,omitempty"`
	Path    string `json:"path,omitempty"`
	Digest  string `json:"digest,omitempty"`
}
