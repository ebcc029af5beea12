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

// sampleEvery paces the memory sampler: often enough to see a run's peak (processes live for
// seconds). The sampler runs only in a run that is not timed.
const sampleEvery = 200 * time.Millisecond

type sampler struct {
	done  chan struct{}
	wg    sync.WaitGroup
	peak  float64
	procs int
}

// startSampler sums, every sampleEvery, the proportional set size of every process on the machine
// whose environment carries WIDETP_RUN=<runID> (every host's program and what it starts, in a
// container or not), and keeps the largest sum.
func startSampler(runID string) *sampler {
	s := &sampler{done: make(chan struct{})}
	tag := []byte(nodeapi.EnvRun + "=" + runID + "\x00")
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(sampleEvery)
		defer t.Stop()
		for {
			if mib, n := sample(tag); mib > s.peak {
				s.peak, s.procs = mib, n
			}
			select {
			case <-s.done:
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
