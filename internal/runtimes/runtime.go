// Package runtimes is the contract between the harness and the runtimes that start its hosts, as
// kind's providers are to its cluster package: the Runtime interface, the NodeSpec of one host, the
// Program it runs, the options every runtime takes, the labels and owners that tell a run's
// leftovers apart, and the helpers both runtimes share ($(NAME) expansion, file digests). The
// runtimes live in packages of their own (internal/runtimes/docker, internal/runtimes/local); the
// harness package registers them (harness.Runtimes) and is what users import.
package runtimes

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/widetp/widetp/harness/ipcdir"
	"github.com/widetp/widetp/internal/nodeapi"
)

// Runtime starts and controls the hosts of one run. Implementations: Docker (NewDocker) and Local
// (NewLocal); the same conformance specs run over both. Every method takes a context and is bounded by
// it (and by the runtime's own timeouts); a method on an unknown host returns an error naming it.
type Runtime interface {
	// Name is "docker" or "local", as the report's runtime field.
	Name() string
	// RunID is the value of the io.widetp.run label this run puts on what it makes.
	RunID() string
	// StartNodes starts the hosts concurrently, in one round, and returns once each is ready or
	// has failed. Hosts started in one call know each other by name (a node may come up before
	// the store it dials, and waits for it). The error joins every host's failure; the hosts that
	// did start stay up (Close removes them).
	StartNodes(ctx context.Context, specs ...NodeSpec) error
	// Endpoints maps each of a started host's Ports to the host:port the harness dials.
	Endpoints(ctx context.Context, host string) (map[int]string, error)
	// Stop asks a host's program to end (SIGTERM) and kills it after the runtime's grace period.
	Stop(ctx context.Context, host string) error
	// Kill sends a signal ("SIGKILL", "SIGTERM", ...) to a host's program.
	Kill(ctx context.Context, host, signal string) error
	// Pause freezes every process of a host (the cgroup freezer): peers see a silent host.
	Pause(ctx context.Context, host string) error
	Unpause(ctx context.Context, host string) error
	// Restart stops and starts a host again and waits for it to be ready, as StartNodes does. Its
	// private /tmp starts empty, as after a reboot.
	Restart(ctx context.Context, host string) error
	// State reports whether a host runs and how its program exited.
	State(ctx context.Context, host string) (State, error)
	// Logs is a host's program output so far, stdout and stderr interleaved.
	Logs(ctx context.Context, host string) ([]byte, error)
	// IPCDir lists a host's private ipc directory (its /tmp).
	IPCDir(ctx context.Context, host string) (ipcdir.Listing, error)
	// Inspect is the runtime's description of a host as JSON (docker inspect), for artifacts.
	Inspect(ctx context.Context, host string) ([]byte, error)
	// Exec runs the widetp binary with args as a program of a running host — in its container
	// (docker exec), or locally with the host's environment, so under its private /tmp — and
	// returns its standard output. An exit status other than 0 is an error carrying the program's
	// standard error. The fault timeline reaches a host's node program this way
	// (`widetp node ctl`).
	Exec(ctx context.Context, host string, args ...string) ([]byte, error)
	// Partition drops every packet between hosts a and hosts b, both ways, until Heal(name): an
	// nftables chain on the bridge's forward path on Docker, on loopback input locally (a local
	// host dials from its own address). A host restarted meanwhile stays cut. It fails, naming
	// what is missing, where nftables cannot be used (no nft, not root); Close removes every cut.
	Partition(ctx context.Context, name string, a, b []string) error
	// Heal ends partition name.
	Heal(ctx context.Context, name string) error
	// Hosts lists every host started so far, the store first, in start order.
	Hosts() []string
	// Close removes everything the run made (hosts, network, scratch files); images stay, they
	// are a cache. It joins every failure and may be called again after one.
	Close(ctx context.Context) error
}

