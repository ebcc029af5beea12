package address

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Shared is one opening of a named per-host file, the way vLLM's SharedOffloadRegion opens
// /dev/shm/vllm_offload_<name>.mmap: the first opener creates it (O_CREAT|O_EXCL) and owns it;
// every later opener opens the existing file and uses what the creator made. The creator writes
// its process ID and key into the file, which is how a later opener knows whose it got.
type Shared struct {
	file    string
	creator bool
	// CreatorID and CreatorKey name who created the file (this opener when it did).
	CreatorID, CreatorKey string
}

type sharedHeader struct {
	ID  string `json:"id"`
	Key string `json:"key"`
}

// SharedFile maps the model's shm:///path to the file this simulated host uses: the path itself
// in a container, moved under root in a local run (each simulated host has its own root).
func SharedFile(endpoint, root string) (string, error) {
	const scheme = "shm://"
	p, ok := strings.CutPrefix(endpoint, scheme)
	if !ok || !filepath.IsAbs(p) {
		return "", fmt.Errorf("shared resource %q is not shm:///absolute/path", endpoint)
	}
	if root != "" {
		p = filepath.Join(root, p)
	}
	return filepath.Clean(p), nil
}

// OpenShared opens (creating it first when nobody has) the file at path for the process id with
// key. A later opener waits, up to bound, for the creator's header, as SharedOffloadRegion waits
// for the creator's ftruncate.
func OpenShared(ctx context.Context, path, id, key string, bound time.Duration) (*Shared, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err == nil {
		defer f.Close()
		b, _ := json.Marshal(sharedHeader{ID: id, Key: key})
		if _, err := f.Write(append(b, '\n')); err != nil {
			return nil, fmt.Errorf("create %s: %w", path, err)
		}
		if err := f.Sync(); err != nil {
			return nil, fmt.Errorf("create %s: %w", path, err)
		}
		return &Shared{file: path, creator: true, CreatorID: id, CreatorKey: key}, nil
	}
	if !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond) // SharedOffloadRegion polls the size every 5 ms
	defer tick.Stop()
	for {
		h, err := readHeader(path)
		if err == nil {
			return &Shared{file: path, CreatorID: h.ID, CreatorKey: h.Key}, nil
		}
		if !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline.C:
			return nil, fmt.Errorf("TimeoutError: Timed out waiting for mmap file %s to be created (%v)", path, bound)
		case <-tick.C:
		}
	}
}

func readHeader(path string) (sharedHeader, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return sharedHeader{}, err
	}
	line, _, found := strings.Cut(string(b), "\n")
	if !found {
		return sharedHeader{}, io.ErrUnexpectedEOF
	}
	var h sharedHeader
	if err := json.Unmarshal([]byte(line), &h); err != nil {
		return sharedHeader{}, fmt.Errorf("header of %s: %w", path, err)
	}
	return h, nil
}

// Close releases the opening; the creator unlinks the file, as SharedOffloadRegion.cleanup does.
func (s *Shared) Close() error {
	if !s.creator {
		return nil
	}
	if err := os.Remove(s.file); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Prober is vllm.PortProber over the real socket layer of this simulated host: a bind of every
// interface (this host's own address in a local run), released at once, as
// socket.socket().bind(("", port)) in a `with` block is.
type Prober struct {
	Net Net
	// Tries counts the binds made, for the hang detail.
	Tries int
}

func (p *Prober) ip() string {
	if p.Net.local() {
		return p.Net.ListenIP
	}
	return "0.0.0.0"
}

// Bind reports whether port binds.
func (p *Prober) Bind(port int) bool {
	p.Tries++
	ln, err := net.Listen("tcp", net.JoinHostPort(p.ip(), strconv.Itoa(port)))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// Ephemeral binds port 0 and returns the port the kernel chose.
func (p *Prober) Ephemeral() (int, error) {
	p.Tries++
	ln, err := net.Listen("tcp", net.JoinHostPort(p.ip(), "0"))
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
