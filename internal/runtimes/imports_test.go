package runtimes

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// dockerClients are the import paths that talk to a Docker engine.
var dockerClients = []string{
	"github.com/moby/moby/client",
	"github.com/moby/moby/api",
	"github.com/testcontainers/testcontainers-go",
}

// dockerPackages may import them: the Docker runtime, nothing else. The harness reaches the
// engine only through it (the registry's Open, Floor, Labelled), so a user of the harness or of
// any other package never links an engine client by importing it directly.
var dockerPackages = []string{"github.com/widetp/widetp/internal/runtimes/docker"}

// Every package of the module, its tests included, is checked: a package other than the Docker
// runtime that imports a Docker client fails the test, named with the import.
func TestOnlyTheDockerRuntimeImportsADockerClient(t *testing.T) {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := exec.LookPath(goBin); err != nil {
		goBin = "go"
	}
	cmd := exec.Command(goBin, "list", "-e", "-json=ImportPath,Imports,TestImports,XTestImports", "github.com/widetp/widetp/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	seen := 0
	for {
		var p struct {
			ImportPath                         string
			Imports, TestImports, XTestImports []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("read go list output: %v", err)
		}
		seen++
		if contains(dockerPackages, p.ImportPath) {
			continue
		}
		for kind, imps := range map[string][]string{"imports": p.Imports, "test imports": p.TestImports, "external test imports": p.XTestImports} {
			for _, imp := range imps {
				for _, c := range dockerClients {
					if imp == c || strings.HasPrefix(imp, c+"/") {
						t.Errorf("package %s %s %s: only %s may talk to the engine (add what you need there and reach it through the harness)", p.ImportPath, kind, imp, strings.Join(dockerPackages, ", "))
					}
				}
			}
		}
	}
	if seen < 10 {
		t.Fatalf("go list named %d packages; the module has dozens", seen)
	}
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
