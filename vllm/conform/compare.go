// Package conform compares two planners field by field: the Go model and vLLM's own launch code
// (package vllm/probe), on shipped scenarios or on generated deployments that cover every launch
// path. It is how a vLLM maintainer learns whether a change to vLLM's launch code changes any
// process's identity, and how widetp learns where its model drifted.
package conform

import (
	"fmt"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/widetp/widetp/vllm"
	"github.com/widetp/widetp/vllm/probe"
)

// Disagreement is one field of one process on which the planners differ.
type Disagreement struct {
	Scenario string `json:"scenario"`
	// Process is the process ID (report.Process.ID).
	Process string `json:"process"`
	// Field names what differs: "exists", an identity field ("data_parallel_index"), "crash",
	// "rendezvous[1].world_size", "child_failure", ...
	Field string `json:"field"`
	VLLM  string `json:"vllm"`
	Model string `json:"model"`
	// Area groups fields for the summary: process, identity, crash, rendezvous, connector,
	// lifecycle, address, options.
	Area string `json:"area"`
}

// Counts is what a comparison covered.
type Counts struct {
	Deployments int `json:"deployments"`
	Processes   int `json:"processes"`
	Fields      int `json:"fields"`
	// Options are the parser options compared (Options): `vllm serve`'s and grpc_server's.
	Options int `json:"options"`
}

// Compare compares the plans of one deployment, vLLM's (got) against the model's (want), and
// returns every disagreement, sorted by process and field. Addresses that are simulation
// conventions (host-local rendezvous, vllm/rendezvous.go) are compared by structure: which
// processes meet there, not the port.
func Compare(scenario string, vllmPlans, modelPlans []*vllm.NodePlan, c *Counts) []Disagreement {
	v, m := flatten(vllmPlans), flatten(modelPlans)
	vCanon, mCanon := canonicalAddresses(vllmPlans), canonicalAddresses(modelPlans)
	var out []Disagreement
	add := func(id, field, area, vv, mv string) {
		out = append(out, Disagreement{Scenario: scenario, Process: id, Field: field, VLLM: vv, Model: mv, Area: area})
	}
	ids := map[string]bool{}
	for id := range v {
		ids[id] = true
	}
	for id := range m {
		ids[id] = true
	}
	sorted := make([]string, 0, len(ids))
	for id := range ids {
		sorted = append(sorted, id)
	}
	sort.Strings(sorted)
	c.Deployments++
	for _, id := range sorted {
		vp, mp := v[id], m[id]
		c.Processes++
		c.Fields++
		if vp == nil || mp == nil {
			add(id, "exists", "process", present(vp), present(mp))
			continue
		}
		for _, f := range fields(vp, vCanon, mp, mCanon) {
			c.Fields++
			if f.v != f.m {
				add(id, f.name, f.area, f.v, f.m)
			}
		}
	}
	return out
}

func present(p *vllm.ProcessPlan) string {
	if p == nil {
		return "absent"
	}
	return "present (" + string(p.Identity.Role) + ")"
}

type field struct{ name, area, v, m string }

