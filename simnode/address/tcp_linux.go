package address

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
)

// TCPSocket is a bound TCP socket that listens only when told, as Python's socket.bind then
// (much later) listen: vLLM's front end binds its HTTP socket in setup_server and uvicorn listens
// on it once the engines are up. Linux lets a second socket bind a port that a bound but not yet
// listening SO_REUSEADDR socket holds; it refuses a second listener (EADDRINUSE) unless both set
// SO_REUSEPORT.
type TCPSocket struct {
	fd       int
	endpoint string
	ln       Listener
}

// BindTCP binds endpoint (tcp://host:port) with SO_REUSEADDR (and SO_REUSEPORT when reusePort),
// without listening. A bind the kernel refuses is a *BindError.
func BindTCP(ctx context.Context, n Net, endpoint string, reusePort bool) (*TCPSocket, error) {
	h, port, err := SplitTCP(endpoint)
	if err != nil {
		return nil, err
	}
	ipText, err := n.bindIP(ctx, h)
	if err != nil {
		return nil, bindError(endpoint, err)
	}
	ip := net.ParseIP(ipText).To4()
	if ip == nil {
		return nil, fmt.Errorf("bind %s: %q is no IPv4 address", endpoint, ipText)
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("bind %s: socket: %w", endpoint, err)
	}
	opts := []int{syscall.SO_REUSEADDR}
	if reusePort {
		opts = append(opts, soReusePort)
	}
	for _, o := range opts {
		if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, o, 1); err != nil {
			syscall.Close(fd)
			return nil, fmt.Errorf("bind %s: setsockopt: %w", endpoint, err)
		}
	}
	sa := &syscall.SockaddrInet4{Port: port}
	copy(sa.Addr[:], ip)
	if err := syscall.Bind(fd, sa); err != nil {
		syscall.Close(fd)
		return nil, bindError(endpoint, err)
	}
	return &TCPSocket{fd: fd, endpoint: "tcp://" + net.JoinHostPort(ipText, strconv.Itoa(port))}, nil
}

// soReusePort is SO_REUSEPORT on Linux (the syscall package does not name it).
const soReusePort = 0xf

// Listen makes the socket listen (accepting and closing what comes, as nothing is served on it).
// A refused listen is a *BindError.
func (s *TCPSocket) Listen() error {
	if err := syscall.Listen(s.fd, syscall.SOMAXCONN); err != nil {
		return bindError(s.endpoint, err)
	}
	f := os.NewFile(uintptr(s.fd), s.endpoint)
	ln, err := net.FileListener(f)
	f.Close() // FileListener dups the descriptor
	s.fd = -1
	if err != nil {
		return fmt.Errorf("listen %s: %w", s.endpoint, err)
	}
	s.ln = serveTCP(ln)
	return nil
}

func (s *TCPSocket) Endpoint() string { return s.endpoint }

// Close releases the socket, listening or not.
func (s *TCPSocket) Close() error {
	if s.ln != nil {
		return s.ln.Close()
	}
	if s.fd >= 0 {
		err := syscall.Close(s.fd)
		s.fd = -1
		return err
	}
	return nil
}
