package docker

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// engine is the Docker Engine API over HTTP, the few calls this runtime makes and nothing more
// (https://docs.docker.com/reference/api/engine/). It is written here instead of importing the
// engine's Go client because every simulated process is an exec of the one widetp binary: the
// client's dependencies (image references, digests, tracing) compile regular expressions and
// register types at package init, about 3 ms of every process's start on a loaded core, paid
// dozens of times a run on both runtimes for a client only the harness process ever uses.
//
// The engine is the one the environment names, as the docker CLI reads it: DOCKER_HOST
// (unix:// or tcp://; the default socket otherwise), DOCKER_TLS_VERIFY and DOCKER_CERT_PATH
// (ca.pem, cert.pem, key.pem) for TLS, DOCKER_API_VERSION to pin a version; without it the
// version is negotiated down to the engine's by a ping before the first call.
type engine struct {
	host  string // as given: "unix:///var/run/docker.sock"
	base  string // "http://docker" or "https://host:2376"
	http  *http.Client
	fixed bool // DOCKER_API_VERSION pinned the version

	mu         sync.Mutex
	version    string
	negotiated bool // a ping set version
}

// maxAPIVersion is the newest API this client speaks; an older engine's version is used instead.
// 1.41 (Docker 20.10, Debian's engine) is the oldest that has every call made here.
const (
	maxAPIVersion = "1.47"
	minAPIVersion = "1.41"
)

const defaultDockerHost = "unix:///var/run/docker.sock"

func newEngine() (*engine, error) {
	host := os.Getenv("DOCKER_HOST")
	if host == "" {
		host = defaultDockerHost
	}
	e := &engine{host: host, version: maxAPIVersion}
	if v := os.Getenv("DOCKER_API_VERSION"); v != "" {
		if _, ok := parseAPIVersion(v); !ok {
			return nil, fmt.Errorf("DOCKER_API_VERSION=%q: want a version such as 1.43", v)
		}
		e.version, e.fixed = v, true
	}
	u, err := url.Parse(host)
	if err != nil || u.Scheme == "" {
		return nil, fmt.Errorf("DOCKER_HOST=%q: want unix:///path/to/docker.sock or tcp://host:port", host)
	}
	tr := &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 128}
	switch u.Scheme {
	case "unix":
		path := u.Path
		if path == "" {
			path = u.Host
		}
		if path == "" {
			return nil, fmt.Errorf("DOCKER_HOST=%q names no socket", host)
		}
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}
		e.base = "http://docker"
	case "tcp", "http", "https":
		if u.Host == "" {
			return nil, fmt.Errorf("DOCKER_HOST=%q names no address", host)
		}
		scheme := "http"
		if certs := os.Getenv("DOCKER_CERT_PATH"); certs != "" || u.Scheme == "https" {
			cfg, err := engineTLS(certs, os.Getenv("DOCKER_TLS_VERIFY") != "")
			if err != nil {
				return nil, err
			}
			tr.TLSClientConfig = cfg
			scheme = "https"
		}
		e.base = scheme + "://" + u.Host
	default:
		return nil, fmt.Errorf("DOCKER_HOST=%q: scheme %s is not supported (use unix:// or tcp://; for an engine over ssh, forward its socket with ssh -L and point DOCKER_HOST at it)", host, u.Scheme)
	}
	e.http = &http.Client{Transport: tr}
	return e, nil
}

// engineTLS is the docker CLI's TLS set-up: the client certificate and CA from dir, and the
// engine's certificate checked only when verify is set.
func engineTLS(dir string, verify bool) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: !verify} //nolint:gosec // as DOCKER_TLS_VERIFY says
	if dir == "" {
		return cfg, nil
	}
	if ca, err := os.ReadFile(filepath.Join(dir, "ca.pem")); err == nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, fmt.Errorf("DOCKER_CERT_PATH: %s holds no certificate", filepath.Join(dir, "ca.pem"))
		}
		cfg.RootCAs = pool
	} else if verify {
		return nil, fmt.Errorf("DOCKER_TLS_VERIFY is set: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"))
	if err != nil {
		return nil, fmt.Errorf("DOCKER_CERT_PATH=%s: %w", dir, err)
	}
	cfg.Certificates = []tls.Certificate{cert}
	return cfg, nil
}

