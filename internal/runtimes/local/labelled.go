//go:build linux

package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/widetp/widetp/internal/runtimes"
)

// Labelled lists the local run directories of run runID (every run when runID is ""), with the run
// and owner they name: what a leak check looks for besides the runs' processes.
func Labelled(_ context.Context, runID string) ([]runtimes.Resource, error) {
	base := localBase()
	entries, err := os.ReadDir(base)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", base, err)
	}
	var out []runtimes.Resource
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(base, e.Name())
		id, err := os.ReadFile(filepath.Join(dir, runIDFile))
		if err != nil {
			continue // being made or removed, or not a run directory
		}
		run := strings.TrimSpace(string(id))
		if runID != "" && run != runID {
			continue
		}
		owner, _ := os.ReadFile(filepath.Join(dir, ownerFile))
		out = append(out, runtimes.Resource{Kind: "directory", Name: dir,
			Labels: map[string]string{runtimes.LabelRun: run, runtimes.LabelOwner: strings.TrimSpace(string(owner))}})
	}
	return out, nil
}
