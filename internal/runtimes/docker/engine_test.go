package docker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/widetp/widetp/internal/runtimes"
)

func TestNoEngineIsATypedErrorThatSaysWhatToDo(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "no-docker.sock")
	t.Setenv("DOCKER_HOST", "unix://"+sock)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	self, err := os.Executable() // any executable will do: no host starts
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(ctx, runtimes.WithPingTimeout(2*time.Second), runtimes.WithBinary(self))
	var eu *EngineUnavailableError
	if !errors.As(err, &eu) {
		t.Fatalf("NewDocker without an engine: %v (%T), want *EngineUnavailableError", err, err)
	}
	for _, want := range []string{sock, "--runtime local", "DOCKER_HOST", "Start the Docker daemon"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	if err := Ping(ctx, time.Second); !errors.As(err, &eu) {
		t.Errorf("Ping without an engine: %v, want *EngineUnavailableError", err)
	}
	if _, err := Clean(ctx, runtimes.WithPingTimeout(time.Second)); !errors.As(err, &eu) {
		t.Errorf("Clean without an engine: %v, want *EngineUnavailableError", err)
	}
}
