package check

import (
	"fmt"
	"sort"
	"strings"

	"github.com/widetp/widetp/report"
)

// The address checks generalise the lookup socket's (lookup.go) to every address a process
// binds, opens or dials (report.Address): two owners of one address on one host, a client answered
// by someone other than who its identity names, a client answered by nobody. They read only the
// exercised entries — the ones a run binds or dials for real, and the model predicts an outcome
// for — so a prediction and an observation are judged alike.

// addrRef is one address entry of one process.
type addrRef struct {
	p *report.Process
	a *report.Address
}

func exercised(procs []report.Process, keep func(a *report.Address) bool) []addrRef {
	var out []addrRef
	for i := range procs {
		p := &procs[i]
		for j := range p.Addresses {
			a := &p.Addresses[j]
			if a.Exercised && keep(a) {
				out = append(out, addrRef{p, a})
			}
		}
	}
	return out
}

// addressCollision reports two owners of one address on one host:
//   - a TCP bind that failed with EADDRINUSE: the error proves another socket held the port
//     (Linux refuses a second listener, SO_REUSEADDR or not); the holders of the host's port that
//     reported are named with it;
//   - an ipc path bound by two live processes: libzmq lets the later bind take the path over
//     silently, and the earlier binder lives on, unreachable (as lookup-path-collision);
//   - a per-host resource (a /dev/shm region) opened by processes of different owners (Keys): the
//     name that should be one owner's is shared — the later opener found the first one's.
func addressCollision(procs []report.Process) []report.Violation {
	var out []report.Violation
	binds := exercised(procs, func(a *report.Address) bool { return a.Role == report.AddressBind })
	// TCP: every EADDRINUSE, with whoever else bound that socket on the host.
	for _, f := range binds {
		if !f.a.AddrInUse() {
			continue
		}
		var holders []string
		involved := []string{f.p.ID}
		for _, h := range binds {
			if h.p.Host == f.p.Host && h.p.ID != f.p.ID && h.a.Error == "" && report.SameSocket(h.a.Endpoint, f.a.Endpoint) {
				holders = append(holders, fmt.Sprintf("%s (%s %s, key %s, bind %d)", h.p.ID, h.a.Channel, h.a.Endpoint, keyText(h.a.Key), h.a.BindSeq))
				involved = append(involved, h.p.ID)
			}
		}
		held := "a socket no process of the deployment reported"
		if len(holders) > 0 {
			held = strings.Join(holders, ", ")
		}
		out = append(out, report.Violation{Kind: report.AddressCollision,
			Message: fmt.Sprintf("%s: on host %s, %s (%s, key %s) could not bind %s, held by %s: %s",
				report.AddressCollision, f.p.Host, f.p.ID, f.a.Channel, keyText(f.a.Key), f.a.Endpoint, held, f.a.Error),
			Processes: uniqueSorted(involved)})
	}
	// ipc binds and shared resources, grouped by host and socket.
	type group struct {
		host, endpoint string
		refs           []addrRef
	}
	var groups []*group
	find := func(host, ep string) *group {
		for _, g := range groups {
			if g.host == host && report.SameSocket(g.endpoint, ep) {
				return g
			}
		}
		g := &group{host: host, endpoint: ep}
		groups = append(groups, g)
		return g
	}
	for _, r := range exercised(procs, func(a *report.Address) bool {
		return a.Tried() && a.Error == "" &&
			(a.Role == report.AddressBind && strings.HasPrefix(a.Endpoint, "ipc://") || a.Role == report.AddressOpen)
	}) {
		if r.a.Role == report.AddressBind && !r.p.Live() {
			continue // a crashed binder's ipc socket is gone
		}
		g := find(r.p.Host, r.a.Endpoint)
		g.refs = append(g.refs, r)
	}
	for _, g := range groups {
		owners := map[string]bool{}
		for _, r := range g.refs {
			owners[r.a.Key] = true
		}
		ipc := strings.HasPrefix(g.endpoint, "ipc://")
		if ipc && len(g.refs) < 2 || !ipc && len(owners) < 2 {
			continue
		}
		sort.SliceStable(g.refs, func(i, j int) bool {
			if g.refs[i].a.BindSeq != g.refs[j].a.BindSeq {
				return g.refs[i].a.BindSeq < g.refs[j].a.BindSeq
			}
			return g.refs[i].p.ID < g.refs[j].p.ID
		})
		var parts, involved []string
		for _, r := range g.refs {
			parts = append(parts, fmt.Sprintf("%s (key %s, %s %d)", r.p.ID, keyText(r.a.Key), r.a.Role, r.a.BindSeq))
			involved = append(involved, r.p.ID)
		}
		what := fmt.Sprintf("%d live processes bound %s (the last binder takes the path over)", len(g.refs), g.endpoint)
		if !ipc {
			what = fmt.Sprintf("%d owners opened %s", len(owners), g.endpoint)
		}
		out = append(out, report.Violation{Kind: report.AddressCollision,
			Message:   fmt.Sprintf("%s: on host %s, %s: %s", report.AddressCollision, g.host, what, idList(parts)),
			Processes: uniqueSorted(involved)})
	}
	return out
}

