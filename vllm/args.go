package vllm

import (
	"encoding/json"
	"fmt"
	"strings"
)

// ServeArgs is one parsed `vllm serve` command line: the argparse namespace of
// vllm/entrypoints/openai/cli_args.py make_arg_parser, restricted to what decides a process's
// identity, plus every other flag kept verbatim. Pointer fields are Python's Optional: nil is
// None (the flag was not given), distinct from 0.
type ServeArgs struct {
	// Env holds the `NAME=value` assignments that preceded `vllm` on the line; they override the
	// node's environment for this command only (a shell applies them to that one process tree).
	Env map[string]string `json:"env,omitempty"`
	// Argv is the command's words from the program on (`vllm`, or `python -m ...`), as the shell
	// split them.
	Argv []string `json:"argv"`
	// Entrypoint is the program the line runs: EntrypointServe (`vllm serve`, or `python -m
	// vllm.entrypoints.cli.main serve`), EntrypointAPIServer (`python -m
	// vllm.entrypoints.openai.api_server`, the launch form of older docs and of Mooncake's vLLM
	// integration guides) or EntrypointGRPCServer (`python -m vllm.entrypoints.grpc_server`). The
	// first two parse the same flags (cli_args.make_arg_parser); the gRPC server's parser has its
	// own (--host, --port and the engine's options). They differ in what runs (serve.go).
	Entrypoint string `json:"entrypoint"`

	// Model is the positional model tag, or --model when no positional was given
	// (ServeSubcommand.cmd: a positional model_tag takes precedence).
	Model string `json:"model"`

	TensorParallelSize         int `json:"tensor_parallel_size"`
	PipelineParallelSize       int `json:"pipeline_parallel_size"`
	PrefillContextParallelSize int `json:"prefill_context_parallel_size"`
	DecodeContextParallelSize  int `json:"decode_context_parallel_size"`

	DataParallelSize      int     `json:"data_parallel_size"`
	DataParallelRank      *int    `json:"data_parallel_rank"`
	DataParallelStartRank *int    `json:"data_parallel_start_rank"`
	DataParallelSizeLocal *int    `json:"data_parallel_size_local"`
	DataParallelAddress   *string `json:"data_parallel_address"`
	DataParallelRPCPort   *int    `json:"data_parallel_rpc_port"`
	// DataParallelBackend is "mp" or "ray" (validated when the config is built, as pydantic does).
	DataParallelBackend             string `json:"data_parallel_backend"`
	DataParallelExternalLB          bool   `json:"data_parallel_external_lb"`
	DataParallelHybridLB            bool   `json:"data_parallel_hybrid_lb"`
	DataParallelMultiPortExternalLB bool   `json:"data_parallel_multi_port_external_lb"`
	EnableExpertParallel            bool   `json:"enable_expert_parallel"`

	Headless       bool   `json:"headless"`
	NNodes         int    `json:"nnodes"`
	NodeRank       int    `json:"node_rank"`
	MasterAddr     string `json:"master_addr"`
	MasterPort     int    `json:"master_port"`
	APIServerCount *int   `json:"api_server_count"`
	Port           int    `json:"port"`
	// DataParallelSupervisorPort is the multi-port supervisor's health port (FrontendArgs).
	DataParallelSupervisorPort int `json:"data_parallel_supervisor_port"`

	DistributedExecutorBackend *string `json:"distributed_executor_backend"`

	// KVTransfer is --kv-transfer-config; nil when not given.
	KVTransfer *KVTransferConfig `json:"kv_transfer_config,omitempty"`
	// KVEvents is --kv-events-config; nil when not given.
	KVEvents *KVEventsConfig `json:"kv_events_config,omitempty"`

	// Other lists every other flag as given, in order, under its canonical long name.
	Other []Option `json:"other,omitempty"`

	// configs holds the final object of each JSON flag given as an object (--eplb-config,
	// --kv-transfer-config, ...), as argparse leaves it once FlexibleArgumentParser has folded
	// the dotted keys in.
	configs map[string]map[string]any
}

func (a *ServeArgs) setJSONConfig(flag string, obj map[string]any) {
	if a.configs == nil {
		a.configs = map[string]map[string]any{}
	}
	a.configs[flag] = obj
}

// jsonConfig is the final object of a JSON flag, nil when the flag was not given as an object.
func (a *ServeArgs) jsonConfig(flag string) map[string]any { return a.configs[flag] }

// Entrypoints (ServeArgs.Entrypoint).
const (
	// EntrypointServe is vllm/entrypoints/cli/serve.py ServeSubcommand: headless, multi-API-server,
	// DP-supervisor and single-server launches.
	EntrypointServe = "serve"
	// EntrypointAPIServer is vllm/entrypoints/openai/api_server.py's __main__: parse, validate,
	// run_server(args). It never takes ServeSubcommand.cmd's branches, so --headless and
	// --api-server-count are parsed but start nothing different: one API server that launches the
	// engines itself.
	EntrypointAPIServer = "api_server"
	// EntrypointGRPCServer is vllm/entrypoints/grpc_server.py main(): its own parser (--host,
	// --port, then AsyncEngineArgs' options: no frontend option and no positional model), then
	// serve_grpc, without validate_parsed_serve_args.
	EntrypointGRPCServer = "grpc_server"
)

// Option is one flag that does not affect identity. Value is nil for flags that take none.
type Option struct {
	Flag  string  `json:"flag"`
	Value *string `json:"value,omitempty"`
}

