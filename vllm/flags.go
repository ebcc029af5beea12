package vllm

import (
	"strings"
	"sync"
)

// flagKind is how argparse consumes a flag's value (vllm/engine/arg_utils.py get_kwargs maps a
// config field's type to one of these; vllm/entrypoints/openai/cli_args.py does the same for the
// front end's fields).
type flagKind int

const (
	// kindBool is argparse.BooleanOptionalAction: `--x` sets true, `--no-x` false, no value.
	kindBool flagKind = iota
	// kindStoreTrue is action="store_true": `--x` only, no `--no-x`.
	kindStoreTrue
	// kindInt takes one value that Python's int() accepts.
	kindInt
	// kindSize is an int the model reads (a parallel size, rank, count or port): argparse takes
	// any int, and the ParallelConfig field constraints (ge=0 / ge=1, the rpc port's le=65535)
	// refuse out-of-range ones later, when the config is built (parallel.go fieldErrors).
	kindSize
	// kindHumanInt takes an int with an optional k/m/g suffix (arg_utils.human_readable_int).
	kindHumanInt
	// kindFloat takes one value that Python's float() accepts.
	kindFloat
	// kindString takes one value, kept verbatim.
	kindString
	// kindJSON takes one JSON object (a config dataclass or dict field); `--x.key value` sets one
	// key instead (FlexibleArgumentParser's dotted form).
	kindJSON
	// kindList is nargs="+": one or more values, up to the next option.
	kindList
	// kindAppend is action="append": one value, the flag may repeat.
	kindAppend
	// kindOptional is nargs="?": an optional value (`--hf-token` alone means True).
	kindOptional
)

// flagSpec is one `vllm serve` option: its long name first, then its short aliases.
type flagSpec struct {
	names []string
	kind  flagKind
}

// long is the canonical spelling, the one ServeArgs.Other records.
func (f *flagSpec) long() string { return f.names[0] }

// display is argparse's way of naming an option in an error: every spelling joined by "/".
func (f *flagSpec) display() string { return strings.Join(f.names, "/") }

// takesValue reports whether the flag consumes a following word.
func (f *flagSpec) takesValue() bool { return f.kind != kindBool && f.kind != kindStoreTrue }

