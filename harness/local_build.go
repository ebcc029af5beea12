//go:build linux

package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// localBinary is a program as the local runtime runs it: one immutable file per content hash in
// the user's cache (<cache>/widetp/bin/<name>-<hash prefix>), shared by every run and process.
// A host execs that file, never a build output: a later build that replaced a file in place
// could not (ETXTBSY) while a host runs it, or would change a running host's binary under it.
type localBinary struct {
	Name string
	Path string
	// Hash is the sha256 of the binary, as hashContext computes it (its name, mode and bytes).
	Hash string
	// Built is false when a file with this hash was in the cache already.
	Built bool
}

// binaryCache builds each program at most once per process: concurrent starts of one program
// wait for the same build, and later runtimes of the process reuse it (a test suite creates
// dozens). Sources do not change under a running harness.
type binaryCache struct {
	mu      sync.Mutex
	entries map[string]*binaryOnce
}

type binaryOnce struct {
	done chan struct{}
	bin  localBinary
	err  error
}

var localBinaries = &binaryCache{entries: map[string]*binaryOnce{}}

// get returns p built from the module at root. A failed build is not kept: the next caller tries
// again (after a fix, or when the failure was a cancelled context).
func (c *binaryCache) get(ctx context.Context, root string, p Program, onBuild func(localBinary)) (localBinary, error) {
	key := strings.Join([]string{root, p.Package, p.Name, strconv.FormatBool(p.Cgo)}, "\x00")
	c.mu.Lock()
	o, ok := c.entries[key]
	if !ok {
		o = &binaryOnce{done: make(chan struct{})}
		c.entries[key] = o
		c.mu.Unlock()
		o.bin, o.err = buildLocal(ctx, root, p)
		if o.err != nil {
			c.mu.Lock()
			delete(c.entries, key)
			c.mu.Unlock()
		} else if o.bin.Built && onBuild != nil {
			onBuild(o.bin)
		}
		close(o.done)
	} else {
		c.mu.Unlock()
	}
	select {
	case <-o.done:
		if o.err != nil && ok && ctx.Err() == nil && (errors.Is(o.err, context.Canceled) || errors.Is(o.err, context.DeadlineExceeded)) {
			// Another caller's context ended its build; ours has not.
			return c.get(ctx, root, p, onBuild)
		}
		return o.bin, o.err
	case <-ctx.Done():
		return localBinary{}, fmt.Errorf("wait for the build of %s: %w", p.Name, ctx.Err())
	}
}

// buildLocal compiles p with the image builder's goBuild (same flags: -trimpath, no VCS stamp, so
// the bytes depend on the sources alone and the hash finds the cached file) into a scratch
// directory of the cache, hashes it with hashContext, and moves it to its hash's name unless a
// file has that name already. The scratch directory is on the cache's file system, so the move is
// an atomic rename: a parallel process that builds the same program renames the same bytes.
func buildLocal(ctx context.Context, root string, p Program) (localBinary, error) {
	if err := p.validate(); err != nil {
		return localBinary{}, err
	}
	dir, err := localCacheDir()
	if err != nil {
		return localBinary{}, &ImageBuildError{Image: p.Name, Step: "cache", Err: err}
	}
	work, err := os.MkdirTemp(dir, ".build-"+p.Name+"-")
	if err != nil {
		return localBinary{}, &ImageBuildError{Image: p.Name, Step: "cache", Err: err}
	}
	defer os.RemoveAll(work)
	out := filepath.Join(work, p.Name)
	if err := goBuild(ctx, root, p.Package, out, p.Cgo); err != nil {
		return localBinary{}, err
	}
	hash, err := hashContext(work)
	if err != nil {
		return localBinary{}, &ImageBuildError{Image: p.Name, Step: "hash", Err: err}
	}
	bin := localBinary{Name: p.Name, Path: filepath.Join(dir, p.Name+"-"+hash[:hashLen]), Hash: hash}
	if _, err := os.Stat(bin.Path); err == nil {
		return bin, nil
	}
	if err := os.Rename(out, bin.Path); err != nil {
		return localBinary{}, &ImageBuildError{Image: p.Name, Step: "cache", Err: err}
	}
	bin.Built = true
	return bin, nil
}

// localCacheDir is where built programs live: the user's cache directory ($XDG_CACHE_HOME or
// ~/.cache), or, without a home, a per-user directory under the temp directory.
func localCacheDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		base = filepath.Join(os.TempDir(), fmt.Sprintf("widetp-cache-%d", os.Getuid()))
	} else {
		base = filepath.Join(base, "widetp")
	}
	dir := filepath.Join(base, "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("make the program cache %s: %w", dir, err)
	}
	return dir, nil
}
