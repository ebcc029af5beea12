package runtimes

import (
	"errors"
	"fmt"
	"strings"
	"sync"
)

// NodeExitedError is a node whose program ended before it was ready. Tail holds its last log
// lines: the reason is almost always there.
type NodeExitedError struct {
	Host     string
	ExitCode int
	Tail     []string
}

func (e *NodeExitedError) Error() string {
	return fmt.Sprintf("node %s exited with code %d before it was ready; its last log lines:\n%s", e.Host, e.ExitCode, Indent(e.Tail))
}

// Indent lays lines out one per line, indented, for an error message.
func Indent(lines []string) string {
	if len(lines) == 0 {
		return "  (no output)"
	}
	return "  " + strings.Join(lines, "\n  ")
}

// RunConcurrently runs every step at once and joins their errors; a failing step does not stop
// the others (their hosts are registered and Close removes them).
func RunConcurrently(steps []func() error) error {
	errs := make([]error, len(steps))
	var wg sync.WaitGroup
	for i, step := range steps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = step()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// LastLines is the last n lines of s.
func LastLines(s string, n int) []string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return nil
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

// ImageBuildError is a failed image build (ldd, reading the files, or the engine's build). It is
// an infrastructure failure: the CLI maps it to exit 3.
type ImageBuildError struct {
	Image string
	// Step is "ldd", "context" or "engine build".
	Step string
	// Log is the failing step's output (the engine's build log).
	Log string
	Err error
}

func (e *ImageBuildError) Error() string {
	msg := fmt.Sprintf("build image %s: %s: %v", e.Image, e.Step, e.Err)
	if strings.TrimSpace(e.Log) != "" {
		msg += "\n--- build log ---\n" + strings.TrimRight(e.Log, "\n")
	}
	return msg
}

func (e *ImageBuildError) Unwrap() error { return e.Err }

// Resource is something a run made that outlives a process unless removed: a container, network,
// image or volume on Docker, a run directory locally. Leak checks list them (harness.Labelled).
type Resource struct {
	// Kind is "container", "network", "image", "volume" or "directory".
	Kind string
	// Name is the container's, network's or volume's name, the image's reference, the
	// directory's path.
	Name string
	// Labels are its io.widetp.* labels (a local run directory's: run and owner).
	Labels map[string]string
}

// Cache says whether r is kept across runs on purpose, keyed by content: an image, or the volume
// that holds a copy of an image's binaries. `widetp clean` removes them; leak checks skip them.
func (r Resource) Cache() bool { return r.Kind == "image" || r.Kind == "volume" }

func (r Resource) String() string {
	return fmt.Sprintf("%s %s of run %s (owner %s)", r.Kind, r.Name, r.Labels[LabelRun], r.Labels[LabelOwner])
}
