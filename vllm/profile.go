package vllm

import (
	"fmt"
	"sort"
	"strings"
)

// Profile pins the vLLM behaviours that changed over time: one value per Change. A scenario names
// a profile (`main`, `pre-48061`) or a base profile plus changes (README, "Profiles").
type Profile struct {
	// Name is the named profile, or "<base>+<change>=<value>,..." for a resolved map.
	Name string `json:"name"`
	// The address rules (profile_addresses.go): how vLLM's port allocators scan (PRs #36191,
	// #50965), how a single-node executor's workers meet (PR #50999), where the KV-offload P2P
	// control socket binds (PR #47636), what names the offload shared-memory region (PR #47987),
	// who listens on the NIXL side channel (PR #26338), and where a KV event publisher with port 0
	// binds (PR #55844).
	VLLMPortList       string `json:"vllm_port_list"`
	OpenPortReserved   string `json:"open_port_reserved"`
	ExecutorRendezvous string `json:"executor_rendezvous"`
	OffloadP2PPort     string `json:"offload_p2p_port"`
	OffloadRegionKey   string `json:"offload_region_key"`
	NIXLSideChannel    string `json:"nixl_side_channel"`
	KVEventsPortZero   string `json:"kv_events_port_zero"`
	// MooncakeDPIndex is the Mooncake store connector's DP engine index rule (PR #48061).
	MooncakeDPIndex string `json:"mooncake_dp_index"`
	// NNodesWithinDP is ParallelConfig.nnodes_within_dp's rounding (PR #53743).
	NNodesWithinDP string `json:"nnodes_within_dp"`
	// EngineIDDPSuffix is the DP rank run_engine_core appends to the KV engine_id (PR #46628).
	EngineIDDPSuffix string `json:"engine_id_dp_suffix"`
	// DenseExternalDP is whether create_engine_config lets a dense model use external DP.
	DenseExternalDP string `json:"dense_external_dp"`
	// EngineIDSync is how workers agree on the KV engine_id at init (PRs #39907, #44528).
	EngineIDSync string `json:"engine_id_sync"`
	// ExternalLBRank is whether --nnodes inference overrides an explicit --data-parallel-rank under
	// external LB (PR #53743, second half).
	ExternalLBRank string `json:"external_lb_rank"`
	// HeadlessRankCheck is which DP rank run_headless refuses (PRs #19790, #20398; vLLM#20399).
	HeadlessRankCheck string `json:"headless_rank_check"`
	// StartRankZero is whether create_engine_config reads --data-parallel-start-rank 0 as a start
	// rank or as no start rank at all (PR #47692, vLLM#47691).
	StartRankZero string `json:"start_rank_zero"`
	// DPLaunchChecks is how create_engine_config refuses an invalid data-parallel launch (PR #49124).
	DPLaunchChecks string `json:"dp_launch_checks"`
	// The fault rules (profile_faults.go): how the front end's ZMQ sockets get their ports
	// (PR #42585) and what a Mooncake client does on NEED_REMOUNT (Mooncake PRs #845, #2077).
	ZMQPortAlloc    string `json:"zmq_port_alloc"`
	MooncakeRemount string `json:"mooncake_remount"`
}

