package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/widetp/widetp/check"
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/scenarios"
)

// writeExplain prints the human form of an explain report: per node a table of its processes,
// then the replicas, then the violations and how they compare with the scenario's expect.
func writeExplain(w io.Writer, s *scenarios.Scenario, rep report.Report, got []report.Kind, match bool) {
	fmt.Fprintf(w, "scenario %s (%s)\nprofile  %s\nmodel    %s (%s)\n", s.Name, s.File, rep.Profile, s.Model.Name, moeWord(s.Model.MoE))
	if p := rep.Planner; p != nil && p.Name != "model" {
		commit := p.Commit
		if commit == "" {
			commit = "commit unknown"
		}
		fmt.Fprintf(w, "planner  %s %s (%s) from %s\n", p.Name, p.Version, commit, p.Path)
	}
	// A run's report says where it ran; a prediction ran nowhere (runtime "none").
	seen := "predicted"
	if rep.Runtime != "none" {
		seen = "observed"
		fmt.Fprintf(w, "runtime  %s\n", rep.Runtime)
	}
	byHost := map[string][]report.Process{}
	for _, p := range rep.Processes {
		byHost[p.Host] = append(byHost[p.Host], p)
	}
	for _, n := range s.Nodes {
		procs := byHost[n.Host]
		delete(byHost, n.Host)
		fmt.Fprintf(w, "\nnode %s: %d GPUs, %d command(s), %d process(es)\n", n.Host, n.GPUs, len(n.Commands), len(procs))
		writeProcessTable(w, procs)
		writeAddressTable(w, procs)
	}
	// A record on a host the scenario does not name would be a model bug; show it rather than drop it.
	for _, h := range sortedKeys(byHost) {
		fmt.Fprintf(w, "\nhost %s (not a node of the scenario)\n", h)
		writeProcessTable(w, byHost[h])
	}

	fmt.Fprintln(w, "\nreplicas")
	writeReplicas(w, rep.Processes)
	writeTimeline(w, rep.Steps, seen)

	fmt.Fprintf(w, "\nviolations (%d)\n", len(rep.Violations))
	for _, v := range rep.Violations {
		fmt.Fprintf(w, "  %s\n", v.Message)
	}
	if len(rep.Violations) == 0 {
		fmt.Fprintln(w, "  none")
	}
	verdict := "as expected"
	if !match {
		verdict = "NOT as expected"
	}
	if rep.Error != "" {
		fmt.Fprintf(w, "\nexpected %s, %s %s before the run stopped: NO VERDICT: %s\n", kinds(rep.Expected), seen, kinds(got), rep.Error)
		return
	}
	fmt.Fprintf(w, "\nexpected %s, %s %s: %s\n", kinds(rep.Expected), seen, kinds(got), verdict)
}

// writeTimeline prints a fault timeline: each step, its trigger, what it did and the violations
// first found after it (the tables above are the deployment after the last step).
func writeTimeline(w io.Writer, steps []report.Step, seen string) {
	if len(steps) == 0 {
		return
	}
	fmt.Fprintf(w, "\ntimeline (%d steps; the tables above are the deployment after the last)\n", len(steps))
	for i, st := range steps {
		at := ""
		if st.At > 0 {
			at = fmt.Sprintf(" at %.2f s", st.At)
		}
		fmt.Fprintf(w, "  %d. %s: %s (after %s)%s\n", i+1, st.Name, st.Action, st.After, at)
		for _, e := range st.Effects {
			fmt.Fprintf(w, "       %s\n", e)
		}
		if len(st.Violations) == 0 {
			fmt.Fprintf(w, "       %s after it: nothing new\n", seen)
		}
		for _, v := range st.Violations {
			fmt.Fprintf(w, "       %s after it: %s\n", seen, v.Message)
		}
	}
}

func writeProcessTable(w io.Writer, procs []report.Process) {
	if len(procs) == 0 {
		fmt.Fprintln(w, "  (no processes)")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  PROCESS\tROLE\tREPLICA\tDP RANK\tRANK_LOCAL\tDP INDEX\tMOONCAKE\tRANK/TP/PP\tLOOKUP\tENGINE ID\tEXIT")
	for _, p := range procs {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n",
			p.ID, p.Role, dash(p.Replica), p.DataParallelRank, optInt(p.DataParallelRankLocal), p.DataParallelIndex,
			optInt(p.MooncakeDPIndex), ranks(p), lookup(p), dash(p.EngineID), exit(p.Exit))
	}
	tw.Flush()
}

