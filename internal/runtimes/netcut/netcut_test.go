package netcut

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/widetp/widetp/internal/runtimes"
)

// needNft skips where nftables cannot be used, saying why (the partition specs of e2e skip alike).
func needNft(t *testing.T) {
	t.Helper()
	if err := Available(context.Background()); err != nil {
		t.Skip(err)
	}
}

func listen(t *testing.T, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", addr+":0")
	if err != nil {
		t.Skipf("loopback %s not bindable here: %v", addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln
}

// dial connects from src to ln. A dropped SYN never answers: the bound is what a cut costs a
// connect, not a wait for something to happen.
func dial(src string, ln net.Listener) error {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 300 * time.Millisecond}
	c, err := d.Dial("tcp", ln.Addr().String())
	if err == nil {
		c.Close()
	}
	return err
}

// A partition on loopback drops what goes between its two sides, both ways, and nothing else;
// a heal ends it; Close removes the table.
func TestLoopbackPartitionCutsOnlyItsSides(t *testing.T) {
	needNft(t)
	owner, err := runtimes.CurrentOwner()
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := "127.77.0.2", "127.77.0.3", "127.77.0.4"
	la, lb := listen(t, a), listen(t, b)
	tbl := New(Loopback, "nctest", owner)
	t.Cleanup(func() { tbl.Close(context.Background()) })
	ctx := context.Background()
	if err := tbl.Partition(ctx, "cut", []netip.Addr{netip.MustParseAddr(a)}, []netip.Addr{netip.MustParseAddr(b)}); err != nil {
		t.Fatal(err)
	}
	var ne net.Error
	if err := dial(a, lb); !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("a -> b during the cut: %v, want a time-out (dropped, not refused)", err)
	}
	if err := dial(b, la); err == nil {
		t.Error("b -> a during the cut connected")
	}
	if err := dial(c, lb); err != nil {
		t.Errorf("c -> b during a cut between a and b: %v", err)
	}
	if err := tbl.Heal(ctx, "cut"); err != nil {
		t.Fatal(err)
	}
	if err := dial(a, lb); err != nil {
		t.Errorf("a -> b after the heal: %v", err)
	}
	if err := tbl.Heal(ctx, "cut"); err == nil || !strings.Contains(err.Error(), "no such partition") {
		t.Errorf("a second heal: %v, want an error naming the missing partition", err)
	}
	if err := tbl.Close(ctx); err != nil {
		t.Fatal(err)
	}
	expectGone(t, owner.Machine, tbl)
}

// Sweep removes the tables of owners that are gone and keeps those of live ones.
func TestSweepRemovesOnlyDeadOwnersTables(t *testing.T) {
	needNft(t)
	ctx := context.Background()
	me, err := runtimes.CurrentOwner()
	if err != nil {
		t.Fatal(err)
	}
	// A process that ran and is gone: its (pid, start) names no live process.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	start, err := runtimes.ProcessStart(pid)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	dead := runtimes.Owner{Machine: me.Machine, PID: pid, Start: start}
	one := []netip.Addr{netip.MustParseAddr("127.77.1.2")}
	other := []netip.Addr{netip.MustParseAddr("127.77.1.3")}
	gone, live := New(Loopback, "swdead", dead), New(Loopback, "swlive", me)
	for _, tb := range []*Table{gone, live} {
		t.Cleanup(func() { tb.Close(context.Background()) })
		if err := tb.Partition(ctx, "cut", one, other); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Sweep(ctx, me.Machine, func(o runtimes.Owner) bool { return o.Alive(me.Machine) }); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	ls, err := List(ctx, me.Machine)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		names[l.Name] = true
	}
	if names[gone.Name()] {
		t.Errorf("the dead owner's table %s survived the sweep", gone.Name())
	}
	if !names[live.Name()] {
		t.Errorf("the live owner's table %s was swept", live.Name())
	}
}

// tracked connects from src to ln and reports whether the kernel tracks that connection (its
// conntrack table, by addresses and ports: a closed connection's entry outlives it).
func tracked(t *testing.T, src string, ln net.Listener) bool {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("%s -> %s: %v", src, ln.Addr(), err)
	}
	defer c.Close()
	b, err := os.ReadFile("/proc/net/nf_conntrack")
	if err != nil {
		t.Skipf("the connection tracker's table is not readable here: %v", err)
	}
	from, to := c.LocalAddr().(*net.TCPAddr), c.RemoteAddr().(*net.TCPAddr)
	return strings.Contains(string(b), fmt.Sprintf("src=%s dst=%s sport=%d dport=%d ", from.IP, to.IP, from.Port, to.Port))
}

// Untrack keeps the tracker out of the connections between two addresses of its subnet, not out
// of the gateway's, and Close ends it (TCP on loopback: tracked at output, as a container's
// frames are at prerouting).
func TestUntrackSparesTheSubnetOnly(t *testing.T) {
	needNft(t)
	ctx := context.Background()
	owner, err := runtimes.CurrentOwner()
	if err != nil {
		t.Fatal(err)
	}
	gw, a, b := "127.78.0.1", "127.78.0.2", "127.78.0.3"
	lb := listen(t, b)
	tbl, err := Untrack(ctx, "nctest", owner, netip.MustParsePrefix("127.78.0.0/24"), netip.MustParseAddr(gw))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tbl.Close(context.Background()) })
	if tracked(t, a, lb) {
		t.Errorf("a connection %s -> %s within the subnet was tracked", a, b)
	}
	if !tracked(t, gw, lb) {
		t.Errorf("the gateway's connection %s -> %s was not tracked", gw, b)
	}
	if err := tbl.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !tracked(t, a, lb) {
		t.Errorf("after Close, %s -> %s was not tracked", a, b)
	}
	expectGone(t, owner.Machine, tbl)
}

// expectGone fails t when tbl is still listed (after its Close).
func expectGone(t *testing.T, machine string, tbl *Table) {
	t.Helper()
	ls, err := List(context.Background(), machine)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if l.Name == tbl.Name() {
			t.Errorf("table %s still there after Close", l.Name)
		}
	}
}
