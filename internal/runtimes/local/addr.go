//go:build linux

package local

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/netip"
	"syscall"
)

// addrBlock is a run's /24 of loopback addresses, 127.A.B.0/24: every host of the run listens on
// one of them, so two hosts (or two parallel runs) can each bind the same port, as on separate
// machines. All of 127.0.0.0/8 reaches the loopback interface on Linux, with no setup.
type addrBlock struct {
	a, b byte
	// lock is held while the run lives: a listener on an abstract unix socket named after the
	// block. The kernel frees the name when the process ends, however it ends, so a killed run
	// never leaves a block taken, and no file needs cleaning.
	lock net.Listener
}

// Blocks are 127.A.B.0/24 with A in 1..254: 127.0.0.0/24 holds 127.0.0.1, where the machine's own
// services listen, and Debian's 127.0.1.1; 127.255.0.0/16 ends in the broadcast address.
const (
	blockCount = 254 * 256
	// maxLocalHosts is how many hosts one block holds: .1 to .254.
	maxLocalHosts = 254
)

// reserveBlock takes the first free block from one derived from the run id: runs with different
// ids usually start from different blocks, and the lock settles the rest, across processes
// (parallel `ginkgo -p` workers) as within one.
func reserveBlock(runID string) (*addrBlock, error) {
	h := fnv.New32a()
	h.Write([]byte(runID))
	start := int(h.Sum32() % blockCount)
	for i := 0; i < blockCount; i++ {
		k := (start + i) % blockCount
		b := &addrBlock{a: byte(1 + k/256), b: byte(k % 256)}
		ln, err := net.Listen("unix", b.lockName())
		if err != nil {
			if errors.Is(err, syscall.EADDRINUSE) {
				continue
			}
			return nil, fmt.Errorf("reserve loopback block %s: %w", b, err)
		}
		b.lock = ln
		return b, nil
	}
	return nil, fmt.Errorf("reserve a loopback block: all %d are held by other runs", blockCount)
}

// lockName is an abstract socket name (the leading '@'), machine-wide per network namespace.
func (b *addrBlock) lockName() string { return fmt.Sprintf("@widetp-local-127.%d.%d", b.a, b.b) }

// dirName names the run directory of the block's run: "<A>.<B>" (see parseBlockName).
func (b *addrBlock) dirName() string { return fmt.Sprintf("%d.%d", b.a, b.b) }

func (b *addrBlock) String() string { return fmt.Sprintf("127.%d.%d.0/24", b.a, b.b) }

// host is the address of the i-th host of the run (from 0): 127.A.B.(i+1).
func (b *addrBlock) host(i int) (netip.Addr, error) {
	if i < 0 || i >= maxLocalHosts {
		return netip.Addr{}, fmt.Errorf("host %d of the run: a run's block %s holds %d hosts", i+1, b, maxLocalHosts)
	}
	return netip.AddrFrom4([4]byte{127, b.a, b.b, byte(i + 1)}), nil
}

// checkBindable makes sure this machine routes the block to loopback (Linux does, all of
// 127.0.0.0/8; a system that does not would fail every host's bind with a less clear error).
func (b *addrBlock) checkBindable() error {
	a, _ := b.host(0)
	ln, err := net.Listen("tcp", net.JoinHostPort(a.String(), "0"))
	if err != nil {
		return fmt.Errorf("bind loopback address %s: %w (the local runtime needs every 127.x.y.z address on the loopback interface, as Linux has)", a, err)
	}
	return ln.Close()
}

func (b *addrBlock) release() error {
	if b == nil || b.lock == nil {
		return nil
	}
	err := b.lock.Close()
	b.lock = nil
	return err
}
