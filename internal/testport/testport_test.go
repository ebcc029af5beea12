package testport

import (
	"net"
	"strconv"
	"testing"
)

// The port is outside the kernel's ephemeral range (so no outgoing connection is handed it) and
// from floor up (so it is none of the ports simulated deployments use by vLLM's defaults), and a
// listener can bind it on the address asked for.
func TestFreeIsOutsideTheEphemeralRangeAndBindable(t *testing.T) {
	lo, hi := ephemeralRange()
	for range 20 {
		p := Free(t, "127.0.0.1")
		if p < floor || (p >= lo && p <= hi) || p > 65535 {
			t.Fatalf("port %d: want one from %d up, outside the ephemeral range %d-%d", p, floor, lo, hi)
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

// Where the ports come from for other ephemeral ranges: below the range when there is room, above
// it when not, and the kernel's own pick when the range leaves no room either side.
func TestSpanOutsideTheEphemeralRange(t *testing.T) {
	for _, c := range []struct {
		lo, hi int
		want   [2]int
		ok     bool
	}{
		{32768, 60999, [2]int{floor, 32768}, true}, // Linux's default
		{1024, 40000, [2]int{40001, 65536}, true},
		{10000, 65535, [2]int{}, false},
		{floor + 100, 65500, [2]int{}, false}, // 100 below, 35 above: too few either side
	} {
		if got, ok := spanOutside(c.lo, c.hi); got != c.want || ok != c.ok {
			t.Errorf("range %d-%d: span %v (ok %v), want %v (ok %v)", c.lo, c.hi, got, ok, c.want, c.ok)
		}
	}
}
