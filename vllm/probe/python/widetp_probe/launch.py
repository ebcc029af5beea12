"""Runs vLLM's own launch code for one `vllm serve` line and records every process it starts.

Each simulated process is a fork of the one that starts it, as in vLLM (its own copy of every
global and every config object). A process runs vLLM's code until a cut point, then reports a
record to its parent over a pipe; a parent collects its children's records as it starts them.

Cut points (where vLLM's code runs from and to, per process):

* front end (api-server, headless launcher, dp-supervisor): from the `vllm serve` parser
  (FlexibleArgumentParser + make_arg_parser, ServeSubcommand.validate and .cmd), or
  `python -m vllm.entrypoints.grpc_server`'s main() (its own parser, then serve_grpc), through
  run_server / run_multi_api_server / run_headless / run_dp_supervisor, create_engine_config,
  launch_core_engines and CoreEngineProcManager, to wait_for_engine_startup (run for real over
  the HELLO messages of every engine that dials the front end's handshake). It stops when it
  would wait for engine READY messages on its input socket (MPClient), for its API server
  processes (wait_for_completion_or_failure) or monitor its engines (monitor_engine_liveness).
* engine core: EngineCoreProc.run_engine_core with the kwargs CoreEngineProcManager gave it,
  the handshakes (_perform_handshakes), DPEngineCoreProc._init_data_parallel (its stateless DP
  group is recorded, not formed), EngineCore.__init__ up to the executor, the executor's
  _init_executor up to WorkerProc.wait_for_ready (the workers are started there); then the
  scheduler side of the KV connector (its identity, see ``connector``).
* worker: WorkerProc.worker_main (or the uni executor's in-process worker, planned as a child)
  through Worker.init_device and init_worker_distributed_environment to
  torch.distributed.init_process_group, which records the torch world and stops; then the
  KV connector (ensure_kv_transfer_initialized's engine_id sync and the connector's identity).

Stood in, and why (none of it decides identity): the Hugging Face model config (is_moe comes
from the scenario; a text-only model of --max-model-len tokens, else 8192), the speculative config
past ParallelConfig(...) (it needs the draft model; the rest of create_engine_config runs, with
the device an 80 GiB H100, up to VllmConfig(...), which is stood in but for its field validation
and the KV connector part of __post_init__, see kvconfig), the network (server sockets, get_ip's probe of a
route), process spawning (fork instead of spawn), the DP coordinator and extra API server
processes (no identity), message queues, and what follows each cut.
"""

import contextlib
import io
import json
import os
import re
import signal
import socket
import sys
import traceback

from . import conventions
from . import kvconfig
from . import torch_standin
from . import zmq_standin
from .standins import StandIn


class Stop(BaseException):
    """A simulated process reached its cut point: its plan is complete."""


class Unsupported(BaseException):
    """A launch path the probe does not run: planning fails with this message (no plan is better
    than a plan vLLM's code did not make)."""


class _ConfigBuilt(BaseException):
    def __init__(self, pc):
        self.pc = pc


# Debugging knobs, read when the probe starts (each simulated process gets its node's environment):
# WIDETP_PROBE_DEBUG_STOP=1 records where each process reached its cut (extra.stop_at) and a
# worker's swallowed exception's traceback.
_DEBUG_STOP = bool(os.environ.get("WIDETP_PROBE_DEBUG_STOP"))
# The process this (forked) Python process simulates.
CURRENT = None
# Remote engine HELLO messages per handshake address, fed to the front ends (second pass).
REMOTE_FEED = {}


class Proc:
    def __init__(self, role, index, parent=None):
        self.role, self.index = role, index
        self.parent_id = parent.id if parent else ""
        self.host = parent.host if parent else ""
        self.cmd = parent.cmd if parent else 0
        self.config = None  # the VllmConfig stand-in whose parallel_config is the identity
        self.stage = "config" if role in ("api-server", "headless", "dp-supervisor") else "engine-init"
        self.crash = None
        self.rendezvous = []  # {"kind", "address", "world_size", "rank", "binds_early"?, "local"?}
        self.children = []
        self.hello = []  # handshake messages this engine sent: {"address", "index", "status", "local", "headless"}
        self.handshake = None  # front end: {"address", "engines": [[index, local], ...]}
        self.connector = {}
        self.extra = {}
        # Addresses vLLM's code bound, probed or derived in this process, in its order (see
        # address()): the plan contract's AddressPlan fields.
        self.addresses = []
        if parent is None:
            self.id = ""
        elif role == "worker":
            self.id = f"{parent.id}/worker-{index}"
        else:
            self.id = f"{parent.host}/{parent.cmd}/{role}-{index}"

    def record(self):
        pc = getattr(self.config, "parallel_config", None) if self.config is not None else None
        return {
            "id": self.id, "parent": self.parent_id, "host": self.host, "command": self.cmd,
            "role": self.role, "identity": _identity(pc), "crash": self.crash,
            "rendezvous": self.rendezvous, "children": self.children, "hello": self.hello,
            "handshake": self.handshake, "connector": self.connector, "extra": self.extra,
            "addresses": self.addresses,
        }


def address(channel, role, endpoint, source, stage, **kw):
    """Records one address the current process's vLLM code binds, probes or opens, where that code
    computes it (vllm/plan_addresses.go AddressPlan; kw: key, exercised, flavor, alloc, listen_at,
    reuse_port)."""
    if CURRENT is None:
        return
    a = {"channel": channel, "role": role, "endpoint": endpoint, "source": source, "stage": stage}
    a.update({k: v for k, v in kw.items() if v not in (None, False, "")})
    CURRENT.addresses.append(a)


def _host_port(host, port):
    if ":" in host and not host.startswith("["):
        host = "[" + host + "]"
    return f"{host}:{port}"


