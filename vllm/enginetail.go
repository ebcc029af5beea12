package vllm

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// engineConfigTailError is what EngineArgs.create_engine_config (vllm/engine/arg_utils.py) raises
// from the command line after ParallelConfig(...) and before VllmConfig(...), in its order: the
// --spec-* flags merged into --speculative-config (create_speculative_config), the
// DiffusionConfig, the SchedulerConfig, --default-mm-loras for a text-only model, the LoRAConfig,
// the attention backend override, the Mamba backend and SSU algorithm, the kernel config's
// autotune and IR op priority overrides, the load and observability configs, the compilation
// config's capture-size overrides and the offload config. The speculative config itself needs
// the draft model and is not checked; the device is an 80 GiB H100 and the model a text-only one
// of defaultMaxModelLen tokens unless --max-model-len says otherwise (batchDefaults).
func engineConfigTailError(a *ServeArgs) error {
	spec, err := speculativeConfig(a)
	if err != nil {
		return err
	}
	for _, check := range []func(*ServeArgs) error{diffusionConfigError, schedulerConfigError, mmLoRAsError, loraConfigError} {
		if err := check(a); err != nil {
			return err
		}
	}
	if err := loraSpecError(a, spec); err != nil {
		return err
	}
	for _, check := range []func(*ServeArgs) error{attentionBackendError, mambaConfigError, kernelConfigError,
		loadConfigError, observabilityConfigError, capturesSizesError, offloadConfigError} {
		if err := check(a); err != nil {
			return err
		}
	}
	return nil
}

// optionalJSON is an optional_type(json.loads) option's value: nil when absent, "" or "None".
// The parser refused text json.loads does not read.
func optionalJSON(a *ServeArgs, flag string) any {
	if obj := a.jsonConfig(flag); obj != nil {
		return obj // dotted keys folded in
	}
	if !a.optionalValue(flag) {
		return nil
	}
	v, err := decodeJSON(a.lastOther(flag))
	if err != nil {
		return nil
	}
	return v
}

// speculativeConfig is create_speculative_config's merge of --spec-method, --spec-model and
// --spec-tokens into --speculative-config (each may not also be a key of it), as the object
// SpeculativeConfig(...) would be built from; nil without one.
func speculativeConfig(a *ServeArgs) (map[string]any, error) {
	cfg := optionalJSON(a, "--speculative-config")
	if m, ok := cfg.(map[string]any); ok {
		cfg = maps.Clone(m) // the flags go into vLLM's copy, not the command line's
	}
	for _, f := range []struct{ flag, key string }{
		{"--spec-method", "method"}, {"--spec-model", "model"}, {"--spec-tokens", "num_speculative_tokens"},
	} {
		var value any
		switch {
		case f.flag == "--spec-tokens":
			n, ok := intFlag(a, f.flag)
			if !ok {
				continue // not given
			}
			value = json.Number(fmt.Sprint(n))
		case f.flag != "--spec-tokens" && a.optionalValue(f.flag):
			value = a.lastOther(f.flag)
		default:
			continue
		}
		if cfg == nil {
			cfg = map[string]any{}
		}
		// `key in cfg`, then cfg[key] = value, on whatever JSON gave.
		switch c := cfg.(type) {
		case map[string]any:
			if _, ok := c[f.key]; ok {
				return nil, mutuallyExclusive(f.flag, f.key)
			}
			c[f.key] = value
		case []any:
			if slices.Contains(c, any(f.key)) {
				return nil, mutuallyExclusive(f.flag, f.key)
			}
			return nil, &PyError{Type: "TypeError", Msg: "list indices must be integers or slices, not str"}
		case string:
			if strings.Contains(c, f.key) {
				return nil, mutuallyExclusive(f.flag, f.key)
			}
			return nil, &PyError{Type: "TypeError", Msg: "'str' object does not support item assignment"}
		default:
			return nil, &PyError{Type: "TypeError", Msg: fmt.Sprintf("argument of type '%s' is not iterable", pyTypeName(c))}
		}
	}
	switch c := cfg.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		return c, nil
	}
	// Its keys are normalised next (speculative_config.items()).
	return nil, &PyError{Type: "AttributeError", Msg: fmt.Sprintf("'%s' object has no attribute 'items'", pyTypeName(cfg))}
}

