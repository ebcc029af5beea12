package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"

	"github.com/widetp/widetp/scenarios"
	"github.com/widetp/widetp/vllm"
	"github.com/widetp/widetp/vllm/conform"
)

// detection is what --profile auto found, as it is cached.
type detection struct {
	Profile  vllm.Profile      `json:"profile"`
	Findings []conform.Finding `json:"findings"`
}

// detectProfile finds the profile the vLLM behind pl behaves as (conform.DetectProfile over
// conform.DetectionPool, from base), or reads it from the cache: the finding depends only on that
// vLLM's launch code and installation and on this binary's model, so it is kept under a key made
// of both. A cache that cannot be read or written is passed over.
func detectProfile(ctx context.Context, pl vllm.Planner, base vllm.Profile) (vllm.Profile, []conform.Finding, error) {
	path := detectionCachePath(pl.Source())
	if path != "" {
		if b, err := os.ReadFile(path); err == nil {
			var d detection
			if json.Unmarshal(b, &d) == nil && d.Profile.Validate() == nil {
				return d.Profile, d.Findings, nil
			}
		}
	}
	prof, findings, err := conform.DetectProfile(ctx, pl, base, conform.DetectionPool(base))
	if err != nil {
		return vllm.Profile{}, nil, err
	}
	if path != "" {
		if b, err := json.Marshal(detection{prof, findings}); err == nil && os.MkdirAll(filepath.Dir(path), 0o755) == nil {
			tmp := path + ".tmp"
			if os.WriteFile(tmp, b, 0o644) == nil {
				_ = os.Rename(tmp, path)
			}
		}
	}
	return prof, findings, nil
}

// detectionCachePath is where the finding for that vLLM and this binary is kept, "" when there is
// no user cache directory or the binary cannot be read.
func detectionCachePath(src vllm.PlannerSource) string {
	dir, err := os.UserCacheDir()
	if err != nil || src.Digest == "" {
		return ""
	}
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	f, err := os.Open(exe)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	s, _ := json.Marshal(src)
	h.Write(s)
	return filepath.Join(dir, "widetp", "profile-detection", hex.EncodeToString(h.Sum(nil))[:32]+".json")
}

// profileSpecOf is a profile as a scenario file names it: its name when it is a named profile,
// else main with the changes where it differs.
func profileSpecOf(p vllm.Profile) scenarios.ProfileSpec {
	if _, err := vllm.ProfileNamed(p.Name); err == nil {
		return scenarios.ProfileSpec{Base: p.Name}
	}
	return scenarios.ProfileSpec{Base: "main", Changes: p.FromMain()}
}
