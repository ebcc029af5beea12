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
// gives to an outgoing connection (below /proc/sys/net/ipv4/ip_local_port_range), so it stays free
// until the test's program listens on it, unless another program asks for the same number.
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
	lo, hi := floor, ephemeralLow()
	if hi-lo < 256 {
		return 0, fmt.Errorf("testport: the kernel's ephemeral range starts at %d: no room below it above %d", hi, lo)
	}
	var last error
	for range 64 {
		p := lo + rand.IntN(hi-lo)
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(p)))
		if err != nil {
			last = err
			continue
		}
		ln.Close()
		return p, nil
	}
	return 0, fmt.Errorf("testport: no free port in [%d, %d) on %s after 64 tries: %v", lo, hi, ip, last)
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's default 32768 when it
// cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return n
}