// NodeSpec is one host to start.
type NodeSpec struct {
	// Host is the host name: a DNS label, unique in the run. Peers reach the host by it.
	Host    string
	Program Program
	// Args follow the program's name on its command line. $(NAME) expands to the host's variable
	// NAME and $$ is a literal $ (Kubernetes' rule), so a listen address the harness cannot know
	// in advance reads "$(WIDETP_LISTEN_IP):8080"; an unknown NAME fails the start.
	Args []string
	// Env is the program's environment, on top of what the runtime sets (EnvHost, EnvListenIP,
	// and EnvIPCRoot where ipc paths need a prefix); a key set here wins.
	Env map[string]string
	// Ready, if set, matches a line the program prints once it is up; StartNodes waits for it. A
	// program that exits first fails the start with its last log lines.
	Ready *regexp.Regexp
	// Ports are TCP ports of the program that the harness itself must reach (the store's HTTP
	// endpoints); peers reach every port by host name anyway.
	Ports []int
}

// StartStore starts the store host alone on rt and returns how the harness reaches its ports
// (StartNodes, then Endpoints). A cluster starts its store with its nodes instead.
func StartStore(ctx context.Context, rt Runtime, spec NodeSpec) (Store, error) {
	if err := rt.StartNodes(ctx, spec); err != nil {
		return Store{}, fmt.Errorf("start store: %w", err)
	}
	addrs, err := rt.Endpoints(ctx, spec.Host)
	if err != nil {
		return Store{}, fmt.Errorf("start store: %w", err)
	}
	return Store{Host: spec.Host, Addrs: addrs}, nil
}

// Store is how the harness reaches the store host.
type Store struct {
	Host string
	// Addrs maps each of the host's Ports to the host:port the harness dials (its address on the
	// run's network, or a port published on loopback).
	Addrs map[int]string
}

// State is a host's state as the runtime sees it.
type State struct {
	// Status is the engine's word: "created", "running", "paused", "restarting", "exited", "dead".
	Status  string
	Running bool
	Paused  bool
	// ExitCode is the program's exit status; 128+N when signal N ended it (the shell's
	// convention, which Docker follows), so every runtime reports a SIGKILL as 137.
	ExitCode int
	// OOMKilled is set when the kernel killed the program for memory.
	OOMKilled bool
}

// The environment a runtime gives a host's program (the node contract, internal/nodeapi).
const (
	// EnvRun is the run id (the io.widetp.run label), on every host and inherited by every
	// process it starts.
	EnvRun = nodeapi.EnvRun
	// EnvHost is the host's name.
	EnvHost = nodeapi.EnvHost
	// EnvIPCRoot prefixes every ipc:// path, where hosts share one file system (local).
	EnvIPCRoot = nodeapi.EnvIPCRoot
	// EnvListenIP is the address the host's listeners bind.
	EnvListenIP = nodeapi.EnvListenIP
)

func (s NodeSpec) Validate() error {
	if !nodeapi.ValidHost(s.Host) {
		return fmt.Errorf("node host %q: want %s: it is the hostname peers resolve", s.Host, nodeapi.HostRule)
	}
	if err := s.Program.Validate(); err != nil {
		return fmt.Errorf("node %s: %w", s.Host, err)
	}
	for _, p := range s.Ports {
		if p <= 0 || p > 65535 {
			return fmt.Errorf("node %s: port %d out of range", s.Host, p)
		}
	}
	return nil
}

// ErrStaleNetwork is a run's network that the engine will not remove although no container is
// attached to it any more: it kept the endpoint of a removed container (moby/moby#42119, seen at
// 33 and 65 containers on Docker 20.10), and only a restart of the daemon (which then logs
// "Fixing inconsistent endpoint_cnt") releases it.
var ErrStaleNetwork = errors.New("no container is attached to it: the engine kept the endpoint of a removed container (moby/moby#42119); restart the Docker daemon, then `widetp clean` removes the network")
