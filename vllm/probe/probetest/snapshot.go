// Package probetest finds the vLLM source snapshot the tests run the vllm planner against (the
// repository's sibling shared/vllm/vllm-src-*.tar.xz, or $WIDETP_VLLM_SNAPSHOT: a tarball or an
// unpacked tree) and unpacks it into a temporary directory.
package probetest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// EnvSnapshot overrides where the snapshot is: a .tar.xz, or a directory holding vllm/__init__.py.
const EnvSnapshot = "WIDETP_VLLM_SNAPSHOT"

// SnapshotProfile is the model profile of the snapshot's vLLM (main of 2026-08-17, commit
// 455edc0: it has PRs #46628, #47692, #48061, #49124 and lacks #53743).
const SnapshotProfile = "main-455edc0"

// Unpack returns a directory holding the snapshot's vllm/ package and a function that removes
// what Unpack made. skip is non-empty (a reason) when the snapshot, tar or python3 is missing.
func Unpack() (dir string, cleanup func(), skip string) {
	if _, err := exec.LookPath("python3"); err != nil {
		return "", func() {}, "python3 is not on PATH: the vllm planner needs it"
	}
	src := os.Getenv(EnvSnapshot)
	if src == "" {
		var err error
		if src, err = findTarball(); err != nil {
			return "", func() {}, err.Error()
		}
	}
	if st, err := os.Stat(src); err == nil && st.IsDir() {
		return src, func() {}, ""
	}
	tmp, err := os.MkdirTemp("", "widetp-vllm-snapshot-")
	if err != nil {
		return "", func() {}, err.Error()
	}
	cleanup = func() { _ = os.RemoveAll(tmp) }
	out, err := exec.Command("tar", "-xJf", src, "-C", tmp).CombinedOutput()
	if err != nil {
		cleanup()
		return "", func() {}, fmt.Sprintf("unpack %s: %v: %s", src, err, strings.TrimSpace(string(out)))
	}
	return tmp, cleanup, ""
}

// findTarball looks for shared/vllm/vllm-src-*.tar.xz beside the repository (the module root,
// found from the working directory up).
func findTarball() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			matches, _ := filepath.Glob(filepath.Join(filepath.Dir(d), "shared", "vllm", "vllm-src-*.tar.xz"))
			if len(matches) == 0 {
				return "", fmt.Errorf("no vLLM snapshot: want %s or $%s", filepath.Join(filepath.Dir(d), "shared", "vllm", "vllm-src-*.tar.xz"), EnvSnapshot)
			}
			return matches[len(matches)-1], nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("no go.mod above the working directory: cannot find the vLLM snapshot")
		}
	}
}
