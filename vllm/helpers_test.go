package vllm

import (
	"fmt"
	"strings"
	"testing"

	"github.com/widetp/widetp/report"
)

// profileOf returns a named profile, or a main-based profile with the given changes
// ("main+mooncake_dp_index=legacy").
func profileOf(t fataler, spec string) Profile {
	t.Helper()
	base, rest, _ := strings.Cut(spec, "+")
	set := map[string]string{}
	for _, kv := range strings.Split(rest, ",") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		set[k] = v
	}
	p, err := ResolveProfile(base, set)
	if err != nil {
		t.Fatalf("profile %s: %v", spec, err)
	}
	return p
}

// fataler is what both *testing.T and *rapid.T offer.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// predict runs Predict and fails the test on an error.
func predict(t testing.TB, moe bool, profile string, nodes ...Node) []report.Process {
	t.Helper()
	procs, err := Predict(Deployment{Name: t.Name(), Model: Model{Name: "org/M", MoE: moe},
		Profile: profileOf(t, profile), Seed: "seed", Nodes: nodes})
	if err != nil {
		t.Fatalf("Predict: %v", err)
	}
	return procs
}

func node(host string, cmds ...string) Node { return Node{Host: host, GPUs: 8, Commands: cmds} }

// byID indexes processes by ID.
func byID(procs []report.Process) map[string]report.Process {
	m := make(map[string]report.Process, len(procs))
	for _, p := range procs {
		m[p.ID] = p
	}
	return m
}

// get returns the process with that ID or fails.
func get(t testing.TB, procs []report.Process, id string) report.Process {
	t.Helper()
	p, ok := byID(procs)[id]
	if !ok {
		ids := make([]string, 0, len(procs))
		for _, q := range procs {
			ids = append(ids, q.ID)
		}
		t.Fatalf("no process %s; have %s", id, strings.Join(ids, " "))
	}
	return p
}

// under returns the processes whose ID starts with prefix (a process and its descendants).
func under(procs []report.Process, prefix string) []report.Process {
	var out []report.Process
	for _, p := range procs {
		if p.ID == prefix || strings.HasPrefix(p.ID, prefix+"/") {
			out = append(out, p)
		}
	}
	return out
}

func optStr(p *int) string {
	if p == nil {
		return "None"
	}
	return fmt.Sprint(*p)
}

func some(v int) *int { return &v }

// exitText is a process's exit for messages.
func exitText(p report.Process) string {
	if p.Exit == nil {
		return "running"
	}
	return fmt.Sprintf("exit %d %q", p.Exit.Code, p.Exit.Error)
}