def _vllm_port():
    """envs.VLLM_PORT as vllm/envs.py reads it (None when unset); its ValueError propagates."""
    import vllm.envs as envs

    return envs.VLLM_PORT


def _alloc(func, count=0):
    """A PortAlloc of vllm/ports.go: vLLM's envs decide VLLM_PORT and the reserved range; the
    allocator's retry rules are vLLM main's (the Go side fills them in: the probe does not run
    get_open_port against a simulated host's sockets)."""
    a = {"func": func}
    if count:
        a["count"] = count
    port = _vllm_port()
    if port is not None:
        a["vllm_port"] = port
    dp_master = os.environ.get("VLLM_DP_MASTER_PORT")
    if dp_master is not None:
        try:
            n = int(dp_master)
            a["reserved"] = [n, n + 10]
        except ValueError:
            pass
    return a


def _probe_endpoint(host):
    port = _vllm_port()
    return "tcp://" + _host_port(host, port if port is not None else 0)


def _identity(pc):
    if pc is None:
        return None
    out = {
        "data_parallel_size": pc.data_parallel_size,
        "data_parallel_rank": pc.data_parallel_rank,
        "data_parallel_rank_local": pc.data_parallel_rank_local,
        "data_parallel_index": pc.data_parallel_index,
        "local_engines_only": bool(pc.local_engines_only),
        "world_size": pc.world_size,
        "rank": pc.rank,
        "tp": pc.tensor_parallel_size, "pp": pc.pipeline_parallel_size,
        "pcp": pc.prefill_context_parallel_size,
        "nnodes": pc.nnodes,
    }
    try:
        out["node_rank_within_dp"] = pc.node_rank_within_dp
    except Exception:  # ZeroDivisionError before PR #53743: the model leaves it 0
        out["node_rank_within_dp"] = 0
    return out


# ---------------------------------------------------------------------------------------------
# Crash rendering


def crash_text(e):
    """The exception as the process prints its last line, in the plan's rendering
    (conventions.exception_text)."""
    return conventions.exception_text(e)


def _fail(proc, e):
    proc.crash = {"stage": proc.stage, "error": crash_text(e)}


# ---------------------------------------------------------------------------------------------
# Process spawning: fork, run, collect the record.


class _SimProcess:
    """multiprocessing.Process as get_mp_context() hands it out: start() forks the simulated
    process and collects its record; it never dies while the plan is made."""

    _pids = iter(range(100000, 10**9))

    def __init__(self, group=None, target=None, name=None, args=(), kwargs=None, daemon=None):
        self.target, self.name, self.args, self.kwargs = target, name, args, kwargs or {}
        self.pid = next(self._pids)
        self.exitcode = None
        self.sentinel = _Sentinel()
        self.daemon = daemon

    def start(self):
        role, index = _classify(self.target, self.args, self.kwargs)
        if role is None:
            return  # DP coordinator, API server processes: no identity, not planned
        rec = run_child(role, index, lambda: self.target(*self.args, **self.kwargs), self.kwargs)
        if role == "api-server":
            rec["parent"] = CURRENT.id
        CURRENT.children.append(rec)

    def is_alive(self):
        return True

    def join(self, timeout=None):
        pass

    def terminate(self):
        pass

    def kill(self):
        pass

    def close(self):
        pass


class _Sentinel:
    def fileno(self):
        return -1


def _classify(target, args, kwargs):
    name = getattr(target, "__qualname__", "") or ""
    if name == "_run_vllm_dp_server":
        return "api-server", args[0].data_parallel_rank
    if name.endswith("run_engine_core"):
        return "engine-core", kwargs.get("dp_rank", 0)
    if name.endswith("worker_main"):
        return "worker", kwargs.get("local_rank", 0)
    return None, None


class _Conn:
    def __init__(self):
        self.closed = False

    def send(self, obj):
        pass

    def recv(self):
        raise Stop()

    def poll(self, timeout=None):
        return False

    def close(self):
        self.closed = True

    def fileno(self):
        return -1


class _OSStandIn:
    """os as dp_supervisor sees it: its children's setpgrp must not detach the simulated process
    from the probe's process group (a timeout kills that group)."""

    def __init__(self, real):
        self._real = real

    def setpgrp(self):
        pass

    def __getattr__(self, name):
        return getattr(self._real, name)


class _MPContext:
    def Process(self, *args, **kwargs):
        return _SimProcess(*args, **kwargs)

    def Pipe(self, duplex=True):
        return _Conn(), _Conn()

    def Lock(self):
        import threading

        return threading.Lock()

    def Queue(self, *a, **k):
        import queue

        return queue.Queue()

    def Event(self):
        import threading

        return threading.Event()

    def get_start_method(self):
        return "spawn"

    def current_process(self):
        import multiprocessing

        return multiprocessing.current_process()


def run_child(role, index, body, kwargs=None):
    """Forks a simulated child process, runs body in it, returns its record."""
    global CURRENT
    parent = CURRENT
    r, w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        CURRENT = Proc(role, index, parent)
        if kwargs and "vllm_config" in kwargs:
            CURRENT.config = kwargs["vllm_config"]
            CURRENT.extra["launcher_dp_size"] = kwargs["vllm_config"].parallel_config.data_parallel_size
        _finish(CURRENT, body, w)
    os.close(w)
    data, timed_out = _read_all(r, CHILD_BOUND_S)
    if timed_out:
        # A simulated process that never reaches its cut is a probe that does not fit this vLLM
        # (a wait it does not stand in for): say which, rather than hang the request.
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    if timed_out or not data:
        why = f"did not reach its cut within {CHILD_BOUND_S} s" if timed_out else "died without a record"
        return {"id": f"{parent.id or parent.host}: {role}-{index}", "role": role, "lost": why}
    return json.loads(data)


