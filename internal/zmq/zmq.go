// Package zmq is the part of libzmq widetp uses, loaded at run time with dlopen: a widetp binary
// starts on a machine without libzmq and says which package to install when it first needs it,
// instead of the dynamic loader refusing to start it. libzmq itself is what makes the simulation
// faithful: it takes an ipc path over silently on a second bind, as vLLM's pyzmq does.
//
// The API follows github.com/pebbe/zmq4 where widetp used it (Context, Socket, Poller, Errno,
// AsErrno), so that a call site reads the same.
package zmq

/*
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <stdint.h>

// zmq_msg_t is 64 opaque bytes, pointer-aligned. Declared as integers, not pointers: libzmq keeps a
// short frame's bytes inside it, and Go must not take those bytes for pointers (cgo's pointer check
// and the collector both would).
typedef struct { uint64_t _[8]; } wzmq_msg_t;

static void *lib;
static void *(*p_ctx_new)(void);
static int (*p_ctx_term)(void *);
static void *(*p_socket)(void *, int);
static int (*p_close)(void *);
static int (*p_setsockopt)(void *, int, const void *, size_t);
static int (*p_getsockopt)(void *, int, void *, size_t *);
static int (*p_bind)(void *, const char *);
static int (*p_connect)(void *, const char *);
static int (*p_send)(void *, const void *, size_t, int);
static int (*p_msg_init)(void *);
static int (*p_msg_recv)(void *, void *, int);
static int (*p_msg_close)(void *);
static void *(*p_msg_data)(void *);
static size_t (*p_msg_size)(void *);
static const char *(*p_strerror)(int);
static void (*p_version)(int *, int *, int *);
typedef struct { void *socket; int fd; short events; short revents; } wzmq_pollitem_t;
static int (*p_poll)(wzmq_pollitem_t *, int, long);
static int (*p_socket_monitor)(void *, const char *, int);

static const char *wzmq_load(const char *name) {
	if (lib) return NULL;
	void *h = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
	if (!h) return dlerror();
#define SYM(var, sym) do { *(void **)(&var) = dlsym(h, sym); if (!var) return dlerror(); } while (0)
	SYM(p_ctx_new, "zmq_ctx_new");
	SYM(p_ctx_term, "zmq_ctx_term");
	SYM(p_socket, "zmq_socket");
	SYM(p_close, "zmq_close");
	SYM(p_setsockopt, "zmq_setsockopt");
	SYM(p_getsockopt, "zmq_getsockopt");
	SYM(p_bind, "zmq_bind");
	SYM(p_connect, "zmq_connect");
	SYM(p_send, "zmq_send");
	SYM(p_msg_init, "zmq_msg_init");
	SYM(p_msg_recv, "zmq_msg_recv");
	SYM(p_msg_close, "zmq_msg_close");
	SYM(p_msg_data, "zmq_msg_data");
	SYM(p_msg_size, "zmq_msg_size");
	SYM(p_strerror, "zmq_strerror");
	SYM(p_version, "zmq_version");
	SYM(p_poll, "zmq_poll");
	SYM(p_socket_monitor, "zmq_socket_monitor");
#undef SYM
	lib = h;
	return NULL;
}

static const char *wzmq_path(void) {
	Dl_info info;
	if (!lib || !dladdr(*(void **)(&p_version), &info) || !info.dli_fname) return NULL;
	return info.dli_fname;
}

static void wzmq_version(int *a, int *b, int *c) { p_version(a, b, c); }
static void *wzmq_ctx_new(void) { return p_ctx_new(); }
static int wzmq_ctx_term(void *c) { return p_ctx_term(c); }
static void *wzmq_socket(void *c, int t) { return p_socket(c, t); }
static int wzmq_close(void *s) { return p_close(s); }
static int wzmq_setsockopt_int(void *s, int o, int v) { return p_setsockopt(s, o, &v, sizeof v); }
static int wzmq_setsockopt_int64(void *s, int o, int64_t v) { return p_setsockopt(s, o, &v, sizeof v); }
static int wzmq_getsockopt_int(void *s, int o, int *v) { size_t n = sizeof *v; return p_getsockopt(s, o, v, &n); }
static int wzmq_bind(void *s, const char *e) { return p_bind(s, e); }
static int wzmq_connect(void *s, const char *e) { return p_connect(s, e); }
static int wzmq_send(void *s, const void *d, size_t n, int f) { return p_send(s, d, n, f); }
static int wzmq_msg_init(wzmq_msg_t *m) { return p_msg_init(m); }
static int wzmq_msg_recv(wzmq_msg_t *m, void *s, int f) { return p_msg_recv(m, s, f); }
static int wzmq_msg_close(wzmq_msg_t *m) { return p_msg_close(m); }
static void *wzmq_msg_data(wzmq_msg_t *m) { return p_msg_data(m); }
static size_t wzmq_msg_size(wzmq_msg_t *m) { return p_msg_size(m); }
static const char *wzmq_strerror(int e) { return p_strerror(e); }
static int wzmq_poll(wzmq_pollitem_t *items, int n, long timeout) { return p_poll(items, n, timeout); }
static int wzmq_socket_monitor(void *s, const char *e, int events) { return p_socket_monitor(s, e, events); }
*/
import "C"

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// Library is the shared object loaded; $WIDETP_LIBZMQ names another (a path or a soname).
const Library = "libzmq.so.5"

