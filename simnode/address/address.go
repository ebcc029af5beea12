// Package address binds, opens, dials and probes the addresses a simulated vLLM process derives
// (vllm.AddressPlan), for real: TCP listeners with the socket layer, ZMQ ROUTER side channels and
// REQ clients with libzmq (as vLLM's pyzmq does), named per-host files opened the way
// SharedOffloadRegion opens /dev/shm (O_CREAT|O_EXCL first, plainly after), and vLLM's port
// allocators against real binds. A side-channel server answers each request with its owner's key
// and records the request's nonce, which is how a run tells who answered whom.
package address

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Net is how a simulated host's sockets reach the real network: the address its wildcard and
// loopback binds go to, and how host names resolve.
type Net struct {
	// ListenIP is the host's address ("0.0.0.0" in a container, a 127.0.0.x of its own in a local
	// run, where it also stands for the host's loopback: every simulated host shares the machine's).
	ListenIP string
	// Resolve maps a host name (or IP) to a dialable IP.
	Resolve func(ctx context.Context, host string) (string, error)
	// IPCRoot prefixes ipc:// paths in a local run (each simulated host has its own /tmp).
	IPCRoot string
}

// zmqEndpoint is the libzmq endpoint this host uses for the model's endpoint: tcp with the host
// mapped (bindIP or dialIP; a container's connect to a named peer keeps the name), ipc under the
// host's root.
func (n Net) zmqEndpoint(ctx context.Context, endpoint string, bind bool) (string, error) {
	if p, ok := strings.CutPrefix(endpoint, "ipc://"); ok {
		if !filepath.IsAbs(p) {
			return "", fmt.Errorf("endpoint %q: ipc path is not absolute", endpoint)
		}
		if n.IPCRoot != "" {
			p = filepath.Join(n.IPCRoot, p)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		return "ipc://" + p, nil
	}
	h, port, err := SplitTCP(endpoint)
	if err != nil {
		return "", err
	}
	var ip string
	if bind {
		ip, err = n.bindIP(ctx, h)
	} else {
		ip, err = n.dialIP(ctx, h)
	}
	if err != nil {
		return "", err
	}
	if !bind && !n.local() && isPeerName(h) {
		// A container connects to a peer by its name, as vLLM's pyzmq does: libzmq resolves it on
		// every connection attempt, so a reconnect finds a restarted container at its new address.
		// The resolution above only makes a name nobody knows fail here, as it does in a local run.
		ip = h
	}
	dst := net.JoinHostPort(ip, strconv.Itoa(port))
	if !bind && n.local() {
		// A local host connects from its own address, as a container does from its own (libzmq's
		// "tcp://source;destination"), so that a partition between hosts can tell them apart.
		return "tcp://" + n.ListenIP + ":0;" + dst, nil
	}
	return "tcp://" + dst, nil
}

func (n Net) local() bool {
	ip := net.ParseIP(n.ListenIP)
	return ip != nil && !ip.IsUnspecified()
}

// bindIP is the IP a bind of host h uses. A wildcard or loopback bind goes to the host's own
// listen address in a local run (each simulated host has its own); in a container they are what
// they say. A named interface must be this host's: in a local run every 127.0.0.x is bindable,
// so a name that resolves to another simulated host's address is refused as the kernel refuses a
// foreign address (EADDRNOTAVAIL).
func (n Net) bindIP(ctx context.Context, h string) (string, error) {
	switch {
	case h == "" || h == "*" || h == "0.0.0.0" || h == "::":
		if n.local() {
			return n.ListenIP, nil
		}
		return "0.0.0.0", nil
	case h == "localhost" || isLoopback(h):
		if n.local() {
			return n.ListenIP, nil
		}
		return "127.0.0.1", nil
	}
	ip, err := n.resolve(ctx, h)
	if err != nil {
		return "", err
	}
	if n.local() && ip != n.ListenIP {
		return "", syscall.EADDRNOTAVAIL
	}
	return ip, nil
}

// dialIP is the IP a client on this host reaches when it dials h: its own host for a loopback or
// wildcard address.
func (n Net) dialIP(ctx context.Context, h string) (string, error) {
	if h == "" || h == "0.0.0.0" || h == "::" || h == "localhost" || isLoopback(h) {
		if n.local() {
			return n.ListenIP, nil
		}
		return "127.0.0.1", nil
	}
	return n.resolve(ctx, h)
}

func (n Net) resolve(ctx context.Context, h string) (string, error) {
	if n.Resolve == nil {
		return h, nil
	}
	return n.Resolve(ctx, h)
}

// isPeerName reports whether h names a host rather than giving an address or this host.
func isPeerName(h string) bool {
	return h != "" && h != "*" && h != "localhost" && net.ParseIP(h) == nil
}

func isLoopback(h string) bool {
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// SplitTCP splits "tcp://host:port" (or http://).
func SplitTCP(endpoint string) (host string, port int, err error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "tcp" && u.Scheme != "http") {
		return "", 0, fmt.Errorf("endpoint %q is not tcp://host:port", endpoint)
	}
	h, ps, err := net.SplitHostPort(u.Host)
	if err != nil {
		return "", 0, fmt.Errorf("endpoint %q: %w", endpoint, err)
	}
	port, err = strconv.Atoi(ps)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("endpoint %q: port %q is not 0-65535", endpoint, ps)
	}
	return h, port, nil
}

// Errno returns the socket errno inside err (0 when there is none).
func Errno(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return 0
}

// Strerror is libc's strerror for errno, as Python and pyzmq print it (capitalised).
func Strerror(e syscall.Errno) string {
	s := e.Error()
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// Nonce is the request nonce of a process's address step: derived from the run's seed, the
// process and the step, so a run reproduces and no two requests share one.
func Nonce(seed int64, id string, step int) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("widetp-address/%d/%s/%d", seed, id, step)))
	return hex.EncodeToString(h[:16])
}