// Change values. The first value of each Change is the older behaviour.
const (
	MooncakeDPIndexLegacy = "legacy" // local rank when local_engines_only, asserting it is set
	MooncakeDPIndexGlobal = "global" // data_parallel_index, always

	NNodesWithinDPFloor = "floor" // nnodes // (D // L), can be 0
	NNodesWithinDPClamp = "clamp" // max(nnodes // (D // L), 1)

	EngineIDSuffixLocal  = "local"  // engine_id + "_dp{local_dp_rank}"
	EngineIDSuffixGlobal = "global" // engine_id + "_dp{dp_rank}"

	DenseExternalDPAllow  = "allow"
	DenseExternalDPReject = "reject" // ValueError: Non-MoE models do not support external data parallel mode

	EngineIDSyncNone = "none"  // each CLI parse keeps its own uuid4
	EngineIDSyncTP   = "tp"    // workers take TP rank 0's engine_id (PR #39907)
	EngineIDSyncTPPP = "tp_pp" // then PP rank 0's, across the PP group too (PR #44528)

	ExternalLBRankInfer    = "infer"    // the rank inferred from --node-rank overrides an explicit one
	ExternalLBRankExplicit = "explicit" // an explicit rank is kept; ambiguous inference is an error

	HeadlessRankCheckDerived = "derived" // parallel_config.data_parallel_rank is not None: always true
	HeadlessRankCheckRaw     = "raw"     // --data-parallel-rank was given
	HeadlessRankCheckNone    = "none"    // no check (headless followers of external-LB wide TP pass a rank)

	StartRankZeroUnset = "unset" // `if self.data_parallel_start_rank`: 0 is falsy, so no start rank
	StartRankZeroSet   = "set"   // `is not None`: 0 infers hybrid LB and is the node's DP rank

	DPLaunchChecksAssert     = "assert"      // bare asserts: AssertionError with the old messages
	DPLaunchChecksValueError = "value_error" // ValueError("Invalid data-parallel launch options: ...")
)

// Change is one general rule of vLLM that changed over time, and the values a profile can pin.
type Change struct {
	Name string
	// Values lists the accepted values, older behaviour first.
	Values []string
	// Doc says what the rule is and where it changed.
	Doc string
	get func(*Profile) *string
}

