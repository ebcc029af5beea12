package vllm

import (
	"errors"
	"fmt"

	"github.com/widetp/widetp/report"
)

// cmdPlanner derives the process tree of one `vllm serve` line on one node.
type cmdPlanner struct {
	node Node
	opts Options
	cmd  int

	args   *ServeArgs
	env    vllmEnv
	gpus   int
	hostIP string
	// engineID is the KV engine_id this command's parse holds ("" without a KV config).
	engineID string
	// postInitErr is what VllmConfig.__post_init__ raises about the KV connector
	// (vllmconfig.go), in create_engine_config once the ParallelConfig is built; buildErr what
	// building the connector raises in each of the command's workers.
	postInitErr, buildErr error
	// ecWorkerErr and ecSchedulerErr are what building the EC connector raises in each worker and
	// in each engine core's Scheduler (ecconnector.go).
	ecWorkerErr, ecSchedulerErr error
	storeExtra                  map[string]any
	hasStore                    bool
	// slot numbers this command's host-local rendezvous addresses.
	slot int
	// nprocs counts the processes planned for this command (see maxProcessesPerCommand).
	nprocs int
	err    error
	// pcs holds each process's own ParallelConfig by ID, for the address rules (addresses.go).
	pcs map[string]*ParallelConfig
	// grpc: the command serves gRPC (launchGRPC), its front end binding once its engines are up.
	grpc bool
	// rustFrontend is the Rust front end's binary when the command runs it (serveDecision): the
	// front end is run_multi_api_server's, whatever its API server count, and its engine-io
	// TCP ports are probed up front (preallocatesEngineIO).
	rustFrontend string
}

// maxProcessesPerCommand bounds what one command may start in the simulation. A real launch
// starts at most a few hundred processes per node; the bound keeps a typo such as
// -dp 100000000 from planning a hundred million of them (PlanNode reports it instead).
const maxProcessesPerCommand = 16384

// newPlan is a ProcessPlan for a new process, counted against maxProcessesPerCommand.
func (cp *cmdPlanner) newPlan(id report.Process) *ProcessPlan {
	cp.nprocs++
	if cp.nprocs > maxProcessesPerCommand && cp.err == nil {
		cp.err = fmt.Errorf("command starts more than %d processes: %w", maxProcessesPerCommand, errNotSimulated)
	}
	return &ProcessPlan{Identity: id}
}

// plan returns the command's top process. Only failures that are no vLLM behaviour are errors.
func (cp *cmdPlanner) plan(line string) (*ProcessPlan, error) {
	// Until cmd takes a launch path, the process is what the line asks for (topRoleBeforePath);
	// the path then builds the top process it runs (headless, supervisor, API server).
	role := topRoleBeforePath(line)
	args, err := ParseServe(line)
	if err != nil {
		return cp.crashed(cp.id(role, 0), "", role, nil, StageConfig, err), nil
	}
	cp.args = args
	envMap := make(map[string]string, len(cp.node.Env)+len(args.Env))
	for k, v := range cp.node.Env {
		envMap[k] = v
	}
	for k, v := range args.Env {
		envMap[k] = v
	}
	// envs.py reads the VLLM_DP_* integers in ParallelConfig.__post_init__, which already runs
	// while the parser is built (get_kwargs calls VllmConfig's default factories): their errors
	// come before ServeSubcommand.validate and .cmd (decideServe).
	if cp.env, err = readEnv(envMap); err != nil {
		return cp.crashed(cp.id(role, 0), "", role, nil, StageConfig, err), nil
	}
	cp.gpus = cp.env.deviceCount(cp.node.GPUs)
	cp.hostIP = cp.env.hostIP
	if cp.hostIP == "" {
		cp.hostIP = cp.node.Host
	}
	if b := args.DistributedExecutorBackend; b != nil && *b == "external_launcher" {
		return nil, fmt.Errorf("--distributed-executor-backend external_launcher runs under torchrun: %w", errNotSimulated)
	}
	// create_engine_config's checks of the command line past ParallelConfig(...), then
	// VllmConfig(...) validates its command-line fields, then its __post_init__ decides the
	// connector every process of the command runs (a --kv-offloading-size one included) and what
	// the front end raises resolving it: its CUDA graph check first, on the config as given.
	err = engineConfigTailError(args)
	if err == nil {
		err = vllmConfigFieldErrors(args)
	}
	if err == nil {
		err = cudaGraphConnectorCheck(args, envMap)
	}
	if err == nil {
		var kv *KVTransferConfig
		if kv, err = kvOffloadingConnector(args, envMap); err == nil {
			args.KVTransfer = kv
			err = postInitConnector(args, kv, envMap)
		}
	}
	cp.postInitErr = err
	cp.buildErr = connectorBuildError(args)
	cp.ecWorkerErr, cp.ecSchedulerErr = ecConnectorErrors(args.jsonConfig("--ec-transfer-config"))
	cp.engineID = baseEngineID(args.KVTransfer, cp.opts.Seed, cp.node.Host, cp.cmd)
	cp.storeExtra, cp.hasStore = args.KVTransfer.mooncakeStoreExtra()

	dec, err := decideServe(args, envMap, cp.opts.Install)
	if err != nil {
		return cp.crashed(cp.id(role, 0), "", role, nil, StageConfig, err), nil
	}
	if dec.mode == launchServer {
		// Only run_multi_api_server starts it; the DP supervisor's children run run_server.
		cp.rustFrontend = dec.rustFrontend
	}
	var top *ProcessPlan
	switch dec.mode {
	case launchHeadless:
		top = cp.headless()
	case launchSupervisor:
		top = cp.supervisor(dec.apiServerCount)
	case launchGRPC:
		cp.grpc = true
		top = cp.apiServer(args, 0, "", 1)
	default:
		top = cp.apiServer(args, 0, "", dec.apiServerCount)
	}
	if cp.err == nil {
		// A command the simulation refuses (too many processes) gets no addresses: they would
		// number as many.
		cp.planAddresses(top)
	}
	return top, cp.err
}

