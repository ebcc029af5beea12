package fakestore

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/widetp/widetp/fakestore/api"
)

// faultSet holds the active faults. A fault is consumed per request it shapes: Count runs down,
// Duration runs out (on the store's clock), and a spent fault disappears.
type faultSet struct {
	mu     sync.Mutex
	faults []*api.Fault
	next   int
}

func (fs *faultSet) add(f api.Fault, now time.Time) api.Fault {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.next++
	f.ID = fmt.Sprintf("f%d", fs.next)
	f.Hits = 0
	f.Expires = time.Time{}
	if f.Duration > 0 {
		f.Expires = now.Add(time.Duration(f.Duration))
	}
	fs.faults = append(fs.faults, &f)
	return f
}

func (fs *faultSet) pruneLocked(now time.Time) {
	kept := fs.faults[:0]
	for _, f := range fs.faults {
		if (f.Count > 0 && f.Hits >= f.Count) || (!f.Expires.IsZero() && !now.Before(f.Expires)) {
			continue
		}
		kept = append(kept, f)
	}
	for i := len(kept); i < len(fs.faults); i++ {
		fs.faults[i] = nil
	}
	fs.faults = kept
}

func (fs *faultSet) list(now time.Time) []api.Fault {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.pruneLocked(now)
	out := make([]api.Fault, 0, len(fs.faults))
	for _, f := range fs.faults {
		out = append(out, *f)
	}
	return out
}

func (fs *faultSet) remove(id string) bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for i, f := range fs.faults {
		if f.ID == id {
			fs.faults = append(fs.faults[:i], fs.faults[i+1:]...)
			return true
		}
	}
	return false
}

func (fs *faultSet) clear() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.faults = nil
}

// scope is what a request (or connection) is known by when faults are matched.
type scope struct {
	plane  api.Plane
	method string // HTTP method
	op     string // master operation or path
	key    string
	peer   string
	client string // master client id (ignore-pings)
}

// matchFault reports whether f applies to sc.
func matchFault(f *api.Fault, sc scope) bool {
	if f.Plane != "" && f.Plane != sc.plane {
		return false
	}
	if f.Method != "" && !strings.EqualFold(f.Method, sc.method) && f.Method != sc.op {
		return false
	}
	if f.Key != "" && !api.Glob(f.Key, sc.key) {
		return false
	}
	if f.Peer != "" && f.Peer != sc.peer {
		return false
	}
	if f.Kind == api.FaultIgnorePings && f.Client != "" && f.Client != sc.client {
		return false
	}
	return true
}

// take finds the first live fault of kind matching sc, counts the hit and returns a copy; nil
// when none applies. The fast path (no faults at all) takes the lock only briefly.
func (fs *faultSet) take(kind string, sc scope, now time.Time) *api.Fault {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if len(fs.faults) == 0 {
		return nil
	}
	fs.pruneLocked(now)
	for _, f := range fs.faults {
		if f.Kind == kind && matchFault(f, sc) {
			f.Hits++
			c := *f
			return &c
		}
	}
	return nil
}
