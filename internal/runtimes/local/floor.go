package local

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/widetp/widetp/internal/runtimes"
)

// Floor is the bar a local run is compared with (widetp bench): n processes of the widetp binary
// (`widetp ipcls DIR`, which lists and exits) started in parallel and waited for.
func Floor(ctx context.Context, n int, opts ...runtimes.Option) (time.Duration, error) {
	cfg, err := runtimes.FloorConfig(opts...)
	if err != nil {
		return 0, err
	}
	return localFloor(ctx, cfg, n)
}

func localFloor(ctx context.Context, cfg runtimes.Config, n int) (time.Duration, error) {
	dir, err := os.MkdirTemp("", "widetp-floor-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	start := time.Now()
	steps := make([]func() error, n)
	for i := range steps {
		steps[i] = func() error {
			cmd := exec.CommandContext(ctx, cfg.Binary, "ipcls", filepath.Join(dir))
			cmd.Env = append(os.Environ(), runtimes.EnvRun+"="+cfg.RunID)
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("floor process %d: %w: %s", i, err, out)
			}
			return nil
		}
	}
	err = runtimes.RunConcurrently(steps)
	return time.Since(start), err
}