// pyJSONLoads is json.loads(text): the value, or Python's JSONDecodeError where its message is
// known here (no value where one must start, data after the value); other malformed text gets
// the decoder's own words.
func pyJSONLoads(text string) (any, error) {
	at := func(what string, off int) error {
		pos := []rune(text[:off])
		line, col := 1, len(pos)+1
		for i, r := range pos {
			if r == '\n' {
				line, col = line+1, len(pos)-i
			}
		}
		return &PyError{Type: "json.decoder.JSONDecodeError", Msg: fmt.Sprintf("%s: line %d column %d (char %d)", what, line, col, len(pos))}
	}
	start := len(text) - len(strings.TrimLeft(text, " \t\n\r"))
	if start == len(text) || !strings.ContainsRune(`{["-0123456789tfnNI`, rune(text[start])) {
		return nil, at("Expecting value", start)
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &PyError{Type: "json.decoder.JSONDecodeError", Msg: err.Error()}
	}
	end := int(dec.InputOffset())
	if rest := strings.TrimLeft(text[end:], " \t\n\r"); rest != "" {
		return nil, at("Extra data", len(text)-len(rest))
	}
	return v, nil
}

func mutuallyExclusive(flag, key string) error {
	return &PyError{Type: "ValueError", Msg: fmt.Sprintf("%s and --speculative-config['%s'] are mutually exclusive", flag, key)}
}

// diffusionSchema is DiffusionConfig's (vllm/config/diffusion.py): canvas_length gt=0 (its None
// default is not validated), max_denoising_steps an optional int, no other keyword.
var diffusionSchema = sync.OnceValue(func() *configSchema {
	return parsedSchema(`{"t":"dc","forbid":true,"f":[{"n":"canvas_length","s":{"t":"int","gt":0}},{"n":"max_denoising_steps","s":{"t":"nullable","s":{"t":"int"}}}]}`)
})

// diffusionConfigError is create_diffusion_config: DiffusionConfig(**cfg).
func diffusionConfigError(a *ServeArgs) error {
	cfg := optionalJSON(a, "--diffusion-config")
	if cfg == nil {
		return nil
	}
	if text, ok := cfg.(string); ok {
		// JSON text in the JSON is read again.
		v, err := pyJSONLoads(text)
		if err != nil {
			return err
		}
		cfg = v
	}
	m, ok := cfg.(map[string]any)
	if !ok {
		return &PyError{Type: "TypeError", Msg: "vllm.config.diffusion.DiffusionConfig() argument after ** must be a mapping, not " + pyTypeName(cfg)}
	}
	if errs := validateConfig(diffusionSchema(), m); len(errs) > 0 {
		return &PyError{Type: "pydantic_core.ValidationError", Msg: validationErrors("DiffusionConfig", schemaItems(errs))}
	}
	return nil
}

// mmLoRAsError: default modality-specific LoRAs need a multimodal model, and the model config is
// a text-only model's.
func mmLoRAsError(a *ServeArgs) error {
	if v := optionalJSON(a, "--default-mm-loras"); v != nil && pyTruthy(v) {
		return &PyError{Type: "ValueError", Msg: "Default modality-specific LoRA(s) were provided for a non multimodal model"}
	}
	return nil
}

// loraConfigError is LoRAConfig(...) with --enable-lora (vllm/config/lora.py): max_loras ge=1
// (max_lora_rank's choices are argparse's), then its model validator: max_cpu_loras, which
// create_engine_config passes only when positive, at least max_loras.
func loraConfigError(a *ServeArgs) error {
	if !a.boolFlag("--enable-lora") {
		return nil
	}
	maxLoRAs, given := intFlag(a, "--max-loras")
	if !given {
		maxLoRAs = 1
	}
	if e := intBoundError("max_loras", maxLoRAs, 1, false); e != "" {
		return &PyError{Type: "pydantic_core.ValidationError", Msg: validationErrors("LoRAConfig", []string{e})}
	}
	if n, ok := intFlag(a, "--max-cpu-loras"); ok && n > 0 && n < maxLoRAs {
		return &PyError{Type: "pydantic_core.ValidationError", Msg: validationErrors("LoRAConfig",
			[]string{fmt.Sprintf("Value error, max_cpu_loras (%d) must be >= max_loras (%d).", n, maxLoRAs)})}
	}
	return nil
}