def _finish(proc, body, w):
    import time

    t0 = time.monotonic()
    try:
        try:
            body()
        except Stop:
            if _DEBUG_STOP:
                proc.extra["stop_at"] = traceback.format_exc(limit=-4)
        except _ConfigBuilt:
            pass
        except Unsupported as e:
            proc.extra["unsupported"] = str(e)
        except SystemExit as e:
            if e.code not in (0, None) or proc.role != "api-server":
                proc.crash = {"stage": proc.stage, "error": conventions.system_exit_text(e, _ARGPARSE_ERR)}
        except BaseException as e:  # noqa: BLE001 - every exception is the process's crash
            if _unwinding_from_cut(e):
                # vLLM's cleanup (a finally or except block) ran only because the probe stopped
                # the process at its cut, and raised: the process had reached its cut.
                proc.extra["after_cut"] = crash_text(e)
            else:
                _fail(proc, e)
                proc.extra["traceback"] = traceback.format_exc(limit=-6)
        proc.extra["body_s"] = round(time.monotonic() - t0, 3)
        if proc.crash is None:
            after_cut(proc)
        proc.extra["total_s"] = round(time.monotonic() - t0, 3)
        data = json.dumps(proc.record(), default=_json_default).encode()
    except BaseException as e:  # noqa: BLE001
        data = json.dumps({"id": proc.id, "role": proc.role, "probe_error": traceback.format_exc()}).encode()
    os.write(w, data) if len(data) < 65536 else _write_all(w, data)
    os.close(w)
    os._exit(0)


def _unwinding_from_cut(e):
    """Whether e was raised while a Stop unwound the process (Python chains it as __context__):
    MPClient.__init__'s finally, for one, shuts its engine manager down reading
    VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS, which a running front end reads only at its exit."""
    seen = set()
    c = e.__context__
    while c is not None and id(c) not in seen:
        if isinstance(c, Stop):
            return True
        seen.add(id(c))
        c = c.__context__
    return False


def _json_default(o):
    return repr(o)


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


# A simulated process runs vLLM's code for milliseconds up to its cut; this bounds one (its own
# children included) so that a wait the probe does not stand in for fails the plan instead of
# hanging it.
CHILD_BOUND_S = 60


def _read_all(fd, bound):
    import select
    import time

    deadline = time.monotonic() + bound
    chunks = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            os.close(fd)
            return b"".join(chunks), True
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        b = os.read(fd, 1 << 16)
        if not b:
            break
        chunks.append(b)
    os.close(fd)
    return b"".join(chunks), False


# ---------------------------------------------------------------------------------------------
# After the cut: the KV connector's identity.


def after_cut(proc):
    if proc.role == "worker":
        proc.stage = "connector-init"
        try:
            # init_worker_distributed_environment builds the EC connector last, before the KV
            # connector's init (vllm/v1/worker/gpu_worker.py).
            kvconfig.ec_connector(proc.config, "WORKER")
            worker_connector(proc)
        except Stop:
            pass
        except BaseException as e:  # noqa: BLE001
            _fail(proc, e)
    elif proc.role in ("engine-core", "ray-actor"):
        conventions.ready_messages(proc)
        proc.stage = "connector-init"
        try:
            # Scheduler.__init__'s order (vllm/v1/core/sched/scheduler.py): the KV connector, the
            # KV event publisher, the EC connector.
            scheduler_connector(proc)
            kv_events(proc)
            kvconfig.ec_connector(proc.config, "SCHEDULER")
        except BaseException as e:  # noqa: BLE001
            _fail(proc, e)


def _kv(proc):
    cfg = proc.config
    kv = getattr(cfg, "kv_transfer_config", None) if cfg is not None else None
    if kv is None or not kv.is_kv_transfer_instance:
        return None
    return kv


def _mooncake_view(cfg, kv):
    """The config the Mooncake store connector sees: the config itself, or a MultiConnector
    child's (MultiConnector builds each child from kv_connector_extra_config['connectors'], with
    the parent's engine_id unless the child names its own, and a child MultiConnector its own
    children in turn; the worker's connector was built, so every child validates). The first
    store connector in that order."""
    if kv.kv_connector == conventions.MOONCAKE_STORE:
        return cfg, kv
    if kv.kv_connector != "MultiConnector":
        return None, None
    from vllm.config import KVTransferConfig

    children = kv.kv_connector_extra_config.get("connectors")
    assert children is not None
    for c in children:
        child = KVTransferConfig(**{**c, "engine_id": c.get("engine_id", kv.engine_id)})
        view, store = _mooncake_view(_ConfigView(cfg, child), child)
        if view is not None:
            return view, store
    return None, None


class _ConfigView:
    def __init__(self, cfg, kv):
        self._cfg, self.kv_transfer_config = cfg, kv

    def __getattr__(self, name):
        return getattr(self._cfg, name)


def _lookup_path(view):
    from vllm.distributed.kv_transfer.kv_connector.v1.mooncake.store import worker as mw

    return mw.get_zmq_rpc_path_lookup(view)


def _index_of(path):
    m = re.search(r"_dp_rank(-?\d+)$", path)
    return int(m.group(1)) if m else None


def worker_connector(proc):
    kv = _kv(proc)
    if kv is None:
        return
    cfg = proc.config
    proc.connector["engine_id"] = kv.engine_id
    # ensure_kv_transfer_initialized: the engine_id sync over the (stood-in) TP/PP groups.
    from vllm.distributed.kv_transfer import kv_transfer_state as kts

    if hasattr(kts, "_sync_engine_id_across_tp"):
        conventions.GROUPS.begin(proc)
        kts._sync_engine_id_across_tp(cfg)
        src = conventions.GROUPS.source
        if src is not None:
            proc.connector["engine_id_from_world_rank"] = src
        kv.engine_id = proc.connector["engine_id"]
    kvconfig.create_connector(cfg, "WORKER")
    view, mkv = _mooncake_view(cfg, kv)
    if view is None:
        return
    path = _lookup_path(view)
    proc.connector["mooncake_dp_index"] = _index_of(path)
    from vllm.distributed.kv_transfer.kv_connector.v1.mooncake import rdma_utils
    from vllm.utils.network_utils import get_ip

    proc.connector["segment_host"] = rdma_utils.get_requester_local_hostname(get_ip())
    proc.connector["registers_segment"] = True
    if cfg.parallel_config.rank == 0:
        proc.connector["lookup_path"] = path
        proc.connector["lookup_role"] = "server"


