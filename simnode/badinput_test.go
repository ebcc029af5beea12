package simnode_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/widetp/widetp/internal/testport"
	"github.com/widetp/widetp/report"
	"github.com/widetp/widetp/simnode"
)

// TestUnparseableCommand: vLLM's argparse refuses the line (vllm/engine/arg_utils.py); the
// node's top process raises SystemExit 2 with argparse's message, reports it, and the node exits.
func TestUnparseableCommand(t *testing.T) {
	s := newStore(t)
	cfg := s.config("bad0")
	cfg.Commands = []string{"vllm serve org/moe --tensor-parallel-size four " + kvStore}
	cfg.Model = simnode.Model{Name: "org/moe", MoE: true}
	n := startNode(t, hostEnv{name: "bad0", ip: "127.0.0.5"}, cfg)
	if code := n.wait(); code != simnode.ExitCrashed {
		t.Fatalf("node exit %d, want %d", code, simnode.ExitCrashed)
	}
	recs := s.srv.Reports()
	if len(recs) != 1 {
		t.Fatalf("records %+v, want the one top process", recs)
	}
	r := recs[0]
	if r.Exit == nil || r.Exit.Code != 2 || !strings.Contains(r.Exit.Error, "--tensor-parallel-size") || !r.Crashed() {
		t.Fatalf("record %+v exit %+v: want SystemExit 2 naming the flag", r, r.Exit)
	}
	if ks := kinds(recs); len(ks) != 1 || ks[0] != report.ProcessCrashed {
		t.Errorf("kinds %v, want [process-crashed]", ks)
	}
	if !strings.Contains(n.stderr.String(), r.Exit.Error) {
		t.Errorf("the exception is not on stderr:\n%s", n.stderr.String())
	}
}

func runBinary(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Run()
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

func TestStoreDownAtStart(t *testing.T) {
	dead := "http://" + testport.Addr(t, "127.0.0.1") // nothing listens there
	cfg := simnode.Config{Host: "h", Commands: []string{"vllm serve org/moe"}, Model: simnode.Model{Name: "org/moe", MoE: true},
		Store:    simnode.StoreURLs{Metadata: dead, Master: dead, Admin: dead},
		Timeouts: simnode.Timeouts{Store: simnode.Duration(500 * time.Millisecond)}}
	b, _ := json.Marshal(cfg)
	start := time.Now()
	code, _, stderr := runBinary(t, []string{simnode.EnvConfig + "=" + string(b)}, "node")
	if code != simnode.ExitInfra || !strings.Contains(stderr, "store unreachable after") || !strings.Contains(stderr, dead) {
		t.Fatalf("exit %d, stderr:\n%s\nwant %d and the unreachable store named", code, stderr, simnode.ExitInfra)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("store check took %v with a 500ms bound", took)
	}
}

func TestBadConfig(t *testing.T) {
	valid := `{"host":"h","commands":["vllm serve m"],"store":{"metadata":"http://s:1","master":"http://s:2","admin":"http://s:3"}}`
	cases := []struct {
		name, config, errHas string
	}{
		{"not json", `{"host":`, "node config $WIDETP_NODE_CONFIG"},
		{"unknown field", strings.Replace(valid, `"host"`, `"hots":"x","host"`, 1), `unknown field "hots"`},
		{"no commands", strings.Replace(valid, `["vllm serve m"]`, `[]`, 1), "at least one `vllm serve` line"},
		{"store url", strings.Replace(valid, `http://s:2`, `s:2`, 1), `store.master "s:2" is not an http:// URL`},
		{"host", strings.Replace(valid, `"h"`, `"bad_host"`, 1), `host "bad_host" is not a DNS label`},
		{"timeout", strings.Replace(valid, `"store"`, `"timeouts":{"lookup":"soon"},"store"`, 1), `time: invalid duration "soon"`},
		{"profile", strings.Replace(valid, `"store"`, `"profile":"pre-9999","store"`, 1), `unknown profile "pre-9999"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runBinary(t, []string{simnode.EnvConfig + "=" + tc.config}, "node")
			if code != simnode.ExitBadInput || !strings.Contains(stderr, tc.errHas) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, stderr, simnode.ExitBadInput, tc.errHas)
			}
		})
	}
}

func TestCommandLine(t *testing.T) {
	cases := []struct {
		args      []string
		env       []string
		code      int
		outHas    string
		stderrHas string
	}{
		{args: []string{"node", "--help"}, code: 0, outHas: "usage: widetp node"},
		{args: []string{"help", "node"}, code: 0, outHas: "usage: widetp node"},
		{args: []string{"serve"}, code: simnode.ExitBadInput, stderrHas: `unknown command "serve"`},
		{args: []string{"node", "--bogus"}, code: simnode.ExitBadInput, stderrHas: "flag provided but not defined: -bogus"},
		{args: []string{"node"}, code: simnode.ExitBadInput, stderrHas: "no config: pass --config FILE or set WIDETP_NODE_CONFIG"},
		{args: []string{"node", "--config", "/nonexistent/node.json"}, code: simnode.ExitBadInput, stderrHas: "/nonexistent/node.json"},
		{args: simnode.ProcessArgs, code: simnode.ExitBadInput, stderrHas: "no status pipe on fd 3"},
		{args: []string{"node"}, env: []string{simnode.EnvConfig + `={"host":"h","commands":["x"],"store":{"metadata":"http://a:1","master":"http://a:1","admin":"http://a:1"}}`, simnode.EnvListenIP + "=nowhere"},
			code: simnode.ExitBadInput, stderrHas: `WIDETP_LISTEN_IP="nowhere" is not an IP address`},
		{args: []string{"node"}, env: []string{simnode.EnvConfig + `={"host":"h","commands":["x"],"store":{"metadata":"http://a:1","master":"http://a:1","admin":"http://a:1"}}`, simnode.EnvHosts + "=a=1.2.3.4,b"},
			code: simnode.ExitBadInput, stderrHas: `WIDETP_HOSTS entry 2 "b"`},
	}
	for _, tc := range cases {
		code, out, stderr := runBinary(t, tc.env, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.outHas) || !strings.Contains(stderr, tc.stderrHas) {
			t.Errorf("widetp %v: exit %d\nstdout %q\nstderr %q\nwant exit %d, stdout %q, stderr %q", tc.args, code, out, stderr, tc.code, tc.outHas, tc.stderrHas)
		}
	}
}