// writeReplicas summarises each replica as the checks group it (check.Replicas: two engines that
// claim one slot are two replicas): its engine, global DP index, hosts and the Mooncake indices its
// members computed (one value when they agree).
func writeReplicas(w io.Writer, procs []report.Process) {
	reps := check.Replicas(procs)
	if len(reps) == 0 {
		fmt.Fprintln(w, "  none")
		return
	}
	byID := make(map[string]report.Process, len(procs))
	for _, p := range procs {
		byID[p.ID] = p
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  REPLICA\tDP INDEX\tENGINE\tWORKERS\tHOSTS\tMOONCAKE INDICES")
	for _, r := range reps {
		var hosts []string
		workers := 0
		indices := map[string]bool{}
		for _, id := range r.Members {
			p := byID[id]
			if p.Role == report.RoleWorker {
				workers++
			}
			if !contains(hosts, p.Host) {
				hosts = append(hosts, p.Host)
			}
			if p.MooncakeDPIndex != nil {
				indices[strconv.Itoa(*p.MooncakeDPIndex)] = true
			}
		}
		index := ""
		if r.IndexKnown {
			index = strconv.Itoa(r.Index)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\t%s\n", r.Name, dash(index), dash(r.Engine), workers,
			strings.Join(hosts, ","), dash(strings.Join(sortedKeys(indices), ",")))
	}
	tw.Flush()
}

func ranks(p report.Process) string {
	if p.Rank == nil && p.TPRank == nil && p.PPRank == nil {
		return "-"
	}
	return optInt(p.Rank) + "/" + optInt(p.TPRank) + "/" + optInt(p.PPRank)
}

func lookup(p report.Process) string {
	if p.LookupPath == "" {
		return "-"
	}
	return fmt.Sprintf("%s %s", p.LookupRole, p.LookupPath)
}

func exit(e *report.Exit) string {
	switch {
	case e == nil:
		return "-"
	case e.Error != "":
		return e.Error
	case e.Signal != "":
		return e.Signal
	}
	return "exit " + strconv.Itoa(e.Code)
}

// optInt renders a Python optional int: nil is None, distinct from 0.
func optInt(p *int) string {
	if p == nil {
		return "None"
	}
	return strconv.Itoa(*p)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func kinds(ks []report.Kind) string {
	if len(ks) == 0 {
		return "[] (healthy)"
	}
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = string(k)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func moeWord(moe bool) string {
	if moe {
		return "MoE"
	}
	return "dense"
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// writeAddressTable lists every address of the node's processes (report.Address): what each binds,
// opens, dials, probes or advertises, and what came of it. Addresses that are listed only (vLLM
// binds them with port 0, or the rendezvous layer meets there) say so.
func writeAddressTable(w io.Writer, procs []report.Process) {
	n := 0
	for _, p := range procs {
		n += len(p.Addresses)
	}
	if n == 0 {
		return
	}
	fmt.Fprintf(w, "  addresses (%d)\n", n)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "    PROCESS\tCHANNEL\tROLE\tENDPOINT\tKEY\tOUTCOME")
	for _, p := range procs {
		for _, a := range p.Addresses {
			fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\t%s\n", p.ID, a.Channel, a.Role, a.Endpoint, dash(a.Key), addressOutcome(p, a))
		}
	}
	tw.Flush()
}

// addressOutcome says what happened to an address, or what would (a prediction).
func addressOutcome(p report.Process, a report.Address) string {
	switch {
	case !a.Exercised:
		return "(listed)"
	case a.Error != "":
		return a.Error
	case a.Role == report.AddressProbe && len(a.Ports) > 0:
		return "ports " + strings.Trim(strings.Join(strings.Fields(fmt.Sprint(a.Ports)), ","), "[]")
	case a.Role == report.AddressProbe && p.Hung != nil:
		return "hung: " + p.Hung.Where
	case a.Role == report.AddressBind && a.BindSeq > 0:
		s := "bound #" + strconv.Itoa(a.BindSeq)
		if len(a.Served) > 0 {
			s += fmt.Sprintf(", answered %d", len(a.Served))
		}
		return s
	case a.Role == report.AddressOpen && a.ServedBy == p.ID:
		return "created #" + strconv.Itoa(a.BindSeq)
	case a.Role == report.AddressOpen && a.ServedBy != "":
		return "opened " + a.ServedBy + "'s"
	case a.Role == report.AddressConnect && a.ServedBy != "":
		return "answered by " + a.ServedBy
	case a.Role == report.AddressConnect && a.Nonce != "":
		return "answered"
	case a.Role == report.AddressAdvertise:
		return "advertised"
	}
	return "-"
}
