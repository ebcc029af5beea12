// Package check derives the violations of a deployment from the records its processes produced. A
// record is the same whether the model predicted it (widetp explain) or a live process reported it
// (widetp run), so every check here reads only report.Process fields and never asks where they came
// from.
//
// Each check is an independent function over all records (README, violation kinds: each check
// runs over every process that reported, independently of the others): a crash does not hide a
// mismatch, and a missing record does not make a check pass silently where the remaining records
// still decide it.
package check

import (
	"sort"

	"github.com/widetp/widetp/report"
)

// A checker decides one violation kind over every record.
type checker struct {
	kind report.Kind
	run  func(procs []report.Process) []report.Violation
}

// checkers are in the order of report.Kinds, which is the order Run reports in.
var checkers = []checker{
	{report.ProcessCrashed, processCrashed},
	{report.DPIndexMismatch, dpIndexMismatch},
	{report.LookupPathCollision, lookupPathCollision},
	{report.LookupMisrouted, lookupMisrouted},
	{report.LookupUnreachable, lookupUnreachable},
	{report.SegmentNameCollision, segmentNameCollision},
	{report.EngineIDCollision, engineIDCollision},
	{report.EngineIDMismatch, engineIDMismatch},
	{report.DPIndexDuplicate, dpIndexDuplicate},
	{report.RendezvousFailed, rendezvousFailed},
	{report.StoreRegistrationLost, storeRegistrationLost},
	{report.AddressCollision, addressCollision},
	{report.AddressMisrouted, addressMisrouted},
	{report.AddressUnreachable, addressUnreachable},
	{report.ProcessHung, processHung},
	{report.IdentityChangedOnRestart, identityChangedOnRestart},
}

// Kinds lists the kinds Run can report, in its output order.
func Kinds() []report.Kind {
	out := make([]report.Kind, len(checkers))
	for i, c := range checkers {
		out[i] = c.kind
	}
	return out
}

// Run runs every check over procs and returns the violations ordered by kind (report.Kinds order),
// then by the first process involved, then by message, so that equal records give equal output.
// It does not modify procs; an empty or nil input has no violations.
func Run(procs []report.Process) []report.Violation {
	sorted := sortedByID(procs)
	out := []report.Violation{}
	for _, c := range checkers {
		vs := c.run(sorted)
		sort.SliceStable(vs, func(i, j int) bool {
			a, b := first(vs[i].Processes), first(vs[j].Processes)
			if a != b {
				return a < b
			}
			return vs[i].Message < vs[j].Message
		})
		out = append(out, vs...)
	}
	return out
}

// sortedByID copies procs in ID order so that every check walks them deterministically whatever
// order they were reported in.
func sortedByID(procs []report.Process) []report.Process {
	out := append([]report.Process(nil), procs...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func first(ids []string) string {
	if len(ids) == 0 {
		return ""
	}
	return ids[0]
}
