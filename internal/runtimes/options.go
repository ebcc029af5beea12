package runtimes

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sync"
	"sync/atomic"
	"time"
)

// Config is a runtime's configuration: defaults from DefaultConfig, changed by Options, checked by
// Validate before anything starts. NewConfig does all three.
type Config struct {
	RunID string
	// binary is the widetp binary the hosts run (WithBinary, else $WIDETP_BIN); validate makes it
	// absolute.
	Binary string
	// startTimeout bounds each step of a node's start on its own: creating it and starting it (each
	// plus the engine's queue of the other hosts of the round, on Docker), and from its own start to
	// its ready line. 60 s: a cached scratch
	// image starts in well under a second, but 2 shared cores under a parallel suite and
	// fuse-overlayfs can stretch that a lot, and a hung start must still end.
	StartTimeout time.Duration
	// stopGrace is how long Stop waits after SIGTERM before SIGKILL. 5 s: a node's processes end on
	// SIGTERM in milliseconds; longer only delays teardown of a wedged one.
	StopGrace time.Duration
	// opTimeout bounds each single operation on a started host (stop, kill, pause, logs, listing,
	// inspect, removal) when the caller's context has no nearer deadline. 60 s: an engine answers
	// in milliseconds and a stop takes at most stopGrace (validate keeps it under this); beyond
	// that the engine is wedged and the caller must hear so.
	OpTimeout time.Duration
	// pingTimeout bounds the engine check. 5 s: a local engine answers in milliseconds; a wedged
	// socket must not hang the CLI.
	PingTimeout time.Duration
	// buildTimeout bounds building one image: hashing the binary and its libraries, and the
	// engine's build of a FROM scratch image from them (a few seconds; minutes on a wedged disk).
	BuildTimeout time.Duration
	// logTail is how many of a failed node's last log lines an error carries: enough for a Go
	// panic's header or a Python-style exception, short enough to read.
	LogTail int
	// tmpfsSize caps each host's private /tmp. 64 MiB: it holds a few ipc socket files.
	TmpfsSize string
	Progress  io.Writer
	Sweep     bool
	// Publish makes the Docker runtime publish the hosts' Ports on loopback even when the harness
	// reaches the run's network directly (WithPublishedPorts).
	Publish bool
}

func DefaultConfig() Config {
	return Config{
		StartTimeout: 60 * time.Second,
		StopGrace:    5 * time.Second,
		OpTimeout:    60 * time.Second,
		PingTimeout:  5 * time.Second,
		BuildTimeout: 10 * time.Minute,
		LogTail:      20,
		TmpfsSize:    "64m",
		Progress:     io.Discard,
		Sweep:        true,
	}
}

// Option changes a runtime's configuration.
type Option func(*Config)

// WithRunID sets the run id (default: random). It names the network and labels everything.
func WithRunID(id string) Option { return func(c *Config) { c.RunID = id } }

// WithBinary sets the widetp binary the hosts run (`widetp node`, `widetp store`) and the images
// are built from. The widetp command passes os.Executable(); without it the harness uses
// $WIDETP_BIN, and with neither a runtime does not start.
func WithBinary(path string) Option { return func(c *Config) { c.Binary = path } }

// WithStartTimeout bounds each step of a node's start (create, start, ready line from its own start).
func WithStartTimeout(d time.Duration) Option { return func(c *Config) { c.StartTimeout = d } }

// WithStopGrace sets how long Stop waits between SIGTERM and SIGKILL.
func WithStopGrace(d time.Duration) Option { return func(c *Config) { c.StopGrace = d } }

// WithOpTimeout bounds each single operation on a started host.
func WithOpTimeout(d time.Duration) Option { return func(c *Config) { c.OpTimeout = d } }

// WithPingTimeout bounds the engine check.
func WithPingTimeout(d time.Duration) Option { return func(c *Config) { c.PingTimeout = d } }

// WithBuildTimeout bounds building one image.
func WithBuildTimeout(d time.Duration) Option { return func(c *Config) { c.BuildTimeout = d } }

// WithLogTail sets how many log lines a failed node's error carries.
func WithLogTail(n int) Option { return func(c *Config) { c.LogTail = n } }

// WithProgress receives one line per step (image built, node started); the CLI passes stderr.
func WithProgress(w io.Writer) Option { return func(c *Config) { c.Progress = w } }

// WithoutSweep skips removing the leftovers of dead runs at start.
func WithoutSweep() Option { return func(c *Config) { c.Sweep = false } }

// WithPublishedPorts makes the Docker runtime reach the hosts' Ports through ports published on
// loopback, as it does when the harness does not share a network namespace with the run's bridge
// (a rootless engine, Docker Desktop, a remote engine), even when it could reach them directly:
// for a machine whose firewall stops the host from opening connections to its bridges.
func WithPublishedPorts() Option { return func(c *Config) { c.Publish = true } }

var runIDPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,39}$`) })

func (c *Config) Validate() error {
	var errs []error
	if c.RunID == "" {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			errs = append(errs, fmt.Errorf("make a run id: %w", err))
		}
		c.RunID = hex.EncodeToString(b[:])
	}
	if !runIDPattern().MatchString(c.RunID) {
		errs = append(errs, fmt.Errorf("run id %q: want [a-z0-9-], at most 40 (it names Docker resources)", c.RunID))
	}
	for name, d := range map[string]time.Duration{"start timeout": c.StartTimeout, "stop grace": c.StopGrace, "ping timeout": c.PingTimeout, "op timeout": c.OpTimeout, "build timeout": c.BuildTimeout} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s %s: must be positive", name, d))
		}
	}
	if c.OpTimeout > 0 && c.StopGrace >= c.OpTimeout {
		errs = append(errs, fmt.Errorf("stop grace %s: must be shorter than the op timeout %s", c.StopGrace, c.OpTimeout))
	}
	if c.LogTail <= 0 {
		errs = append(errs, fmt.Errorf("log tail %d: must be positive", c.LogTail))
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	bin, err := resolveBinary(c.Binary)
	if err != nil {
		errs = append(errs, err)
	}
	c.Binary = bin
	return errors.Join(errs...)
}

// NewConfig is the default configuration changed by opts, not yet validated.
func NewConfig(opts ...Option) Config {
	cfg := DefaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

// floorSeq numbers this process's floor measurements (their run ids), whichever runtime's.
var floorSeq atomic.Int64

// FloorConfig is the validated config of one floor measurement (widetp bench): opts, with a run
// id of its own ("floor-<pid>-<n>") so that its resources carry labels the sweep knows.
func FloorConfig(opts ...Option) (Config, error) {
	cfg := NewConfig(opts...)
	cfg.RunID = fmt.Sprintf("floor-%d-%d", os.Getpid(), floorSeq.Add(1))
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("floor: %w", err)
	}
	return cfg, nil
}
