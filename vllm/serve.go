package vllm

import (
	"path"
	"regexp"
	"strings"
	"sync"
)

// launchMode is the branch vllm/entrypoints/cli/serve.py ServeSubcommand.cmd takes.
type launchMode int

const (
	// launchServer: one API server process (or a multi-API-server parent) that launches the
	// engine cores (run_server / run_multi_api_server -> launch_core_engines).
	launchServer launchMode = iota
	// launchHeadless: run_headless (api_server_count resolved to 0).
	launchHeadless
	// launchSupervisor: --data-parallel-multi-port-external-lb, run_dp_supervisor.
	launchSupervisor
	// launchGRPC: --grpc, vllm/entrypoints/grpc_server.py serve_grpc: one process that builds
	// the engine config as run_server does (no headless, one API process), starts the engines
	// through AsyncLLM and serves gRPC once they are up.
	launchGRPC
)

// serveDecision is the outcome of ServeSubcommand.validate and .cmd before any config is built.
type serveDecision struct {
	mode           launchMode
	apiServerCount int
	// rustFrontend is the Rust front end's binary (envs.VLLM_RUST_FRONTEND_PATH) when
	// VLLM_USE_RUST_FRONTEND is set: run_multi_api_server then starts it instead of Python API
	// servers. "" without it (as vLLM treats an empty path).
	rustFrontend string
}

// decideServe is ServeSubcommand.validate (cli_args.validate_parsed_serve_args) then the part of
// ServeSubcommand.cmd that chooses a launch path, in vLLM's order. env is the command's
// environment, inst the installation it runs (the Rust front end's binary).
func decideServe(a *ServeArgs, env map[string]string, inst Install) (serveDecision, error) {
	if a.Entrypoint == EntrypointGRPCServer {
		// vllm/entrypoints/grpc_server.py main(): its parser, then serve_grpc(args), with neither
		// validate_parsed_serve_args nor ServeSubcommand.cmd.
		return serveDecision{mode: launchGRPC, apiServerCount: 1}, nil
	}
	if a.Entrypoint == EntrypointServe {
		if err := servedModelNameFirst(a.Argv); err != nil {
			return serveDecision{}, err
		}
	}
	if err := validateParsedServeArgs(a, inst); err != nil {
		return serveDecision{}, err
	}
	if a.Entrypoint == EntrypointAPIServer {
		// api_server.py __main__ calls run_server(args) directly: one API server that launches
		// the engines, whatever --headless, --api-server-count or the supervisor flag say.
		return serveDecision{mode: launchServer, apiServerCount: 1}, nil
	}
	if a.boolFlag("--grpc") {
		// ServeSubcommand.cmd's first branch: serve_grpc, whatever --headless,
		// --api-server-count or the load-balancing flags say.
		return serveDecision{mode: launchGRPC, apiServerCount: 1}, nil
	}
	rust, err := rustFrontendPath(env, inst)
	if err != nil {
		return serveDecision{}, err
	}
	apiCount := copyInt(a.APIServerCount)
	if a.Headless {
		if apiCount != nil && *apiCount > 0 {
			return serveDecision{}, valueError("--api-server-count=%d cannot be used with --headless (no API servers are started in headless mode).", *apiCount)
		}
		apiCount = intPtr(0) // no API servers in headless mode
	}
	isExternal := a.DataParallelExternalLB || a.DataParallelRank != nil
	isHybrid, isMultiPort := false, false
	if !a.DataParallelHybridLB && !a.DataParallelMultiPortExternalLB {
		isHybrid = a.DataParallelStartRank != nil
	} else {
		isHybrid = a.DataParallelHybridLB
		isMultiPort = a.DataParallelMultiPortExternalLB
	}
	modes := 0
	for _, m := range []bool{isMultiPort, isExternal, isHybrid} {
		if m {
			modes++
		}
	}
	if modes > 1 {
		return serveDecision{}, valueError("Cannot use more than one data parallel load balancing mode. Choose one of: --data-parallel-multi-port-external-lb, --data-parallel-external-lb (or --data-parallel-rank), --data-parallel-hybrid-lb (or --data-parallel-start-rank).")
	}
	if apiCount == nil {
		switch {
		case isMultiPort || isExternal || rust != "":
			// The Rust front end is one multithreaded process.
			apiCount = intPtr(1)
		case isHybrid:
			n := 1
			if a.DataParallelSizeLocal != nil && *a.DataParallelSizeLocal != 0 {
				n = *a.DataParallelSizeLocal
			}
			apiCount = intPtr(n)
		default:
			apiCount = intPtr(a.DataParallelSize)
		}
	} else if rust != "" && *apiCount > 1 {
		// "Ignoring --api-server-count=N when using rust front-end process"
		apiCount = intPtr(1)
	}
	if a.boolFlag("--enable-elastic-ep") && *apiCount > 1 {
		// "Elastic EP only supports running with with at most one API server."
		apiCount = intPtr(1)
	}
	d := serveDecision{apiServerCount: *apiCount, rustFrontend: rust}
	switch {
	case isMultiPort:
		d.mode = launchSupervisor
	case *apiCount < 1:
		d.mode = launchHeadless
	default:
		d.mode = launchServer
	}
	return d, nil
}