def scheduler_connector(proc):
    cfg = proc.config
    if cfg is None or getattr(cfg, "kv_transfer_config", None) is None:
        return
    kv = _kv(proc)
    if kv is not None:
        proc.connector["engine_id"] = kv.engine_id
    # Scheduler.__init__ builds its connector for any kv_transfer_config, a transfer instance or
    # not (vllm/v1/core/sched/scheduler.py), as the workers built theirs.
    kvconfig.create_connector(cfg, "SCHEDULER")
    if kv is None:
        return
    view, mkv = _mooncake_view(cfg, kv)
    if view is None:
        return
    path = _lookup_path(view)
    proc.connector["mooncake_dp_index"] = _index_of(path)
    # MooncakeStoreScheduler: enable_lookup off builds the client but never looks up.
    if mkv.kv_connector_extra_config.get("enable_lookup", True):
        proc.connector["lookup_path"] = path
        proc.connector["lookup_role"] = "client"


class _SocketLog:
    """Zmq hooks that record every bind and connect, then hand the call on."""

    def __init__(self, inner):
        self.inner, self.log = inner, []

    def bind(self, sock, addr):
        self.log.append((sock.type, "bind", addr))
        self.inner.bind(sock, addr)

    def connect(self, sock, addr):
        self.log.append((sock.type, "connect", addr))
        self.inner.connect(sock, addr)

    def __getattr__(self, name):
        return getattr(self.inner, name)


KV_EVENTS_SOURCE = "vllm/distributed/kv_events.py ZmqEventPublisher (EventPublisherFactory.create in Scheduler.__init__)"


def kv_events(proc):
    """The scheduler's KV event publisher, which Scheduler.__init__ builds right after its KV
    connector: vLLM's EventPublisherFactory with the engine's kv_events_config and
    data_parallel_index; the stand-in sockets record where it binds or connects."""
    cfg = proc.config
    ev = getattr(cfg, "kv_events_config", None) if cfg is not None else None
    if ev is None:
        return
    from vllm.distributed.kv_events import EventPublisherFactory

    idx = cfg.parallel_config.data_parallel_index
    rec = _SocketLog(zmq_standin.HOOKS)
    zmq_standin.HOOKS = rec
    try:
        publisher = EventPublisherFactory.create(ev, idx)
    finally:
        zmq_standin.HOOKS = rec.inner
    publisher.shutdown()
    for typ, op, endpoint in rec.log:
        who = "replay" if typ == zmq_standin.SOCKET_TYPES["ROUTER"] else "publisher"
        address("kv-events", op, endpoint, KV_EVENTS_SOURCE, "connector-init", key=f"{who} dp{idx}",
                exercised=op == "bind" and conventions.kv_events_bindable(endpoint), flavor="zmq")


# ---------------------------------------------------------------------------------------------
# The command: parse and dispatch exactly as `vllm serve` / `python -m ...api_server` do.

_ARGPARSE_ERR = io.StringIO()


def run_command(node, cmd_index, launch, model):
    """Top-level simulated process for one launch line (runs in its own fork)."""
    global CURRENT
    root = Proc("root", 0)
    root.host, root.cmd = node["host"], cmd_index
    CURRENT = root
    role = "api-server"
    if launch["entrypoint"] == "serve" and "--headless" in launch["args"]:
        role = "headless"
    conventions.enter_node(node, cmd_index, launch, model)

    def body():
        _dispatch(launch, model)

    rec = run_child(role, 0, body)
    return rec


def _dispatch(launch, model):
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    if launch["entrypoint"] == "grpc_server":
        _run_grpc_server(launch["args"])
        return
    if launch["entrypoint"] == "api_server":
        from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args
        from vllm.entrypoints.openai import api_server

        parser = FlexibleArgumentParser(prog="api_server.py",
                                        description="vLLM OpenAI-Compatible RESTful API server.")
        parser = make_arg_parser(parser)
        args = _parse(parser, launch["args"])
        validate_parsed_serve_args(args)
        import uvloop

        uvloop.run(api_server.run_server(args))
        return
    import vllm.entrypoints.cli.serve as serve

    parser = FlexibleArgumentParser(prog="vllm", description="vLLM CLI")
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    cmd = serve.ServeSubcommand()
    cmd.subparser_init(subparsers).set_defaults(dispatch_function=cmd.cmd)
    args = _parse(parser, ["serve"] + launch["args"])
    cmd.validate(args)
    # ServeSubcommand.cmd picks the launch path; the role was guessed from --headless, and is
    # set again by the path it takes (_follow_paths).
    _follow_paths(serve)
    args.dispatch_function(args)


# The launch paths of vllm/entrypoints/cli/serve.py and the role of the process that takes one:
# ServeSubcommand.cmd resolves --api-server-count first, so `--api-server-count 0` without
# --headless runs run_headless too.
_PATH_ROLES = {"run_headless": "headless", "run_dp_supervisor": "dp-supervisor"}


def _follow_paths(serve):
    """Wraps serve's launch functions so the top process's role is the path it took."""
    for name, role in _PATH_ROLES.items():
        if not hasattr(serve, name):
            continue  # a vLLM from before that launch path
        orig = _original(serve, name)

        def path(*a, _orig=orig, _role=role, **kw):
            _retag(_role)
            return _orig(*a, **kw)

        setattr(serve, name, path)
    _follow_grpc()


