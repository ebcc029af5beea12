package ipcdir

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestListShowsSocketsDirsAndFiles(t *testing.T) {
	root := t.TempDir()
	// A real unix socket, as a ZMQ ipc bind leaves one.
	l, err := net.Listen("unix", filepath.Join(root, "lookup_rpc_port_0.ipc"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := os.MkdirAll(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "sub", "f"), []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := List(root)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range got.Entries {
		kinds = append(kinds, e.Path+":"+e.Type)
	}
	want := []string{"lookup_rpc_port_0.ipc:socket", "sub:dir", "sub/f:file"}
	if !reflect.DeepEqual(kinds, want) {
		t.Fatalf("List = %v, want %v", kinds, want)
	}
	if got.Entries[2].Size != 3 || got.Entries[2].Mode != "-rw-------" {
		t.Errorf("file entry = %+v", got.Entries[2])
	}
	if s := got.Sockets(); !reflect.DeepEqual(s, []string{"lookup_rpc_port_0.ipc"}) {
		t.Errorf("Sockets() = %v", s)
	}
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(b)
	if err != nil || !reflect.DeepEqual(back, got) {
		t.Fatalf("Parse(Marshal(l)) = %+v, %v; want %+v", back, err, got)
	}
}

func TestListOfAnEmptyAndAMissingDir(t *testing.T) {
	got, err := List(t.TempDir())
	if err != nil || got.Entries == nil || len(got.Entries) != 0 {
		t.Fatalf("List(empty) = %+v, %v; want no entries (non-nil, so JSON says [])", got, err)
	}
	missing := filepath.Join(t.TempDir(), "gone")
	if _, err := List(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("List(missing) error = %v, want one naming the dir", err)
	}
}

func TestParseRejectsGarbage(t *testing.T) {
	for in, want := range map[string]string{
		"":                  "parse ipc dir listing",
		"ls: /tmp: denied":  "parse ipc dir listing",
		`{"entries":[]}`:    "no root",
		`{"root":"/tmp"}`:   "",
		`{"root":"/tmp",}x`: "parse ipc dir listing",
	} {
		l, err := Parse([]byte(in))
		if want == "" {
			if err != nil || l.Entries == nil {
				t.Errorf("Parse(%q) = %+v, %v", in, l, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) error = %v, want %q", in, err, want)
		}
	}
}
