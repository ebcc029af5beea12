package fakestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/widetp/widetp/fakestore/api"
)

// Server is the fake Mooncake store: three HTTP listeners (metadata, master, admin; the test
// endpoints share the admin listener under api.TestPrefix) over one in-memory state.
type Server struct {
	cfg   Config
	clock Clock

	mu   sync.Mutex // guards meta, m, reg
	meta *metaStore
	m    *master
	reg  *registry

	events *eventLog
	faults *faultSet
	gate   *startGate

	lns     map[api.Plane]net.Listener
	servers map[api.Plane]*http.Server
	connMu  sync.Mutex
	conns   map[net.Conn]http.ConnState
	stop    chan struct{}
	wg      sync.WaitGroup
	started bool
	closed  bool
}

// New builds a server from cfg (zero fields defaulted) without binding anything.
func New(cfg Config) (*Server, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("fakestore config: %w", err)
	}
	s := &Server{
		cfg:    cfg,
		clock:  cfg.Clock,
		meta:   newMetaStore(),
		m:      newMaster(1),
		reg:    newRegistry(),
		events: newEventLog(),
		faults: &faultSet{},
		gate:   newStartGate(),
		stop:   make(chan struct{}),
		conns:  map[net.Conn]http.ConnState{},
	}
	for _, f := range cfg.Faults {
		if _, err := s.AddFault(f); err != nil {
			return nil, fmt.Errorf("fakestore config: %w", err)
		}
	}
	return s, nil
}

// Config returns the server's effective configuration.
func (s *Server) Config() Config { return s.cfg }

// Start binds the three listeners and serves them until Close. On error nothing is left bound.
func (s *Server) Start(ctx context.Context) error {
	if s.started {
		return errors.New("fakestore: already started")
	}
	var lc net.ListenConfig
	lns := map[api.Plane]net.Listener{}
	for _, p := range []struct {
		plane api.Plane
		addr  string
	}{{api.PlaneMetadata, s.cfg.MetadataAddr}, {api.PlaneMaster, s.cfg.MasterAddr}, {api.PlaneAdmin, s.cfg.AdminAddr}} {
		ln, err := lc.Listen(ctx, "tcp", p.addr)
		if err != nil {
			for _, l := range lns {
				_ = l.Close()
			}
			return fmt.Errorf("fakestore: listen %s plane on %s: %w", p.plane, p.addr, err)
		}
		lns[p.plane] = &refusingListener{Listener: ln, s: s, plane: p.plane}
	}
	s.lns = lns
	s.servers = map[api.Plane]*http.Server{}
	for plane, ln := range lns {
		srv := &http.Server{
			Handler: s.Handler(plane),
			// Slow or stalled clients must not pin handlers forever; the long poll answers within
			// MaxEventWait, so the write timeout leaves it room.
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       2 * time.Minute,
			ConnState:         s.trackConn,
		}
		s.servers[plane] = srv
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			_ = srv.Serve(ln)
		}()
	}
	s.wg.Add(1)
	go s.sweepLoop()
	s.started = true
	return nil
}

// sweepLoop expires clients every SweepInterval of real time (ClientMonitorFunc's loop).
func (s *Server) sweepLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.Sweep()
		}
	}
}