def _run_grpc_server(argv):
    """`python -m vllm.entrypoints.grpc_server`: its main() builds its own parser, parses
    sys.argv and runs serve_grpc; an exception there is logged and becomes sys.exit(1). The
    process's crash is that exception, as it is for `vllm serve --grpc`."""
    import vllm.entrypoints.grpc_server as gs

    _follow_grpc()
    old_argv, old_err = sys.argv, sys.stderr
    sys.argv = [gs.__file__] + list(argv)
    _ARGPARSE_ERR.seek(0)
    _ARGPARSE_ERR.truncate()
    sys.stderr = _ARGPARSE_ERR
    try:
        gs.main()
    except SystemExit:
        if _SERVE_GRPC_ERROR:
            raise _SERVE_GRPC_ERROR[0]
        raise
    finally:
        sys.argv, sys.stderr = old_argv, old_err


# The exception serve_grpc raised in this process (grpc_server.main() turns it into exit 1).
_SERVE_GRPC_ERROR = []


def _follow_grpc():
    """--grpc: ServeSubcommand.cmd imports vllm.entrypoints.grpc_server's serve_grpc (its gRPC
    packages stood in) and runs it instead of every other path: the top process is an API server
    whatever --headless says. serve_grpc binds its socket with add_insecure_port once AsyncLLM is
    up, which is where the probe stops (AsyncLLM's engine client built): the bind is recorded
    there, from the same arguments, and not when the config or the engines failed first."""
    try:
        import vllm.entrypoints.grpc_server as gs
    except ImportError:
        return  # a vLLM from before --grpc
    orig = _original(gs, "serve_grpc")

    async def serve_grpc(args):
        _retag("api-server")
        try:
            return await orig(args)
        except Exception as e:  # noqa: BLE001 - kept for _run_grpc_server, then raised on
            _SERVE_GRPC_ERROR.append(e)
            raise
        except Stop:
            address("api-server", "bind", "tcp://" + _host_port(args.host or "0.0.0.0", args.port),
                    "vllm/entrypoints/grpc_server.py serve_grpc (server.add_insecure_port once AsyncLLM "
                    "is up; gRPC sets SO_REUSEPORT)", "serving", exercised=True, flavor="grpc",
                    listen_at="serving", reuse_port=True)
            raise

    gs.serve_grpc = serve_grpc


class _RustFrontendStandIn:
    """subprocess.Popen for the Rust front end (vllm-rs frontend ...): a process that is up and
    serving, as the binary vLLM's installation ships would be; the probe never executes it."""

    # No pid: vLLM's shutdown kills the tree of a pid still alive, and pid 0 is the caller's
    # process group.
    pid = None
    returncode = None

    def __init__(self, cmd, **kw):
        import threading
        self.args = cmd
        self._done = threading.Event()
        if CURRENT is not None:
            CURRENT.extra["rust_frontend"] = list(cmd[:2])

    def poll(self):
        return self.returncode

    def wait(self, timeout=None):
        self._done.wait(timeout)
        return self.returncode

    def terminate(self):
        self.returncode = -signal.SIGTERM
        self._done.set()

    kill = terminate


def _stand_in_rust_frontend():
    """RustFrontendProcessManager starts the vllm-rs binary with subprocess.Popen (its module
    imports subprocess inside __init__): Popen is stood in while it runs, whether or not a binary
    exists at the path (the model assumes the path names one)."""
    try:
        import vllm.v1.utils as vu
    except ImportError:
        return
    if not hasattr(vu, "RustFrontendProcessManager"):
        return  # a vLLM from before the Rust front end
    import subprocess
    real_init = _original(vu.RustFrontendProcessManager, "__init__")

    def init(self, *a, **k):
        real_popen = subprocess.Popen
        subprocess.Popen = _RustFrontendStandIn
        try:
            return real_init(self, *a, **k)
        finally:
            subprocess.Popen = real_popen

    vu.RustFrontendProcessManager.__init__ = init


def _retag(role):
    CURRENT.role = role
    CURRENT.id = f"{CURRENT.host}/{CURRENT.cmd}/{role}-0"


def _parse(parser, argv):
    _ARGPARSE_ERR.seek(0)
    _ARGPARSE_ERR.truncate()
    old = sys.stderr
    sys.stderr = _ARGPARSE_ERR
    try:
        return parser.parse_args(argv)
    finally:
        sys.stderr = old


# ---------------------------------------------------------------------------------------------
# Patches: where vLLM's code meets a stand-in. Applied once, after vLLM is imported.


_ORIGINALS = {}


def _original(obj, name):
    """obj.name as vLLM defines it: patch_vllm runs for every deployment, and a wrapper must wrap
    vLLM's function, not the previous deployment's wrapper."""
    key = (id(obj), name)
    if key not in _ORIGINALS:
        _ORIGINALS[key] = getattr(obj, name)
    return _ORIGINALS[key]


