package probe

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/widetp/widetp/vllm"
)

// fakePython writes an executable that stands where python3 would and behaves as script says
// (a bash body: it is the whole "probe"). It lets the bridge's error paths be tested without
// Python or vLLM.
func fakePython(t *testing.T, script string) string {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not on PATH")
	}
	p := filepath.Join(t.TempDir(), "python3")
	if err := os.WriteFile(p, []byte("#!/usr/bin/env bash\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func oneNode() vllm.Deployment {
	prof, _ := vllm.ProfileNamed("main")
	return vllm.Deployment{Name: "t", Model: vllm.Model{Name: "m", MoE: true}, Seed: "t", Profile: prof,
		Nodes: []vllm.Node{{Host: "h0", GPUs: 8, Commands: []string{"vllm serve m -tp 2"}}}}
}

func TestNewWithoutPythonIsUnavailable(t *testing.T) {
	_, err := New(context.Background(), WithPython(filepath.Join(t.TempDir(), "no-python3")), WithCacheDir(t.TempDir()))
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if !strings.Contains(err.Error(), "is not on PATH") {
		t.Errorf("error does not say python3 is missing: %v", err)
	}
}

func TestNewWithoutVLLMAtPathIsUnavailable(t *testing.T) {
	py := fakePython(t, "exit 1")
	empty := t.TempDir()
	_, err := New(context.Background(), WithPython(py), WithVLLM(empty), WithCacheDir(t.TempDir()))
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "no vLLM at "+empty) {
		t.Fatalf("err = %v, want ErrUnavailable naming %s", err, empty)
	}
}

func TestVLLMRootAcceptsTreeSitePackagesAndPackageDir(t *testing.T) {
	root := t.TempDir()
	pkg := filepath.Join(root, "vllm")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "__init__.py"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{root, pkg} {
		got, err := vllmRoot(in)
		if err != nil || got != root {
			t.Errorf("vllmRoot(%s) = %q, %v; want %q", in, got, err, root)
		}
	}
}

func TestVLLMThatDoesNotImportIsUnavailable(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not on PATH")
	}
	root := t.TempDir()
	pkg := filepath.Join(root, "vllm")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "__init__.py"), []byte("raise ImportError('broken vllm for the test')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := New(context.Background(), WithVLLM(root), WithCacheDir(t.TempDir()), WithTimeouts(time.Minute, time.Minute))
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "does not import") || !strings.Contains(err.Error(), "broken vllm for the test") {
		t.Fatalf("err = %v, want ErrUnavailable saying vLLM does not import, with its error", err)
	}
}

func TestMalformedResponseIsAClearError(t *testing.T) {
	py := fakePython(t, "read line; echo 'this is not json'")
	_, err := New(context.Background(), WithPython(py), WithCacheDir(t.TempDir()), WithTimeouts(30*time.Second, 30*time.Second))
	if err == nil || !strings.Contains(err.Error(), "malformed probe response") {
		t.Fatalf("err = %v, want a malformed response error", err)
	}
}