// Close stops the listeners, releases long-poll waiters and waits for handlers (bounded by ctx).
func (s *Server) Close(ctx context.Context) error {
	if !s.started || s.closed {
		return nil
	}
	s.closed = true
	close(s.stop)
	s.events.close()
	// Shutdown waits for connections that were accepted but never sent a request (a client's
	// spare dial) for 5 s before calling them idle; no request is lost by closing them now.
	s.connMu.Lock()
	for c, st := range s.conns {
		if st == http.StateNew {
			_ = c.Close()
		}
	}
	s.connMu.Unlock()
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for plane, srv := range s.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Shutdown(ctx); err != nil {
				_ = srv.Close()
				mu.Lock()
				errs = append(errs, fmt.Errorf("shut down %s plane: %w", plane, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	s.wg.Wait()
	return errors.Join(errs...)
}

func (s *Server) trackConn(c net.Conn, st http.ConnState) {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	switch st {
	case http.StateClosed, http.StateHijacked:
		delete(s.conns, c)
	default:
		s.conns[c] = st
	}
}

// Addr returns the bound address of a plane's listener (PlaneTest shares the admin one).
func (s *Server) Addr(p api.Plane) net.Addr {
	if p == api.PlaneTest {
		p = api.PlaneAdmin
	}
	if ln, ok := s.lns[p]; ok {
		return ln.Addr()
	}
	return nil
}

// URL returns http://host:port of a plane, with a wildcard host replaced by 127.0.0.1.
func (s *Server) URL(p api.Plane) string {
	a, ok := s.Addr(p).(*net.TCPAddr)
	if !ok {
		return ""
	}
	host := a.IP.String()
	if a.IP == nil || a.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, fmt.Sprint(a.Port))
}

// Sweep expires every client whose TTL has passed on the store's clock, now.
func (s *Server) Sweep() {
	s.mu.Lock()
	now := s.clock.Now()
	expired := s.expireLocked(now)
	s.mu.Unlock()
	for id, names := range expired {
		s.cfg.Logger.Info("client expired", "client", id, "segments", names)
		s.events.append(api.Event{Time: now, Plane: api.PlaneStore, Op: "expire", Key: id,
			Detail: "segments: " + strings.Join(names, " ")})
	}
}

// exchange is one request in flight: the response writer plus what the event log records.
type exchange struct {
	http.ResponseWriter
	status int
	peer   string
	op     string
	key    string
	// keyOK is false when the metadata query's percent-encoding is broken.
	keyOK   bool
	code    api.Code
	process string
	fault   string
	detail  string
	dropped bool
	// recorded is set once the event is in the log (a dropped request logs before it closes the
	// connection, so whoever sees the close also finds the event).
	recorded bool
}

func (x *exchange) WriteHeader(code int) {
	if x.status == 0 {
		x.status = code
	}
	x.ResponseWriter.WriteHeader(code)
}

func (x *exchange) Write(b []byte) (int, error) {
	if x.status == 0 {
		x.status = http.StatusOK
	}
	return x.ResponseWriter.Write(b)
}

// WriteString passes strings through without a copy.
func (x *exchange) WriteString(s string) (int, error) {
	if x.status == 0 {
		x.status = http.StatusOK
	}
	return io.WriteString(x.ResponseWriter, s)
}

// Flush lets http.Redirect and friends flush through the wrapper.
func (x *exchange) Flush() {
	if f, ok := x.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// kill closes the request's connection without an answer; reset makes the close an RST (what a
// refused peer sees) instead of a FIN.
func (x *exchange) kill(reset bool) {
	rc := http.NewResponseController(x.ResponseWriter)
	conn, _, err := rc.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // cannot hijack (HTTP/2): abort the stream instead
	}
	if tc, ok := conn.(*net.TCPConn); ok && reset {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

func peerIP(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		return remoteAddr
	}
	return host
}

// Handler returns the handler of a plane's listener (PlaneAdmin also serves the test endpoints),
// for serving it elsewhere (httptest) or fuzzing it. Drop and refuse faults need a
// ResponseWriter that can be hijacked; elsewhere they abort the request (http.ErrAbortHandler).
func (s *Server) Handler(listener api.Plane) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		plane := listener
		if plane == api.PlaneAdmin && strings.HasPrefix(r.URL.Path, api.TestPrefix) {
			plane = api.PlaneTest
		}
		x := &exchange{ResponseWriter: w, peer: peerIP(r.RemoteAddr)}
		if plane == api.PlaneTest {
			s.serveTest(x, r)
			// The long polls are not logged: a logged poll would wake every other poller.
			if !(r.Method == http.MethodGet && (r.URL.Path == api.TestPrefix+"events" || r.URL.Path == api.TestPrefix+"gate")) {
				s.record(plane, x, r)
			}
			return
		}
		defer s.record(plane, x, r)
		now := s.clock.Now()
		sc := scope{plane: plane, method: r.Method, peer: x.peer}
		if f := s.faults.take(api.FaultRefuse, sc, now); f != nil {
			x.fault, x.detail, x.dropped = f.ID, "refused", true
			s.record(plane, x, r)
			x.kill(true)
			return
		}
		body, n, err := readBody(r, s.cfg.MaxBody)
		if errors.Is(err, errTooLarge) {
			x.detail = fmt.Sprintf("body over %d bytes", s.cfg.MaxBody)
			s.tooLarge(plane, x, r, n)
			return
		}
		if err != nil {
			x.detail = "read body: " + err.Error()
			x.dropped = true
			return
		}
		if plane == api.PlaneMetadata {
			// Parsed once here; the flavor's handler reads x.key and x.keyOK.
			x.key, x.keyOK = metadataKey(r, s.cfg.Flavor)
			sc.op, sc.key = r.Method, x.key
		} else {
			sc.op, sc.key, sc.client = s.classify(plane, r, body)
			x.key = sc.key
		}
		x.op = sc.op
		if f := s.faults.take(api.FaultLatency, sc, now); f != nil {
			x.fault = f.ID
			t := time.NewTimer(time.Duration(f.Latency))
			select {
			case <-t.C:
			case <-r.Context().Done():
			case <-s.stop:
			}
			t.Stop()
		}
		if f := s.faults.take(api.FaultDrop, sc, now); f != nil {
			x.fault, x.detail, x.dropped = f.ID, "dropped", true
			s.record(plane, x, r)
			x.kill(false)
			return
		}
		if f := s.faults.take(api.FaultStatus, sc, now); f != nil {
			x.fault, x.detail = f.ID, "forced"
			s.forced(plane, x, r, f)
			return
		}
		switch plane {
		case api.PlaneMetadata:
			s.serveMetadata(x, r, body)
		case api.PlaneMaster:
			s.serveMaster(x, r, body)
		default:
			s.serveAdmin(x, r)
		}
	})
}

