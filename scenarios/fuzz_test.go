package scenarios_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/widetp/widetp/scenarios"
)

// FuzzParse: whatever the bytes, Parse returns either a scenario that satisfies the contract or an
// error that names the file — never a panic, never both, never neither.
func FuzzParse(f *testing.F) {
	f.Add([]byte(minimal))
	f.Add([]byte(""))
	f.Add([]byte("name: [\n"))
	f.Add([]byte(minimal + "---\n"))
	f.Add([]byte(strings.Replace(minimal, "host: n0", "host: *a", 1)))
	files, _ := filepath.Glob("*.yaml")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	name := regexp.MustCompile(`^[a-z0-9-]+$`)
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := scenarios.Parse("fuzz.yaml", data)
		if err != nil {
			if s != nil {
				t.Fatalf("both a scenario and an error: %v", err)
			}
			// Every error names the file; a message of several lines (vLLM's) goes on indented.
			for i, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "fuzz.yaml") && (i == 0 || !strings.HasPrefix(line, "    ")) {
					t.Fatalf("error line %d neither names the file nor continues the error above: %q", i+1, line)
				}
			}
			return
		}
		if s == nil {
			t.Fatal("neither a scenario nor an error")
		}
		if !name.MatchString(s.Name) || strings.TrimSpace(s.Description) == "" || s.Profile.Base == "" || s.Model.Name == "" {
			t.Fatalf("accepted a scenario missing required fields: %+v", s)
		}
		if len(s.Nodes) == 0 || s.GPUsPerNode < 1 {
			t.Fatalf("accepted a scenario without nodes or GPUs: %+v", s)
		}
		hosts := map[string]bool{}
		for _, n := range s.Nodes {
			if hosts[n.Host] || n.GPUs < 1 || len(n.Commands) == 0 || len(n.Commands) != len(n.CommandLines) {
				t.Fatalf("accepted a bad node: %+v", n)
			}
			hosts[n.Host] = true
		}
		for _, k := range s.Expect {
			if !k.Known() {
				t.Fatalf("accepted unknown kind %q", k)
			}
		}
	})
}
