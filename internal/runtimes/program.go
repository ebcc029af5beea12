package runtimes

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"

	"github.com/widetp/widetp/internal/nodeapi"
)

// Program is a binary a runtime runs on a host: the Docker runtime builds it into an image (FROM
// scratch: the binary, the widetp binary for listings, and the shared libraries they link), the
// local runtime executes it. Nothing is compiled at run time.
type Program struct {
	// Name is the binary's name; its image is widetp-<Name>:<content hash> and it lives at
	// /usr/local/bin/<Name> inside it.
	Name string
	// Path is the binary on this machine. Empty means the widetp binary itself (see WithBinary),
	// which carries the programs of a run as its `node` and `store` subcommands.
	Path string
}

// Widetp is the widetp binary: a run's nodes run `widetp node`, its store `widetp store`.
var Widetp = Program{Name: "widetp"}

// EnvBinary names the widetp binary a harness run uses when WithBinary does not: a Go test that
// imports the harness is not widetp itself, so it points here at one (`go build ./cmd/widetp`).
const EnvBinary = nodeapi.EnvBinary

var programName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`) })

func (p Program) Validate() error {
	if !programName().MatchString(p.Name) {
		return fmt.Errorf("program name %q: want [a-z0-9-]+ (it becomes an image name)", p.Name)
	}
	return nil
}

// BinaryPath is where the program lives inside its image.
func (p Program) BinaryPath() string { return "/usr/local/bin/" + p.Name }

// WidetpPath is where the widetp binary lives inside every image: the Docker runtime lists a
// host's ipc directory with `widetp ipcls /tmp`.
const WidetpPath = "/usr/local/bin/widetp"

// IdleLine is what `widetp idle`, the program of the held floor (widetp bench), prints once it
// handles SIGTERM: from then on, it stays up until it is stopped.
const IdleLine = "idle"

// resolveBinary is the widetp binary of a configuration: WithBinary's, else $WIDETP_BIN's. It
// must be a regular executable file; its absolute path is returned.
func resolveBinary(configured string) (string, error) {
	p, from := configured, "WithBinary"
	if p == "" {
		p, from = os.Getenv(EnvBinary), "$"+EnvBinary
	}
	if p == "" {
		return "", fmt.Errorf("no widetp binary to run on the hosts: the widetp command passes itself (WithBinary(os.Executable())); "+
			"a Go program or test that imports the harness sets %s to a widetp binary (go build -o DIR ./cmd/widetp, or go install github.com/widetp/widetp/cmd/widetp)", EnvBinary)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("widetp binary %s (%s): %w", p, from, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("widetp binary (%s): %w", from, err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("widetp binary %s (%s): not an executable file", abs, from)
	}
	return abs, nil
}

// programPath is where p's binary is on this machine, given the run's widetp binary.
func ProgramPath(p Program, widetp string) (string, error) {
	if p.Path == "" {
		return widetp, nil
	}
	abs, err := filepath.Abs(p.Path)
	if err != nil {
		return "", fmt.Errorf("program %s: %w", p.Name, err)
	}
	if _, err := os.Stat(abs); err != nil {
		return "", fmt.Errorf("program %s: %w", p.Name, err)
	}
	return abs, nil
}
