// Package mooncake is the Mooncake store client as a vLLM worker's MooncakeDistributedStore.setup
// drives it, on the fake store's typed client: publish the transfer engine's rpc_meta and ram
// descriptors on the metadata server, mount the global segment with the master, keep a heartbeat
// that remounts and re-publishes when the master answers NEED_REMOUNT, and delete both keys on a
// clean close (Mooncake's mooncake-transfer-engine/src/transfer_metadata.cpp for the keys,
// mooncake-store/src/master_service.cpp for MountSegment, Ping and NEED_REMOUNT).
package mooncake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/widetp/widetp/fakestore/api"
	"github.com/widetp/widetp/fakestore/client"
)

const (
	// MinPort and MaxPort bound the port a client draws when its local_hostname carries none
	// (Mooncake's transfer engine picks its RPC port at random in [12300, 14300]).
	MinPort = 12300
	MaxPort = 14300
	// PortAttempts is how many ports a client draws before it gives up on a refused registration.
	PortAttempts = 20
	// HeartbeatInterval is the master client's ping period: Mooncake's client pings once a second,
	// well inside the master's default 10 s client TTL.
	HeartbeatInterval = time.Second
	// What a client does on NEED_REMOUNT (Config.Remount); the values of vllm's mooncake_remount.
	RemountNone      = "none"
	RemountMount     = "mount"
	RemountRepublish = "republish"
	// DefaultRequestTimeout is Mooncake's metadata client bound of 3 s a request, plus room for a
	// retry of a store that is still starting (simnode's Timeouts.Store gives the same).
	DefaultRequestTimeout = 5 * time.Second
	// KeyPrefix is the metadata key prefix of a cluster without a cluster id.
	KeyPrefix = "mooncake/"
	// DefaultSegmentSize is vLLM's Mooncake store default global_segment_size (3200 MiB).
	DefaultSegmentSize = 3355443200
)

// Config is one client's setup. Zero fields take the defaults above.
type Config struct {
	// LocalHostname is setup()'s local_hostname: "host" (a port is drawn) or "host:port".
	LocalHostname string
	// Protocol is the transfer protocol ("tcp" when empty: the simulation has no RDMA).
	Protocol    string
	SegmentSize uint64
	// ListenIP, when set, is where the transfer engine's RPC port is bound for the client's
	// lifetime, as the real engine binds it: two workers of one host cannot draw the same port,
	// and a port another program holds is skipped like a refused registration.
	ListenIP string
	// Rand draws ports, ids and addresses: seed it per process so that runs reproduce.
	Rand *rand.Rand
	// Heartbeat is the ping period.
	Heartbeat time.Duration
	// RequestTimeout bounds each request to the store on its own (setup, heartbeat, close), as
	// Mooncake bounds each master RPC and each metadata call, not a sequence of them. Default
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	Log            *slog.Logger
	// OnRegistered is called after setup and after every remount (with the number of remounts).
	OnRegistered func(remounts int)
	// Remount is what the heartbeat does on NEED_REMOUNT (vllm.MooncakeRemount*): "republish"
	// (the default: remount and write both metadata keys again, Mooncake PR #2077), "mount"
	// (remount only, Mooncake PR #845 before #2077: issue #2246) or "none" (keep pinging, never
	// remount: a client without the non-HA heartbeat remount of PR #845).
	Remount string
}

