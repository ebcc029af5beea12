package docker

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/widetp/widetp/internal/runtimes"
	"github.com/widetp/widetp/internal/testbin"
	"github.com/widetp/widetp/internal/zmq"
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

// An engine that stops answering fails a floor measurement within its bounds, naming the step and
// the bound, instead of hanging it; what was made is removed. A fake engine: the image and its
// volumes exist, and a container's start never answers.
func TestFloorFailsWhenTheEngineStopsAnswering(t *testing.T) {
	bin, err := os.Executable() // any binary will do: nothing runs it
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zmq.Path(); err != nil {
		t.Skipf("the image lists libzmq, which this machine lacks: %v", err)
	}
	var mu sync.Mutex
	var removed []string
	engineOnSocket(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		switch {
		case p == "/_ping":
			w.Header().Set("Api-Version", "1.41")
		case r.Method == http.MethodGet && (strings.Contains(p, "/images/") || strings.Contains(p, "/volumes/")):
			_, _ = w.Write([]byte(`{}`))
		case strings.HasSuffix(p, "/networks/create"):
			_, _ = w.Write([]byte(`{"Id":"net1"}`))
		case strings.HasSuffix(p, "/containers/create"):
			_, _ = w.Write([]byte(`{"Id":"c1"}`))
		case strings.HasSuffix(p, "/start"):
			<-r.Context().Done() // the engine hangs
		case r.Method == http.MethodDelete:
			mu.Lock()
			removed = append(removed, p[strings.LastIndexByte(p, '/')+1:])
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		default:
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	cfg, err := runtimes.FloorConfig(runtimes.WithBinary(bin), runtimes.WithRunID("hung"), runtimes.WithStartTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, hold := range []bool{false, true} {
		mu.Lock()
		removed = nil
		mu.Unlock()
		_, err := dockerFloor(ctx, cfg, 2, hold, nil)
		// A floor's engine call has a run's bound for a round of as many starts (roundBound).
		want := fmt.Sprintf("did not answer within %v (start timeout and a round of 2's queue)", roundBound(200*time.Millisecond, 2))
		if err == nil || !strings.Contains(err.Error(), "start container") || !strings.Contains(err.Error(), want) {
			t.Errorf("hold=%t: %v; want %q", hold, err, want)
		}
		mu.Lock()
		if !slices.Contains(removed, "c1") || !slices.Contains(removed, "net1") {
			t.Errorf("hold=%t: removed %v, want the containers and the network", hold, removed)
		}
		mu.Unlock()
	}
}
