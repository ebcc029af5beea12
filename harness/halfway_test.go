package harness_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// startHalfWay runs this test binary as a child harness run (TestMain picks the role from env,
// "NAME=value"), waits until it prints "half-way <rest>", and returns it with <rest>. The child
// then blocks on its stdin, which stays open until the spec's cleanup kills it; an exit before
// half-way, or ctx ending first, fails the spec with the child's stderr.
func startHalfWay(ctx context.Context, env string) (*exec.Cmd, string) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env)
	stdin, err := cmd.StdinPipe()
	Expect(err).NotTo(HaveOccurred())
	stdout, err := cmd.StdoutPipe()
	Expect(err).NotTo(HaveOccurred())
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	Expect(cmd.Start()).To(Succeed())
	DeferCleanup(func() {
		_ = cmd.Process.Kill()
		_ = stdin.Close()
	})
	said := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "half-way "); ok {
				said <- rest
				return
			}
		}
		close(said)
	}()
	select {
	case rest, ok := <-said:
		Expect(ok).To(BeTrue(), "the child ended before half-way: %s", stderr.String())
		return cmd, rest
	case <-ctx.Done():
		Fail("the child did not get half-way in time: " + stderr.String())
		return nil, ""
	}
}

// lockedBuffer is a child's stderr, written by exec's copier while the spec may read it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
