// Command zmqbind is the harness's own test node: a tiny cgo program that links libzmq (as simnode
// does), binds REP sockets on ipc paths in its host's /tmp and on TCP, asks peers by host name
// (libzmq resolves them through the run's network aliases), and reports on stdout. It exercises
// every property of a node image the harness promises, without depending on simnode.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	zmq "github.com/pebbe/zmq4"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	var binds, pings list
	flag.Var(&binds, "bind", "endpoint to bind a REP socket at (repeatable)")
	flag.Var(&pings, "ping", "endpoint of a peer's REP socket to ask once (repeatable)")
	fail := flag.String("fail", "", "after binding, print this to stderr and exit 3 (an early crash)")
	// A peer may start later than us; libzmq reconnects until then. 20 s bounds a peer that never comes.
	timeout := flag.Duration("timeout", 20*time.Second, "bound on each ping")
	flag.Parse()
	host, _ := os.Hostname()
	if err := run(host, binds, pings, *fail, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "zmqbind:", err)
		os.Exit(3)
	}
}

func run(host string, binds, pings []string, fail string, timeout time.Duration) error {
	ctx, err := zmq.NewContext()
	if err != nil {
		return fmt.Errorf("new zmq context: %w", err)
	}
	var servers []*zmq.Socket
	// Term waits for every socket to close, so close them first on every return.
	defer func() {
		for _, s := range servers {
			s.Close()
		}
		ctx.Term()
	}()
	for _, ep := range binds {
		s, err := ctx.NewSocket(zmq.REP)
		if err != nil {
			return err
		}
		servers = append(servers, s)
		s.SetLinger(0)
		if err := s.Bind(ep); err != nil {
			return fmt.Errorf("bind %s: %w", ep, err)
		}
		fmt.Println("bound", ep)
	}
	for i := 0; i < 3; i++ {
		fmt.Println("log line", i)
	}
	if fail != "" {
		return fmt.Errorf("%s", fail)
	}
	for _, ep := range pings {
		reply, err := ping(ctx, ep, host, timeout)
		if err != nil {
			return err
		}
		fmt.Printf("pong %s %s\n", ep, reply)
	}
	fmt.Println("ready", host)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	poller := zmq.NewPoller()
	for _, s := range servers {
		poller.Add(s, zmq.POLLIN)
	}
	for {
		select {
		case s := <-sig:
			fmt.Println("stopping on", s)
			return nil
		default:
		}
		// Poll in short slices so a signal is noticed promptly; 200 ms is well under the
		// harness's stop grace period.
		ready, err := poller.Poll(200 * time.Millisecond)
		if err != nil {
			if zmq.AsErrno(err) == zmq.Errno(syscall.EINTR) {
				continue
			}
			return fmt.Errorf("poll: %w", err)
		}
		for _, p := range ready {
			msg, err := p.Socket.Recv(0)
			if err != nil {
				return fmt.Errorf("recv: %w", err)
			}
			if _, err := p.Socket.Send(host+" got "+msg, 0); err != nil {
				return fmt.Errorf("reply: %w", err)
			}
		}
	}
}

func ping(ctx *zmq.Context, ep, host string, timeout time.Duration) (string, error) {
	s, err := ctx.NewSocket(zmq.REQ)
	if err != nil {
		return "", err
	}
	defer s.Close()
	s.SetLinger(0)
	s.SetRcvtimeo(timeout)
	s.SetSndtimeo(timeout)
	if err := s.Connect(ep); err != nil {
		return "", fmt.Errorf("connect %s: %w", ep, err)
	}
	if _, err := s.Send("ping from "+host, 0); err != nil {
		return "", fmt.Errorf("send to %s: %w", ep, err)
	}
	reply, err := s.Recv(0)
	if err != nil {
		return "", fmt.Errorf("no reply from %s within %s: %w", ep, timeout, err)
	}
	return reply, nil
}
