package harness

import (
	"context"
	"errors"
	"time"

	"github.com/widetp/widetp/internal/runtimes"
	"github.com/widetp/widetp/internal/runtimes/docker"
	"github.com/widetp/widetp/internal/runtimes/local"
	"github.com/widetp/widetp/internal/runtimes/netcut"
)

// The runtime contract, defined in internal/runtimes and implemented by internal/runtimes/docker
// and internal/runtimes/local; a harness user needs nothing from those packages but what is
// named here.
type (
	// Runtime starts and controls the hosts of one run (see runtimes.Runtime for every method's
	// contract: StartNodes, Endpoints, Stop, Kill, Pause, Unpause, Restart, State, Logs, IPCDir,
	// Inspect, Hosts, Close).
	Runtime = runtimes.Runtime
	// NodeSpec is one host to start.
	NodeSpec = runtimes.NodeSpec
	// Program is a binary a runtime runs on a host.
	Program = runtimes.Program
	// State is a host's state as the runtime sees it.
	State = runtimes.State
	// Store is how the harness reaches the store host.
	Store = runtimes.Store
	// Option changes a runtime's configuration.
	Option = runtimes.Option
	// NodeExitedError is a node whose program ended before it was ready (or settled).
	NodeExitedError = runtimes.NodeExitedError
	// ImageBuildError is an image, or a program's binary, that could not be made ready.
	ImageBuildError = runtimes.ImageBuildError
	// Resource is something a run made that a leak check looks for (Labelled).
	Resource = runtimes.Resource
	// Owner identifies a harness process across PID reuse (the io.widetp.owner label).
	Owner = runtimes.Owner

	// Docker is the Docker runtime: one FROM scratch container per host on a network per run.
	Docker = docker.Docker
	// Image is a built (or found) widetp image.
	Image = docker.Image
	// EngineUnavailableError says no Docker engine answered.
	EngineUnavailableError = docker.EngineUnavailableError
	// Swept counts what a sweep or a clean removed.
	Swept = docker.Swept

	// Local is the local runtime: one process tree per host, each with its own loopback address
	// and ipc directory.
	Local = local.Local
	// LocalInspect is the local runtime's description of a host (its inspect.json artifact).
	LocalInspect = local.LocalInspect
)

// Widetp is the widetp binary: a run's nodes run `widetp node`, its store `widetp store`.
var Widetp = runtimes.Widetp

// Labels every Docker resource and local run directory carries (README, "Runtimes").
const (
	LabelRun     = runtimes.LabelRun
	LabelOwner   = runtimes.LabelOwner
	LabelHost    = runtimes.LabelHost
	LabelContent = runtimes.LabelContent
)

// EnvBinary names the widetp binary a harness run uses when WithBinary does not.
const EnvBinary = runtimes.EnvBinary

// The environment a runtime gives a host's program (internal/nodeapi).
const (
	EnvRun      = runtimes.EnvRun
	EnvHost     = runtimes.EnvHost
	EnvIPCRoot  = runtimes.EnvIPCRoot
	EnvListenIP = runtimes.EnvListenIP
)

// Runtime options.
var (
	// WithRunID sets the run id (default: random). It names the network and labels everything.
	WithRunID = runtimes.WithRunID
	// WithBinary sets the widetp binary the hosts run and the images are built from.
	WithBinary = runtimes.WithBinary
	// WithStartTimeout bounds each step of a node's start (create, start, then its ready line).
	WithStartTimeout = runtimes.WithStartTimeout
	// WithStopGrace sets how long Stop waits between SIGTERM and SIGKILL.
	WithStopGrace = runtimes.WithStopGrace
	// WithOpTimeout bounds each single operation on a started host.
	WithOpTimeout = runtimes.WithOpTimeout
	// WithPingTimeout bounds the engine check.
	WithPingTimeout = runtimes.WithPingTimeout
	// WithBuildTimeout bounds building one image.
	WithBuildTimeout = runtimes.WithBuildTimeout
	// WithLogTail sets how many log lines a failed node's error carries.
	WithLogTail = runtimes.WithLogTail
	// WithProgress receives one line per step (image built, node started).
	WithProgress = runtimes.WithProgress
	// WithoutSweep skips removing the leftovers of dead runs at start.
	WithoutSweep = runtimes.WithoutSweep
	// WithPublishedPorts makes the Docker runtime reach the store through ports published on
	// loopback even where it could reach the run's network directly.
	WithPublishedPorts = runtimes.WithPublishedPorts
)