// EnvLibrary overrides Library.
const EnvLibrary = "WIDETP_LIBZMQ"

// ErrNoLibzmq is the error of every call when libzmq could not be loaded.
var ErrNoLibzmq = errors.New("libzmq is not installed")

var (
	loadOnce sync.Once
	loadErr  error
)

// Load loads libzmq once; every other call does it first. Its error names the package to install.
func Load() error {
	loadOnce.Do(func() {
		name := Library
		if v := os.Getenv(EnvLibrary); v != "" {
			name = v
		}
		cname := C.CString(name)
		defer C.free(unsafe.Pointer(cname))
		if msg := C.wzmq_load(cname); msg != nil {
			loadErr = fmt.Errorf("%w: cannot load %s (%s); install it: Debian/Ubuntu apt-get install libzmq5, Fedora dnf install zeromq, Alpine apk add libzmq",
				ErrNoLibzmq, name, C.GoString(msg))
		}
	})
	return loadErr
}

// Path is the file libzmq was loaded from (what an image must carry).
func Path() (string, error) {
	if err := Load(); err != nil {
		return "", err
	}
	p := C.wzmq_path()
	if p == nil {
		return "", errors.New("libzmq: cannot tell which file was loaded")
	}
	return C.GoString(p), nil
}

// Version is libzmq's version.
func Version() (major, minor, patch int) {
	if Load() != nil {
		return 0, 0, 0
	}
	var a, b, c C.int
	C.wzmq_version(&a, &b, &c)
	return int(a), int(b), int(c)
}

// Socket types, send flags, poll events and options (zmq.h).
type Type int

const (
	PAIR   Type = 0
	REQ    Type = 3
	REP    Type = 4
	DEALER Type = 5
	ROUTER Type = 6
)

type Flag int

const (
	DONTWAIT Flag = 1
	SNDMORE  Flag = 2
)

type State int

const POLLIN State = 1

const (
	optLinger     = 17
	optRcvmore    = 13
	optMaxmsgsize = 22
	optRcvtimeo   = 27
	optSndtimeo   = 28
)

// Errno is a libzmq error number: a system errno, or one of libzmq's own (ETERM, ...).
type Errno uintptr

// ETERM: the context was terminated.
const ETERM = Errno(156384712 + 53)

func (e Errno) Error() string {
	if Load() != nil {
		return syscall.Errno(e).Error()
	}
	return C.GoString(C.wzmq_strerror(C.int(e)))
}

