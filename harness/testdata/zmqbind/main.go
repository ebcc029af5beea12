// Command zmqbind is the harness's own test node: a tiny cgo program that links libzmq (as simnode
// does), binds REP sockets on ipc paths in its host's /tmp and on TCP, asks peers by host name
// (libzmq resolves them through the run's network aliases), and reports on stdout. It exercises
// every property of a node image the harness promises, without depending on simnode.
package main

import (
	"errors"
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
	printEnv := flag.String("print-env", "", "comma-separated variables to print as NAME=value at start")
	fail := flag.String("fail", "", "after binding, print this to stderr and exit 3 (an early crash)")
	// A peer may start later than us; libzmq reconnects until then. 20 s bounds a peer that never comes.
	timeout := flag.Duration("timeout", 20*time.Second, "bound on each ping")
	flag.Parse()
	host, _ := os.Hostname()
	for _, name := range strings.Split(*printEnv, ",") {
		if name != "" {
			fmt.Printf("env %s=%s\n", name, os.Getenv(name))
		}
	}
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
	closeAll := func() {
		for _, s := range servers {
			s.Close()
		}
	}
	for _, ep := range binds {
		s, err := ctx.NewSocket(zmq.REP)
		if err != nil {
			closeAll()
			ctx.Term()
			return err
		}
		servers = append(servers, s)
		s.SetLinger(0)
		if err := s.Bind(ep); err != nil {
			closeAll()
			ctx.Term()
			return fmt.Errorf("bind %s: %w", ep, err)
		}
		fmt.Println("bound", ep)
	}
	for i := 0; i < 3; i++ {
		fmt.Println("log line", i)
	}
	if fail != "" {
		closeAll()
		ctx.Term()
		return fmt.Errorf("%s", fail)
	}
	// The servers are handed to their own goroutine (ZMQ sockets must not be shared), so that this
	// process can answer its own pings: a node asking the ipc path its own host serves.
	done := make(chan struct{})
	served := make(chan error, 1)
	go func() { served <- serve(host, servers, done) }()
	stop := func() error {
		close(done)
		err := <-served
		ctx.Term() // waits for every socket, which serve has closed
		return err
	}
	for _, ep := range pings {
		reply, err := ping(ctx, ep, host, timeout)
		if err != nil {
			return errors.Join(err, stop())
		}
		fmt.Printf("pong %s %s\n", ep, reply)
	}
	fmt.Println("ready", host)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case s := <-sig:
		fmt.Println("stopping on", s)
		return stop()
	case err := <-served:
		served <- err
		return errors.Join(err, stop())
	}
}

// serve answers every request with "<host> got <request>" until done is closed.
func serve(host string, servers []*zmq.Socket, done <-chan struct{}) error {
	defer func() {
		for _, s := range servers {
			s.Close()
		}
	}()
	poller := zmq.NewPoller()
	for _, s := range servers {
		poller.Add(s, zmq.POLLIN)
	}
	for {
		select {
		case <-done:
			return nil
		default:
		}
		// Poll in short slices so that done is noticed promptly; 200 ms is well under the
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
