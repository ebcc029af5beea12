package fakestore_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/widetp/widetp/fakestore"
)

// TestMain lets a test re-run this test binary as `widetp store` (FAKESTORE_RUN_MAIN=1), so
// the signal and exit-code specs exercise a real OS process without a separate build.
func TestMain(m *testing.M) {
	if os.Getenv("FAKESTORE_RUN_MAIN") == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		code := fakestore.Command(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), "FAKESTORE_RUN_MAIN=1")
	return cmd
}

func TestHelpExitsZeroAndDocumentsTheFlags(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := command(ctx, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("--help: %v\n%s", err, out)
	}
	for _, want := range []string{"-metadata-addr", "-master-addr", "-admin-addr", "-flavor", "-duplicate-segments",
		"-client-ttl", "-fault", "/_widetp/", "50051"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("--help does not mention %q:\n%s", want, out)
		}
	}
}

func TestBadInputExitsTwoNamingTheProblem(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--no-such-flag"}, "no-such-flag"},
		{[]string{"--flavor", "rust"}, `flavor "rust"`},
		{[]string{"--duplicate-segments", "maybe"}, `duplicate-segments "maybe"`},
		{[]string{"--master-addr", ":50051"}, "50051"},
		{[]string{"--fault", "kind=explode"}, `fault kind "explode"`},
		{[]string{"--fault", "kind=latency,latency=nonsense"}, "latency"},
		{[]string{"--client-ttl", "0s"}, "--client-ttl"},
		{[]string{"extra"}, "unexpected arguments"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			out, err := command(ctx, tc.args...).CombinedOutput()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != 2 {
				t.Fatalf("want exit status 2, got %v\n%s", err, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("stderr does not name %q:\n%s", tc.want, out)
			}
		})
	}
}

func TestServesUntilSignalledThenExitsZero(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := command(ctx, "--metadata-addr", "127.0.0.1:0", "--master-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0",
				"--flavor", "python", "--fault", "kind=latency,plane=admin,latency=1ms")
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatalf("start fakestore: %v", err)
			}
			lines := bufio.NewReader(stdout)
			first, err := lines.ReadString('\n')
			if err != nil {
				t.Fatalf("read the startup line: %v", err)
			}
			m := regexp.MustCompile(`flavor=python metadata=(\S+) master=(\S+) admin=(\S+)`).FindStringSubmatch(first)
			if m == nil {
				t.Fatalf("startup line %q does not give the three URLs", first)
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, m[3]+"/health", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("GET /health of the running store: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"service_ready":true`) {
				t.Fatalf("GET /health: %d %s", resp.StatusCode, body)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			rest, _ := io.ReadAll(lines)
			if err := cmd.Wait(); err != nil {
				t.Fatalf("after %v: %v", sig, err)
			}
			if !strings.Contains(string(rest), "fakestore: stopped") {
				t.Errorf("no clean-stop line after %v: %q", sig, rest)
			}
		})
	}
}
