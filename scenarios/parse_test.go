package scenarios_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/scenarios"
)

const minimal = `name: t
description: one node, one engine
profile: main
model: {name: deepseek-ai/DeepSeek-V3}
nodes:
  - host: n0
    command: vllm serve deepseek-ai/DeepSeek-V3 --tensor-parallel-size 8
`

func TestParseDefaults(t *testing.T) {
	s, err := scenarios.Parse("x.yaml", []byte(minimal))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if s.GPUsPerNode != 8 || s.Nodes[0].GPUs != 8 {
		t.Errorf("gpus_per_node %d, node gpus %d: want the default 8 for both", s.GPUsPerNode, s.Nodes[0].GPUs)
	}
	if s.Store.Flavor != scenarios.FlavorCpp {
		t.Errorf("store flavor %q, want the default cpp", s.Store.Flavor)
	}
	if !s.Model.MoE {
		t.Errorf("deepseek-ai/DeepSeek-V3 is in the catalog as MoE; got moe false")
	}
	if len(s.Expect) != 0 {
		t.Errorf("absent expect: want healthy (no kinds), got %v", s.Expect)
	}
	if s.Bugs != nil {
		t.Errorf("absent bugs: want none, got %q", s.Bugs)
	}
	if got := s.Nodes[0].Commands; len(got) != 1 || !strings.HasPrefix(got[0], "vllm serve deepseek-ai/DeepSeek-V3") {
		t.Errorf("command shorthand: got commands %q", got)
	}
	if s.Nodes[0].CommandLines[0] != 7 {
		t.Errorf("command line number %d, want 7", s.Nodes[0].CommandLines[0])
	}
}

func TestParseFull(t *testing.T) {
	src := `name: full-1
description: |
  two nodes, co-located commands, every optional field
bugs: [vllm#48061, mooncake#960, vllm#20399]
profile: {base: main, mooncake_dp_index: legacy}
model: {name: org/Custom-MoE, moe: true}
gpus_per_node: 4
env: {VLLM_RPC_BASE_PATH: /tmp, VLLM_DP_SIZE: 2, SHARED: scenario}
nodes:
  - host: a-0
    gpus: 8
    env: {SHARED: node}
    commands:
      - vllm serve org/Custom-MoE --port 8000
      - vllm serve org/Custom-MoE --port 8001
  - host: b-1
    command: vllm serve org/Custom-MoE
store: {flavor: python}
expect:
  violations: [lookup-path-collision, dp-index-mismatch]
`
	s, err := scenarios.Parse("full.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if s.Profile.Base != "main" || s.Profile.Changes["mooncake_dp_index"] != "legacy" || len(s.Profile.Changes) != 1 {
		t.Errorf("profile %+v", s.Profile)
	}
	if s.Profile.String() != "main,mooncake_dp_index=legacy" {
		t.Errorf("profile renders %q", s.Profile.String())
	}
	if !s.Model.MoE || s.Model.Name != "org/Custom-MoE" {
		t.Errorf("model %+v", s.Model)
	}
	if s.Nodes[0].GPUs != 8 || s.Nodes[1].GPUs != 4 {
		t.Errorf("gpus: node a-0 %d (said 8), node b-1 %d (gpus_per_node 4)", s.Nodes[0].GPUs, s.Nodes[1].GPUs)
	}
	env := s.Environ(s.Nodes[0])
	if env["SHARED"] != "node" || env["VLLM_DP_SIZE"] != "2" || env["VLLM_RPC_BASE_PATH"] != "/tmp" {
		t.Errorf("node env must layer over the scenario's: %v", env)
	}
	if env := s.Environ(s.Nodes[1]); env["SHARED"] != "scenario" {
		t.Errorf("node without env: got %v", env)
	}
	if len(s.Nodes[0].Commands) != 2 || s.Nodes[0].CommandLines[1] != 15 {
		t.Errorf("commands %q at lines %v", s.Nodes[0].Commands, s.Nodes[0].CommandLines)
	}
	if want := []string{"vllm#48061", "mooncake#960", "vllm#20399"}; strings.Join(s.Bugs, " ") != strings.Join(want, " ") {
		t.Errorf("bugs %q, want %q in file order", s.Bugs, want)
	}
	if s.Store.Flavor != "python" {
		t.Errorf("flavor %q", s.Store.Flavor)
	}
	want := []report.Kind{report.DPIndexMismatch, report.LookupPathCollision}
	if len(s.Expect) != 2 || s.Expect[0] != want[0] || s.Expect[1] != want[1] {
		t.Errorf("expect %v, want sorted %v", s.Expect, want)
	}
}

