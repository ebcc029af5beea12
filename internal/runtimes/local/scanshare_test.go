//go:build linux

package local

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/widetp/widetp/internal/procfs"
)

// joined waits until n callers wait for the round after the running scan.
func joined(t *testing.T, s *scanShare, n int) {
	t.Helper()
	for i := 0; ; i++ {
		s.mu.Lock()
		w := 0
		if s.next != nil {
			w = s.next.waiters
		}
		s.mu.Unlock()
		if w == n {
			return
		}
		if i > 1_000_000 {
			t.Fatalf("%d of %d callers joined the next round", w, n)
		}
		runtime.Gosched()
	}
}

// Callers that arrive while a scan runs are not served by it (it may have read /proc before their
// signal): they share the next scan, and one scan serves them all.
func TestScanShareJoinsCallersIntoTheNextScan(t *testing.T) {
	started := make(chan int)
	release := make(chan struct{})
	var scans atomic.Int32
	s := &scanShare{scan: func() ([]procfs.Stat, error) {
		n := int(scans.Add(1))
		started <- n
		<-release
		return []procfs.Stat{{PID: n}}, nil
	}}
	first := make(chan int, 1)
	go func() {
		procs, err := s.fresh()
		if err != nil {
			t.Error(err)
		}
		first <- procs[0].PID
	}()
	if n := <-started; n != 1 {
		t.Fatalf("first scan is number %d", n)
	}
	const callers = 10
	got := make([]int, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			procs, err := s.fresh()
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = procs[0].PID
		})
	}
	joined(t, s, callers)
	release <- struct{}{}
	if n := <-first; n != 1 {
		t.Errorf("the first caller got scan %d, want 1", n)
	}
	if n := <-started; n != 2 {
		t.Fatalf("second scan is number %d", n)
	}
	release <- struct{}{}
	wg.Wait()
	for i, n := range got {
		if n != 2 {
			t.Errorf("caller %d got scan %d, want 2 (the one that began after it called)", i, n)
		}
	}
	if n := scans.Load(); n != 2 {
		t.Errorf("%d scans for 11 callers in two waves, want 2", n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next != nil {
		t.Errorf("a round is left waiting: %+v", s.next)
	}
}

// Whatever the interleaving, every caller gets a scan that began after it called.
func TestScanShareScansBeginAfterTheCall(t *testing.T) {
	var begun atomic.Int64
	var scans atomic.Int32
	s := &scanShare{scan: func() ([]procfs.Stat, error) {
		n := int(begun.Add(1))
		scans.Add(1)
		for range n % 4 {
			runtime.Gosched()
		}
		return []procfs.Stat{{PID: n}}, nil
	}}
	const workers, calls = 8, 300
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range calls {
				before := int(begun.Load())
				procs, err := s.fresh()
				if err != nil {
					t.Error(err)
					return
				}
				if procs[0].PID <= before {
					t.Errorf("got scan %d, which began before the call (scan %d had begun)", procs[0].PID, before)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := scans.Load(); n < 1 || n > workers*calls {
		t.Errorf("%d scans for %d calls", n, workers*calls)
	}
	t.Logf("%d scans for %d calls", scans.Load(), workers*calls)
}

// Every caller of a round gets its scan's error.
func TestScanShareGivesEveryCallerTheError(t *testing.T) {
	boom := errors.New("read /proc: boom")
	s := &scanShare{scan: func() ([]procfs.Stat, error) { return nil, boom }}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if _, err := s.fresh(); !errors.Is(err, boom) {
				t.Errorf("err = %v, want %v", err, boom)
			}
		})
	}
	wg.Wait()
}