// loraSpecError: with LoRA and speculative decoding, max_num_batched_tokens must hold
// max_num_seqs times num_speculative_tokens + 1 (batchDefaults where the command line gives
// neither). A speculative config without a number of tokens takes the draft model's, which the
// model does not know: one.
func loraSpecError(a *ServeArgs, spec map[string]any) error {
	if spec == nil || !a.boolFlag("--enable-lora") {
		return nil
	}
	tokens, seqs := batchDefaults(a)
	k := 1
	switch n := spec["num_speculative_tokens"].(type) {
	case json.Number: // an int; a float is no number of tokens
		if i, err := n.Int64(); err == nil && pyTypeName(n) == "int" {
			k = int(i)
		}
	case bool: // an int in Python
		k = 0
		if n {
			k = 1
		}
	}
	if tokens < seqs*(k+1) {
		return &PyError{Type: "ValueError", Msg: "Consider increasing max_num_batched_tokens or decreasing num_speculative_tokens"}
	}
	return nil
}

// Where vLLM's defaults depend on the device (EngineArgs.get_batch_defaults) and the model, the
// model takes an 80 GiB H100 serving the OpenAI API and a model as long as --max-model-len, or
// 8192 tokens.
const (
	defaultBatchedTokens          = 8192 // OPENAI_API_SERVER on a >= 70 GiB GPU that is no A100
	defaultBatchedTokensBatchedDP = 256  // SchedulerConfig.DEFAULT_MAX_NUM_BATCHED_TOKENS_FOR_BATCHED_DP
	defaultMaxNumSeqs             = 1024
	defaultMaxModelLen            = 8192
)

// batchDefaults is EngineArgs._set_default_max_num_seqs_and_batched_tokens_args
// (vllm/engine/arg_utils.py): max_num_batched_tokens and max_num_seqs as given, or the device's
// defaults (batched-DP MoE all2all backends take fewer tokens), both doubled for
// --performance-mode throughput; defaulted tokens hold a whole sequence without chunked prefill
// and at most max_num_seqs of them; defaulted sequences are no more than the tokens.
func batchDefaults(a *ServeArgs) (tokens, seqs int) {
	tokens, tokensGiven := intFlag(a, "--max-num-batched-tokens")
	if !tokensGiven {
		tokens = defaultBatchedTokens
	}
	seqs, seqsGiven := intFlag(a, "--max-num-seqs")
	if !seqsGiven {
		seqs = defaultMaxNumSeqs
	}
	if !tokensGiven && a.EnableExpertParallel && a.DataParallelSize > 1 &&
		slices.Contains([]string{"deepep_low_latency", "nixl_ep"}, a.lastOther("--all2all-backend")) {
		tokens = defaultBatchedTokensBatchedDP // ParallelConfig.use_batched_dp_moe
	}
	if a.lastOther("--performance-mode") == "throughput" {
		if !tokensGiven {
			tokens *= 2
		}
		if !seqsGiven {
			seqs *= 2
		}
	}
	if !tokensGiven {
		maxLen := maxModelLen(a)
		if !chunkedPrefill(a) {
			tokens = max(maxLen, tokens)
		}
		tokens = min(seqs*maxLen, tokens)
	}
	if !seqsGiven {
		seqs = min(seqs, tokens)
	}
	return tokens, seqs
}

// maxModelLen is the model's length: --max-model-len, or the model's own, which the model takes
// as defaultMaxModelLen.
func maxModelLen(a *ServeArgs) int {
	if n, ok := intFlag(a, "--max-model-len"); ok && n > 0 {
		return n
	}
	return defaultMaxModelLen
}

