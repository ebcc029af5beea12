package vllm

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/widetp/widetp/report"
)

// attachWorkers adds the workers an executor starts for config pc (vllm/v1/executor/
// multiproc_executor.py MultiprocExecutor._init_executor): local_world_size processes with
//
//	global_start_rank = local_world_size * node_rank_within_dp
//	rank = global_start_rank + local_rank
//
// Each worker copies its parent's config (Worker.__init__ sets parallel_config.rank). The uni
// executor (world size 1) runs the worker inside the engine core process in vLLM; the model plans
// it as a worker child all the same so the lookup server and client stay separate records. Ray's
// executor places world_size workers; with nnodes == 1 that is the same layout.
func (cp *cmdPlanner) attachWorkers(p *ProcessPlan, pc *ParallelConfig, engineID string) error {
	// _get_parallel_sizes asserts world_size % nnodes_within_dp == 0 before it reads
	// local_world_size, so an unclamped nnodes_within_dp of 0 (vLLM#53743) raises at the modulo.
	n, err := pc.NNodesWithinDP()
	if err != nil {
		return err
	}
	if n == 0 {
		return zeroModulo
	}
	if pc.WorldSize%n != 0 {
		return assertionError("global world_size (%d) must be divisible by nnodes_within_dp (%d). ", pc.WorldSize, n)
	}
	lws, err := pc.LocalWorldSize()
	if err != nil {
		return err
	}
	nodeRank, err := pc.NodeRankWithinDP()
	if err != nil {
		return err
	}
	localAddr := cp.workersLocalAddr(pc)
	start := lws * nodeRank
	for i := 0; i < lws && cp.err == nil; i++ {
		w := cp.worker(pc, p.Identity.ID, i, start+i, localAddr, engineID)
		if i == 0 {
			p.Identity.Replica = w.Identity.Replica
		}
		p.Children = append(p.Children, w)
	}
	return nil
}

// workersLocalAddr is where an executor's workers meet when their torch world stays within the
// replica: a host-local address of this command (planner.go localAddr); "" when the world spans
// the DP replicas and workersWorld names its address.
func (cp *cmdPlanner) workersLocalAddr(pc *ParallelConfig) string {
	if spansDP(pc) {
		return ""
	}
	return cp.localAddr()
}

// attachExecutorWorkers adds the workers of the executor an engine core builds
// (Executor.get_class): UniProcExecutor runs one worker in the engine core's own process
// (vllm/v1/executor/uniproc_executor.py _distributed_args: rank 0, local rank the device index, 0
// for a plain "cuda" device) whatever the world size, so a world of more than one waits for ranks
// nobody starts; any other executor is attachWorkers. An executor that probes its rendezvous port
// first fails there on a VLLM_PORT int() refuses.
func (cp *cmdPlanner) attachExecutorWorkers(p *ProcessPlan, pc *ParallelConfig, engineID string) error {
	switch pc.DistributedExecutorBackend {
	case "uni", "mp":
		if cp.opts.Profile.ExecutorRendezvous == ExecutorRendezvousTCP && cp.env.vllmPortErr != nil {
			// Before PR #50999 the executor's distributed_init_method takes get_open_port(),
			// which reads envs.VLLM_PORT (executorInit).
			return cp.env.vllmPortErr
		}
	}
	if pc.DistributedExecutorBackend != "uni" {
		if pc.DistributedExecutorBackend == "mp" && cp.env.mqChunkErr != nil {
			// MultiprocExecutor._init_executor sizes the replica's broadcast queue
			// (envs.VLLM_MQ_MAX_CHUNK_BYTES_MB) before it starts the workers, once it has its
			// distributed_init_method.
			p.executorInitDone = true
			return cp.env.mqChunkErr
		}
		return cp.attachWorkers(p, pc, engineID)
	}
	localAddr := cp.workersLocalAddr(pc)
	w := cp.worker(pc, p.Identity.ID, 0, 0, localAddr, engineID)
	p.Identity.Replica = w.Identity.Replica
	p.Children = append(p.Children, w)
	return nil
}

