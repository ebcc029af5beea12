package address

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"

	zmq "github.com/widetp/widetp/internal/zmq"
)

// Listener is a bound address: a plain TCP listener (a front end's HTTP socket) or a ZMQ ROUTER
// side channel that answers requests.
type Listener interface {
	// Endpoint is the real endpoint bound (the model's host mapped to this host's address).
	Endpoint() string
	Close() error
}

// BindError is a bind the kernel refused; Errno is its errno (EADDRINUSE, EADDRNOTAVAIL, ...).
type BindError struct {
	Endpoint string
	Errno    syscall.Errno
	Err      error
}

func (e *BindError) Error() string { return fmt.Sprintf("bind %s: %v", e.Endpoint, e.Err) }
func (e *BindError) Unwrap() error { return e.Err }

func bindError(endpoint string, err error) error {
	return &BindError{Endpoint: endpoint, Errno: Errno(err), Err: err}
}

// tcpListener is a plain listening socket: connections are accepted and closed (nothing the
// simulation serves on it), so that it behaves as a listening socket does for the kernel.
type tcpListener struct {
	ln       net.Listener
	endpoint string
	done     chan struct{}
}

// ListenTCP binds endpoint (tcp://host:port) as Python's socket.bind + listen does, SO_REUSEADDR
// set as vLLM's create_server_socket sets it (which does not let a second listener in).
func ListenTCP(ctx context.Context, n Net, endpoint string) (Listener, error) {
	h, port, err := SplitTCP(endpoint)
	if err != nil {
		return nil, err
	}
	ip, err := n.bindIP(ctx, h)
	if err != nil {
		return nil, bindError(endpoint, err)
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		return nil, bindError(endpoint, err)
	}
	return serveTCP(ln), nil
}

