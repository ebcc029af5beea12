package lookup

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	zmq "github.com/widetp/widetp/internal/zmq"
)

// maxFrame is handed to libzmq as ZMQ_MAXMSGSIZE: a frame larger than this makes libzmq drop the
// peer's connection before we ever see it (the peer then times out), which is the only way to avoid
// buffering a hostile frame in full. Frames between MaxHashBlob and maxFrame still get RespErr.
const maxFrame = 4 * MaxHashBlob

// Server is the lookup server of one rank-0 worker (vLLM's LookupKeyServer).
type Server struct {
	endpoint string
	file     string
	cfg      config

	zctx *zmq.Context
	sock *zmq.Socket
	done chan struct{}

	mu     sync.Mutex
	served []string
	closed bool
}

// Option configures a Server or a Client.
type Option func(*config)

type config struct {
	root     string
	patience time.Duration
	hits     func(Request) uint32
	reset    func() bool
	onServe  func(nonce string)
	log      *slog.Logger
}

// WithRoot places the socket file under root (see Endpoint).
func WithRoot(root string) Option { return func(c *config) { c.root = root } }

// WithPatience lets a client wait up to d for the answer of a server its socket completed a ZMTP
// handshake with: that server is up, and on a loaded machine it may answer after the client's
// timeout. A client whose socket met no server still gives up at its timeout.
func WithPatience(d time.Duration) Option { return func(c *config) { c.patience = d } }

// WithHits sets how many tokens a lookup hits. The default answers 0: simulated workers never store
// KV blocks, so a real store lookup would find none.
func WithHits(f func(Request) uint32) Option { return func(c *config) { c.hits = f } }

// WithReset sets the outcome of a reset request (vLLM: store.remove_all). The default succeeds.
func WithReset(f func() bool) Option { return func(c *config) { c.reset = f } }

// WithOnServe is called, on the serving goroutine, for each lookup that carried a nonce, before
// its reply is sent: a caller that records the nonce there has recorded it before the client knows.
func WithOnServe(f func(nonce string)) Option { return func(c *config) { c.onServe = f } }

// WithLogger sets where the server logs the requests it rejects.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

func newConfig(opts []Option) config {
	c := config{
		hits:    func(Request) uint32 { return 0 },
		reset:   func() bool { return true },
		onServe: func(string) {},
		log:     slog.New(slog.DiscardHandler),
	}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// Listen binds a REP socket at the model's ipc path and serves it until Close. Like vLLM's
// LookupKeyServer it first removes a socket file left at the path (libzmq would take the path over
// anyway): a second server of the same path does not fail, it silently captures new connections.
func Listen(modelPath string, opts ...Option) (*Server, error) {
	cfg := newConfig(opts)
	endpoint, file, err := Endpoint(modelPath, cfg.root)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return nil, fmt.Errorf("bind lookup server %s: %w", modelPath, err)
	}
	if err := os.Remove(file); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("bind lookup server %s: remove stale socket file: %w", modelPath, err)
	}
	zctx, err := zmq.NewContext()
	if err != nil {
		return nil, fmt.Errorf("bind lookup server %s: zmq context: %w", modelPath, err)
	}
	sock, err := zctx.NewSocket(zmq.REP)
	if err == nil {
		err = setup(sock, func() error { return sock.SetMaxmsgsize(maxFrame) })
	}
	if err == nil {
		err = sock.Bind(endpoint)
	}
	if err != nil {
		if sock != nil {
			sock.Close()
		}
		zctx.Term()
		return nil, fmt.Errorf("bind lookup server %s at %s: %w", modelPath, endpoint, err)
	}
	s := &Server{endpoint: endpoint, file: file, cfg: cfg, zctx: zctx, sock: sock, done: make(chan struct{})}
	go s.serve()
	return s, nil
}

// setup applies the options every socket of the channel needs: LINGER 0, so that closing a socket
// (or terminating its context) never waits for a peer that is gone.
func setup(sock *zmq.Socket, more ...func() error) error {
	if err := sock.SetLinger(0); err != nil {
		return err
	}
	for _, f := range more {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

// Endpoint is the endpoint the server bound (the model's path moved under the root).
func (s *Server) Endpoint() string { return s.endpoint }

// Served returns the nonces of the lookups this server answered, in order.
func (s *Server) Served() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.served...)
}

func (s *Server) serve() {
	defer close(s.done)
	// The socket belongs to this goroutine: libzmq sockets are not thread-safe, so Close terminates
	// the context (which fails this goroutine's blocking recv with ETERM) and we close it here.
	defer s.sock.Close()
	for {
		frames, err := s.sock.RecvMessageBytes(0)
		if err != nil {
			if zmq.AsErrno(err) == zmq.ETERM {
				return
			}
			s.cfg.log.Warn("lookup server receive failed", "endpoint", s.endpoint, "err", err)
			continue
		}
		reply := s.handle(frames)
		if _, err := s.sock.SendBytes(reply, 0); err != nil {
			if zmq.AsErrno(err) == zmq.ETERM {
				return
			}
			s.cfg.log.Warn("lookup server reply failed", "endpoint", s.endpoint, "err", err)
		}
	}
}

func (s *Server) handle(frames [][]byte) []byte {
	req, err := Decode(frames)
	if err != nil {
		s.cfg.log.Warn("lookup server rejected a request", "endpoint", s.endpoint, "err", err)
		return RespErr
	}
	switch req.Kind {
	case KindReset:
		if s.cfg.reset() {
			return RespOK
		}
		return RespErr
	default:
		hits := s.cfg.hits(req)
		if n := req.Nonce(); n != "" {
			s.mu.Lock()
			s.served = append(s.served, n)
			s.mu.Unlock()
			s.cfg.onServe(n)
		}
		return EncodeHits(hits)
	}
}

// Close stops serving and, as vLLM's LookupKeyServer.close does, removes the socket file — even
// when a later server has taken the path over, which is exactly what vLLM does too.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	err := s.zctx.Term()
	<-s.done
	if rmErr := os.Remove(s.file); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
		err = errors.Join(err, rmErr)
	}
	if err != nil {
		return fmt.Errorf("close lookup server %s: %w", s.endpoint, err)
	}
	return nil
}
