package mooncake

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/widetp/widetp/fakestore"
	"github.com/widetp/widetp/fakestore/api"
	"github.com/widetp/widetp/fakestore/client"
	"github.com/widetp/widetp/internal/testport"
)

// bound limits each test's store traffic; the in-process store answers in microseconds.
const bound = 10 * time.Second

func startStore(t *testing.T, flavor fakestore.Flavor) (*fakestore.Server, *client.Client) {
	t.Helper()
	s, err := fakestore.New(fakestore.Config{MetadataAddr: "127.0.0.1:0", MasterAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", Flavor: flavor})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	c, err := client.New(client.WithMetadataURL(s.URL(api.PlaneMetadata)), client.WithMasterURL(s.URL(api.PlaneMaster)), client.WithAdminURL(s.URL(api.PlaneAdmin)))
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

func seeded(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 42)) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	t.Cleanup(cancel)
	return ctx
}

func getJSON(t *testing.T, c *client.Client, key string, out any) {
	t.Helper()
	b, err := c.Get(ctxT(t), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s = %s: %v", key, b, err)
	}
}

// TestSetupPublishesAndMounts follows Mooncake's transfer_metadata.cpp (mooncake-transfer-engine/src): rpc_meta and ram descriptors under
// mooncake/, the segment named host:port with a port drawn from 12300–14300, mounted with the master.
func TestSetupPublishesAndMounts(t *testing.T) {
	_, c := startStore(t, fakestore.FlavorCPP)
	mc, err := Setup(ctxT(t), c, Config{LocalHostname: "r0-head", Rand: seeded(1)})
	if err != nil {
		t.Fatal(err)
	}
	host, portStr, _ := net.SplitHostPort(mc.Name())
	port, _ := strconv.Atoi(portStr)
	if host != "r0-head" || port < MinPort || port > MaxPort {
		t.Fatalf("segment name %q: want r0-head:<12300-14300>", mc.Name())
	}
	var meta rpcMeta
	getJSON(t, c, "mooncake/rpc_meta/"+mc.Name(), &meta)
	if meta.IPOrHostName != "r0-head" || meta.RPCPort != port {
		t.Fatalf("rpc_meta = %+v", meta)
	}
	var ram map[string]any
	getJSON(t, c, "mooncake/ram/"+mc.Name(), &ram)
	for _, k := range []string{"name", "protocol", "tcp_data_port", "tcp_proto_version", "timestamp", "buffers"} {
		if _, ok := ram[k]; !ok {
			t.Fatalf("ram descriptor %v lacks %q", ram, k)
		}
	}
	if ram["name"] != mc.Name() || ram["protocol"] != "tcp" || ram["tcp_proto_version"] != 2.0 {
		t.Fatalf("ram descriptor %v", ram)
	}
	segs, err := c.AllSegments(ctxT(t))
	if err != nil || !slices.Equal(segs, []string{mc.Name()}) {
		t.Fatalf("mounted segments %v, %v; want [%s]", segs, err, mc.Name())
	}

	// The same seed draws the same name: runs of one scenario reproduce.
	if err := mc.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	again, err := Setup(ctxT(t), c, Config{LocalHostname: "r0-head", Rand: seeded(1)})
	if err != nil || again.Name() != mc.Name() {
		t.Fatalf("same seed: %v, %v; want %s", again, err, mc.Name())
	}
}

func TestRefusedNameDrawsAnotherPort(t *testing.T) {
	_, c := startStore(t, fakestore.FlavorCPP)
	first, err := Setup(ctxT(t), c, Config{LocalHostname: "h", Rand: seeded(7)})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	// Another process (with another rpc_meta body) now holds the name the seed draws first.
	if _, err := c.Put(ctxT(t), "mooncake/rpc_meta/"+first.Name(), []byte(`{"ip_or_host_name":"10.0.0.9","rpc_port":1}`)); err != nil {
		t.Fatal(err)
	}
	second, err := Setup(ctxT(t), c, Config{LocalHostname: "h", Rand: seeded(7)})
	if err != nil {
		t.Fatal(err)
	}
	if second.Name() == first.Name() {
		t.Fatalf("both clients registered %s", first.Name())
	}
	_, dups, err := c.Registrations(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(dups) == 0 {
		t.Fatal("the store saw no refused duplicate; the second port was not drawn because of a refusal")
	}
}

// TestBusyPortDrawsAnotherPort: the engine binds its RPC port, so a port held on the host is skipped.
func TestBusyPortDrawsAnotherPort(t *testing.T) {
	_, c := startStore(t, fakestore.FlavorCPP)
	probe, err := Setup(ctxT(t), c, Config{LocalHostname: "h", Rand: seeded(11), ListenIP: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	// While probe lives it holds its port: a second client with the same seed must not get it.
	other, err := Setup(ctxT(t), c, Config{LocalHostname: "h", Rand: seeded(11), ListenIP: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if other.Name() == probe.Name() {
		t.Fatalf("two live clients of one host share %s", probe.Name())
	}
	if err := probe.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strings.TrimPrefix(probe.Name(), "h:"))); err != nil {
		t.Fatalf("Close did not release the rpc port: %v", err)
	} else {
		l.Close()
	}
}

func TestGivesUpAfterTwentyRefusals(t *testing.T) {
	_, c := startStore(t, fakestore.FlavorCPP)
	ctx := ctxT(t)
	// Every port of the range is taken by someone else's rpc_meta.
	for p := MinPort; p <= MaxPort; p++ {
		name := net.JoinHostPort("h", strconv.Itoa(p))
		if _, err := c.Put(ctx, "mooncake/rpc_meta/"+name, []byte(`{"ip_or_host_name":"other","rpc_port":1}`)); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Setup(ctx, c, Config{LocalHostname: "h", Rand: seeded(3)})
	if err == nil || !strings.Contains(err.Error(), "registration refused 20 times") || !client.IsDuplicate(err) {
		t.Fatalf("Setup with every port taken: %v", err)
	}
}

func TestFixedPortIsNotRedrawn(t *testing.T) {
	_, c := startStore(t, fakestore.FlavorCPP)
	if _, err := c.Put(ctxT(t), "mooncake/rpc_meta/h:13000", []byte(`{"ip_or_host_name":"other","rpc_port":1}`)); err != nil {
		t.Fatal(err)
	}
	_, err := Setup(ctxT(t), c, Config{LocalHostname: "h:13000", Rand: seeded(3)})
	if err == nil || !strings.Contains(err.Error(), "registration refused 1 times") {
		t.Fatalf("Setup on a taken fixed port: %v", err)
	}
	mc, err := Setup(ctxT(t), c, Config{LocalHostname: "h:13001", Rand: seeded(3)})
	if err != nil || mc.Name() != "h:13001" {
		t.Fatalf("Setup on a free fixed port: %v, %v", mc, err)
	}
}

// TestHeartbeatRemounts: the first Ping after a mount answers NEED_REMOUNT (mooncake-store/src/master_service.cpp),
// and after a master restart the keys are gone until the heartbeat re-publishes them.
func TestHeartbeatRemounts(t *testing.T) {
	s, c := startStore(t, fakestore.FlavorCPP)
	registered := make(chan int, 8)
	mc, err := Setup(ctxT(t), c, Config{LocalHostname: "h", Rand: seeded(5), Heartbeat: 20 * time.Millisecond, RequestTimeout: bound,
		OnRegistered: func(n int) { registered <- n }})
	if err != nil {
		t.Fatal(err)
	}
	wait := func(want int) {
		t.Helper()
		select {
		case n := <-registered:
			if n != want {
				t.Fatalf("registration %d, want %d", n, want)
			}
		case <-time.After(bound):
			t.Fatalf("no registration %d within %v", want, bound)
		}
	}
	wait(0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { mc.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	wait(1) // the first ping's NEED_REMOUNT

	s.Restart()
	if _, err := c.Get(ctxT(t), "mooncake/ram/"+mc.Name()); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("ram key after restart: %v, want not found", err)
	}
	wait(2)
	for _, k := range []string{"rpc_meta/", "ram/"} {
		if _, err := c.Get(ctxT(t), "mooncake/"+k+mc.Name()); err != nil {
			t.Fatalf("%s after remount: %v", k, err)
		}
	}
	if segs, err := c.AllSegments(ctxT(t)); err != nil || !slices.Contains(segs, mc.Name()) {
		t.Fatalf("segments after remount %v, %v", segs, err)
	}
}

func TestCloseUnregisters(t *testing.T) {
	_, c := startStore(t, fakestore.FlavorPython)
	mc, err := Setup(ctxT(t), c, Config{LocalHostname: "h", Rand: seeded(9)})
	if err != nil {
		t.Fatal(err)
	}
	if err := mc.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"rpc_meta/", "ram/"} {
		if _, err := c.Get(ctxT(t), "mooncake/"+k+mc.Name()); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("%s after close: %v, want not found", k, err)
		}
	}
	if segs, err := c.AllSegments(ctxT(t)); err != nil || len(segs) != 0 {
		t.Fatalf("segments after close %v, %v", segs, err)
	}
}

func TestStoreDown(t *testing.T) {
	dead := "http://" + testport.Addr(t, "127.0.0.1") // nothing listens there
	c, err := client.New(client.WithMetadataURL(dead), client.WithMasterURL(dead), client.WithRetries(1), client.WithBackoff(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Setup(ctxT(t), c, Config{LocalHostname: "h", Rand: seeded(1)})
	if err == nil || !strings.Contains(err.Error(), "connect to master") {
		t.Fatalf("Setup with the store down: %v", err)
	}
}

// TestRemountRules: what a client does when a restarted master answers its Ping NEED_REMOUNT is
// its Mooncake version's (mooncake-store/src/client_service.cpp): remount and re-publish both keys
// (PR #2077), remount only (PR #845, the state of issue #2246), or nothing.
func TestRemountRules(t *testing.T) {
	for _, tc := range []struct {
		remount            string
		mounted, published bool
	}{
		{RemountRepublish, true, true},
		{RemountMount, true, false},
		{RemountNone, false, false},
	} {
		t.Run(tc.remount, func(t *testing.T) {
			s, c := startStore(t, fakestore.FlavorCPP)
			mc, err := Setup(ctxT(t), c, Config{LocalHostname: "h", Rand: seeded(7), Heartbeat: 10 * time.Millisecond, Remount: tc.remount, RequestTimeout: bound})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { mc.Run(ctx); close(done) }()
			defer func() { cancel(); <-done }()
			resp, err := c.Events(ctxT(t), 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			s.Restart()
			// Two pings after the restart: the first answered NEED_REMOUNT, and the heartbeat acts
			// on it before it sends the second.
			since := resp.LastSeq
			for i := 0; i < 2; i++ {
				ev, err := c.WaitFor(ctxT(t), since, func(e api.Event) bool { return e.Op == api.OpPing && e.Key == mc.ClientID() })
				if err != nil {
					t.Fatalf("ping %d after the restart: %v", i+1, err)
				}
				since = ev.Seq
			}
			segs, err := c.AllSegments(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			if got := slices.Contains(segs, mc.Name()); got != tc.mounted {
				t.Errorf("segment mounted %v, want %v (segments %v)", got, tc.mounted, segs)
			}
			for _, k := range []string{"rpc_meta/", "ram/"} {
				_, err := c.Get(ctxT(t), "mooncake/"+k+mc.Name())
				if got := err == nil; got != tc.published {
					t.Errorf("%s published %v (%v), want %v", k, got, err, tc.published)
				}
			}
		})
	}
	if _, err := Setup(ctxT(t), nil, Config{LocalHostname: "h", Remount: "sometimes"}); err == nil || !strings.Contains(err.Error(), `remount "sometimes"`) {
		t.Errorf("an unknown remount rule: %v", err)
	}
}

// TestEachRequestHasItsOwnBound: Mooncake bounds each master RPC and each metadata call on its own
// (the metadata client's 3 s a request, mooncake-transfer-engine/src/transfer_metadata_plugin.cpp),
// not the setup as a whole. A store that answers every request in a third of the bound is slow,
// not gone: the setup of four requests takes longer than one bound and still registers. It failed
// with "context deadline exceeded" when one bound covered the whole setup, which is what a loaded
// machine met (a 64-host local run on 2 cores, the store answering in seconds).
func TestEachRequestHasItsOwnBound(t *testing.T) {
	_, c := startStore(t, fakestore.FlavorCPP)
	const perRequest = 750 * time.Millisecond
	if _, err := c.AddFault(ctxT(t), api.Fault{Kind: api.FaultLatency, Latency: api.Duration(perRequest / 3)}); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	mc, err := Setup(ctxT(t), c, Config{LocalHostname: "h", Rand: seeded(7), RequestTimeout: perRequest})
	if err != nil {
		t.Fatalf("Setup against a store that answers each request in %s, each request bounded by %s: %v", perRequest/3, perRequest, err)
	}
	if took := time.Since(began); took <= perRequest {
		t.Fatalf("Setup took %s: the latency fault did not delay its requests, and the test shows nothing", took)
	}
	if err := mc.Beat(ctxT(t)); err != nil {
		t.Errorf("the first heartbeat (a Ping answered NEED_REMOUNT, then the remount and both keys): %v", err)
	}
}
