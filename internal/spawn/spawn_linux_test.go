package spawn

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A child inherits what the spawner's thread set up (here its timer slack), whichever goroutine
// asks for the start.
func TestChildrenInheritTheSpawnersSetup(t *testing.T) {
	const slack = 3_000_000
	s := New(func() { _ = unix.Prctl(unix.PR_SET_TIMERSLACK, slack, 0, 0, 0) })
	for i := 0; i < 3; i++ {
		cmd := exec.Command("sleep", "60")
		if err := s.Start(cmd); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "timerslack_ns"))
		cmd.Process.Kill()
		cmd.Wait()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(b)); got != strconv.Itoa(slack) {
			t.Errorf("start %d: child's timer slack %s ns, want %d", i, got, slack)
		}
	}
}
