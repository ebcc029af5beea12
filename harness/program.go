package harness

import (
	"fmt"
	"regexp"

	"github.com/widetp/widetp/docker"
)

// Program is a binary of this module that a runtime runs on a host: the Docker runtime builds it
// into an image (FROM scratch), the local runtime will run the binary itself.
type Program struct {
	// Name is the binary's name; its image is widetp-<Name>:<content hash> and it lives at
	// /usr/local/bin/<Name> inside it.
	Name string
	// Package is the Go package to build, relative to the module root ("./cmd/simnode").
	Package string
	// Cgo builds with CGO_ENABLED=1 (simnode links libzmq); otherwise the binary is static.
	Cgo bool
	// Dockerfile is the image's Dockerfile (docker/<name>.Dockerfile); its context is rootfs/.
	Dockerfile []byte
}

// The programs of a widetp run.
var (
	// SimNode runs on every node; it links libzmq through cgo (pebbe/zmq4), because only libzmq
	// takes an ipc path over silently the way vLLM's pyzmq does.
	SimNode = Program{Name: "simnode", Package: "./cmd/simnode", Cgo: true, Dockerfile: docker.SimNode}
	// FakeStore is the fake Mooncake store; pure Go, so static.
	FakeStore = Program{Name: "fakestore", Package: "./cmd/fakestore", Dockerfile: docker.FakeStore}
)

var programName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

func (p Program) validate() error {
	if !programName.MatchString(p.Name) {
		return fmt.Errorf("program name %q: want [a-z0-9-]+ (it becomes an image name)", p.Name)
	}
	if p.Package == "" {
		return fmt.Errorf("program %s: no Go package", p.Name)
	}
	if len(p.Dockerfile) == 0 {
		return fmt.Errorf("program %s: no Dockerfile", p.Name)
	}
	return nil
}

// BinaryPath is where the program lives inside its image.
func (p Program) BinaryPath() string { return "/usr/local/bin/" + p.Name }

// ipclsPath is where the ipc listing helper (docker/ipcls) lives inside every image.
const ipclsPath = "/usr/local/bin/widetp-ipcls"

// ipclsPackage is the helper's Go package, relative to the module root.
const ipclsPackage = "./docker/ipcls"