// AsErrno is err's Errno, or 0.
func AsErrno(err error) Errno {
	var e Errno
	if errors.As(err, &e) {
		return e
	}
	return 0
}

// errOf is the error of a failed call from the errno cgo read right after it, on the same
// thread (libzmq sets errno; a later zmq_errno() call may run on another thread).
func errOf(err error) error {
	var e syscall.Errno
	if errors.As(err, &e) {
		return Errno(e)
	}
	if err == nil {
		return errors.New("zmq: a call failed without an errno")
	}
	return err
}

// retry repeats a call that a signal interrupted (the Go runtime's own preemption signals).
func retry(call func() (C.int, error)) (C.int, error) {
	for {
		rc, err := call()
		if rc != -1 {
			return rc, nil
		}
		err = errOf(err)
		if err == Errno(syscall.EINTR) {
			continue
		}
		return rc, err
	}
}

// Context is a libzmq context.
type Context struct{ p unsafe.Pointer }

// NewContext makes a context.
func NewContext() (*Context, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	p, err := C.wzmq_ctx_new()
	if p == nil {
		return nil, errOf(err)
	}
	return &Context{p: p}, nil
}

// Term terminates the context once its sockets are closed (after their linger).
func (c *Context) Term() error {
	_, err := retry(func() (C.int, error) { rc, err := C.wzmq_ctx_term(c.p); return rc, err })
	return err
}

// Socket is a libzmq socket; as libzmq's, it is used by one goroutine at a time.
type Socket struct {
	p   unsafe.Pointer
	ctx *Context
}

// NewSocket makes a socket of type t.
func (c *Context) NewSocket(t Type) (*Socket, error) {
	p, err := C.wzmq_socket(c.p, C.int(t))
	if p == nil {
		return nil, errOf(err)
	}
	return &Socket{p: p, ctx: c}, nil
}

// Close closes the socket.
func (s *Socket) Close() error {
	if rc, err := C.wzmq_close(s.p); rc != 0 {
		return errOf(err)
	}
	return nil
}

func (s *Socket) setInt(opt int, v int) error {
	if rc, err := C.wzmq_setsockopt_int(s.p, C.int(opt), C.int(v)); rc != 0 {
		return errOf(err)
	}
	return nil
}

func ms(d time.Duration) int {
	if d < 0 {
		return -1
	}
	return int(d / time.Millisecond)
}

// SetLinger, SetRcvtimeo and SetSndtimeo set the options in milliseconds (-1: forever).
func (s *Socket) SetLinger(d time.Duration) error   { return s.setInt(optLinger, ms(d)) }
func (s *Socket) SetRcvtimeo(d time.Duration) error { return s.setInt(optRcvtimeo, ms(d)) }
func (s *Socket) SetSndtimeo(d time.Duration) error { return s.setInt(optSndtimeo, ms(d)) }

// SetMaxmsgsize sets ZMQ_MAXMSGSIZE.
func (s *Socket) SetMaxmsgsize(n int64) error {
	if rc, err := C.wzmq_setsockopt_int64(s.p, C.int(optMaxmsgsize), C.int64_t(n)); rc != 0 {
		return errOf(err)
	}
	return nil
}

// Bind binds an endpoint.
func (s *Socket) Bind(endpoint string) error {
	ce := C.CString(endpoint)
	defer C.free(unsafe.Pointer(ce))
	_, err := retry(func() (C.int, error) { rc, err := C.wzmq_bind(s.p, ce); return rc, err })
	return err
}

// Connect connects to an endpoint.
func (s *Socket) Connect(endpoint string) error {
	ce := C.CString(endpoint)
	defer C.free(unsafe.Pointer(ce))
	_, err := retry(func() (C.int, error) { rc, err := C.wzmq_connect(s.p, ce); return rc, err })
	return err
}