// changes is the catalog, in the order of the design contract (the first four) then the ones
// added for the bugs that needed them (documented in the report and the README).
var changes = []Change{
	{
		Name:   "mooncake_dp_index",
		Values: []string{MooncakeDPIndexLegacy, MooncakeDPIndexGlobal},
		Doc: "Mooncake store connector's DP engine index (vLLM PR #48061): legacy = " +
			"data_parallel_rank_local when local_engines_only (bare AssertionError when it is None), " +
			"else data_parallel_index; global = data_parallel_index always",
		get: func(p *Profile) *string { return &p.MooncakeDPIndex },
	},
	{
		Name:   "nnodes_within_dp",
		Values: []string{NNodesWithinDPFloor, NNodesWithinDPClamp},
		Doc: "ParallelConfig.nnodes_within_dp (vLLM PR #53743): floor = nnodes // (D // L), which is 0 " +
			"when external-LB replicas outnumber nodes (ZeroDivisionError); clamp = max(that, 1)",
		get: func(p *Profile) *string { return &p.NNodesWithinDP },
	},
	{
		Name:   "engine_id_dp_suffix",
		Values: []string{EngineIDSuffixLocal, EngineIDSuffixGlobal},
		Doc: "DP suffix of the KV engine_id in run_engine_core (vLLM PR " +
			"#46628): local = _dp{local_dp_rank}; global = _dp{dp_rank}",
		get: func(p *Profile) *string { return &p.EngineIDDPSuffix },
	},
	{
		Name:   "dense_external_dp",
		Values: []string{DenseExternalDPAllow, DenseExternalDPReject},
		Doc: "create_engine_config for a dense model with data_parallel_size > 1 and external LB: " +
			"allow, or reject with ValueError (Non-MoE models do not support external data parallel mode)",
		get: func(p *Profile) *string { return &p.DenseExternalDP },
	},
	{
		Name:   "engine_id_sync",
		Values: []string{EngineIDSyncNone, EngineIDSyncTP, EngineIDSyncTPPP},
		Doc: "KV engine_id agreement at worker init (vLLM PRs #39907, #44528): none = every CLI parse " +
			"keeps its own uuid4 (headless followers differ from the head); tp = broadcast from TP rank 0; " +
			"tp_pp = then from PP rank 0 as well",
		get: func(p *Profile) *string { return &p.EngineIDSync },
	},
	{
		Name:   "external_lb_rank",
		Values: []string{ExternalLBRankInfer, ExternalLBRankExplicit},
		Doc: "external LB with --nnodes (vLLM PR #53743): infer = the rank inferred from --node-rank " +
			"overrides an explicit --data-parallel-rank; explicit = an explicit rank is kept, and without " +
			"one --nnodes must be a multiple of --data-parallel-size (ValueError: ... Set a unique `--data-parallel-rank` ...)",
		get: func(p *Profile) *string { return &p.ExternalLBRank },
	},
	{
		Name:   "headless_rank_check",
		Values: []string{HeadlessRankCheckDerived, HeadlessRankCheckRaw, HeadlessRankCheckNone},
		Doc: "run_headless's refusal of a DP rank (vLLM#20399): derived = PR #19790 checked the derived " +
			"parallel_config.data_parallel_rank, which is never None, so every `vllm serve --headless` " +
			"failed with ValueError: data_parallel_rank is not applicable in headless mode; raw = PR #20398 " +
			"checks the user's --data-parallel-rank; none = vLLM main, where run_headless has no such check " +
			"(the headless followers of an external-LB wide-TP replica pass --data-parallel-rank)",
		get: func(p *Profile) *string { return &p.HeadlessRankCheck },
	},
	{
		Name:   "start_rank_zero",
		Values: []string{StartRankZeroUnset, StartRankZeroSet},
		Doc: "--data-parallel-start-rank 0 in create_engine_config (vLLM PR #47692, issue #47691): " +
			"unset = a truthiness test reads 0 as no start rank, so the node infers no hybrid LB and takes " +
			"the DP rank inferred from --node-rank; set = 0 is a start rank like any other: a non-headless " +
			"node infers hybrid LB (external LB when its local size is 1), so its engines are " +
			"local_engines_only and rank 0's front end refuses --headless remote engines",
		get: func(p *Profile) *string { return &p.StartRankZero },
	},
	{
		Name:   "dp_launch_checks",
		Values: []string{DPLaunchChecksAssert, DPLaunchChecksValueError},
		Doc: "create_engine_config's data-parallel launch-option checks (vLLM PR #49124): assert = bare " +
			"asserts (AssertionError: nnodes > 1 is only supported with data_parallel_backend=mp, " +
			"world_size=W must be divisible by nnodes=N., ...), --node-rank bounded from above only; " +
			"value_error = ValueError: Invalid data-parallel launch options: ... with a message per case, " +
			"and a negative --node-rank refused too",
		get: func(p *Profile) *string { return &p.DPLaunchChecks },
	},
}

// Changes lists every change a profile pins, for --help and the README.
func Changes() []Change {
	out := make([]Change, len(changes))
	copy(out, changes)
	return out
}

// mainProfile is vLLM main today: every change at its newest behaviour.
func mainProfile() Profile {
	p := Profile{Name: "main"}
	for _, c := range changes {
		*c.get(&p) = c.Values[len(c.Values)-1]
	}
	return p
}

// namedProfiles are the profiles a scenario can name.
var namedProfiles = map[string]func() Profile{
	"main": mainProfile,
	"pre-48061": func() Profile {
		p := mainProfile()
		p.Name = "pre-48061"
		p.MooncakeDPIndex = MooncakeDPIndexLegacy
		return p
	},
	// main-455edc0 is vLLM main of 2026-08-17 (commit 455edc0), the snapshot conformance runs
	// against: it has PRs #46628, #47692, #48061 and #49124, and lacks #53743 (no clamp, and an
	// external-LB --nnodes launch still takes the rank inferred from --node-rank) and #55844 (a
	// KV event publisher's port 0 is offset like any port).
	"main-455edc0": func() Profile {
		p := mainProfile()
		p.Name = "main-455edc0"
		p.NNodesWithinDP = NNodesWithinDPFloor
		p.ExternalLBRank = ExternalLBRankInfer
		p.KVEventsPortZero = KVEventsPortZeroOffset
		return p
	},
}

