package vllm

import "testing"

// TestEngineConfigChecksPastParallelConfig: create_engine_config (vllm/engine/arg_utils.py) goes on
// from ParallelConfig(...) to VllmConfig(...) through the speculative, diffusion, LoRA,
// attention, Mamba, kernel, load, observability, compilation and offload configs, each of which
// can refuse the command line:
// every front end fails there, the headless launcher's too, with the first of them.
func TestEngineConfigChecksPastParallelConfig(t *testing.T) {
	const exclusive = "ValueError: --spec-tokens and --speculative-config['num_speculative_tokens'] are mutually exclusive"
	for flags, want := range map[string]string{
		`--spec-method ngram --speculative-config '{"num_speculative_tokens": 2}'`: "",
		`--spec-tokens 2 --speculative-config '{"num_speculative_tokens": 2}'`:     exclusive,
		`--spec-tokens 2 -sc.num_speculative_tokens 3`:                             exclusive,
		`--spec-model m --speculative-config '[1]'`:                                "TypeError: list indices must be integers or slices, not str",
		`--spec-model m --speculative-config '"a model"'`:                          "ValueError: --spec-model and --speculative-config['model'] are mutually exclusive",
		`--spec-method ngram --speculative-config 3`:                               "TypeError: argument of type 'int' is not iterable",
		`--spec-model None --speculative-config 3`:                                 "AttributeError: 'int' object has no attribute 'items'",
		`--diffusion-config '{"canvas_length": 4}'`:                                "",
		`--diffusion-config '{"canvas_length": "0", "steps": 1}'`:                  "pydantic_core.ValidationError: 2 validation errors for DiffusionConfig: canvas_length: Input should be greater than 0 [input_value='0']; steps: Unexpected keyword argument [input_value=1]",
		`--diffusion-config '[4]'`:                                                 "TypeError: vllm.config.diffusion.DiffusionConfig() argument after ** must be a mapping, not list",
		`--diffusion-config '"x"'`:                                                 "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)",
		`--diffusion-config '"{} x"'`:                                              "json.decoder.JSONDecodeError: Extra data: line 1 column 4 (char 3)",
		`--diffusion-config '"{\"canvas_length\": 0}"'`:                            "pydantic_core.ValidationError: 1 validation error for DiffusionConfig: canvas_length: Input should be greater than 0 [input_value=0]",
		`--speculative-config '[1]'`:                                               "AttributeError: 'list' object has no attribute 'items'",
		`--speculative-config '"eagle"'`:                                           "AttributeError: 'str' object has no attribute 'items'",
		`--default-mm-loras '{"image": "/lora"}' --enable-lora --max-loras 0`:      "ValueError: Default modality-specific LoRA(s) were provided for a non multimodal model",
		`--default-mm-loras '{}' --enable-lora --max-loras 0`:                      "pydantic_core.ValidationError: 1 validation error for LoRAConfig: max_loras: Input should be greater than or equal to 1 [input_value=0]",
		`--max-loras 0`: "",
		`--enable-lora --max-loras 4 --max-cpu-loras 2`:                                  "pydantic_core.ValidationError: 1 validation error for LoRAConfig: Value error, max_cpu_loras (2) must be >= max_loras (4).",
		`--enable-lora --max-loras 4 --max-cpu-loras 0`:                                  "",
		`--enable-lora --max-num-seqs 512 --max-num-batched-tokens 1000 --spec-tokens 1`: "ValueError: Consider increasing max_num_batched_tokens or decreasing num_speculative_tokens",
		`--enable-lora --max-num-seqs 512 --max-num-batched-tokens 1024`:                 "",
		// SchedulerConfig (vllm/config/scheduler.py): bounds, then verify_max_model_len.
		`--max-num-batched-tokens 256 --max-num-seqs 512`:                                    "pydantic_core.ValidationError: 1 validation error for SchedulerConfig: Value error, max_num_batched_tokens (256) must be greater than or equal to max_num_seqs (512).",
		`--max-num-batched-tokens 256`:                                                       "",
		`--max-num-seqs 10000`:                                                               "pydantic_core.ValidationError: 1 validation error for SchedulerConfig: Value error, max_num_batched_tokens (8192) must be greater than or equal to max_num_seqs (10000).",
		`--no-enable-chunked-prefill --max-num-batched-tokens 4096`:                          "pydantic_core.ValidationError: 1 validation error for SchedulerConfig: Value error, max_num_batched_tokens (4096) is smaller than max_model_len (8192).",
		`--no-enable-chunked-prefill --max-num-batched-tokens 4096 --max-model-len 4k`:       "",
		`--no-enable-chunked-prefill --enable-chunked-prefill --max-num-batched-tokens 4096`: "",
		`--long-prefill-token-threshold 9000 --max-model-len 8000`:                           "pydantic_core.ValidationError: 1 validation error for SchedulerConfig: Value error, long_prefill_token_threshold (9000) cannot be greater than the max_model_len (8000).",
		`--max-num-batched-tokens 0 --max-num-seqs 0 --watermark 1 --stream-interval 0`:      "pydantic_core.ValidationError: 4 validation errors for SchedulerConfig: max_num_batched_tokens: Input should be greater than or equal to 1 [input_value=0]; max_num_seqs: Input should be greater than or equal to 1 [input_value=0]; watermark: Input should be less than 1 [input_value=1.0]; stream_interval: Input should be greater than or equal to 1 [input_value=0]",
		// The batch defaults (an 80 GiB H100 serving the API): 8192 tokens, 1024 sequences.
		`--enable-lora --spec-tokens 7`:                                                                                "",
		`--enable-lora --speculative-config '{"num_speculative_tokens": 8}'`:                                           "ValueError: Consider increasing",
		`--enable-lora --spec-tokens 8 --performance-mode throughput`:                                                  "ValueError: Consider increasing",
		`--enable-lora --spec-tokens 8 --performance-mode throughput --max-num-seqs 1024`:                              "",
		`--enable-lora --spec-tokens 1 -ep --all2all-backend deepep_low_latency`:                                       "ValueError: Consider increasing",
		`--enable-lora --spec-tokens 200 --max-num-seqs 64 --max-model-len 16k`:                                        "ValueError: Consider increasing",
		`--enable-lora --spec-tokens 200 --max-num-seqs 64 --max-model-len 16k --no-enable-chunked-prefill`:            "",
		`--attention-backend flashinfer -ac.backend flash_attn`:                                                        "ValueError: attention_backend and attention_config.backend are mutually exclusive",
		`--attention-backend flashinfer -ac.backend triton_msa`:                                                        "",
		`--attention-backend Auto`:                                                                                     "",
		`--attention-backend flash`:                                                                                    "ValueError: Unknown attention backend: 'FLASH'. Valid options are: FLASH_ATTN, ",
		`--mamba-backend gpu`:                                                                                          "ValueError: Unknown Mamba SSU backend: 'GPU'. Valid options are: TRITON, FLASHINFER, CPU",
		`--mamba-ssu-algorithm auto`:                                                                                   "ValueError: Mamba SSU algorithm selection is only supported with the FlashInfer backend. Please set `--mamba-backend flashinfer`, or omit `--mamba-ssu-algorithm`.",
		`--mamba-ssu-algorithm auto --mamba-backend FlashInfer`:                                                        "",
		`--no-enable-flashinfer-autotune --kernel-config.enable_flashinfer_autotune false`:                             "ValueError: enable_flashinfer_autotune and kernel_config.enable_flashinfer_autotune are mutually exclusive",
		`--enable-flashinfer-autotune --kernel-config '{"enable_flashinfer_autotune": null}'`:                          "",
		`--ir-op-priority.rms_norm '' --kernel-config '{"ir_op_priority": {"rms_norm": ["a"]}}'`:                       "ValueError: Op priority for rms_norm specified via both ir_op_priority and KernelConfig.ir_op_priority, only one allowed at a time.",
		`--ir-op-priority.rms_norm a --kernel-config '{"ir_op_priority": {"fused_add_rms_norm": ["a"]}}'`:              "",
		`--cudagraph-capture-sizes 1 2 -cc '{"cudagraph_capture_sizes": [4]}'`:                                         "ValueError: cudagraph_capture_sizes and compilation_config.cudagraph_capture_sizes are mutually exclusive",
		`--max-cudagraph-capture-size 8 -cc.max_cudagraph_capture_size 4`:                                              "ValueError: max_cudagraph_capture_size and compilation_config.max_cudagraph_capture_size are mutually exclusive",
		`--max-cudagraph-capture-size 8 -cc '{"max_cudagraph_capture_size": null}'`:                                    "",
		`--load-format tensorizer --model-loader-extra-config s3://bucket`:                                             "TypeError: 'str' object does not support item assignment",
		`--load-format tensorizer --model-loader-extra-config '{"num_readers": 2}'`:                                    "",
		`--safetensors-prefetch-num-threads 0 --safetensors-prefetch-block-size 0k`:                                    "pydantic_core.ValidationError: 2 validation errors for LoadConfig: safetensors_prefetch_num_threads: Input should be greater than or equal to 1 [input_value=0]; safetensors_prefetch_block_size: Input should be greater than or equal to 1 [input_value=0]",
		`--show-hidden-metrics-for-version ' V0.7.post1 '`:                                                             "",
		`--show-hidden-metrics-for-version 0.x --collect-detailed-traces worker,model all --kv-cache-metrics-sample 0`: "pydantic_core.ValidationError: 3 validation errors for ObservabilityConfig: Value error, Invalid version: '0.x'; collect_detailed_traces.0: Input should be 'model', 'worker' or 'all' [input_value='worker,model']; kv_cache_metrics_sample: Input should be greater than 0 [input_value=0.0]",
		`--collect-detailed-traces model`:                                                                              "pydantic_core.ValidationError: 1 validation error for ObservabilityConfig: Value error, collect_detailed_traces requires `--otlp-traces-endpoint` to be set.",
		`--collect-detailed-traces model --otlp-traces-endpoint http://otel:4317`:                                      "",
		`--offload-backend prefetch`:                                                                                   "pydantic_core.ValidationError: 1 validation error for OffloadConfig: Value error, offload_num_in_group (1) must be <= offload_group_size (0)",
		`--offload-group-size 4 --offload-num-in-group 2 --offload-prefetch-step 0`:                                    "pydantic_core.ValidationError: 1 validation error for OffloadConfig: Value error, offload_prefetch_step (0) must be >= 1 when prefetch offloading is enabled (offload_group_size > 0)",
		`--offload-backend uva --offload-prefetch-step 0 --cpu-offload-gb 2`:                                           "",
		`--cpu-offload-gb -1 --offload-num-in-group 0`:                                                                 "pydantic_core.ValidationError: 1 validation error for UVAOffloadConfig: cpu_offload_gb: Input should be greater than or equal to 0 [input_value=-1.0]",
		`--offload-group-size -1 --offload-num-in-group 0`:                                                             "pydantic_core.ValidationError: 2 validation errors for PrefetchOffloadConfig: offload_group_size: Input should be greater than or equal to 0 [input_value=-1]; offload_num_in_group: Input should be greater than or equal to 1 [input_value=0]",
	} {
		for line, id := range map[string]string{"vllm serve org/M -tp 2 -dp 2 ": "h/0/api-server-0", "vllm serve org/M -tp 2 -dp 2 --headless ": "h/0/headless-0"} {
			top := get(t, predict(t, false, "main", node("h", line+flags)), id)
			got := ""
			if top.Exit != nil {
				got = top.Exit.Error
			}
			switch {
			case want == "" && top.Crashed():
				t.Errorf("%s%s: %s, want it to start", line, flags, exitText(top))
			case want != "" && (len(got) < len(want) || got[:len(want)] != want):
				t.Errorf("%s%s: %s, want %s", line, flags, exitText(top), want)
			}
		}
	}
}
