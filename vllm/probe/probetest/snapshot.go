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
	src, isDir, skip := source()
	if skip != "" || isDir {
		return src, func() {}, skip
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

// UnpackCached is Unpack into a directory that outlives the test run: <user cache>/widetp/
// vllm-snapshots/<tarball name>, unpacked once (concurrent callers race harmlessly: the first
// complete copy wins). The probe's bytecode cache is keyed by the path of the sources it compiled,
// so a stable path lets every later run import the snapshot's vLLM from bytecode (about a second)
// instead of compiling it again (about three). A directory in $WIDETP_VLLM_SNAPSHOT is used as it is.
func UnpackCached() (dir string, skip string) {
	src, isDir, skip := source()
	if skip != "" || isDir {
		return src, skip
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	root := filepath.Join(base, "widetp", "vllm-snapshots")
	dir = filepath.Join(root, strings.TrimSuffix(filepath.Base(src), ".tar.xz"))
	if fileExists(filepath.Join(dir, "vllm", "__init__.py")) {
		return dir, ""
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err.Error()
	}
	tmp, err := os.MkdirTemp(root, "unpack-")
	if err != nil {
		return "", err.Error()
	}
	defer os.RemoveAll(tmp)
	if out, err := exec.Command("tar", "-xJf", src, "-C", tmp).CombinedOutput(); err != nil {
		return "", fmt.Sprintf("unpack %s: %v: %s", src, err, strings.TrimSpace(string(out)))
	}
	if err := os.Rename(tmp, dir); err != nil && !fileExists(filepath.Join(dir, "vllm", "__init__.py")) {
		return "", fmt.Sprintf("unpack %s: %v", src, err)
	}
	return dir, ""
}

// source is the snapshot: $WIDETP_VLLM_SNAPSHOT or the tarball beside the repository; skip says
// why there is none (or no python3 to run it).
func source() (src string, isDir bool, skip string) {
	if _, err := exec.LookPath("python3"); err != nil {
		return "", false, "python3 is not on PATH: the vllm planner needs it"
	}
	src = os.Getenv(EnvSnapshot)
	if src == "" {
		var err error
		if src, err = findTarball(); err != nil {
			return "", false, err.Error()
		}
	}
	st, err := os.Stat(src)
	if err != nil {
		return "", false, fmt.Sprintf("no vLLM snapshot at %s ($%s): %v", src, EnvSnapshot, err)
	}
	return src, st.IsDir(), ""
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
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
