package lookup

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	zmq "github.com/widetp/widetp/internal/zmq"
)

// modelPath is the path vLLM's get_zmq_rpc_path_lookup computes for host h, DP index 0, with the
// default VLLM_RPC_BASE_PATH (/tmp) and lookup_rpc_port 0.
const modelPath = "ipc:///tmp/lookup_rpc_port_0_host_h_dp_rank0"

// requestBound bounds every request in these tests; a healthy local ipc round trip takes well under
// a millisecond, so a timeout here is a real failure, not slowness.
const requestBound = 5 * time.Second

// shortRoot is a private ipc root short enough for unix socket paths (t.TempDir's names are long).
func shortRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "lk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func listen(t *testing.T, root string, opts ...Option) *Server {
	t.Helper()
	s, err := Listen(modelPath, append([]Option{WithRoot(root)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func dial(t *testing.T, root string, timeout time.Duration, opts ...Option) *Client {
	t.Helper()
	c, err := Dial(modelPath, timeout, append([]Option{WithRoot(root)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func nonceReq(b byte, tokens uint32) Request {
	return Request{NumTokens: tokens, Hashes: [][]byte{bytes.Repeat([]byte{b}, 32), bytes.Repeat([]byte{0x42}, 32)}, ApplyEagle: true}
}

func TestServerAnswersLookupAndRecordsNonce(t *testing.T) {
	root := shortRoot(t)
	var seen []Request
	s := listen(t, root, WithHits(func(r Request) uint32 { seen = append(seen, r); return r.NumTokens / 2 }))
	c := dial(t, root, requestBound)
	ctx := context.Background()
	for _, tok := range []uint32{48, 0x01020304} {
		hits, err := c.Lookup(ctx, nonceReq(0xA1, tok))
		if err != nil {
			t.Fatal(err)
		}
		if hits != tok/2 {
			t.Fatalf("hits = %d, want %d", hits, tok/2)
		}
	}
	ok, err := c.Reset(ctx)
	if err != nil || !ok {
		t.Fatalf("Reset = %v, %v; want acknowledged", ok, err)
	}
	want := hex.EncodeToString(bytes.Repeat([]byte{0xA1}, 32))
	if got := s.Served(); !slices.Equal(got, []string{want, want}) {
		t.Fatalf("Served = %v, want the nonce twice", got)
	}
	if len(seen) != 2 || len(seen[0].Hashes) != 2 || !seen[0].ApplyEagle {
		t.Fatalf("server saw %+v", seen)
	}
}

func TestServerKeepsServingAfterCorruptFrames(t *testing.T) {
	root := shortRoot(t)
	listen(t, root, WithHits(func(r Request) uint32 { return 9 }))
	endpoint, _, _ := Endpoint(modelPath, root)
	zctx, err := zmq.NewContext()
	if err != nil {
		t.Fatal(err)
	}
	defer zctx.Term()
	raw := func(frames ...[]byte) []byte {
		t.Helper()
		sock, err := zctx.NewSocket(zmq.REQ)
		if err != nil {
			t.Fatal(err)
		}
		defer sock.Close()
		sock.SetLinger(0)
		sock.SetRcvtimeo(requestBound)
		if err := sock.Connect(endpoint); err != nil {
			t.Fatal(err)
		}
		parts := make([]any, len(frames))
		for i := range frames {
			parts[i] = frames[i]
		}
		if _, err := sock.SendMessage(parts...); err != nil {
			t.Fatal(err)
		}
		reply, err := sock.RecvBytes(0)
		if err != nil {
			t.Fatalf("no reply to %d corrupt frames: %v", len(frames), err)
		}
		return reply
	}
	for name, frames := range map[string][][]byte{
		"unknown type": {[]byte("bogus")},
		"truncated":    {MsgLookup, {0}},
		"oversized":    {MsgLookup, u32(1), u16(32), make([]byte, MaxHashBlob+32), {1}},
		"empty frame":  {{}},
	} {
		if got := raw(frames...); !bytes.Equal(got, RespErr) {
			t.Fatalf("%s: reply %x, want %x", name, got, RespErr)
		}
	}
	if got := raw(MsgLookup, u32(5), u16(1), []byte{7}, []byte{0}); !bytes.Equal(got, EncodeHits(9)) {
		t.Fatalf("lookup after corrupt frames: reply %x, want %x", got, EncodeHits(9))
	}
}

// TestSecondBinderCapturesNewClients is the takeover vLLM's co-located engines hit when their
// lookup paths collide: the server unlinks the file and libzmq binds again, so clients that connect
// afterwards reach the second server while the first stays alive, serving only old connections.
func TestSecondBinderCapturesNewClients(t *testing.T) {
	root := shortRoot(t)
	first := listen(t, root, WithHits(func(Request) uint32 { return 1 }))
	early := dial(t, root, requestBound)
	ctx := context.Background()
	if hits, err := early.Lookup(ctx, nonceReq(0x01, 10)); err != nil || hits != 1 {
		t.Fatalf("early client before takeover: %d, %v", hits, err)
	}
	second := listen(t, root, WithHits(func(Request) uint32 { return 2 }))
	late := dial(t, root, requestBound)
	if hits, err := late.Lookup(ctx, nonceReq(0x02, 10)); err != nil || hits != 2 {
		t.Fatalf("late client: %d, %v; want the second server (2)", hits, err)
	}
	if hits, err := early.Lookup(ctx, nonceReq(0x03, 10)); err != nil || hits != 1 {
		t.Fatalf("early client after takeover: %d, %v; want its existing connection to the first server (1)", hits, err)
	}
	n := func(b byte) string { return hex.EncodeToString(bytes.Repeat([]byte{b}, 32)) }
	if got := first.Served(); !slices.Equal(got, []string{n(1), n(3)}) {
		t.Fatalf("first server served %v", got)
	}
	if got := second.Served(); !slices.Equal(got, []string{n(2)}) {
		t.Fatalf("second server served %v", got)
	}
}

func TestClientTimesOutWithoutServer(t *testing.T) {
	// No server completes a handshake: the patience does not apply.
	c := dial(t, shortRoot(t), 200*time.Millisecond, WithPatience(time.Hour))
	start := time.Now()
	_, err := c.Lookup(context.Background(), nonceReq(1, 1))
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("Lookup without a server: %v, want ErrTimeout", err)
	}
	if _, err := c.Lookup(context.Background(), nonceReq(1, 1)); err == nil {
		t.Fatal("a timed-out REQ client accepted a second request")
	}
	if time.Since(start) > requestBound {
		t.Fatalf("timeout of 200ms took %v", time.Since(start))
	}
}

// TestClientWaitsForAServerThatCompletedTheHandshake: on a loaded machine a server that is up
// answers late; the client's socket met it, so its answer is waited for past the timeout, up to
// the patience (vLLM's LookupKeyClient waits for ever).
func TestClientWaitsForAServerThatCompletedTheHandshake(t *testing.T) {
	root := shortRoot(t)
	const timeout = 100 * time.Millisecond
	release := make(chan struct{})
	asked := make(chan struct{}, 1)
	listen(t, root, WithHits(func(Request) uint32 {
		asked <- struct{}{}
		<-release
		return 7
	}))
	go func() {
		<-asked
		// The answer leaves only once the client's timeout has passed.
		<-time.After(3 * timeout)
		close(release)
	}()
	c := dial(t, root, timeout, WithPatience(time.Minute))
	start := time.Now()
	hits, err := c.Lookup(context.Background(), nonceReq(1, 1))
	if err != nil || hits != 7 {
		t.Fatalf("Lookup of a server that answers after %v: %d, %v; want its late answer, 7", 3*timeout, hits, err)
	}
	if d := time.Since(start); d < 3*timeout {
		t.Fatalf("answered after %v, before the server sent its answer", d)
	}
}

// TestClientGivesUpOnASilentServerAtThePatience: a server that completed the handshake and never
// answers is a timeout once the patience ran out, and the error says the server was there.
func TestClientGivesUpOnASilentServerAtThePatience(t *testing.T) {
	root := shortRoot(t)
	release := make(chan struct{})
	listen(t, root, WithHits(func(Request) uint32 { <-release; return 0 }))
	// Registered after listen's cleanup, so it runs first: the server's goroutine is let go
	// before the server is closed.
	t.Cleanup(func() { close(release) })
	c := dial(t, root, 100*time.Millisecond, WithPatience(400*time.Millisecond))
	start := time.Now()
	_, err := c.Lookup(context.Background(), nonceReq(1, 1))
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, ErrSilent) {
		t.Fatalf("Lookup of a silent server: %v; want ErrTimeout and ErrSilent", err)
	}
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Fatalf("gave up after %v, before the patience of 400ms", d)
	}
}

func TestClientHonoursContextDeadline(t *testing.T) {
	c := dial(t, shortRoot(t), time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.Lookup(ctx, nonceReq(1, 1)); !errors.Is(err, ErrTimeout) {
		t.Fatalf("Lookup past the context deadline: %v, want ErrTimeout", err)
	}
}

func TestCloseRemovesTheSocketFile(t *testing.T) {
	root := shortRoot(t)
	s := listen(t, root)
	_, file, _ := Endpoint(modelPath, root)
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("bound server has no socket file: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket file after Close: %v", err)
	}
}

// python is Debian's interpreter, the one with python3-zmq (the pyenv python3 on PATH has none).
const python = "/usr/bin/python3"

func pythonCmd(ctx context.Context, t *testing.T, script string, args ...string) *exec.Cmd {
	t.Helper()
	if err := exec.Command(python, "-c", "import zmq").Run(); err != nil {
		t.Fatalf("%s cannot import zmq (scripts/deps.sh installs python3-zmq): %v", python, err)
	}
	return exec.CommandContext(ctx, python, append([]string{filepath.Join("testdata", script)}, args...)...)
}

func TestPyzmqVLLMClientAgainstServer(t *testing.T) {
	root := shortRoot(t)
	s := listen(t, root, WithHits(func(r Request) uint32 { return r.NumTokens - 16 }))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := pythonCmd(ctx, t, "vllm_client.py", s.Endpoint(), "5000").Output()
	if err != nil {
		t.Fatalf("vllm_client.py: %v", err)
	}
	var got map[string]string
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("vllm_client.py output %q: %v", out, err)
	}
	want := map[string]string{
		"lookup":        "00000020", // 48 - 16
		"lookup_empty":  "fffffff7", // 7 - 16 wraps: the server's u32, not Python's int, sets the width
		"reset":         "01",
		"garbage":       "00",
		"short_lookup":  "00",
		"ragged_blob":   "00",
		"after_garbage": "00000000",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: reply %q, want %q", k, got[k], v)
		}
	}
	nonces := s.Served()
	if len(nonces) != 2 || nonces[0] != hex.EncodeToString(bytes.Repeat([]byte{0xAB}, 32)) {
		t.Fatalf("Served = %v, want the first hash of each lookup with hashes", nonces)
	}
}

func TestClientAgainstPyzmqVLLMServer(t *testing.T) {
	root := shortRoot(t)
	endpoint, file, _ := Endpoint(modelPath, root)
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := pythonCmd(ctx, t, "vllm_server.py", endpoint, "2", "10000")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("vllm_server.py did not come up: %q %v", lines.Text(), lines.Err())
	}
	c := dial(t, root, requestBound)
	req := nonceReq(0x5A, 100)
	hits, err := c.Lookup(ctx, req)
	if err != nil || hits != 99 {
		t.Fatalf("Lookup against pyzmq = %d, %v; want 99", hits, err)
	}
	if ok, err := c.Reset(ctx); err != nil || !ok {
		t.Fatalf("Reset against pyzmq = %v, %v", ok, err)
	}
	var seen []map[string]any
	for lines.Scan() {
		var m map[string]any
		if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
			t.Fatalf("vllm_server.py line %q: %v", lines.Text(), err)
		}
		seen = append(seen, m)
	}
	if len(seen) != 2 {
		t.Fatalf("python server saw %v", seen)
	}
	l := seen[0]
	if l["type"] != "lookup" || l["num_tokens"] != 100.0 || l["hash_len"] != 32.0 || l["apply_eagle"] != true {
		t.Fatalf("python server parsed %v", l)
	}
	hashes, _ := l["hashes"].([]any)
	if len(hashes) != 2 || hashes[0] != hex.EncodeToString(req.Hashes[0]) {
		t.Fatalf("python server parsed hashes %v", hashes)
	}
	if seen[1]["type"] != "reset" {
		t.Fatalf("second request parsed as %v", seen[1])
	}
}
