package htmlreport

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// The files of a run's artifacts directory (README, "Reading a report"). The harness writes them
// under these names; the page links to those that exist.
const (
	ArtifactReport   = "report.json"
	ArtifactSnapshot = "store-snapshot.json"
	// ArtifactHTML is the page itself, written beside report.json.
	ArtifactHTML = "report.html"
	// Per host, under <host>/.
	ArtifactLogs    = "logs.txt"
	ArtifactInspect = "inspect.json"
	ArtifactIPCDir  = "ipc.json"
)

// hostArtifacts are the per-host files in the order the page lists them.
var hostArtifacts = []string{ArtifactLogs, ArtifactInspect, ArtifactIPCDir}

// Artifacts are the files of one artifacts directory that exist.
type Artifacts struct {
	// Dir is the directory, absolute.
	Dir string
	// Files are the top-level files (report.json, store-snapshot.json) that exist.
	Files []string
	// Hosts maps each host directory to the per-host files it holds, in hostArtifacts order.
	Hosts map[string][]string
}

func (a *Artifacts) empty() bool { return a == nil || len(a.Files) == 0 && len(a.Hosts) == 0 }

// hostNames lists the hosts with files, sorted.
func (a *Artifacts) hostNames() []string {
	if a == nil {
		return nil
	}
	out := make([]string, 0, len(a.Hosts))
	for h := range a.Hosts {
		out = append(out, h)
	}
	sort.Strings(out)
	return out
}

// ScanArtifacts lists the artifacts under dir: the top-level files and every subdirectory that
// holds at least one per-host file. A directory that does not exist is an error; one without
// artifacts is not (the result is empty).
func ScanArtifacts(dir string) (*Artifacts, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("scan artifacts in %s: %w", dir, err)
	}
	entries, err := os.ReadDir(abs)
	if err != nil {
		return nil, fmt.Errorf("scan artifacts in %s: %w", dir, err)
	}
	a := &Artifacts{Dir: abs, Hosts: map[string][]string{}}
	for _, name := range []string{ArtifactReport, ArtifactSnapshot} {
		if isFile(filepath.Join(abs, name)) {
			a.Files = append(a.Files, name)
		}
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		var files []string
		for _, f := range hostArtifacts {
			if isFile(filepath.Join(abs, e.Name(), f)) {
				files = append(files, f)
			}
		}
		if len(files) > 0 {
			a.Hosts[e.Name()] = files
		}
	}
	return a, nil
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// linker turns artifact files into hrefs relative to the page's directory, so that the page and
// its artifacts can be moved or uploaded together (a CI artifact) and still link.
type linker struct {
	prefix string // "" or a relative path ending in "/", or a file:// URL ending in "/"
}

// newLinker makes hrefs to files of a, for a page written into pageDir ("" for the current
// directory). When no relative path exists (another volume), links are absolute file:// URLs.
func newLinker(a *Artifacts, pageDir string) linker {
	if a == nil {
		return linker{}
	}
	from, err := filepath.Abs(pageDir)
	if err == nil {
		if rel, err := filepath.Rel(from, a.Dir); err == nil {
			if rel == "." {
				return linker{}
			}
			return linker{prefix: escapePath(filepath.ToSlash(rel)) + "/"}
		}
	}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(a.Dir) + "/"}
	return linker{prefix: u.String()}
}

func (l linker) href(parts ...string) string {
	return l.prefix + escapePath(strings.Join(parts, "/"))
}

// escapePath escapes each segment of a slash-separated path for use in a URL.
func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}
