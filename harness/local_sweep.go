//go:build linux

package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// sweepLocal removes the run directories under base whose harness process is gone (a run killed
// before its Close), and returns how many. Their processes went with the harness (Pdeathsig); the
// directories are what is left. A directory without a readable owner is left alone: it may be a
// run being created right now (its owner file is written just after the directory), and an
// empty directory costs nothing.
func sweepLocal(base, machine string) (int, error) {
	entries, err := os.ReadDir(base)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, nil
		}
		return 0, fmt.Errorf("list %s: %w", base, err)
	}
	n := 0
	var errs []error
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(base, e.Name())
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		o, err := ParseOwner(strings.TrimSpace(string(b)))
		if err != nil || o.Alive(machine) {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("remove %s (run of dead process %s): %w", dir, o, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
