// Package probe is the vllm planner: it plans a deployment by running vLLM's own launch code, in
// a Python program of widetp's (python/widetp_probe, embedded in the binary and extracted to a
// cache directory keyed by its content hash), and returns the same plans (vllm.NodePlan) the Go
// model emits, so simnode and vllm.PredictPlans run them unchanged.
//
// The Python program imports a vLLM installation or source tree and stands in for what vLLM
// needs but planning must not touch; everything identity depends on runs as vLLM's code:
//
//   - the `vllm serve` parser (FlexibleArgumentParser + make_arg_parser, ServeSubcommand.validate),
//     ServeSubcommand.cmd's choice of launch path, run_server / run_multi_api_server /
//     run_headless / run_dp_supervisor;
//   - EngineArgs.create_engine_config from its start through ParallelConfig(...) with its
//     validators and properties (the cut is the next step, create_speculative_config); the
//     model config it would load from Hugging Face is a stand-in whose is_moe is the scenario's;
//     then VllmConfig.__post_init__'s KV connector part (kvconfig.py: _post_init_kv_transfer_config,
//     KVConnectorFactory.supports_hma_config without --disable-hybrid-kv-cache-manager,
//     _verify_kv_transfer_compat), the registered connector classes read from their source as
//     stand-ins that subclass SupportsHMA when the real ones do;
//   - launch_core_engines, CoreEngineProcManager, wait_for_engine_startup (its checks of every
//     engine's HELLO, remote ones included: a second pass feeds each front end the messages of
//     the engines other commands start), EngineCoreProc.run_engine_core, the handshakes,
//     DPEngineCoreProc._init_data_parallel (its DP group recorded, not formed), EngineCore up to
//     its executor, MultiprocExecutor._init_executor (worker ranks) and UniProcExecutor;
//   - every worker through Worker.init_device and init_worker_distributed_environment to
//     torch.distributed.init_process_group (the torch world's address, size and rank; it stops
//     there), then ensure_kv_transfer_initialized's engine_id sync over stood-in TP/PP groups,
//     KVConnectorFactory.create_connector's class and HMA checks (the class built is the
//     stand-in: no connector constructor runs), and the Mooncake store connector's identity (get_zmq_rpc_path_lookup: DP index and lookup path;
//     get_requester_local_hostname(get_ip()): the segment host; the lookup server on rank 0);
//     the scheduler side of each engine core likewise.
//
// Stood in: torch (device counts are the node's GPUs narrowed by CUDA_VISIBLE_DEVICES), zmq (the
// handshake's far ends), msgspec, transformers, ray, uvloop and the web stack, the GPU platform
// (CUDA), process spawning (each simulated process is a fork of its parent), the network (server
// sockets, get_ip's route probe answers the host's name), the DP coordinator and extra API server
// processes (no identity). Where the plan needs a value vLLM draws at random (uuid4 engine ids,
// free ports, the DP port list shipped in the handshake, ipc paths) the probe follows the model's
// documented conventions, all in python/widetp_probe/conventions.py. A vLLM exception becomes the
// process's Crash with vLLM's own type and message, at the stage the plan contract names for where
// it was raised (StageConfig in a front end or launcher, StageEngineInit before a worker's torch
// rendezvous or in an engine core, StageConnectorInit after it). A front end's refusal of an
// engine's HELLO is no crash in the plan: the engines' handshake entries carry the HELLO vLLM sent
// (RendezvousPlan.Hello) and the front end's the engines it expects (RendezvousPlan.Expect), and
// the barrier decides (HandshakeExpect.Refuse); vLLM's own verdict comes back beside the plans
// (PlanWithVerdicts) so that conformance checks the two agree.
//
// Addresses (the plan contract's AddressPlan) are recorded where vLLM's code computes them; the
// channels are AddressChannels. The READY an engine sends carries vLLM's own
// ParallelConfig.compute_hash() (EngineHello.ConfigHash), and a coordinating front end's
// expectation its own (HandshakeExpect.ConfigHash).
//
// Debugging a plan: WIDETP_PROBE_DEBUG=1 in widetp's environment keeps the Python traceback of
// every crash in the probe's plan JSON (crash.traceback); vLLM's own log lines go to the probe's
// stderr, whose last lines an error from the probe quotes.
//
// Not run by the probe (an error names them): the Ray data-parallel backend and Ray executor, and
// torchrun's external_launcher.
package probe