// SendBytes sends one frame.
func (s *Socket) SendBytes(data []byte, flags Flag) (int, error) {
	var p unsafe.Pointer
	if len(data) > 0 {
		p = C.CBytes(data)
		defer C.free(p)
	}
	rc, err := retry(func() (C.int, error) {
		rc, err := C.wzmq_send(s.p, p, C.size_t(len(data)), C.int(flags))
		return rc, err
	})
	return int(rc), err
}

// SendMessage sends parts ([]byte or string) as one multipart message.
func (s *Socket) SendMessage(parts ...any) (int, error) {
	total := 0
	for i, part := range parts {
		var b []byte
		switch v := part.(type) {
		case []byte:
			b = v
		case string:
			b = []byte(v)
		default:
			return total, fmt.Errorf("zmq: SendMessage: part %d is a %T, not []byte or string", i, part)
		}
		f := Flag(0)
		if i < len(parts)-1 {
			f = SNDMORE
		}
		n, err := s.SendBytes(b, f)
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

// RecvBytes receives one frame.
func (s *Socket) RecvBytes(flags Flag) ([]byte, error) {
	var m C.wzmq_msg_t
	C.wzmq_msg_init(&m)
	defer C.wzmq_msg_close(&m)
	if _, err := retry(func() (C.int, error) { rc, err := C.wzmq_msg_recv(&m, s.p, C.int(flags)); return rc, err }); err != nil {
		return nil, err
	}
	return C.GoBytes(C.wzmq_msg_data(&m), C.int(C.wzmq_msg_size(&m))), nil
}

// RecvMessageBytes receives every frame of one message.
func (s *Socket) RecvMessageBytes(flags Flag) ([][]byte, error) {
	var out [][]byte
	for {
		b, err := s.RecvBytes(flags)
		if err != nil {
			return out, err
		}
		out = append(out, b)
		var more C.int
		if rc, err := C.wzmq_getsockopt_int(s.p, C.int(optRcvmore), &more); rc != 0 {
			return out, errOf(err)
		}
		if more == 0 {
			return out, nil
		}
	}
}

// Poller waits on several sockets.
type Poller struct {
	socks  []*Socket
	events []State
}

// Polled is a socket that is ready, and for what.
type Polled struct {
	Socket *Socket
	Events State
}

// NewPoller makes an empty poller.
func NewPoller() *Poller { return &Poller{} }

// Add adds a socket to wait on for events; it returns its index.
func (p *Poller) Add(s *Socket, events State) int {
	p.socks = append(p.socks, s)
	p.events = append(p.events, events)
	return len(p.socks) - 1
}

// Poll waits up to timeout (negative: forever) and returns the sockets that are ready.
func (p *Poller) Poll(timeout time.Duration) ([]Polled, error) {
	n := len(p.socks)
	if n == 0 {
		return nil, nil
	}
	items := (*[1 << 16]C.wzmq_pollitem_t)(C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof(C.wzmq_pollitem_t{}))))[:n:n]
	defer C.free(unsafe.Pointer(&items[0]))
	for i, s := range p.socks {
		items[i] = C.wzmq_pollitem_t{socket: s.p, events: C.short(p.events[i])}
	}
	if rc, err := C.wzmq_poll(&items[0], C.int(n), C.long(ms(timeout))); rc < 0 {
		return nil, errOf(err)
	}
	var out []Polled
	for i, it := range items {
		if it.revents != 0 {
			out = append(out, Polled{Socket: p.socks[i], Events: State(it.revents)})
		}
	}
	return out, nil
}

// Send sends one frame of text.
func (s *Socket) Send(data string, flags Flag) (int, error) { return s.SendBytes([]byte(data), flags) }

// Recv receives one frame as text.
func (s *Socket) Recv(flags Flag) (string, error) {
	b, err := s.RecvBytes(flags)
	return string(b), err
}