// Each row is a malformed file and the position its first error must name.
func TestParseErrors(t *testing.T) {
	rows := []struct {
		name, src string
		// want is "line: field: fragment" after the file name.
		want string
	}{
		{"empty file", ``, `x.yaml: file is empty`},
		{"not YAML", "name: [unclosed\n", `x.yaml:1: invalid YAML`},
		{"tab indentation", "name: t\nnodes:\n\t- host: a\n", `x.yaml:3: invalid YAML`},
		{"two documents", minimal + "---\nname: u\n", `x.yaml:8: a second YAML document`},
		{"top level is a list", "- a\n- b\n", `x.yaml:1: want a mapping, got a list`},
		{"top level is a scalar", "hello\n", `x.yaml:1: want a mapping, got "hello"`},
		{"missing name", strings.Replace(minimal, "name: t\n", "", 1), `x.yaml:1: name: required`},
		{"bad name", strings.Replace(minimal, "name: t", "name: My_Scenario", 1), `x.yaml:1: name: "My_Scenario" must match [a-z0-9-]+`},
		{"name is a list", strings.Replace(minimal, "name: t", "name: [t]", 1), `x.yaml:1: name: want a string, got a list`},
		{"missing description", strings.Replace(minimal, "description: one node, one engine\n", "", 1), `x.yaml:1: description: required`},
		{"blank description", strings.Replace(minimal, "description: one node, one engine", `description: "  "`, 1), `x.yaml:2: description: is empty`},
		{"missing profile", strings.Replace(minimal, "profile: main\n", "", 1), `x.yaml:1: profile: required`},
		{"profile map without base", strings.Replace(minimal, "profile: main", "profile: {mooncake_dp_index: legacy}", 1), `x.yaml:3: profile.base: required`},
		{"profile null", strings.Replace(minimal, "profile: main", "profile:", 1), `x.yaml:3: profile: want a string, got nothing (null)`},
		{"profile change is a list", strings.Replace(minimal, "profile: main", "profile: {base: main, mooncake_dp_index: [a]}", 1), `x.yaml:3: profile.mooncake_dp_index: want a string, got a list`},
		{"missing model", strings.Replace(minimal, "model: {name: deepseek-ai/DeepSeek-V3}\n", "", 1), `x.yaml:1: model: required`},
		{"model without name", strings.Replace(minimal, "{name: deepseek-ai/DeepSeek-V3}", "{moe: true}", 1), `x.yaml:4: model.name: required`},
		{"unknown model without moe", strings.Replace(minimal, "{name: deepseek-ai/DeepSeek-V3}", "{name: org/Unknown}", 1), `x.yaml:4: model.moe: required: org/Unknown is not in the built-in catalog`},
		{"moe contradicts the catalog", strings.Replace(minimal, "{name: deepseek-ai/DeepSeek-V3}", "{name: deepseek-ai/DeepSeek-V3, moe: false}", 1), `x.yaml:4: model.moe: deepseek-ai/DeepSeek-V3 is a MoE model, not a dense model`},
		{"moe not a bool", strings.Replace(minimal, "{name: deepseek-ai/DeepSeek-V3}", "{name: org/X, moe: yes}", 1), `x.yaml:4: model.moe: want true or false, got "yes"`},
		{"unknown model field", strings.Replace(minimal, "{name: deepseek-ai/DeepSeek-V3}", "{name: deepseek-ai/DeepSeek-V3, size: 671}", 1), `x.yaml:4: model.size: unknown field`},
		{"unknown top-level field", minimal + "gpu_per_node: 4\n", `x.yaml:8: gpu_per_node: unknown field (known: name, description, bugs, profile, model, gpus_per_node, env, nodes, store, expect, faults)`},
		{"bugs a string", minimal + "bugs: vllm#48061\n", `x.yaml:8: bugs: want a list of bug references like [vllm#48061], got "vllm#48061"`},
		{"bugs empty", minimal + "bugs: []\n", `x.yaml:8: bugs: is empty`},
		{"bug without number", minimal + "bugs: [vllm]\n", `x.yaml:8: bugs[0]: "vllm" is not a bug reference: want <repo>#<number>, like vllm#48061`},
		{"bug with owner/name (not a Ginkgo label)", minimal + "bugs: [vllm-project/vllm#48061]\n", `x.yaml:8: bugs[0]: "vllm-project/vllm#48061" is not a bug reference`},
		{"bug number zero", minimal + "bugs: [vllm#0]\n", `x.yaml:8: bugs[0]: "vllm#0" is not a bug reference`},
		{"bug number with a sign", minimal + "bugs: [vllm#-1]\n", `x.yaml:8: bugs[0]: "vllm#-1" is not a bug reference`},
		{"bug in upper case", minimal + "bugs: [VLLM#48061]\n", `x.yaml:8: bugs[0]: "VLLM#48061" is not a bug reference`},
		{"bug in an unknown repository", minimal + "bugs: [vlm#48061]\n", `x.yaml:8: bugs[0]: "vlm#48061": unknown repository "vlm" (known: mooncake (kvcache-ai/Mooncake), vllm (vllm-project/vllm))`},
		{"bug number overflows", minimal + "bugs: [vllm#99999999999999999999]\n", `x.yaml:8: bugs[0]: "vllm#99999999999999999999": the number 99999999999999999999 is too large`},
		{"bug listed twice", minimal + "bugs:\n  - vllm#48061\n  - vllm#48061\n", `x.yaml:10: bugs[1]: "vllm#48061" is already listed at bugs[0]`},
		{"bug entry a map", minimal + "bugs: [{vllm: 48061}]\n", `x.yaml:8: bugs[0]: want a string, got a mapping`},
		{"bug written with a space is a YAML comment", minimal + "bugs:\n  - vllm #48061\n", `x.yaml:9: bugs[0]: "vllm" is not a bug reference`},
		{"duplicate key", minimal + "name: u\n", `x.yaml:8: name: given twice (first on line 1)`},
		{"gpus_per_node zero", minimal + "gpus_per_node: 0\n", `x.yaml:8: gpus_per_node: 0: want at least 1`},
		{"gpus_per_node a string", minimal + "gpus_per_node: \"8\"\n", `x.yaml:8: gpus_per_node: want a whole number, got "8"`},
		{"gpus_per_node a float", minimal + "gpus_per_node: 8.5\n", `x.yaml:8: gpus_per_node: want a whole number, got "8.5"`},
		{"env not a map", minimal + "env: [A]\n", `x.yaml:8: env: want a mapping, got a list`},
		{"env bad name", minimal + "env: {\"1X\": a}\n", `x.yaml:8: env.1X: "1X" is not an environment variable name`},
		{"env null value", minimal + "env: {A: }\n", `x.yaml:8: env.A: want a string, got nothing (null)`},
		{"missing nodes", strings.SplitAfter(minimal, "DeepSeek-V3}\n")[0], `x.yaml:1: nodes: required`},
		{"nodes empty", strings.SplitAfter(minimal, "DeepSeek-V3}\n")[0] + "nodes: []\n", `x.yaml:5: nodes: is empty`},
		{"nodes a map", strings.SplitAfter(minimal, "DeepSeek-V3}\n")[0] + "nodes: {host: a}\n", `x.yaml:5: nodes: want a list of nodes, got a mapping`},
		{"node without host", strings.Replace(minimal, "  - host: n0\n    command:", "  - command:", 1), `x.yaml:6: nodes[0].host: required`},
		{"host not a DNS label", minimal + "  - host: R0\n    command: vllm serve deepseek-ai/DeepSeek-V3\n", `x.yaml:8: nodes[1].host: "R0" is not a DNS label`},
		{"host with a dot", strings.Replace(minimal, "host: n0", "host: n0.example", 1), `x.yaml:6: nodes[0].host: "n0.example" is not a DNS label`},
		{"host too long", strings.Replace(minimal, "host: n0", "host: "+strings.Repeat("a", 64), 1), `x.yaml:6: nodes[0].host: "` + strings.Repeat("a", 64) + `" is not a DNS label`},
		{"duplicate host", minimal + "  - host: n0\n    command: vllm serve deepseek-ai/DeepSeek-V3\n", `x.yaml:8: nodes[1].host: "n0" is already the host of nodes[0]`},
		{"node gpus negative", strings.Replace(minimal, "  - host: n0\n", "  - host: n0\n    gpus: -1\n", 1), `x.yaml:7: nodes[0].gpus: -1: want at least 1`},
		{"node unknown field", strings.Replace(minimal, "  - host: n0\n", "  - host: n0\n    hostname: x\n", 1), `x.yaml:7: nodes[0].hostname: unknown field`},
		{"node without commands", strings.Replace(minimal, "    command: vllm serve deepseek-ai/DeepSeek-V3 --tensor-parallel-size 8\n", "", 1), `x.yaml:6: nodes[0].commands: required`},
		{"command and commands", strings.Replace(minimal, "  - host: n0\n", "  - host: n0\n    commands: [vllm serve deepseek-ai/DeepSeek-V3]\n", 1), `x.yaml:8: nodes[0].command: give either command or commands, not both`},
		{"commands empty", strings.Replace(minimal, "    command: vllm serve deepseek-ai/DeepSeek-V3 --tensor-parallel-size 8\n", "    commands: []\n", 1), `x.yaml:7: nodes[0].commands: is empty`},
		{"commands a string", strings.Replace(minimal, "    command: vllm", "    commands: vllm", 1), `x.yaml:7: nodes[0].commands: want a list of vllm serve lines`},
		{"command entry a map", strings.Replace(minimal, "    command: vllm serve deepseek-ai/DeepSeek-V3 --tensor-parallel-size 8\n", "    commands:\n      - {a: b}\n", 1), `x.yaml:8: nodes[0].commands[0]: want a string, got a mapping`},
		{"store flavor unknown", minimal + "store: {flavor: rust}\n", `x.yaml:8: store.flavor: "rust" is not a metadata server flavor (cpp, python or go)`},
		{"store unknown field", minimal + "store: {port: 8080}\n", `x.yaml:8: store.port: unknown field`},
		{"expect unknown kind", minimal + "expect:\n  violations: [dp-index-mismatch, dp-mismatch]\n", `x.yaml:9: expect.violations[1]: "dp-mismatch" is not a violation kind`},
		{"expect kind twice", minimal + "expect:\n  violations:\n    - process-crashed\n    - process-crashed\n", `x.yaml:11: expect.violations[1]: "process-crashed" is already listed at expect.violations[0]`},
		{"expect a string", minimal + "expect:\n  violations: process-crashed\n", `x.yaml:9: expect.violations: want a list of violation kinds`},
		{"expect unknown field", minimal + "expect:\n  violation: []\n", `x.yaml:9: expect.violation: unknown field`},
		{"unknown profile", strings.Replace(minimal, "profile: main", "profile: nightly", 1), `x.yaml:3: profile: unknown profile "nightly" (known: main, main-455edc0, pre-48061)`},
		{"unknown profile change", strings.Replace(minimal, "profile: main", "profile: {base: main, lookup_path: per_host}", 1), `x.yaml:3: profile: profile main: unknown change "lookup_path"`},
		{"unknown profile value", strings.Replace(minimal, "profile: main", "profile: {base: main, mooncake_dp_index: newest}", 1), `x.yaml:3: profile: profile main: change mooncake_dp_index: unknown value "newest" (accepted: legacy, global)`},
		{"misspelt vllm flag", strings.Replace(minimal, "--tensor-parallel-size 8", "--tensor-paralel-size 8", 1), `x.yaml:7: nodes[0].command: vllm: error: unrecognized arguments: --tensor-paralel-size 8`},
		{"bad flag value", strings.Replace(minimal, "--tensor-parallel-size 8", "--tensor-parallel-size eight", 1), `x.yaml:7: nodes[0].command: vllm serve: error: argument --tensor-parallel-size`},
		{"unterminated quote", strings.Replace(minimal, "--tensor-parallel-size 8", "--kv-transfer-config '{", 1), `x.yaml:7: nodes[0].command: shell: unterminated single quote`},
		{"not vllm serve", strings.Replace(minimal, "vllm serve", "sglang serve", 1), `x.yaml:7: nodes[0].command: vllm serve: error: not a vllm command: "sglang"`},
		{"python module that is no vLLM server", strings.Replace(minimal, "vllm serve", "python -m sglang.launch_server --model", 1), `x.yaml:7: nodes[0].command: vllm serve: error: python module "sglang.launch_server" is not a vLLM server`},
		{"command serves another model", strings.Replace(minimal, "vllm serve deepseek-ai/DeepSeek-V3", "vllm serve Qwen/Qwen3-30B-A3B", 1), `x.yaml:7: nodes[0].command: serves "Qwen/Qwen3-30B-A3B", but the scenario's model.name is "deepseek-ai/DeepSeek-V3"`},
		{"second command bad", strings.Replace(minimal, "    command: vllm serve deepseek-ai/DeepSeek-V3 --tensor-parallel-size 8\n", "    commands:\n      - vllm serve deepseek-ai/DeepSeek-V3 -tp 4\n      - |\n        vllm serve deepseek-ai/DeepSeek-V3 \\\n          --data-parallel-rank x\n", 1), `x.yaml:9: nodes[0].commands[1]: vllm serve: error: argument --data-parallel-rank`},
		{"one command needs more GPUs than the node has", strings.Replace(minimal, "  - host: n0\n", "  - host: n0\n    gpus: 4\n", 1), `x.yaml:8: nodes[0].command: needs more GPUs than n0 has (4); vLLM would refuse it: pydantic_core.ValidationError: 1 validation error for ParallelConfig: Value error, World size (8) is larger than the number of available GPUs (4)`},
		{"co-located commands oversubscribe the node", strings.Replace(minimal, "    command: vllm serve deepseek-ai/DeepSeek-V3 --tensor-parallel-size 8\n", "    commands:\n      - vllm serve deepseek-ai/DeepSeek-V3 -tp 4 -dp 2 --data-parallel-rank 0 --port 8000\n      - vllm serve deepseek-ai/DeepSeek-V3 -tp 8 -dp 2 --data-parallel-rank 1 --port 8001\n", 1), `x.yaml:6: nodes[0]: n0 has 8 GPUs but its commands start 12 GPU workers on it (nodes[0].commands[0]: 4, nodes[0].commands[1]: 8)`},
		{"gpus_per_node too small for a wide-TP node", strings.Replace(minimal, "--tensor-parallel-size 8", "--tensor-parallel-size 16 --nnodes 2 --node-rank 0 --master-addr n0", 1) + "gpus_per_node: 4\n", `x.yaml:6: nodes[0]: n0 has 4 GPUs but its commands start 8 GPU workers on it (nodes[0].command: 8)`},
		{"alias", strings.Replace(minimal, "model: {name: deepseek-ai/DeepSeek-V3}", "model: &m {name: deepseek-ai/DeepSeek-V3}", 1) + "  - host: n1\n    command: *m\n", `x.yaml:9: nodes[1].command: YAML aliases (*m) are not supported`},
		{"merge key", minimal + "env:\n  <<: {A: b}\n", `x.yaml:9: env: YAML merge keys (<<) are not supported`},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			s, err := scenarios.Parse("x.yaml", []byte(r.src))
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", s)
			}
			if s != nil {
				t.Errorf("Parse returned a scenario with its error")
			}
			first := strings.SplitN(err.Error(), "\n", 2)[0]
			if !strings.HasPrefix(first, r.want) {
				t.Errorf("first error\n  %s\nwant it to start with\n  %s\n(all: %v)", first, r.want, err)
			}
		})
	}
}

