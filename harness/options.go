package harness

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"time"
)

// config is a runtime's configuration: defaults from defaultConfig, changed by Options, checked by
// validate before anything starts.
type config struct {
	runID string
	// binary is the widetp binary the hosts run (WithBinary, else $WIDETP_BIN); validate makes it
	// absolute.
	binary string
	// startTimeout bounds each node's start, from create to its ready line. 60 s: a cached scratch
	// image starts in well under a second, but 2 shared cores under a parallel suite and
	// fuse-overlayfs can stretch that a lot, and a hung start must still end.
	startTimeout time.Duration
	// stopGrace is how long Stop waits after SIGTERM before SIGKILL. 5 s: a node's processes end on
	// SIGTERM in milliseconds; longer only delays teardown of a wedged one.
	stopGrace time.Duration
	// opTimeout bounds each single operation on a started host (stop, kill, pause, logs, listing,
	// inspect, removal) when the caller's context has no nearer deadline. 60 s: an engine answers
	// in milliseconds and a stop takes at most stopGrace (validate keeps it under this); beyond
	// that the engine is wedged and the caller must hear so.
	opTimeout time.Duration
	// pingTimeout bounds the engine check. 5 s: a local engine answers in milliseconds; a wedged
	// socket must not hang the CLI.
	pingTimeout time.Duration
	// buildTimeout bounds building one image: hashing the binary and its libraries, and the
	// engine's build of a FROM scratch image from them (a few seconds; minutes on a wedged disk).
	buildTimeout time.Duration
	// logTail is how many of a failed node's last log lines an error carries: enough for a Go
	// panic's header or a Python-style exception, short enough to read.
	logTail int
	// tmpfsSize caps each host's private /tmp. 64 MiB: it holds a few ipc socket files.
	tmpfsSize string
	progress  io.Writer
	sweep     bool
}

func defaultConfig() config {
	return config{
		startTimeout: 60 * time.Second,
		stopGrace:    5 * time.Second,
		opTimeout:    60 * time.Second,
		pingTimeout:  5 * time.Second,
		buildTimeout: 10 * time.Minute,
		logTail:      20,
		tmpfsSize:    "64m",
		progress:     io.Discard,
		sweep:        true,
	}
}

// Option changes a runtime's configuration.
type Option func(*config)

// WithRunID sets the run id (default: random). It names the network and labels everything.
func WithRunID(id string) Option { return func(c *config) { c.runID = id } }

// WithBinary sets the widetp binary the hosts run (`widetp node`, `widetp store`) and the images
// are built from. The widetp command passes os.Executable(); without it the harness uses
// $WIDETP_BIN, and with neither a runtime does not start.
func WithBinary(path string) Option { return func(c *config) { c.binary = path } }

// WithStartTimeout bounds each node's start.
func WithStartTimeout(d time.Duration) Option { return func(c *config) { c.startTimeout = d } }

// WithStopGrace sets how long Stop waits between SIGTERM and SIGKILL.
func WithStopGrace(d time.Duration) Option { return func(c *config) { c.stopGrace = d } }

// WithOpTimeout bounds each single operation on a started host.
func WithOpTimeout(d time.Duration) Option { return func(c *config) { c.opTimeout = d } }

// WithPingTimeout bounds the engine check.
func WithPingTimeout(d time.Duration) Option { return func(c *config) { c.pingTimeout = d } }

// WithBuildTimeout bounds building one image.
func WithBuildTimeout(d time.Duration) Option { return func(c *config) { c.buildTimeout = d } }

// WithLogTail sets how many log lines a failed node's error carries.
func WithLogTail(n int) Option { return func(c *config) { c.logTail = n } }

// WithProgress receives one line per step (image built, node started); the CLI passes stderr.
func WithProgress(w io.Writer) Option { return func(c *config) { c.progress = w } }

// WithoutSweep skips removing the leftovers of dead runs at start.
func WithoutSweep() Option { return func(c *config) { c.sweep = false } }

var runIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,39}$`)

func (c *config) validate() error {
	var errs []error
	if c.runID == "" {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			errs = append(errs, fmt.Errorf("make a run id: %w", err))
		}
		c.runID = hex.EncodeToString(b[:])
	}
	if !runIDPattern.MatchString(c.runID) {
		errs = append(errs, fmt.Errorf("run id %q: want [a-z0-9-], at most 40 (it names Docker resources)", c.runID))
	}
	for name, d := range map[string]time.Duration{"start timeout": c.startTimeout, "stop grace": c.stopGrace, "ping timeout": c.pingTimeout, "op timeout": c.opTimeout, "build timeout": c.buildTimeout} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s %s: must be positive", name, d))
		}
	}
	if c.opTimeout > 0 && c.stopGrace >= c.opTimeout {
		errs = append(errs, fmt.Errorf("stop grace %s: must be shorter than the op timeout %s", c.stopGrace, c.opTimeout))
	}
	if c.logTail <= 0 {
		errs = append(errs, fmt.Errorf("log tail %d: must be positive", c.logTail))
	}
	if c.progress == nil {
		c.progress = io.Discard
	}
	bin, err := resolveBinary(c.binary)
	if err != nil {
		errs = append(errs, err)
	}
	c.binary = bin
	return errors.Join(errs...)
}