// preallocatesEngineIO is whether get_engine_zmq_addresses gives each TCP engine-io socket a
// port probed with get_open_port, bound later by the API server, instead of tcp://host:0 bound
// and read back: always before PR #42585 (the zmq_port_alloc change), and on vLLM main when the
// consumer cannot report a bound port back, the Rust front end (run_multi_api_server's
// defer_api_server_ports=False, vllm/entrypoints/cli/serve.py).
func (cp *cmdPlanner) preallocatesEngineIO() bool {
	return cp.opts.Profile.ZMQPortAlloc == ZMQPortAllocProbe || cp.rustFrontend != ""
}

// id is report.Process.ID for a non-worker: "<host>/<command>/<role>-<index>".
func (cp *cmdPlanner) id(role report.Role, index int) string {
	return fmt.Sprintf("%s/%d/%s-%d", cp.node.Host, cp.cmd, role, index)
}

// localAddr reserves the next host-local rendezvous address of this command (rendezvous.go).
func (cp *cmdPlanner) localAddr() string {
	cp.slot++
	if cp.slot >= localPortStride && cp.err == nil {
		cp.err = fmt.Errorf("more than %d host-local rendezvous in one command: %w", localPortStride-1, errNotSimulated)
	}
	port := LocalPortBase + localPortStride*cp.cmd + cp.slot
	if port > 65535 && cp.err == nil {
		cp.err = fmt.Errorf("command index %d leaves no port for host-local rendezvous: %w", cp.cmd, errNotSimulated)
	}
	return hostPort(cp.node.Host, port)
}

func (cp *cmdPlanner) engineInput(a *ServeArgs, headless bool, apiProcessCount int) engineConfigInput {
	return engineConfigInput{args: a, headless: headless, moe: cp.opts.Model.MoE, profile: cp.opts.Profile,
		env: cp.env, gpus: cp.gpus, hostIP: cp.hostIP, apiProcessCount: apiProcessCount}
}

// identity fills the record fields every process derives from its ParallelConfig.
func (cp *cmdPlanner) identity(id, parent string, role report.Role, pc *ParallelConfig) report.Process {
	p := report.Process{ID: id, Parent: parent, Host: cp.node.Host, Command: cp.cmd, Role: role}
	if pc != nil {
		if cp.pcs == nil {
			cp.pcs = map[string]*ParallelConfig{}
		}
		cp.pcs[id] = pc
		p.DataParallelSize = pc.DataParallelSize
		p.DataParallelRank = pc.DataParallelRank
		p.DataParallelRankLocal = copyInt(pc.DataParallelRankLocal)
		p.DataParallelIndex = pc.DataParallelIndex
		p.LocalEnginesOnly = pc.LocalEnginesOnly()
		if n, err := pc.NodeRankWithinDP(); err == nil {
			p.NodeRankWithinDP = n
		}
	}
	return p
}