func fields(v *vllm.ProcessPlan, vc map[string]string, m *vllm.ProcessPlan, mc map[string]string) []field {
	vi, mi := v.Identity, m.Identity
	out := []field{
		{"role", "identity", string(vi.Role), string(mi.Role)},
		{"parent", "identity", vi.Parent, mi.Parent},
		{"data_parallel_size", "identity", itoa(vi.DataParallelSize), itoa(mi.DataParallelSize)},
		{"data_parallel_rank", "identity", itoa(vi.DataParallelRank), itoa(mi.DataParallelRank)},
		{"data_parallel_rank_local", "identity", optInt(vi.DataParallelRankLocal), optInt(mi.DataParallelRankLocal)},
		{"data_parallel_index", "identity", itoa(vi.DataParallelIndex), itoa(mi.DataParallelIndex)},
		{"local_engines_only", "identity", strconv.FormatBool(vi.LocalEnginesOnly), strconv.FormatBool(mi.LocalEnginesOnly)},
		{"node_rank_within_dp", "identity", itoa(vi.NodeRankWithinDP), itoa(mi.NodeRankWithinDP)},
		{"rank", "identity", optInt(vi.Rank), optInt(mi.Rank)},
		{"tp_rank", "identity", optInt(vi.TPRank), optInt(mi.TPRank)},
		{"pp_rank", "identity", optInt(vi.PPRank), optInt(mi.PPRank)},
		{"replica", "rendezvous", canonReplica(vi.Replica, vc), canonReplica(mi.Replica, mc)},
		{"mooncake_dp_index", "connector", optInt(vi.MooncakeDPIndex), optInt(mi.MooncakeDPIndex)},
		{"lookup_path", "connector", vi.LookupPath, mi.LookupPath},
		{"lookup_role", "connector", string(vi.LookupRole), string(mi.LookupRole)},
		{"engine_id", "connector", vi.EngineID, mi.EngineID},
		{"engine_id_from_rank", "connector", optInt(v.EngineIDFromRank), optInt(m.EngineIDFromRank)},
		{"binds_lookup", "connector", strconv.FormatBool(v.BindsLookup), strconv.FormatBool(m.BindsLookup)},
		{"connects_lookup", "connector", strconv.FormatBool(v.ConnectsLookup), strconv.FormatBool(m.ConnectsLookup)},
		{"registers_segment", "connector", strconv.FormatBool(v.RegistersSegment), strconv.FormatBool(m.RegistersSegment)},
		{"segment_host", "connector", v.SegmentHost, m.SegmentHost},
		{"crash", "crash", crashText(v.Crash), crashText(m.Crash)},
		{"child_failure", "lifecycle", v.ChildFailure, m.ChildFailure},
		{"children_after_rendezvous", "lifecycle", strconv.FormatBool(v.ChildrenAfterRendezvous), strconv.FormatBool(m.ChildrenAfterRendezvous)},
		{"stops_on_child_failure", "lifecycle", strconv.FormatBool(v.StopsOnChildFailure), strconv.FormatBool(m.StopsOnChildFailure)},
		{"children", "process", itoa(len(v.Children)), itoa(len(m.Children))},
		{"rendezvous", "rendezvous", itoa(len(v.Rendezvous)), itoa(len(m.Rendezvous))},
	}
	for _, ch := range probe.AddressChannels {
		out = append(out, field{"addresses." + ch, "address", addressesOf(v, ch, vc), addressesOf(m, ch, mc)})
	}
	for i := 0; i < len(v.Rendezvous) && i < len(m.Rendezvous); i++ {
		a, b := v.Rendezvous[i], m.Rendezvous[i]
		p := fmt.Sprintf("rendezvous[%d].", i)
		out = append(out,
			field{p + "kind", "rendezvous", a.Kind, b.Kind},
			field{p + "address", "rendezvous", canon(a.Address, vc), canon(b.Address, mc)},
			field{p + "world_size", "rendezvous", itoa(a.WorldSize), itoa(b.WorldSize)},
			field{p + "rank", "rendezvous", itoa(a.Rank), itoa(b.Rank)},
			field{p + "binds_early", "rendezvous", strconv.FormatBool(a.BindsEarly), strconv.FormatBool(b.BindsEarly)},
			field{p + "hello", "rendezvous", hello(a.Hello), hello(b.Hello)},
			field{p + "expect", "rendezvous", expect(a.Expect), expect(b.Expect)},
		)
	}
	return out
}

func hello(h *vllm.EngineHello) string {
	if h == nil {
		return ""
	}
	// The config hash is each planner's own digest: CompareHandshakes checks what it decides.
	return fmt.Sprintf("index=%d local=%t headless=%t hashed=%t", h.Index, h.Local, h.Headless, h.ConfigHash != "")
}

func expect(x *vllm.HandshakeExpect) string {
	if x == nil {
		return ""
	}
	return fmt.Sprintf("first=%d count=%d local=%d remote_headless=%t coordinated=%t", x.First, x.Count, x.LocalCount, x.RemoteHeadless, x.ConfigHash != "")
}