func (c *Config) defaults() error {
	if c.LocalHostname == "" {
		return errors.New("mooncake setup: empty local_hostname")
	}
	if c.Protocol == "" {
		c.Protocol = "tcp"
	}
	if c.SegmentSize == 0 {
		c.SegmentSize = DefaultSegmentSize
	}
	if c.Rand == nil {
		c.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = HeartbeatInterval
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.OnRegistered == nil {
		c.OnRegistered = func(int) {}
	}
	switch c.Remount {
	case "":
		c.Remount = RemountRepublish
	case RemountNone, RemountMount, RemountRepublish:
	default:
		return fmt.Errorf("mooncake setup: remount %q: want none, mount or republish", c.Remount)
	}
	return nil
}

// Client is one registered store client.
type Client struct {
	store    *client.Client
	cfg      Config
	host     string
	port     int
	ln       net.Listener
	clientID string
	segment  api.Segment

	mu       sync.Mutex
	remounts int
	closed   bool
}

// rpcMeta is the value of rpc_meta/<segment name>.
type rpcMeta struct {
	IPOrHostName string `json:"ip_or_host_name"`
	RPCPort      int    `json:"rpc_port"`
}

// ramDesc is the value of ram/<segment name> for the tcp transport.
type ramDesc struct {
	Name            string   `json:"name"`
	Protocol        string   `json:"protocol"`
	TCPDataPort     int      `json:"tcp_data_port"`
	TCPProtoVersion int      `json:"tcp_proto_version"`
	Timestamp       string   `json:"timestamp"`
	Buffers         []buffer `json:"buffers"`
}

type buffer struct {
	Name   string `json:"name"`
	Addr   uint64 `json:"addr"`
	Length uint64 `json:"length"`
}

// Setup registers a client the way MooncakeDistributedStore.setup does and returns it; the
// segment name is host:port. Run keeps it registered; Close unregisters it.
func Setup(ctx context.Context, store *client.Client, cfg Config) (*Client, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	c := &Client{store: store, cfg: cfg}
	rctx, cancel := c.request(ctx)
	_, err := store.ServiceReady(rctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("mooncake setup %s: connect to master: %w", cfg.LocalHostname, err)
	}
	host, portStr, err := net.SplitHostPort(cfg.LocalHostname)
	fixed := err == nil
	if !fixed {
		host = cfg.LocalHostname
	}
	c.host = host
	attempts := PortAttempts
	if fixed {
		attempts = 1
		p, err := strconv.Atoi(portStr)
		if err != nil || p <= 0 || p > 65535 {
			return nil, fmt.Errorf("mooncake setup: local_hostname %q: bad port", cfg.LocalHostname)
		}
		c.port = p
	}
	var lastErr error
	for i := 0; i < attempts; i++ {
		if !fixed {
			c.port = MinPort + cfg.Rand.IntN(MaxPort-MinPort+1)
		}
		if err := c.bind(); err != nil {
			lastErr = err
			cfg.Log.Info("mooncake rpc port busy, drawing another", "segment", c.Name(), "attempt", i+1, "err", err)
			continue
		}
		err := c.putRPCMeta(ctx)
		if err == nil {
			lastErr = nil
			break
		}
		c.unbind()
		lastErr = err
		if !client.IsDuplicate(err) {
			return nil, fmt.Errorf("mooncake setup %s: %w", c.Name(), err)
		}
		cfg.Log.Info("mooncake segment name taken, drawing another port", "segment", c.Name(), "attempt", i+1)
	}
	if lastErr != nil {
		return nil, fmt.Errorf("mooncake setup %s: registration refused %d times, last as %s: %w", host, attempts, c.Name(), lastErr)
	}
	c.clientID = fmt.Sprintf("%016x-%016x", cfg.Rand.Uint64(), cfg.Rand.Uint64())
	// A page-aligned address in the user half of x86-64's address space, as a pinned buffer has.
	base := (0x7f00_0000_0000 + cfg.Rand.Uint64N(0x00ff_0000_0000)) &^ 0xfff
	c.segment = api.Segment{
		ID:         fmt.Sprintf("%016x-%016x", cfg.Rand.Uint64(), cfg.Rand.Uint64()),
		Name:       c.Name(),
		Base:       base,
		Size:       cfg.SegmentSize,
		TEEndpoint: c.Name(),
		Protocol:   cfg.Protocol,
	}
	if err := c.putRAM(ctx); err != nil {
		c.unbind()
		return nil, errors.Join(fmt.Errorf("mooncake setup %s: %w", c.Name(), err), c.deleteKeys(ctx))
	}
	rctx, cancel = c.request(ctx)
	err = store.MountSegment(rctx, c.clientID, c.segment)
	cancel()
	if err != nil {
		c.unbind()
		return nil, errors.Join(fmt.Errorf("mooncake setup %s: mount segment: %w", c.Name(), err), c.deleteKeys(ctx))
	}
	cfg.OnRegistered(0)
	return c, nil
}

// request bounds one request to the store by RequestTimeout.
func (c *Client) request(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.RequestTimeout)
}

func (c *Client) bind() error {
	if c.cfg.ListenIP == "" {
		return nil
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(c.cfg.ListenIP, strconv.Itoa(c.port)))
	if err != nil {
		return fmt.Errorf("bind rpc port: %w", err)
	}
	c.ln = ln
	return nil
}

func (c *Client) unbind() {
	if c.ln != nil {
		c.ln.Close()
		c.ln = nil
	}
}

// Name is the segment name, host:port.
func (c *Client) Name() string { return net.JoinHostPort(c.host, strconv.Itoa(c.port)) }