// addressMisrouted reports a client answered by a process that is not who its identity names: a
// connect answered by a server whose bind Key differs from the Key the client must reach (or by a
// process that left no record, or by nobody that claims the request's nonce), and an open that
// found a resource another owner created.
func addressMisrouted(procs []report.Process) []report.Violation {
	byID := map[string]*report.Process{}
	for i := range procs {
		byID[procs[i].ID] = &procs[i]
	}
	serverKey := func(srv *report.Process, channel string) (string, bool) {
		for _, a := range srv.Addresses {
			if a.Channel == channel && (a.Role == report.AddressBind || a.Role == report.AddressOpen) && a.Error == "" {
				return a.Key, true
			}
		}
		return "", false
	}
	var out []report.Violation
	for _, c := range exercised(procs, func(a *report.Address) bool {
		return (a.Role == report.AddressConnect || a.Role == report.AddressOpen) && a.Answered()
	}) {
		var msg string
		involved := []string{c.p.ID}
		what := "dialled"
		if c.a.Role == report.AddressOpen {
			what = "opened"
		}
		switch srv := byID[c.a.ServedBy]; {
		case c.a.ServedBy == "":
			msg = fmt.Sprintf("%s %s (%s) and got an answer no process of the deployment claims (nonce %q)", what, c.a.Endpoint, c.a.Channel, c.a.Nonce)
		case srv == nil:
			msg = fmt.Sprintf("%s %s (%s) and was answered by %s, which left no record", what, c.a.Endpoint, c.a.Channel, c.a.ServedBy)
			involved = append(involved, c.a.ServedBy)
		default:
			key, ok := serverKey(srv, c.a.Channel)
			if ok && key == c.a.Key {
				continue
			}
			if c.a.Role == report.AddressOpen {
				msg = fmt.Sprintf("opened %s (%s) for %s and found the one %s created for %s", c.a.Endpoint, c.a.Channel, keyText(c.a.Key), srv.ID, keyText(key))
			} else {
				msg = fmt.Sprintf("dialled %s (%s) to reach %s and was answered by %s, which serves %s", c.a.Endpoint, c.a.Channel, keyText(c.a.Key), srv.ID, keyText(key))
			}
			involved = append(involved, srv.ID)
		}
		out = append(out, report.Violation{Kind: report.AddressMisrouted,
			Message:   fmt.Sprintf("%s: %s on %s %s", report.AddressMisrouted, c.p.ID, c.p.Host, msg),
			Processes: uniqueSorted(involved)})
	}
	return out
}

// addressUnreachable reports a client that got no answer: a connect whose request went unanswered
// within its bound, and a live process that reported no outcome for a connect of its plan (it
// never got an answer, or never asked — either way it cannot reach its peer). A client that
// crashed first is process-crashed's.
func addressUnreachable(procs []report.Process) []report.Violation {
	var out []report.Violation
	for _, c := range exercised(procs, func(a *report.Address) bool { return a.Role == report.AddressConnect }) {
		var why string
		switch {
		case c.a.Error != "":
			why = c.a.Error
		case !c.a.Tried() && c.p.Live() && c.p.Ready:
			why = "no outcome was reported"
		default:
			continue
		}
		out = append(out, report.Violation{Kind: report.AddressUnreachable,
			Message: fmt.Sprintf("%s: %s on %s dialled %s (%s) to reach %s and got no answer: %s",
				report.AddressUnreachable, c.p.ID, c.p.Host, c.a.Endpoint, c.a.Channel, keyText(c.a.Key), why),
			Processes: []string{c.p.ID}})
	}
	return out
}

// processHung reports every process a step of which never returned, with the bound that caught it.
func processHung(procs []report.Process) []report.Violation {
	var out []report.Violation
	for i := range procs {
		p := &procs[i]
		if p.Hung == nil {
			continue
		}
		out = append(out, report.Violation{Kind: report.ProcessHung,
			Message: fmt.Sprintf("%s: %s (%s on %s) never got past %s: %s (caught by %s)",
				report.ProcessHung, p.ID, p.Role, p.Host, p.Hung.Where, p.Hung.Detail, p.Hung.Deadline),
			Processes: []string{p.ID}})
	}
	return out
}

func keyText(k string) string {
	if k == "" {
		return "(none)"
	}
	return k
}