import (
	"bufio"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/widetp/widetp/vllm"
)

//go:embed python/widetp_probe/*.py
var program embed.FS

// AddressChannels are the address channels the probe derives with vLLM's own code (the plan
// contract's AddressPlan, vllm/addresses.go): the front end's HTTP socket (setup_server, with
// serve.py's reuse_port), ParallelConfig's DP master port probe, the DP coordinator's and the
// engine I/O sockets' addresses (DPCoordinator.__init__ to its third address,
// get_engine_zmq_addresses), the executors' distributed_init_method, the handshake, DP group
// and torch world the processes meet at, and the schedulers' KV event publishers
// (EventPublisherFactory.create). The rest — the DP supervisor's health port, the NIXL,
// P2P Mooncake and offloading connectors' side channels and regions — come from connectors and
// servers the probe does not build: a vllm plan lists none of them, and conform compares these.
var AddressChannels = []string{"api-server", "dp-master-ports", "dp-coordinator", "engine-io",
	"executor-init", "dp-handshake", "dp-group", "torch-world", "kv-events"}

// ErrUnavailable marks a vllm planner that cannot start: no python3, no vLLM at the path, vLLM
// that does not import. The CLI exits 2 on it.
var ErrUnavailable = errors.New("vllm planner unavailable")

// EnvVLLM names the environment variable that points the vllm planner at a vLLM checkout or
// installation when --planner vllm names no path.
const EnvVLLM = "WIDETP_VLLM"

// Planner runs one long-lived Python probe process; PlanDeployment sends it one deployment at a
// time. Safe for concurrent use (requests are serialised).
type Planner struct {
	cfg    config
	source vllm.PlannerSource

	mu     sync.Mutex
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr *tailBuffer
	closed bool
}

type config struct {
	python   string
	vllmPath string
	cacheDir string
	startup  time.Duration
	request  time.Duration
}

// Option configures New.
type Option func(*config)

// WithPython runs this interpreter instead of python3 from PATH.
func WithPython(path string) Option { return func(c *config) { c.python = path } }

// WithVLLM imports vLLM from dir: a source tree root or a site-packages directory (either holds
// vllm/__init__.py), or the vllm package directory itself. Without it, the vllm the interpreter
// imports by itself.
func WithVLLM(dir string) Option { return func(c *config) { c.vllmPath = dir } }

// WithCacheDir extracts the Python program under dir instead of the user cache directory.
func WithCacheDir(dir string) Option { return func(c *config) { c.cacheDir = dir } }

// WithTimeouts bounds the probe's start (importing vLLM) and each deployment's planning.
func WithTimeouts(startup, perRequest time.Duration) Option {
	return func(c *config) { c.startup, c.request = startup, perRequest }
}

// New starts the probe and imports vLLM. The error wraps ErrUnavailable when python3 or vLLM is
// missing or vLLM does not import, saying which.
func New(ctx context.Context, opts ...Option) (*Planner, error) {
	cfg := config{python: "python3", startup: 2 * time.Minute, request: 5 * time.Minute}
	for _, o := range opts {
		o(&cfg)
	}
	py, err := exec.LookPath(cfg.python)
	if err != nil {
		return nil, fmt.Errorf("%w: --planner vllm runs vLLM's launch code with Python, and %s is not on PATH (%v)", ErrUnavailable, cfg.python, err)
	}
	cfg.python = py
	if cfg.vllmPath != "" {
		root, err := vllmRoot(cfg.vllmPath)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		cfg.vllmPath = root
	}
	dir, err := extract(cfg.cacheDir)
	if err != nil {
		return nil, fmt.Errorf("vllm planner: extract the probe: %w", err)
	}
	p := &Planner{cfg: cfg, stderr: &tailBuffer{max: 16 << 10}}
	if err := p.start(ctx, dir); err != nil {
		return nil, err
	}
	return p, nil
}

