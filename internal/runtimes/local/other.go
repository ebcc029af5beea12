//go:build !linux

package local

import (
	"context"
	"errors"

	"github.com/widetp/widetp/internal/runtimes"
)

// New needs Linux: every 127.x.y.z on the loopback interface, Pdeathsig, sessions read
// from /proc.
func New(ctx context.Context, opts ...runtimes.Option) (runtimes.Runtime, error) {
	return nil, errors.New("the local runtime needs Linux; use --runtime docker")
}

// Labelled finds nothing: no local run can exist here.
func Labelled(context.Context, string) ([]runtimes.Resource, error) { return nil, nil }
