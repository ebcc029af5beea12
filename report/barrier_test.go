package report

import "testing"

func TestBarrierKey(t *testing.T) {
	rows := []struct{ host, addr, want string }{
		{"n1", "n0:29500", "n0:29500"},
		{"n1", "10.0.0.1:29500", "10.0.0.1:29500"},
		{"n1", "127.0.0.1:29550", "127.0.0.1:29550@n1"},
		{"n1", "127.0.0.2:29550", "127.0.0.2:29550@n1"}, // all of 127.0.0.0/8 is loopback
		{"n1", "localhost:29550", "localhost:29550@n1"},
		{"n1", "[::1]:29550", "[::1]:29550@n1"},
		{"n1", "no-port", "no-port"},
	}
	for _, r := range rows {
		if got := BarrierKey(r.host, r.addr); got != r.want {
			t.Errorf("BarrierKey(%q, %q) = %q, want %q", r.host, r.addr, got, r.want)
		}
	}
}
