package harness_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/widetp/widetp/harness"
	"github.com/widetp/widetp/internal/testbin"
)

// childEnv makes the test binary act as a harness run that gets SIGKILLed half-way (the leak spec):
// its value is the run id.
const childEnv = "WIDETP_HARNESS_TEST_CHILD"

func TestMain(m *testing.M) {
	// Every runtime of the suite runs this widetp binary's `node` and `store` (and lists a
	// container's /tmp with its `ipcls`); a child run inherits it through $WIDETP_BIN.
	if _, err := testbin.Widetp(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if id := os.Getenv(childEnv); id != "" {
		os.Exit(runChild(id))
	}
	code := m.Run()
	if os.Getenv(childEnv) == "" {
		testbin.Cleanup()
	}
	os.Exit(code)
}

func TestHarness(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "harness")
}

// engineErr is why the Docker specs skip (nil when an engine answered the suite's bounded ping).
var engineErr error

var _ = BeforeSuite(func(ctx SpecContext) {
	engineErr = harness.Ping(ctx, 5*time.Second)
}, NodeTimeout(10*time.Second))

func requireEngine() {
	if engineErr != nil {
		// The first line says where the engine was looked for and why it did not answer.
		Skip(strings.SplitN(engineErr.Error(), "\n", 2)[0])
	}
}

var readyLine = regexp.MustCompile(`^ready `)

func node(host string, args ...string) harness.NodeSpec {
	return harness.NodeSpec{Host: host, Program: hostprobe(), Args: args, Ready: readyLine}
}

// runChild starts a run with a store and two nodes, says "half-way", and waits to be killed.
func runChild(runID string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "child:", err); return 1 }
	d, err := harness.NewDocker(ctx, harness.WithRunID(runID))
	if err != nil {
		return fail(err)
	}
	p, err := hostprobeProgram()
	if err != nil {
		return fail(err)
	}
	if _, err := d.StartStore(ctx, harness.NodeSpec{Host: "store", Program: p, Args: []string{"-bind", "tcp://*:7000"}, Ready: readyLine, Ports: []int{7000}}); err != nil {
		return fail(err)
	}
	if err := d.StartNodes(ctx, harness.NodeSpec{Host: "head", Program: p, Ready: readyLine}, harness.NodeSpec{Host: "follower", Program: p, Ready: readyLine}); err != nil {
		return fail(err)
	}
	fmt.Println("half-way", runID)
	// Block until killed; the parent holds stdin open. Nothing here closes the run: that is the point.
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	return 2
}
