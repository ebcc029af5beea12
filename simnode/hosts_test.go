package simnode

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/widetp/widetp/simnode/pace"
)

func TestResolver(t *testing.T) {
	local := Runtime{ListenIP: "127.0.0.3", Hosts: map[string]string{"r0-head": "127.0.0.2", "r0-follower": "127.0.0.3"}}
	container := Runtime{ListenIP: "0.0.0.0"}
	cases := []struct {
		name string
		rt   Runtime
		host string
		want string
	}{
		{"a mapped host", local, "r0-head", "127.0.0.2"},
		{"the host itself", local, "r0-follower", "127.0.0.3"},
		// vllm/envs.py: VLLM_DP_MASTER_IP defaults to 127.0.0.1, meaning this host.
		{"loopback is this host in a local run", local, "127.0.0.1", "127.0.0.3"},
		{"localhost is this host in a local run", local, "localhost", "127.0.0.3"},
		{"loopback stays loopback in a container", container, "127.0.0.1", "127.0.0.1"},
		{"an IP as it is", container, "10.1.2.3", "10.1.2.3"},
	}
	for _, tc := range cases {
		got, err := tc.rt.resolver()(context.Background(), tc.host)
		if err != nil || got != tc.want {
			t.Errorf("%s: resolve %q = %q, %v; want %q", tc.name, tc.host, got, err, tc.want)
		}
	}
	if _, err := local.resolver()(context.Background(), "no-such-host.invalid"); err == nil {
		t.Error("an unknown name resolved")
	}
}

// countingDNS answers every name with ip and counts the questions.
func countingDNS(ip string, asked *atomic.Int32) func(context.Context, string) ([]string, error) {
	return func(context.Context, string) ([]string, error) {
		asked.Add(1)
		return []string{ip}, nil
	}
}

func TestNameCacheAsksOncePerNameUntilADialFails(t *testing.T) {
	var asked atomic.Int32
	rt := Runtime{ListenIP: "0.0.0.0"}.withNameCache()
	rt.names.ask = countingDNS("10.9.8.7", &asked)
	resolve := func() {
		t.Helper()
		if ip, err := rt.resolver()(context.Background(), "n0"); err != nil || ip != "10.9.8.7" {
			t.Fatalf("resolve n0 = %q, %v; want 10.9.8.7", ip, err)
		}
	}
	for range 3 {
		resolve()
	}
	if n := asked.Load(); n != 1 {
		t.Fatalf("3 resolutions of one name asked DNS %d times, want 1", n)
	}
	// A refusal comes from a host at that address that does not listen yet: the answer stays.
	refused := &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	rt.forget("n0", refused)
	resolve()
	if n := asked.Load(); n != 1 {
		t.Fatalf("a fresh answer was asked again after a refusal: %d questions, want 1", n)
	}
	// Once the answer is older than refusedKeep, a refusal may mean another host took the address.
	rt.names.forget("n0", refused, time.Now().Add(refusedKeep+time.Millisecond))
	resolve()
	if n := asked.Load(); n != 2 {
		t.Fatalf("an old answer survived a refusal: %d questions, want 2", n)
	}
	// Any other failure (no route, a time-out) drops it at once.
	rt.forget("n0", &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.EHOSTUNREACH)})
	resolve()
	if n := asked.Load(); n != 3 {
		t.Fatalf("an answer survived an unreachable host: %d questions, want 3", n)
	}
	// The map and IPs never reach DNS, nor the cache.
	rt.Hosts = map[string]string{"r0-head": "127.0.0.2"}
	for _, h := range []string{"r0-head", "10.1.2.3"} {
		if _, err := rt.resolver()(context.Background(), h); err != nil {
			t.Fatal(err)
		}
	}
	if n := asked.Load(); n != 3 {
		t.Errorf("a mapped host or an IP asked DNS: %d questions, want 3", n)
	}
}

func TestChildStartsWithItsParentsAnswers(t *testing.T) {
	parent := Runtime{ListenIP: "0.0.0.0"}.withNameCache()
	var asked atomic.Int32
	parent.names.ask = countingDNS("10.9.8.7", &asked)
	if _, err := parent.resolver()(context.Background(), "widetp-store"); err != nil {
		t.Fatal(err)
	}
	// What a parent hands a child (family.start), through the spec's JSON.
	spec := procSpec{Runtime: parent}
	spec.Runtime.Resolved = spec.Runtime.names.snapshot()
	spec.Runtime.Resolved["garbage"] = "not-an-ip"
	line, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var got procSpec
	if err := json.Unmarshal(line, &got); err != nil {
		t.Fatal(err)
	}
	child := got.Runtime.withNameCache()
	var childAsked atomic.Int32
	child.names.ask = countingDNS("10.0.0.99", &childAsked)
	if ip, err := child.resolver()(context.Background(), "widetp-store"); err != nil || ip != "10.9.8.7" {
		t.Errorf("child resolved widetp-store = %q, %v; want its parent's 10.9.8.7", ip, err)
	}
	if ip, _ := child.resolver()(context.Background(), "garbage"); ip != "10.0.0.99" {
		t.Errorf("a seed that is no IP was used: garbage = %q, want DNS's 10.0.0.99", ip)
	}
	if n := childAsked.Load(); n != 1 {
		t.Errorf("child asked DNS %d times, want 1 (only for the name its parent did not know)", n)
	}
}

