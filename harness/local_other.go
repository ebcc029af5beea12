//go:build !linux

package harness

import (
	"context"
	"errors"
)

// NewLocal needs Linux: every 127.x.y.z on the loopback interface, Pdeathsig, sessions read
// from /proc.
func NewLocal(ctx context.Context, opts ...Option) (Runtime, error) {
	return nil, errors.New("the local runtime needs Linux; use --runtime docker")
}
