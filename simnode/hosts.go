package simnode

import (
	"context"
	"fmt"
	"net"
)

// resolver maps the hosts of rendezvous addresses to dialable addresses:
//   - the WIDETP_HOSTS map first (a local run, where every "host" is a 127.0.0.x of one machine);
//   - loopback (127.0.0.1, ::1, localhost) means this host: vLLM's defaults (VLLM_DP_MASTER_IP
//     127.0.0.1) put single-node rendezvous there, and in a local run this host listens on its
//     own 127.0.0.x, not on 127.0.0.1;
//   - other IPs as they are, names through DNS (containers on one network resolve each other).
func (rt Runtime) resolver() func(ctx context.Context, host string) (string, error) {
	return func(ctx context.Context, host string) (string, error) {
		if ip, ok := rt.Hosts[host]; ok {
			return ip, nil
		}
		if isLoopback(host) {
			if ip := net.ParseIP(rt.ListenIP); ip != nil && !ip.IsUnspecified() {
				return rt.ListenIP, nil
			}
			return host, nil
		}
		if net.ParseIP(host) != nil {
			return host, nil
		}
		addrs, err := net.DefaultResolver.LookupHost(ctx, host)
		if err != nil {
			return "", fmt.Errorf("resolve %s (not in %s either): %w", host, EnvHosts, err)
		}
		return addrs[0], nil
	}
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
