package report

import (
	"net"
	"strings"
)

// BarrierKey names the barrier that a process on host meets at address (host:port, as
// Rendezvous.Address records it): the address itself, or, when its host is a loopback address
// or "localhost", the address qualified by the process's host ("127.0.0.1:29550@node1"). Every
// host has its own loopback: vLLM's defaults (master_addr, VLLM_DP_MASTER_IP 127.0.0.1) put
// single-node rendezvous there, so two hosts that both meet at 127.0.0.1:29550 meet at two
// different barriers. An address that does not parse is its own key.
func BarrierKey(host, address string) string {
	h, _, err := net.SplitHostPort(address)
	if err != nil {
		return address
	}
	if h == "localhost" {
		return address + "@" + host
	}
	// A host name (the common case) is no IP: skip parsing, which allocates.
	if h == "" || (h[0] < '0' || h[0] > '9') && !strings.Contains(h, ":") {
		return address
	}
	if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
		return address + "@" + host
	}
	return address
}