// serveFlags is the catalog of `vllm serve` options the model knows, with the short aliases of
// vllm/engine/arg_utils.py EngineArgs.add_cli_args and vllm/entrypoints/openai/cli_args.py
// make_arg_parser (vLLM main, mid-2026). Flags that do not affect identity are accepted and kept
// verbatim in ServeArgs.Other so a scenario can carry a real command line unchanged.
var serveFlags = []flagSpec{
	// serve subcommand (cli_args.make_arg_parser)
	{[]string{"--headless"}, kindStoreTrue},
	{[]string{"--api-server-count", "-asc"}, kindSize},
	{[]string{"--config"}, kindString},
	{[]string{"--grpc"}, kindStoreTrue},

	// ModelConfig
	{[]string{"--model"}, kindString},
	{[]string{"--runner"}, kindString},
	{[]string{"--convert"}, kindString},
	{[]string{"--task"}, kindString},
	{[]string{"--tokenizer"}, kindString},
	{[]string{"--tokenizer-mode"}, kindString},
	{[]string{"--trust-remote-code"}, kindBool},
	{[]string{"--dtype"}, kindString},
	{[]string{"--seed"}, kindInt},
	{[]string{"--hf-config-path"}, kindString},
	{[]string{"--allowed-local-media-path"}, kindString},
	{[]string{"--allowed-media-domains"}, kindList},
	{[]string{"--revision"}, kindString},
	{[]string{"--code-revision"}, kindString},
	{[]string{"--tokenizer-revision"}, kindString},
	{[]string{"--max-model-len"}, kindHumanInt},
	{[]string{"--quantization", "-q"}, kindString},
	{[]string{"--allow-deprecated-quantization"}, kindBool},
	{[]string{"--enforce-eager"}, kindBool},
	{[]string{"--enable-return-routed-experts"}, kindBool},
	{[]string{"--max-logprobs"}, kindInt},
	{[]string{"--logprobs-mode"}, kindString},
	{[]string{"--disable-sliding-window"}, kindBool},
	{[]string{"--disable-cascade-attn"}, kindBool},
	{[]string{"--skip-tokenizer-init"}, kindBool},
	{[]string{"--enable-prompt-embeds"}, kindBool},
	{[]string{"--served-model-name"}, kindList},
	{[]string{"--config-format"}, kindString},
	{[]string{"--hf-token"}, kindOptional},
	{[]string{"--hf-overrides"}, kindJSON},
	{[]string{"--pooler-config"}, kindJSON},
	{[]string{"--generation-config"}, kindString},
	{[]string{"--override-generation-config"}, kindJSON},
	{[]string{"--enable-sleep-mode"}, kindBool},
	{[]string{"--model-impl"}, kindString},
	{[]string{"--override-attention-dtype"}, kindString},
	{[]string{"--logits-processors"}, kindList},
	{[]string{"--io-processor-plugin"}, kindString},
	{[]string{"--renderer-num-workers"}, kindInt},

	// LoadConfig
	{[]string{"--load-format"}, kindString},
	{[]string{"--download-dir"}, kindString},
	{[]string{"--safetensors-load-strategy"}, kindString},
	{[]string{"--model-loader-extra-config"}, kindJSON},
	{[]string{"--ignore-patterns"}, kindList},
	{[]string{"--use-tqdm-on-load"}, kindBool},
	{[]string{"--pt-load-map-location"}, kindString},

	// AttentionConfig
	{[]string{"--attention-backend"}, kindString},

	// MambaConfig
	{[]string{"--mamba-backend"}, kindString},
	{[]string{"--enable-mamba-cache-stochastic-rounding"}, kindBool},
	{[]string{"--mamba-cache-philox-rounds"}, kindInt},

	// StructuredOutputsConfig
	{[]string{"--reasoning-parser"}, kindString},
	{[]string{"--reasoning-parser-plugin"}, kindString},

	// ParallelConfig: the identity flags (spec §0) and their neighbours
	{[]string{"--distributed-executor-backend"}, kindString},
	{[]string{"--pipeline-parallel-size", "-pp"}, kindSize},
	{[]string{"--master-addr"}, kindString},
	{[]string{"--master-port"}, kindSize},
	{[]string{"--nnodes", "-n"}, kindSize},
	{[]string{"--node-rank", "-r"}, kindSize},
	{[]string{"--distributed-timeout-seconds"}, kindInt},
	{[]string{"--cpu-distributed-timeout-seconds"}, kindInt},
	{[]string{"--tensor-parallel-size", "-tp"}, kindSize},
	{[]string{"--decode-context-parallel-size", "-dcp"}, kindSize},
	{[]string{"--dcp-comm-backend"}, kindString},
	{[]string{"--dcp-kv-cache-interleave-size"}, kindInt},
	{[]string{"--cp-kv-cache-interleave-size"}, kindInt},
	{[]string{"--prefill-context-parallel-size", "-pcp"}, kindSize},
	{[]string{"--data-parallel-size", "-dp"}, kindSize},
	{[]string{"--data-parallel-rank", "-dpn"}, kindSize},
	{[]string{"--data-parallel-start-rank", "-dpr"}, kindSize},
	{[]string{"--data-parallel-size-local", "-dpl"}, kindSize},
	{[]string{"--data-parallel-address", "-dpa"}, kindString},
	{[]string{"--data-parallel-rpc-port", "-dpp"}, kindSize},
	{[]string{"--data-parallel-backend", "-dpb"}, kindString},
	{[]string{"--data-parallel-hybrid-lb", "-dph"}, kindBool},
	{[]string{"--data-parallel-external-lb", "-dpe"}, kindBool},
	{[]string{"--data-parallel-multi-port-external-lb", "-dpm"}, kindBool},
	{[]string{"--enable-expert-parallel", "-ep"}, kindBool},
	{[]string{"--enable-ep-weight-filter"}, kindBool},
	{[]string{"--all2all-backend"}, kindString},
	{[]string{"--enable-dbo"}, kindBool},
	{[]string{"--ubatch-size"}, kindInt},
	{[]string{"--enable-elastic-ep"}, kindBool},
	{[]string{"--dbo-decode-token-threshold"}, kindInt},
	{[]string{"--dbo-prefill-token-threshold"}, kindInt},
	{[]string{"--disable-nccl-for-dp-synchronization"}, kindBool},
	{[]string{"--enable-eplb"}, kindBool},
	{[]string{"--eplb-config"}, kindJSON},
	{[]string{"--expert-placement-strategy"}, kindString},
	{[]string{"--max-parallel-loading-workers"}, kindInt},
	{[]string{"--ray-workers-use-nsight"}, kindBool},
	{[]string{"--disable-custom-all-reduce"}, kindBool},
	{[]string{"--worker-cls"}, kindString},
	{[]string{"--worker-extension-cls"}, kindString},
	{[]string{"--numa-bind"}, kindBool},
	{[]string{"--numa-bind-nodes"}, kindList},
	{[]string{"--numa-bind-cpus"}, kindList},
	// One comma-separated value (arg_utils.py: type=lambda s: [...] over s.split(",")).
	{[]string{"--device-ids"}, kindString},
	{[]string{"--enable-fault-tolerance"}, kindBool},

	// CacheConfig
	{[]string{"--block-size"}, kindInt},
	{[]string{"--gpu-memory-utilization"}, kindFloat},
	{[]string{"--kv-cache-memory-bytes"}, kindHumanInt},
	{[]string{"--kv-cache-dtype"}, kindString},
	{[]string{"--num-gpu-blocks-override"}, kindInt},
	{[]string{"--enable-prefix-caching"}, kindBool},
	{[]string{"--prefix-caching-hash-algo"}, kindString},
	{[]string{"--calculate-kv-scales"}, kindBool},
	{[]string{"--kv-cache-dtype-skip-layers"}, kindList},
	{[]string{"--kv-sharing-fast-prefill"}, kindBool},
	{[]string{"--mamba-cache-dtype"}, kindString},
	{[]string{"--mamba-ssm-cache-dtype"}, kindString},
	{[]string{"--mamba-block-size"}, kindInt},
	{[]string{"--mamba-cache-mode"}, kindString},
	{[]string{"--kv-offloading-size"}, kindFloat},
	{[]string{"--kv-offloading-backend"}, kindString},
	{[]string{"--swap-space"}, kindFloat},

	// OffloadConfig
	{[]string{"--offload-backend"}, kindString},
	{[]string{"--cpu-offload-gb"}, kindFloat},
	{[]string{"--cpu-offload-params"}, kindList},
	{[]string{"--offload-group-size"}, kindInt},
	{[]string{"--offload-num-in-group"}, kindInt},
	{[]string{"--offload-prefetch-step"}, kindInt},
	{[]string{"--offload-params"}, kindList},

	// MultiModalConfig
	{[]string{"--language-model-only"}, kindBool},
	{[]string{"--limit-mm-per-prompt"}, kindJSON},
	{[]string{"--enable-mm-embeds"}, kindBool},
	{[]string{"--media-io-kwargs"}, kindJSON},
	{[]string{"--mm-processor-kwargs"}, kindJSON},
	{[]string{"--mm-processor-cache-gb"}, kindFloat},
	{[]string{"--mm-processor-cache-type"}, kindString},
	{[]string{"--mm-shm-cache-max-object-size-mb"}, kindInt},
	{[]string{"--mm-encoder-only"}, kindBool},
	{[]string{"--mm-encoder-tp-mode"}, kindString},
	{[]string{"--mm-encoder-attn-backend"}, kindString},
	{[]string{"--mm-encoder-attn-dtype"}, kindString},
	{[]string{"--mm-encoder-fp8-scale-path"}, kindString},
	{[]string{"--mm-encoder-fp8-scale-save-path"}, kindString},
	{[]string{"--mm-encoder-fp8-scale-save-margin"}, kindFloat},
	{[]string{"--interleave-mm-strings"}, kindBool},
	{[]string{"--skip-mm-profiling"}, kindBool},
	{[]string{"--video-pruning-rate"}, kindFloat},
	{[]string{"--mm-tensor-ipc"}, kindString},

	// LoRAConfig
	{[]string{"--enable-lora"}, kindBool},
	{[]string{"--max-loras"}, kindInt},
	{[]string{"--max-lora-rank"}, kindInt},
	{[]string{"--lora-dtype"}, kindString},
	{[]string{"--enable-tower-connector-lora"}, kindBool},
	{[]string{"--max-cpu-loras"}, kindInt},
	{[]string{"--fully-sharded-loras"}, kindBool},
	{[]string{"--lora-target-modules"}, kindList},
	{[]string{"--default-mm-loras"}, kindJSON},
	{[]string{"--specialize-active-lora"}, kindBool},

	// ObservabilityConfig
	{[]string{"--show-hidden-metrics-for-version"}, kindString},
	{[]string{"--otlp-traces-endpoint"}, kindString},
	{[]string{"--collect-detailed-traces"}, kindList},
	{[]string{"--kv-cache-metrics"}, kindBool},
	{[]string{"--kv-cache-metrics-sample"}, kindFloat},
	{[]string{"--cudagraph-metrics"}, kindBool},
	{[]string{"--enable-layerwise-nvtx-tracing"}, kindBool},
	{[]string{"--enable-mfu-metrics"}, kindBool},
	{[]string{"--enable-mm-processor-stats"}, kindBool},
	{[]string{"--enable-logging-iteration-details"}, kindBool},

	// SchedulerConfig
	{[]string{"--max-num-batched-tokens"}, kindHumanInt},
	{[]string{"--max-num-seqs"}, kindInt},
	{[]string{"--max-num-partial-prefills"}, kindInt},
	{[]string{"--max-long-partial-prefills"}, kindInt},
	{[]string{"--long-prefill-token-threshold"}, kindInt},
	{[]string{"--scheduling-policy"}, kindString},
	{[]string{"--enable-chunked-prefill"}, kindBool},
	{[]string{"--disable-chunked-mm-input"}, kindBool},
	{[]string{"--scheduler-cls"}, kindString},
	{[]string{"--scheduler-reserve-full-isl"}, kindBool},
	{[]string{"--disable-hybrid-kv-cache-manager"}, kindBool},
	{[]string{"--async-scheduling"}, kindBool},
	{[]string{"--stream-interval"}, kindInt},

	// CompilationConfig, KernelConfig
	{[]string{"--cudagraph-capture-sizes"}, kindList},
	{[]string{"--cuda-graph-sizes"}, kindList},
	{[]string{"--max-cudagraph-capture-size"}, kindInt},
	{[]string{"--ir-op-priority"}, kindJSON},
	{[]string{"--enable-flashinfer-autotune"}, kindBool},
	{[]string{"--moe-backend"}, kindString},

	// VllmConfig
	{[]string{"--speculative-config", "-sc"}, kindJSON},
	{[]string{"--kv-transfer-config"}, kindJSON},
	{[]string{"--kv-events-config"}, kindJSON},
	{[]string{"--ec-transfer-config"}, kindJSON},
	{[]string{"--compilation-config", "-cc"}, kindJSON},
	{[]string{"--attention-config", "-ac"}, kindJSON},
	{[]string{"--reasoning-config"}, kindJSON},
	{[]string{"--kernel-config"}, kindJSON},
	{[]string{"--additional-config"}, kindJSON},
	{[]string{"--structured-outputs-config"}, kindJSON},
	{[]string{"--profiler-config"}, kindJSON},
	// -O<level> and `-O <0-3>` are FlexibleArgumentParser rewrites, not an argparse alias
	// (parse.go optimizationLevel).
	{[]string{"--optimization-level"}, kindString},
	{[]string{"--performance-mode"}, kindString},
	{[]string{"--weight-transfer-config"}, kindJSON},

	// AsyncEngineArgs and "other arguments"
	{[]string{"--disable-log-stats"}, kindStoreTrue},
	{[]string{"--aggregate-engine-logging"}, kindStoreTrue},
	{[]string{"--fail-on-environ-validation"}, kindBool},
	{[]string{"--shutdown-timeout"}, kindInt},
	{[]string{"--gdn-prefill-backend"}, kindString},
	{[]string{"--enable-log-requests"}, kindBool},
	{[]string{"--disable-log-requests"}, kindBool},

	// BaseFrontendArgs, FrontendArgs (cli_args.py)
	{[]string{"--lora-modules"}, kindList},
	{[]string{"--chat-template"}, kindString},
	{[]string{"--chat-template-content-format"}, kindString},
	{[]string{"--trust-request-chat-template"}, kindBool},
	{[]string{"--default-chat-template-kwargs"}, kindJSON},
	{[]string{"--response-role"}, kindString},
	{[]string{"--return-tokens-as-token-ids"}, kindBool},
	{[]string{"--enable-auto-tool-choice"}, kindBool},
	{[]string{"--exclude-tools-when-tool-choice-none"}, kindBool},
	{[]string{"--tool-call-parser"}, kindString},
	{[]string{"--tool-parser-plugin"}, kindString},
	{[]string{"--tool-server"}, kindString},
	{[]string{"--log-config-file"}, kindString},
	{[]string{"--max-log-len"}, kindInt},
	{[]string{"--enable-prompt-tokens-details"}, kindBool},
	{[]string{"--enable-per-request-metrics"}, kindBool},
	{[]string{"--enable-server-load-tracking"}, kindBool},
	{[]string{"--enable-force-include-usage"}, kindBool},
	{[]string{"--enable-tokenizer-info-endpoint"}, kindBool},
	{[]string{"--enable-log-outputs"}, kindBool},
	{[]string{"--enable-log-deltas"}, kindBool},
	{[]string{"--cohere-is-reasoning-model"}, kindBool},
	{[]string{"--cohere-format"}, kindString},
	{[]string{"--log-error-stack"}, kindBool},
	{[]string{"--tokens-only"}, kindBool},
	{[]string{"--fingerprint-mode"}, kindString},
	{[]string{"--fingerprint-value"}, kindString},
	{[]string{"--host"}, kindString},
	{[]string{"--port"}, kindSize},
	{[]string{"--data-parallel-supervisor-port"}, kindSize},
	{[]string{"--dp-supervisor-probe-interval-s"}, kindFloat},
	{[]string{"--dp-supervisor-probe-timeout-s"}, kindFloat},
	{[]string{"--dp-supervisor-probe-failure-threshold"}, kindInt},
	{[]string{"--uds"}, kindString},
	{[]string{"--uvicorn-log-level"}, kindString},
	{[]string{"--disable-uvicorn-access-log"}, kindBool},
	{[]string{"--disable-access-log-for-endpoints"}, kindString},
	{[]string{"--allow-credentials"}, kindBool},
	{[]string{"--allowed-origins"}, kindString},
	{[]string{"--allowed-methods"}, kindString},
	{[]string{"--allowed-headers"}, kindString},
	{[]string{"--api-key"}, kindList},
	{[]string{"--ssl-keyfile"}, kindString},
	{[]string{"--ssl-certfile"}, kindString},
	{[]string{"--ssl-ca-certs"}, kindString},
	{[]string{"--enable-ssl-refresh"}, kindBool},
	{[]string{"--ssl-cert-reqs"}, kindInt},
	{[]string{"--ssl-ciphers"}, kindString},
	{[]string{"--root-path"}, kindString},
	{[]string{"--middleware"}, kindAppend},
	{[]string{"--enable-request-id-headers"}, kindBool},
	{[]string{"--disable-fastapi-docs"}, kindBool},
	{[]string{"--h11-max-incomplete-event-size"}, kindInt},
	{[]string{"--h11-max-header-count"}, kindInt},
	{[]string{"--enable-offline-docs"}, kindBool},
	{[]string{"--enable-flash-late-interaction"}, kindBool},
}

