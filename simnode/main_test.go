package simnode_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/widetp/widetp/fakestore"
	"github.com/widetp/widetp/fakestore/api"
	"github.com/widetp/widetp/fakestore/client"
	"github.com/widetp/widetp/internal/testbin"
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/simnode"
)

// binary is the widetp binary, built once for every test of the package (or $WIDETP_BIN): nodes
// (`widetp node`) and their processes are real OS processes.
var binary string

func TestMain(m *testing.M) {
	var err error
	if binary, err = testbin.Widetp(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}

// testBound bounds every wait of a test: a healthy node of these sizes is up in well under a
// second, so reaching it means the test failed, not that the machine is slow.
const testBound = 60 * time.Second

// store is an in-process fake Mooncake store on loopback ports.
type store struct {
	srv  *fakestore.Server
	c    *client.Client
	urls simnode.StoreURLs
}

func newStore(t testing.TB) *store {
	t.Helper()
	srv, err := fakestore.New(fakestore.Config{MetadataAddr: "127.0.0.1:0", MasterAddr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close(context.Background()) })
	urls := simnode.StoreURLs{Metadata: srv.URL(api.PlaneMetadata), Master: srv.URL(api.PlaneMaster), Admin: srv.URL(api.PlaneAdmin)}
	c, err := client.New(client.WithMetadataURL(urls.Metadata), client.WithMasterURL(urls.Master), client.WithAdminURL(urls.Admin))
	if err != nil {
		t.Fatal(err)
	}
	return &store{srv: srv, c: c, urls: urls}
}

// waitRecords long-polls the store's event log until the records satisfy done, and returns them.
func (s *store) waitRecords(t testing.TB, what string, done func(map[string]report.Process) bool) map[string]report.Process {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testBound)
	defer cancel()
	var since uint64
	for {
		recs := map[string]report.Process{}
		for _, r := range s.srv.Reports() {
			recs[r.ID] = r
		}
		if done(recs) {
			return recs
		}
		resp, err := s.c.Events(ctx, since, 5*time.Second)
		if err != nil {
			ids := []string{}
			for id, r := range recs {
				ids = append(ids, fmt.Sprintf("%s(ready=%v exit=%+v)", id, r.Ready, r.Exit))
			}
			t.Fatalf("waiting for %s: %v; records: %s", what, err, strings.Join(ids, " "))
		}
		if resp.LastSeq > since {
			since = resp.LastSeq
		}
	}
}

// node is a running `widetp node`.
type node struct {
	t      testing.TB
	host   string
	root   string // WIDETP_IPC_ROOT: the host's private /tmp
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{}
	code   int
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// hostEnv is a simulated host of a local run: its name, private ipc root and loopback address.
type hostEnv struct {
	name, ip string
	hosts    string // WIDETP_HOSTS
}

func startNode(t testing.TB, h hostEnv, cfg simnode.Config) *node {
	t.Helper()
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	root, err := os.MkdirTemp("", "ipc-"+h.name+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	cmd := exec.Command(binary, "node")
	cmd.Env = append(os.Environ(),
		simnode.EnvConfig+"="+string(cfgJSON),
		simnode.EnvHost+"="+h.name,
		simnode.EnvIPCRoot+"="+root,
		simnode.EnvListenIP+"="+h.ip,
		simnode.EnvHosts+"="+h.hosts,
	)
	n := &node{t: t, host: h.name, root: root, cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = n.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), simnode.ReadyLine) {
				ready <- sc.Text()
			}
		}
		close(ready)
		io.Copy(io.Discard, stdout)
	}()
	go func() {
		cmd.Wait()
		n.code = cmd.ProcessState.ExitCode()
		close(n.done)
	}()
	t.Cleanup(func() {
		n.stop()
		if t.Failed() {
			t.Logf("node %s stderr:\n%s", h.name, n.stderr.String())
		}
	})
	select {
	case line, ok := <-ready:
		if !ok {
			<-n.done
			t.Fatalf("node %s exited %d before it was up:\n%s", h.name, n.code, n.stderr.String())
		}
		_ = line
	case <-time.After(testBound):
		t.Fatalf("node %s not up within %v:\n%s", h.name, testBound, n.stderr.String())
	}
	return n
}

// stop tears the node down with SIGTERM, as the harness does, and returns its exit code.
func (n *node) stop() int {
	select {
	case <-n.done:
		return n.code
	default:
	}
	n.cmd.Process.Signal(syscall.SIGTERM)
	return n.wait()
}

// wait returns the node's exit code once it exited on its own, bounded.
func (n *node) wait() int {
	select {
	case <-n.done:
		return n.code
	case <-time.After(testBound):
		n.cmd.Process.Kill()
		<-n.done
		n.t.Fatalf("node %s did not exit within %v:\n%s", n.host, testBound, n.stderr.String())
		return -1
	}
}

// storeConfig is a node config on the test's store with short timeouts.
func (s *store) config(host string) simnode.Config {
	return simnode.Config{
		Host:  host,
		Store: s.urls,
		Seed:  "1",
		Timeouts: simnode.Timeouts{
			Rendezvous: simnode.Duration(10 * time.Second),
			Lookup:     simnode.Duration(2 * time.Second),
			Store:      simnode.Duration(5 * time.Second),
		},
	}
}
