package docker

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/widetp/widetp/internal/runtimes"
	"github.com/widetp/widetp/internal/testbin"
)

// The held floor keeps every host up until the last one is, as a run's hosts are until its
// verdict; the floor's hosts are gone by then (their program lists /tmp and exits). Both leave
// nothing behind. Needs a Docker engine; skips, saying so, without one.
func TestHeldFloorKeepsEveryHostUpUntilTheLast(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := Ping(ctx, 5*time.Second); err != nil {
		t.Skipf("no Docker engine to measure a floor on: %v", err)
	}
	bin, err := testbin.Widetp()
	if err != nil {
		t.Fatal(err)
	}
	cli, err := newEngineClient()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	const n = 3
	for _, hold := range []bool{true, false} {
		runID := fmt.Sprintf("floortest%d-%t", os.Getpid(), hold)
		cfg, err := runtimes.FloorConfig(runtimes.WithBinary(bin), runtimes.WithRunID(runID))
		if err != nil {
			t.Fatal(err)
		}
		running := -1
		took, err := dockerFloor(ctx, cfg, n, hold, func(id string) {
			cs, err := cli.ContainerList(ctx, filters{"label": {runtimes.LabelRun + "=" + id: true}, "status": {"running": true}})
			if err != nil {
				t.Errorf("list the running containers of %s: %v", id, err)
			}
			running = len(cs)
		})
		if err != nil {
			t.Fatalf("hold=%t: %v", hold, err)
		}
		want := 0
		if hold {
			want = n
		}
		if running != want {
			t.Errorf("hold=%t: %d of %d hosts running once all had started, want %d", hold, running, n, want)
		}
		if took <= 0 {
			t.Errorf("hold=%t: took %v", hold, took)
		}
		left, err := Labelled(ctx, runID)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) > 0 {
			t.Errorf("hold=%t: left %v", hold, left)
		}
	}
}
