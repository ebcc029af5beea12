package vllm

import (
	"encoding/json"
	"fmt"
	"maps"
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

// buildsConnector is KVTransferConfig.is_kv_transfer_instance: kv_connector is not None (an
// empty name included; its kv_role is then required by validation). The workers build a
// connector only then (ensure_kv_transfer_initialized). A config without one
// (`--kv-transfer-config.kv_role kv_both` alone) has its engine_id never used, but the
// Scheduler still asks the factory for its class (schedulerConnectorError).
func (k *KVTransferConfig) buildsConnector() bool { return k != nil && k.Raw["kv_connector"] != nil }

// connectorInitError is what building the connector raises in every process that builds one
// (workers first, at init, before their engine's scheduler), after create_connector's class and
// HMA checks: MultiConnector's constructor (vllm/distributed/kv_transfer/kv_connector/v1/
// multi_connector.py) reads its children first (_get_connector_classes_and_configs), then builds
// each, a nested MultiConnector reading its own children in turn. Other classes' constructors are
// not modelled. nil when building succeeds as far as identity is concerned.
func (k *KVTransferConfig) connectorInitError() error {
	if !k.buildsConnector() || k.Connector != multiConnectorName {
		return nil
	}
	children, err := k.multiConnectorChildren()
	if err != nil {
		return err
	}
	for _, child := range children {
		if err := child.connectorInitError(); err != nil {
			return err
		}
	}
	return nil
}

// multiConnectorChildren is _get_connector_classes_and_configs: the "connectors" list must exist
// (a bare assert), and each entry in turn is asked for its engine_id (.get, so it must be a
// dict), becomes KVTransferConfig(**entry, engine_id=...) with the parent's engine_id unless the
// entry names one (then the keyword is given twice: a TypeError), and has its class resolved.
func (k *KVTransferConfig) multiConnectorChildren() ([]*KVTransferConfig, error) {
	raw := k.ExtraConfig["connectors"]
	if raw == nil {
		return nil, bareAssertion
	}
	entries, err := pyIter(raw)
	if err != nil {
		return nil, err
	}
	var children []*KVTransferConfig
	for _, e := range entries {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, &PyError{Type: "AttributeError", Msg: fmt.Sprintf("'%s' object has no attribute 'get'", pyTypeName(e))}
		}
		if _, dup := m["engine_id"]; dup {
			return nil, &PyError{Type: "TypeError", Msg: "vllm.config.kv_transfer.KVTransferConfig() got multiple values for keyword argument 'engine_id'"}
		}
		args := maps.Clone(m)
		if k.EngineID != nil {
			args["engine_id"] = *k.EngineID
		} else {
			args["engine_id"] = nil
		}
		child, err := newKVTransferConfig(args)
		if err != nil {
			return nil, err
		}
		if _, err := connectorClass(child); err != nil {
			return nil, err
		}
		children = append(children, child)
	}
	return children, nil
}

// pyIter is `for x in v` over a decoded JSON value: a list's items, a dict's keys (sorted: Go's
// map has lost the JSON's order), a string's characters; a number, a bool or None is not
// iterable.
func pyIter(v any) ([]any, error) {
	switch v := v.(type) {
	case []any:
		return v, nil
	case map[string]any:
		keys := sortedKeys(v)
		out := make([]any, len(keys))
		for i, key := range keys {
			out[i] = key
		}
		return out, nil
	case string:
		var out []any
		for _, r := range v {
			out = append(out, string(r))
		}
		return out, nil
	}
	return nil, &PyError{Type: "TypeError", Msg: fmt.Sprintf("'%s' object is not iterable", pyTypeName(v))}
}

// newKVTransferConfig is KVTransferConfig(**m) called from Python (a MultiConnector child):
// pydantic validates the keyword arguments against the class's schema, the same the catalog
// gives --kv-transfer-config (checkConfig), then __post_init__ runs (kvTransferFromMap). A
// failure is the ValidationError itself, not argparse's exit.
func newKVTransferConfig(m map[string]any) (*KVTransferConfig, error) {
	if ref, ok := flagIndexOf(EntrypointServe).index["--kv-transfer-config"]; ok {
		if err := checkConfig(ref.spec, "", m); err != nil {
			return nil, pydanticError(err)
		}
	}
	kv, err := kvTransferFromMap(m)
	if err != nil {
		return nil, pydanticError(err)
	}
	return kv, nil
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

// mooncakeStoreExtra returns the kv_connector_extra_config of the first Mooncake store connector
// this config runs, directly or inside a MultiConnector (nested ones included, in the order
// MultiConnector builds its children), and whether there is one.
func (k *KVTransferConfig) mooncakeStoreExtra() (map[string]any, bool) {
	for _, c := range k.runningConnectors() {
		if c.Connector == MooncakeStoreConnectorName {
			return c.ExtraConfig, true
		}
	}
	return nil, false
}

// runningConnectors are the connectors a config builds, in order: itself, or a MultiConnector's
// children, each child MultiConnector replaced by its own. Children that do not validate build
// nothing (connectorInitError says why).
func (k *KVTransferConfig) runningConnectors() []*KVTransferConfig {
	if !k.buildsConnector() {
		return nil
	}
	if k.Connector != multiConnectorName {
		return []*KVTransferConfig{k}
	}
	children, err := k.multiConnectorChildren()
	if err != nil {
		return nil
	}
	var out []*KVTransferConfig
	for _, c := range children {
		out = append(out, c.runningConnectors()...)
	}
	return out
}

// HasMooncakeStore reports whether the command runs the Mooncake store connector.
func (a *ServeArgs) HasMooncakeStore() bool {
	_, ok := a.KVTransfer.mooncakeStoreExtra()
	return ok
}