// serveTCP accepts and closes connections on ln until it is closed.
func serveTCP(ln net.Listener) *tcpListener {
	l := &tcpListener{ln: ln, endpoint: "tcp://" + ln.Addr().String(), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return l
}

func (l *tcpListener) Endpoint() string { return l.endpoint }

func (l *tcpListener) Close() error {
	err := l.ln.Close()
	<-l.done
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// SideChannel is a ZMQ ROUTER bound at a tcp endpoint that answers every request with its
// owner's key, recording the request's nonce first (through onServe), so that by the time a
// client has its answer the server has already said it gave it.
type SideChannel struct {
	endpoint string
	key      string
	onServe  func(nonce string)
	zctx     *zmq.Context
	sock     *zmq.Socket
	done     chan struct{}
	mu       sync.Mutex
	closed   bool
}

// Request prefix of the side-channel protocol: "widetp-address/1 <nonce>"; the answer is the key.
const protoPrefix = "widetp-address/1 "

// ListenSideChannel binds a ROUTER at endpoint (tcp://host:port or ipc:///path). A bind the
// kernel refuses is a *BindError; a second bind of an ipc path succeeds and takes the path over,
// as libzmq does (it unlinks the file and binds anew), leaving the first binder unreachable.
func ListenSideChannel(ctx context.Context, n Net, endpoint, key string, onServe func(nonce string)) (*SideChannel, error) {
	real, err := n.zmqEndpoint(ctx, endpoint, true)
	if err != nil {
		var errno syscall.Errno
		if errors.As(err, &errno) {
			return nil, bindError(endpoint, err)
		}
		return nil, err
	}
	zctx, err := zmq.NewContext()
	if err != nil {
		return nil, fmt.Errorf("side channel %s: zmq context: %w", endpoint, err)
	}
	sock, err := zctx.NewSocket(zmq.ROUTER)
	if err == nil {
		err = sock.SetLinger(0)
	}
	if err == nil {
		if berr := sock.Bind(real); berr != nil {
			sock.Close()
			zctx.Term()
			return nil, bindError(endpoint, syscall.Errno(zmq.AsErrno(berr)))
		}
	}
	if err != nil {
		if sock != nil {
			sock.Close()
		}
		zctx.Term()
		return nil, fmt.Errorf("side channel %s: %w", endpoint, err)
	}
	s := &SideChannel{endpoint: real, key: key, onServe: onServe, zctx: zctx, sock: sock, done: make(chan struct{})}
	go s.serve()
	return s, nil
}

func (s *SideChannel) Endpoint() string { return s.endpoint }

func (s *SideChannel) serve() {
	defer close(s.done)
	defer s.sock.Close()
	for {
		frames, err := s.sock.RecvMessageBytes(0)
		if err != nil {
			if zmq.AsErrno(err) == zmq.ETERM {
				return
			}
			continue // an interrupted receive (EINTR): look again
		}
		if len(frames) < 2 {
			continue
		}
		payload := frames[len(frames)-1]
		if !bytes.HasPrefix(payload, []byte(protoPrefix)) {
			continue
		}
		s.onServe(string(payload[len(protoPrefix):]))
		// ROUTER envelope: identity, empty delimiter (REQ adds it), the answer.
		if _, err := s.sock.SendBytes(frames[0], zmq.SNDMORE); err != nil {
			continue
		}
		if _, err := s.sock.SendBytes(nil, zmq.SNDMORE); err != nil {
			continue
		}
		s.sock.SendBytes([]byte(s.key), 0)
	}
}

// Close terminates the socket's context (ending its receive) and waits for the serve loop.
func (s *SideChannel) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	err := s.zctx.Term()
	<-s.done
	return err
}

// ErrNoAnswer is a request nobody answered within the bound.
var ErrNoAnswer = errors.New("no answer")

// Dial sends one request carrying nonce to endpoint with a REQ socket and returns the key the
// server answered with. Connecting never fails for a missing server (libzmq retries in the
// background, as vLLM's client does). No answer within timeout is ErrNoAnswer, unless the socket
// completed a ZMTP handshake with a peer: that peer is up and answers late on a loaded machine,
// so its answer is waited for up to patience.
func Dial(ctx context.Context, n Net, endpoint, nonce string, timeout, patience time.Duration) (string, error) {
	real, err := n.zmqEndpoint(ctx, endpoint, false)
	if err != nil {
		return "", fmt.Errorf("dial %s: %w", endpoint, err)
	}
	zctx, err := zmq.NewContext()
	if err != nil {
		return "", fmt.Errorf("dial %s: zmq context: %w", endpoint, err)
	}
	defer zctx.Term()
	sock, err := zctx.NewSocket(zmq.REQ)
	if err != nil {
		return "", fmt.Errorf("dial %s: %w", endpoint, err)
	}
	defer sock.Close()
	if d, ok := ctx.Deadline(); ok && time.Until(d) < timeout {
		timeout = max(time.Until(d), time.Millisecond)
	}
	peers, err := sock.WatchPeers()
	if err != nil {
		return "", fmt.Errorf("dial %s: %w", endpoint, err)
	}
	defer peers.Close()
	for _, set := range []func() error{
		func() error { return sock.SetLinger(0) },
		func() error { return sock.SetSndtimeo(timeout) },
		func() error { return sock.Connect(real) },
	} {
		if err := set(); err != nil {
			return "", fmt.Errorf("dial %s: %w", endpoint, err)
		}
	}
	if _, err := sock.SendBytes([]byte(protoPrefix+nonce), 0); err != nil {
		return "", fmt.Errorf("%w at %s within %v", ErrNoAnswer, endpoint, timeout)
	}
	reply, met, err := zmq.RecvReply(ctx, sock, peers, timeout, patience)
	switch {
	case ctx.Err() != nil:
		return "", ctx.Err()
	case (err != nil || len(reply) == 0) && met:
		return "", fmt.Errorf("%w at %s within %v from a peer that completed the handshake", ErrNoAnswer, endpoint, max(timeout, patience))
	case err != nil || len(reply) == 0:
		return "", fmt.Errorf("%w at %s within %v", ErrNoAnswer, endpoint, timeout)
	}
	return string(reply[len(reply)-1]), nil
}
