package simnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/widetp/widetp/simnode/pace"
)

// resolver maps the hosts of rendezvous addresses to dialable addresses:
//   - the WIDETP_HOSTS map first (a local run, where every "host" is a 127.0.0.x of one machine);
//   - loopback (127.0.0.1, ::1, localhost) means this host: vLLM's defaults (VLLM_DP_MASTER_IP
//     127.0.0.1) put single-node rendezvous there, and in a local run this host listens on its
//     own 127.0.0.x, not on 127.0.0.1;
//   - other IPs as they are, names through DNS (containers on one network resolve each other),
//     remembered by the runtime's name cache (a ZMQ connect in a container hands libzmq the name
//     itself: address.Net.zmqEndpoint).
func (rt Runtime) resolver() func(ctx context.Context, host string) (string, error) {
	return func(ctx context.Context, host string) (string, error) {
		if _, mapped := rt.Hosts[host]; !mapped && isLoopback(host) {
			if ip := net.ParseIP(rt.ListenIP); ip != nil && !ip.IsUnspecified() {
				return rt.ListenIP, nil
			}
			return host, nil
		}
		ip, _, err := rt.dialable(ctx, host)
		return ip, err
	}
}

// dialable is the address this process dials for host: the WIDETP_HOSTS map, an IP as it is, else
// the name cache and then DNS (fromDNS: an answer forget may drop).
func (rt Runtime) dialable(ctx context.Context, host string) (ip string, fromDNS bool, err error) {
	if ip, ok := rt.Hosts[host]; ok {
		return ip, false, nil
	}
	if net.ParseIP(host) != nil {
		return host, false, nil
	}
	if ip, ok := rt.names.get(host); ok {
		return ip, true, nil
	}
	addrs, err := rt.names.lookupHost(ctx, host)
	if err != nil {
		return "", false, fmt.Errorf("resolve %s (not in %s either): %w", host, EnvHosts, err)
	}
	rt.names.put(host, addrs[0])
	return addrs[0], true, nil
}

// forget is told that a dial to host failed with err: the name cache drops its answer, as the
// host may have come back at another address (a restarted container can get one).
func (rt Runtime) forget(host string, err error) { rt.names.forget(host, err, time.Now()) }

// refusedKeep is how long an answer survives dials that were refused: a refusal comes from a host
// at that address that does not listen yet (a rank 0 still starting), the common case of a long
// wait, whose every retry would otherwise ask DNS again; past this age the name is asked again,
// in case the address now belongs to another host.
const refusedKeep = 2 * time.Second

// nameCache holds the DNS answers of one process, so that its many connections to the store and
// the rendezvous hosts ask Docker's DNS once per name instead of once per connection (on a
// 64-node run, thousands of queries answered by the engine on the same two cores). A name stays
// until a dial to it fails (refused: once it is refusedKeep old); a process's children start with
// what their parent learned (Runtime.Resolved). The nil cache holds nothing.
type nameCache struct {
	mu  sync.Mutex
	ips map[string]answer
	// ask is the DNS query (net.DefaultResolver's; a test counts them).
	ask func(ctx context.Context, host string) ([]string, error)
}

type answer struct {
	ip string
	at time.Time
}

func newNameCache(seed map[string]string) *nameCache {
	c := &nameCache{ips: map[string]answer{}, ask: askIPv4(dnsResolver)}
	now := time.Now()
	for name, ip := range seed {
		if net.ParseIP(ip) != nil {
			c.ips[name] = answer{ip: ip, at: now}
		}
	}
	return c
}

// lookupHost asks DNS for host, one attempt of at most pace.LookupAttempt: an unanswered query is
// the caller's failed attempt, which it makes again at its pace.
func (c *nameCache) lookupHost(ctx context.Context, host string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, pace.LookupAttempt)
	defer cancel()
	if c == nil {
		return askIPv4(dnsResolver)(ctx, host)
	}
	return c.ask(ctx, host)
}

// dnsResolver answers the name caches' questions (a test points it at a DNS server of its own).
var dnsResolver = net.DefaultResolver

// askIPv4 is a DNS question for host's IPv4 addresses only (an A query, not A and AAAA). The hosts
// a name can stand for are containers on the bridge network a Docker run creates, which has no
// IPv6; a local run maps its names in WIDETP_HOSTS and asks nobody. An AAAA question could only
// double the queries Docker's DNS answers on the run's own cores: on a 64-node run most of them
// are for hosts that are not up yet, asked again at every attempt of a rendezvous.
func askIPv4(r *net.Resolver) func(ctx context.Context, host string) ([]string, error) {
	return func(ctx context.Context, host string) ([]string, error) {
		ips, err := r.LookupNetIP(ctx, "ip4", host)
		if err != nil {
			return nil, err
		}
		out := make([]string, len(ips))
		for i, ip := range ips {
			out[i] = ip.Unmap().String()
		}
		return out, nil
	}
}

func (c *nameCache) get(host string) (string, bool) {
	if c == nil {
		return "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.ips[host]
	return a.ip, ok
}

func (c *nameCache) put(host, ip string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ips[host] = answer{ip: ip, at: time.Now()}
}

func (c *nameCache) forget(host string, err error, now time.Time) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if a, ok := c.ips[host]; ok && errors.Is(err, syscall.ECONNREFUSED) && now.Sub(a.at) < refusedKeep {
		return
	}
	delete(c.ips, host)
}

// snapshot is a copy of what the cache holds (nil when empty), for a child's Runtime.Resolved.
func (c *nameCache) snapshot() map[string]string {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.ips) == 0 {
		return nil
	}
	out := make(map[string]string, len(c.ips))
	for name, a := range c.ips {
		out[name] = a.ip
	}
	return out
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