// intFlag is an int option's value as its type read it (int(), or human_readable_int for the
// catalog's human_int options), and whether it has one: not when absent, nor for an
// optional_type option's "" or "None".
func intFlag(a *ServeArgs, flag string) (int, bool) {
	s, ok := a.lastOtherOK(flag)
	if !ok || s == "" || s == "None" {
		return 0, false
	}
	if ref, ok := serveIndex().index[flag]; ok && strings.HasPrefix(ref.spec.opt.Type, "human_int") {
		if n, ok := humanReadableInt(s); ok {
			if i, err := n.Int64(); err == nil {
				return int(i), true
			}
		}
		return 0, false
	}
	n, err := pyInt(s)
	return n, err == nil
}

// chunkedPrefill is enable_chunked_prefill: on for a generate model unless
// --no-enable-chunked-prefill has the last word.
func chunkedPrefill(a *ServeArgs) bool {
	return !a.hasOther("--no-enable-chunked-prefill") || a.boolFlag("--enable-chunked-prefill")
}

// schedulerConfigError is SchedulerConfig(...) (vllm/config/scheduler.py) as create_engine_config
// builds it: its field bounds in field order (max_num_batched_tokens ge=1,
// max_num_scheduled_tokens ge=0, max_num_seqs ge=1, long_prefill_token_threshold ge=0, watermark
// in [0, 1), prefill_schedule_interval and stream_interval ge=1), then __post_init__'s
// verify_max_model_len: without chunked prefill a batch holds a whole sequence, a batch holds
// max_num_seqs tokens, a long prefill is no longer than the model.
func schedulerConfigError(a *ServeArgs) error {
	tokens, seqs := batchDefaults(a)
	var errs []string
	add := func(e string) {
		if e != "" {
			errs = append(errs, e)
		}
	}
	add(intBoundError("max_num_batched_tokens", tokens, 1, false))
	if n, ok := intFlag(a, "--max-num-scheduled-tokens"); ok {
		add(intBoundError("max_num_scheduled_tokens", n, 0, false))
	}
	add(intBoundError("max_num_seqs", seqs, 1, false))
	longPrefill, _ := intFlag(a, "--long-prefill-token-threshold")
	add(intBoundError("long_prefill_token_threshold", longPrefill, 0, false))
	if s, ok := a.lastOtherOK("--watermark"); ok {
		if f, err := pyFloat(s); err == nil && !math.IsNaN(f) {
			switch {
			case f < 0:
				add("watermark: Input should be greater than or equal to 0 [input_value=" + pyFloatRepr(f) + "]")
			case f >= 1:
				add("watermark: Input should be less than 1 [input_value=" + pyFloatRepr(f) + "]")
			}
		}
	}
	add(intFieldError(a, "prefill_schedule_interval", "--prefill-schedule-interval", 1, false))
	add(intFieldError(a, "stream_interval", "--stream-interval", 1, false))
	if len(errs) > 0 {
		return &PyError{Type: "pydantic_core.ValidationError", Msg: validationErrors("SchedulerConfig", errs)}
	}
	maxLen := maxModelLen(a)
	switch {
	case tokens < maxLen && !chunkedPrefill(a):
		return validationError("SchedulerConfig", "max_num_batched_tokens (%d) is smaller than max_model_len (%d). This effectively limits the maximum sequence length to max_num_batched_tokens and makes vLLM reject longer sequences. Please increase max_num_batched_tokens or decrease max_model_len.", tokens, maxLen)
	case tokens < seqs:
		return validationError("SchedulerConfig", "max_num_batched_tokens (%d) must be greater than or equal to max_num_seqs (%d).", tokens, seqs)
	case longPrefill > maxLen:
		return validationError("SchedulerConfig", "long_prefill_token_threshold (%d) cannot be greater than the max_model_len (%d).", longPrefill, maxLen)
	}
	return nil
}

