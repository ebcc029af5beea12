package runtimes

import (
	"fmt"
	"io"
	"sync"
)

// progressMu serialises progress lines. Nodes start concurrently and each reports "up" on the
// progress writer the caller gave (WithProgress, WithClusterProgress: often one writer for both,
// and often a bytes.Buffer, which is not safe for concurrent writes); one lock for the whole
// package keeps every line whole whichever option a writer came through.
var progressMu sync.Mutex

// progressLine writes one "widetp: ..." line to w.
func ProgressLine(w io.Writer, format string, args ...any) {
	progressMu.Lock()
	defer progressMu.Unlock()
	fmt.Fprintf(w, "widetp: "+format+"\n", args...)
}
