// Command hostprobe is the harness's own test node, for the specs of both runtimes (the runtime
// conformance specs, the Docker specs, the leak spec and the benchmarks). Like simnode, it learns
// where it is from the runtime's environment alone, so one command line means the same on every
// runtime:
//
//   - WIDETP_HOST is its host name (default os.Hostname());
//   - an ipc:///path lives under WIDETP_IPC_ROOT (simnode/lookup.Endpoint: the root stands for "/");
//   - tcp://*:port binds WIDETP_LISTEN_IP (default 0.0.0.0);
//   - a peer's name resolves through WIDETP_HOSTS first, then DNS (simnode.ParseHosts).
//
// It uses libzmq (internal/zmq, loaded at run time), as simnode does. It can start children that each lead a process
// group of their own (as simnode's command trees do) and an orphan that does not die with its
// parent, so that the specs can check that a runtime reaches every process of a host.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	zmq "github.com/widetp/widetp/internal/zmq"

	"github.com/widetp/widetp/simnode"
	"github.com/widetp/widetp/simnode/lookup"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(s string) error { *l = append(*l, s); return nil }

// env is what the runtime told this host.
type env struct {
	host, root, listen string
	hosts              map[string]string
}

func main() {
	var binds, pings, gets, childBinds list
	flag.Var(&binds, "bind", "endpoint to bind a REP socket at (repeatable)")
	flag.Var(&pings, "ping", "endpoint of a peer's REP socket to ask once (repeatable)")
	flag.Var(&gets, "get", "http:// URL to GET once, its host resolved like a peer's (repeatable)")
	flag.Var(&childBinds, "child-bind", "start a child, in a process group of its own, that binds this endpoint (repeatable)")
	printEnv := flag.String("print-env", "", "comma-separated variables to print as NAME=value at start")
	printFile := flag.String("print-file", "", "comma-separated files to print as file PATH=content (trimmed) at start")
	fail := flag.String("fail", "", "after binding, print this to stderr and exit 3 (an early crash)")
	orphan := flag.Bool("orphan", false, "start a process that does not die with this one (no Pdeathsig) and is re-parented at once")
	boot := flag.Bool("boot", false, "count the boot-N files in /tmp and add the next one: a fresh /tmp shows boot-1 only")
	// A peer may start later than us; libzmq reconnects until then. 20 s bounds a peer that never comes.
	timeout := flag.Duration("timeout", 20*time.Second, "bound on each ping and get")
	child := flag.Bool("child", false, "internal: run as a child that serves its -bind endpoints")
	hold := flag.Bool("hold", false, "internal: run as the orphan, which only waits to be killed")
	launch := flag.Bool("launch-orphan", false, "internal: start the orphan, print its pid and exit")
	flag.Parse()

	e, err := readEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "hostprobe:", err)
		os.Exit(2)
	}
	switch {
	case *hold:
		holdForever()
	case *launch:
		os.Exit(launchOrphan())
	}
	for _, name := range strings.Split(*printEnv, ",") {
		if name != "" {
			fmt.Printf("env %s=%s\n", name, os.Getenv(name))
		}
	}
	for _, path := range strings.Split(*printFile, ",") {
		if path != "" {
			b, err := os.ReadFile(path)
			if err != nil {
				fmt.Fprintln(os.Stderr, "hostprobe:", err)
				os.Exit(3)
			}
			fmt.Printf("file %s=%s\n", path, strings.TrimSpace(string(b)))
		}
	}
	if *boot {
		n, err := bootMark(e)
		if err != nil {
			fmt.Fprintln(os.Stderr, "hostprobe:", err)
			os.Exit(3)
		}
		fmt.Println("boot", n)
	}
	if err := run(e, binds, pings, gets, childBinds, *fail, *orphan, *child, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "hostprobe:", err)
		os.Exit(3)
	}
}

