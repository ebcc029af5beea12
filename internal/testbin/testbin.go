// Package testbin builds the binaries that tests run as hosts: the widetp binary (whose `node` and
// `store` subcommands are what a run starts) and test programs of the module. The shipped widetp
// never compiles anything; a Go test is not widetp, so it builds one once per test process, or
// uses the one $WIDETP_BIN names (make test and make e2e build bin/widetp first and set it).
package testbin

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/widetp/widetp/internal/nodeapi"
)

// EnvBinary is harness.EnvBinary (this package must not import the harness).
const EnvBinary = nodeapi.EnvBinary

// envPrefix names the variables through which a test process hands its builds to its children.
const envPrefix = "WIDETP_TESTBIN_"

var (
	mu    sync.Mutex
	dir   string
	built = map[string]string{}
)

// Build compiles the package pkg of the module ("./cmd/widetp", "./harness/testdata/hostprobe")
// into a scratch directory, once per process, and returns the binary's path. Cgo is on (the
// programs link libzmq), the race detector off: hosts are many processes on shared cores.
func Build(pkg string) (string, error) {
	mu.Lock()
	defer mu.Unlock()
	if p, ok := built[pkg]; ok {
		return p, nil
	}
	// A child test process (a test re-executing its own binary) inherits its parent's builds.
	env := envPrefix + strings.ToUpper(strings.NewReplacer("/", "_", ".", "_", "-", "_").Replace(pkg))
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err == nil {
			built[pkg] = p
			return p, nil
		}
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "widetp-testbin-"); err != nil {
			return "", fmt.Errorf("build %s: %w", pkg, err)
		}
	}
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, log.String())
	}
	built[pkg] = out
	if err := os.Setenv(env, out); err != nil {
		return "", err
	}
	return out, nil
}

// Widetp is the widetp binary tests run: $WIDETP_BIN when set, else ./cmd/widetp built once. It
// also sets $WIDETP_BIN, so that every runtime the test process opens uses it.
func Widetp() (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		return filepath.Abs(p)
	}
	p, err := Build("./cmd/widetp")
	if err != nil {
		return "", err
	}
	if err := os.Setenv(EnvBinary, p); err != nil {
		return "", err
	}
	return p, nil
}

// Cleanup removes what Build made (TestMain calls it after m.Run).
func Cleanup() {
	mu.Lock()
	defer mu.Unlock()
	if dir != "" {
		os.RemoveAll(dir)
		dir = ""
		built = map[string]string{}
	}
}

// moduleRoot walks up from the working directory (a test runs in its package's directory) to the
// go.mod of github.com/widetp/widetp.
func moduleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/widetp/widetp\n") {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod of github.com/widetp/widetp above %s", wd)
		}
	}
}