// crashed is a process that raises at a stage before starting any child.
func (cp *cmdPlanner) crashed(id, parent string, role report.Role, pc *ParallelConfig, stage Stage, err error) *ProcessPlan {
	p := cp.newPlan(cp.identity(id, parent, role, pc))
	p.Crash = &Crash{Stage: stage, Error: crashText(err)}
	return p
}

// crashText renders an error the way the process prints its last exception.
func crashText(err error) string {
	var ae *ArgError
	if errors.As(err, &ae) {
		return argparseExit(ae)
	}
	return err.Error()
}

// apiServer is a front end (run_server / run_multi_api_server): create_engine_config, then
// launch_core_engines starts the local engine cores (or the Ray actors).
func (cp *cmdPlanner) apiServer(a *ServeArgs, index int, parent string, apiCount int) *ProcessPlan {
	id := cp.id(report.RoleAPIServer, index)
	// run_multi_api_server sets _api_process_count to the API server count; run_server keeps 1.
	pc, err := createEngineConfig(cp.engineInput(a, false, apiCount))
	if err == nil {
		err = cp.postInitErr
	}
	if err != nil {
		return cp.crashed(id, parent, report.RoleAPIServer, nil, StageConfig, err)
	}
	// No EngineID: the front end builds no KV connector (report.Process.EngineID).
	p := cp.newPlan(cp.identity(id, parent, report.RoleAPIServer, pc))
	if apiCount > 1 && cp.env.runtimeLoRAUpdating {
		// run_multi_api_server, once the config is built: the runtime LoRA endpoints would change
		// one API server's adapters only.
		p.Crash = &Crash{Stage: StageConfig, Error: "ValueError: VLLM_ALLOW_RUNTIME_LORA_UPDATING cannot be used with api_server_count > 1"}
		return p
	}
	if err := executorClassError(pc); err != nil {
		p.Crash = &Crash{Stage: StageConfig, Error: crashText(err)}
		return p
	}
	if (apiCount > 1 || cp.rustFrontend != "") && !(pc.LocalEnginesOnly() || pc.DataParallelRank == 0) {
		// run_multi_api_server: assert parallel_config.local_engines_only or dp_rank == 0
		p.Crash = &Crash{Stage: StageConfig, Error: bareAssertion.Error()}
		return p
	}
	if pc.DataParallelBackend == "ray" {
		return cp.rayFrontEnd(p, pc)
	}
	if cp.preallocatesEngineIO() && engineIOOverTCP(pc) && cp.env.vllmPortErr != nil {
		// get_engine_zmq_addresses probes its TCP ports with get_open_port, which reads
		// envs.VLLM_PORT.
		p.Crash = &Crash{Stage: StageConfig, Error: crashText(cp.env.vllmPortErr)}
		return p
	}
	h, err := frontEndHandshake(pc, cp.localAddr())
	if err == nil && h.global != nil {
		err = globalHandshakeError(pc)
	}
	if err != nil {
		p.Crash = &Crash{Stage: StageConfig, Error: crashText(err)}
		return p
	}
	// launch_core_engines binds the handshake it serves before CoreEngineProcManager starts the
	// engines (StageHandshakeBind).
	served := h.local
	if h.global != nil {
		served = h.global
	}
	hs := *served
	hs.BindsEarly = true
	p.Rendezvous = append(p.Rendezvous, hs)
	if pc.DataParallelRankLocal != nil {
		// offline_mode: one local engine, CoreEngineProcManager(start_index=dp_rank,
		// local_start_index=data_parallel_rank_local).
		p.Children = append(p.Children, cp.engineCore(pc, pc.DataParallelRank, *pc.DataParallelRankLocal, id, h))
	} else {
		for i := 0; i < pc.DataParallelSizeLocal && cp.err == nil; i++ {
			p.Children = append(p.Children, cp.engineCore(pc, pc.DataParallelRank+i, i, id, h))
		}
	}
	p.ChildFailure = engineStartupFailure
	return p
}

