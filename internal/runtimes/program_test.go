package runtimes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestProgramValidate(t *testing.T) {
	if err := Widetp.Validate(); err != nil {
		t.Errorf("%s: %v", Widetp.Name, err)
	}
	if err := (Program{Name: "Sim_Node"}).Validate(); err == nil || !strings.Contains(err.Error(), "want [a-z0-9-]+") {
		t.Errorf("validate(Sim_Node) = %v, want the name refused", err)
	}
}

func TestResolveBinaryNamesWhatIsMissing(t *testing.T) {
	t.Setenv(EnvBinary, "")
	if _, err := resolveBinary(""); err == nil || !strings.Contains(err.Error(), EnvBinary) || !strings.Contains(err.Error(), "go build") {
		t.Errorf("no binary: %v, want the variable and how to build one named", err)
	}
	dir := t.TempDir()
	if _, err := resolveBinary(dir); err == nil || !strings.Contains(err.Error(), "not an executable file") {
		t.Errorf("a directory: %v", err)
	}
	exe := filepath.Join(dir, "widetp")
	if err := os.WriteFile(exe, []byte("ELF"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvBinary, exe)
	if got, err := resolveBinary(""); err != nil || got != exe {
		t.Errorf("from $%s: %q, %v", EnvBinary, got, err)
	}
}
