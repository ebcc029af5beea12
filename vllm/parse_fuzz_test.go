package vllm

import (
	"errors"
	"testing"
)

// FuzzParseServe: any command line either parses into sane values or is an *ArgError /
// *ShellError with a message, a *PyError where vLLM's parser itself raises (a dotted key with no
// word after it, such as `-.0` last on the line: FlexibleArgumentParser's IndexError,
// vllm/utils/argparse_utils.py; an unknown cudagraph_mode's KeyError), or a *HelpExit (-h/--help
// starts no server); and planning a node with that line never panics and never fails except for
// launches the model does not simulate.
func FuzzParseServe(f *testing.F) {
	for _, seed := range []string{
		"vllm serve m",
		"vllm serve org/M -tp 16 -dp 2 --nnodes 4 --node-rank 1 --headless --data-parallel-external-lb",
		"vllm serve m -dp 4 -dpl 2 -dpr 2 --headless --data-parallel-address h0 --data-parallel-rpc-port 13345",
		"vllm serve m -dp 2 --data-parallel-rank 1 --port 8001",
		`vllm serve m --kv-transfer-config '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both","kv_connector_extra_config":{"lookup_rpc_port":5}}'`,
		"VLLM_DP_SIZE=2 VLLM_DP_RANK=1 vllm serve m",
		"vllm serve m --data-parallel-backend ray -dp 4",
		"vllm serve m -dp 4 -dpl 2 --data-parallel-multi-port-external-lb",
		"vllm serve m --tensor_parallel_size=2 --no-enable-expert-parallel -O3",
		`vllm serve "a b" 'c`,
		"vllm serve m -tp -1",
		"vllm serve m --kv-transfer-config.kv_role kv_both --kv-transfer-config.kv_connector X",
		"vllm serve m -dp 2 --nnodes 2 --node-rank 1 --data-parallel-size-local 0",
		"",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		a, err := ParseServe(line)
		if err != nil {
			var ae *ArgError
			var se *ShellError
			var pe *PyError
			var he *HelpExit
			if !errors.As(err, &ae) && !errors.As(err, &se) && !errors.As(err, &pe) && !errors.As(err, &he) {
				t.Fatalf("ParseServe(%q): error of type %T: %v", line, err, err)
			}
			if err.Error() == "" {
				t.Fatalf("ParseServe(%q): empty error message", line)
			}
		} else {
			// argparse takes any int for the sizes and ranks (ParallelConfig refuses the
			// out-of-range ones later, below).
			if len(a.Argv) < 2 || a.Argv[1] != "serve" {
				t.Fatalf("ParseServe(%q): argv %q", line, a.Argv)
			}
		}
		np, err := PlanNode(Node{Host: "h", GPUs: 8, Commands: []string{line}}, Options{Profile: mainProfile(), Model: Model{MoE: true}})
		if err != nil {
			if !errors.Is(err, errNotSimulated) {
				t.Fatalf("PlanNode(%q): %v", line, err)
			}
			return
		}
		if len(np.Commands) != 1 || np.Commands[0] == nil {
			t.Fatalf("PlanNode(%q): %d top processes", line, len(np.Commands))
		}
		// A size below 1 gets no process going: ParallelConfig (Field(ge=1)) or the arithmetic of
		// create_engine_config refuses it before any child starts.
		if a != nil {
			for name, v := range map[string]int{"tp": a.TensorParallelSize, "pp": a.PipelineParallelSize, "dp": a.DataParallelSize,
				"pcp": a.PrefillContextParallelSize, "dcp": a.DecodeContextParallelSize, "nnodes": a.NNodes} {
				if top := np.Commands[0]; v < 1 && (top.Crash == nil || top.Crash.Stage != StageConfig || len(top.Children) != 0) {
					t.Fatalf("PlanNode(%q): %s = %d, but the top process does not fail at config: %+v", line, name, v, top.Crash)
				}
			}
		}
	})
}
