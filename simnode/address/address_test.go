package address

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/widetp/widetp/internal/zmq"
)

// local is a simulated host of a local run on 127.0.0.1.
var local = Net{ListenIP: "127.0.0.1"}

func TestListenTCPCollides(t *testing.T) {
	ctx := context.Background()
	first, err := ListenTCP(ctx, local, "tcp://0.0.0.0:0")
	if err != nil {
		t.Fatalf("first bind: %v", err)
	}
	ep := first.Endpoint()
	_, err = ListenTCP(ctx, local, ep)
	var be *BindError
	if !errors.As(err, &be) || be.Errno != syscall.EADDRINUSE || Strerror(be.Errno) != "Address already in use" {
		t.Fatalf("second bind of %s: %v; want EADDRINUSE, as vLLM's socket.bind raises it", ep, err)
	}
	if err := first.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	again, err := ListenTCP(ctx, local, ep)
	if err != nil {
		t.Fatalf("bind after the holder closed: %v", err)
	}
	again.Close()
}

func TestSideChannelAnswersWithItsKeyAndRecordsTheNonce(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var served []string
	// A ROUTER on a port the kernel picks, found through the TCP listener it then frees.
	probe, err := ListenTCP(ctx, local, "tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ep := probe.Endpoint()
	probe.Close()
	sc, err := ListenSideChannel(ctx, local, ep, "engine-A", func(n string) { mu.Lock(); served = append(served, n); mu.Unlock() })
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer sc.Close()
	_, err = ListenSideChannel(ctx, local, ep, "engine-B", func(string) {})
	var be *BindError
	if !errors.As(err, &be) || be.Errno != syscall.EADDRINUSE {
		t.Fatalf("second ROUTER at %s: %v; want EADDRINUSE (pyzmq's ZMQError: Address already in use)", ep, err)
	}
	key, err := Dial(ctx, local, ep, "nonce-1", 2*time.Second, 2*time.Second)
	if err != nil || key != "engine-A" {
		t.Fatalf("dial: %q, %v", key, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(served) != 1 || served[0] != "nonce-1" {
		t.Errorf("served %v, want [nonce-1] recorded before the answer left", served)
	}
}

func TestDialNobodyIsNoAnswerWithinTheBound(t *testing.T) {
	probe, err := ListenTCP(context.Background(), local, "tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ep := probe.Endpoint()
	probe.Close()
	start := time.Now()
	_, err = Dial(context.Background(), local, ep, "n", 300*time.Millisecond, time.Minute)
	if !errors.Is(err, ErrNoAnswer) {
		t.Fatalf("dial %s with nothing there: %v", ep, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v for a 300ms bound and nobody there to be patient with", d)
	}
}

// slowPeer is a ZMQ REP peer on a port of its own that takes each request and answers it (with
// key) only once answer is closed, or never.
func slowPeer(t *testing.T, answer <-chan struct{}, key string) (endpoint string, got <-chan struct{}) {
	t.Helper()
	probe, err := ListenTCP(context.Background(), local, "tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ep := probe.Endpoint()
	probe.Close()
	zctx, err := zmq.NewContext()
	if err != nil {
		t.Fatal(err)
	}
	sock, err := zctx.NewSocket(zmq.REP)
	if err == nil {
		err = sock.SetLinger(0)
	}
	if err == nil {
		err = sock.Bind(ep)
	}
	if err != nil {
		t.Fatal(err)
	}
	received := make(chan struct{})
	served := make(chan struct{})
	go func() {
		defer close(served)
		if _, err := sock.RecvMessageBytes(0); err != nil {
			return
		}
		close(received)
		if _, open := <-answer; open {
			return
		}
		sock.SendBytes([]byte(key), 0)
	}()
	t.Cleanup(func() {
		sock.Close()
		zctx.Term()
		<-served
	})
	return ep, received
}

// TestDialWaitsForAPeerThatCompletedTheHandshake: on a loaded machine a peer that is up answers
// late; the socket met it (a ZMTP handshake), so its answer is waited for past the timeout, up to
// the patience (an e2e run on a loaded machine once recorded such a peer as unreachable).
func TestDialWaitsForAPeerThatCompletedTheHandshake(t *testing.T) {
	answer := make(chan struct{})
	ep, received := slowPeer(t, answer, "late-key")
	const timeout = 100 * time.Millisecond
	go func() {
		<-received
		// The answer leaves only once the client's timeout has passed.
		<-time.After(3 * timeout)
		close(answer)
	}()
	start := time.Now()
	key, err := Dial(context.Background(), local, ep, "n", timeout, time.Minute)
	if err != nil || key != "late-key" {
		t.Fatalf("dial of a peer that answers after %v: %q, %v; want its late answer", 3*timeout, key, err)
	}
	if d := time.Since(start); d < 3*timeout {
		t.Fatalf("answered after %v, before the peer sent its answer", d)
	}
}

// TestDialGivesUpOnASilentPeerAtThePatience: a peer that completed the handshake and never
// answers is no answer once the patience ran out, and the error says that a peer was there.
func TestDialGivesUpOnASilentPeerAtThePatience(t *testing.T) {
	answer := make(chan struct{})
	defer close(answer)
	ep, _ := slowPeer(t, answer, "never")
	start := time.Now()
	_, err := Dial(context.Background(), local, ep, "n", 100*time.Millisecond, 400*time.Millisecond)
	if !errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), "completed the handshake") {
		t.Fatalf("dial of a silent peer: %v; want no answer from a peer that completed the handshake", err)
	}
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Fatalf("gave up after %v, before the patience of 400ms", d)
	}
}

// TestDialIsNotPatientWithAPortThatSpeaksNoZMTP: a port whose listener accepts the connection but
// never speaks ZMTP (a port another program holds) completes no handshake: no answer at the
// timeout, however long the patience.
func TestDialIsNotPatientWithAPortThatSpeaksNoZMTP(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	start := time.Now()
	_, err = Dial(context.Background(), local, "tcp://"+l.Addr().String(), "n", 300*time.Millisecond, time.Minute)
	if !errors.Is(err, ErrNoAnswer) || strings.Contains(err.Error(), "completed the handshake") {
		t.Fatalf("dial of a port that speaks no ZMTP: %v; want no answer and no peer met", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("took %v: waited on a listener that never completed a handshake", d)
	}
	l.Close()
	for c := range accepted {
		c.Close()
	}
}

func TestForeignAddressIsNotBindable(t *testing.T) {
	n := Net{ListenIP: "127.0.0.2", Resolve: func(_ context.Context, h string) (string, error) {
		return map[string]string{"self": "127.0.0.2", "other": "127.0.0.3"}[h], nil
	}}
	_, err := ListenTCP(context.Background(), n, "tcp://other:0")
	var be *BindError
	if !errors.As(err, &be) || be.Errno != syscall.EADDRNOTAVAIL {
		t.Fatalf("bind of another host's address: %v; want EADDRNOTAVAIL, as a real host refuses it", err)
	}
	l, err := ListenTCP(context.Background(), n, "tcp://self:0")
	if err != nil {
		t.Skipf("127.0.0.2 is not bindable here: %v", err)
	}
	l.Close()
}

func TestOpenSharedFirstCreatesLaterFind(t *testing.T) {
	root := t.TempDir()
	file, err := SharedFile("shm:///dev/shm/vllm_offload_x.mmap", root)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "dev/shm/vllm_offload_x.mmap"); file != want {
		t.Errorf("file %s, want %s", file, want)
	}
	ctx := context.Background()
	a, err := OpenShared(ctx, file, "h/0/worker-0", "e_dp0", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenShared(ctx, file, "h/1/worker-0", "e_dp1", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if a.CreatorID != "h/0/worker-0" || b.CreatorID != "h/0/worker-0" || b.CreatorKey != "e_dp0" {
		t.Errorf("creators %+v %+v: the later opener must find the first one's", a, b)
	}
	b.Close()
	if _, err := os.Stat(file); err != nil {
		t.Errorf("an opener that did not create it removed it: %v", err)
	}
	a.Close()
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("the creator's cleanup left it: %v", err)
	}
	if _, err := SharedFile("shm://relative", ""); err == nil {
		t.Error("a relative path was accepted")
	}
}

func TestProber(t *testing.T) {
	held, err := ListenTCP(context.Background(), local, "tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	_, port, _ := SplitTCP(held.Endpoint())
	p := &Prober{Net: local}
	if p.Bind(port) {
		t.Errorf("port %d is held, yet it bound", port)
	}
	e, err := p.Ephemeral()
	if err != nil || e <= 0 {
		t.Fatalf("ephemeral: %d, %v", e, err)
	}
	if !p.Bind(e) || p.Tries != 3 {
		t.Errorf("released ephemeral port %d did not bind again (tries %d)", e, p.Tries)
	}
}

// TestIPCSideChannelIsTakenOver: a second ROUTER bound at one ipc path succeeds, and new clients
// reach the later binder only — libzmq unlinks the socket file and binds anew, as vLLM's pyzmq
// sockets do; the first binder lives on, unreachable.
func TestIPCSideChannelIsTakenOver(t *testing.T) {
	n := Net{ListenIP: "127.0.0.1", IPCRoot: t.TempDir()}
	ctx := context.Background()
	first, err := ListenSideChannel(ctx, n, "ipc:///tmp/side", "first", func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second, err := ListenSideChannel(ctx, n, "ipc:///tmp/side", "second", func(string) {})
	if err != nil {
		t.Fatalf("a second ipc bind failed (libzmq takes the path over): %v", err)
	}
	defer second.Close()
	for i := 0; i < 3; i++ {
		key, err := Dial(ctx, n, "ipc:///tmp/side", "n", 2*time.Second, 2*time.Second)
		if err != nil || key != "second" {
			t.Fatalf("dial %d: %q, %v; want the later binder", i, key, err)
		}
	}
}

// TestBindThenListen: Linux as vLLM's front ends meet it (api_server.py create_server_socket:
// SO_REUSEADDR, bind; uvicorn listens later) — a second bind of a port nobody listens on yet
// succeeds, the later listen is refused, a bind next to a listener is refused, and two
// SO_REUSEPORT sockets (run_multi_api_server's) both listen.
func TestBindThenListen(t *testing.T) {
	ctx := context.Background()
	probe, err := ListenTCP(ctx, local, "tcp://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ep := probe.Endpoint()
	probe.Close()
	a, err := BindTCP(ctx, local, ep, false)
	if err != nil {
		t.Fatalf("first bind: %v", err)
	}
	defer a.Close()
	b, err := BindTCP(ctx, local, ep, false)
	if err != nil {
		t.Fatalf("second bind of a port nobody listens on: %v", err)
	}
	defer b.Close()
	if err := a.Listen(); err != nil {
		t.Fatalf("first listen: %v", err)
	}
	var be *BindError
	if err := b.Listen(); !errors.As(err, &be) || be.Errno != syscall.EADDRINUSE {
		t.Fatalf("second listen: %v; want EADDRINUSE", err)
	}
	if _, err := BindTCP(ctx, local, ep, false); !errors.As(err, &be) || be.Errno != syscall.EADDRINUSE {
		t.Fatalf("bind next to a listener: %v; want EADDRINUSE", err)
	}
	a.Close()
	c, err := BindTCP(ctx, local, ep, true)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d, err := BindTCP(ctx, local, ep, true)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := c.Listen(); err != nil {
		t.Fatal(err)
	}
	if err := d.Listen(); err != nil {
		t.Fatalf("two SO_REUSEPORT listeners: %v; both should listen", err)
	}
}

// A container dials a peer by its name and libzmq resolves the name itself, on every connection
// attempt, as vLLM's pyzmq does: the process's own answer may be stale (a restarted container
// comes back at another address) and is not what libzmq dials. A name nobody knows still fails
// at once, as in a local run.
func TestContainerDialsAPeerByName(t *testing.T) {
	name, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	var ip string
	if addrs, err := net.LookupHost(name); err == nil {
		for _, a := range addrs {
			if p := net.ParseIP(a); p != nil && p.To4() != nil {
				ip = a
				break
			}
		}
	}
	if ip == "" {
		t.Skipf("this machine's name %q has no IPv4 address to listen on", name)
	}
	ctx := context.Background()
	probe, err := ListenTCP(ctx, Net{}, "tcp://"+ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, err := SplitTCP(probe.Endpoint())
	probe.Close()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ListenSideChannel(ctx, Net{}, fmt.Sprintf("tcp://%s:%d", ip, port), "peer-key", func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	stale := Net{Resolve: func(_ context.Context, h string) (string, error) {
		if h == name {
			return "192.0.2.1", nil // TEST-NET-1: nobody answers there
		}
		return "", fmt.Errorf("no such host %s", h)
	}}
	key, err := Dial(ctx, stale, fmt.Sprintf("tcp://%s:%d", name, port), "n", 5*time.Second, 5*time.Second)
	if err != nil || key != "peer-key" {
		t.Fatalf("dial %s by name with a stale answer: %q, %v; want libzmq to ask again and reach the peer", name, key, err)
	}
	if _, err := Dial(ctx, stale, fmt.Sprintf("tcp://nobody.invalid:%d", port), "n", 5*time.Second, 5*time.Second); err == nil || errors.Is(err, ErrNoAnswer) {
		t.Fatalf("dial of a name nobody knows: %v, want the resolution's error", err)
	}
}
