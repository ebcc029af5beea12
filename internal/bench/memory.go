package bench

import (
	"bytes"
	"os"
	"strconv"
	"sync"
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
	done  chan struct{}
	wg    sync.WaitGroup
	peak  float64
	procs int
}

// startSampler sums, sweep after sweep, the proportional set size of every process on the machine
// whose environment carries WIDETP_RUN=<runID> (every host's program and what it starts, in a
// container or not), and keeps the largest sum.
func startSampler(runID string) *sampler {
	s := &sampler{done: make(chan struct{})}
	tag := []byte(nodeapi.EnvRun + "=" + runID + "\x00")
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			began := time.Now()
			if mib, n := sample(tag); mib > s.peak {
				s.peak, s.procs = mib, n
			}
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
	return s.peak, s.procs
}

func sample(tag []byte) (float64, int) {
	pids, err := procfs.PIDs()
	if err != nil {
		return 0, 0
	}
	var kb int64
	n := 0
	for _, pid := range pids {
		dir := "/proc/" + strconv.Itoa(pid)
		env, err := os.ReadFile(dir + "/environ")
		if err != nil || !bytes.Contains(append(env, 0), tag) {
			continue
		}
		b, err := os.ReadFile(dir + "/smaps_rollup")
		if err != nil {
			continue
		}
		for _, line := range bytes.Split(b, []byte("\n")) {
			if v, ok := bytes.CutPrefix(line, []byte("Pss:")); ok {
				f := bytes.Fields(v)
				if len(f) > 0 {
					if x, err := strconv.ParseInt(string(f[0]), 10, 64); err == nil {
						kb += x
						n++
					}
				}
				break
			}
		}
	}
	return float64(kb) / 1024, n
}