// worker is one GPU worker: its ranks, its torch world, and the worker side of the Mooncake store
// connector (MooncakeStoreWorker.__init__: DP engine index first, then the store client's
// setup(), then the lookup server on parallel_config.rank == 0).
func (cp *cmdPlanner) worker(parent *ParallelConfig, parentID string, localRank, rank int, localAddr, engineID string) *ProcessPlan {
	pc := parent.clone()
	pc.Rank = rank
	id := fmt.Sprintf("%s/worker-%d", parentID, localRank)
	p := cp.newPlan(cp.identity(id, parentID, report.RoleWorker, pc))
	tpRank, _, ppRank := pc.workerRanks(rank)
	p.Identity.Rank, p.Identity.TPRank, p.Identity.PPRank = intPtr(rank), intPtr(tpRank), intPtr(ppRank)
	world := workersWorld(pc, rank, localAddr)
	p.Rendezvous = []RendezvousPlan{world}
	p.Identity.Replica = replicaName(cp.node.Host, world, pc)
	p.Identity.EngineID = engineID
	// The worker process sets its NIC selection first (set_worker_net_device), then resolves its
	// worker classes (WorkerWrapperBase.init_worker), builds its Worker (the fault-tolerance
	// sentinel) and selects its device.
	err := cp.env.nicEnvErr
	if err == nil {
		err = workerClassError(cp.args)
	}
	if err != nil {
		// Before its Worker exists, the worker's ParallelConfig still has the rank the engine
		// core's has (WorkerBase.__init__ sets parallel_config.rank): 0.
		tpRank, _, ppRank := pc.workerRanks(0)
		p.Identity.Rank, p.Identity.TPRank, p.Identity.PPRank = intPtr(0), intPtr(tpRank), intPtr(ppRank)
	} else if err = cp.env.float32PrecisionErr; err == nil {
		// Worker.__init__ (vllm/v1/worker/gpu_worker.py) reads VLLM_FLOAT32_MATMUL_PRECISION
		// first, then builds its sentinel.
		err = workerSentinelError(pc, cp.args.lastOther("--all2all-backend"))
	}
	if err == nil {
		err = cp.workerDevice(pc, localRank)
	}
	if err == nil {
		// init_distributed_environment reads it last, before init_process_group
		// (vllm/distributed/parallel_state.py).
		err = cp.env.splitGroupErr
	}
	if err != nil {
		// set_worker_net_device, Worker.__init__ and Worker.init_device raise before
		// init_worker_distributed_environment: the worker never reaches its torch world, so it
		// names no replica (nor does its engine core, which takes the first worker's), nor its
		// KV connector, so no engine_id.
		p.Crash = &Crash{Stage: StageEngineInit, Error: crashText(err)}
		p.Rendezvous, p.Identity.Replica, p.Identity.EngineID = nil, "", ""
		return p
	}
	if err := cp.ecWorkerErr; err != nil {
		// init_worker_distributed_environment builds the EC connector once the torch world and
		// the model parallel groups are up, before the KV connector (whose engine_id sync and
		// class are never reached).
		p.Crash = &Crash{Stage: StageConnectorInit, Error: crashText(err)}
		p.Identity.EngineID = ""
		return p
	}
	if cp.args.KVTransfer.buildsConnector() {
		if src := engineIDSourceRank(pc, world.Rank, rank, cp.opts.Profile); src != nil && *src != world.Rank {
			p.EngineIDFromRank = src
		}
	}
	if err := cp.buildErr; err != nil {
		p.Crash = &Crash{Stage: StageConnectorInit, Error: crashText(err)}
		return p
	}
	if !cp.hasStore {
		return p
	}
	idx, err := mooncakeDPEngineIndex(pc, cp.opts.Profile)
	if err != nil {
		p.Crash = &Crash{Stage: StageConnectorInit, Error: crashText(err)}
		return p
	}
	p.Identity.MooncakeDPIndex = intPtr(idx)
	p.RegistersSegment = true
	p.SegmentHost = segmentHost(cp.env, cp.node.Host)
	p.SegmentRemount = cp.opts.Profile.MooncakeRemount
	if pc.Rank == 0 {
		p.BindsLookup = true
		p.Identity.LookupPath = lookupPath(cp.env, cp.storeExtra, cp.node.Host, idx)
		p.Identity.LookupRole = report.LookupServer
	}
	return p
}

// ftAll2AllBackends are the all2all backends whose kernels time out and mask failed ranks, which
// fault tolerance needs (vllm/v1/worker/sentinel/gpu_worker_sentinel.py FT_BACKEND_SET).
var ftAll2AllBackends = []string{"deepep_low_latency", "nixl_ep"}

// workerSentinelError is the WorkerSentinel a GPU worker builds in Worker.__init__
// (vllm/v1/worker/gpu_worker.py) under --enable-fault-tolerance: it refuses any other all2all
// backend, whatever the model or the DP size. flag is --all2all-backend's value ("" when not
// given: ParallelConfig's default); _validate_parallel_config replaced the removed pplx and naive.
func workerSentinelError(pc *ParallelConfig, flag string) error {
	if !pc.features.enableFaultTol {
		return nil
	}
	backend := flag
	switch backend {
	case "", "pplx", "naive":
		backend = "allgather_reducescatter"
	}
	if slices.Contains(ftAll2AllBackends, backend) {
		return nil
	}
	return valueError("Fault tolerance requires an FT-capable all2all backend (one of ['%s']), but got '%s'.",
		strings.Join(ftAll2AllBackends, "', '"), backend)
}

