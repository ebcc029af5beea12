package scenarios_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/widetp/widetp/scenarios"
	"github.com/widetp/widetp/vllm"
)

// The shipped scenarios all load, with distinct names; explain's tests check what they predict.
func TestLoadAllShipped(t *testing.T) {
	all, err := scenarios.LoadAll(".")
	if err != nil {
		t.Fatalf("LoadAll: %v", err)
	}
	if len(all) < 6 {
		t.Errorf("%d scenarios, want the two PR #48061 deployments and at least four more launch paths", len(all))
	}
	for _, s := range all {
		if s.Resolved.Name == "" {
			t.Errorf("%s: profile not resolved", s.File)
		}
		for _, n := range s.Nodes {
			for j, a := range n.Args {
				if a == nil {
					t.Errorf("%s: %s command %d has no parsed arguments", s.File, n.Host, j)
				}
			}
		}
	}
}

// libraryNameRE is the bug library's naming scheme, <repo><number>-<variant>-<buggy|fixed|control>:
// a buggy scenario shows the bug under the profile that has it, its fixed twin is the same
// deployment under the profile with the fix, and a control is the buggy profile on a launch path
// the bug does not reach.
var libraryNameRE = regexp.MustCompile(`^([a-z]+)([0-9]+)-([a-z0-9-]+)-(buggy|fixed|control)$`)

// Every shipped scenario belongs to the bug library: it names its bug, follows the naming scheme,
// and every buggy variant has a fixed twin that is the same deployment (the same hosts and
// command lines) and is healthy, while the buggy one expects violations.
func TestShippedScenariosAreABugLibrary(t *testing.T) {
	all, err := scenarios.LoadAll(".")
	if err != nil {
		t.Fatalf("LoadAll: %v", err)
	}
	type pair struct{ buggy, fixed *scenarios.Scenario }
	pairs := map[string]*pair{}
	fixedBugs := map[string]bool{}
	for _, s := range all {
		if base := strings.TrimSuffix(filepath.Base(s.File), ".yaml"); base != s.Name {
			t.Errorf("%s: name %q, want the file name %q", s.File, s.Name, base)
		}
		m := libraryNameRE.FindStringSubmatch(s.Name)
		if m == nil {
			t.Errorf("%s: %q does not follow <repo><number>-<variant>-<buggy|fixed|control>", s.File, s.Name)
			continue
		}
		if ref := m[1] + "#" + m[2]; !slices.Contains(s.Bugs, ref) {
			t.Errorf("%s: named after %s, but bugs: %q does not list it", s.File, ref, s.Bugs)
		}
		for _, ref := range s.Bugs {
			if scenarios.BugURL(ref) == "" {
				t.Errorf("%s: bug %q has no URL", s.File, ref)
			}
		}
		variant := m[1] + m[2] + "-" + m[3]
		if pairs[variant] == nil {
			pairs[variant] = &pair{}
		}
		switch m[4] {
		case "buggy":
			if len(s.Expect) == 0 {
				t.Errorf("%s: a buggy scenario must expect the violations that show the bug", s.File)
			}
			pairs[variant].buggy = s
		case "fixed":
			if len(s.Expect) != 0 {
				t.Errorf("%s: a fixed scenario must be healthy, expects %v", s.File, s.Expect)
			}
			pairs[variant].fixed = s
			for _, ref := range s.Bugs {
				fixedBugs[ref] = true
			}
		case "control":
			if len(s.Expect) != 0 {
				t.Errorf("%s: a control must be healthy, expects %v", s.File, s.Expect)
			}
		}
	}
	for variant, p := range pairs {
		switch {
		case p.buggy == nil && p.fixed != nil:
			t.Errorf("%s: a fixed scenario without its buggy twin", variant)
		case p.buggy != nil && p.fixed == nil:
			t.Errorf("%s: a buggy scenario without its fixed twin", variant)
		case p.buggy != nil:
			if deployment(p.buggy) != deployment(p.fixed) {
				t.Errorf("%s: the buggy and fixed twins must be one deployment (hosts, GPUs, env, command lines)", variant)
			}
			if p.buggy.Resolved == p.fixed.Resolved {
				t.Errorf("%s: the twins must differ in profile", variant)
			}
		}
	}
	for _, bug := range []string{"vllm#48061", "vllm#53743", "vllm#46628", "vllm#20399", "vllm#39907", "vllm#40443", "mooncake#2246"} {
		if !fixedBugs[bug] {
			t.Errorf("the library has no fixed scenario (so no buggy/fixed pair) for %s", bug)
		}
	}
}