// NewDocker opens the Docker runtime (docker.New).
func NewDocker(ctx context.Context, opts ...Option) (*Docker, error) { return docker.New(ctx, opts...) }

// NewLocal opens the local runtime (local.New); it is a *Local.
func NewLocal(ctx context.Context, opts ...Option) (Runtime, error) { return local.New(ctx, opts...) }

// StartStore starts the store host alone on rt and returns how the harness reaches its ports.
func StartStore(ctx context.Context, rt Runtime, spec NodeSpec) (Store, error) {
	return runtimes.StartStore(ctx, rt, spec)
}

// BuildImages builds (or finds) the images of programs, as a Docker run does on first use.
func BuildImages(ctx context.Context, programs []Program, opts ...Option) ([]Image, error) {
	return docker.BuildImages(ctx, programs, opts...)
}

// Ping checks, within timeout, that a Docker engine answers.
func Ping(ctx context.Context, timeout time.Duration) error { return docker.Ping(ctx, timeout) }

// Clean removes everything labelled io.widetp.run on the Docker engine, images included.
func Clean(ctx context.Context, opts ...Option) (Swept, error) { return docker.Clean(ctx, opts...) }

// RemoveNetwork removes a run's Docker network called name; one the engine keeps for a stale
// endpoint (moby/moby#42119) is an error that wraps ErrStaleNetwork.
func RemoveNetwork(ctx context.Context, name string) error { return docker.RemoveNetwork(ctx, name) }

// CleanPartitions removes every run's nftables tables on this machine (its partitions, and its
// Docker network kept out of the connection tracker), whoever made them (the Docker and local runtimes remove their own on Close and sweep those of dead runs),
// and returns how many it removed.
func CleanPartitions(ctx context.Context) (int, error) {
	o, err := runtimes.CurrentOwner()
	if err != nil {
		return 0, err
	}
	return netcut.Sweep(ctx, o.Machine, func(runtimes.Owner) bool { return false })
}

// PartitionsAvailable tells whether this process can cut hosts apart (partition steps between
// hosts): nftables' nft command is installed and may be used (root or CAP_NET_ADMIN).
func PartitionsAvailable(ctx context.Context) error { return netcut.Available(ctx) }

// PartitionTable is the nftables table of one run's partitions between hosts.
type PartitionTable struct {
	// Name embeds the run id and its owner's pid and start time: widetp_<run>_<pid>_<start>.
	Name  string
	Owner Owner
}

// PartitionTables lists every run's nftables tables on this machine, its partitions' and its
// untracked network's (none where nft is missing or may not be used).
func PartitionTables(ctx context.Context) ([]PartitionTable, error) {
	o, err := runtimes.CurrentOwner()
	if err != nil {
		return nil, err
	}
	ls, err := netcut.List(ctx, o.Machine)
	out := make([]PartitionTable, len(ls))
	for i, l := range ls {
		out[i] = PartitionTable{Name: l.Family + " " + l.Name, Owner: l.Owner}
	}
	return out, err
}

// CurrentOwner is the Owner of this process.
func CurrentOwner() (Owner, error) { return runtimes.CurrentOwner() }

// ParseOwner reads a LabelOwner value.
func ParseOwner(s string) (Owner, error) { return runtimes.ParseOwner(s) }

// LiveRuntimes counts the runtimes of this process that are open (not yet closed).
func LiveRuntimes() int { return runtimes.LiveRuntimes() }

// CloseAll closes every runtime of this process that is still open (a suite's last teardown).
func CloseAll(ctx context.Context) error { return runtimes.CloseAll(ctx) }

// Infrastructure reports whether err is a failure of the machinery rather than of the scenario (no
// engine, an image that does not build, a network the engine kept): the CLI's exit 3.
func Infrastructure(err error) bool {
	var eu *EngineUnavailableError
	var ib *ImageBuildError
	return errors.As(err, &eu) || errors.As(err, &ib) || errors.Is(err, ErrStaleNetwork)
}

// progressLine writes one "widetp: ..." line to w, under the runtimes' lock.
var progressLine = runtimes.ProgressLine

// lastLines is the last n lines of s.
var lastLines = runtimes.LastLines
