package runtimes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "widetp")
	if err := os.WriteFile(bin, []byte("ELF"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		opts    []Option
		wantErr string
	}{
		{name: "defaults", opts: nil},
		{name: "explicit run id", opts: []Option{WithRunID("pr48061-a")}},
		{name: "run id with capitals", opts: []Option{WithRunID("Run1")}, wantErr: `run id "Run1"`},
		{name: "run id too long", opts: []Option{WithRunID(strings.Repeat("a", 41))}, wantErr: "at most 40"},
		{name: "zero start timeout", opts: []Option{WithStartTimeout(0)}, wantErr: "start timeout 0s: must be positive"},
		{name: "negative grace", opts: []Option{WithStopGrace(-time.Second)}, wantErr: "stop grace -1s"},
		{name: "grace longer than an operation", opts: []Option{WithStopGrace(time.Minute), WithOpTimeout(30 * time.Second)}, wantErr: "stop grace 1m0s: must be shorter than the op timeout 30s"},
		{name: "zero op timeout", opts: []Option{WithOpTimeout(0)}, wantErr: "op timeout 0s: must be positive"},
		{name: "zero log tail", opts: []Option{WithLogTail(0)}, wantErr: "log tail 0"},
		{name: "binary that is not there", opts: []Option{WithBinary(bin + "-gone")}, wantErr: "widetp binary (WithBinary)"},
	}
	for _, tt := range tests {
		cfg := DefaultConfig()
		cfg.Binary = bin
		for _, o := range tt.opts {
			o(&cfg)
		}
		err := cfg.Validate()
		if tt.wantErr == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			} else if !runIDPattern().MatchString(cfg.RunID) {
				t.Errorf("%s: run id %q does not match its own pattern", tt.name, cfg.RunID)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: error = %v, want one containing %q", tt.name, err, tt.wantErr)
		}
	}
}

func TestRandomRunIDsDiffer(t *testing.T) {
	a, b := DefaultConfig(), DefaultConfig()
	a.Binary, b.Binary = os.Args[0], os.Args[0]
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	if a.RunID == b.RunID {
		t.Fatalf("two runs got the run id %q", a.RunID)
	}
}