// ClientID is the master client id.
func (c *Client) ClientID() string { return c.clientID }

// Remounts is how many times the heartbeat remounted the segment.
func (c *Client) Remounts() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.remounts
}

func (c *Client) putRPCMeta(ctx context.Context) error {
	v, _ := json.Marshal(rpcMeta{IPOrHostName: c.host, RPCPort: c.port})
	ctx, cancel := c.request(ctx)
	defer cancel()
	if _, err := c.store.Put(ctx, KeyPrefix+"rpc_meta/"+c.Name(), v); err != nil {
		return fmt.Errorf("publish rpc_meta: %w", err)
	}
	return nil
}

func (c *Client) putRAM(ctx context.Context) error {
	v, _ := json.Marshal(ramDesc{
		Name:            c.Name(),
		Protocol:        c.cfg.Protocol,
		TCPDataPort:     c.port,
		TCPProtoVersion: 2,
		Timestamp:       time.Now().UTC().Format("2006-01-02 15:04:05.000000"),
		Buffers:         []buffer{{Name: "cpu:0", Addr: c.segment.Base, Length: c.segment.Size}},
	})
	ctx, cancel := c.request(ctx)
	defer cancel()
	if _, err := c.store.Put(ctx, KeyPrefix+"ram/"+c.Name(), v); err != nil {
		return fmt.Errorf("publish ram descriptor: %w", err)
	}
	return nil
}

func (c *Client) deleteKeys(ctx context.Context) error {
	var errs []error
	for _, k := range []string{"rpc_meta/", "ram/"} {
		dctx, cancel := c.request(ctx)
		err := c.store.Delete(dctx, KeyPrefix+k+c.Name())
		cancel()
		if err != nil && !errors.Is(err, client.ErrNotFound) {
			errs = append(errs, fmt.Errorf("delete %s%s: %w", k, c.Name(), err))
		}
	}
	return errors.Join(errs...)
}

// Beat is one heartbeat now: a Ping, and what the client does when it answers NEED_REMOUNT. A
// node beats once right after setup, before it calls the worker ready: the master answers the
// first Ping after a mount NEED_REMOUNT, so the registration is stable only after that beat.
func (c *Client) Beat(ctx context.Context) error { return c.beat(ctx) }

// Run is the heartbeat: a Ping every period; NEED_REMOUNT re-mounts the segment and re-publishes
// both keys (after a master restart, the metadata is gone too). It returns when ctx ends. Failed
// pings are logged and retried on the next beat, as the real client does while the master is away.
func (c *Client) Run(ctx context.Context) {
	t := time.NewTicker(c.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := c.beat(ctx); err != nil && ctx.Err() == nil {
			c.cfg.Log.Warn("mooncake heartbeat failed", "segment", c.Name(), "err", err)
		}
	}
}

func (c *Client) beat(ctx context.Context) error {
	pctx, cancel := c.request(ctx)
	resp, err := c.store.Ping(pctx, c.clientID)
	cancel()
	if err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	if resp.ClientStatus != api.ClientNeedRemount || c.cfg.Remount == RemountNone {
		return nil
	}
	rctx, cancel := c.request(ctx)
	err = c.store.ReMountSegment(rctx, c.clientID, []api.Segment{c.segment})
	cancel()
	if err != nil {
		return fmt.Errorf("remount: %w", err)
	}
	if c.cfg.Remount == RemountMount {
		c.countRemount()
		return nil
	}
	var errs []error
	// Re-publishing an unchanged rpc_meta is "metadata unchanged" on the cpp server, a refusal on
	// the python one: log it, as the real client's warning does, and keep the registration.
	if err := c.putRPCMeta(ctx); err != nil && !client.IsDuplicate(err) {
		errs = append(errs, err)
	}
	if err := c.putRAM(ctx); err != nil {
		errs = append(errs, err)
	}
	c.countRemount()
	return errors.Join(errs...)
}

func (c *Client) countRemount() {
	c.mu.Lock()
	c.remounts++
	n := c.remounts
	c.mu.Unlock()
	c.cfg.OnRegistered(n)
}

// Close unregisters cleanly: unmount the segment and delete both metadata keys.
func (c *Client) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	defer c.unbind()
	uctx, cancel := c.request(ctx)
	err := c.store.UnmountSegment(uctx, c.clientID, c.segment.ID)
	cancel()
	if err != nil {
		err = fmt.Errorf("mooncake close %s: unmount: %w", c.Name(), err)
	}
	return errors.Join(err, c.deleteKeys(ctx))
}