// deployment renders what must be equal between twins: everything but name, description,
// profile and expect (the fault timeline too: a fix is shown against the same faults).
func deployment(s *scenarios.Scenario) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v %v %d %v %v\n", s.Bugs, s.Model, s.GPUsPerNode, s.Env, s.Store)
	for _, n := range s.Nodes {
		fmt.Fprintf(&b, "%s %d %v %q\n", n.Host, n.GPUs, n.Env, n.Commands)
	}
	for _, st := range s.Faults {
		fmt.Fprintf(&b, "%s: %s after %s\n", st.Name, st.Describe(), st.After)
	}
	return b.String()
}

func TestLoadAllErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := scenarios.LoadAll(dir); err == nil || !strings.Contains(err.Error(), "no *.yaml files") {
		t.Errorf("empty dir: %v, want an error (a suite over no scenarios checks nothing)", err)
	}
	if _, err := scenarios.LoadAll(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing dir: %v", err)
	}
	write(t, filepath.Join(dir, "a.yaml"), minimal)
	write(t, filepath.Join(dir, "b.yaml"), minimal)
	write(t, filepath.Join(dir, "c.yaml"), "name: [\n")
	all, err := scenarios.LoadAll(dir)
	if err == nil {
		t.Fatal("duplicate names and a broken file: no error")
	}
	for _, want := range []string{filepath.Join(dir, "b.yaml") + `:1: name: "t" is already the name of ` + filepath.Join(dir, "a.yaml"), filepath.Join(dir, "c.yaml") + ":1: invalid YAML"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if len(all) != 1 || all[0].File != filepath.Join(dir, "a.yaml") {
		t.Errorf("LoadAll returned %d scenarios, want the one good one", len(all))
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := scenarios.Load("nope/x.yaml")
	if err == nil || !strings.HasPrefix(err.Error(), "nope/x.yaml: read scenario:") {
		t.Errorf("got %v", err)
	}
}

func TestWithProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.yaml")
	write(t, path, minimal)
	spec, err := scenarios.ParseProfileSpec("main,mooncake_dp_index=legacy")
	if err != nil {
		t.Fatal(err)
	}
	s, err := scenarios.Load(path, scenarios.WithProfile(spec))
	if err != nil {
		t.Fatal(err)
	}
	if s.Profile.String() != "main,mooncake_dp_index=legacy" || s.Resolved.MooncakeDPIndex != "legacy" {
		t.Errorf("override not applied: %v / %+v", s.Profile, s.Resolved)
	}
	_, err = scenarios.Load(path, scenarios.WithProfile(scenarios.ProfileSpec{Base: "nightly"}))
	if err == nil || !strings.HasPrefix(err.Error(), `--profile nightly: unknown profile "nightly"`) {
		t.Errorf("unknown override: %v", err)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The README documents every named profile and every change the model accepts.
func TestReadmeDocumentsProfiles(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range vllm.ProfileNames() {
		if !strings.Contains(string(readme), "`"+name+"`") {
			t.Errorf("README does not name profile %s", name)
		}
	}
	for _, c := range vllm.Changes() {
		row := "| `" + c.Name + "` | `" + strings.Join(c.Values, "`, `") + "` |"
		if !strings.Contains(string(readme), row) {
			t.Errorf("README lacks the row of change %s: %s", c.Name, row)
		}
	}
}

// The README's bug library lists every shipped scenario (a pair as `<variant>-{buggy,fixed}`) and
// every bug they reproduce.
func TestReadmeListsTheBugLibrary(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	all, err := scenarios.LoadAll(".")
	if err != nil {
		t.Fatalf("LoadAll: %v", err)
	}
	for _, s := range all {
		pair := strings.TrimSuffix(strings.TrimSuffix(s.Name, "-buggy"), "-fixed") + "-{buggy,fixed}"
		if !strings.Contains(string(readme), "`"+s.Name+"`") && !strings.Contains(string(readme), "`"+pair) {
			t.Errorf("README's bug library does not list %s", s.Name)
		}
		for _, ref := range s.Bugs {
			if !strings.Contains(string(readme), ref) {
				t.Errorf("README's bug library does not name %s (%s)", ref, s.File)
			}
		}
	}
}
