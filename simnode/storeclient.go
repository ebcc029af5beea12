package simnode

import (
	"context"
	"net"
	"net/http"
	"syscall"

	"github.com/widetp/widetp/fakestore/client"
	"github.com/widetp/widetp/simnode/pace"
	"github.com/widetp/widetp/vllm"
)

// newStoreClient is a client of the fake store at urls whose host names resolve through
// WIDETP_HOSTS first, so that a harness can name the store by its host ("http://store:9003") on
// every runtime — the host map in a local run, where "store" is no DNS name, and Docker's DNS in a
// container, through the runtime's name cache: every plane's connections then share one answer.
func newStoreClient(urls StoreURLs, rt Runtime, opts ...client.Option) (*client.Client, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	// As the client's own default transport: many processes' steady posts never re-dial.
	t.MaxIdleConns = 512
	t.MaxIdleConnsPerHost = 128
	// A store that is still starting may lose the first SYN of a connect (pace.ConnectAttempt).
	d := net.Dialer{Timeout: pace.ConnectAttempt}
	// Dial from the host's own address, as a container's connections come from its own: the
	// store then tells the hosts of a local run apart by peer (its registrations' writers, a
	// partition's refusals).
	if ip := net.ParseIP(rt.ListenIP); ip != nil && !ip.IsUnspecified() {
		d.LocalAddr = &net.TCPAddr{IP: ip}
		// The kernel draws the source port from the ephemeral range on the host's own address,
		// where the simulated processes bind their ports too: SO_REUSEADDR lets a later
		// listener (which sets it too: libzmq, Go) bind a port one of these connections uses,
		// as it could while they came from another address.
		d.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
			}); err != nil {
				return err
			}
			return serr
		}
	}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return d.DialContext(ctx, network, addr)
		}
		// Not the resolver's loopback rule: a loopback store address is the harness's own, not
		// this host's.
		ip, fromDNS, err := rt.dialable(ctx, host)
		if err != nil {
			return nil, &net.OpError{Op: "dial", Net: network, Err: err}
		}
		conn, err := d.DialContext(ctx, network, net.JoinHostPort(ip, port))
		if err != nil && fromDNS {
			rt.forget(host, err)
		}
		return conn, err
	}
	opts = append([]client.Option{client.WithHTTPClient(&http.Client{Transport: t})}, opts...)
	opts = append(opts, client.WithMetadataURL(urls.Metadata), client.WithMasterURL(urls.Master), client.WithAdminURL(urls.Admin))
	return client.New(opts...)
}

// seedNumber turns a node's seed into the number each process seeds its random source with.
func seedNumber(seed string) int64 { return int64(vllm.SeedNumber(seed)) }
