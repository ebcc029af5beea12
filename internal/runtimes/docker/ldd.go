package docker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path"
	"strings"

	"github.com/widetp/widetp/internal/ellipsis"
)

// Linkage is what a binary needs at run time besides itself: the shared libraries and the dynamic
// loader, as absolute paths on the build machine. A FROM scratch image holds exactly these.
type Linkage struct {
	// Static is true for a binary with no dynamic section (a CGO_ENABLED=0 Go binary).
	Static bool
	// Loader is the ELF interpreter ("/lib64/ld-linux-x86-64.so.2"): the kernel opens it by this
	// exact path, so the image must have it there.
	Loader string
	// Libs are the resolved library paths, in ldd's order, without duplicates.
	Libs []string
}

// Files lists every file the image needs for the binary to start: the loader, then the libraries.
func (l Linkage) Files() []string {
	if l.Loader == "" {
		return append([]string(nil), l.Libs...)
	}
	return append([]string{l.Loader}, l.Libs...)
}

// ParseLdd reads the output of glibc's ldd (stdout and stderr together). It rejects a library ldd
// could not find: an image without it would fail at start with a message far from the cause.
func ParseLdd(out string) (Linkage, error) {
	var l Linkage
	seen := map[string]bool{}
	var missing []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "":
			continue
		case line == "not a dynamic executable", line == "statically linked":
			// glibc's ldd says the first, newer ones and musl the second.
			l.Static = true
			continue
		}
		name, target, arrow := strings.Cut(line, "=>")
		name = strings.TrimSpace(name)
		if !arrow {
			// "/lib64/ld-linux-x86-64.so.2 (0x...)" is the loader; "linux-vdso.so.1 (0x...)" is
			// the kernel's vDSO, which no file provides.
			p := stripAddress(name)
			switch {
			case strings.HasPrefix(p, "/"):
				if l.Loader != "" && l.Loader != p {
					return Linkage{}, fmt.Errorf("parse ldd output line %d: a second loader %q after %q", n, p, l.Loader)
				}
				l.Loader = p
			case isVDSO(p):
			default:
				return Linkage{}, fmt.Errorf("parse ldd output line %d: %q is neither a library mapping nor the loader", n, line)
			}
			continue
		}
		target = strings.TrimSpace(target)
		if target == "not found" {
			missing = append(missing, name)
			continue
		}
		p := stripAddress(target)
		if p == "" {
			// Old glibc prints the vDSO as "linux-gate.so.1 =>  (0x...)".
			if isVDSO(name) {
				continue
			}
			return Linkage{}, fmt.Errorf("parse ldd output line %d: %q maps to no path", n, name)
		}
		if !strings.HasPrefix(p, "/") {
			return Linkage{}, fmt.Errorf("parse ldd output line %d: %q maps to the relative path %q", n, name, p)
		}
		if !seen[p] {
			seen[p] = true
			l.Libs = append(l.Libs, p)
		}
	}
	if len(missing) > 0 {
		return Linkage{}, fmt.Errorf("parse ldd output: libraries not found: %s (install their packages)", strings.Join(missing, ", "))
	}
	if l.Static && (l.Loader != "" || len(l.Libs) > 0) {
		return Linkage{}, errors.New("parse ldd output: says static and lists libraries")
	}
	if !l.Static && l.Loader == "" && len(l.Libs) == 0 {
		return Linkage{}, fmt.Errorf("parse ldd output: no loader, no libraries and no 'not a dynamic executable' in %q", ellipsis.Cut(out, 200))
	}
	// The loader usually appears once more as a library path; it is copied once.
	if l.Loader != "" {
		kept := l.Libs[:0]
		for _, p := range l.Libs {
			if p != l.Loader {
				kept = append(kept, p)
			}
		}
		l.Libs = kept
	}
	return l, nil
}

// stripAddress drops ldd's trailing load address "(0x00007f...)".
func stripAddress(s string) string {
	if i := strings.LastIndex(s, " (0x"); i >= 0 && strings.HasSuffix(s, ")") {
		return strings.TrimSpace(s[:i])
	}
	if strings.HasPrefix(s, "(0x") && strings.HasSuffix(s, ")") {
		return ""
	}
	return strings.TrimSpace(s)
}

func isVDSO(name string) bool {
	base := path.Base(name)
	return strings.HasPrefix(base, "linux-vdso") || strings.HasPrefix(base, "linux-gate")
}

// lddLinkage runs ldd on bin. ldd exits 1 for a static binary, so its exit code is judged only
// after its output has been read.
func lddLinkage(ctx context.Context, bin string) (Linkage, error) {
	out, err := exec.CommandContext(ctx, "ldd", bin).CombinedOutput()
	l, perr := ParseLdd(string(out))
	if perr == nil && (err == nil || l.Static) {
		return l, nil
	}
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return Linkage{}, fmt.Errorf("run ldd %s: %w (ldd is part of libc-bin)", bin, err)
		}
		return Linkage{}, fmt.Errorf("run ldd %s: %w: %s", bin, err, ellipsis.Cut(string(out), 500))
	}
	return Linkage{}, fmt.Errorf("ldd %s: %w", bin, perr)
}
