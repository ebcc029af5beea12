package lookup

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	zmq "github.com/widetp/widetp/internal/zmq"
)

// ErrTimeout is returned when no reply came within the client's bound.
var ErrTimeout = errors.New("timeout")

// ErrSilent is returned with ErrTimeout when the server had completed the handshake: it was up
// and did not answer within the client's patience (WithPatience).
var ErrSilent = errors.New("the server completed the handshake and did not answer")

// Client is an engine core scheduler's end of the channel (vLLM's LookupKeyClient): a REQ socket
// connected to the path the engine core computes.
type Client struct {
	endpoint string
	timeout  time.Duration
	patience time.Duration
	zctx     *zmq.Context
	sock     *zmq.Socket
	peers    *zmq.Peers
	// broken is set once a request went unanswered: a REQ socket must receive before it can send
	// again, so after a timeout it is unusable (vLLM's client would stay blocked forever).
	broken bool
}

// Dial connects a REQ client to the model's ipc path (moved under WithRoot's root). Connecting never
// fails for a missing server: libzmq keeps trying in the background, as vLLM's client does.
// timeout bounds every request's send and receive; WithPatience lets a receive from a server the
// socket completed a handshake with go on past it.
func Dial(modelPath string, timeout time.Duration, opts ...Option) (*Client, error) {
	cfg := newConfig(opts)
	if timeout <= 0 {
		return nil, fmt.Errorf("dial lookup server %s: timeout %v must be positive", modelPath, timeout)
	}
	endpoint, _, err := Endpoint(modelPath, cfg.root)
	if err != nil {
		return nil, err
	}
	zctx, err := zmq.NewContext()
	if err != nil {
		return nil, fmt.Errorf("dial lookup server %s: zmq context: %w", modelPath, err)
	}
	sock, err := zctx.NewSocket(zmq.REQ)
	if err == nil {
		// The receive's bound is set by each request (zmq.RecvReply).
		err = setup(sock, func() error { return sock.SetSndtimeo(timeout) })
	}
	var peers *zmq.Peers
	if err == nil {
		// Watched from before the connect, so that no handshake goes unseen.
		peers, err = sock.WatchPeers()
	}
	if err == nil {
		err = sock.Connect(endpoint)
	}
	if err != nil {
		if peers != nil {
			peers.Close()
		}
		if sock != nil {
			sock.Close()
		}
		zctx.Term()
		return nil, fmt.Errorf("dial lookup server %s at %s: %w", modelPath, endpoint, err)
	}
	return &Client{endpoint: endpoint, timeout: timeout, patience: cfg.patience, zctx: zctx, sock: sock, peers: peers}, nil
}

// Lookup sends one lookup request and returns the hit count the server answered.
func (c *Client) Lookup(ctx context.Context, req Request) (uint32, error) {
	req.Kind = KindLookup
	frames, err := req.Frames()
	if err != nil {
		return 0, err
	}
	reply, err := c.roundTrip(ctx, frames)
	if err != nil {
		return 0, fmt.Errorf("lookup at %s: %w", c.endpoint, err)
	}
	hits, err := DecodeHits(reply)
	if err != nil {
		return 0, fmt.Errorf("lookup at %s: %w", c.endpoint, err)
	}
	return hits, nil
}

// Reset sends a reset request and reports whether the server acknowledged it.
func (c *Client) Reset(ctx context.Context) (bool, error) {
	reply, err := c.roundTrip(ctx, [][]byte{MsgReset})
	if err != nil {
		return false, fmt.Errorf("reset at %s: %w", c.endpoint, err)
	}
	if len(reply) != 1 || len(reply[0]) != 1 {
		return false, fmt.Errorf("reset at %s: reply of %d frames, want one byte", c.endpoint, len(reply))
	}
	return reply[0][0] == RespOK[0], nil
}

// roundTrip sends frames and waits for the reply, bounded by the client's timeout and ctx.
func (c *Client) roundTrip(ctx context.Context, frames [][]byte) ([][]byte, error) {
	if c.broken {
		return nil, errors.New("client is unusable after an unanswered request")
	}
	timeout := c.timeout
	if d, ok := ctx.Deadline(); ok {
		left := time.Until(d)
		if left <= 0 {
			return nil, ctx.Err()
		}
		timeout = min(timeout, left)
	}
	if err := c.sock.SetSndtimeo(timeout); err != nil {
		return nil, err
	}
	parts := make([]any, len(frames))
	for i, f := range frames {
		parts[i] = f
	}
	if _, err := c.sock.SendMessage(parts...); err != nil {
		if zmq.AsErrno(err) == zmq.Errno(syscall.EAGAIN) { // no peer took the request in time
			c.broken = true
			return nil, fmt.Errorf("%w after %v (no server accepted the request)", ErrTimeout, timeout)
		}
		return nil, fmt.Errorf("send: %w", err)
	}
	reply, met, err := zmq.RecvReply(ctx, c.sock, c.peers, timeout, c.patience)
	if err != nil {
		c.broken = true
		switch {
		case zmq.AsErrno(err) == zmq.Errno(syscall.EAGAIN) && met:
			return nil, fmt.Errorf("%w after %v: %w", ErrTimeout, max(timeout, c.patience), ErrSilent)
		case zmq.AsErrno(err) == zmq.Errno(syscall.EAGAIN):
			return nil, fmt.Errorf("%w after %v", ErrTimeout, timeout)
		case errors.Is(err, context.DeadlineExceeded):
			return nil, fmt.Errorf("%w: %w", ErrTimeout, err)
		case ctx.Err() != nil:
			return nil, err
		}
		return nil, fmt.Errorf("receive: %w", err)
	}
	return reply, nil
}

// Close closes the socket without lingering.
func (c *Client) Close() error {
	c.peers.Close()
	c.sock.Close()
	if err := c.zctx.Term(); err != nil {
		return fmt.Errorf("close lookup client %s: %w", c.endpoint, err)
	}
	return nil
}
