package docker

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestLockBuildExcludesAndTimesOut(t *testing.T) {
	ref := "widetp-locktest:" + time.Now().Format("150405.000000000")
	ctx := context.Background()
	unlock, err := lockBuild(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	// flock locks are per open file description, so a second open in this process contends too.
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := lockBuild(short, ref); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second lock while held: %v, want the deadline", err)
	}
	unlock()
	bounded, cancel2 := context.WithTimeout(ctx, 5*time.Second)
	defer cancel2()
	unlock, err = lockBuild(bounded, ref)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	unlock()
}
