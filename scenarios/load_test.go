package scenarios_test

import (
	"os"
	"path/filepath"
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
				if a == nil || !a.HasMooncakeStore() {
					t.Errorf("%s: %s command %d does not run the Mooncake store connector", s.File, n.Host, j)
				}
			}
		}
	}
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
