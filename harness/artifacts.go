package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/widetp/widetp/report/htmlreport"
)

// Artifact file names under each host's directory (htmlreport links them, so the names are its).
const (
	ArtifactLogs    = htmlreport.ArtifactLogs
	ArtifactInspect = htmlreport.ArtifactInspect
	ArtifactIPCDir  = htmlreport.ArtifactIPCDir
)

// WriteArtifacts writes what a run leaves for a human into dir: for every host, <host>/logs.txt,
// <host>/inspect.json (the runtime's description) and <host>/ipc.json (the listing of its private
// ipc directory); and each of extra (the store snapshot, report.json) under its name. A host that
// cannot answer (a paused or stopped one cannot list its ipc dir) costs only its own files: every
// other file is still written, and the error names each one that is missing.
func WriteArtifacts(ctx context.Context, rt Runtime, dir string, extra map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write artifacts: %w", err)
	}
	var errs []error
	names := make([]string, 0, len(extra))
	for name := range extra {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !filepath.IsLocal(name) {
			errs = append(errs, fmt.Errorf("write artifact %q: not a local file name", name))
			continue
		}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			errs = append(errs, fmt.Errorf("write artifact %s: %w", name, err))
			continue
		}
		if err := os.WriteFile(p, extra[name], 0o644); err != nil {
			errs = append(errs, fmt.Errorf("write artifact %s: %w", name, err))
		}
	}
	for _, host := range rt.Hosts() {
		if err := writeHostArtifacts(ctx, rt, filepath.Join(dir, host), host); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func writeHostArtifacts(ctx context.Context, rt Runtime, dir, host string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write artifacts of host %s: %w", host, err)
	}
	var errs []error
	write := func(name string, b []byte, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("write %s of host %s: %w", name, host, err))
			return
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			errs = append(errs, fmt.Errorf("write %s of host %s: %w", name, host, err))
		}
	}
	logs, err := rt.Logs(ctx, host)
	write(ArtifactLogs, logs, err)
	ins, err := rt.Inspect(ctx, host)
	write(ArtifactInspect, ins, err)
	var listing []byte
	l, err := rt.IPCDir(ctx, host)
	if err == nil {
		listing, err = json.MarshalIndent(l, "", "  ")
	}
	write(ArtifactIPCDir, listing, err)
	return errors.Join(errs...)
}