func readEnv() (env, error) {
	e := env{host: os.Getenv(simnode.EnvHost), root: os.Getenv(simnode.EnvIPCRoot), listen: os.Getenv(simnode.EnvListenIP)}
	if e.host == "" {
		h, err := os.Hostname()
		if err != nil {
			return e, err
		}
		e.host = h
	}
	if e.listen == "" {
		e.listen = "0.0.0.0"
	}
	hosts, err := simnode.ParseHosts(os.Getenv(simnode.EnvHosts))
	if err != nil {
		return e, err
	}
	e.hosts = hosts
	return e, nil
}

// endpoint maps an endpoint as written on the command line to the one this host really uses.
func (e env) endpoint(ep string, bind bool) (string, error) {
	switch {
	case strings.HasPrefix(ep, "ipc://"):
		real, _, err := lookup.Endpoint(ep, e.root)
		return real, err
	case strings.HasPrefix(ep, "tcp://"):
		host, port, err := net.SplitHostPort(strings.TrimPrefix(ep, "tcp://"))
		if err != nil {
			return "", fmt.Errorf("endpoint %q: %w", ep, err)
		}
		if bind && host == "*" {
			host = e.listen
		} else {
			host = e.resolve(host)
		}
		return "tcp://" + net.JoinHostPort(host, port), nil
	}
	return "", fmt.Errorf("endpoint %q: want ipc:// or tcp://", ep)
}

func (e env) resolve(host string) string {
	if ip, ok := e.hosts[host]; ok {
		return ip
	}
	return host
}

// bootMark adds boot-<n+1> to the host's /tmp, n being how many boot files are there already.
func bootMark(e env) (int, error) {
	// "/tmp" under the root, or the real /tmp where there is none (a container).
	dir := filepath.Join(e.root, "/tmp")
	m, err := filepath.Glob(filepath.Join(dir, "boot-*"))
	if err != nil {
		return 0, err
	}
	n := len(m) + 1
	return n, os.WriteFile(filepath.Join(dir, fmt.Sprintf("boot-%d", n)), nil, 0o644)
}

func run(e env, binds, pings, gets, childBinds []string, fail string, orphan, child bool, timeout time.Duration) error {
	// Subscribed before anything else: a SIGTERM right after the ready line must be handled
	// ("stopping on"), not take the default action.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
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
		real, err := e.endpoint(ep, true)
		if err != nil {
			return err
		}
		s, err := ctx.NewSocket(zmq.REP)
		if err != nil {
			closeAll()
			ctx.Term()
			return err
		}
		servers = append(servers, s)
		s.SetLinger(0)
		if err := s.Bind(real); err != nil {
			closeAll()
			ctx.Term()
			return fmt.Errorf("bind %s (%s): %w", ep, real, err)
		}
		fmt.Println("bound", ep)
	}
	for i := 0; i < 3; i++ {
		fmt.Println("log line", i)
	}
	if fail != "" {
		closeAll()
		ctx.Term()
		return errors.New(fail)
	}
	name := e.host
	if child {
		name += "/child"
	}
	done := make(chan struct{})
	served := make(chan error, 1)
	go func() { served <- serve(name, servers, done) }()
	stop := func() error {
		close(done)
		err := <-served
		ctx.Term()
		return err
	}
	if child {
		// The parent reads this line before it says ready: the child's sockets are bound.
		fmt.Println("child up", os.Getpid())
		return waitSignal(sig, stop, served)
	}
	for _, ep := range childBinds {
		pid, err := startChild(ep)
		if err != nil {
			return errors.Join(err, stop())
		}
		fmt.Println("child", pid, "bound", ep)
	}
	if orphan {
		pid, err := startOrphan()
		if err != nil {
			return errors.Join(err, stop())
		}
		fmt.Println("orphan", pid)
	}
	for _, ep := range pings {
		reply, err := ping(ctx, e, ep, timeout)
		if err != nil {
			return errors.Join(err, stop())
		}
		fmt.Printf("pong %s %s\n", ep, reply)
	}
	for _, u := range gets {
		code, err := get(e, u, timeout)
		if err != nil {
			return errors.Join(err, stop())
		}
		fmt.Printf("got %s %d\n", u, code)
	}
	fmt.Println("ready", e.host)
	return waitSignal(sig, stop, served)
}

