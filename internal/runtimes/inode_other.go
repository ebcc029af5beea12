//go:build !unix

package runtimes

import "io/fs"

// Inode is 0 where the platform has none: the digest key then rests on path, size and mtime.
func Inode(fs.FileInfo) uint64 { return 0 }