// vllmRoot returns the directory to put on sys.path so that `import vllm` finds the vLLM at dir.
func vllmRoot(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("vLLM path %s: %v", dir, err)
	}
	if fileExists(filepath.Join(abs, "vllm", "__init__.py")) {
		return abs, nil
	}
	if filepath.Base(abs) == "vllm" && fileExists(filepath.Join(abs, "__init__.py")) {
		return filepath.Dir(abs), nil
	}
	if _, err := os.Stat(abs); err != nil {
		return "", fmt.Errorf("no vLLM at %s: %v", dir, err)
	}
	return "", fmt.Errorf("no vLLM at %s: want a vLLM source tree or a site-packages directory (a directory holding vllm/__init__.py)", dir)
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// extract writes the embedded program to <cache>/widetp/probe-<hash>/ once per content hash.
func extract(cacheDir string) (string, error) {
	h := sha256.New()
	var files []string
	if err := fs.WalkDir(program, "python", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, path)
		}
		return err
	}); err != nil {
		return "", err
	}
	sort.Strings(files)
	for _, f := range files {
		b, err := program.ReadFile(f)
		if err != nil {
			return "", err
		}
		h.Write([]byte(f))
		h.Write([]byte{0})
		h.Write(b)
	}
	if cacheDir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		cacheDir = filepath.Join(base, "widetp")
	}
	dir := filepath.Join(cacheDir, "probe-"+hex.EncodeToString(h.Sum(nil))[:16])
	if fileExists(filepath.Join(dir, "widetp_probe", "main.py")) {
		return dir, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(cacheDir, "probe-tmp-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	for _, f := range files {
		b, _ := program.ReadFile(f)
		dst := filepath.Join(tmp, strings.TrimPrefix(f, "python/"))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			return "", err
		}
	}
	// Another widetp may have extracted the same content meanwhile: either copy is good.
	if err := os.Rename(tmp, dir); err != nil && !fileExists(filepath.Join(dir, "widetp_probe", "main.py")) {
		return "", err
	}
	return dir, nil
}

// response is one line the probe writes.
type response struct {
	OK     bool               `json:"ok"`
	Error  string             `json:"error"`
	Source *sourceInfo        `json:"source"`
	Nodes  []*json.RawMessage `json:"nodes"`
	Flags  []vllm.ServeOption `json:"flags"`
	Parse  []ParseResult      `json:"parse"`
}

// ParseLine is one command line for Parse: the words after `vllm serve` (or after the OpenAI
// entrypoint's module) and which of the two (vllm.EntrypointServe, vllm.EntrypointAPIServer).
type ParseLine struct {
	Argv       []string `json:"argv"`
	Entrypoint string   `json:"entrypoint"`
}

// ParseResult is what vLLM's parser made of a line: Exit is nil when it parsed, else argparse's
// exit status (2 for an error, 0 for -h/--help) with the error it printed from its
// "<prog>: error:" line on.
type ParseResult struct {
	Exit    *int   `json:"exit"`
	Message string `json:"message"`
	// Raised is the exception the parser raised instead of exiting ("ValueError: ...").
	Raised string `json:"raised,omitempty"`
}

type sourceInfo struct {
	Version string       `json:"version"`
	Commit  string       `json:"commit"`
	Path    string       `json:"path"`
	Digest  string       `json:"launch_code_sha256"`
	Install vllm.Install `json:"install"`
}

