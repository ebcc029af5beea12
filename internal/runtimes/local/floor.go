package local

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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

// Held is the local held floor (widetp bench): n processes of `widetp idle`, which says so once it
// is up and then waits until it is stopped, started in parallel, then, once every one is up,
// stopped (SIGTERM) and waited for, as a run's hosts are at its teardown.
func Held(ctx context.Context, n int, opts ...runtimes.Option) (time.Duration, error) {
	cfg, err := runtimes.FloorConfig(opts...)
	if err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return localHeld(cfg, n, nil)
}

// localHeld measures the held floor; allUp, when set, is called once every process has started
// and before any is stopped.
func localHeld(cfg runtimes.Config, n int, allUp func(runID string)) (time.Duration, error) {
	start := time.Now()
	cmds := make([]*exec.Cmd, n)
	// Whatever happens, every process that started is stopped and waited for.
	defer func() {
		for _, cmd := range cmds {
			if cmd != nil && cmd.ProcessState == nil {
				cmd.Process.Kill()
				cmd.Wait()
			}
		}
	}()
	steps := make([]func() error, n)
	for i := range steps {
		steps[i] = func() error {
			cmd := exec.Command(cfg.Binary, "idle")
			cmd.Env = append(os.Environ(), runtimes.EnvRun+"="+cfg.RunID)
			out, err := cmd.StdoutPipe()
			if err != nil {
				return fmt.Errorf("held floor process %d: %w", i, err)
			}
			// Started as a run's hosts are (their spawner's timer slack included).
			if err := spawner.Start(cmd); err != nil {
				return fmt.Errorf("held floor process %d: %w", i, err)
			}
			cmds[i] = cmd
			// Up once it says so: a stop before its signal handler would kill it instead. A
			// program that says nothing within the start bound is killed, which ends the read.
			silent := time.AfterFunc(cfg.StartTimeout, func() { cmd.Process.Kill() })
			line, _ := bufio.NewReader(out).ReadString('\n')
			silent.Stop()
			if strings.TrimSpace(line) != runtimes.IdleLine {
				return fmt.Errorf("held floor process %d: %s %s did not say %q (it said %q)", i, cfg.Binary, "idle", runtimes.IdleLine, line)
			}
			return nil
		}
	}
	if err := runtimes.RunConcurrently(steps); err != nil {
		return 0, err
	}
	if allUp != nil {
		allUp(cfg.RunID)
	}
	stops := make([]func() error, n)
	for i, cmd := range cmds {
		stops[i] = func() error {
			cmd.Process.Signal(syscall.SIGTERM)
			if err := cmd.Wait(); err != nil {
				return fmt.Errorf("held floor process %d: %w", i, err)
			}
			return nil
		}
	}
	err := runtimes.RunConcurrently(stops)
	return time.Since(start), err
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
