"""Stand-in for torch: what vLLM's launch code reads from it answers as on a GPU node of the
simulated deployment (device counts from ``DEVICES``, set per simulated process), and
``torch.distributed.init_process_group`` hands the rendezvous to ``HOOKS`` (the launch module
records it and stops the process there: nothing after a worker's torch rendezvous decides its
identity except the KV connector, which the launch module runs next)."""

import datetime
import os

from .standins import specific, _new_class, StandIn


class _Hooks:
    def init_process_group(self, **kwargs):
        raise RuntimeError("torch.distributed.init_process_group called outside a simulated worker")


HOOKS = _Hooks()
# The node's GPU count; CUDA_VISIBLE_DEVICES narrows it as CUDA does.
NODE_GPUS = [8]


def device_count():
    n = NODE_GPUS[0]
    v = os.environ.get("CUDA_VISIBLE_DEVICES")
    if v is not None:
        n = min(n, len([d for d in v.split(",") if d.strip()]))
    return n


class DistNetworkError(RuntimeError):
    pass


class DistStoreError(RuntimeError):
    pass


class FileStore:
    def __init__(self, path, world_size=-1, *a, **k):
        self.path, self.world_size = path, world_size


class TCPStore:
    def __init__(self, host_name=None, port=None, world_size=None, is_master=False, *a, **k):
        self.host, self.port, self.world_size, self.is_master = host_name, port, world_size, is_master


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1,
                       store=None, **kwargs):
    return HOOKS.init_process_group(backend=backend, init_method=init_method, world_size=world_size,
                                    rank=rank, store=store)


@specific("torch")
def _init(m):
    m.__version__ = "2.11.0"
    import importlib
    for sub in ("library", "cuda", "distributed", "accelerator", "version", "nn", "fx",
                "_dynamo", "_inductor", "multiprocessing", "types", "utils", "ops"):
        setattr(m, sub, importlib.import_module("torch." + sub))
    m.Tensor = _new_class("Tensor", "torch")
    m.Size = tuple
    m.device = _new_class("device", "torch")
    m.dtype = _new_class("dtype", "torch")
    for dt in ("float16", "bfloat16", "float32", "float64", "int8", "uint8", "int32", "int64",
               "float8_e4m3fn", "float8_e5m2", "bool", "half", "float", "long", "int16",
               "float8_e4m3fnuz", "float8_e5m2fnuz", "uint32", "uint64", "float4_e2m1fn_x2",
               "complex64", "int", "double", "float8_e8m0fnu", "uint16"):
        setattr(m, dt, m.dtype())
    m.is_grad_enabled = lambda: False
    m.get_default_dtype = lambda: m.float32


@specific("torch.library")
def _init_library(m):
    m.infer_schema = infer_schema


def infer_schema(fn, *args, **kwargs):
    """A schema string shaped like torch's: one Tensor per Tensor in the return annotation
    (vllm/ir/op.py checks the count against its activations)."""
    import inspect

    try:
        sig = inspect.signature(fn)
        ret = sig.return_annotation
    except (TypeError, ValueError):
        return "() -> ()"
    text = ret if isinstance(ret, str) else getattr(ret, "__name__", None) or repr(ret)
    if not isinstance(ret, str) and hasattr(ret, "__args__"):
        text = repr(ret)
    n = text.count("Tensor")
    params = ", ".join(f"Tensor {p}" for p in sig.parameters)
    if n == 0:
        out = "()"
    elif n == 1 and "tuple" not in text.lower():
        out = "Tensor"
    else:
        out = "(" + ", ".join(["Tensor"] * n) + ")"
    return f"({params}) -> {out}"


@specific("torch.version")
def _init_version(m):
    m.cuda, m.hip, m.xpu, m.__version__, m.git_version = "12.8", None, None, "2.11.0", ""


@specific("torch.cuda")
def _init_cuda(m):
    m.device_count = device_count
    m._is_compiled = lambda: True
    m._device_count_nvml = device_count
    m.is_available = lambda: True
    m.current_device = lambda: 0
    m.set_device = lambda *a, **k: None
    m.get_device_capability = lambda *a, **k: (9, 0)
    m.get_device_name = lambda *a, **k: "NVIDIA H100 80GB HBM3"


@specific("torch.accelerator")
def _init_accelerator(m):
    m.device_count = device_count
    m.is_available = lambda: True
    m.current_device_index = lambda: 0
    m.set_device_index = lambda *a, **k: None


@specific("torch.distributed")
def _init_distributed(m):
    m.init_process_group = init_process_group
    m.is_initialized = lambda: False
    m.is_available = lambda: True
    m.is_backend_available = lambda b: True
    m.is_gloo_available = lambda: True
    m.is_nccl_available = lambda: True
    m.FileStore, m.TCPStore = FileStore, TCPStore
    m.DistNetworkError, m.DistStoreError = DistNetworkError, DistStoreError
    m.DistError = RuntimeError
    m.ProcessGroup = _new_class("ProcessGroup", "torch.distributed")
    m.Store = _new_class("Store", "torch.distributed")
    m.Backend = _new_class("Backend", "torch.distributed")
    m.ReduceOp = _new_class("ReduceOp", "torch.distributed")
    m.default_pg_timeout = datetime.timedelta(seconds=1800)


class _PlainModule:
    """torch.nn.Module and friends as plain classes: vLLM mixes them with typing Protocols,
    whose metaclass a stand-in metaclass would conflict with."""

    def __init__(self, *args, **kwargs):
        pass

    def __init_subclass__(cls, **kwargs):
        pass

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return StandIn()

    def reset_parameters(self):
        pass

    def forward(self, *a, **k):
        return None


@specific("torch.nn")
def _init_nn(m):
    import importlib

    cache = {}

    def getattr_(name):
        if name in ("functional", "parameter", "init", "modules", "utils", "attention"):
            return importlib.import_module("torch.nn." + name)
        if name[:1].isupper():
            if name not in cache:
                cache[name] = type(name, (_PlainModule,), {"__module__": "torch.nn"})
            return cache[name]
        raise AttributeError(name)

    m.__getattr__ = getattr_
    m.Module = getattr_("Module")
    m.Parameter = getattr_("Parameter")


@specific("torch.nn.modules")
def _init_nn_modules(m):
    import importlib

    nn = importlib.import_module("torch.nn")
    m.__getattr__ = lambda name: getattr(nn, name) if name[:1].isupper() else importlib.import_module("torch.nn.modules." + name)