// EventHandshakeSucceeded is the socket monitor's event for a ZMTP handshake completed with a
// peer (zmq.h's ZMQ_EVENT_HANDSHAKE_SUCCEEDED, stable since libzmq 4.3).
const EventHandshakeSucceeded = 0x1000

var monitorSeq atomic.Uint64

// Peers watches a socket's ZMTP handshakes through libzmq's socket monitor (zmq_socket_monitor):
// whether the socket has met a live peer that speaks ZMTP, not only a port or path that accepts
// connections. A socket on a port that nothing serves, on a host cut off, or on a frozen peer
// meets none.
type Peers struct {
	sock, pair *Socket
	met        bool
}

// WatchPeers starts watching s's handshakes. Call it before s connects: an event that comes before
// the watch is lost.
func (s *Socket) WatchPeers() (*Peers, error) {
	ep := fmt.Sprintf("inproc://widetp-monitor-%d", monitorSeq.Add(1))
	ce := C.CString(ep)
	defer C.free(unsafe.Pointer(ce))
	if rc, err := C.wzmq_socket_monitor(s.p, ce, C.int(EventHandshakeSucceeded)); rc != 0 {
		return nil, fmt.Errorf("monitor socket: %w", errOf(err))
	}
	pair, err := s.ctx.NewSocket(PAIR)
	if err == nil {
		if err = pair.SetLinger(0); err == nil {
			err = pair.Connect(ep)
		}
		if err != nil {
			pair.Close()
		}
	}
	if err != nil {
		C.wzmq_socket_monitor(s.p, nil, 0)
		return nil, fmt.Errorf("monitor socket: %w", err)
	}
	return &Peers{sock: s, pair: pair}, nil
}

// Met reports whether the socket has completed a handshake with a peer by now.
func (w *Peers) Met() bool {
	for !w.met {
		// An event is two frames: the event number (16 bits, native order) and its value, then
		// the endpoint.
		frames, err := w.pair.RecvMessageBytes(DONTWAIT)
		if err != nil {
			break // no event (yet)
		}
		if len(frames) > 0 && len(frames[0]) >= 2 && binary.NativeEndian.Uint16(frames[0]) == EventHandshakeSucceeded {
			w.met = true
		}
	}
	return w.met
}

// Close ends the watch; the socket goes on.
func (w *Peers) Close() {
	C.wzmq_socket_monitor(w.sock.p, nil, 0)
	w.pair.Close()
}

// replySlice is how long one receive of RecvReply blocks at most: ctx is checked between them.
const replySlice = 250 * time.Millisecond

// RecvReply waits for the reply to a request sent on s, whose handshakes peers watches: within
// timeout, and, once the socket has met a peer (Peers.Met), within patience from the start. A peer
// that completed a handshake is up, and on a loaded machine it may answer late; nothing that never
// completed one answers at all. met says whether the socket met a peer; ctx ends the wait. A wait
// that ran out returns EAGAIN, as a receive past its ZMQ_RCVTIMEO does.
func RecvReply(ctx context.Context, s *Socket, peers *Peers, timeout, patience time.Duration) (reply [][]byte, met bool, err error) {
	start := time.Now()
	bound := timeout
	for {
		elapsed := time.Since(start)
		if elapsed >= bound && bound < patience && peers.Met() {
			bound = patience
		}
		left := bound - elapsed
		if left <= 0 {
			return nil, peers.Met(), Errno(syscall.EAGAIN)
		}
		if err := ctx.Err(); err != nil {
			return nil, peers.Met(), err
		}
		if err := s.SetRcvtimeo(max(min(left, replySlice), time.Millisecond)); err != nil {
			return nil, peers.Met(), err
		}
		reply, err := s.RecvMessageBytes(0)
		if err == nil {
			return reply, peers.Met(), nil
		}
		if AsErrno(err) != Errno(syscall.EAGAIN) {
			return nil, peers.Met(), err
		}
	}
}
