package bench

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/widetp/widetp/internal/nodeapi"
	"github.com/widetp/widetp/internal/procfs"
)

// minPause is the least pause between two sweeps of the memory sampler. Each pause is as long as
// the sweep before it (at least minPause): the sampler takes at most half a core, and a run of a
// tenth of a second (a local 2-node run) is still seen several times. It runs only in a run that
// is not timed.
const minPause = 10 * time.Millisecond

type sampler struct {
	tag  []byte
	done chan struct{}
	wg   sync.WaitGroup

	mu   sync.Mutex
	ours map[int]bool // the pids that carry the run's id (a process's environment stays)
	// peak is the largest sum, procs the most processes one sweep saw (not always in the same
	// sweep: a sweep reads one process after another while they allocate).
	peak  float64
	procs int
}

// sweep samples once and keeps the largest sum and count.
func (s *sampler) sweep() {
	s.mu.Lock()
	defer s.mu.Unlock()
	mib, n := sample(s.tag, s.ours)
	s.peak, s.procs = max(s.peak, mib), max(s.procs, n)
}

// startSampler sums, sweep after sweep, the proportional set size of every process on the machine
// whose environment carries WIDETP_RUN=<runID> (every host's program and what it starts, in a
// container or not), and keeps the largest sum; sweep takes one more (runOnce: once the run has
// settled).
func startSampler(runID string) *sampler {
	s := &sampler{done: make(chan struct{}), tag: []byte(nodeapi.EnvRun + "=" + runID + "\x00"), ours: map[int]bool{}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		// A sweep reads a file per process: among the hundreds of busy processes of a large run, a
		// sampler with an ordinary share of the CPU took seconds a sweep and missed the moment
		// they all were up. It runs at a higher priority where it may (root); the run it samples
		// is not timed.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), -10)
		for {
			began := time.Now()
			s.sweep()
			t := time.NewTimer(max(time.Since(began), minPause))
			select {
			case <-s.done:
				t.Stop()
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *sampler) stop() (float64, int) {
	close(s.done)
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak, s.procs
}

// sample sums the Pss of the processes whose environment carries tag; ours remembers, by pid,
// the processes that do, so that their environment is read once.
func sample(tag []byte, ours map[int]bool) (float64, int) {
	pids, err := procfs.PIDs()
	if err != nil {
		return 0, 0
	}
	var kb int64
	n := 0
	for _, pid := range pids {
		dir := "/proc/" + strconv.Itoa(pid)
		if !ours[pid] {
			// Read again at every sweep until it carries the id: a process caught in its exec
			// shows an environment that is not yet its own.
			env, err := os.ReadFile(dir + "/environ")
			if err != nil || !bytes.Contains(append(env, 0), tag) {
				continue
			}
			ours[pid] = true
		}
		if pss, err := procfs.Pss(pid); err == nil {
			kb += pss
			n++
		}
	}
	return float64(kb) / 1024, n
}
