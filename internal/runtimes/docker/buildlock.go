package docker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// lockBuild serialises the engine builds of one image tag across the processes of this machine
// (`ginkgo -p` starts several, all wanting the same images): the second waits, then finds the tag.
// Without it both build, and the loser's image is left dangling. An flock is released by the
// kernel when its holder dies, so a killed build never wedges the next.
func lockBuild(ctx context.Context, ref string) (unlock func(), err error) {
	name := "widetp-build-" + strings.NewReplacer(":", "-", "/", "-").Replace(ref) + ".lock"
	path := filepath.Join(os.TempDir(), name)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock the build of %s: %w", ref, err)
	}
	got := make(chan error, 1)
	go func() { got <- syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }()
	release := func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}
	select {
	case err := <-got:
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock the build of %s: %w", ref, err)
		}
		return release, nil
	case <-ctx.Done():
		// The flock call cannot be interrupted: let it finish in the background and release.
		go func() {
			if <-got == nil {
				release()
				return
			}
			f.Close()
		}()
		return nil, fmt.Errorf("wait for another process's build of %s: %w", ref, ctx.Err())
	}
}
