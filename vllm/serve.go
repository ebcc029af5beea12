package vllm

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
)

// serveDecision is the outcome of ServeSubcommand.validate and .cmd before any config is built.
type serveDecision struct {
	mode           launchMode
	apiServerCount int
}

// decideServe is ServeSubcommand.validate (cli_args.validate_parsed_serve_args) then the part of
// ServeSubcommand.cmd that chooses a launch path, in vLLM's order.
func decideServe(a *ServeArgs) (serveDecision, error) {
	if err := validateParsedServeArgs(a); err != nil {
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
		case isMultiPort || isExternal:
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
	}
	d := serveDecision{apiServerCount: *apiCount}
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
// before anything loads.
func validateParsedServeArgs(a *ServeArgs) error {
	if a.hasOther("--enable-auto-tool-choice") && !a.hasOther("--tool-call-parser") {
		return &PyError{Type: "TypeError", Msg: "Error: --enable-auto-tool-choice requires --tool-call-parser"}
	}
	if a.DataParallelMultiPortExternalLB {
		return validateMultiPortExternalLB(a)
	}
	return nil
}

// validateMultiPortExternalLB is vllm/entrypoints/openai/dp_supervisor.py
// validate_multi_port_external_lb_args (the checks that concern the model's inputs).
func validateMultiPortExternalLB(a *ServeArgs) error {
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

func (a *ServeArgs) hasOther(flag string) bool {
	for _, o := range a.Other {
		if o.Flag == flag {
			return true
		}
	}
	return false
}