func (p *Planner) start(ctx context.Context, dir string) error {
	cmd := exec.Command(p.cfg.python, "-u", "-m", "widetp_probe.main")
	cmd.Dir = dir
	// Compiled bytecode of vLLM goes to widetp's cache, never into the user's vLLM tree: a second
	// start then imports in about a second instead of compiling for three.
	cmd.Env = append(os.Environ(), "PYTHONPATH="+dir, "PYTHONDONTWRITEBYTECODE=", "PYTHONPYCACHEPREFIX="+filepath.Join(filepath.Dir(dir), "pycache"),
		"WIDETP_PROBE_VLLM_PATH="+p.cfg.vllmPath)
	cmd.Stderr = p.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%w: start %s: %v", ErrUnavailable, p.cfg.python, err)
	}
	p.cmd, p.stdin, p.stdout = cmd, stdin, bufio.NewReaderSize(stdout, 1<<20)
	resp, err := p.roundTrip(ctx, map[string]any{"op": "hello"}, p.cfg.startup)
	if err != nil {
		p.Close()
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if !resp.OK {
		p.Close()
		what := "vLLM"
		if p.cfg.vllmPath != "" {
			what = "vLLM from " + p.cfg.vllmPath
		}
		return fmt.Errorf("%w: %s does not import in %s: %s", ErrUnavailable, what, p.cfg.python, lastLines(resp.Error, 6))
	}
	if resp.Source == nil {
		p.Close()
		return fmt.Errorf("%w: the probe answered hello without its source", ErrUnavailable)
	}
	p.source = vllm.PlannerSource{Name: "vllm", Version: resp.Source.Version, Commit: resp.Source.Commit,
		Path: resp.Source.Path, Digest: resp.Source.Digest, Install: resp.Source.Install}
	return nil
}

// roundTrip sends one request and reads one response line, within the bound.
func (p *Planner) roundTrip(ctx context.Context, req any, bound time.Duration) (*response, error) {
	if p.closed {
		return nil, errors.New("vllm planner is closed")
	}
	line, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		if _, err := p.stdin.Write(append(line, '\n')); err != nil {
			done <- result{nil, err}
			return
		}
		b, err := p.stdout.ReadBytes('\n')
		done <- result{b, err}
	}()
	timer := time.NewTimer(bound)
	defer timer.Stop()
	var r result
	select {
	case r = <-done:
	case <-timer.C:
		p.kill()
		return nil, fmt.Errorf("the probe gave no answer within %s (stopped it); its last output: %s", bound, p.stderr.tail(6))
	case <-ctx.Done():
		p.kill()
		return nil, ctx.Err()
	}
	if r.err != nil {
		p.kill()
		return nil, fmt.Errorf("the probe exited (%v); its last output: %s", r.err, p.stderr.tail(6))
	}
	var resp response
	if err := json.Unmarshal(r.b, &resp); err != nil {
		return nil, fmt.Errorf("malformed probe response (%v): %.200q", err, r.b)
	}
	return &resp, nil
}

func (p *Planner) kill() {
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
	p.closed = true
}

// Close stops the probe process.
func (p *Planner) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	if p.stdin != nil {
		_ = p.stdin.Close()
	}
	if p.cmd == nil || p.cmd.Process == nil {
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
	return nil
}

// Name implements vllm.Planner.
func (p *Planner) Name() string { return "vllm" }

// Source implements vllm.Planner.
func (p *Planner) Source() vllm.PlannerSource { return p.source }

// Flags returns the options of this vLLM's `vllm serve` parser, in the parser's order, as the
// model's catalog describes them (vllm.ServeOption; python/widetp_probe/flags.py reads them). An
// option whose action or type the catalog has no kind for is an error naming it.
func (p *Planner) Flags(ctx context.Context) ([]vllm.ServeOption, error) {
	return p.EntrypointFlags(ctx, vllm.EntrypointServe)
}