func waitSignal(sig chan os.Signal, stop func() error, served chan error) error {
	select {
	case s := <-sig:
		fmt.Println("stopping on", s)
		return stop()
	case err := <-served:
		served <- err
		return errors.Join(err, stop())
	}
}

// startChild starts a copy of this program that binds ep, in a process group of its own and
// dying with this process, the way simnode starts a command's process tree.
func startChild(ep string) (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(exe, "-child", "-bind", ep)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start child for %s: %w", ep, err)
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "child up ") {
			// The rest of its output goes where ours goes.
			go func() {
				for sc.Scan() {
					fmt.Println(sc.Text())
				}
			}()
			go cmd.Wait()
			return cmd.Process.Pid, nil
		}
		fmt.Println(sc.Text())
	}
	cmd.Wait()
	return 0, fmt.Errorf("child for %s ended before it was up", ep)
}

// startOrphan starts a launcher that starts the orphan and exits: the orphan is re-parented away
// from this process at once and, without Pdeathsig, nothing but its session ties it to the host.
func startOrphan() (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	out, err := exec.Command(exe, "-launch-orphan").Output()
	if err != nil {
		return 0, fmt.Errorf("launch orphan: %w", err)
	}
	var pid int
	if _, err := fmt.Sscanf(string(out), "%d", &pid); err != nil {
		return 0, fmt.Errorf("launch orphan: read its pid from %q: %w", out, err)
	}
	return pid, nil
}

func launchOrphan() int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cmd := exec.Command(exe, "-hold")
	// A group of its own, no Pdeathsig: only the runtime's hold on the host's session reaches it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(cmd.Process.Pid)
	return 0
}

// holdForever is the orphan: it ignores SIGTERM, as a wedged process would, and ends only on SIGKILL.
func holdForever() {
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
	for {
		time.Sleep(time.Hour)
	}
}

// serve answers every request with "<name> got <request>" until done is closed.
func serve(name string, servers []*zmq.Socket, done <-chan struct{}) error {
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
		// Poll in short slices so that done is noticed promptly; 200 ms is well under any
		// runtime's stop grace period.
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
			if _, err := p.Socket.Send(name+" got "+msg, 0); err != nil {
				return fmt.Errorf("reply: %w", err)
			}
		}
	}
}

func ping(ctx *zmq.Context, e env, ep string, timeout time.Duration) (string, error) {
	real, err := e.endpoint(ep, false)
	if err != nil {
		return "", err
	}
	s, err := ctx.NewSocket(zmq.REQ)
	if err != nil {
		return "", err
	}
	defer s.Close()
	s.SetLinger(0)
	s.SetRcvtimeo(timeout)
	s.SetSndtimeo(timeout)
	if err := s.Connect(real); err != nil {
		return "", fmt.Errorf("connect %s (%s): %w", ep, real, err)
	}
	if _, err := s.Send("ping from "+e.host, 0); err != nil {
		return "", fmt.Errorf("send to %s: %w", ep, err)
	}
	reply, err := s.Recv(0)
	if err != nil {
		return "", fmt.Errorf("no reply from %s within %s: %w", ep, timeout, err)
	}
	return reply, nil
}

// get fetches u, dialing its host through the host map.
func get(e env, u string, timeout time.Duration) (int, error) {
	var d net.Dialer
	hc := &http.Client{Timeout: timeout, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			return d.DialContext(ctx, network, net.JoinHostPort(e.resolve(host), port))
		},
	}}
	resp, err := hc.Get(u)
	if err != nil {
		return 0, fmt.Errorf("get %s: %w", u, err)
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