// flagIndex maps every spelling (long, short, and `--no-x` for BooleanOptionalAction flags) to
// its spec; negated reports the `--no-` spelling.
type flagRef struct {
	spec    *flagSpec
	negated bool
}

var flagIndex = sync.OnceValue(buildFlagIndex)

func buildFlagIndex() map[string]flagRef {
	idx := make(map[string]flagRef, 2*len(serveFlags))
	for i := range serveFlags {
		f := &serveFlags[i]
		for _, n := range f.names {
			idx[n] = flagRef{spec: f}
		}
		if f.kind == kindBool {
			idx["--no-"+strings.TrimPrefix(f.long(), "--")] = flagRef{spec: f, negated: true}
		}
	}
	return idx
}

// FlagInfo describes one known `vllm serve` flag for documentation (`widetp explain --help`,
// the README): its spellings and whether it takes a value.
type FlagInfo struct {
	Names      []string
	TakesValue bool
	// Negatable: vLLM also accepts `--no-<name>` (argparse.BooleanOptionalAction).
	Negatable bool
}

// KnownFlags lists every flag ParseServe accepts, in the catalog's order.
func KnownFlags() []FlagInfo {
	out := make([]FlagInfo, 0, len(serveFlags))
	for i := range serveFlags {
		f := &serveFlags[i]
		out = append(out, FlagInfo{
			Names:      append([]string(nil), f.names...),
			TakesValue: f.takesValue(),
			Negatable:  f.kind == kindBool,
		})
	}
	return out
}