// ProfileNames lists the named profiles, sorted.
func ProfileNames() []string {
	names := make([]string, 0, len(namedProfiles))
	for n := range namedProfiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ProfileNamed returns a named profile.
func ProfileNamed(name string) (Profile, error) {
	mk, ok := namedProfiles[name]
	if !ok {
		return Profile{}, fmt.Errorf("unknown profile %q (known: %s)", name, strings.Join(ProfileNames(), ", "))
	}
	return mk(), nil
}

// ResolveProfile returns the named base profile with the given changes applied. An unknown base,
// change or value is an error naming it and listing what is accepted.
func ResolveProfile(base string, set map[string]string) (Profile, error) {
	p, err := ProfileNamed(base)
	if err != nil {
		return Profile{}, err
	}
	if len(set) == 0 {
		return p, nil
	}
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	sort.Strings(names)
	applied := make([]string, 0, len(names))
	for _, n := range names {
		if p, err = p.With(n, set[n]); err != nil {
			return Profile{}, fmt.Errorf("profile %s: %w", base, err)
		}
		applied = append(applied, n+"="+set[n])
	}
	p.Name = base + "+" + strings.Join(applied, ",")
	return p, nil
}

func changeNamed(name string) (Change, bool) {
	for _, c := range changes {
		if c.Name == name {
			return c, true
		}
	}
	return Change{}, false
}

// Validate reports a profile whose values are not all known (a zero Profile, or one built by hand).
func (p Profile) Validate() error {
	for _, c := range changes {
		v := *c.get(&p)
		if !contains(c.Values, v) {
			return fmt.Errorf("profile %q: change %s has value %q (accepted: %s)", p.Name, c.Name, v, strings.Join(c.Values, ", "))
		}
	}
	return nil
}

// With returns p with one change set to value; the name is left for Canonical to give. An
// unknown change or value is an error listing what is accepted.
func (p Profile) With(change, value string) (Profile, error) {
	c, ok := changeNamed(change)
	if !ok {
		known := make([]string, len(changes))
		for i, k := range changes {
			known[i] = k.Name
		}
		return Profile{}, fmt.Errorf("unknown change %q (known: %s)", change, strings.Join(known, ", "))
	}
	if !contains(c.Values, value) {
		return Profile{}, fmt.Errorf("change %s: unknown value %q (accepted: %s)", change, value, strings.Join(c.Values, ", "))
	}
	*c.get(&p) = value
	return p, nil
}

// Canonical returns p named by what it pins: the named profile with the same value for every
// change (main first), else "main+<change>=<value>,..." for where it differs from main.
func (p Profile) Canonical() Profile {
	same := func(q Profile) bool {
		for _, c := range changes {
			if *c.get(&p) != *c.get(&q) {
				return false
			}
		}
		return true
	}
	for _, name := range append([]string{"main"}, ProfileNames()...) {
		if q := namedProfiles[name](); same(q) {
			p.Name = name
			return p
		}
	}
	var diff []string
	for n, v := range p.FromMain() {
		diff = append(diff, n+"="+v)
	}
	sort.Strings(diff)
	p.Name = "main+" + strings.Join(diff, ",")
	return p
}

// FromMain returns the changes on which p differs from main, with p's values.
func (p Profile) FromMain() map[string]string {
	main := mainProfile()
	out := map[string]string{}
	for _, c := range changes {
		if v := *c.get(&p); v != *c.get(&main) {
			out[c.Name] = v
		}
	}
	return out
}

// Value returns the profile's value for a change by name.
func (p Profile) Value(change string) (string, bool) {
	c, ok := changeNamed(change)
	if !ok {
		return "", false
	}
	return *c.get(&p), true
}

func contains(list []string, v string) bool {
	for _, s := range list {
		if s == v {
			return true
		}
	}
	return false
}