// validateParsedServeArgs is cli_args.validate_parsed_serve_args: the quick checks that raise
// before anything loads, the chat template first.
func validateParsedServeArgs(a *ServeArgs, inst Install) error {
	if a.optionalValue("--chat-template") {
		if err := chatTemplateError(a.lastOther("--chat-template"), inst); err != nil {
			return err
		}
	}
	if a.boolFlag("--enable-auto-tool-choice") && !a.hasOther("--tool-call-parser") {
		return &PyError{Type: "TypeError", Msg: "Error: --enable-auto-tool-choice requires --tool-call-parser"}
	}
	if a.boolFlag("--enable-log-outputs") && !a.boolFlag("--enable-log-requests") {
		return &PyError{Type: "TypeError", Msg: "Error: --enable-log-outputs requires --enable-log-requests"}
	}
	if a.boolFlag("--enable-per-request-metrics") && a.hasOther("--disable-log-stats") {
		return valueError("Error: --enable-per-request-metrics requires engine statistics logging; remove --disable-log-stats to enable per-request metrics.")
	}
	if a.DataParallelMultiPortExternalLB {
		return validateMultiPortExternalLB(a)
	}
	return nil
}

// validateMultiPortExternalLB is vllm/entrypoints/openai/dp_supervisor.py
// validate_multi_port_external_lb_args.
func validateMultiPortExternalLB(a *ServeArgs) error {
	if a.boolFlag("--grpc") {
		return valueError("Error: --data-parallel-multi-port-external-lb does not support --grpc")
	}
	if a.optionalValue("--uds") {
		return valueError("Error: --data-parallel-multi-port-external-lb does not support --uds")
	}
	if a.optionalValue("--ssl-keyfile") != a.optionalValue("--ssl-certfile") {
		return valueError("Error: --ssl-keyfile and --ssl-certfile must be provided together")
	}
	if a.APIServerCount != nil && *a.APIServerCount != 1 {
		return valueError("Error: --data-parallel-multi-port-external-lb currently requires --api-server-count=1")
	}
	if a.DataParallelRank != nil {
		return valueError("Error: --data-parallel-multi-port-external-lb manages child --data-parallel-rank values internally")
	}
	if a.DataParallelExternalLB || a.DataParallelHybridLB {
		return valueError("Error: --data-parallel-multi-port-external-lb cannot be combined with --data-parallel-external-lb or --data-parallel-hybrid-lb")
	}
	if a.DataParallelSize < 2 {
		return valueError("Error: --data-parallel-multi-port-external-lb requires --data-parallel-size > 1")
	}
	local := a.DataParallelSizeLocal
	if local == nil || *local < 2 {
		return valueError("Error: --data-parallel-multi-port-external-lb requires --data-parallel-size-local >= 2")
	}
	if *local > a.DataParallelSize {
		return valueError("Error: --data-parallel-size-local cannot exceed --data-parallel-size")
	}
	if a.DataParallelSize%*local != 0 {
		return valueError("Error: --data-parallel-size must be divisible by --data-parallel-size-local")
	}
	if supervisorStartRank(a)+*local > a.DataParallelSize {
		return valueError("Error: multi-port supervised ranks would exceed --data-parallel-size")
	}
	if a.Port <= a.DataParallelSupervisorPort && a.DataParallelSupervisorPort <= a.Port+*local-1 {
		return valueError("Error: --data-parallel-supervisor-port %d overlaps with child rank ports %d-%d",
			a.DataParallelSupervisorPort, a.Port, a.Port+*local-1)
	}
	return nil
}

