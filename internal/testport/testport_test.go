package testport

import (
	"net"
	"strconv"
	"testing"
)

// The port is below the kernel's ephemeral range (so no outgoing connection is handed it) and
// above floor (so it is none of the ports simulated deployments use by vLLM's defaults), and a
// listener can bind it on the address asked for.
func TestFreeIsBelowTheEphemeralRangeAndBindable(t *testing.T) {
	low := ephemeralLow()
	for range 20 {
		p := Free(t, "127.0.0.1")
		if p < floor || p >= low {
			t.Fatalf("port %d outside [%d, %d)", p, floor, low)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("listen on the port Free gave: %v", err)
		}
		ln.Close()
	}
}

// A port held by a listener is never handed out: Free checks by binding.
func TestFreeSkipsPortsInUse(t *testing.T) {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	busy := map[int]bool{}
	for p := floor; p < floor+64; p++ {
		if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
			held = append(held, l)
			busy[p] = true
		}
	}
	for range 500 {
		if p := Free(t, "127.0.0.1"); busy[p] {
			t.Fatalf("Free gave port %d, which a listener of this test holds", p)
		}
	}
}
