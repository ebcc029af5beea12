"""The simulation conventions: every place where the plan needs a value vLLM does not fix (it
draws it at random, or it lives in a stood-in library), in one file. Each follows the Go
model's documented convention (vllm/rendezvous.go, vllm/engineid.go in widetp), so both
planners give one deployment the same plan.

* engine_uuid: the uuid4 a KVTransferConfig draws is derived from the seed, the host and the
  command index (vllm/engineid.go derivedUUID4).
* DP ports: the front end ships its DP master port list in the engine handshake; vLLM draws it
  with get_open_ports_list. The engine side of the stood-in handshake ships
  [rpc_port + 2, rpc_port + 1], so vLLM's own get_next_dp_init_port hands the MoE DP group
  rpc_port + 1 and a single-node DP torch world rpc_port + 2 (vllm/rendezvous.go
  dpGroupPortOffset, dpWorldPortOffset). Offline (VLLM_DP_*) front ends ship their own values.
* host-local rendezvous (ipc handshakes, the executor's file store or free loopback port) get
  <host>:61000 + 128 * command + slot, slots in planning order, one reserved by every front end
  that launches engines (vllm/rendezvous.go localPortBase).
* torch groups: a worker's TP/PCP/PP ranks follow initialize_model_parallel's layout (DP, PP,
  PCP, TP; TP fastest), which the stood-in groups use for the engine_id broadcast.
* temp dir: tempfile.gettempdir() is the first of TMPDIR, TEMP, TMP (normalised) else /tmp, as on
  the simulated node, whose directories this machine does not have (Python would check that the
  directory exists and is writable here; vllm/env.go gettempdir).
* exception text: ``Type: message`` as the process's last line, qualified by module outside
  builtins, pydantic's ValidationError on one line.
"""

import hashlib
import itertools
import os
import re
import socket as _socket
import uuid as _uuid

from .standins import StandIn

MOONCAKE_STORE = "MooncakeStoreConnector"
LOCAL_PORT_BASE, LOCAL_PORT_STRIDE = 61000, 128
DP_GROUP_OFFSET, DP_WORLD_OFFSET = 1, 2

SEED, HOST, CMD = "", "", 0


def enter_node(node, cmd_index, launch, model):
    """Sets what every process of this command sees: its environment (the node's, then the
    line's own assignments, nothing of the probe's), hostname and GPUs."""
    global HOST, CMD
    from . import torch_standin

    HOST, CMD = node["host"], cmd_index
    keep = {k: os.environ[k] for k in ("PATH",) if k in os.environ}
    os.environ.clear()
    os.environ.update(keep)
    os.environ.update(node.get("env") or {})
    os.environ.update(launch.get("env") or {})
    torch_standin.NODE_GPUS[0] = node["gpus"]
    _socket.gethostname = lambda: HOST
    import tempfile

    tempfile.tempdir = None  # Python caches the first answer: the probe's own
    tempfile.gettempdir = gettempdir


def gettempdir():
    """tempfile.gettempdir() on the simulated node (see the module doc)."""
    for k in ("TMPDIR", "TEMP", "TMP"):
        v = os.environ.get(k)
        if v:
            return os.path.normpath(v)
    return "/tmp"


def engine_uuid():
    h = hashlib.sha256()
    for part in (SEED, HOST, str(CMD)):
        h.update(part.encode())
        h.update(b"\0")
    b = bytearray(h.digest()[:16])
    b[6] = (b[6] & 0x0F) | 0x40
    b[8] = (b[8] & 0x3F) | 0x80
    return _uuid.UUID(bytes=bytes(b))


class UUIDStandIn:
    """The uuid module as vllm/config/kv_transfer.py sees it: uuid4() is engine_uuid()."""

    def __init__(self, real):
        self._real = real

    def uuid4(self):
        return engine_uuid()

    def __getattr__(self, name):
        return getattr(self._real, name)


_open_ports = itertools.count()


def open_port():
    """get_open_port: a port no real socket has (>= 1,000,000), unique per process and call, so
    the rendezvous it names is recognised as host-local and given a slot."""
    return 1_000_000 + os.getpid() * 64 + next(_open_ports) % 64


def is_local_address(addr):
    if addr.startswith("ipc://") or addr.startswith("file://"):
        return True
    m = re.search(r":(\d+)$", addr)
    return bool(m) and int(m.group(1)) >= 1_000_000


def strip_scheme(addr):
    return re.sub(r"^tcp://", "", addr)


