package check

import (
	"fmt"

	"github.com/widetp/widetp/report"
)

// processCrashed reports every process that ended in an error nobody asked for (report.Process
// Crashed: a fault or the teardown marks the exits it caused as Expected). Each crashed process
// is its own violation even when a child's crash brought it down: the chain is what a reader
// needs to see, and the parent's message carries its own exception (vLLM's "Engine core
// initialization failed") rather than the child's.
func processCrashed(procs []report.Process) []report.Violation {
	var out []report.Violation
	for i := range procs {
		p := &procs[i]
		if !p.Crashed() {
			continue
		}
		out = append(out, report.Violation{
			Kind:      report.ProcessCrashed,
			Message:   fmt.Sprintf("%s: %s (%s on %s, replica %s) %s", report.ProcessCrashed, p.ID, p.Role, p.Host, replicaName(p.Replica), howEnded(p.Exit)),
			Processes: []string{p.ID},
		})
	}
	return out
}

// howEnded renders an unexpected exit with its Python-style exception.
func howEnded(e *report.Exit) string {
	var s string
	if e.Signal != "" {
		s = "was killed by " + e.Signal
	} else {
		s = fmt.Sprintf("exited with code %d", e.Code)
	}
	if e.Error != "" {
		s += ": " + e.Error
	}
	return s
}
