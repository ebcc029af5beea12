package fakestore

import (
	"sort"
	"strings"
	"time"

	"github.com/widetp/widetp/fakestore/api"
	"github.com/widetp/widetp/report"
)

// Registration kinds.
const (
	kindRPCMeta  = "rpc_meta"
	kindRAM      = "ram"
	kindMetadata = "metadata"
	kindSegment  = "segment"
)

// classifyKey splits a metadata key into its kind and the segment name it names: keys are
// mooncake/[<cluster>/]rpc_meta/<host:port> and mooncake/[<cluster>/]ram/<segment name>.
func classifyKey(key string) (kind, name string) {
	for _, k := range []string{kindRPCMeta, kindRAM} {
		marker := k + "/"
		for i := strings.Index(key, marker); i >= 0; {
			if i == 0 || key[i-1] == '/' {
				return k, key[i+len(marker):]
			}
			j := strings.Index(key[i+1:], marker)
			if j < 0 {
				break
			}
			i += 1 + j
		}
	}
	return kindMetadata, key
}

// registry is the store's record of who registered what: the inspection data tests read. It
// survives a restart fault (the observer does not forget what it saw); only reset clears it.
type registry struct {
	regs       map[regKey]*api.Registration
	order      []regKey
	duplicates []api.Duplicate
	reports    map[string]report.Process
	posts      map[string]int
	reportLog  []report.Process
	nodes      map[string]api.NodeStatus
}

// regKey names a registration: a metadata key of a kind, or a segment id.
type regKey struct{ kind, key string }

func newRegistry() *registry {
	return &registry{regs: map[regKey]*api.Registration{}, reports: map[string]report.Process{}, posts: map[string]int{}, nodes: map[string]api.NodeStatus{}}
}

func (r *registry) get(kind, key, name string) *api.Registration {
	id := regKey{kind, key}
	reg, ok := r.regs[id]
	if !ok {
		reg = &api.Registration{Kind: kind, Key: key, Name: name}
		r.regs[id] = reg
		r.order = append(r.order, id)
	}
	return reg
}

// write records an accepted write (a PUT that stored, a mount).
func (r *registry) write(kind, key, name, peer, op, result string, now time.Time) *api.Registration {
	reg := r.get(kind, key, name)
	if reg.Writes == 0 {
		reg.FirstWrite = now
	}
	reg.Writes++
	reg.LastWrite = now
	reg.Writer = peer
	reg.Live = true
	reg.History = append(reg.History, api.RegistrationEntry{Time: now, Op: op, Peer: peer, Result: result})
	return reg
}

// note records something that did not store (a rejected or unchanged PUT, a delete, an expiry).
func (r *registry) note(kind, key, name, peer, op, result string, live bool, now time.Time) {
	reg := r.get(kind, key, name)
	reg.Live = live
	reg.History = append(reg.History, api.RegistrationEntry{Time: now, Op: op, Peer: peer, Result: result})
}

// noteIfKnown records on an existing registration only (a delete of a key nobody wrote).
func (r *registry) noteIfKnown(kind, key, peer, op, result string, live bool, now time.Time) {
	if reg, ok := r.regs[regKey{kind, key}]; ok {
		reg.Live = live
		reg.History = append(reg.History, api.RegistrationEntry{Time: now, Op: op, Peer: peer, Result: result})
	}
}

func (r *registry) list() []api.Registration {
	out := make([]api.Registration, 0, len(r.order))
	for _, id := range r.order {
		reg := *r.regs[id]
		reg.History = append([]api.RegistrationEntry(nil), reg.History...)
		out = append(out, reg)
	}
	return out
}

func (r *registry) addReport(p report.Process) int {
	r.reports[p.ID] = p
	r.reportLog = append(r.reportLog, p)
	r.posts[p.ID]++
	return r.posts[p.ID]
}

func (r *registry) latestReports() []report.Process {
	out := make([]report.Process, 0, len(r.reports))
	for _, p := range r.reports {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// setNode keeps a node's status unless a newer one (a later Boot, or a higher Seq of the same
// Boot) is already there: a node's posts may overtake each other on separate connections.
func (r *registry) setNode(st api.NodeStatus) {
	if old, ok := r.nodes[st.Host]; ok && (old.Boot > st.Boot || old.Boot == st.Boot && old.Seq > st.Seq) {
		return
	}
	r.nodes[st.Host] = st
}

func (r *registry) nodeList() []api.NodeStatus {
	out := make([]api.NodeStatus, 0, len(r.nodes))
	for _, st := range r.nodes {
		st.Pending = append([]string(nil), st.Pending...)
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Host < out[j].Host })
	return out
}
