package vllm

// The EC (encoder cache) connector of --ec-transfer-config (vllm/config/ec_transfer.py), which
// moves multimodal encoder outputs between the instances of an encode/prefill/decode
// disaggregation. It decides no identity; building it can fail a worker or an engine core:
// each worker builds one in init_worker_distributed_environment when the config is a transfer
// instance (vllm/distributed/ec_transfer/ec_transfer_state.py ensure_ec_transfer_initialized),
// and each engine core's Scheduler for any config (vllm/v1/core/sched/scheduler.py), after its
// KV connector and its KV event publisher. The connectors' constructors are not modelled, as
// the KV connectors' are not.

// ecRegistered are the names vllm/distributed/ec_transfer/ec_connector/factory.py registers.
var ecRegistered = map[string]bool{"ECExampleConnector": true, "ECCPUConnector": true}

// ecConnectorClass is ECConnectorFactory.get_connector_class: no name is refused (with the
// factory's own wording), a registered name loads, another loads from ec_connector_module_path
// (an importable module, as the model takes kv_connector_module_path's; importlib refuses an
// empty one), or is refused.
func ecConnectorClass(m map[string]any) error {
	name, ok := m["ec_connector"].(string)
	if !ok {
		return valueError("EC connect must not be None")
	}
	if ecRegistered[name] {
		return nil
	}
	path, ok := m["ec_connector_module_path"].(string)
	if !ok {
		return valueError("Unsupported connector type: %s", name)
	}
	if path == "" {
		return valueError("Empty module name")
	}
	return nil
}

// ecConnectorErrors are what building the EC connector of the config m (nil: none given) raises
// in a worker (only a transfer instance builds one: a connector with a role, which
// ECTransferConfig's validation already required) and in a Scheduler (any config).
func ecConnectorErrors(m map[string]any) (worker, scheduler error) {
	if m == nil {
		return nil, nil
	}
	scheduler = ecConnectorClass(m)
	if m["ec_connector"] != nil && m["ec_role"] != nil {
		worker = scheduler
	}
	return worker, scheduler
}

// ecSchedulerConnector is the engine core's Scheduler building its EC connector, last in its
// constructor (schedulerRaises).
func (cp *cmdPlanner) ecSchedulerConnector(p *ProcessPlan) {
	if cp.ecSchedulerErr != nil {
		schedulerRaises(p, cp.ecSchedulerErr)
	}
}
