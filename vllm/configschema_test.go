package vllm

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// A config dataclass's JSON is validated by pydantic inside argparse's type= (vllm/engine/
// arg_utils.py parse_dataclass: TypeAdapter(cls).validate_json), in lax mode, against the field
// types and bounds the catalog carries (vllm/config/parallel.py EPLBConfig window_size gt=0,
// num_redundant_experts ge=0, communicator a nullable Literal; vllm/config/kv_events.py
// KVEventsConfig; vllm/config/attention.py flash_attn_version Literal[2, 3, 4] | None;
// vllm/config/weight_transfer.py backend Literal[...] | str; vllm/config/fault_tolerance.py).
// The lax conversions are pydantic's (pydantic-core's int, float and bool from JSON).
func TestConfigFieldTypesAndBounds(t *testing.T) {
	tests := []struct {
		args string
		// want is argparse's error line (its end), "" when the line parses.
		want string
		// detail is part of pydantic's report of the errors.
		detail string
	}{
		{`--eplb-config '{"window_size": 1000, "num_redundant_experts": 0, "use_async": "yes"}'`, "", ""},
		{`--eplb-config '{"window_size": 0}'`, "1 validation error for EPLBConfig", "window_size: Input should be greater than 0 [input_value=0]"},
		{`--eplb-config '{"num_redundant_experts": -1}'`, "1 validation error for EPLBConfig", "num_redundant_experts: Input should be greater than or equal to 0"},
		{`--eplb-config '{"window_size": "1_000", "step_interval": " 30 ", "num_redundant_experts": "1.0"}'`, "", ""},
		{`--eplb-config '{"window_size": 1e3, "step_interval": 2.0, "num_redundant_experts": true}'`, "", ""},
		{`--eplb-config '{"window_size": 1.5}'`, "1 validation error for EPLBConfig", "got a number with a fractional part"},
		{`--eplb-config '{"window_size": "1."}'`, "1 validation error for EPLBConfig", "unable to parse string as an integer"},
		{`--eplb-config '{"window_size": null}'`, "1 validation error for EPLBConfig", "window_size: Input should be a valid integer [input_value=None]"},
		{`--eplb-config '{"log_balancedness": 2}'`, "1 validation error for EPLBConfig", "Input should be a valid boolean, unable to interpret input"},
		{`--eplb-config '{"log_balancedness": " yes"}'`, "1 validation error for EPLBConfig", "unable to interpret input"},
		{`--eplb-config '{"communicator": null, "policy": "default"}'`, "", ""},
		{`--eplb-config '{"communicator": "nccl"}'`, "1 validation error for EPLBConfig", "Input should be 'torch_nccl', 'torch_gloo', 'nixl' or 'pynccl'"},
		// Every error is counted: two bad fields and a key the class lacks.
		{`--eplb-config '{"window_size": 0, "step_interval": -1, "nope": 1}'`, "3 validation errors for EPLBConfig", "nope: Unexpected keyword argument [input_value=1]"},
		{`--attention-config '{"flash_attn_version": 3}'`, "", ""},
		{`--attention-config '{"flash_attn_version": 3.0}'`, "", ""},
		{`--attention-config '{"flash_attn_version": "3"}'`, "1 validation error for AttentionConfig", "Input should be 2, 3 or 4"},
		// A union reports every member's error when none takes the value.
		{`--weight-transfer-config '{"backend": "custom"}'`, "", ""},
		{`--weight-transfer-config '{"backend": 1}'`, "2 validation errors for WeightTransferConfig", ""},
		{`--fault-tolerance-config '{"engine_recovery_timeout_sec": "60"}'`, "", ""},
		{`--fault-tolerance-config '{"engine_recovery_timeout_sec": []}'`, "1 validation error for FaultToleranceConfig", "Input should be a valid integer [input_value=[]]"},
		{`--kv-events-config '{"buffer_steps": "1k"}'`, "1 validation error for KVEventsConfig", "buffer_steps: Input should be a valid integer, unable to parse string as an integer"},
		{`--kv-events-config '{"hwm": 1e400}'`, "1 validation error for KVEventsConfig", "hwm: Input should be a finite number"},
		{`--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_buffer_size":"1e9","kv_port":"14000"}'`, "", ""},
		{`--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_buffer_device":0}'`, "1 validation error for KVTransferConfig", "kv_buffer_device: Input should be a valid string [input_value=0]"},
		// CompilationConfig's validator functions run before the enums (vllm/config/
		// compilation.py validate_mode_before, validate_cudagraph_mode_before): names in any case;
		// CUDAGraphMode's pairs have no JSON form, but pydantic lists them.
		{`-cc '{"mode": "vllm_compile", "cudagraph_mode": "Full_Decode_Only"}'`, "", ""},
		{`-cc '{"mode": true, "cudagraph_mode": 1.0}'`, "", ""},
		{`-cc '{"mode": "3"}'`, "1 validation error for CompilationConfig", "mode: Value error, Invalid compilation mode: 3. Valid modes are: NONE, STOCK_TORCH_COMPILE, DYNAMO_TRACE_ONCE, VLLM_COMPILE [input_value='3']"},
		{`-cc '{"mode": 4, "cudagraph_mode": [2, 0]}'`, "2 validation errors for CompilationConfig", "mode: Input should be 0, 1, 2 or 3 [input_value=4]; cudagraph_mode: Input should be 0, 1, 2, (2, 0) or (2, 1) [input_value=[2, 0]]"},
		// ECTransferConfig.__post_init__ (vllm/config/ec_transfer.py): a connector needs a role.
		{`--ec-transfer-config '{"ec_connector": "ECExampleConnector", "ec_role": "ec_consumer"}'`, "", ""},
		{`--ec-transfer-config '{"ec_connector": "ECExampleConnector"}'`, "1 validation error for ECTransferConfig", "Value error, Please specify ec_role when ec_connector is set, supported roles are ('ec_producer', 'ec_both', 'ec_consumer')"},
		{`--ec-transfer-config '{"ec_role": "ec_both"}'`, "", ""},
		// AttentionConfig's validator functions (vllm/config/attention.py) look backends up by
		// name (AttentionBackendEnum's metaclass words a missing one,
		// vllm/v1/attention/backends/registry.py); "auto" is None. KernelConfig's normalise
		// a backend's text before its Literal (vllm/config/kernel.py).
		{`-ac '{"backend": "Flash_Attn", "mla_prefill_backend": "flashinfer"}'`, "", ""},
		{`-ac.backend AUTO`, "", ""},
		{`-ac.backend bogus`, "1 validation error for AttentionConfig", "backend: Value error, Unknown attention backend: 'BOGUS'. Valid options are: FLASH_ATTN, FLASH_ATTN_DIFFKV, "},
		{`-ac.mla_prefill_backend auto`, "1 validation error for AttentionConfig", "mla_prefill_backend: Value error, Unknown MLA prefill backend: 'AUTO'. Valid options are: FLASH_ATTN, FLASHINFER, "},
		{`-ac '{"backend": 3}'`, "1 validation error for AttentionConfig", "backend: Input should be 'vllm.v1.attention.backends.flash_attn.FlashAttentionBackend', "},
		{`-ac '{"backend_per_kind": {"mamba": "triton_attn", "full_attention": "FLASHINFER"}}'`, "", ""},
		{`-ac '{"backend_per_kind": {"mamba": "triton_attn", "nope": "flashinfer"}}'`, "1 validation error for AttentionConfig", "backend_per_kind: Value error, Unknown KV cache group kind 'nope' in backend_per_kind. Valid kinds are: chunked_local_attention, cross_attention, "},
		{`-ac '{"backend_per_kind": {"full_attention": "nope", "zzz": "flashinfer"}}'`, "1 validation error for AttentionConfig", "backend_per_kind: Value error, Unknown attention backend: 'NOPE'."},
		{`-ac '{"backend_per_kind": {"mamba": "nope"}}'`, "1 validation error for AttentionConfig", "backend_per_kind: Value error, Unknown attention backend: 'NOPE'."},
		{`-ac '{"backend_per_kind": {"mamba": 3}}'`, "1 validation error for AttentionConfig", "backend_per_kind.mamba: Input should be 'vllm.v1.attention.backends.flash_attn.FlashAttentionBackend', "},
		{`--kernel-config '{"moe_backend": "Deep-Gemm", "linear_backend": "AUTO"}'`, "", ""},
		{`--kernel-config.moe_backend Bogus-X`, "1 validation error for KernelConfig", "moe_backend: Input should be 'auto', "},
		// Dotted keys are validated as the whole JSON they become.
		{`--eplb-config.window_size 0`, "1 validation error for EPLBConfig", ""},
		{`--eplb-config.window_size 5`, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
			_, err := ParseServe("vllm serve org/M " + tt.args)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ae *ArgError
			if !errors.As(err, &ae) {
				t.Fatalf("got %v, want an argparse error", err)
			}
			if !strings.HasSuffix(ae.line(), ": "+tt.want) {
				t.Errorf("error line %q, want it to end in %q", ae.line(), tt.want)
			}
			if !strings.Contains(ae.Detail, tt.detail) {
				t.Errorf("detail %q, want %q in it", ae.Detail, tt.detail)
			}
			if got := crashText(err); got != "SystemExit: 2 ("+ae.line()+")" {
				t.Errorf("crash text %q: the process prints the error line alone", got)
			}
		})
	}
}

