// Package docker holds the Dockerfiles of widetp's images. They are embedded so that the harness
// builds the same images whatever the working directory; the build context (binary, libraries,
// loader) is assembled by the harness next to them.
package docker

import (
	_ "embed"
)

// SimNode is docker/simnode.Dockerfile.
//
//go:embed simnode.Dockerfile
var SimNode []byte

// FakeStore is docker/fakestore.Dockerfile.
//
//go:embed fakestore.Dockerfile
var FakeStore []byte
