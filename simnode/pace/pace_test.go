package pace

import (
	"testing"
	"time"
)

func TestPauseIsAShareOfTheWaitBetweenItsBounds(t *testing.T) {
	first, largest := 10*time.Millisecond, 500*time.Millisecond
	for _, tc := range []struct{ waited, want time.Duration }{
		{0, first},
		{100 * time.Millisecond, first},
		{400 * time.Millisecond, 20 * time.Millisecond},
		{2 * time.Second, 100 * time.Millisecond},
		{10 * time.Second, largest},
		{time.Hour, largest},
	} {
		if got := Pause(tc.waited, first, largest); got != tc.want {
			t.Errorf("Pause(%v) = %v, want %v", tc.waited, got, tc.want)
		}
	}
}

// Attempts over a wait grow with its logarithm until the largest pause takes over: a 60 s wait
// costs a couple of hundred attempts, where a fixed 50 ms pace costs 1,200.
func TestAttemptsOverALongWait(t *testing.T) {
	first, largest := 10*time.Millisecond, 500*time.Millisecond
	count := func(wait time.Duration) int {
		n := 0
		for waited := time.Duration(0); waited < wait; waited += Pause(waited, first, largest) {
			n++
		}
		return n
	}
	if n := count(time.Second); n < 40 || n > 70 {
		t.Errorf("attempts over 1 s: %d, want the quick pace of a short wait (40 to 70)", n)
	}
	if n := count(60 * time.Second); n > 250 {
		t.Errorf("attempts over 60 s: %d, want at most 250", n)
	}
}