def barrier_key(host, address):
    """report.BarrierKey: a loopback address is qualified by the host."""
    h = address.rsplit(":", 1)[0].strip("[]")
    if h == "localhost" or h.startswith("127.") or h == "::1":
        return address + "@" + host
    return address


# --- the handshake's far ends ------------------------------------------------------------------


def handshake_parallel_config(proc):
    """What the front end ships in EngineHandshakeMetadata.parallel_config (wait_for_engine_startup
    sends it when coordinated_dp: DP > 1 and a MoE model)."""
    pc = proc.config.parallel_config
    d = proc.extra.get("launcher_dp_size", pc.data_parallel_size)
    if not (d > 1 and proc.config.model_config.is_moe):
        return {}
    if pc._data_parallel_master_port_list:
        rpc = pc.data_parallel_rpc_port
        ports = [rpc + DP_WORLD_OFFSET, rpc + DP_GROUP_OFFSET]
        master = rpc + 3
    else:
        ports, master = [], pc.data_parallel_master_port
    return {"data_parallel_master_ip": pc.data_parallel_master_ip, "data_parallel_master_port": master,
            "_data_parallel_master_port_list": ports, "data_parallel_size": d}


class ZMQHooks:
    def __init__(self, current):
        self.current = current

    def bind(self, sock, addr):
        pass

    def connect(self, sock, addr):
        pass

    def send(self, sock, frames):
        from . import zmq_standin

        proc = self.current()
        if sock.type == zmq_standin.SOCKET_TYPES["DEALER"] and sock.identity:
            msg = getattr(frames[-1], "obj", None)
            if isinstance(msg, dict) and "status" in msg:
                proc.hello.append({"from": proc.id, "address": sock.addresses[-1],
                                   "index": int.from_bytes(sock.identity, "little"),
                                   "status": msg["status"], "local": bool(msg["local"]),
                                   "headless": bool(msg["headless"]),
                                   "parallel_config_hash": msg.get("parallel_config_hash")})

    def poll(self, sock, timeout):
        from . import zmq_standin
        from .launch import Stop

        if sock.type == zmq_standin.SOCKET_TYPES["DEALER"]:
            return 1  # the engine's handshake: the front end answers at once
        feed = getattr(sock, "feed", None)
        if feed:
            return 1
        raise Stop()  # nothing more will arrive in this planning pass: the process waits here

    def recv(self, sock):
        from . import zmq_standin
        from .launch import Stop
        from vllm.v1.engine.utils import EngineHandshakeMetadata, EngineZmqAddresses
        import msgspec

        if sock.type == zmq_standin.SOCKET_TYPES["DEALER"]:
            proc = self.current()
            meta = EngineHandshakeMetadata(
                addresses=EngineZmqAddresses(inputs=["ipc:///frontend-in"], outputs=["ipc:///frontend-out"]),
                parallel_config=handshake_parallel_config(proc))
            return [msgspec.msgpack.encode(meta)]
        feed = getattr(sock, "feed", None)
        if not feed:
            raise Stop()
        return feed.pop(0)


def feed_front_end(handshake_socket, proc):
    """Queues the HELLO and READY messages of every engine that dials this front end's handshake:
    its own engines (already started) and the remote ones of the second pass."""
    import msgspec
    from . import launch

    addr = handshake_socket.bound
    msgs = []
    for child in proc.children:
        for h in child.get("hello") or []:
            if h["address"] == addr:
                msgs.append(h)
    msgs.extend(launch.REMOTE_FEED.get(proc.id, []))
    queue = []
    # A ROUTER socket (no handover) rejects a second peer that connects with an identity already
    # in use: its messages never arrive.
    owner = {}
    for h in msgs:
        if owner.setdefault(h["index"], h.get("from")) != h.get("from"):
            continue
        payload = {"status": h["status"], "local": h["local"], "headless": h["headless"]}
        if h.get("parallel_config_hash") is not None:
            payload["parallel_config_hash"] = h["parallel_config_hash"]
        queue.append([h["index"].to_bytes(2, "little"), msgspec.msgpack.encode(payload)])
    handshake_socket.feed = queue


def ready_messages(proc):
    """READY follows HELLO once the engine is up (EngineCoreProc._perform_handshake sends it when
    its init completes; the probe stops the engine inside its init, so it sends it here, with
    the same fields)."""
    out = []
    h_hash = None
    try:
        if proc.config.parallel_config.data_parallel_size > 1:
            h_hash = proc.config.parallel_config.compute_hash()
    except Exception:  # noqa: BLE001
        h_hash = None
    for h in list(proc.hello):
        if h["status"] == "HELLO":
            out.append(dict(h, status="READY", parallel_config_hash=h_hash))
    proc.hello.extend(out)


