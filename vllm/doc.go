// Package vllm is widetp's model of vLLM's process identity: from a node's `vllm serve` command
// lines to the tree of processes vLLM starts (API servers, engine cores, headless launchers, Ray
// actors, workers), the data-parallel identity each one derives, the Mooncake store connector
// identity built on it, and the barriers the processes meet at. PlanNode turns one node into the
// plans simnode executes for real; Predict executes the plans of a whole deployment on paper.
// Pure Go, no I/O.
//
// Each rule lives in a function that reads like the vLLM code it encodes (vLLM main, mid-2026,
// vllm-project/vllm); where the spec and vLLM disagree the code follows vLLM:
//
//	shell.go                      a launch line as a POSIX shell runs it (quoting, redirections,
//	                              lists and pipelines, exports, env/nohup/uv run wrappers)
//	parse.go, flags.go            `vllm serve` / `python -m vllm.entrypoints.openai.api_server`
//	                              argv: vllm/utils/argparse_utils.py FlexibleArgumentParser
//	                              (underscores, --flag=value, --model moved to the positional
//	                              slot, dotted JSON keys replacing a whole value, -O rewrites),
//	                              vllm/engine/arg_utils.py EngineArgs.add_cli_args and get_kwargs
//	                              (short aliases, BooleanOptionalAction --no-x, types),
//	                              vllm/entrypoints/openai/cli_args.py make_arg_parser and
//	                              FrontendArgs, vllm/config/kv_transfer.py KVTransferConfig,
//	                              multi_connector.py child configs
//	env.go                        vllm/envs.py (VLLM_DP_*, VLLM_RPC_BASE_PATH = tempfile.gettempdir(),
//	                              VLLM_RAY_DP_PACK_STRATEGY, VLLM_HOST_IP)
//	serve.go                      vllm/entrypoints/cli/serve.py ServeSubcommand.cmd (api server
//	                              count, one LB mode, elastic EP cap), api_server.py __main__
//	                              (run_server only), cli_args.validate_parsed_serve_args
//	engineconfig.go               vllm/engine/arg_utils.py create_engine_config (spec §1)
//	parallel.go                   vllm/config/parallel.py ParallelConfig: __post_init__ (env
//	                              fallback, executor backend, GPU count), _validate_parallel_config,
//	                              nnodes_within_dp, node_rank_within_dp, local_world_size,
//	                              local_engines_only, reconfigure_for_independent_dp_rank;
//	                              vllm/distributed/parallel_state.py rank layout (DP, PP, PCP, TP)
//	planner.go                    vllm/entrypoints/cli/serve.py run_server / run_multi_api_server,
//	                              vllm/v1/engine/utils.py launch_core_engines, CoreEngineProcManager
//	engine.go                     vllm/v1/engine/core.py EngineCoreProc.run_engine_core,
//	                              DPEngineCoreProc._init_data_parallel, start-up failure messages
//	headless.go                   vllm/entrypoints/cli/serve.py run_headless (and its DP-rank
//	                              check of PRs #19790/#20398, vLLM#20399)
//	supervisor.go                 vllm/entrypoints/openai/dp_supervisor.py (multi-port external LB)
//	ray.go                        vllm/v1/engine/utils.py CoreEngineActorManager,
//	                              create_dp_placement_groups
//	executor.go                   vllm/v1/executor/multiproc_executor.py worker ranks,
//	                              vllm/v1/worker/gpu_worker.py init_device (DP-adjusted device)
//	rendezvous.go                 vllm/distributed/parallel_state.py init_distributed_environment,
//	                              vllm/config/parallel.py stateless_init_dp_group, launch_core_engines
//	                              handshakes (see the port conventions there), the HELLO each engine
//	                              sends (vllm/v1/engine/core.py startup_handshake) and what the front
//	                              end accepts (vllm/v1/engine/utils.py wait_for_engine_startup:
//	                              remote engines --headless exactly under internal LB; plan.go
//	                              HandshakeExpect.Refuse)
//	mooncake.go                   vllm/distributed/kv_transfer/kv_connector/v1/mooncake/:
//	                              mooncake_utils.py get_mooncake_dp_engine_index,
//	                              store/scheduler.py get_zmq_rpc_path_lookup, store/worker.py
//	                              MooncakeStoreWorker (index, setup(local_hostname), lookup server
//	                              on parallel_config.rank == 0), store/scheduler.py
//	                              MooncakeStoreScheduler (no lookups when enable_lookup is off)
//	engineid.go                   vllm/config/kv_transfer.py engine_id = uuid4(),
//	                              vllm/distributed/kv_transfer/kv_transfer_state.py engine_id
//	                              broadcast (PRs #39907, #44528)
//	profile.go                    the behaviour changes a scenario pins (PRs #48061, #53743,
//	                              #46628, the dense external-DP check, #39907/#44528,
//	                              #19790/#20398, #47692, #49124) and the named profiles
//	predict.go                    the paper execution (stages, barriers, cascades, lookups)
//
// Process IDs follow report.Process.ID, "<host>/<command>/<role>-<index>[/worker-<local rank>]",
// with index 0 for an API server, headless launcher or DP supervisor (an API server a supervisor
// starts takes its DP rank), and the DP rank an engine core is launched with (its
// EngineCore_DP<rank> name) or a Ray actor's DP index; workers hang off their parent's ID.
// Replica is "<torch world address>/dp<slot>": the workers of one engine and that engine (a
// loopback world address is qualified by the host, report.BarrierKey, as Predict's barriers are).
// EngineID is set only on the processes that build a KV connector (engine cores, Ray actors,
// workers), never on the launchers (report.Process.EngineID).
//
// Modelling choices that are not vLLM's own, all documented where they are made: rendezvous
// addresses vLLM draws at random or keeps on private ipc paths get derived ports (rendezvous.go);
// uuid4 engine ids are derived from the seed, host and command index (engineid.go); every Ray
// actor runs on the command's host; the uni executor's worker is planned as a child process;
// a worker that fails selecting its device crashes at StageEngineInit (before its rendezvous);
// a front end that refuses a HELLO refuses the lowest-ranked offender among the engines that
// arrived, and every other remote engine that joined hears nothing (in vLLM those whose HELLO came
// first get their init message and fail a step later, in their DP group); extra API server processes (--api-server-count > 1) and the DP coordinator carry no identity and
// are not planned.
package vllm