// attentionBackendError is --attention-backend over the attention config: not with
// --attention-config's backend (after its validation: "auto", None and the MiniMax MSA aliases,
// which __post_init__ moves to minimax_m3_msa_decode_backend, leave it None), then read as
// AttentionConfig's backend validator reads a name (vllm/config/attention.py).
func attentionBackendError(a *ServeArgs) error {
	if !a.optionalValue("--attention-backend") {
		return nil
	}
	name := a.lastOther("--attention-backend")
	if b, ok := a.jsonConfig("--attention-config")["backend"].(string); ok {
		switch up := strings.ToUpper(b); {
		case up == "AUTO", up == "CUTLASS_MSA", up == "TRITON_MSA":
		default:
			return &PyError{Type: "ValueError", Msg: "attention_backend and attention_config.backend are mutually exclusive"}
		}
	}
	typ := configFieldSchema("--attention-config", "backend")
	if typ == nil || typ.T != "before" || !ModelsValidator(typ.Fn) {
		return nil // a catalog whose backend field the model cannot read takes any name
	}
	if r := beforeValidators[typ.Fn](name, typ.S); r.valueError != "" {
		return &PyError{Type: "ValueError", Msg: r.valueError}
	}
	return nil
}

// configFieldSchema is the catalog's schema of one field of a dataclass option; nil when it has
// none.
func configFieldSchema(flag, field string) *configSchema {
	ref, ok := serveIndex().index[flag]
	if !ok {
		return nil
	}
	s := parsedSchema(ref.spec.opt.Schema)
	if s == nil {
		return nil
	}
	for _, f := range s.F {
		if f.Name == field {
			return f.Schema
		}
	}
	return nil
}

// mambaBackends are MambaBackendEnum's names (vllm/config/mamba.py).
var mambaBackends = []string{"TRITON", "FLASHINFER", "CPU"}

// mambaConfigError is create_engine_config's Mamba config: --mamba-backend as
// MambaBackendEnum[name.upper()], then MambaConfig.validate_ssu_algorithm: an SSU algorithm
// needs the FlashInfer backend (argparse's choices keep it a valid one).
func mambaConfigError(a *ServeArgs) error {
	backend := "TRITON"
	if s, ok := a.lastOtherOK("--mamba-backend"); ok {
		backend = strings.ToUpper(s)
		if !slices.Contains(mambaBackends, backend) {
			return &PyError{Type: "ValueError", Msg: fmt.Sprintf("Unknown Mamba SSU backend: '%s'. Valid options are: %s", backend, strings.Join(mambaBackends, ", "))}
		}
	}
	if a.optionalValue("--mamba-ssu-algorithm") && backend != "FLASHINFER" {
		return &PyError{Type: "ValueError", Msg: "Mamba SSU algorithm selection is only supported with the FlashInfer backend. Please set `--mamba-backend flashinfer`, or omit `--mamba-ssu-algorithm`."}
	}
	return nil
}

// kernelConfigError is create_engine_config's kernel config overrides: --enable-flashinfer-autotune
// (either way) not with --kernel-config's, and no IR op given a priority by both --ir-op-priority
// and --kernel-config's ir_op_priority (in IrOpPriorityConfig's field order; an empty list is
// unset, text is a comma-separated list).
func kernelConfigError(a *ServeArgs) error {
	kc := a.jsonConfig("--kernel-config")
	if a.hasOther("--enable-flashinfer-autotune") || a.hasOther("--no-enable-flashinfer-autotune") {
		if v, ok := kc["enable_flashinfer_autotune"]; ok && v != nil {
			return &PyError{Type: "ValueError", Msg: "enable_flashinfer_autotune and kernel_config.enable_flashinfer_autotune are mutually exclusive"}
		}
	}
	top := a.jsonConfig("--ir-op-priority")
	inner, _ := kc["ir_op_priority"].(map[string]any)
	ref, ok := serveIndex().index["--ir-op-priority"]
	if !ok || top == nil {
		return nil
	}
	set := func(v any) bool {
		switch x := v.(type) {
		case string:
			return true // "".split(",") is [""]
		case []any:
			return len(x) > 0
		}
		return false
	}
	if s := parsedSchema(ref.spec.opt.Schema); s != nil {
		for _, f := range s.F {
			if set(top[f.Name]) && set(inner[f.Name]) {
				return &PyError{Type: "ValueError", Msg: fmt.Sprintf("Op priority for %s specified via both ir_op_priority and KernelConfig.ir_op_priority, only one allowed at a time.", f.Name)}
			}
		}
	}
	return nil
}