// servedModelNameFirst is FlexibleArgumentParser.parse_args' check, before argparse runs, that a
// `vllm serve` line naming --served-model-name starts with its model: after the first --model has
// been moved to the front, a first argument that is an option is refused (unless --config
// supplies the model).
func servedModelNameFirst(argv []string) error {
	args := argv
	for i, w := range argv {
		if w == "serve" {
			args = argv[i+1:]
			break
		}
	}
	relocated, config, served := false, false, false
	for _, w := range args {
		relocated = relocated || modelOption().MatchString(w)
		config = config || configOption().MatchString(w)
		served = served || servedModelNameOption().MatchString(w)
	}
	if relocated || config || !served || len(args) == 0 || !strings.HasPrefix(args[0], "-") {
		return nil
	}
	return valueError("`model` should be provided as the first positional argument when using `vllm serve`. i.e. `vllm serve <model> --<arg> <value>`.")
}

// The option spellings parse_args looks for before argparse (argparse_utils.py).
var (
	configOption          = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^--config(=.+|$)`) })
	servedModelNameOption = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^--served[-_]model[-_]name(=.+|$)`) })
)

// boolFlag is the value argparse leaves for a BooleanOptionalAction or store_true flag kept in
// Other: the last of `--x` and `--no-x` wins; false when neither was given.
func (a *ServeArgs) boolFlag(flag string) bool {
	neg := "--no-" + strings.TrimPrefix(flag, "--")
	v := false
	for _, o := range a.Other {
		switch o.Flag {
		case flag:
			v = true
		case neg:
			v = false
		}
	}
	return v
}

// lastOther is the value of the last occurrence of a flag kept in Other ("" when absent).
func (a *ServeArgs) lastOther(flag string) string {
	v, _ := a.lastOtherOK(flag)
	return v
}

// lastOtherOK is lastOther, and whether the flag was given a value at all (an empty one too).
func (a *ServeArgs) lastOtherOK(flag string) (string, bool) {
	v, ok := "", false
	for _, o := range a.Other {
		if o.Flag == flag && o.Value != nil {
			v, ok = *o.Value, true
		}
	}
	return v, ok
}

// optionalValue reports whether an optional_type string option holds a value: it was given, and
// its last value is not "" or "None" (which optional_type reads as None).
func (a *ServeArgs) optionalValue(flag string) bool {
	v := a.lastOther(flag)
	return v != "" && v != "None"
}

// otherValues is every value a flag kept (an nargs="+" option's list), in order.
func (a *ServeArgs) otherValues(flag string) []string {
	var out []string
	for _, o := range a.Other {
		if o.Flag == flag && o.Value != nil {
			out = append(out, *o.Value)
		}
	}
	return out
}

func (a *ServeArgs) hasOther(flag string) bool {
	for _, o := range a.Other {
		if o.Flag == flag {
			return true
		}
	}
	return false
}

// rustFrontendPath is what ServeSubcommand.cmd reads after its gRPC branch:
// envs.VLLM_RUST_FRONTEND_PATH if envs.VLLM_USE_RUST_FRONTEND else None (vllm/envs.py
// _resolve_rust_cli_path). VLLM_USE_RUST_FRONTEND is int() of its value ("0" when unset), so
// "true" raises ValueError; VLLM_RUST_FRONTEND_PATH "auto" (its default), "1" or "true" name the
// vllm-rs binary beside envs.py, and raise FileNotFoundError when the installation has none; any
// other value is the path as given, which vLLM does not check until it starts it. "" is no
// Rust front end.
func rustFrontendPath(env map[string]string, inst Install) (string, error) {
	v, ok := env["VLLM_USE_RUST_FRONTEND"]
	if !ok {
		return "", nil
	}
	n, err := pyInt(v)
	if err != nil {
		return "", valueError("invalid literal for int() with base 10: %s", pyRepr(v))
	}
	if n == 0 {
		return "", nil
	}
	raw, ok := env["VLLM_RUST_FRONTEND_PATH"]
	if !ok {
		raw = "auto"
	}
	switch strings.ToLower(raw) {
	case "auto", "1", "true":
		bin := path.Join(inst.packageDir(), "vllm-rs")
		if inst.NoRustFrontend {
			return "", &PyError{Type: "FileNotFoundError", Msg: "VLLM_RUST_FRONTEND_PATH=auto but the vllm-rs binary was not found at " +
				bin + ". Build with setuptools-rust or set the path explicitly."}
		}
		return bin, nil
	}
	return raw, nil
}