func TestStoreClientAsksDNSOnceForAllItsConnections(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Every answer closes its connection: each call dials again.
		w.Header().Set("Connection", "close")
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{}`)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	var asked atomic.Int32
	rt := Runtime{ListenIP: "0.0.0.0"}.withNameCache()
	rt.names.ask = countingDNS("127.0.0.1", &asked)
	url := "http://widetp-store.test:" + port
	c, err := newStoreClient(StoreURLs{Metadata: url, Master: url, Admin: url}, rt)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := c.Health(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n := conns.Load(); n != 3 {
		t.Fatalf("the store saw %d connections, want 3 (one per call)", n)
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("3 connections asked DNS %d times, want 1", n)
	}
}

// A DNS query that gets no answer is one failed attempt, bounded by pace.LookupAttempt, not the
// resolver's 5 s: Docker's DNS drops what it cannot forward (a name whose host is not up yet).
func TestALookupThatGetsNoAnswerIsAnAttemptOfItsOwn(t *testing.T) {
	rt := Runtime{ListenIP: "0.0.0.0"}.withNameCache()
	var bound time.Duration
	rt.names.ask = func(ctx context.Context, host string) ([]string, error) {
		dl, ok := ctx.Deadline()
		if !ok {
			t.Fatal("a lookup without a deadline")
		}
		bound = time.Until(dl)
		<-ctx.Done() // the query is dropped: nothing ever answers
		return nil, ctx.Err()
	}
	// The caller's own bound is far longer: the attempt's is what ends the lookup.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := rt.resolver()(ctx, "widetp-store"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("resolve a name nobody answers: %v, want the attempt's deadline", err)
	}
	if bound <= 0 || bound > pace.LookupAttempt {
		t.Errorf("the lookup had %v left, want at most %v", bound, pace.LookupAttempt)
	}
	if ctx.Err() != nil {
		t.Error("the caller's bound ran out: the attempt was not bounded on its own")
	}
}

// fakeDNS answers A questions with ip and AAAA questions with no address (NOERROR, as a resolver
// does for a name that has only IPv4), counting each kind; it stops with the test.
func fakeDNS(t *testing.T, ip net.IP, a, aaaa *atomic.Int32) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			q := buf[:n]
			// The question follows the 12-byte header: labels up to a zero byte, then type and class.
			end := 12
			for end < n && q[end] != 0 {
				end += int(q[end]) + 1
			}
			end += 5
			if n < 12 || end > n {
				continue
			}
			qtype := int(q[end-4])<<8 | int(q[end-3])
			resp := append([]byte{q[0], q[1], 0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 0}, q[12:end]...)
			switch qtype {
			case 1:
				a.Add(1)
				resp[7] = 1
				resp = append(resp, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4)
				resp = append(resp, ip.To4()...)
			case 28:
				aaaa.Add(1)
			}
			pc.WriteTo(resp, from)
		}
	}()
	return pc.LocalAddr().String()
}

// A host name stands for a container on the IPv4-only bridge of a Docker run: the name cache asks
// DNS for its A record only, never also AAAA, so that Docker's DNS answers one query per
// question, not two.
func TestNameCacheAsksDNSForIPv4Only(t *testing.T) {
	var a, aaaa atomic.Int32
	server := fakeDNS(t, net.IPv4(10, 20, 30, 40), &a, &aaaa)
	saved := dnsResolver
	t.Cleanup(func() { dnsResolver = saved })
	dnsResolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", server)
	}}
	got, err := newNameCache(nil).lookupHost(context.Background(), "n7.widetp.test")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "10.20.30.40" {
		t.Errorf("answer %q, want [10.20.30.40]", got)
	}
	if a.Load() != 1 || aaaa.Load() != 0 {
		t.Errorf("questions: %d A, %d AAAA; want 1 A and no AAAA", a.Load(), aaaa.Load())
	}
}