// capturesSizesError is create_engine_config's compilation config overrides: the capture sizes
// and the largest capture size, each either as its own flag or in --compilation-config.
func capturesSizesError(a *ServeArgs) error {
	cc := a.jsonConfig("--compilation-config")
	for _, f := range []struct{ flag, field string }{
		{"--cudagraph-capture-sizes", "cudagraph_capture_sizes"},
		{"--max-cudagraph-capture-size", "max_cudagraph_capture_size"},
	} {
		if !a.hasOther(f.flag) {
			continue
		}
		if v, ok := cc[f.field]; ok && v != nil {
			return &PyError{Type: "ValueError", Msg: fmt.Sprintf("%s and compilation_config.%s are mutually exclusive", f.field, f.field)}
		}
	}
	return nil
}

// loadConfigError is create_load_config (vllm/engine/arg_utils.py): with --load-format tensorizer
// the loader's extra config gets a tensorizer_config key (text or a list cannot take one), then
// LoadConfig(...)'s field validation (vllm/config/load.py: the safetensors prefetch thread count
// and block size ge=1).
func loadConfigError(a *ServeArgs) error {
	if a.lastOther("--load-format") == "tensorizer" {
		if v, ok := a.lastOtherOK("--model-loader-extra-config"); ok {
			switch x := jsonOrString(v).(type) {
			case string:
				return &PyError{Type: "TypeError", Msg: "'str' object does not support item assignment"}
			case []any:
				return &PyError{Type: "TypeError", Msg: "list indices must be integers or slices, not str"}
			case map[string]any:
			default:
				return &PyError{Type: "TypeError", Msg: fmt.Sprintf("'%s' object does not support item assignment", pyTypeName(x))}
			}
		}
	}
	var errs []string
	if e := intFieldError(a, "safetensors_prefetch_num_threads", "--safetensors-prefetch-num-threads", 1, false); e != "" {
		errs = append(errs, e)
	}
	if n, ok := intFlag(a, "--safetensors-prefetch-block-size"); ok {
		if e := intBoundError("safetensors_prefetch_block_size", n, 1, false); e != "" {
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		return &PyError{Type: "pydantic_core.ValidationError", Msg: validationErrors("LoadConfig", errs)}
	}
	return nil
}

// jsonOrString is a json_or_string option's value: what json.loads reads from text that looks
// like a JSON object, the text otherwise.
func jsonOrString(s string) any {
	if jsonObjectLike().MatchString(s) {
		if v, err := decodeJSON(s); err == nil {
			return v
		}
	}
	return s
}

// detailedTraceModules are DetailedTraceModules' values (vllm/config/observability.py).
var detailedTraceModules = []string{"model", "worker", "all"}

// observabilityConfigError is create_observability_config's ObservabilityConfig(...)
// (vllm/config/observability.py), fields in order: show_hidden_metrics_for_version a version
// packaging reads, each collect_detailed_traces item a DetailedTraceModules (the comma-joined
// choices argparse offers are not: the legacy split runs after the type), kv_cache_metrics_sample
// in (0, 1]; then detailed traces need an OTLP endpoint. OpenTelemetry is taken as installed.
func observabilityConfigError(a *ServeArgs) error {
	var errs []string
	if v := a.lastOther("--show-hidden-metrics-for-version"); a.optionalValue("--show-hidden-metrics-for-version") && !pep440Version().MatchString(v) {
		// A ValueError a validator raised reads as its message alone (conventions.exception_text).
		errs = append(errs, "Value error, Invalid version: "+pyRepr(v))
	}
	traces := a.otherValues("--collect-detailed-traces")
	if len(traces) == 1 && (traces[0] == "" || traces[0] == "None") {
		traces = nil
	}
	for i, t := range traces {
		if !slices.Contains(detailedTraceModules, t) {
			errs = append(errs, fmt.Sprintf("collect_detailed_traces.%d: Input should be %s [input_value=%s]", i, orList(anys(detailedTraceModules)), pydanticRepr(t)))
		}
	}
	if s, ok := a.lastOtherOK("--kv-cache-metrics-sample"); ok {
		if f, err := pyFloat(s); err == nil && !math.IsNaN(f) {
			switch {
			case f <= 0:
				errs = append(errs, "kv_cache_metrics_sample: Input should be greater than 0 [input_value="+pyFloatRepr(f)+"]")
			case f > 1:
				errs = append(errs, "kv_cache_metrics_sample: Input should be less than or equal to 1 [input_value="+pyFloatRepr(f)+"]")
			}
		}
	}
	if len(errs) == 0 && len(traces) > 0 && !a.optionalValue("--otlp-traces-endpoint") {
		errs = append(errs, "Value error, collect_detailed_traces requires `--otlp-traces-endpoint` to be set.")
	}
	if len(errs) > 0 {
		return &PyError{Type: "pydantic_core.ValidationError", Msg: validationErrors("ObservabilityConfig", errs)}
	}
	return nil
}

func anys(s []string) []any {
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}

// pep440Version is what packaging.version.parse reads (its VERSION_PATTERN, surrounding
// whitespace allowed, any case).
var pep440Version = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)^\s*v?(?:(?:[0-9]+!)?[0-9]+(?:\.[0-9]+)*` +
		`(?:[-_.]?(?:a|b|c|rc|alpha|beta|pre|preview)[-_.]?[0-9]*)?` +
		`(?:-[0-9]+|[-_.]?(?:post|rev|r)[-_.]?[0-9]*)?` +
		`(?:[-_.]?dev[-_.]?[0-9]*)?)` +
		`(?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?\s*$`)
})

// offloadConfigError is OffloadConfig(...) (vllm/config/offload.py) as create_engine_config builds
// it: its UVA and prefetch parts first, each with its field bounds (cpu_offload_gb ge=0;
// offload_group_size ge=0, offload_num_in_group ge=1, offload_prefetch_step ge=0), then, with
// the prefetch backend or a group size, at most offload_group_size layers per group and a
// prefetch step of at least 1.
func offloadConfigError(a *ServeArgs) error {
	if s, ok := a.lastOtherOK("--cpu-offload-gb"); ok {
		if f, err := pyFloat(s); err == nil && f < 0 {
			return &PyError{Type: "pydantic_core.ValidationError", Msg: validationErrors("UVAOffloadConfig",
				[]string{"cpu_offload_gb: Input should be greater than or equal to 0 [input_value=" + pyFloatRepr(f) + "]"})}
		}
	}
	intOr := func(flag string, def int) int {
		if n, ok := intFlag(a, flag); ok {
			return n
		}
		return def
	}
	group, inGroup, step := intOr("--offload-group-size", 0), intOr("--offload-num-in-group", 1), intOr("--offload-prefetch-step", 1)
	var errs []string
	for _, e := range []string{
		intBoundError("offload_group_size", group, 0, false),
		intBoundError("offload_num_in_group", inGroup, 1, false),
		intBoundError("offload_prefetch_step", step, 0, false),
	} {
		if e != "" {
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		return &PyError{Type: "pydantic_core.ValidationError", Msg: validationErrors("PrefetchOffloadConfig", errs)}
	}
	if a.lastOther("--offload-backend") == "prefetch" || group > 0 {
		switch {
		case inGroup > group:
			return validationError("OffloadConfig", "offload_num_in_group (%d) must be <= offload_group_size (%d)", inGroup, group)
		case step < 1:
			return validationError("OffloadConfig", "offload_prefetch_step (%d) must be >= 1 when prefetch offloading is enabled (offload_group_size > 0)", step)
		}
	}
	return nil
}
