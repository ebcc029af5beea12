//go:build !linux

package address

import (
	"context"
	"errors"
)

// TCPSocket is a bound, not yet listening TCP socket; only Linux's socket layer is simulated.
type TCPSocket struct{}

// BindTCP needs Linux's bind/listen split.
func BindTCP(context.Context, Net, string, bool) (*TCPSocket, error) {
	return nil, errors.New("bind without listen: only Linux is supported")
}

func (s *TCPSocket) Listen() error    { return errors.New("only Linux is supported") }
func (s *TCPSocket) Endpoint() string { return "" }
func (s *TCPSocket) Close() error     { return nil }