// Defaults of vllm/config/parallel.py ParallelConfig and cli_args.FrontendArgs that the model
// reads; each is vLLM's own default, so a command that omits the flag behaves as vLLM would.
const (
	defaultMasterAddr          = "127.0.0.1" // ParallelConfig.master_addr
	defaultMasterPort          = 29501       // ParallelConfig.master_port
	defaultDataParallelRPCPort = 29550       // ParallelConfig.data_parallel_rpc_port
	defaultDPMasterIP          = "127.0.0.1" // ParallelConfig.data_parallel_master_ip
	defaultAPIPort             = 8000        // FrontendArgs.port
	defaultGRPCServerPort      = 50051       // grpc_server.py main()'s --port
	defaultSupervisorPort      = 9256        // FrontendArgs.data_parallel_supervisor_port
)

// newServeArgs returns the namespace argparse starts from: every default of vLLM main.
func newServeArgs() *ServeArgs {
	return &ServeArgs{
		Model:                      "Qwen/Qwen3-0.6B", // ModelConfig.model default
		TensorParallelSize:         1,
		PipelineParallelSize:       1,
		PrefillContextParallelSize: 1,
		DecodeContextParallelSize:  1,
		DataParallelSize:           1,
		DataParallelBackend:        "mp",
		NNodes:                     1,
		MasterAddr:                 defaultMasterAddr,
		MasterPort:                 defaultMasterPort,
		Port:                       defaultAPIPort,
		DataParallelSupervisorPort: defaultSupervisorPort,
	}
}

// MooncakeStoreConnectorName is the name vLLM's KVConnectorFactory registers the Mooncake store
// connector under (vllm/distributed/kv_transfer/kv_connector/factory.py).
const MooncakeStoreConnectorName = "MooncakeStoreConnector"

// multiConnectorName wraps several connectors (kv_connector_extra_config.connectors); a Mooncake
// store connector inside it runs exactly as it would alone.
const multiConnectorName = "MultiConnector"

// KVTransferConfig is --kv-transfer-config (vllm/config/kv_transfer.py KVTransferConfig).
type KVTransferConfig struct {
	Connector string `json:"kv_connector,omitempty"`
	// EngineID is nil when the JSON does not set it: vLLM then draws uuid4() in __post_init__,
	// once per CLI parse (the model derives it from Options.Seed so runs reproduce).
	EngineID *string `json:"engine_id,omitempty"`
	Role     string  `json:"kv_role,omitempty"`
	// ExtraConfig is kv_connector_extra_config, decoded with numbers kept as written.
	ExtraConfig map[string]any `json:"kv_connector_extra_config,omitempty"`
	// Raw is the whole object as given (unknown keys included).
	Raw map[string]any `json:"raw,omitempty"`
}

// buildsConnector is KVTransferConfig.is_kv_transfer_instance: a connector is named (its kv_role
// is then required by validation). A config without one (`--kv-transfer-config.kv_role kv_both`
// alone) builds no connector anywhere, so its engine_id is never used.
func (k *KVTransferConfig) buildsConnector() bool { return k != nil && k.Connector != "" }

// connectorInitError is what building the connector raises in every process that builds one
// (workers first, at init, before their engine's scheduler): MultiConnector's
// _get_connector_classes_and_configs asserts its "connectors" list exists and turns each child
// into a KVTransferConfig, validated as the top-level config is (kv_role required once
// kv_connector is set). nil when building succeeds as far as identity is concerned.
func (k *KVTransferConfig) connectorInitError() error {
	if !k.buildsConnector() || k.Connector != multiConnectorName {
		return nil
	}
	raw, ok := k.ExtraConfig["connectors"]
	if !ok || raw == nil {
		return bareAssertion
	}
	children, ok := raw.([]any)
	if !ok {
		return &PyError{Type: "TypeError", Msg: fmt.Sprintf("argument after ** must be a mapping, not %s", pyTypeName(raw))}
	}
	for _, c := range children {
		child, ok := c.(map[string]any)
		if !ok {
			return &PyError{Type: "TypeError", Msg: fmt.Sprintf("argument after ** must be a mapping, not %s", pyTypeName(c))}
		}
		if _, err := kvTransferFromMap(child); err != nil {
			// Outside argparse the same validation is a pydantic error the process raises.
			return pydanticError(err)
		}
	}
	return nil
}

// pyTypeName is type(v).__name__ of a decoded JSON value.
func pyTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "NoneType"
	case bool:
		return "bool"
	case string:
		return "str"
	case []any:
		return "list"
	case map[string]any:
		return "dict"
	}
	if n, ok := v.(json.Number); ok && !strings.ContainsAny(n.String(), ".eE") {
		return "int"
	}
	return "float"
}

// mooncakeStoreExtra returns the kv_connector_extra_config of the Mooncake store connector this
// config runs, directly or inside a MultiConnector, and whether there is one.
func (k *KVTransferConfig) mooncakeStoreExtra() (map[string]any, bool) {
	if k == nil {
		return nil, false
	}
	if k.Connector == MooncakeStoreConnectorName {
		return k.ExtraConfig, true
	}
	if k.Connector != multiConnectorName {
		return nil, false
	}
	children, _ := k.ExtraConfig["connectors"].([]any)
	for _, c := range children {
		child, ok := c.(map[string]any)
		if !ok {
			continue
		}
		if name, _ := child["kv_connector"].(string); name == MooncakeStoreConnectorName {
			extra, _ := child["kv_connector_extra_config"].(map[string]any)
			return extra, true
		}
	}
	return nil, false
}

// HasMooncakeStore reports whether the command runs the Mooncake store connector.
func (a *ServeArgs) HasMooncakeStore() bool {
	_, ok := a.KVTransfer.mooncakeStoreExtra()
	return ok
}
