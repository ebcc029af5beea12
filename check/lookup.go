package check

import (
	"fmt"
	"sort"
	"strings"

	"github.com/widetp/widetp/report"
)

// lookupPathCollision reports ipc paths bound by more than one live lookup server of one host. ipc
// paths are files, so only binders on one host can collide; and libzmq lets a later bind take the
// path over silently (the Mooncake lookup server even unlinks the file first), so a collision never
// crashes anything — the first binder lives on, unreachable. Only live servers hold a path: a
// crashed binder's socket is gone and a later bind of its path is harmless. A process that exited
// because the teardown or a fault asked it to counts as live (report.Process.Live): it held the
// path until then.
func lookupPathCollision(procs []report.Process) []report.Violation {
	type key struct{ host, path string }
	servers := map[key][]*report.Process{}
	for i := range procs {
		p := &procs[i]
		// BindSeq is set when the server bound (report.Process.BindSeq): a worker that never got
		// that far holds no path.
		if p.LookupRole != report.LookupServer || p.LookupPath == "" || !p.Live() || p.BindSeq == 0 {
			continue
		}
		// Paths that name one socket file are one path (report.LookupEndpointKey).
		k := key{p.Host, report.LookupEndpointKey(p.LookupPath)}
		servers[k] = append(servers[k], p)
	}
	var out []report.Violation
	for k, ps := range servers {
		if len(ps) < 2 {
			continue
		}
		// Bind order decides who captures new connections: the last binder.
		sort.SliceStable(ps, func(i, j int) bool {
			if ps[i].BindSeq != ps[j].BindSeq {
				return ps[i].BindSeq < ps[j].BindSeq
			}
			return ps[i].ID < ps[j].ID
		})
		parts := make([]string, len(ps))
		for i, p := range ps {
			parts[i] = fmt.Sprintf("%s (replica %s, Mooncake DP index %s, bind %d)", p.ID, replicaName(p.Replica), optInt(p.MooncakeDPIndex), p.BindSeq)
		}
		out = append(out, report.Violation{
			Kind: report.LookupPathCollision,
			Message: fmt.Sprintf("%s: on host %s, %d live lookup servers bound %s: %s",
				report.LookupPathCollision, k.host, len(ps), k.path, strings.Join(parts, ", ")),
			Processes: uniqueSorted(ids(ps)),
		})
	}
	return out
}

// lookupMisrouted reports lookups answered by a lookup server outside the client's replica: the
// silent consequence of a path collision (the last binder answers everyone who connects after it).
// A lookup answered by a process that left no record, or answered with no server claiming it
// (no Served list names its nonce), is misrouted too: nothing shows it reached its own replica,
// and passing it would hide exactly the takeover this check exists for.
func lookupMisrouted(procs []report.Process) []report.Violation {
	byID := map[string]*report.Process{}
	for i := range procs {
		byID[procs[i].ID] = &procs[i]
	}
	var out []report.Violation
	for i := range procs {
		c := &procs[i]
		l := c.Lookup
		if l == nil || l.Error != "" {
			continue
		}
		var msg string
		involved := []string{c.ID}
		switch srv := byID[l.ServedBy]; {
		case l.ServedBy == "":
			msg = fmt.Sprintf("%s: %s (replica %s) looked up at %s and got an answer no lookup server of the deployment claims (nonce %q)",
				report.LookupMisrouted, c.ID, replicaName(c.Replica), c.LookupPath, l.Nonce)
		case srv == nil:
			msg = fmt.Sprintf("%s: %s (replica %s) looked up at %s and was answered by %s, which left no record",
				report.LookupMisrouted, c.ID, replicaName(c.Replica), c.LookupPath, l.ServedBy)
			involved = append(involved, l.ServedBy)
		case srv.Replica != c.Replica || c.Replica == "":
			msg = fmt.Sprintf("%s: %s (replica %s, Mooncake DP index %s) looked up at %s and was answered by %s of replica %s (Mooncake DP index %s, bound %s)",
				report.LookupMisrouted, c.ID, replicaName(c.Replica), optInt(c.MooncakeDPIndex), c.LookupPath,
				srv.ID, replicaName(srv.Replica), optInt(srv.MooncakeDPIndex), srv.LookupPath)
			involved = append(involved, srv.ID)
		default:
			continue
		}
		out = append(out, report.Violation{Kind: report.LookupMisrouted, Message: msg, Processes: uniqueSorted(involved)})
	}
	return out
}

// lookupUnreachable reports lookups that got no answer within their bound. A live lookup client
// that reported no result at all is counted too: it either never got an answer or never asked,
// and either way its scheduler cannot reach the workers' cache. A client that crashed before
// looking up is process-crashed's, and one that never built its connector (ConnectorUsers: a live
// engine whose workers never started) never had a lookup to make.
func lookupUnreachable(procs []report.Process) []report.Violation {
	var out []report.Violation
	used := ConnectorUsers(procs)
	for i := range procs {
		c := &procs[i]
		var why string
		switch {
		case c.Lookup != nil && c.Lookup.Error != "":
			why = c.Lookup.Error
		case c.Lookup == nil && c.LookupRole == report.LookupClient && c.LookupPath != "" && c.Live() && used[c.ID]:
			why = "no lookup result was reported"
		default:
			continue
		}
		out = append(out, report.Violation{
			Kind: report.LookupUnreachable,
			Message: fmt.Sprintf("%s: %s on %s (replica %s, Mooncake DP index %s) got no answer at %s: %s",
				report.LookupUnreachable, c.ID, c.Host, replicaName(c.Replica), optInt(c.MooncakeDPIndex), c.LookupPath, why),
			Processes: []string{c.ID},
		})
	}
	return out
}
