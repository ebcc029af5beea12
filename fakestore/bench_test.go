package fakestore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/widetp/widetp/fakestore"
	"github.com/widetp/widetp/fakestore/api"
)

// BenchmarkMetadataPutGet measures metadata PUT+GET pairs over loopback with keep-alive
// connections from parallel clients (target: 20,000 pairs/s on 2 cores).
func BenchmarkMetadataPutGet(b *testing.B) {
	_, c := start(b, fakestore.Config{})
	ctx := context.Background()
	var n atomic.Int64
	b.SetParallelism(8) // 8 goroutines per core keep the loopback busy while others wait
	b.ResetTimer()
	begin := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		key := fmt.Sprintf("mooncake/ram/bench-%d", n.Add(1))
		val := []byte(`{"name":"bench","protocol":"tcp","tcp_data_port":12345,"buffers":[]}`)
		for pb.Next() {
			if _, err := c.Put(ctx, key, val); err != nil {
				b.Error(err)
				return
			}
			if _, err := c.Get(ctx, key); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(begin).Seconds(), "pairs/s")
}

// BenchmarkLongPollWake measures how long a parked long poll takes to return after an event is
// appended (target: < 5 ms), over real HTTP.
func BenchmarkLongPollWake(b *testing.B) {
	s, c := start(b, fakestore.Config{})
	ctx := context.Background()
	var total time.Duration
	var worst time.Duration
	for i := 0; i < b.N; i++ {
		_, last := s.Events(0)
		woke := make(chan time.Time, 1)
		go func() {
			r, err := c.Events(ctx, last, 10*time.Second)
			if err != nil || len(r.Events) == 0 {
				b.Errorf("long poll: %+v %v", r, err)
			}
			woke <- time.Now()
		}()
		parkedOne(b, s)
		appended := time.Now()
		s.AddFault(api.Fault{Kind: api.FaultRestart}) // appends a store event, no request needed
		d := (<-woke).Sub(appended)
		total += d
		worst = max(worst, d)
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "wake-ms")
	b.ReportMetric(float64(worst.Microseconds())/1000, "worst-wake-ms")
}
