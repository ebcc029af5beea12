package check

import (
	"fmt"
	"strings"

	"github.com/widetp/widetp/report"
)

// rendezvousFailed reports every barrier that some member recorded as failed, one violation per
// barrier (kind and address), naming who reported the failure and who never arrived. A barrier is
// identified by where it met (its report.BarrierKey: a loopback address is one barrier per host),
// not by replica: the DP group of a MoE deployment spans replicas.
func rendezvousFailed(procs []report.Process) []report.Violation {
	type key struct{ kind, addr string }
	type failure struct {
		reporters []string
		errors    []string
		missing   []string
		replicas  []string
	}
	failed := map[key]*failure{}
	var order []key
	for i := range procs {
		p := &procs[i]
		for _, rz := range p.Rendezvous {
			if rz.Error == "" {
				continue
			}
			k := key{rz.Kind, report.BarrierKey(p.Host, rz.Address)}
			f := failed[k]
			if f == nil {
				f = &failure{}
				failed[k] = f
				order = append(order, k)
			}
			f.reporters = append(f.reporters, p.ID)
			f.errors = append(f.errors, fmt.Sprintf("%s: %s", p.ID, rz.Error))
			f.missing = append(f.missing, rz.Missing...)
			if p.Replica != "" {
				f.replicas = append(f.replicas, p.Replica)
			}
		}
	}
	var out []report.Violation
	for _, k := range order {
		f := failed[k]
		missing := uniqueSorted(f.missing)
		msg := fmt.Sprintf("%s: %s rendezvous at %s (replica %s) did not complete: %s",
			report.RendezvousFailed, k.kind, k.addr, replicaName(strings.Join(uniqueSorted(f.replicas), ", ")), errList(f.errors))
		if len(missing) > 0 {
			msg += "; never arrived: " + idList(missing)
		}
		out = append(out, report.Violation{
			Kind:      report.RendezvousFailed,
			Message:   msg,
			Processes: uniqueSorted(append(append([]string{}, f.reporters...), missing...)),
		})
	}
	return out
}

// errList renders the members' errors, eliding past listLimit like idList.
func errList(errs []string) string {
	if len(errs) <= listLimit {
		return strings.Join(errs, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(errs[:listLimit], "; "), len(errs)-listLimit)
}