// A file with several mistakes reports all of them, in line order.
func TestParseReportsEveryError(t *testing.T) {
	src := `name: Bad
description: x
profile: main
model: {name: org/X}
nodes:
  - host: A
    command: vllm serve org/X
`
	_, err := scenarios.Parse("x.yaml", []byte(src))
	if err == nil {
		t.Fatal("accepted")
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{`x.yaml:1: name: "Bad"`, `x.yaml:4: model.moe: required`, `x.yaml:6: nodes[0].host: "A" is not a DNS label`}
	if len(lines) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("error %d: %q, want prefix %q", i, lines[i], w)
		}
	}
	var se *scenarios.Error
	if !errorsAs(err, &se) || se.File != "x.yaml" || se.Line != 1 || se.Field != "name" {
		t.Errorf("errors are not *scenarios.Error with file, line, field: %#v", se)
	}
}

func TestParseProfileSpec(t *testing.T) {
	rows := []struct {
		in      string
		base    string
		changes map[string]string
		err     string
	}{
		{in: "main", base: "main"},
		{in: "pre-48061", base: "pre-48061"},
		{in: "main,mooncake_dp_index=legacy,nnodes_within_dp=floor", base: "main", changes: map[string]string{"mooncake_dp_index": "legacy", "nnodes_within_dp": "floor"}},
		{in: "", err: `profile "": want a profile name`},
		{in: "mooncake_dp_index=legacy", err: `want a profile name`},
		{in: "main,legacy", err: `"legacy" is not change=value`},
		{in: "main,a=", err: `"a=" is not change=value`},
		{in: "main,a=1,a=2", err: `change "a" is given twice`},
	}
	for _, r := range rows {
		got, err := scenarios.ParseProfileSpec(r.in)
		if r.err != "" {
			if err == nil || !strings.Contains(err.Error(), r.err) {
				t.Errorf("ParseProfileSpec(%q) error %v, want %q", r.in, err, r.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseProfileSpec(%q): %v", r.in, err)
			continue
		}
		if got.Base != r.base || len(got.Changes) != len(r.changes) {
			t.Errorf("ParseProfileSpec(%q) = %+v", r.in, got)
		}
		for k, v := range r.changes {
			if got.Changes[k] != v {
				t.Errorf("ParseProfileSpec(%q) change %s = %q, want %q", r.in, k, got.Changes[k], v)
			}
		}
		if back, _ := scenarios.ParseProfileSpec(got.String()); back.String() != got.String() {
			t.Errorf("String does not read back: %q -> %q", got.String(), back.String())
		}
	}
}

func TestBugURLAndLabel(t *testing.T) {
	rows := []struct{ ref, url string }{
		{"vllm#48061", "https://github.com/vllm-project/vllm/issues/48061"},
		{"mooncake#960", "https://github.com/kvcache-ai/Mooncake/issues/960"},
		{"vlm#48061", ""},
		{"vllm#0", ""},
		{"vllm", ""},
	}
	for _, r := range rows {
		if got := scenarios.BugURL(r.ref); got != r.url {
			t.Errorf("BugURL(%q) = %q, want %q", r.ref, got, r.url)
		}
	}
	if got := scenarios.BugLabel("vllm#48061"); got != "bug:vllm#48061" {
		t.Errorf("BugLabel = %q", got)
	}
}

// vLLM's own message of several lines stays under the error it belongs to, indented, so that a
// line that starts with the file name always starts an error (ParallelConfig's world-size error,
// vllm/config/parallel.py).
func TestParseErrorIndentsAMessageOfSeveralLines(t *testing.T) {
	in := strings.Replace(minimal, "  - host: n0\n", "  - host: n0\n    gpus: 4\n", 1)
	_, err := scenarios.Parse("x.yaml", []byte(in))
	if err == nil {
		t.Fatal("no error")
	}
	two := errors.Join(err, &scenarios.Error{File: "x.yaml", Line: 9, Field: "nodes[1]", Msg: "next"})
	lines := strings.Split(two.Error(), "\n")
	want := []string{
		`x.yaml:8: nodes[0].command: needs more GPUs than n0 has (4)`,
		`    - ray, set '--distributed-executor-backend ray'.`,
		`    - multiprocessing, set '--nnodes' appropriately.`,
		`x.yaml:9: nodes[1]: next`,
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%v", len(lines), len(want), two)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d: %q, want prefix %q", i+1, lines[i], w)
		}
	}
}
