package harness

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestNoEngineIsATypedErrorThatSaysWhatToDo(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "no-docker.sock")
	t.Setenv("DOCKER_HOST", "unix://"+sock)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := NewDocker(ctx, WithPingTimeout(2*time.Second))
	var eu *EngineUnavailableError
	if !errors.As(err, &eu) {
		t.Fatalf("NewDocker without an engine: %v (%T), want *EngineUnavailableError", err, err)
	}
	if !Infrastructure(err) {
		t.Errorf("no engine is not an infrastructure failure")
	}
	for _, want := range []string{sock, "--runtime local", "DOCKER_HOST", "Start the Docker daemon"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	if err := Ping(ctx, time.Second); !errors.As(err, &eu) {
		t.Errorf("Ping without an engine: %v, want *EngineUnavailableError", err)
	}
	if _, err := Clean(ctx, WithPingTimeout(time.Second)); !errors.As(err, &eu) {
		t.Errorf("Clean without an engine: %v, want *EngineUnavailableError", err)
	}
}

func TestInfrastructureIsOnlyMachinery(t *testing.T) {
	if Infrastructure(errors.New("dp-index-mismatch")) || Infrastructure(nil) {
		t.Fatalf("an ordinary error counts as infrastructure")
	}
}
