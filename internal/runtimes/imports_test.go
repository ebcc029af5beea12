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

// dockerClients are Docker engine client libraries. No package imports them: the Docker runtime
// (internal/runtimes/docker) speaks the Engine API itself (its api.go), and the harness reaches the
// engine only through that runtime (the registry's Open, Floor, Labelled). A client library in the
// module would be linked into the one widetp binary, which every simulated process execs: their
// package init (image-reference and digest regular expressions, tracing) cost each process about
// 3 ms of start-up on a loaded core.
var dockerClients = []string{
	"github.com/moby/moby/client",
	"github.com/moby/moby/api",
	"github.com/docker/docker",
	"github.com/fsouza/go-dockerclient",
	"github.com/testcontainers/testcontainers-go",
}

// Every package of the module, its tests included, is checked: a package that imports a Docker
// client library fails the test, named with the import.
func TestNoPackageImportsADockerClientLibrary(t *testing.T) {
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
		for kind, imps := range map[string][]string{"imports": p.Imports, "test imports": p.TestImports, "external test imports": p.XTestImports} {
			for _, imp := range imps {
				for _, c := range dockerClients {
					if imp == c || strings.HasPrefix(imp, c+"/") {
						t.Errorf("package %s %s %s: the Docker runtime's own Engine API calls (internal/runtimes/docker/api.go) are the only way to the engine; add what you need there and reach it through the harness", p.ImportPath, kind, imp)
					}
				}
			}
		}
	}
	if seen < 10 {
		t.Fatalf("go list named %d packages; the module has dozens", seen)
	}
}
