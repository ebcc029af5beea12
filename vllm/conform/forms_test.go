package conform

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/widetp/widetp/vllm"
)

// The launch forms the generator varies within its launch paths, which LaunchForms detects in a
// deployment from what its lines say (parsed as vLLM would).
const (
	formWidePP         = "pipeline over nodes"           // --nnodes with -pp > 1
	formNNodesDP       = "DP layout from --nnodes"       // internal DP over nodes without --data-parallel-size-local
	formAddressMaster  = "DP address from --master-addr" // multi-node, no --data-parallel-address
	formDefaultRPCPort = "default DP RPC port"           // DP over nodes, no --data-parallel-rpc-port
	formRespelled      = "respelled flags"               // an alias, underscores, = or an abbreviation
	formGRPC           = "gRPC front ends"               // --grpc: serve_grpc instead of run_server
	formGRPCServer     = "the gRPC server's entrypoint"  // python -m vllm.entrypoints.grpc_server
	formRustFrontend   = "Rust front end"                // VLLM_USE_RUST_FRONTEND=1: run_multi_api_server starts vllm-rs
)

// launchForms are the forms in the order LaunchForms lists them.
var launchForms = []string{formWidePP, formNNodesDP, formAddressMaster, formDefaultRPCPort, formRespelled, formGRPC, formGRPCServer, formRustFrontend}

// canonical are the spellings the generator writes before respelling.
var canonical = map[string]bool{"-tp": true, "-pp": true, "-dp": true, "--data-parallel-rank": true,
	"--data-parallel-start-rank": true, "--data-parallel-size-local": true, "--data-parallel-address": true,
	"--data-parallel-rpc-port": true, "--data-parallel-hybrid-lb": true, "--data-parallel-external-lb": true,
	"--data-parallel-multi-port-external-lb": true, "--enable-expert-parallel": true, "--nnodes": true,
	"--node-rank": true, "--api-server-count": true, "--master-addr": true, "--master-port": true,
	"--kv-transfer-config": true}

// LaunchForms lists the launch forms (the form constants, in their order) that deployment d uses;
// it is exported for the external test package's conformance test.
func LaunchForms(tb testing.TB, d vllm.Deployment) []string {
	tb.Helper()
	seen := map[string]bool{}
	for _, n := range d.Nodes {
		if n.Env["VLLM_USE_RUST_FRONTEND"] == "1" {
			seen[formRustFrontend] = true
		}
		for _, line := range n.Commands {
			a, err := vllm.ParseServe(line)
			if err != nil {
				continue // the invalid launch path's refused lines
			}
			if a.NNodes > 1 && a.PipelineParallelSize > 1 {
				seen[formWidePP] = true
			}
			if a.NNodes > 1 && a.DataParallelSize > 1 && a.DataParallelSizeLocal == nil && a.DataParallelRank == nil && !a.DataParallelExternalLB {
				seen[formNNodesDP] = true
			}
			if a.NNodes > 1 && a.DataParallelSize > 1 && a.DataParallelAddress == nil {
				seen[formAddressMaster] = true
			}
			if len(d.Nodes) > 1 && a.DataParallelSize > 1 && a.DataParallelRPCPort == nil {
				seen[formDefaultRPCPort] = true
			}
			for _, w := range a.Argv {
				if strings.HasPrefix(w, "-") && !canonical[w] && w != "--grpc" && (strings.ContainsAny(w, "_=") || isSpelling(w)) {
					seen[formRespelled] = true
				}
			}
			for _, o := range a.Other {
				if o.Flag == "--grpc" {
					seen[formGRPC] = true
				}
			}
			if a.Entrypoint == vllm.EntrypointGRPCServer {
				seen[formGRPCServer] = true
			}
		}
	}
	var out []string
	for _, f := range launchForms {
		if seen[f] {
			out = append(out, f)
		}
	}
	return out
}

// isSpelling: w is an alias or an abbreviation of a flag spell rewrites.
func isSpelling(w string) bool {
	for _, names := range spellings {
		for _, n := range names {
			if n == w || strings.HasPrefix(n, "--") && strings.HasPrefix(n, w) && len(w) > 3 {
				return true
			}
		}
	}
	return false
}

// Every respelled line means what its canonical line means: the Go parser reads both into the
// same arguments (vLLM's reading of them is TestGeneratedFormsConformToTheSnapshot's). And each
// abbreviation is a prefix of its flag's name only, among every name the parser knows.
func TestRespelledLinesParseAlike(t *testing.T) {
	g := &gen{r: rand.New(rand.NewPCG(1, 2))}
	changed := 0
	for _, d := range Generate(3*len(launchPaths), "spell", mustProfile(t)) {
		for _, n := range d.Nodes {
			for _, line := range n.Commands {
				want, err := vllm.ParseServe(line)
				if err != nil {
					continue
				}
				spelled := g.spell(line)
				got, err := vllm.ParseServe(spelled)
				if err != nil {
					t.Errorf("%s: respelled line does not parse: %v\n  %s\n  %s", d.Name, err, line, spelled)
					continue
				}
				if spelled != line {
					changed++
				}
				got.Argv, want.Argv = nil, nil
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s: respelled line reads differently\n  %s\n  %s\n got %+v\nwant %+v", d.Name, line, spelled, got, want)
				}
			}
		}
	}
	if changed == 0 {
		t.Fatal("spell changed no line")
	}
	var names []string
	for _, fi := range vllm.KnownFlags() {
		for _, n := range fi.Names {
			names = append(names, n)
			if fi.Negatable && strings.HasPrefix(n, "--") {
				names = append(names, "--no-"+n[2:])
			}
		}
	}
	for _, sp := range spellings {
		a := abbreviation(sp[0], 0)
		if a == "" {
			continue
		}
		var matches []string
		for _, n := range names {
			if strings.HasPrefix(n, a) {
				matches = append(matches, n)
			}
		}
		if !slices.Equal(matches, []string{sp[0]}) {
			t.Errorf("abbreviation %s of %s matches %v", a, sp[0], matches)
		}
	}
	// --data-parallel-size is a prefix of --data-parallel-size-local: no abbreviation.
	if a := abbreviation("--data-parallel-size", 0); a != "" {
		t.Errorf("abbreviation of --data-parallel-size = %q, want none", a)
	}
}

// Over a few hundred deployments the generator uses every launch form.
func TestGenerateUsesEveryLaunchForm(t *testing.T) {
	count := map[string]int{}
	for _, d := range Generate(20*len(launchPaths), "forms", mustProfile(t)) {
		for _, f := range LaunchForms(t, d) {
			count[f]++
		}
	}
	for _, f := range launchForms {
		if count[f] == 0 {
			t.Errorf("no deployment of 260 uses %q (counts %v)", f, count)
		}
	}
}
