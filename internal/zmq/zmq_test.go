package zmq

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/widetp/widetp/internal/testport"
)

func pair(t *testing.T, ctx *Context, typ Type) *Socket {
	t.Helper()
	s, err := ctx.NewSocket(typ)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for _, set := range []func() error{
		func() error { return s.SetLinger(0) },
		func() error { return s.SetRcvtimeo(5 * time.Second) },
		func() error { return s.SetSndtimeo(5 * time.Second) },
	} {
		if err := set(); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func newContext(t *testing.T) *Context {
	t.Helper()
	ctx, err := NewContext()
	if err != nil {
		t.Fatal(err)
	}
	return ctx
}

// freePort is a loopback port that stays free for the test's socket to bind (testport).
func freePort(t *testing.T) int { return testport.Free(t, "127.0.0.1") }

// A multipart request and its answer cross a real tcp connection frame for frame, an empty
// frame included.
func TestTCPRoundTrip(t *testing.T) {
	ctx := newContext(t)
	ep := "tcp://127.0.0.1:" + strconv.Itoa(freePort(t))
	rep, req := pair(t, ctx, REP), pair(t, ctx, REQ)
	if err := rep.Bind(ep); err != nil {
		t.Fatal(err)
	}
	if err := req.Connect(ep); err != nil {
		t.Fatal(err)
	}
	if _, err := req.SendMessage("hello", []byte{}, []byte("world")); err != nil {
		t.Fatal(err)
	}
	got, err := rep.RecvMessageBytes(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || string(got[0]) != "hello" || len(got[1]) != 0 || string(got[2]) != "world" {
		t.Fatalf("frames %q, want hello, empty, world", got)
	}
	if _, err := rep.SendBytes([]byte("ok"), 0); err != nil {
		t.Fatal(err)
	}
	if b, err := req.RecvBytes(0); err != nil || string(b) != "ok" {
		t.Fatalf("answer %q, %v", b, err)
	}
}

// A second bind of a tcp address fails with the system's EADDRINUSE; a second bind of an ipc
// path takes it over silently, and new clients reach the second binder (libzmq's behaviour, which
// the simulation relies on: vLLM's pyzmq behaves alike).
func TestBindCollisions(t *testing.T) {
	ctx := newContext(t)
	ep := "tcp://127.0.0.1:" + strconv.Itoa(freePort(t))
	a, b := pair(t, ctx, REP), pair(t, ctx, REP)
	if err := a.Bind(ep); err != nil {
		t.Fatal(err)
	}
	err := b.Bind(ep)
	if AsErrno(err) != Errno(syscall.EADDRINUSE) {
		t.Fatalf("second tcp bind: %v (errno %d), want EADDRINUSE", err, AsErrno(err))
	}
	if !strings.Contains(err.Error(), "in use") {
		t.Errorf("the error reads %q: want libzmq's own text", err)
	}

	ipc := "ipc://" + filepath.Join(t.TempDir(), "lookup.ipc")
	first, second := pair(t, ctx, REP), pair(t, ctx, REP)
	if err := first.Bind(ipc); err != nil {
		t.Fatal(err)
	}
	if err := second.Bind(ipc); err != nil {
		t.Fatalf("a second ipc bind failed (%v): libzmq takes the path over", err)
	}
	req := pair(t, ctx, REQ)
	if err := req.Connect(ipc); err != nil {
		t.Fatal(err)
	}
	if _, err := req.SendBytes([]byte("who"), 0); err != nil {
		t.Fatal(err)
	}
	poller := NewPoller()
	poller.Add(first, POLLIN)
	poller.Add(second, POLLIN)
	ready, err := poller.Poll(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(ready) != 1 || ready[0].Socket != second {
		t.Fatalf("the request reached %d socket(s), want the second binder alone", len(ready))
	}
}

// A receive that times out is EAGAIN, as callers test it.
func TestRecvTimeoutIsEAGAIN(t *testing.T) {
	ctx := newContext(t)
	rep := pair(t, ctx, REP)
	if err := rep.SetRcvtimeo(10 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := rep.Bind("tcp://127.0.0.1:" + strconv.Itoa(freePort(t))); err != nil {
		t.Fatal(err)
	}
	if _, err := rep.RecvBytes(0); AsErrno(err) != Errno(syscall.EAGAIN) {
		t.Fatalf("recv with nobody sending: %v, want EAGAIN", err)
	}
}

// Where libzmq is missing, the error says so and names the package to install. The loader runs
// once per process, so a child test process looks for a library that does not exist.
func TestMissingLibraryNamesThePackage(t *testing.T) {
	if os.Getenv("WIDETP_ZMQ_CHILD") == "1" {
		_, err := NewContext()
		if err == nil {
			os.Exit(3)
		}
		os.Stderr.WriteString(err.Error())
		if errors.Is(err, ErrNoLibzmq) {
			os.Exit(0)
		}
		os.Exit(4)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMissingLibraryNamesThePackage$")
	cmd.Env = append(os.Environ(), "WIDETP_ZMQ_CHILD=1", EnvLibrary+"=libzmq-widetp-absent.so.5")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for _, want := range []string{"libzmq-widetp-absent.so.5", "apt-get install libzmq5", "dnf install zeromq"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the error %q does not name %q", out, want)
		}
	}
}

// Path is the file the loader found: what a container image must carry.
func TestPathIsTheLoadedFile(t *testing.T) {
	p, err := Path()
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || fi.IsDir() || !strings.Contains(filepath.Base(p), "libzmq") {
		t.Fatalf("Path() = %q (%v), want the libzmq file", p, err)
	}
}

// libzmq keeps a short frame's bytes inside the zmq_msg_t itself. A frame whose first bytes are the
// address of a live Go object must come out unchanged, and must not make the message look, to Go,
// like memory holding Go pointers: cgo's pointer check (on under -race) refused that once in CI,
// and a collector scanning it would have taken the bytes for a pointer.
func TestShortFrameHoldingAGoAddress(t *testing.T) {
	ctx := newContext(t)
	ep := "inproc://go-address"
	rep, req := pair(t, ctx, REP), pair(t, ctx, REQ)
	if err := rep.Bind(ep); err != nil {
		t.Fatal(err)
	}
	if err := req.Connect(ep); err != nil {
		t.Fatal(err)
	}
	live := make([]*int, 64)
	for i := range live {
		live[i] = new(int)
	}
	for i, p := range live {
		frame := make([]byte, 16)
		binary.LittleEndian.PutUint64(frame, uint64(uintptr(unsafe.Pointer(p))))
		binary.LittleEndian.PutUint64(frame[8:], uint64(uintptr(unsafe.Pointer(&live[i]))))
		if _, err := req.SendBytes(frame, 0); err != nil {
			t.Fatal(err)
		}
		got, err := rep.RecvBytes(0)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, frame) {
			t.Fatalf("frame %d came out as %x, sent %x", i, got, frame)
		}
		runtime.GC()
		if _, err := rep.SendBytes(nil, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := req.RecvBytes(0); err != nil {
			t.Fatal(err)
		}
	}
	runtime.KeepAlive(live)
}

// RecvReply gives up at its timeout while the socket has met no peer (nothing at the port), and
// once a peer completed a handshake it waits for that peer's late answer past the timeout.
func TestRecvReplyIsPatientOnlyWithAPeerMet(t *testing.T) {
	zctx := newContext(t)
	ep := "tcp://127.0.0.1:" + strconv.Itoa(freePort(t))
	req := pair(t, zctx, REQ)
	peers, err := req.WatchPeers()
	if err != nil {
		t.Fatal(err)
	}
	defer peers.Close()
	if err := req.Connect(ep); err != nil {
		t.Fatal(err)
	}
	if _, err := req.SendBytes([]byte("ping"), 0); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, met, err := RecvReply(context.Background(), req, peers, 100*time.Millisecond, time.Minute)
	if AsErrno(err) != Errno(syscall.EAGAIN) || met {
		t.Fatalf("reply with nothing at %s: met %v, %v; want EAGAIN and no peer met", ep, met, err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("waited %v with no peer met: the patience applied", d)
	}
	// A peer comes up at the port: the request libzmq kept reaches it.
	rep := pair(t, zctx, REP)
	if err := rep.Bind(ep); err != nil {
		t.Fatal(err)
	}
	if got, err := rep.RecvBytes(0); err != nil || string(got) != "ping" {
		t.Fatalf("peer got %q, %v", got, err)
	}
	type result struct {
		reply [][]byte
		met   bool
		err   error
	}
	done := make(chan result, 1)
	go func() {
		reply, met, err := RecvReply(context.Background(), req, peers, 50*time.Millisecond, time.Minute)
		done <- result{reply, met, err}
	}()
	// The answer leaves well after the client's timeout.
	<-time.After(300 * time.Millisecond)
	if _, err := rep.SendBytes([]byte("pong"), 0); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || !r.met || len(r.reply) != 1 || string(r.reply[0]) != "pong" {
		t.Fatalf("late reply from a peer met: %q, met %v, %v; want pong", r.reply, r.met, r.err)
	}
}
