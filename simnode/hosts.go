package simnode

import (
	"context"
	"fmt"
	"net"
)

// resolver maps simulated hostnames to addresses: the WIDETP_HOSTS map first (a local run, where
// every "host" is a 127.0.0.x of one machine), then DNS (containers on one network resolve each
// other by hostname).
func (rt Runtime) resolver() func(ctx context.Context, host string) (string, error) {
	return func(ctx context.Context, host string) (string, error) {
		if ip, ok := rt.Hosts[host]; ok {
			return ip, nil
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