// Every schema the catalog carries decodes, names only the kinds the validator knows, and names
// the fields the option's Fields list (parsedSchema panics on a catalog it cannot read, so this
// is what keeps a regenerated catalog from reaching users broken).
func TestCatalogSchemasDecode(t *testing.T) {
	known := map[string]bool{"any": true, "nullable": true, "union": true, "int": true, "float": true, "bool": true,
		"str": true, "literal": true, "enum": true, "list": true, "dict": true, "dc": true, "before": true}
	var walk func(opt string, s *configSchema)
	walk = func(opt string, s *configSchema) {
		if s == nil {
			return
		}
		if !known[s.T] {
			t.Errorf("%s: schema kind %q", opt, s.T)
		}
		walk(opt, s.S)
		walk(opt, s.K)
		for _, c := range s.C {
			walk(opt, c)
		}
		for _, f := range s.F {
			walk(opt, f.Schema)
		}
	}
	n := 0
	for _, o := range append(ServeOptions(), EntrypointOptions(EntrypointGRPCServer)...) {
		if o.Schema == "" {
			continue
		}
		n++
		s := parsedSchema(o.Schema)
		walk(o.Names[0], s)
		if s.T != "dc" {
			continue
		}
		var names []string
		for _, f := range s.F {
			names = append(names, f.Name)
		}
		slices.Sort(names)
		if !slices.Equal(names, o.Fields) {
			t.Errorf("%s: schema fields %v, Fields %v", o.Names[0], names, o.Fields)
		}
	}
	if n == 0 {
		t.Fatal("no option of the catalog carries a schema")
	}
}

// CUDAGraphMode[text.upper()] (vllm/config/compilation.py validate_cudagraph_mode_before) raises
// KeyError for any other text: pydantic does not collect it, so it ends the parse as the
// exception itself, even after an error pydantic did collect.
func TestCUDAGraphModeNameKeyError(t *testing.T) {
	for args, want := range map[string]string{
		`-cc.cudagraph_mode bogus`:                           "KeyError: 'BOGUS'",
		`-cc '{"mode": "x", "cudagraph_mode": "piecewize"}'`: "KeyError: 'PIECEWIZE'",
		`-cc.cudagraph_mode ''`:                              "KeyError: ''",
	} {
		_, err := ParseServe("vllm serve org/M " + args)
		var pe *PyError
		if !errors.As(err, &pe) || err.Error() != want {
			t.Errorf("%s: %v, want %s", args, err, want)
		}
	}
}
