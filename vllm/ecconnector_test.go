package vllm

import "testing"

// TestECConnectorIsBuiltByWorkersAndSchedulers: the EC connector of --ec-transfer-config
// (vllm/distributed/ec_transfer/ec_connector/factory.py get_connector_class) is built by each
// worker of a transfer instance in init_worker_distributed_environment
// (vllm/v1/worker/gpu_worker.py), after its torch world and before its KV connector, and by each
// engine core's Scheduler for any config (vllm/v1/core/sched/scheduler.py), after its KV
// connector and its KV event publisher.
func TestECConnectorIsBuiltByWorkersAndSchedulers(t *testing.T) {
	const store = ` --kv-transfer-config '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both"}'`
	ec := func(j string) string { return ` --ec-transfer-config '` + j + `'` }
	t.Run("an unknown connector fails every worker before its KV connector", func(t *testing.T) {
		procs := predict(t, true, "main", node("h", "vllm serve org/M -tp 2 -dp 2"+store+ec(`{"ec_connector":"Bogus","ec_role":"ec_both"}`)))
		for _, id := range []string{"h/0/engine-core-0/worker-0", "h/0/engine-core-1/worker-1"} {
			w := get(t, procs, id)
			crashedWith(id, "ValueError: Unsupported connector type: Bogus")(t, procs)
			if w.Replica == "" || w.EngineID != "" || w.MooncakeDPIndex != nil || w.LookupPath != "" {
				t.Errorf("%s: replica %q engine_id %q index %s lookup %q: want its torch world and no KV connector", id, w.Replica, w.EngineID, optStr(w.MooncakeDPIndex), w.LookupPath)
			}
		}
		if ec := get(t, procs, "h/0/engine-core-0"); ec.Exit == nil || ec.Exit.Error != workerStartupFailure {
			t.Errorf("engine core: %s, want its workers' failure (its Scheduler is never built)", exitText(ec))
		}
	})
	t.Run("no connector: the workers build none, every Scheduler fails", func(t *testing.T) {
		procs := predict(t, true, "main", node("h", "vllm serve org/M -tp 2 -dp 2"+store+ec(`{"ec_role":"ec_both"}`)))
		crashedWith("h/0/engine-core-0", "ValueError: EC connect must not be None")(t, procs)
		crashedWith("h/0/engine-core-1", "ValueError: EC connect must not be None")(t, procs)
		if w := get(t, procs, "h/0/engine-core-1/worker-0"); w.Crashed() || w.MooncakeDPIndex == nil || *w.MooncakeDPIndex != 1 {
			t.Errorf("worker: %s, index %s: want it up with its KV connector", exitText(w), optStr(w.MooncakeDPIndex))
		}
	})
	t.Run("the Scheduler's KV event publisher fails first", func(t *testing.T) {
		procs := predict(t, true, "main", node("h", "vllm serve org/M -tp 2 -dp 2"+ec(`{}`)+
			` --kv-events-config '{"enable_kv_cache_events":true,"endpoint":"ipc:///tmp/ev"}'`))
		crashedWith("h/0/engine-core-0", "ValueError: EC connect must not be None")(t, procs)
		crashedWith("h/0/engine-core-1", "ValueError: Invalid endpoint: must contain 'inproc' or 'tcp'")(t, procs)
	})
	t.Run("registered names and module paths load; an empty path does not", func(t *testing.T) {
		healthy(t, predict(t, true, "main", node("h", "vllm serve org/M -tp 2"+ec(`{"ec_connector":"ECCPUConnector","ec_role":"ec_producer"}`))))
		healthy(t, predict(t, true, "main", node("h", "vllm serve org/M -tp 2"+ec(`{"ec_connector":"Mine","ec_role":"ec_consumer","ec_connector_module_path":"my.ec"}`))))
		crashedWith("h/0/engine-core-0/worker-0", "ValueError: Empty module name")(t,
			predict(t, true, "main", node("h", "vllm serve org/M -tp 2"+ec(`{"ec_connector":"Mine","ec_role":"ec_consumer","ec_connector_module_path":""}`))))
	})
}