// workerDevice is the device a GPU worker selects in Worker.init_device
// (vllm/v1/worker/gpu_worker.py, since PR #45026): on one node of a non-Ray DP deployment its local
// rank is offset by its DP local rank (data_parallel_rank_local, else data_parallel_index) times
// PP*TP. With --device-ids (assigned_physical_gpu_ids) that logical rank must index the assigned
// IDs, the replica's share of the world must fit them, and the physical device must be visible
// (vllm/platforms/interface.py logical_device_id_to_visible_device_id); without, the rank must be
// below the visible device count. The worker raises before it joins its torch world, so the model
// records it at StageEngineInit. Ray places every worker on a GPU of its own.
func (cp *cmdPlanner) workerDevice(pc *ParallelConfig, localRank int) error {
	device := localRank
	nnodes, err := pc.NNodesWithinDP()
	if err != nil {
		return err
	}
	if pc.DistributedExecutorBackend == "ray" || pc.DataParallelBackend == "ray" {
		return nil
	}
	if nnodes == 1 {
		dpLocal := pc.DataParallelIndex
		if pc.DataParallelRankLocal != nil {
			dpLocal = *pc.DataParallelRankLocal
		}
		device += dpLocal * pc.PipelineParallelSize * pc.TensorParallelSize
	}
	ids := pc.AssignedPhysicalGPUIDs
	cvd := cp.env.cudaVisible
	if ids == nil {
		if device >= cp.gpus {
			return assertionError("DP adjusted local rank %d is out of bounds for %d devices.", device, cp.gpus)
		}
		if cvd != "" {
			// device_id_to_physical_device_id reads the worker's own entry first, then the
			// visible list is read whole: each entry must be an integer.
			entries := strings.Split(cvd, ",")
			if device < len(entries) {
				if err := deviceEntry(entries[device]); err != nil {
					return err
				}
			}
			return visibleEntries(cvd)
		}
		return nil
	}
	if device >= len(ids) {
		return assertionError("local_rank %d is out of bounds for assigned_physical_gpu_ids %s", device, pyIntList(ids))
	}
	if lws, err := pc.LocalWorldSize(); err == nil && lws > len(ids) {
		return assertionError("local_world_size (%d) exceeds assigned_physical_gpu_ids count (%d)", lws, len(ids))
	}
	physical, visible := ids[device], ids[device]
	if cvd != "" {
		if err := visibleEntries(cvd); err != nil {
			return err
		}
		visible = -1
		for i, v := range strings.Split(cvd, ",") {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n == physical {
				visible = i
				break
			}
		}
		if visible < 0 {
			return &PyError{Type: "RuntimeError", Msg: fmt.Sprintf("Physical device %d for logical device %d is not visible in CUDA_VISIBLE_DEVICES=%s", physical, device, cvd)}
		}
	}
	if visible >= cp.gpus {
		return &PyError{Type: "torch.AcceleratorError", Msg: "CUDA error: invalid device ordinal"}
	}
	return nil
}

// deviceEntry is Platform.device_control_id_to_physical_device_id on one CUDA_VISIBLE_DEVICES
// entry: int() of it, or ValueError (GPU UUIDs, MIG names).
func deviceEntry(v string) error {
	if _, err := pyInt(v); err != nil {
		return valueError("Non-integer device ID %s is not supported by cuda.", pyRepr(v))
	}
	return nil
}

// visibleEntries converts every CUDA_VISIBLE_DEVICES entry, as
// logical_device_id_to_visible_device_id does, failing at the first that is no integer.
func visibleEntries(cvd string) error {
	for _, v := range strings.Split(cvd, ",") {
		if err := deviceEntry(v); err != nil {
			return err
		}
	}
	return nil
}

// pyIntList renders a list of ints as Python prints it.
func pyIntList(v []int) string {
	parts := make([]string, len(v))
	for i, n := range v {
		parts[i] = strconv.Itoa(n)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// qualnameError is what vllm/utils/import_utils.py resolve_obj_by_qualname raises before it
// imports anything: a name without a dot does not split into a module and an attribute. A dotted
// name is taken to import (the model does not know which modules a host has installed).
func qualnameError(name string) error {
	if !strings.Contains(name, ".") {
		return valueError("not enough values to unpack (expected 2, got 1)")
	}
	return nil
}

// executorClassError is Executor.get_class (vllm/v1/executor/abstract.py), which every launch path
// calls right after create_engine_config: a backend other than ray, mp, uni and
// external_launcher is an Executor's import path.
func executorClassError(pc *ParallelConfig) error {
	switch b := pc.DistributedExecutorBackend; b {
	case "", "ray", "mp", "uni", "external_launcher":
		return nil
	default:
		return qualnameError(b)
	}
}

// workerClassError is WorkerWrapperBase.init_worker (vllm/v1/worker/worker_base.py) resolving
// --worker-cls (the platform replaces "auto" with its own worker's path) and then a non-empty
// --worker-extension-cls, in the worker process before it builds its Worker.
func workerClassError(a *ServeArgs) error {
	if wc := a.lastOther("--worker-cls"); a.hasOther("--worker-cls") && wc != "auto" {
		if err := qualnameError(wc); err != nil {
			return err
		}
	}
	if ext := a.lastOther("--worker-extension-cls"); ext != "" {
		return qualnameError(ext)
	}
	return nil
}