func parseAPIVersion(v string) ([2]int, bool) {
	maj, min, ok := strings.Cut(v, ".")
	a, err1 := strconv.Atoi(maj)
	b, err2 := strconv.Atoi(min)
	return [2]int{a, b}, ok && err1 == nil && err2 == nil
}

func olderAPI(a, b string) bool {
	x, _ := parseAPIVersion(a)
	y, _ := parseAPIVersion(b)
	return x[0] < y[0] || x[0] == y[0] && x[1] < y[1]
}

// DaemonHost is the engine's address as the environment gave it.
func (e *engine) DaemonHost() string { return e.host }

// Close closes idle connections; the engine stays usable.
func (e *engine) Close() { e.http.CloseIdleConnections() }

// engineError is an answer of the engine other than success: its status and its message.
type engineError struct {
	Status  int
	Message string
}

func (e *engineError) Error() string {
	return fmt.Sprintf("Error response from daemon: %s (HTTP %d)", e.Message, e.Status)
}

func isNotFound(err error) bool { return engineStatus(err) == http.StatusNotFound }

func isConflict(err error) bool { return engineStatus(err) == http.StatusConflict }

func engineStatus(err error) int {
	var e *engineError
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// do sends one request (body: nil, an io.Reader sent as it is, or a value sent as JSON) and
// returns the response when its status is a success; the caller closes its body.
func (e *engine) do(ctx context.Context, method, path string, query url.Values, body any) (*http.Response, error) {
	var r io.Reader
	ctype := ""
	switch b := body.(type) {
	case nil:
	case io.Reader:
		r, ctype = b, "application/x-tar"
	default:
		js, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		r, ctype = bytes.NewReader(js), "application/json"
	}
	v, err := e.apiVersion(ctx)
	if err != nil {
		return nil, err
	}
	u := e.base + "/v" + v + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		return nil, err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	res, err := e.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if res.StatusCode/100 == 2 || res.StatusCode == http.StatusNotModified {
		return res, nil
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	var m struct{ Message string }
	if json.Unmarshal(b, &m) != nil || m.Message == "" {
		m.Message = strings.TrimSpace(string(b))
	}
	return nil, &engineError{Status: res.StatusCode, Message: m.Message}
}

// call sends a request and decodes its JSON answer into out (nil: the answer is dropped).
func (e *engine) call(ctx context.Context, method, path string, query url.Values, body, out any) error {
	res, err := e.do(ctx, method, path, query, body)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if out == nil {
		_, err = io.Copy(io.Discard, res.Body)
		return err
	}
	if err := json.NewDecoder(res.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: read the engine's answer: %w", method, path, err)
	}
	return nil
}

// apiVersion is the version to speak: pinned, or negotiated by a ping the first time.
func (e *engine) apiVersion(ctx context.Context) (string, error) {
	e.mu.Lock()
	v, known := e.version, e.fixed || e.negotiated
	e.mu.Unlock()
	if known {
		return v, nil
	}
	if err := e.Ping(ctx); err != nil {
		return "", fmt.Errorf("ask the engine for its API version: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.version, nil
}

// Ping asks the engine for its API version and, unless DOCKER_API_VERSION pinned one, speaks the
// older of the engine's and this client's from then on.
func (e *engine) Ping(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.base+"/_ping", nil)
	if err != nil {
		return err
	}
	res, err := e.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	if res.StatusCode != http.StatusOK {
		return &engineError{Status: res.StatusCode, Message: "ping: " + res.Status}
	}
	if e.fixed {
		return nil
	}
	v := res.Header.Get("Api-Version")
	if v == "" {
		// An engine too old to say (before API 1.25) is refused by its first call.
		v = maxAPIVersion
	}
	if _, ok := parseAPIVersion(v); !ok {
		return fmt.Errorf("the engine reports API version %q", v)
	}
	if olderAPI(v, minAPIVersion) {
		return fmt.Errorf("the engine speaks API %s; widetp needs %s or newer (Docker 20.10)", v, minAPIVersion)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if olderAPI(v, maxAPIVersion) {
		e.version = v
	}
	e.negotiated = true
	return nil
}

// filters is the engine's filter argument: name → set of values.
type filters map[string]map[string]bool

func (f filters) query() url.Values {
	js, _ := json.Marshal(f)
	return url.Values{"filters": {string(js)}}
}

// Networks.

type networkSummary struct {
	ID         string `json:"Id"`
	Name       string
	Labels     map[string]string
	Containers map[string]json.RawMessage
	IPAM       struct {
		Config []struct{ Subnet, Gateway string }
	}
}

func (e *engine) NetworkCreate(ctx context.Context, name string, labels map[string]string) (string, error) {
	var out struct {
		ID string `json:"Id"`
	}
	body := map[string]any{"Name": name, "Driver": "bridge", "Labels": labels}
	if err := e.call(ctx, http.MethodPost, "/networks/create", nil, body, &out); err != nil {
		return "", err
	}
	return out.ID, nil
}

func (e *engine) NetworkRemove(ctx context.Context, id string) error {
	return e.call(ctx, http.MethodDelete, "/networks/"+url.PathEscape(id), nil, nil, nil)
}

func (e *engine) NetworkList(ctx context.Context, f filters) ([]networkSummary, error) {
	var out []networkSummary
	return out, e.call(ctx, http.MethodGet, "/networks", f.query(), nil, &out)
}

func (e *engine) NetworkInspect(ctx context.Context, id string) (networkSummary, error) {
	var out networkSummary
	return out, e.call(ctx, http.MethodGet, "/networks/"+url.PathEscape(id), nil, nil, &out)
}

// Containers.

// containerCreate is the body of a container create: the fields this runtime sets.
type containerCreate struct {
	Hostname         string              `json:",omitempty"`
	Image            string              `json:"Image"`
	Cmd              []string            `json:",omitempty"`
	Env              []string            `json:",omitempty"`
	Labels           map[string]string   `json:",omitempty"`
	ExposedPorts     map[string]struct{} `json:",omitempty"`
	HostConfig       hostConfig
	NetworkingConfig networkingConfig
}

type hostConfig struct {
	Tmpfs        map[string]string        `json:",omitempty"`
	Mounts       []mount                  `json:",omitempty"`
	PortBindings map[string][]portBinding `json:",omitempty"`
	Sysctls      map[string]string        `json:",omitempty"`
}

// mount is a volume mounted into a container (the engine's HostConfig.Mounts).
type mount struct {
	Type          string
	Source        string
	Target        string
	ReadOnly      bool           `json:",omitempty"`
	VolumeOptions *volumeOptions `json:",omitempty"`
}

// volumeOptions: NoCopy keeps the engine from copying the image's files at the mount point into
// an empty volume; Labels label the volume if this mount creates it.
type volumeOptions struct {
	NoCopy bool              `json:",omitempty"`
	Labels map[string]string `json:",omitempty"`
}

type portBinding struct {
	HostIP   string `json:"HostIp"`
	HostPort string
}

type networkingConfig struct {
	EndpointsConfig map[string]endpointConfig
}

type endpointConfig struct {
	Aliases []string `json:",omitempty"`
}

func (e *engine) ContainerCreate(ctx context.Context, name string, c containerCreate) (string, error) {
	var out struct {
		ID string `json:"Id"`
	}
	if err := e.call(ctx, http.MethodPost, "/containers/create", url.Values{"name": {name}}, c, &out); err != nil {
		return "", err
	}
	return out.ID, nil
}

func (e *engine) ContainerStart(ctx context.Context, id string) error {
	return e.call(ctx, http.MethodPost, "/containers/"+url.PathEscape(id)+"/start", nil, nil, nil)
}

// containerState is what this runtime reads of a container's inspection.
type containerState struct {
	State *struct {
		Status                     string
		Running, Paused, OOMKilled bool
		ExitCode                   int
	}
	NetworkSettings *struct {
		Ports    map[string][]portBinding
		Networks map[string]*struct{ IPAddress string }
	}
}

// ContainerInspect returns the fields this runtime reads and the engine's whole JSON.
func (e *engine) ContainerInspect(ctx context.Context, id string) (containerState, []byte, error) {
	var raw json.RawMessage
	if err := e.call(ctx, http.MethodGet, "/containers/"+url.PathEscape(id)+"/json", nil, nil, &raw); err != nil {
		return containerState{}, nil, err
	}
	var st containerState
	if err := json.Unmarshal(raw, &st); err != nil {
		return containerState{}, nil, fmt.Errorf("inspect container %.12s: %w", id, err)
	}
	return st, raw, nil
}

// ContainerLogs is the container's output so far (follow: and as it comes, until the program
// ends), multiplexed as the engine sends it for a container without a terminal (demux reads it).
func (e *engine) ContainerLogs(ctx context.Context, id string, follow bool) (io.ReadCloser, error) {
	q := url.Values{"stdout": {"1"}, "stderr": {"1"}}
	if follow {
		q.Set("follow", "1")
	}
	res, err := e.do(ctx, http.MethodGet, "/containers/"+url.PathEscape(id)+"/logs", q, nil)
	if err != nil {
		return nil, err
	}
	return res.Body, nil
}

func (e *engine) ContainerKill(ctx context.Context, id, signal string) error {
	return e.call(ctx, http.MethodPost, "/containers/"+url.PathEscape(id)+"/kill", url.Values{"signal": {signal}}, nil, nil)
}

func (e *engine) ContainerPause(ctx context.Context, id string) error {
	return e.call(ctx, http.MethodPost, "/containers/"+url.PathEscape(id)+"/pause", nil, nil, nil)
}

func (e *engine) ContainerUnpause(ctx context.Context, id string) error {
	return e.call(ctx, http.MethodPost, "/containers/"+url.PathEscape(id)+"/unpause", nil, nil, nil)
}

// ContainerStop sends the stop signal and kills after secs seconds.
func (e *engine) ContainerStop(ctx context.Context, id string, secs int) error {
	return e.call(ctx, http.MethodPost, "/containers/"+url.PathEscape(id)+"/stop", url.Values{"t": {strconv.Itoa(secs)}}, nil, nil)
}

// ContainerRemove removes a container and its anonymous volumes, killing it if it runs.
func (e *engine) ContainerRemove(ctx context.Context, id string) error {
	return e.call(ctx, http.MethodDelete, "/containers/"+url.PathEscape(id), url.Values{"force": {"1"}, "v": {"1"}}, nil, nil)
}

// ContainerWait waits until the container is not running and returns its exit code.
func (e *engine) ContainerWait(ctx context.Context, id string) (int, error) {
	var out struct {
		StatusCode int
		Error      *struct{ Message string }
	}
	if err := e.call(ctx, http.MethodPost, "/containers/"+url.PathEscape(id)+"/wait", url.Values{"condition": {"not-running"}}, nil, &out); err != nil {
		return 0, err
	}
	if out.Error != nil && out.Error.Message != "" {
		return out.StatusCode, errors.New(out.Error.Message)
	}
	return out.StatusCode, nil
}

type containerSummary struct {
	ID     string `json:"Id"`
	Names  []string
	Labels map[string]string
}

func (e *engine) ContainerList(ctx context.Context, f filters) ([]containerSummary, error) {
	q := f.query()
	q.Set("all", "1")
	var out []containerSummary
	return out, e.call(ctx, http.MethodGet, "/containers/json", q, nil, &out)
}

// Exec runs argv in a running container, without a terminal, and returns its exec ID and its
// output stream (multiplexed; it ends when the program does).
func (e *engine) Exec(ctx context.Context, id string, argv []string) (string, io.ReadCloser, error) {
	var ex struct {
		ID string `json:"Id"`
	}
	body := map[string]any{"Cmd": argv, "AttachStdout": true, "AttachStderr": true}
	if err := e.call(ctx, http.MethodPost, "/containers/"+url.PathEscape(id)+"/exec", nil, body, &ex); err != nil {
		return "", nil, fmt.Errorf("exec create: %w", err)
	}
	res, err := e.do(ctx, http.MethodPost, "/exec/"+url.PathEscape(ex.ID)+"/start", nil, map[string]bool{"Detach": false, "Tty": false})
	if err != nil {
		return "", nil, fmt.Errorf("exec start: %w", err)
	}
	return ex.ID, res.Body, nil
}

// ExecInspect says whether an exec still runs and, once it ended, its exit code.
func (e *engine) ExecInspect(ctx context.Context, execID string) (running bool, code int, err error) {
	var out struct {
		Running  bool
		ExitCode int
	}
	err = e.call(ctx, http.MethodGet, "/exec/"+url.PathEscape(execID)+"/json", nil, nil, &out)
	return out.Running, out.ExitCode, err
}

// Images.

type imageSummary struct {
	ID       string `json:"Id"`
	RepoTags []string
	Labels   map[string]string
}

func (e *engine) ImageInspect(ctx context.Context, ref string) error {
	return e.call(ctx, http.MethodGet, "/images/"+ref+"/json", nil, nil, nil)
}

func (e *engine) ImageList(ctx context.Context, f filters) ([]imageSummary, error) {
	q := f.query()
	q.Set("all", "1")
	var out []imageSummary
	return out, e.call(ctx, http.MethodGet, "/images/json", q, nil, &out)
}

func (e *engine) ImageRemove(ctx context.Context, id string) error {
	return e.call(ctx, http.MethodDelete, "/images/"+url.PathEscape(id), url.Values{"force": {"1"}}, nil, nil)
}

// Volumes.

type volumeSummary struct {
	Name   string
	Labels map[string]string
}

func (e *engine) VolumeInspect(ctx context.Context, name string) (volumeSummary, error) {
	var out volumeSummary
	return out, e.call(ctx, http.MethodGet, "/volumes/"+url.PathEscape(name), nil, nil, &out)
}

func (e *engine) VolumeList(ctx context.Context, f filters) ([]volumeSummary, error) {
	var out struct{ Volumes []volumeSummary }
	return out.Volumes, e.call(ctx, http.MethodGet, "/volumes", f.query(), nil, &out)
}

func (e *engine) VolumeRemove(ctx context.Context, name string) error {
	return e.call(ctx, http.MethodDelete, "/volumes/"+url.PathEscape(name), url.Values{"force": {"1"}}, nil, nil)
}

// ImageBuild sends a tar build context to the engine's classic builder (version 1: BuildKit needs a
// session and, on older engines, pulls its frontend) and returns its JSON message stream (readBuildStream).
func (e *engine) ImageBuild(ctx context.Context, buildContext io.Reader, tag string, labels map[string]string) (io.ReadCloser, error) {
	js, err := json.Marshal(labels)
	if err != nil {
		return nil, err
	}
	q := url.Values{"t": {tag}, "labels": {string(js)}, "dockerfile": {"Dockerfile"}, "rm": {"1"}, "forcerm": {"1"}, "version": {"1"}}
	res, err := e.do(ctx, http.MethodPost, "/build", q, buildContext)
	if err != nil {
		return nil, err
	}
	return res.Body, nil
}

// demux copies the engine's multiplexed stream of a container without a terminal to stdout and
// stderr: frames of an 8-byte header (stream, three zero bytes, big-endian length) and the payload.
// A frame on stream 3 is the engine's own error, returned.
func demux(stdout, stderr io.Writer, r io.Reader) error {
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read the engine's stream: %w", err)
		}
		n := int64(binary.BigEndian.Uint32(hdr[4:]))
		var w io.Writer
		switch hdr[0] {
		case 0, 1:
			w = stdout
		case 2:
			w = stderr
		case 3:
			msg, _ := io.ReadAll(io.LimitReader(r, n))
			return fmt.Errorf("the engine reports: %s", strings.TrimSpace(string(msg)))
		default:
			return fmt.Errorf("read the engine's stream: frame for unknown stream %d (a container with a terminal?)", hdr[0])
		}
		if _, err := io.CopyN(w, r, n); err != nil {
			return fmt.Errorf("read the engine's stream: %w", err)
		}
	}
}
