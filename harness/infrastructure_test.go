package harness

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

func TestInfrastructureIsOnlyMachinery(t *testing.T) {
	if Infrastructure(errors.New("dp-index-mismatch")) || Infrastructure(nil) {
		t.Fatalf("an ordinary error counts as infrastructure")
	}
	if !Infrastructure(fmt.Errorf("start: %w", &ImageBuildError{Image: "widetp", Step: "binary", Err: errors.New("gone")})) {
		t.Errorf("an image that does not build is not an infrastructure failure")
	}
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "no-docker.sock"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := NewDocker(ctx, WithPingTimeout(2*time.Second)); !Infrastructure(err) {
		t.Errorf("no engine is not an infrastructure failure: %v", err)
	}
}
