//go:build unix

package runtimes

import (
	"io/fs"
	"syscall"
)

// Inode is a file's inode number, part of the key under which its digest is remembered: a file
// replaced by rename (go install, go build -o) gets a new one even within one mtime tick.
func Inode(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}