// record appends the request's event once it has been answered (so a waiter woken by it sees
// the state it left).
func (s *Server) record(plane api.Plane, x *exchange, r *http.Request) {
	if x.recorded {
		return
	}
	x.recorded = true
	status := x.status
	if x.dropped {
		status = 0
	}
	s.events.append(api.Event{Time: s.clock.Now(), Plane: plane, Method: r.Method, Path: r.URL.Path, Op: x.op,
		Key: x.key, Peer: x.peer, Status: status, Code: x.code, Process: x.process, Fault: x.fault, Detail: x.detail})
}

var errTooLarge = errors.New("request body too large")

// readBody reads the whole body up to max bytes; n is how much was seen.
func readBody(r *http.Request, max int64) (body []byte, n int64, err error) {
	if r.ContentLength > max {
		return nil, r.ContentLength, errTooLarge
	}
	if r.Body == nil || r.Body == http.NoBody {
		return nil, 0, nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, max+1))
	if err != nil {
		return nil, int64(len(b)), err
	}
	if int64(len(b)) > max {
		return nil, int64(len(b)), errTooLarge
	}
	return b, int64(len(b)), nil
}

// classify names a request for events and fault scopes: (operation, key, client id).
func (s *Server) classify(plane api.Plane, r *http.Request, body []byte) (op, key, client string) {
	switch plane {
	case api.PlaneMaster:
		op = strings.TrimPrefix(r.URL.Path, api.MasterPathPrefix)
		var probe struct {
			ClientID  string        `json:"client_id"`
			Key       string        `json:"key"`
			Keys      []string      `json:"keys"`
			SegmentID string        `json:"segment_id"`
			Segment   api.Segment   `json:"segment"`
			Segments  []api.Segment `json:"segments"`
		}
		_ = json.Unmarshal(body, &probe)
		switch {
		case probe.Key != "":
			key = probe.Key
		case probe.Segment.Name != "":
			key = probe.Segment.Name
		case len(probe.Segments) > 0:
			key = probe.Segments[0].Name
		case len(probe.Keys) > 0:
			key = probe.Keys[0]
		case probe.SegmentID != "":
			key = probe.SegmentID
		default:
			key = probe.ClientID
		}
		return op, key, probe.ClientID
	default:
		k := ""
		if q, err := urlQuery(r); err == nil {
			k = q.Get("key")
		}
		return r.URL.Path, k, ""
	}
}

func (s *Server) tooLarge(plane api.Plane, x *exchange, r *http.Request, n int64) {
	switch plane {
	case api.PlaneMetadata:
		s.tooLargeMetadata(x, r, n)
	case api.PlaneMaster:
		writeMasterError(x, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", s.cfg.MaxBody))
	default:
		writeText(x, http.StatusRequestEntityTooLarge, ctNone, "Request Entity Too Large")
	}
}

// forced answers a status fault the way the plane's real server answers that status.
func (s *Server) forced(plane api.Plane, x *exchange, r *http.Request, f *api.Fault) {
	switch plane {
	case api.PlaneMetadata:
		status := f.Status
		if status == 0 {
			status = http.StatusInternalServerError
		}
		s.forcedMetadata(x, r, status, f.Body)
	case api.PlaneMaster:
		status := f.Status
		if status == 0 {
			status = http.StatusOK
		}
		code := f.Code
		if code == 0 {
			code = api.RPCFail
		}
		x.code = code
		res := result(code)
		res.Message = f.Body
		writeJSON(x, status, res)
	default:
		s.forcedAdmin(x, f)
	}
}

// refusingListener resets connections from peers a refuse fault names, as they are accepted.
type refusingListener struct {
	net.Listener
	s     *Server
	plane api.Plane
}

func (l *refusingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		peer := peerIP(c.RemoteAddr().String())
		f := l.s.faults.take(api.FaultRefuse, scope{plane: l.plane, peer: peer}, l.s.clock.Now())
		if f == nil {
			return c, nil
		}
		l.s.events.append(api.Event{Time: l.s.clock.Now(), Plane: l.plane, Peer: peer, Fault: f.ID, Detail: "refused"})
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
	}
}
