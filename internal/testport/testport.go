// Package testport hands tests a TCP port that a program they start will listen on later.
//
// The usual way, listening on port 0 and closing the listener, returns a port from the kernel's
// ephemeral range: until the program binds it, any outgoing connection on the machine (another
// test package's, a simulated process's, the Docker engine's) may be given that very port as its
// local port, and the bind fails with EADDRINUSE. That happened under `make test`'s parallel
// package run (simnode's TestCtlKillsOneProcessAndTheNodeStaysUp: a worker's rendezvous listen on
// a port picked that way). Ports below the ephemeral range are never handed out by the kernel,
// so only a program that asks for that port by number can take it.
package testport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// floor is the lowest port Free hands out: above the ports that simulated deployments listen on
// by vLLM's defaults (8000 for the API, 13345 for the DP RPC port, 29500-29551 for torch's and
// the DP master's), so a test's port never meets a simulated process of another test package.
const floor = 30000

// Free returns a TCP port on ip that nothing listened on a moment ago and that the kernel never
// gives to an outgoing connection (outside /proc/sys/net/ipv4/ip_local_port_range: below it, or
// above it when there is no room below), so it stays free until the test's program listens on
// it, unless another program asks for the same number.
func Free(t testing.TB, ip string) int {
	t.Helper()
	p, err := free(ip)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Addr is Free's port on ip, as host:port.
func Addr(t testing.TB, ip string) string {
	t.Helper()
	return net.JoinHostPort(ip, strconv.Itoa(Free(t, ip)))
}

func free(ip string) (int, error) {
	lo, hi := ephemeralRange()
	span, ok := spanOutside(lo, hi)
	if !ok {
		return kernelPort(ip)
	}
	var last error
	for range 64 {
		p := span[0] + rand.IntN(span[1]-span[0])
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(p)))
		if err != nil {
			last = err
			continue
		}
		ln.Close()
		return p, nil
	}
	return 0, fmt.Errorf("testport: no free port on %s outside the ephemeral range %d-%d after 64 tries: %v", ip, lo, hi, last)
}

// spanOutside is the ports [from, to) Free draws from, given the ephemeral range lo-hi: below it;
// above it when there is no room below (the model's host-local rendezvous ports start at 61000,
// above Linux's default range, so below is preferred). ok is false when the range leaves no room
// on either side: such a machine gets a port the kernel picks (the old way, with its race).
func spanOutside(lo, hi int) (span [2]int, ok bool) {
	switch {
	case lo-floor >= minSpan:
		return [2]int{floor, lo}, true
	case 65536-(hi+1) >= minSpan:
		return [2]int{hi + 1, 65536}, true
	}
	return span, false
}

// minSpan is the fewest ports a span outside the ephemeral range must hold to be drawn from.
const minSpan = 256

// kernelPort is a port the kernel picks on ip (listen on 0, then close).
func kernelPort(ip string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, fmt.Errorf("testport: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// ephemeralRange is the kernel's ephemeral port range (Linux's default 32768-60999 when it cannot
// be read).
func ephemeralRange() (lo, hi int) {
	lo, hi = 32768, 60999
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return lo, hi
	}
	l, err1 := strconv.Atoi(f[0])
	h, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || l > h {
		return lo, hi
	}
	return l, h
}