def patch_vllm(model):
    import huggingface_hub

    import vllm.engine.arg_utils as au

    # huggingface_hub is stood in, and its HF_HUB_OFFLINE with it (truthy): EngineArgs.__post_init__
    # would resolve the model id to a local snapshot (get_model_path). The simulated host has no
    # model cache; the model stays its id, as online.
    constants = huggingface_hub.constants
    constants.HF_HUB_OFFLINE = False
    huggingface_hub.constants = constants
    au.maybe_override_with_speculators = lambda model, tokenizer, revision=None, trust_remote_code=False, vllm_speculative_config=None, **kw: (model, tokenizer, vllm_speculative_config)
    au.EngineArgs.create_model_config = lambda self: conventions.ModelConfigStandIn(self, model)

    # Past ParallelConfig(...), create_engine_config runs for real up to VllmConfig(...), where it
    # is cut (its keyword arguments are the configs it built), with stand-ins for what needs the
    # model: the speculative config is a record of its arguments (the speculative flags' merge
    # with --speculative-config runs); the batch defaults are vLLM's for an 80 GiB H100, the
    # scheduler config vLLM's for the stood-in model. The command line's own checks there run:
    # scheduler, LoRA, attention, Mamba, kernel, IR op priority, load, observability,
    # compilation and offload configs.
    real_speculative = _original(au.EngineArgs, "create_speculative_config")

    def speculative_config(self, target_model_config=None, target_parallel_config=None, **kw):
        real_class = au.SpeculativeConfig
        au.SpeculativeConfig = conventions.SpeculativeConfigStandIn
        try:
            return real_speculative(self, target_model_config=target_model_config,
                                    target_parallel_config=target_parallel_config, **kw)
        finally:
            au.SpeculativeConfig = real_class

    au.EngineArgs.create_speculative_config = speculative_config
    real_batch_defaults = _original(au.EngineArgs, "_set_default_max_num_seqs_and_batched_tokens_args")

    def batch_defaults(self, *args, **kwargs):
        # vLLM's own defaults, for the device the simulation's nodes have (conventions.GPU).
        plat = au.current_platform
        plat.get_device_total_memory = lambda device_id=0: conventions.GPU_MEMORY
        plat.get_device_name = lambda device_id=0: conventions.GPU_NAME
        try:
            return real_batch_defaults(self, *args, **kwargs)
        finally:
            del plat.get_device_total_memory, plat.get_device_name

    au.EngineArgs._set_default_max_num_seqs_and_batched_tokens_args = batch_defaults
    real_create = _original(au.EngineArgs, "create_engine_config")
    real_vllm_config = _original(au, "VllmConfig")

    def vllm_config_then_stop(**kwargs):
        raise _ConfigBuilt(kwargs["parallel_config"])

    def create_engine_config(self, usage_context=None, headless=False):
        # Only while it runs: the parser reads the class's fields.
        au.VllmConfig = vllm_config_then_stop
        try:
            real_create(self, usage_context=usage_context, headless=headless)
        except _ConfigBuilt as built:
            cfg = conventions.VllmConfigStandIn(built.pc, self, model)
            # VllmConfig(...) itself, past the cut: its __post_init__'s KV connector part, which
            # raises out of create_engine_config as any other config error.
            kvconfig.post_init(cfg, self)
            if CURRENT is not None:
                CURRENT.config = cfg
            pc = built.pc
            if "ray" in (pc.data_parallel_backend, pc.distributed_executor_backend):
                raise Unsupported("Ray (--data-parallel-backend ray or --distributed-executor-backend ray) "
                                  "is not run by the vllm planner: plan it with --planner model")
            if pc.distributed_executor_backend == "external_launcher":
                raise Unsupported("--distributed-executor-backend external_launcher runs under torchrun, "
                                  "which the vllm planner does not run")
            return cfg
        finally:
            au.VllmConfig = real_vllm_config
        raise RuntimeError("create_engine_config returned without building a ParallelConfig")

    au.EngineArgs.create_engine_config = create_engine_config

    # Network and processes.
    ctx = _MPContext()
    for name, mod in list(sys.modules.items()):
        if name.startswith("vllm") and mod is not None and hasattr(mod, "get_mp_context"):
            setattr(mod, "get_mp_context", lambda: ctx)
    import vllm.entrypoints.openai.api_server as api
    import vllm.entrypoints.cli.serve as serve

    def setup_server(args, reuse_port=False):
        # launcher.create_server_socket((args.host or "", args.port)): every interface without
        # --host. The key names the front end's DP rank once its config is built (assemble).
        address("api-server", "bind", "tcp://" + _host_port(args.host or "0.0.0.0", args.port),
                "vllm/entrypoints/openai/api_server.py setup_server (launcher.create_server_socket); with "
                "--api-server-count N, run_multi_api_server binds once and hands the socket to its N API "
                "server processes", "config", exercised=True, flavor="socket", listen_at="serving",
                reuse_port=bool(reuse_port))
        return "http://0.0.0.0:%d" % args.port, StandIn()

    api.setup_server = setup_server
    serve.setup_server = setup_server
    serve.setup_multiprocess_prometheus = lambda: None

    class _APIServers:
        def __init__(self, *a, **k):
            self.processes = []
            self.num_servers = k.get("num_servers", 1)

        def gather_actual_addresses(self):
            return [], []

        def shutdown(self, *a, **k):
            pass

    serve.APIServerProcessManager = _APIServers

    # The multi-port DP supervisor starts one external-LB API server per local rank with
    # multiprocessing's spawn context, then monitors them over HTTP (the cut).
    import types

    import vllm.entrypoints.openai.dp_supervisor as sup

    sup.multiprocessing = types.SimpleNamespace(get_context=lambda method=None: ctx)
    real_start_children = sup.DPSupervisor._start_children

    def start_children(self):
        real_start_children(self)
        raise Stop()

    sup.DPSupervisor._start_children = start_children
    sup.os = _OSStandIn(sup.os)

    def wait_for_completion_or_failure(*a, **k):
        raise Stop()

    serve.wait_for_completion_or_failure = wait_for_completion_or_failure

    from vllm.v1.engine import utils as eu
    from vllm.v1.engine import core as ec

    class _CoordinatorProc:
        pid, exitcode, name = 0, None, "DPCoordinator"
        sentinel = _Sentinel()

    import vllm.v1.engine.coordinator as coord

    real_coordinator_init = _original(coord.DPCoordinator, "__init__")
    real_client_addr = _original(coord, "get_engine_client_zmq_addr")

    class _Addressed(BaseException):
        pass

    class _Coordinator:
        def __init__(self, *a, **k):
            self.proc = _CoordinatorProc()
            # DPCoordinator.__init__ derives its three socket addresses (get_engine_client_zmq_addr)
            # and then starts its process: run it to the third address, record them, stop there.
            keys = iter(("front_publish", "back_publish", "back_output"))

            def client_addr(local_only, host="", port=0):
                addr = real_client_addr(local_only, host=host, port=port)
                key = next(keys)
                address("dp-coordinator", "bind", addr,
                        "vllm/v1/engine/coordinator.py DPCoordinator (its own process, not planned; port 0: the "
                        "kernel picks and the coordinator publishes it)", "engine-init", key=key)
                if key == "back_output":
                    raise _Addressed()
                return addr

            coord.get_engine_client_zmq_addr = client_addr
            try:
                real_coordinator_init(self, *a, **k)
            except _Addressed:
                pass
            finally:
                coord.get_engine_client_zmq_addr = real_client_addr

        def get_engine_socket_addresses(self):
            return "ipc:///coordinator-in", "ipc:///coordinator-out"

        def get_stats_publish_address(self):
            return "ipc:///coordinator-stats"

        def shutdown(self, *a, **k):
            pass

    eu.DPCoordinator = _Coordinator

    # The front end's engine input/output sockets, where vLLM allocates them.
    import vllm.v1.engine.core_client as ccl

    real_zmq_addresses = _original(eu, "get_engine_zmq_addresses")

    def engine_zmq_addresses(*a, **k):
        addrs = real_zmq_addresses(*a, **k)
        for key, eps in (("input", addrs.inputs), ("output", addrs.outputs)):
            for i, ep in enumerate(eps):
                if ep.startswith("tcp://") and conventions.is_local_address(ep):
                    # defer_api_server_ports=False (the Rust front end): get_open_port probed the
                    # port (conventions.open_port), which the consumer binds later.
                    k_i = key + (str(i) if i else "")
                    address("engine-io", "probe", _probe_endpoint("0.0.0.0"),
                            "vllm/v1/engine/utils.py get_engine_zmq_addresses (get_open_port())", "config",
                            key=k_i, exercised=True, alloc=_alloc("get_open_port"))
                    host = conventions.strip_scheme(ep).rsplit(":", 1)[0].strip("[]")
                    address("engine-io", "bind", "tcp://" + _host_port(host, 0) + "{probed}",
                            "the consumer binds the probed port", "engine-init", key=k_i, exercised=True, flavor="zmq")
                    continue
                address("engine-io", "bind", ep,
                        "vllm/v1/engine/utils.py get_engine_zmq_addresses (port 0: bound at once, read back with "
                        "LAST_ENDPOINT)", "engine-init", key=key)
        return addrs

    eu.get_engine_zmq_addresses = engine_zmq_addresses
    ccl.get_engine_zmq_addresses = engine_zmq_addresses
    _stand_in_rust_frontend()

    def monitor(self):
        raise Stop()

    eu.CoreEngineProcManager.monitor_engine_liveness = monitor
    eu.CoreEngineProcManager.shutdown = lambda self, *a, **k: None
    eu.CoreEngineProcManager.finished_procs = lambda self: {}

    real_wait = eu.wait_for_engine_startup

    def wait_for_engine_startup(handshake_socket, core_engines, parallel_config, *a, **k):
        CURRENT.handshake = {
            "address": handshake_socket.bound,
            "engines": [[int.from_bytes(e.identity, "little"), bool(e.local)] for e in core_engines],
            # wait_for_engine_startup's remote_should_be_headless, as vLLM computes it there.
            "remote_headless": not parallel_config.data_parallel_hybrid_lb and not parallel_config.data_parallel_external_lb,
        }
        # coordinated_dp (its fourth argument): every READY must carry this front end's own hash.
        if a and a[0]:
            CURRENT.handshake["config_hash"] = parallel_config.compute_hash()
        conventions.feed_front_end(handshake_socket, CURRENT)
        try:
            real_wait(handshake_socket, core_engines, parallel_config, *a, **k)
        except Stop:
            pass
        except RuntimeError as e:
            # The refusal of a HELLO (or a READY) is decided at the barrier from both sides'
            # plans (vllm/plan.go HandshakeExpect.Refuse); vLLM's own verdict is kept for
            # conformance, and the front end waits here as far as its plan goes.
            CURRENT.extra["handshake_refusal"] = crash_text(e)
        raise Stop()

    eu.wait_for_engine_startup = wait_for_engine_startup

    # The front end's AsyncLLM: only the engine core client it builds matters.
    import vllm.v1.engine.async_llm as al
    from vllm.v1.engine.core_client import EngineCoreClient

    def async_llm_init(self, vllm_config, executor_class, log_stats, usage_context=None,
                       mm_registry=None, log_requests=True, start_engine_loop=True,
                       stat_loggers=None, aggregate_engine_logging=False, client_addresses=None,
                       client_count=1, client_index=0):
        self.vllm_config = vllm_config
        EngineCoreClient.make_async_mp_client(
            vllm_config=vllm_config, executor_class=executor_class, log_stats=log_stats,
            client_addresses=client_addresses, client_count=client_count, client_index=client_index)
        raise Stop()

    al.AsyncLLM.__init__ = async_llm_init
    al.AsyncLLM.shutdown = lambda self, *a, **k: None
    al.AsyncLLM.__del__ = lambda self: None

    # Engine core: DP group recorded, executor up to its workers.
    import vllm.distributed.utils as du

    def stateless_pg(host, port, rank, world_size, backend=None, return_store=False, **kw):
        CURRENT.rendezvous.append({"kind": "dp", "address": f"{host}:{port}", "world_size": world_size, "rank": rank})
        return (StandIn(), StandIn()) if return_store else StandIn()

    du.stateless_init_torch_distributed_process_group = stateless_pg

    from vllm.v1.executor import multiproc_executor as mpx

    mpx.MessageQueue = conventions.MessageQueueStandIn

    def wait_for_ready(handles):
        raise Stop()

    mpx.WorkerProc.wait_for_ready = staticmethod(wait_for_ready)

    # worker_main logs and swallows a worker's exception (the executor learns of it from the
    # ready pipe): the probe records it as the worker's crash.
    real_worker_init = mpx.WorkerProc.__init__

    def worker_init(self, *args, **kwargs):
        try:
            real_worker_init(self, *args, **kwargs)
        except Exception as e:  # noqa: BLE001
            _fail(CURRENT, e)
            if _DEBUG_STOP:
                CURRENT.extra["traceback"] = traceback.format_exc(limit=-6)
            raise Stop() from e

    mpx.WorkerProc.__init__ = worker_init
    mpx.MultiprocExecutor.start_worker_monitor = lambda self, inline=False: None
    mpx.MultiprocExecutor.shutdown = lambda self: None
    # The executor's clean-up after its cut waits for (stood-in) workers to exit: nothing to wait for.
    mpx.MultiprocExecutor._ensure_worker_termination = staticmethod(lambda *a, **k: None)

    from vllm.v1.executor import uniproc_executor as upx

    real_uni = upx.UniProcExecutor._init_executor

    def uni_init(self):
        rec = run_child("worker", 0, lambda: real_uni(self), {"vllm_config": self.vllm_config})
        CURRENT.children.append(rec)
        raise Stop()

    upx.UniProcExecutor._init_executor = uni_init

    # Worker: stop at the torch rendezvous.
    class _TorchHooks:
        def init_process_group(self, backend=None, init_method=None, world_size=-1, rank=-1, store=None):
            if store is not None and isinstance(store, torch_standin.FileStore):
                address = "file://" + store.path
            else:
                address = init_method
            CURRENT.rendezvous.append({"kind": "workers", "address": address, "world_size": world_size, "rank": rank})
            raise Stop()

    torch_standin.HOOKS = _TorchHooks()
    zmq_standin.HOOKS = conventions.ZMQHooks(lambda: CURRENT)

    # Engine core: the scheduler connector is built after the executor; the engine's cut is
    # inside the executor, so run_engine_core's own exception path must not swallow Stop.
    ec.EngineCoreProc._send_engine_dead = lambda self: None
    ec.EngineCore.shutdown = lambda self: None

    # Free ports vLLM draws (conventions.open_port); the DP port list is the handshake's.
    for name, mod in list(sys.modules.items()):
        if name.startswith("vllm") and mod is not None and hasattr(mod, "get_open_port"):
            setattr(mod, "get_open_port", conventions.open_port)
    import vllm.config.parallel as cp

    def get_open_ports_list(count=5):
        address("dp-master-ports", "probe", _probe_endpoint("0.0.0.0"),
                "vllm/config/parallel.py ParallelConfig.__post_init__ (get_open_ports_list(5); the last is "
                "data_parallel_master_port)", "config", exercised=True, alloc=_alloc("get_open_ports_list", count))
        return [0] * count

    cp.get_open_ports_list = get_open_ports_list

    # The executors' distributed_init_method, where they compute it.
    real_file_store = _original(mpx, "get_file_store_init_method")

    def file_store_init_method(where):
        def method():
            m = real_file_store()
            address("executor-init", "bind", m, where + " (get_file_store_init_method, PR #50999)", "engine-init")
            return m
        return method

    mpx.get_file_store_init_method = file_store_init_method("vllm/v1/executor/multiproc_executor.py _init_executor")
    upx.get_file_store_init_method = file_store_init_method("vllm/v1/executor/uniproc_executor.py _distributed_args")
    real_dist_method = _original(mpx, "get_distributed_init_method")

    def mp_dist_method(ip, port):
        address("executor-init", "probe", _probe_endpoint(ip),
                "vllm/v1/executor/multiproc_executor.py _init_executor (get_loopback_ip(), get_open_port()), "
                "before PR #50999", "engine-init", exercised=True, alloc=_alloc("get_open_port"))
        return real_dist_method(ip, port)

    mpx.get_distributed_init_method = mp_dist_method
    real_uni_method = _original(upx, "get_distributed_init_method")

    def uni_dist_method(ip, port):
        address("executor-init", "probe", _probe_endpoint(ip),
                "vllm/v1/executor/uniproc_executor.py _init_executor (get_ip(), get_open_port())",
                "engine-init", exercised=True, alloc=_alloc("get_open_port"))
        return real_uni_method(ip, port)

    upx.get_distributed_init_method = uni_dist_method

    real_ctx = eu.zmq_socket_ctx

    @contextlib.contextmanager
    def zmq_socket_ctx(path, socket_type, bind=False, **kw):
        # Recorded once the socket is made: make_zmq_socket refuses a path it cannot split.
        with real_ctx(path, socket_type, bind=bind, **kw) as sock:
            if bind:
                CURRENT.extra["handshake_bind"] = path
            yield sock

    eu.zmq_socket_ctx = zmq_socket_ctx

    import vllm.distributed.parallel_state as ps

    ps.get_tp_group = lambda: conventions._Group("tp")
    ps.get_pp_group = lambda: conventions._Group("pp")

    # The uuid4 engine_id a KVTransferConfig draws (conventions.engine_uuid).
    import vllm.config.kv_transfer as kvt

    kvt.uuid = conventions.UUIDStandIn(kvt.uuid)

    # get_ip's fallback probes a route with a UDP socket; the simulated host answers its name.
    import vllm.utils.network_utils as nu

    nu.socket = conventions.SocketModuleStandIn(socket)
