package docker

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// frame is one frame of the engine's multiplexed stream (Engine API, "Attach to a container":
// an 8-byte header of stream, three zero bytes and the big-endian payload length).
func frame(stream byte, payload string) []byte {
	hdr := make([]byte, 8, 8+len(payload))
	hdr[0] = stream
	binary.BigEndian.PutUint32(hdr[4:], uint32(len(payload)))
	return append(hdr, payload...)
}

func TestDemuxSeparatesTheStreams(t *testing.T) {
	var in bytes.Buffer
	in.Write(frame(1, "ready\n"))
	in.Write(frame(2, "warn: slow\n"))
	in.Write(frame(1, "second line\n"))
	in.Write(frame(1, ""))
	var stdout, stderr bytes.Buffer
	if err := demux(&stdout, &stderr, &in); err != nil {
		t.Fatalf("demux: %v", err)
	}
	if stdout.String() != "ready\nsecond line\n" || stderr.String() != "warn: slow\n" {
		t.Fatalf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
}

func TestDemuxReportsWhatIsWrongWithAStream(t *testing.T) {
	for name, tc := range map[string]struct {
		in   []byte
		want string
	}{
		"the engine's own error": {frame(3, "container stopped\n"), "the engine reports: container stopped"},
		"a cut header":           {frame(1, "x")[:5], "unexpected EOF"},
		"a cut payload":          {frame(1, "hello")[:10], "EOF"},
		"a terminal's raw bytes": {[]byte("plain text, not frames"), "unknown stream"},
	} {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			err := demux(&out, &out, bytes.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("demux = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestEngineFollowsTheEnvironment(t *testing.T) {
	for _, tc := range []struct {
		host, version string
		base, err     string
	}{
		{host: "", base: "http://docker"},
		{host: "unix:///run/user/1000/docker.sock", base: "http://docker"},
		{host: "tcp://10.0.0.2:2375", base: "http://10.0.0.2:2375"},
		{host: "tcp://10.0.0.2:2375", version: "1.43", base: "http://10.0.0.2:2375"},
		{host: "ssh://me@builder", err: "ssh -L"},
		{host: "npipe:////./pipe/docker_engine", err: "scheme npipe is not supported"},
		{host: "/var/run/docker.sock", err: "want unix://"},
		{host: "tcp://", err: "names no address"},
		{host: "unix://", err: "names no socket"},
		{host: "", version: "latest", err: "DOCKER_API_VERSION"},
	} {
		t.Run(tc.host+" "+tc.version, func(t *testing.T) {
			t.Setenv("DOCKER_HOST", tc.host)
			t.Setenv("DOCKER_API_VERSION", tc.version)
			t.Setenv("DOCKER_CERT_PATH", "")
			e, err := newEngine()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("newEngine() error = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("newEngine(): %v", err)
			}
			if e.base != tc.base {
				t.Errorf("base = %q, want %q", e.base, tc.base)
			}
			if want := map[bool]string{true: tc.version, false: maxAPIVersion}[tc.version != ""]; e.version != want {
				t.Errorf("version = %q, want %q", e.version, want)
			}
			if tc.host == "" && e.DaemonHost() != defaultDockerHost {
				t.Errorf("DaemonHost() = %q, want the default socket", e.DaemonHost())
			}
		})
	}
}

func TestEngineTLSNamesAMissingCertificate(t *testing.T) {
	t.Setenv("DOCKER_HOST", "tcp://10.0.0.2:2376")
	t.Setenv("DOCKER_TLS_VERIFY", "1")
	dir := t.TempDir()
	t.Setenv("DOCKER_CERT_PATH", dir)
	if _, err := newEngine(); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "ca.pem")) {
		t.Fatalf("newEngine() with an empty DOCKER_CERT_PATH = %v, want an error naming ca.pem", err)
	}
}

// engineOnSocket serves handler on a unix socket, as the engine does, and points DOCKER_HOST at it.
func engineOnSocket(t *testing.T, handler http.Handler) *engine {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "engine.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(handler)
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	t.Setenv("DOCKER_HOST", "unix://"+sock)
	t.Setenv("DOCKER_API_VERSION", "")
	e, err := newEngine()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

func TestPingNegotiatesTheAPIVersion(t *testing.T) {
	for _, tc := range []struct{ engine, want, err string }{
		{engine: "1.41", want: "1.41"},
		{engine: "1.45", want: "1.45"},
		{engine: "1.52", want: maxAPIVersion},
		{engine: "1.40", err: "needs 1.41 or newer"},
		{engine: "v2", err: `API version "v2"`},
	} {
		t.Run(tc.engine, func(t *testing.T) {
			var mu sync.Mutex
			var paths []string
			e := engineOnSocket(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				paths = append(paths, r.URL.Path)
				mu.Unlock()
				w.Header().Set("Api-Version", tc.engine)
				if r.URL.Path == "/_ping" {
					_, _ = w.Write([]byte("OK"))
					return
				}
				_, _ = w.Write([]byte(`{"Running":false,"ExitCode":7}`))
			}))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := e.Ping(ctx)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Ping = %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Ping: %v", err)
			}
			running, code, err := e.ExecInspect(ctx, "abc")
			if err != nil || running || code != 7 {
				t.Fatalf("ExecInspect = %v, %d, %v", running, code, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if want := "/v" + tc.want + "/exec/abc/json"; paths[len(paths)-1] != want {
				t.Fatalf("request went to %s, want %s", paths[len(paths)-1], want)
			}
		})
	}
}

func TestEngineErrorsKeepTheEnginesWords(t *testing.T) {
	e := engineOnSocket(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/_ping":
			w.Header().Set("Api-Version", "1.41")
		case strings.HasSuffix(r.URL.Path, "/containers/gone/json"):
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"message":"No such container: gone"}`))
		case strings.HasSuffix(r.URL.Path, "/networks/busy"):
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"message":"error while removing network: network busy has active endpoints"}`))
		default:
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte("plain words"))
		}
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _, err := e.ContainerInspect(ctx, "gone")
	if !isNotFound(err) || isConflict(err) || !strings.Contains(err.Error(), "No such container: gone") {
		t.Errorf("inspect of a missing container: %v (not found %v)", err, isNotFound(err))
	}
	err = e.NetworkRemove(ctx, "busy")
	if !isConflict(err) || !removedElsewhere(err) || !strings.Contains(err.Error(), "active endpoints") {
		t.Errorf("remove of a busy network: %v", err)
	}
	if err := e.ContainerStart(ctx, "x"); err == nil || isNotFound(err) || !strings.Contains(err.Error(), "plain words (HTTP 500)") {
		t.Errorf("a 500 with a plain body: %v", err)
	}
}

