package vllm

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// Rows encode vllm/engine/arg_utils.py EngineArgs.add_cli_args (flags, short aliases),
// vllm/utils/argparse_utils.py FlexibleArgumentParser (underscores, --flag=value, dotted JSON
// keys, -O<n>) and vllm/entrypoints/openai/cli_args.py make_arg_parser (model_tag, --headless,
// --api-server-count/-asc).
func TestParseServeAccepts(t *testing.T) {
	tests := []struct {
		name  string
		line  string
		check func(t *testing.T, a *ServeArgs)
	}{
		{
			name: "positional model and long flags (cli_args.make_arg_parser)",
			line: "vllm serve org/M --tensor-parallel-size 8 --data-parallel-size 2",
			check: func(t *testing.T, a *ServeArgs) {
				wantStr(t, "model", a.Model, "org/M")
				wantInt(t, "tp", a.TensorParallelSize, 8)
				wantInt(t, "dp", a.DataParallelSize, 2)
			},
		},
		{
			name: "short aliases: -dpn is the rank, -dpr the start rank (arg_utils.add_cli_args)",
			line: "vllm serve m -tp 4 -pp 2 -dcp 2 -pcp 1 -dp 8 -dpn 3 -dpl 1 -dpa h0 -dpp 13345 -dpb mp",
			check: func(t *testing.T, a *ServeArgs) {
				wantInt(t, "tp", a.TensorParallelSize, 4)
				wantInt(t, "pp", a.PipelineParallelSize, 2)
				wantInt(t, "dcp", a.DecodeContextParallelSize, 2)
				wantPtr(t, "rank", a.DataParallelRank, intPtr(3))
				wantPtr(t, "start", a.DataParallelStartRank, nil)
				wantPtr(t, "local", a.DataParallelSizeLocal, intPtr(1))
				wantStr(t, "address", *a.DataParallelAddress, "h0")
				wantPtr(t, "rpc", a.DataParallelRPCPort, intPtr(13345))
			},
		},
		{
			name: "-dpr is --data-parallel-start-rank, not the rank (arg_utils.add_cli_args)",
			line: "vllm serve m -dp 4 -dpl 2 -dpr 2 --headless",
			check: func(t *testing.T, a *ServeArgs) {
				wantPtr(t, "start", a.DataParallelStartRank, intPtr(2))
				wantPtr(t, "rank", a.DataParallelRank, nil)
				if !a.Headless {
					t.Error("headless not set")
				}
			},
		},
		{
			name: "underscores for dashes and --flag=value (argparse_utils.FlexibleArgumentParser)",
			line: "vllm serve m --tensor_parallel_size=2 --data_parallel_size 4 --node_rank=1 --nnodes=2",
			check: func(t *testing.T, a *ServeArgs) {
				wantInt(t, "tp", a.TensorParallelSize, 2)
				wantInt(t, "dp", a.DataParallelSize, 4)
				wantInt(t, "node rank", a.NodeRank, 1)
				wantInt(t, "nnodes", a.NNodes, 2)
			},
		},
		{
			name: "LB booleans with short forms and --no- spellings (argparse.BooleanOptionalAction)",
			line: "vllm serve m -dp 2 -dpe --no-data-parallel-hybrid-lb -ep --no-enable-expert-parallel",
			check: func(t *testing.T, a *ServeArgs) {
				if !a.DataParallelExternalLB || a.DataParallelHybridLB || a.EnableExpertParallel {
					t.Errorf("external=%v hybrid=%v ep=%v", a.DataParallelExternalLB, a.DataParallelHybridLB, a.EnableExpertParallel)
				}
			},
		},
		{
			name: "nnodes and node-rank short forms -n, -r, api server count -asc (arg_utils, cli_args)",
			line: "vllm serve m -n 4 -r 3 -asc 2",
			check: func(t *testing.T, a *ServeArgs) {
				wantInt(t, "nnodes", a.NNodes, 4)
				wantInt(t, "node rank", a.NodeRank, 3)
				wantPtr(t, "api", a.APIServerCount, intPtr(2))
			},
		},
		{
			name: "unset optional ints stay None, distinct from 0 (EngineArgs defaults)",
			line: "vllm serve m --data-parallel-rank 0",
			check: func(t *testing.T, a *ServeArgs) {
				wantPtr(t, "rank", a.DataParallelRank, intPtr(0))
				wantPtr(t, "start", a.DataParallelStartRank, nil)
				wantPtr(t, "local", a.DataParallelSizeLocal, nil)
				wantPtr(t, "rpc", a.DataParallelRPCPort, nil)
				wantPtr(t, "api", a.APIServerCount, nil)
				if a.DataParallelAddress != nil {
					t.Error("address set")
				}
			},
		},
		{
			name: "--model moves to the positional slot wherever it stands (argparse_utils.FlexibleArgumentParser.parse_args)",
			line: "vllm serve -tp 2 --model a/B --served-model-name x",
			check: func(t *testing.T, a *ServeArgs) {
				wantStr(t, "model", a.Model, "a/B")
				wantInt(t, "tp", a.TensorParallelSize, 2)
			},
		},
		{
			name: "python -m vllm.entrypoints.openai.api_server parses the same flags (entrypoints/openai/api_server.py __main__; Mooncake doc/en/vllm-integration-v1.md)",
			line: `MOONCAKE_CONFIG_PATH=./mooncake.json python3 -m vllm.entrypoints.openai.api_server --model Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4 --port 8100 --max-model-len 10000 --gpu-memory-utilization 0.8 --headless --kv-transfer-config '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_producer"}'`,
			check: func(t *testing.T, a *ServeArgs) {
				wantStr(t, "model", a.Model, "Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4")
				wantStr(t, "entrypoint", a.Entrypoint, EntrypointAPIServer)
				wantInt(t, "port", a.Port, 8100)
				if !a.HasMooncakeStore() || !a.Headless {
					t.Errorf("kv = %+v headless = %v", a.KVTransfer, a.Headless)
				}
			},
		},
		{
			name: "a launch-script line: redirections dropped, trailing &, wrappers, exports before the launch (POSIX shell; examples/online_serving/disaggregated_serving/mooncake_connector/run_mooncake_connector.sh, wide_ep/launch_server.sh)",
			line: `cd /work && export VLLM_RPC_BASE_PATH=/var/run/vllm FOO=1; VLLM_MOONCAKE_BOOTSTRAP_PORT=8998 CUDA_VISIBLE_DEVICES=0 nohup uv run vllm serve org/M --port 8010 --kv-transfer-config "{\"kv_connector\":\"MooncakeConnector\",\"kv_role\":\"kv_producer\"}" > prefill1.log 2>&1 & # start the prefill`,
			check: func(t *testing.T, a *ServeArgs) {
				wantStr(t, "model", a.Model, "org/M")
				wantInt(t, "port", a.Port, 8010)
				wantStr(t, "exported", a.Env["VLLM_RPC_BASE_PATH"], "/var/run/vllm")
				wantStr(t, "assigned", a.Env["CUDA_VISIBLE_DEVICES"], "0")
				wantStr(t, "argv[0]", a.Argv[0], "vllm")
				if a.KVTransfer == nil || a.KVTransfer.Connector != "MooncakeConnector" || a.HasMooncakeStore() {
					t.Errorf("kv = %+v", a.KVTransfer)
				}
			},
		},
		{
			name: "a container command: sh -c with the launch as its script (LeaderWorkerSet specs in vLLM's Kubernetes docs)",
			line: `HF_HOME=/cache sh -c "VLLM_HOST_IP=10.0.0.3 vllm serve meta-llama/Llama-3.1-405B-Instruct --tensor-parallel-size 8 --pipeline-parallel-size 2 --nnodes 2 --node-rank 1 --master-addr leader --distributed-executor-backend mp --headless"`,
			check: func(t *testing.T, a *ServeArgs) {
				wantStr(t, "model", a.Model, "meta-llama/Llama-3.1-405B-Instruct")
				wantInt(t, "node rank", a.NodeRank, 1)
				wantStr(t, "outer env", a.Env["HF_HOME"], "/cache")
				wantStr(t, "inner env", a.Env["VLLM_HOST_IP"], "10.0.0.3")
				if !a.Headless {
					t.Error("headless not set")
				}
			},
		},
		{
			name: "a pipeline into tee, env NAME=value, and quoted operators stay words (POSIX shell)",
			line: `env VLLM_HOST_IP=10.0.0.2 vllm serve org/M --chat-template '{{ a > b }}|&' 2>/dev/null | tee serve.log`,
			check: func(t *testing.T, a *ServeArgs) {
				wantStr(t, "env", a.Env["VLLM_HOST_IP"], "10.0.0.2")
				wantStr(t, "chat template", a.lastOther("--chat-template"), "{{ a > b }}|&")
			},
		},
		{
			name: "python -m vllm.entrypoints.cli.main serve is vllm serve (entrypoints/cli/main.py)",
			line: "/usr/bin/python3.12 -m vllm.entrypoints.cli.main serve org/M -dp 2",
			check: func(t *testing.T, a *ServeArgs) {
				wantStr(t, "model", a.Model, "org/M")
				wantStr(t, "entrypoint", a.Entrypoint, EntrypointServe)
				wantInt(t, "dp", a.DataParallelSize, 2)
			},
		},
		{
			name: "dotted keys replace a whole kv-transfer-config: FlexibleArgumentParser appends them as one more JSON after every other argument (argparse_utils.parse_args)",
			line: `vllm serve m --kv-transfer-config.kv_role kv_both --kv-transfer-config '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_producer","kv_connector_extra_config":{"lookup_rpc_port":5}}' --kv-transfer-config.kv_connector MooncakeStoreConnector`,
			check: func(t *testing.T, a *ServeArgs) {
				if !a.HasMooncakeStore() || a.KVTransfer.Role != "kv_both" {
					t.Fatalf("kv = %+v", a.KVTransfer)
				}
				if _, ok := a.KVTransfer.ExtraConfig["lookup_rpc_port"]; ok {
					t.Errorf("the whole JSON's extra config survived: %v", a.KVTransfer.ExtraConfig)
				}
			},
		},
		{
			name: "dotted values: JSON, else human_readable_int, else a string; key+ appends a list; objects merge (argparse_utils.parse_args, recursive_dict_update)",
			line: `vllm serve m --kv-transfer-config.kv_connector MooncakeStoreConnector --kv-transfer-config.kv_role kv_both --kv-transfer-config.kv_connector_extra_config.lookup_rpc_port 2k --kv-transfer-config.kv_connector_extra_config '{"load_async":false}' --kv-transfer-config.kv_connector_extra_config.tiers+ a,b --kv-transfer-config.kv_connector_extra_config.tiers+=c`,
			check: func(t *testing.T, a *ServeArgs) {
				extra := a.KVTransfer.ExtraConfig
				if got := pyStr(extra["lookup_rpc_port"]); got != "2000" {
					t.Errorf("lookup_rpc_port = %s, want 2000", got)
				}
				if got := pyStr(extra["load_async"]); got != "False" {
					t.Errorf("load_async = %s", got)
				}
				if got := pyStr(extra["tiers"]); got != `['a', 'b', 'c']` {
					t.Errorf("tiers = %s", got)
				}
			},
		},
		{
			name: "flags of vLLM main's EngineArgs and FrontendArgs (arg_utils.add_cli_args, cli_args.FrontendArgs)",
			line: "vllm serve m -sc '{\"method\":\"ngram\"}' --renderer-num-workers 2 --mamba-backend triton --enable-mamba-cache-stochastic-rounding --mamba-cache-philox-rounds 4 --kv-cache-dtype-skip-layers 0 1 --mm-encoder-attn-dtype fp8 --mm-tensor-ipc torch_shm --lora-target-modules q_proj k_proj --scheduler-reserve-full-isl --ir-op-priority '{}' --reasoning-config '{}' --gdn-prefill-backend triton --cohere-format cmd3 --no-cohere-is-reasoning-model --collect-detailed-traces model worker --uvicorn-log-level debug --api-key k1 k2 --no-enable-log-requests --async-scheduling --all2all-backend deepep_low_latency --enable-dbo --enable-eplb --eplb-config.num_redundant_experts 32 -cc.mode 3 -O=2",
			check: func(t *testing.T, a *ServeArgs) {
				for _, f := range []string{"--speculative-config", "--renderer-num-workers", "--kv-cache-dtype-skip-layers", "--lora-target-modules", "--no-cohere-is-reasoning-model", "--collect-detailed-traces", "--enable-eplb", "--eplb-config."} {
					if !a.hasOther(f) {
						t.Errorf("%s not kept", f)
					}
				}
			},
		},
		{
			name:  "--model alone (serve.py ServeSubcommand.cmd)",
			line:  "vllm serve --model=a/B -tp 2",
			check: func(t *testing.T, a *ServeArgs) { wantStr(t, "model", a.Model, "a/B") },
		},
		{
			name: "shell quoting, backslash-newline and leading env assignments (POSIX shell)",
			line: "VLLM_DP_RANK=1 TMPDIR='/var/tmp' /usr/bin/vllm serve \"org/My Model\" \\\n --kv-transfer-config '{\"kv_connector\":\"MooncakeStoreConnector\",\"kv_role\":\"kv_both\",\"kv_connector_extra_config\":{\"lookup_rpc_port\":7}}'",
			check: func(t *testing.T, a *ServeArgs) {
				wantStr(t, "model", a.Model, "org/My Model")
				wantStr(t, "env rank", a.Env["VLLM_DP_RANK"], "1")
				wantStr(t, "env tmp", a.Env["TMPDIR"], "/var/tmp")
				if !a.HasMooncakeStore() || a.KVTransfer.Role != "kv_both" {
					t.Errorf("kv = %+v", a.KVTransfer)
				}
				if got := pyStr(a.KVTransfer.ExtraConfig["lookup_rpc_port"]); got != "7" {
					t.Errorf("lookup_rpc_port = %s", got)
				}
			},
		},
		{
			name: "dotted JSON keys build the kv-transfer-config (argparse_utils.FlexibleArgumentParser)",
			line: "vllm serve m --kv-transfer-config.kv_connector MooncakeStoreConnector --kv-transfer-config.kv_role=kv_producer --kv-transfer-config.kv_connector_extra_config.lookup_rpc_port 9 --kv-transfer-config.engine_id E1",
			check: func(t *testing.T, a *ServeArgs) {
				if !a.HasMooncakeStore() || a.KVTransfer.Role != "kv_producer" || *a.KVTransfer.EngineID != "E1" {
					t.Fatalf("kv = %+v", a.KVTransfer)
				}
				if got := pyStr(a.KVTransfer.ExtraConfig["lookup_rpc_port"]); got != "9" {
					t.Errorf("lookup_rpc_port = %s", got)
				}
			},
		},
		{
			name: "Mooncake store inside a MultiConnector (kv_connector/v1/multi_connector.py)",
			line: `vllm serve m --kv-transfer-config '{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":[{"kv_connector":"NixlConnector","kv_role":"kv_both"},{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both","kv_connector_extra_config":{"lookup_rpc_port":3}}]}}'`,
			check: func(t *testing.T, a *ServeArgs) {
				extra, ok := a.KVTransfer.mooncakeStoreExtra()
				if !ok || pyStr(extra["lookup_rpc_port"]) != "3" {
					t.Errorf("extra = %v ok=%v", extra, ok)
				}
			},
		},
		{
			name: "other real flags are kept verbatim, lists take several words (arg_utils get_kwargs)",
			line: "vllm serve m --served-model-name a b --gpu-memory-utilization 0.9 --max-model-len 32k --no-enable-prefix-caching --enforce-eager -O3 --hf-token --trust-remote-code",
			check: func(t *testing.T, a *ServeArgs) {
				got := []string{}
				for _, o := range a.Other {
					v := "<nil>"
					if o.Value != nil {
						v = *o.Value
					}
					got = append(got, o.Flag+"="+v)
				}
				want := "--served-model-name=a --served-model-name=b --gpu-memory-utilization=0.9 --max-model-len=32k --no-enable-prefix-caching=<nil> --enforce-eager=<nil> --optimization-level=3 --hf-token=<nil> --trust-remote-code=<nil>"
				wantStr(t, "other", strings.Join(got, " "), want)
			},
		},
		{
			name: "a negative number is a value, not an option (argparse _negative_number_matcher)",
			line: "vllm serve m --seed -1 --max-logprobs -1",
			check: func(t *testing.T, a *ServeArgs) {
				if len(a.Other) != 2 || *a.Other[0].Value != "-1" {
					t.Errorf("other = %+v", a.Other)
				}
			},
		},
		{
			name: "a unique prefix of a long option (argparse allow_abbrev)",
			line: "vllm serve m --tensor-parallel 4 --data-parallel-size-l=2 --head",
			check: func(t *testing.T, a *ServeArgs) {
				wantInt(t, "tp", a.TensorParallelSize, 4)
				wantPtr(t, "local", a.DataParallelSizeLocal, intPtr(2))
				if !a.Headless {
					t.Error("headless not set")
				}
			},
		},
		{
			name: "everyday serving flags (cli_args.FrontendArgs, arg_utils.EngineArgs)",
			line: `vllm serve org/M --host 0.0.0.0 --port 8001 --uvicorn-log-level warning --api-key sk-1 --served-model-name m --trust-remote-code --max-model-len 32768 --gpu-memory-utilization 0.92 --enforce-eager --kv-cache-dtype fp8 --block-size 64 --seed 7 --no-enable-log-requests --enable-chunked-prefill --max-num-seqs 256 --max-num-batched-tokens 16k --compilation-config '{"cudagraph_mode":"FULL_DECODE_ONLY"}' -O 3 --speculative-config '{"method":"mtp","num_speculative_tokens":1}' --async-scheduling --load-format dummy --distributed-executor-backend mp --enable-eplb -ep --eplb-config '{"num_redundant_experts":8}' --all2all-backend deepep_high_throughput --enable-dbo`,
			check: func(t *testing.T, a *ServeArgs) {
				wantInt(t, "port", a.Port, 8001)
				wantStr(t, "executor", *a.DistributedExecutorBackend, "mp")
				wantStr(t, "level", a.lastOther("--optimization-level"), "3")
				if !a.EnableExpertParallel || !a.boolFlag("--enable-eplb") || pyStr(a.jsonConfig("--eplb-config")["num_redundant_experts"]) != "8" {
					t.Errorf("ep %v eplb %v config %v", a.EnableExpertParallel, a.boolFlag("--enable-eplb"), a.jsonConfig("--eplb-config"))
				}
			},
		},
		{
			name: "python int() spellings: underscores and a plus sign",
			line: "vllm serve m -tp +16 --master-port 29_501",
			check: func(t *testing.T, a *ServeArgs) {
				wantInt(t, "tp", a.TensorParallelSize, 16)
				wantInt(t, "master port", a.MasterPort, 29501)
			},
		},
		{
			name: "defaults of ParallelConfig and FrontendArgs",
			line: "vllm serve",
			check: func(t *testing.T, a *ServeArgs) {
				wantInt(t, "tp", a.TensorParallelSize, 1)
				wantInt(t, "dp", a.DataParallelSize, 1)
				wantInt(t, "nnodes", a.NNodes, 1)
				wantStr(t, "master addr", a.MasterAddr, "127.0.0.1")
				wantInt(t, "master port", a.MasterPort, 29501)
				wantInt(t, "port", a.Port, 8000)
				wantStr(t, "backend", a.DataParallelBackend, "mp")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := ParseServe(tt.line)
			if err != nil {
				t.Fatalf("ParseServe(%q): %v", tt.line, err)
			}
			tt.check(t, a)
		})
	}
}