// EntrypointFlags lists the options of an entrypoint's parser (vllm.EntrypointServe, or
// vllm.EntrypointGRPCServer: the parser vllm/entrypoints/grpc_server.py main() builds).
func (p *Planner) EntrypointFlags(ctx context.Context, entrypoint string) ([]vllm.ServeOption, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	resp, err := p.roundTrip(ctx, map[string]any{"op": "flags", "entrypoint": entrypoint}, p.cfg.request)
	if err != nil {
		return nil, err
	}
	if !resp.OK {
		return nil, fmt.Errorf("read vLLM's %s options: %s", entrypoint, lastLines(resp.Error, 6))
	}
	if len(resp.Flags) == 0 {
		return nil, fmt.Errorf("read vLLM's %s options: the probe listed none", entrypoint)
	}
	return resp.Flags, nil
}

// Parse runs vLLM's own argument parser on each line, as the process would before anything else
// (the probe's parse op): the judge of the model's ParseServe.
func (p *Planner) Parse(ctx context.Context, lines []ParseLine) ([]ParseResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	resp, err := p.roundTrip(ctx, map[string]any{"op": "parse", "lines": lines}, p.cfg.request)
	if err != nil {
		return nil, err
	}
	if !resp.OK {
		return nil, fmt.Errorf("run vLLM's parser: %s", lastLines(resp.Error, 6))
	}
	if len(resp.Parse) != len(lines) {
		return nil, fmt.Errorf("run vLLM's parser: %d answers for %d lines", len(resp.Parse), len(lines))
	}
	return resp.Parse, nil
}

// wireNode is a node as the probe reads it.
type wireNode struct {
	Host     string            `json:"host"`
	GPUs     int               `json:"gpus"`
	Env      map[string]string `json:"env"`
	Commands []wireCommand     `json:"commands"`
}

type wireCommand struct {
	*vllm.LaunchLine
	Error string `json:"error,omitempty"`
}

// PlanDeployment implements vllm.Planner.
func (p *Planner) PlanDeployment(ctx context.Context, d vllm.Deployment) ([]*vllm.NodePlan, error) {
	plans, _, err := p.PlanWithVerdicts(ctx, d)
	return plans, err
}