func TestPublishedAddrs(t *testing.T) {
	ports := map[string][]portBinding{
		"50051/tcp": {{HostIP: "127.0.0.1", HostPort: "32768"}},
		"8080/tcp":  {{HostIP: "", HostPort: ""}, {HostIP: "0.0.0.0", HostPort: "32769"}},
		"9003/udp":  {{HostIP: "127.0.0.1", HostPort: "32770"}},
		"9100/tcp":  {{HostIP: "::1", HostPort: "32771"}},
	}
	got, err := publishedAddrs(ports, []int{50051, 8080, 9100})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]string{50051: "127.0.0.1:32768", 8080: "127.0.0.1:32769", 9100: "[::1]:32771"}
	for p, a := range want {
		if got[p] != a {
			t.Errorf("port %d at %q, want %q", p, got[p], a)
		}
	}
	if _, err := publishedAddrs(ports, []int{9003}); err == nil || !strings.Contains(err.Error(), "9003/tcp was not published") {
		t.Errorf("a port published only for udp: %v", err)
	}
}

// A call made before any Ping (Labelled, the leak checks' listing, makes none) asks the version
// first: an engine older than this client refuses a request for a newer API.
func TestTheFirstCallNegotiatesTheAPIVersion(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	e := engineOnSocket(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		w.Header().Set("Api-Version", "1.41")
		if r.URL.Path == "/_ping" {
			_, _ = w.Write([]byte("OK"))
			return
		}
		if !strings.HasPrefix(r.URL.Path, "/v1.41/") {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"message":"client version is too new. Maximum supported API version is 1.41"}`))
			return
		}
		_, _ = w.Write([]byte(`[{"Id":"c1","Names":["/widetp-x-head"],"Labels":{"io.widetp.run":"x"}}]`))
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; i < 2; i++ {
		cs, err := e.ContainerList(ctx, runFilter("x"))
		if err != nil || len(cs) != 1 || cs[0].ID != "c1" || cs[0].Labels["io.widetp.run"] != "x" {
			t.Fatalf("ContainerList = %+v, %v", cs, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"/_ping", "/v1.41/containers/json", "/v1.41/containers/json"}; strings.Join(paths, " ") != strings.Join(want, " ") {
		t.Fatalf("requests %v, want %v (one ping, then the engine's version)", paths, want)
	}
}

// The harness skips publishing ports only when the run network's gateway is an address of its own
// interfaces; any other answer (another namespace's bridge, no gateway, an engine error, an
// interface listing that fails) means publishing.
func TestBridgeIsLocalOnlyWhenTheGatewayIsOurs(t *testing.T) {
	local := func() ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("172.26.0.1"), netip.MustParseAddr("fd00::2")}, nil
	}
	for _, tc := range []struct {
		name, body string
		status     int
		local      func() ([]netip.Addr, error)
		want       bool
	}{
		{name: "the gateway is on our bridge", body: `{"IPAM":{"Config":[{"Subnet":"172.26.0.0/16","Gateway":"172.26.0.1"}]}}`, local: local, want: true},
		{name: "an IPv6 gateway of ours after an IPv4 one of another namespace", body: `{"IPAM":{"Config":[{"Gateway":"10.89.0.1"},{"Gateway":"fd00::2"}]}}`, local: local, want: true},
		{name: "a bridge in another namespace", body: `{"IPAM":{"Config":[{"Subnet":"10.89.0.0/24","Gateway":"10.89.0.1"}]}}`, local: local},
		{name: "no gateway reported", body: `{"IPAM":{"Config":[{"Subnet":"172.26.0.0/16"}]}}`, local: local},
		{name: "a gateway that is not an address", body: `{"IPAM":{"Config":[{"Gateway":"bridge"}]}}`, local: local},
		{name: "the engine fails the inspection", status: http.StatusInternalServerError, body: `{"message":"boom"}`, local: local},
		{name: "our interfaces cannot be listed", body: `{"IPAM":{"Config":[{"Gateway":"172.26.0.1"}]}}`, local: func() ([]netip.Addr, error) { return nil, errors.New("no netlink") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := engineOnSocket(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/_ping" {
					w.Header().Set("Api-Version", "1.41")
					return
				}
				if !strings.HasSuffix(r.URL.Path, "/networks/net1") {
					t.Errorf("unexpected call %s %s", r.Method, r.URL.Path)
				}
				if tc.status != 0 {
					w.WriteHeader(tc.status)
				}
				w.Write([]byte(tc.body))
			}))
			if _, got := bridgeIsLocal(context.Background(), e, "net1", tc.local); got != tc.want {
				t.Fatalf("bridgeIsLocal = %v, want %v", got, tc.want)
			}
		})
	}
}

// This process's interfaces include loopback, whatever else the machine has.
func TestLocalAddrsListsLoopback(t *testing.T) {
	addrs, err := localAddrs()
	if err != nil {
		t.Skipf("no interface listing here: %v", err)
	}
	if !slices.Contains(addrs, netip.MustParseAddr("127.0.0.1")) {
		t.Fatalf("localAddrs() = %v, want 127.0.0.1 among them", addrs)
	}
}

// A run's network that the engine refuses to remove for "active endpoints" with no container
// attached (moby/moby#42119) is explained, with what to do; one that still has a container is
// the engine's plain refusal; one that is gone already is no error.
func TestRemoveNetworkExplainsAStaleEndpoint(t *testing.T) {
	e := engineOnSocket(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		net := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
		switch {
		case r.URL.Path == "/_ping":
			w.Header().Set("Api-Version", "1.41")
		case r.Method == http.MethodDelete && net == "gone":
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"message":"network gone not found"}`))
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"message":"error while removing network: network ` + net + ` has active endpoints"}`))
		case r.Method == http.MethodGet && net == "stale":
			_, _ = w.Write([]byte(`{"Id":"stale","Name":"stale","Containers":{}}`))
		case r.Method == http.MethodGet && net == "busy":
			_, _ = w.Write([]byte(`{"Id":"busy","Name":"busy","Containers":{"c1":{"Name":"h0"}}}`))
		default:
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := removeNetwork(ctx, e, "gone", "widetp-gone"); err != nil {
		t.Errorf("a network that is gone: %v", err)
	}
	err := removeNetwork(ctx, e, "stale", "widetp-stale")
	if !errors.Is(err, errStaleEndpoints) || !strings.Contains(err.Error(), "widetp-stale") || !strings.Contains(err.Error(), "restart the Docker daemon") {
		t.Errorf("a network with a stale endpoint: %v", err)
	}
	err = removeNetwork(ctx, e, "busy", "widetp-busy")
	if err == nil || errors.Is(err, errStaleEndpoints) || !strings.Contains(err.Error(), "widetp-busy") || !strings.Contains(err.Error(), "active endpoints") {
		t.Errorf("a network with a container still attached: %v", err)
	}
	// RemoveNetwork, the e2e leak spec's, is the same removal on the environment's engine.
	if err := RemoveNetwork(ctx, "gone"); err != nil {
		t.Errorf("RemoveNetwork of a network that is gone: %v", err)
	}
	if err := RemoveNetwork(ctx, "stale"); !errors.Is(err, errStaleEndpoints) {
		t.Errorf("RemoveNetwork of a network with a stale endpoint: %v", err)
	}
	if err := RemoveNetwork(ctx, "busy"); err == nil || errors.Is(err, errStaleEndpoints) {
		t.Errorf("RemoveNetwork of a network with a container still attached: %v", err)
	}
}
