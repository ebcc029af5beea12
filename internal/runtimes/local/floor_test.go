package local

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/widetp/widetp/internal/procfs"
	"github.com/widetp/widetp/internal/runtimes"
	"github.com/widetp/widetp/internal/spawn"
	"github.com/widetp/widetp/internal/testbin"
)

// The local held floor keeps every process up until the last one has started, then stops them
// all and leaves none behind.
func TestHeldFloorKeepsEveryProcessUpUntilTheLast(t *testing.T) {
	bin, err := testbin.Widetp()
	if err != nil {
		t.Fatal(err)
	}
	runID := fmt.Sprintf("floortest%d", os.Getpid())
	cfg, err := runtimes.FloorConfig(runtimes.WithBinary(bin), runtimes.WithRunID(runID))
	if err != nil {
		t.Fatal(err)
	}
	const n = 4
	up := -1
	var slack []string
	if _, err := localHeld(cfg, n, func(id string) {
		pids := idleProcesses(t, id)
		up = len(pids)
		for _, pid := range pids {
			b, err := os.ReadFile(filepath.Join("/proc", pid, "timerslack_ns"))
			if err != nil {
				t.Error(err)
			}
			slack = append(slack, strings.TrimSpace(string(b)))
		}
	}); err != nil {
		t.Fatal(err)
	}
	if up != n {
		t.Errorf("%d of %d processes up once all had started", up, n)
	}
	// They start as a run's hosts do: from the spawner, with its timer slack.
	for i, s := range slack {
		if want := strconv.FormatInt(spawn.TimerSlack.Nanoseconds(), 10); s != want {
			t.Errorf("process %d: timer slack %s ns, want %s", i, s, want)
		}
	}
	if left := idleProcesses(t, runID); len(left) > 0 {
		t.Errorf("processes left: %v", left)
	}
}

// A host program that is not widetp's idle fails the measurement, naming it, and leaves nothing:
// one that exits at once (an older widetp without the command), and one that never says it is up
// nor exits, which is killed at the start bound instead of being waited for forever.
func TestHeldFloorRefusesAHostThatIsNotIdle(t *testing.T) {
	for name, script := range map[string]string{
		"exits":  "echo 'widetp: unknown command' >&2\nexit 2",
		"silent": "exec sleep 600",
	} {
		t.Run(name, func(t *testing.T) {
			bin := filepath.Join(t.TempDir(), "widetp")
			if err := os.WriteFile(bin, []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			runID := fmt.Sprintf("floortest%d-%s", os.Getpid(), name)
			cfg, err := runtimes.FloorConfig(runtimes.WithBinary(bin), runtimes.WithRunID(runID), runtimes.WithStartTimeout(100*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			_, err = localHeld(cfg, 2, func(string) { t.Error("all up, with no host up") })
			if err == nil || !strings.Contains(err.Error(), `did not say "idle"`) {
				t.Fatalf("err = %v, want the host that did not say it was up", err)
			}
			if left := idleProcesses(t, runID); len(left) > 0 {
				t.Errorf("processes left: %v", left)
			}
		})
	}
}

// idleProcesses are the pids of live processes carrying run runID in their environment.
func idleProcesses(t *testing.T, runID string) []string {
	t.Helper()
	tag := []byte(runtimes.EnvRun + "=" + runID + "\x00")
	procs, err := procfs.All()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range procs {
		if !p.Live() {
			continue // a zombie its parent has not waited for yet
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.PID))
		if err != nil || !bytes.Contains(env, tag) {
			continue
		}
		out = append(out, strconv.Itoa(p.PID))
	}
	return out
}
