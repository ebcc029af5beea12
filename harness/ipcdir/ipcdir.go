// Package ipcdir lists a host's private ipc directory: where ZMQ ipc:// sockets live, so a listing
// shows which lookup paths were bound on a host (two binds of one path leave one socket file).
// The Docker runtime runs it inside the node's container (`widetp ipcls /tmp`, Command: a scratch image has no ls,
// and `docker cp` cannot read a tmpfs); the local runtime calls List directly. One format for both.
package ipcdir

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/widetp/widetp/internal/ellipsis"
)

// Entry is one file under the root.
type Entry struct {
	// Path is relative to the root, with '/' separators.
	Path string `json:"path"`
	// Type is "socket", "dir", "file", "symlink", "fifo" or "other".
	Type string `json:"type"`
	Mode string `json:"mode"`
	Size int64  `json:"size"`
}

// Listing is a root and everything under it, sorted by path.
type Listing struct {
	Root    string  `json:"root"`
	Entries []Entry `json:"entries"`
}

// List walks root. A file that vanishes during the walk (a process unbinding) is left out rather
// than failing the listing: the listing is a snapshot of a live directory.
func List(root string) (Listing, error) {
	l := Listing{Root: root, Entries: []Entry{}}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) && p != root {
				return nil
			}
			return err
		}
		if p == root {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		l.Entries = append(l.Entries, Entry{Path: filepath.ToSlash(rel), Type: typeOf(info.Mode()), Mode: info.Mode().Perm().String(), Size: info.Size()})
		return nil
	})
	if err != nil {
		return Listing{}, fmt.Errorf("list ipc dir %s: %w", root, err)
	}
	sort.Slice(l.Entries, func(i, j int) bool { return l.Entries[i].Path < l.Entries[j].Path })
	return l, nil
}

func typeOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeSocket != 0:
		return "socket"
	case m.IsDir():
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	case m.IsRegular():
		return "file"
	default:
		return "other"
	}
}

// Parse reads the JSON that Command prints (a Listing).
func Parse(b []byte) (Listing, error) {
	var l Listing
	if err := json.Unmarshal(b, &l); err != nil {
		return Listing{}, fmt.Errorf("parse ipc dir listing %q: %w", ellipsis.Cut(string(b), 120), err)
	}
	if l.Root == "" {
		return Listing{}, fmt.Errorf("parse ipc dir listing %q: no root", ellipsis.Cut(string(b), 120))
	}
	if l.Entries == nil {
		l.Entries = []Entry{}
	}
	return l, nil
}

// Sockets returns the paths of the sockets in l.
func (l Listing) Sockets() []string {
	var out []string
	for _, e := range l.Entries {
		if e.Type == "socket" {
			out = append(out, e.Path)
		}
	}
	return out
}

// Command is `widetp ipcls DIR`: it prints DIR's listing as JSON on stdout and returns the exit
// status (2 for bad arguments, 1 for a failed listing). The Docker runtime runs it inside a node's
// container, which has no other program that could list its /tmp.
func Command(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: widetp ipcls DIR")
		return 2
	}
	l, err := List(args[0])
	if err != nil {
		fmt.Fprintln(stderr, "widetp ipcls:", err)
		return 1
	}
	if err := json.NewEncoder(stdout).Encode(l); err != nil {
		fmt.Fprintln(stderr, "widetp ipcls: write listing:", err)
		return 1
	}
	return 0
}
