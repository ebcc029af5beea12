//go:build !unix

package harness

import "io/fs"

// inode is 0 where the platform has none: the digest key then rests on path, size and mtime.
func inode(fs.FileInfo) uint64 { return 0 }