// engineCore is one EngineCoreProc: run_engine_core, its handshakes and DP group, its executor's
// workers, and the scheduler side of the KV connector.
func (cp *cmdPlanner) engineCore(parent *ParallelConfig, dpRank, localDPRank int, parentID string, h engineHandshake) *ProcessPlan {
	id := cp.id(report.RoleEngineCore, dpRank)
	pc := parent.clone()
	engineID, dpEngine, err := runEngineCore(pc, dpRank, localDPRank, cp.engineID, cp.args.KVTransfer.buildsConnector(), cp.opts.Profile)
	p := cp.newPlan(cp.identity(id, parentID, report.RoleEngineCore, pc))
	if err != nil {
		// The engine_id run_engine_core computed is the KV connector's, and an engine core that
		// fails before EngineCore.__init__ builds its scheduler (after the executor) never built
		// one: it reports none, as a worker that fails before its connector reports none (worker).
		p.Crash = &Crash{Stage: StageEngineInit, Error: crashText(err)}
		return p
	}
	// The handshake is the launcher's (its D, its address), not the reconfigured copy's.
	if h.globalRank != nil {
		if err := globalHandshakeError(parent); err != nil {
			// EngineCoreProc's _perform_handshakes makes its socket first.
			p.Crash = &Crash{Stage: StageEngineInit, Error: crashText(err)}
			return p
		}
	}
	p.Rendezvous = h.engineHandshakes(parent, dpRank)
	if dpEngine {
		p.Rendezvous = append(p.Rendezvous, dpGroup(pc))
	}
	if err := cp.attachExecutorWorkers(p, pc, engineID); err != nil {
		p.Crash = &Crash{Stage: StageEngineInit, Error: crashText(err)}
		p.Rendezvous = nil
		return p
	}
	p.Identity.EngineID = engineID
	cp.schedulerConnector(p, pc)
	p.ChildFailure = workerStartupFailure
	p.ChildrenAfterRendezvous = true
	return p
}

// schedulerConnectorError is what Scheduler.__init__ raises building its KV connector
// (vllm/v1/core/sched/scheduler.py) where the workers built none: it calls
// KVConnectorFactory.create_connector for any kv_transfer_config, a transfer instance or not, so
// a config without kv_connector fails on the class lookup. The front end would have failed the
// same lookup first (VllmConfig's HMA block) unless the HMA preference was given. Where the
// workers build a connector, their failure (buildErr) comes first.
func (cp *cmdPlanner) schedulerConnectorError() error {
	k := cp.args.KVTransfer
	if k == nil || k.buildsConnector() {
		return nil
	}
	_, err := connectorClass(k)
	return err
}

// schedulerUnbuilt reports whether an engine core (or Ray actor) stops before its Scheduler:
// EngineCore.__init__ (vllm/v1/engine/core.py) builds its executor, whose workers start (and build
// their KV connectors while it sets up the KV caches), before it builds the Scheduler, so a worker
// that fails stops the engine core first. What the Scheduler's constructor would raise — its KV
// connector, its event publisher, an offloading connector's secondary tiers — is then never
// raised. What it would compute stays in the plan, as the workers' connector identity does.
func schedulerUnbuilt(p *ProcessPlan) bool {
	for _, c := range p.Children {
		if c.Crash != nil {
			return true
		}
	}
	return false
}

// schedulerRaises records err as what an engine core's Scheduler raises building itself, at
// connector init, unless the engine core stopped before: an earlier crash of its own, or a
// worker's (schedulerUnbuilt).
func schedulerRaises(p *ProcessPlan, err error) {
	if p.Crash == nil && !schedulerUnbuilt(p) {
		p.Crash = &Crash{Stage: StageConnectorInit, Error: crashText(err)}
	}
}

// schedulerConnector is the scheduler side of the Mooncake store connector an engine core (or
// Ray actor) builds: a LookupKeyClient at the path its own DP engine index gives. A scheduler
// whose kv_connector_extra_config turns enable_lookup off still builds the client (and computes
// the index, with the legacy helper's assertion), but never sends a lookup
// (MooncakeStoreScheduler.get_num_new_matched_tokens returns 0 first), so the record names no
// lookup endpoint and the plan does not look up. The scheduler builds its connector as the
// workers do (KVConnectorFactory.create_connector): where theirs fails (buildErr), so would its
// own, and it has no connector identity (its workers' failure stops it first).
func (cp *cmdPlanner) schedulerConnector(p *ProcessPlan, pc *ParallelConfig) {
	if err := cp.schedulerConnectorError(); err != nil {
		schedulerRaises(p, err)
		return
	}
	if !cp.hasStore || cp.buildErr != nil {
		return
	}
	idx, err := mooncakeDPEngineIndex(pc, cp.opts.Profile)
	if err != nil {
		p.Crash = &Crash{Stage: StageConnectorInit, Error: crashText(err)}
		return
	}
	p.Identity.MooncakeDPIndex = intPtr(idx)
	if !storeLookupEnabled(cp.storeExtra) {
		return
	}
	p.Identity.LookupPath = lookupPath(cp.env, cp.storeExtra, cp.node.Host, idx)
	p.Identity.LookupRole = report.LookupClient
	p.ConnectsLookup = true
}