// Rows encode what argparse (exit status 2), the pydantic field constraints of
// vllm/config/parallel.py ParallelConfig and vllm/config/kv_transfer.py KVTransferConfig reject.
func TestParseServeRejects(t *testing.T) {
	tests := []struct {
		name string
		line string
		// want are substrings the error must contain (the flag and the value).
		want []string
	}{
		{"unknown flag", "vllm serve m --tensor-paralel-size 2", []string{"unrecognized arguments", "--tensor-paralel-size"}},
		{"unknown short flag", "vllm serve m -tpx 2", []string{"unrecognized arguments", "-tpx"}},
		{"ambiguous prefix", "vllm serve m --data-parallel 2", []string{"ambiguous option", "--data-parallel-size", "--data-parallel-rank"}},
		{"a word that is not a negative number is an option", "vllm serve m --seed -inf", []string{"--seed", "expected one argument"}},
		{"second positional", "vllm serve a b", []string{"unrecognized arguments", "b"}},
		{"missing value", "vllm serve m --tensor-parallel-size", []string{"--tensor-parallel-size/-tp", "expected one argument"}},
		{"value is an option", "vllm serve m -tp --headless", []string{"--tensor-parallel-size/-tp", "expected one argument"}},
		{"non-integer size", "vllm serve m -tp two", []string{"--tensor-parallel-size/-tp", "invalid int value", "two"}},
		{"float size", "vllm serve m --data-parallel-size 1.5", []string{"--data-parallel-size/-dp", "1.5"}},
		{"explicit value for a boolean", "vllm serve m --headless=true", []string{"--headless", "ignored explicit argument"}},
		{"bad JSON", `vllm serve m --kv-transfer-config '{"kv_connector":'`, []string{"--kv-transfer-config", "invalid JSON"}},
		{"JSON that is not an object", `vllm serve m --kv-transfer-config '[1]'`, []string{"--kv-transfer-config", "expected an object"}},
		{"kv_role outside KVRole", `vllm serve m --kv-transfer-config '{"kv_connector":"MooncakeStoreConnector","kv_role":"both"}'`, []string{"--kv-transfer-config", "kv_role"}},
		{"kv_connector without kv_role (KVTransferConfig.__post_init__)", `vllm serve m --kv-transfer-config '{"kv_connector":"MooncakeStoreConnector"}'`, []string{"--kv-transfer-config", "Please specify kv_role"}},
		{"engine_id must be a string", `vllm serve m --kv-transfer-config '{"kv_connector":"X","kv_role":"kv_both","engine_id":7}'`, []string{"engine_id", "valid string"}},
		{"not vllm", "sglang serve m", []string{"not a vllm command"}},
		{"python without a vLLM server module", "python3 -m http.server 8000", []string{"not a vLLM server", "http.server"}},
		{"python running a script", "python3 serve.py --model m", []string{"not a vLLM server launch"}},
		{"--model and a positional model both (FlexibleArgumentParser moves --model to the positional slot)", "vllm serve --model a/B pos/C", []string{"unrecognized arguments", "pos/C"}},
		{"--model last (FlexibleArgumentParser.parse_args reads args[model_idx + 1] past the end)", "vllm serve -tp 2 --model", []string{"IndexError", "list index out of range"}},
		{"a whole kv-transfer-config is validated even when a later one replaces it (argparse type= on every occurrence)", `vllm serve m --kv-transfer-config '{"kv_connector":"MooncakeStoreConnector"}' --kv-transfer-config '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both"}'`, []string{"Please specify kv_role"}},
		{"not serve", "vllm bench serve", []string{"serve subcommand"}},
		{"two launches on one line", "vllm serve m --port 8000 & vllm serve m --port 8001 &", []string{"more than one vLLM server"}},
		{"a redirection without a target", "vllm serve m >", []string{"redirection", "without a target"}},
		{"a control operator with no command before it", "&& vllm serve m", []string{"syntax error", "&&"}},
		{"only a non-vLLM program in a list", "cd /w && ls", []string{"not a vllm command", "cd"}},
		{"a shell script that launches nothing", `bash -lc "cd /w && ls"`, []string{"not a vllm command", "cd"}},
		{"bare -O without a level 0-3 (FlexibleArgumentParser rewrites only -O <0-3>)", "vllm serve m -O fast", []string{"unrecognized arguments", "-O"}},
		{"empty", "   ", []string{"empty command"}},
		{"config file", "vllm serve m --config c.yaml", []string{"--config", "c.yaml"}},
		{"dotted key on a non-JSON flag (FlexibleArgumentParser passes the keys as JSON text)", "vllm serve m --tensor-parallel-size.x 1", []string{"--tensor-parallel-size/-tp", `invalid int value: '{"x": 1}'`}},
		// FlexibleArgumentParser (vllm/utils/argparse_utils.py) takes any '-' word with a '.' for a
		// dotted key and the next word for its value before argparse runs.
		{"a dotted word last on the line", "vllm serve m --kv-transfer-config.kv_role", []string{"IndexError", "list index out of range"}},
		{"a negative fraction last on the line", "vllm serve m --watermark -0.5", []string{"IndexError", "list index out of range"}},
		{"a negative fraction as a value", "vllm serve m --watermark -0.5 --seed 3", []string{"unrecognized arguments: -0 {\"5\": \"--seed\"}"}},
		{"a dotted word of no option", "vllm serve m -x.y.z 1k --seed 1", []string{`unrecognized arguments: -x {"y": {"z": 1000}}`}},
		{"unterminated single quote", "vllm serve m --kv-transfer-config '{", []string{"unterminated single quote"}},
		{"unterminated double quote", `vllm serve "m`, []string{"unterminated double quote"}},
		{"trailing backslash", `vllm serve m \`, []string{"backslash at end"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := ParseServe(tt.line)
			if err == nil {
				t.Fatalf("ParseServe(%q) = %+v, want an error", tt.line, a)
			}
			var ae *ArgError
			var se *ShellError
			var pe *PyError
			if !errors.As(err, &ae) && !errors.As(err, &se) && !errors.As(err, &pe) {
				t.Errorf("error type %T, want *ArgError, *ShellError or *PyError (an exception the parser raises)", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestSplitWordsLikeAShell(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{`a  b	c`, []string{"a", "b", "c"}},
		{`'a b'"c d"e`, []string{"a bc de"}},
		{`"a\"b\\c\$d\e"`, []string{`a"b\c$d\e`}},
		{`a\ b`, []string{"a b"}},
		{"a \\\nb", []string{"a", "b"}},
		{`''`, []string{""}},
		{`'it'\''s'`, []string{"it's"}},
	}
	for _, tt := range tests {
		got, err := splitWords(tt.in)
		if err != nil {
			t.Errorf("splitWords(%q): %v", tt.in, err)
			continue
		}
		if strings.Join(got, "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
			t.Errorf("splitWords(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestKnownFlagsCoverTheIdentityFlags(t *testing.T) {
	names := map[string]FlagInfo{}
	for _, f := range KnownFlags() {
		for _, n := range f.Names {
			names[n] = f
		}
	}
	for _, n := range []string{"-tp", "-pp", "-dcp", "-pcp", "-dp", "-dpn", "-dpr", "-dpl", "-dpa", "-dpp", "-dpb", "-dph", "-dpe",
		"--headless", "--nnodes", "--node-rank", "--master-addr", "--master-port", "--api-server-count", "--port",
		"--data-parallel-backend", "--data-parallel-external-lb", "--data-parallel-hybrid-lb", "--data-parallel-start-rank",
		"--data-parallel-rpc-port", "--data-parallel-address", "--prefill-context-parallel-size",
		"--decode-context-parallel-size", "--enable-expert-parallel", "--kv-transfer-config"} {
		if _, ok := names[n]; !ok {
			t.Errorf("flag %s missing from the catalog", n)
		}
	}
	if !names["--data-parallel-external-lb"].Negatable || names["--headless"].Negatable {
		t.Error("BooleanOptionalAction flags must be negatable, store_true ones not")
	}
	if !names["-tp"].TakesValue || names["--headless"].TakesValue {
		t.Error("TakesValue wrong")
	}
}

func wantStr(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

func wantInt(t *testing.T, what string, got, want int) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %d, want %d", what, got, want)
	}
}

func wantPtr(t *testing.T, what string, got, want *int) {
	t.Helper()
	switch {
	case got == nil && want == nil:
	case got == nil || want == nil:
		t.Errorf("%s = %s, want %s", what, showPtr(got), showPtr(want))
	case *got != *want:
		t.Errorf("%s = %d, want %d", what, *got, *want)
	}
}

func showPtr(p *int) string {
	if p == nil {
		return "None"
	}
	return strconv.Itoa(*p)
}