# --- torch groups ------------------------------------------------------------------------------


class _Groups:
    def __init__(self):
        self.proc = None
        self.source = None

    def begin(self, proc):
        self.proc, self.source = proc, None

    def ranks(self):
        pc = self.proc.config.parallel_config
        tp, pcp, pp = pc.tensor_parallel_size, pc.prefill_context_parallel_size, pc.pipeline_parallel_size
        r = pc.rank
        return r % tp, (r // tp) % pcp, (r // (tp * pcp)) % pp, tp, pcp

    def world_rank(self):
        for rv in self.proc.rendezvous:
            if rv["kind"] == "workers":
                return rv["rank"]
        return self.proc.config.parallel_config.rank


GROUPS = _Groups()


class _Group:
    def __init__(self, kind):
        self.kind = kind

    def broadcast_object(self, obj, src=0):
        tp_rank, pcp_rank, pp_rank, tp, pcp = GROUPS.ranks()
        r = GROUPS.world_rank()
        if self.kind == "tp":
            GROUPS.source = r - tp_rank
        else:
            GROUPS.source = r - pp_rank * tp * pcp - tp_rank
        return obj


def worker_ranks(pc):
    tp, pcp, pp = pc["tp"], pc["pcp"], pc["pp"]
    r = pc["rank"]
    return r % tp, (r // (tp * pcp)) % pp


def kv_events_bindable(endpoint):
    """Whether a run binds a KV event publisher's endpoint for real (vllm/kvevents.go
    kvEventsBindable): tcp://*:<port up to 65535>, or an absolute ipc path."""
    if endpoint.startswith("ipc://"):
        return endpoint[len("ipc://"):].startswith("/")
    m = re.fullmatch(r"tcp://\*:([0-9]{1,5})", endpoint)
    return m is not None and int(m.group(1)) <= 65535


# --- config stand-ins ---------------------------------------------------------------------------


class _HFTextConfigStandIn(StandIn):
    """The Hugging Face text config: a real layer count, which create_engine_config's arithmetic
    reads (a turboquant KV cache dtype skips boundary layers: TurboQuantConfig.
    get_boundary_skip_layers); the rest stood in. Which layers are skipped decides no identity."""

    num_hidden_layers = 32


class ModelConfigStandIn:
    """The model config create_engine_config builds from the Hugging Face config: only is_moe
    decides identity (from the scenario's model); the rest are plain defaults."""

    def __init__(self, engine_args, model):
        self.model = engine_args.model
        self.model_weights = getattr(engine_args, "model_weights", "") or ""
        self.tokenizer = engine_args.tokenizer or engine_args.model
        self.served_model_name = engine_args.model
        self.is_moe = bool(model["moe"])
        # --max-model-len as given (the Hugging Face config's limit is not checked), else 8192.
        given = getattr(engine_args, "max_model_len", None)
        self.max_model_len = given if isinstance(given, int) and given > 0 else 8192
        self.runner_type = "generate"
        self.is_multimodal_model = False
        self.is_encoder_decoder = False
        self.is_attention_free = False
        # A generate model with decoder attention supports both (ModelConfig's properties).
        self.is_chunked_prefill_supported = True
        self.is_prefix_caching_supported = True
        self.is_hybrid = False
        self.use_mla = False
        self.skip_tokenizer_init = False
        self.multimodal_config = None
        self.dtype = "bfloat16"
        self.quantization = None
        self.hf_config = StandIn()
        self.hf_text_config = _HFTextConfigStandIn()
        self.seed = 0
        self.enforce_eager = False
        self.is_diffusion = False
        self.architectures = []
        self.architecture = ""
        # ModelConfig.__post_init__ turns the cumem allocator on for sleep mode on CUDA.
        self.enable_cumem_allocator = bool(
            getattr(engine_args, "enable_cumem_allocator", False) or getattr(engine_args, "enable_sleep_mode", False)
        )

    def get_sliding_window(self):
        return None

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return StandIn()


class SpeculativeConfigStandIn:
    """SpeculativeConfig(...) as create_speculative_config builds it from --speculative-config
    and the --spec-* flags: a record of its arguments (its validation needs the draft and
    target models). num_speculative_tokens, which create_engine_config's LoRA check reads,
    defaults to one as for a draft model without its own."""

    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)
        if not isinstance(kwargs.get("num_speculative_tokens"), int):
            self.num_speculative_tokens = 1


# The GPU a simulated node has, where vLLM's defaults depend on it (EngineArgs.get_batch_defaults):
# an 80 GiB H100, as the model takes it (vllm/enginetail.go batchDefaults).
GPU_MEMORY = 80 << 30
GPU_NAME = "NVIDIA H100 80GB HBM3"


class VllmConfigStandIn:
    """VllmConfig as create_engine_config would return it, cut at ParallelConfig: the real
    ParallelConfig and KVTransferConfig, the model stand-in; the rest stood in."""

    def __init__(self, pc, engine_args, model):
        self.parallel_config = pc
        self.model_config = ModelConfigStandIn(engine_args, model)
        self.kv_transfer_config = engine_args.kv_transfer_config
        self.kv_events_config = engine_args.kv_events_config
        self.ec_transfer_config = getattr(engine_args, "ec_transfer_config", None)
        self.shutdown_timeout = 0
        self.speculative_config = None
        self.lora_config = None
        self.instance_id = ""
        from vllm.config import DeviceConfig
        from vllm.platforms import current_platform

        # create_engine_config's first step, which the cut skips over.
        self.device_config = DeviceConfig(device=current_platform.device_type)
        if pc.worker_cls == "auto":
            # CudaPlatform.check_and_update_config picks the GPU worker (VllmConfig.__post_init__).
            pc.worker_cls = "vllm.v1.worker.gpu_worker.Worker"

    @property
    def needs_dp_coordinator(self):
        from vllm.config import VllmConfig

        prop = getattr(VllmConfig, "needs_dp_coordinator", None)
        if isinstance(prop, property):
            return prop.fget(self)
        return self.parallel_config.data_parallel_size > 1

    def __post_init__(self):
        pass

    def compute_hash(self):
        return ""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return StandIn()


class MessageQueueStandIn:
    def __init__(self, *a, **k):
        pass

    def export_handle(self):
        return StandIn()

    def wait_until_ready(self):
        pass

    @staticmethod
    def create_from_handle(*a, **k):
        return MessageQueueStandIn()


class _UDPSocket:
    def __init__(self, *a, **k):
        pass

    def connect(self, addr):
        pass

    def getsockname(self):
        return (HOST, 0)

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def setsockopt(self, *a):
        pass


class SocketModuleStandIn:
    """The socket module as vllm/utils/network_utils.py sees it: get_ip's route probe answers
    the simulated host's name (its address in the simulation)."""

    def __init__(self, real):
        self._real = real

    def socket(self, *a, **k):
        return _UDPSocket()

    def __getattr__(self, name):
        return getattr(self._real, name)


# --- rendering -----------------------------------------------------------------------------------

_MODULE_ALIASES = {"pydantic_core._pydantic_core": "pydantic_core"}


def exception_text(e):
    t = type(e)
    mod = t.__module__
    name = t.__qualname__
    if mod in ("builtins", "__main__"):
        qual = name
    else:
        qual = _MODULE_ALIASES.get(mod, mod) + "." + name
    if qual.startswith("pydantic_core") and hasattr(e, "errors"):
        # pydantic prints each error over lines: its location, its message with the input value;
        # the plan's rendering keeps them on one line, "; "-separated. A validator's ValueError
        # (type value_error) is its message alone.
        try:
            errs = e.errors()
            title = getattr(e, "title", "")
            items = []
            for err in errs:
                where = ".".join(str(x) for x in err.get("loc") or ())
                if err.get("type") == "value_error" or not where:
                    items.append(err["msg"])
                else:
                    items.append(f"{where}: {err['msg']} [input_value={err.get('input')!r}]")
            if items:
                count = "1 validation error" if len(items) == 1 else f"{len(items)} validation errors"
                return f"pydantic_core.ValidationError: {count} for {title}: " + "; ".join(items)
        except Exception:  # noqa: BLE001
            pass
    msg = str(e)
    if not msg:
        return qual
    return f"{qual}: {msg}"


def system_exit_text(e, argparse_err):
    """argparse's error: SystemExit with status 2 after printing `prog: error: ...`. A function's
    repr there (parse_type's "cannot be converted to <function loads at 0x...>") is written
    without its address, which differs from run to run."""
    text = argparse_err.getvalue().strip().splitlines()
    last = next((ln for ln in reversed(text) if ": error: " in ln), text[-1] if text else "")
    last = re.sub(r"(<function [\w.<>]+) at 0x[0-9a-fA-F]+>", r"\1>", last)
    return f"SystemExit: {e.code} ({last})" if last else f"SystemExit: {e.code}"