// PlanWithVerdicts is PlanDeployment, plus vLLM's own verdict on the HELLOs each front end heard:
// the probe runs wait_for_engine_startup over the HELLOs of every engine that dials a front end
// (its own and other commands'), and returns the RuntimeError it raised, by front end process
// ID. Plans leave that refusal to the barrier (vllm.HandshakeExpect.Refuse); conformance
// compares the two.
func (p *Planner) PlanWithVerdicts(ctx context.Context, d vllm.Deployment) ([]*vllm.NodePlan, map[string]string, error) {
	if err := vllm.CheckDeployment(d); err != nil {
		return nil, nil, err
	}
	nodes := make([]wireNode, len(d.Nodes))
	splitErrs := map[[2]int]error{}
	for i, n := range d.Nodes {
		if n.GPUs <= 0 {
			return nil, nil, fmt.Errorf("plan node %s: GPUs must be positive, got %d", n.Host, n.GPUs)
		}
		wn := wireNode{Host: n.Host, GPUs: n.GPUs, Env: n.Env, Commands: make([]wireCommand, len(n.Commands))}
		for j, line := range n.Commands {
			l, err := vllm.SplitLaunch(line)
			if err != nil {
				splitErrs[[2]int{i, j}] = err
				wn.Commands[j] = wireCommand{Error: err.Error()}
				continue
			}
			wn.Commands[j] = wireCommand{LaunchLine: &l}
		}
		nodes[i] = wn
	}
	req := map[string]any{"op": "plan", "deployment": map[string]any{
		"name": d.Name, "seed": d.Seed, "model": d.Model, "nodes": nodes}}
	p.mu.Lock()
	resp, err := p.roundTrip(ctx, req, p.cfg.request)
	p.mu.Unlock()
	if err != nil {
		return nil, nil, fmt.Errorf("vllm planner: plan %s: %w", d.Name, err)
	}
	if !resp.OK {
		return nil, nil, fmt.Errorf("vllm planner: plan %s: the probe failed: %s", d.Name, lastLines(resp.Error, 12))
	}
	if len(resp.Nodes) != len(d.Nodes) {
		return nil, nil, fmt.Errorf("vllm planner: plan %s: malformed response: %d node plans for %d nodes", d.Name, len(resp.Nodes), len(d.Nodes))
	}
	out := make([]*vllm.NodePlan, len(d.Nodes))
	verdicts := map[string]string{}
	for i, raw := range resp.Nodes {
		var np vllm.NodePlan
		if raw == nil {
			return nil, nil, fmt.Errorf("vllm planner: plan %s: malformed response: node %d has no plan", d.Name, i)
		}
		if err := json.Unmarshal(*raw, &np); err != nil {
			return nil, nil, fmt.Errorf("vllm planner: plan %s: malformed plan of node %d: %v", d.Name, i, err)
		}
		if np.Host != d.Nodes[i].Host || len(np.Commands) != len(d.Nodes[i].Commands) {
			return nil, nil, fmt.Errorf("vllm planner: plan %s: malformed response: node %d is %q with %d commands, want %q with %d",
				d.Name, i, np.Host, len(np.Commands), d.Nodes[i].Host, len(d.Nodes[i].Commands))
		}
		for j := range np.Commands {
			if err, ok := splitErrs[[2]int{i, j}]; ok {
				np.Commands[j] = vllm.PlanUnlaunchable(d.Nodes[i], j, d.Nodes[i].Commands[j], err)
			} else if np.Commands[j] == nil {
				return nil, nil, fmt.Errorf("vllm planner: plan %s: malformed response: host %s command %d has no plan", d.Name, np.Host, j)
			}
		}
		if err := allocatorRules(&np); err != nil {
			return nil, nil, err
		}
		out[i] = &np
		collectVerdicts(*raw, verdicts)
	}
	return out, verdicts, nil
}

// allocatorRules gives every port allocator of a probe plan the retry rules of vLLM main
// (profile main's vllm_port_list and open_port_reserved): the probe records where vLLM probes and
// with which VLLM_PORT and reserved range, but does not run get_open_port against a simulated
// host's sockets, which a run does.
func allocatorRules(np *vllm.NodePlan) error {
	prof, err := vllm.ProfileNamed("main")
	if err != nil {
		return err
	}
	var walk func(p *vllm.ProcessPlan)
	walk = func(p *vllm.ProcessPlan) {
		if p == nil {
			return
		}
		for i := range p.Addresses {
			if a := p.Addresses[i].Alloc; a != nil {
				a.List, a.Reserve = prof.VLLMPortList, prof.OpenPortReserved
			}
		}
		for _, c := range p.Children {
			walk(c)
		}
	}
	for _, c := range np.Commands {
		walk(c)
	}
	return nil
}

// verdictPlan is the part of the probe's plan JSON that carries vLLM's handshake verdict.
type verdictPlan struct {
	Identity struct {
		ID string `json:"id"`
	} `json:"identity"`
	Refusal  string         `json:"probe_handshake_refusal"`
	Children []*verdictPlan `json:"children"`
}

func collectVerdicts(raw json.RawMessage, into map[string]string) {
	var np struct {
		Commands []*verdictPlan `json:"commands"`
	}
	if json.Unmarshal(raw, &np) != nil {
		return
	}
	var walk func(v *verdictPlan)
	walk = func(v *verdictPlan) {
		if v == nil {
			return
		}
		if v.Refusal != "" {
			into[v.Identity.ID] = v.Refusal
		}
		for _, c := range v.Children {
			walk(c)
		}
	}
	for _, c := range np.Commands {
		walk(c)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// tailBuffer keeps the last max bytes written to it (the probe's stderr: vLLM's logs).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) tail(n int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return lastLines(string(t.b), n)
}