func crashText(c *vllm.Crash) string {
	if c == nil {
		return ""
	}
	return string(c.Stage) + ": " + c.Error
}

func itoa(i int) string { return strconv.Itoa(i) }

func optInt(p *int) string {
	if p == nil {
		return "None"
	}
	return strconv.Itoa(*p)
}

func flatten(plans []*vllm.NodePlan) map[string]*vllm.ProcessPlan { return vllm.ProcessesByID(plans) }

// canonicalAddresses names every host-local rendezvous address of the plans by the first process
// (in ID order) that joins it and its position there, so two planners that put the same processes
// at one local barrier compare equal whatever slot they numbered it.
func canonicalAddresses(plans []*vllm.NodePlan) map[string]string {
	procs := flatten(plans)
	ids := make([]string, 0, len(procs))
	for id := range procs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := map[string]string{}
	for _, id := range ids {
		p := procs[id]
		for i, r := range p.Rendezvous {
			if !isLocal(r.Address, p.Identity.Host) {
				continue
			}
			if _, ok := out[r.Address]; !ok {
				out[r.Address] = fmt.Sprintf("local(%s rendezvous[%d])", id, i)
			}
		}
	}
	return out
}

// isLocal says whether addr is a host-local rendezvous of host under the model's convention
// (vllm.LocalPortBase): such an address is named by who meets there.
func isLocal(addr, host string) bool {
	h, port, err := net.SplitHostPort(addr)
	if err != nil || h != host {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= vllm.LocalPortBase
}

func canon(addr string, c map[string]string) string {
	if s, ok := c[addr]; ok {
		return s
	}
	return addr
}

func canonReplica(replica string, c map[string]string) string {
	addr, slot, ok := strings.Cut(replica, "/dp")
	if !ok {
		return replica
	}
	return canon(addr, c) + "/dp" + slot
}

// Summary counts the disagreements by area.
func Summary(ds []Disagreement) map[string]int {
	out := map[string]int{}
	for _, d := range ds {
		out[d.Area]++
	}
	return out
}

// addressesOf is a process's addresses on one channel, canonical and sorted (the planners list a
// stage's steps in the order their code reaches them, which is the same steps either way): channel
// role, endpoint and key with random parts named by shape (an ipc path's uuid4, a file store's
// hex) and host-local rendezvous named by who meets there, whether a run exercises it, its stage,
// how a bind fails and listens, and the allocator's inputs (the retry rules are a profile's).
func addressesOf(p *vllm.ProcessPlan, channel string, c map[string]string) string {
	var out []string
	for _, a := range p.Addresses {
		if a.Channel != channel {
			continue
		}
		key := canonEndpoint(a.Key, c)
		if a.Channel == "torch-world" {
			key = canonReplica(a.Key, c)
		}
		s := fmt.Sprintf("%s %s key=%s exercised=%t stage=%s", a.Role, canonEndpoint(a.Endpoint, c), key, a.Exercised, a.Stage)
		if a.Flavor != "" || a.ListenAt != "" || a.ReusePort {
			s += fmt.Sprintf(" flavor=%s listen_at=%s reuse_port=%t", a.Flavor, a.ListenAt, a.ReusePort)
		}
		if x := a.Alloc; x != nil {
			s += fmt.Sprintf(" alloc=%s/%d vllm_port=%s", x.Func, x.Count, optInt(x.VLLMPort))
			if x.Reserved != nil {
				s += fmt.Sprintf(" reserved=%d-%d", x.Reserved[0], x.Reserved[1])
			}
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

var (
	uuidPath = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	})
	hexStore = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`/vllm_dist_[0-9a-f]{32}$`) })
)

// canonEndpoint names an endpoint's random part by its shape and a host-local rendezvous address
// by who meets there.
func canonEndpoint(ep string, c map[string]string) string {
	ep = uuidPath().ReplaceAllString(ep, "/<uuid4>")
	ep = hexStore().ReplaceAllString(ep, "/vllm_dist_<hex>")
	if rest, ok := strings.CutPrefix(ep, "tcp://"); ok {
		return "tcp://" + canon(rest, c)
	}
	return canon(ep, c)
}
