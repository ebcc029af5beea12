package runtimes

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
)

// FileDigest is a file's sha256 as the content hash reads it, remembered per process by path,
// size, modification time and inode: a run hashes the (large) widetp binary once, and a suite
// that opens dozens of runtimes pays for it once.
type FileDigest struct {
	Sum  string
	Mode fs.FileMode
	Size int64
}

type digestKey struct {
	path  string
	size  int64
	mtime int64
	ino   uint64
}

var digests sync.Map // digestKey -> FileDigest

// DigestFile hashes src (following symlinks: the image needs the bytes under the name asked for).
func DigestFile(src string) (FileDigest, error) {
	fi, err := os.Stat(src)
	if err != nil {
		return FileDigest{}, err
	}
	if !fi.Mode().IsRegular() {
		return FileDigest{}, fmt.Errorf("%s: not a regular file (%s)", src, fi.Mode())
	}
	key := digestKey{path: src, size: fi.Size(), mtime: fi.ModTime().UnixNano(), ino: Inode(fi)}
	if d, ok := digests.Load(key); ok {
		return d.(FileDigest), nil
	}
	in, err := os.Open(src)
	if err != nil {
		return FileDigest{}, err
	}
	defer in.Close()
	h := sha256.New()
	n, err := io.Copy(h, in)
	if err != nil {
		return FileDigest{}, fmt.Errorf("read %s: %w", src, err)
	}
	d := FileDigest{Sum: hex.EncodeToString(h.Sum(nil)), Mode: fi.Mode().Perm(), Size: n}
	digests.Store(key, d)
	return d, nil
}