func TestSilentProbeIsBoundedAndStopped(t *testing.T) {
	// The fake answers nothing and would wait for an hour: the bridge must give up at its bound.
	py := fakePython(t, "exec sleep 3600")
	start := time.Now()
	_, err := New(context.Background(), WithPython(py), WithCacheDir(t.TempDir()), WithTimeouts(300*time.Millisecond, time.Second))
	if err == nil || !strings.Contains(err.Error(), "gave no answer within 300ms") {
		t.Fatalf("err = %v, want a bounded wait error", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("New took %s: the bound did not hold", d)
	}
}

// helloOK answers the hello and then each plan request with body.
func helloOK(body string) string {
	return `read line
echo '{"ok": true, "source": {"version": "0.0.test", "commit": "abc", "path": "/x", "launch_code_sha256": "00"}}'
while read line; do echo '` + body + `'; done`
}

func TestPlanResponseWithWrongNodeCountIsMalformed(t *testing.T) {
	py := fakePython(t, helloOK(`{"ok": true, "nodes": []}`))
	p, err := New(context.Background(), WithPython(py), WithCacheDir(t.TempDir()), WithTimeouts(30*time.Second, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if src := p.Source(); src.Version != "0.0.test" || src.Commit != "abc" || src.Name != "vllm" {
		t.Errorf("Source() = %+v", src)
	}
	_, err = p.PlanDeployment(context.Background(), oneNode())
	if err == nil || !strings.Contains(err.Error(), "malformed response: 0 node plans for 1 nodes") {
		t.Fatalf("err = %v, want a malformed response error", err)
	}
}

func TestPlanFailureCarriesTheProbesError(t *testing.T) {
	py := fakePython(t, helloOK(`{"ok": false, "error": "Traceback ...\nRuntimeError: unsupported launch (h0/0/api-server-0): Ray"}`))
	p, err := New(context.Background(), WithPython(py), WithCacheDir(t.TempDir()), WithTimeouts(30*time.Second, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	_, err = p.PlanDeployment(context.Background(), oneNode())
	if err == nil || !strings.Contains(err.Error(), "unsupported launch (h0/0/api-server-0): Ray") {
		t.Fatalf("err = %v, want the probe's error", err)
	}
}

func TestUnlaunchableLineIsPlannedAsTheModelPlansIt(t *testing.T) {
	// The probe answers null for a line the shell never hands to vLLM; the bridge fills in the
	// shared crash plan.
	py := fakePython(t, helloOK(`{"ok": true, "nodes": [{"host": "h0", "commands": [null]}]}`))
	p, err := New(context.Background(), WithPython(py), WithCacheDir(t.TempDir()), WithTimeouts(30*time.Second, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	d := oneNode()
	d.Nodes[0].Commands = []string{"python train.py"}
	plans, err := p.PlanDeployment(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	model, err := vllm.ModelPlanner{}.PlanDeployment(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	got, want := plans[0].Commands[0], model[0].Commands[0]
	if got.Crash == nil || want.Crash == nil || *got.Crash != *want.Crash || got.Identity.ID != want.Identity.ID {
		t.Fatalf("plan = %+v / %+v, want the model's %+v / %+v", got.Identity, got.Crash, want.Identity, want.Crash)
	}
}

func TestExtractIsKeyedByContent(t *testing.T) {
	cache := t.TempDir()
	a, err := extract(cache)
	if err != nil {
		t.Fatal(err)
	}
	b, err := extract(cache)
	if err != nil || a != b {
		t.Fatalf("second extract = %q, %v; want %q", b, err, a)
	}
	if _, err := os.Stat(filepath.Join(a, "widetp_probe", "launch.py")); err != nil {
		t.Fatal(err)
	}
}

// The uuid4 a KVTransferConfig draws is a convention both planners share (vllm/engineid.go): the
// probe's conventions.engine_uuid must give the engine_id the model gives the same seed, host and
// command.
func TestEngineUUIDConventionMatchesTheModel(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not on PATH")
	}
	dir, err := extract(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	d := oneNode()
	d.Seed = "seed-x"
	d.Nodes[0].Host = "host-y"
	d.Nodes[0].Commands = []string{"true", `vllm serve m -tp 1 --kv-transfer-config '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both"}'`}
	plans, err := vllm.ModelPlanner{}.PlanDeployment(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	engine := plans[0].Commands[1].Children[0]
	if engine.Identity.EngineID == "" {
		t.Fatalf("the model gave %s no engine_id", engine.Identity.ID)
	}
	// The standins are not needed to compute the convention: conventions imports only the stdlib
	// and the StandIn base class.
	cmd := exec.Command("python3", "-c", `
from widetp_probe import conventions as c
c.SEED, c.HOST, c.CMD = "seed-x", "host-y", 1
print(c.engine_uuid())`)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PYTHONPATH="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3: %v: %s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != engine.Identity.EngineID {
		t.Errorf("probe engine uuid %q, model engine_id %q", got, engine.Identity.EngineID)
	}
}
