"""Stand-ins for what vLLM imports but a planning run must not touch.

vLLM's launch code imports torch, transformers, zmq, ray, msgspec, uvloop, fastapi and friends
at module level. None of them decides a process's identity, and none is installed where widetp
runs, so this module makes them importable as stand-ins:

* a generic stand-in module (``_StandInModule``) for every root in ``GENERIC``: any attribute
  is a class that accepts any arguments, so decorators, base classes and type annotations at
  import time work and nothing they build is ever asked to do real work;
* behaving stand-ins where vLLM's launch code reads a value: ``torch`` (device counts from the
  simulated node's GPUs and CUDA_VISIBLE_DEVICES, ``torch.distributed.init_process_group``
  raising :class:`launch.Rendezvous` so a worker stops right at its torch rendezvous),
  ``msgspec`` (Struct as a plain record, msgpack encode/decode as pass-through),
  ``zmq`` (sockets that record binds and connects; the handshake sockets are wired in
  ``launch``);
* ``importlib.metadata.version`` answers for the stood-in packages, so vLLM's version checks
  (``is_torch_equal_or_newer``) pass;
* ``packaging`` comes from Debian's python3-packaging when the interpreter lacks it.
"""

import abc
import importlib.abc
import importlib.machinery
import importlib.metadata
import os
import sys
import types

# Roots stood in generically. Only these: a stand-in for a module vLLM imports inside
# try/except ImportError would silently switch vLLM onto another branch.
GENERIC = frozenset(
    """transformers ray numpy psutil cbor2 triton fastapi starlette huggingface_hub
    safetensors aiohttp openai_harmony openai PIL pybase64 cachetools cpuinfo tokenizers
    sentencepiece prometheus_client prometheus_fastapi_instrumentator uvicorn tqdm blake3
    gguf xgrammar llguidance lark partial_json_parser mistral_common tiktoken setproctitle
    einops numba compressed_tensors depyf watchfiles diskcache filelock lm_format_enforcer
    outlines_core opentelemetry tensorizer mooncake nixl lmcache py_cpuinfo cv2 scipy
    sse_starlette anthropic ijson mcp grpc model_hosting_container_standards pynvml amdsmi
    flashinfer quack deep_gemm deep_ep pplx_kernels torchvision torchaudio soundfile librosa
    av fastsafetensors runai_model_streamer bitsandbytes xformers cupy cuda nvtx
    pydantic_extra_types email_validator kaldi_native_fbank timm tilelang helion cutlass
    vllm_flash_attn tabulate humanize rich blobfile pycountry sentry_sdk httpx httptools
    websockets python_multipart multipart orjson_ openai_harmony_ jsonschema_ datasets peft
    apache_tvm_ffi tvm_ffi intel_extension_for_pytorch habana_frameworks neuronx_distributed
    torch_xla ninja grpc_health grpc_reflection smg_grpc_proto smg_grpc_servicer""".split()
)
# Roots with a behaving stand-in (modules below, built on the generic one).
SPECIFIC = frozenset({"torch", "zmq", "msgspec", "uvloop"})
# Versions importlib.metadata reports for stood-in packages.
VERSIONS = {"torch": "2.11.0", "transformers": "5.0.0", "triton": "3.6.0"}


class _StandInMeta(abc.ABCMeta):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _new_class(name, cls.__module__)

    def __getitem__(cls, item):
        return cls

    def __or__(cls, other):
        return cls

    def __ror__(cls, other):
        return cls

    def __call__(cls, *args, **kwargs):
        # Used as a decorator: @stub or @stub(...) returns the function unchanged.
        if len(args) == 1 and not kwargs and callable(args[0]) and not isinstance(args[0], StandIn):
            return args[0]
        return type.__call__(cls, *args, **kwargs)

    def __instancecheck__(cls, obj):
        return type.__instancecheck__(cls, obj)

    def __subclasscheck__(cls, sub):
        return type.__subclasscheck__(cls, sub)


class StandIn(metaclass=_StandInMeta):
    """Anything a stood-in module hands out: callable, indexable, falsy, iterable as empty."""

    def __init__(self, *args, **kwargs):
        pass

    def __init_subclass__(cls, **kwargs):
        pass

    @classmethod
    def __get_pydantic_core_schema__(cls, source, handler):
        from pydantic_core import core_schema

        return core_schema.any_schema()

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]):
            return args[0]
        return StandIn()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return StandIn()

    def __getitem__(self, item):
        return StandIn()

    def __iter__(self):
        return iter(())

    def __bool__(self):
        return False

    def __or__(self, other):
        return other

    def __ror__(self, other):
        return other

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __int__(self):
        return 0

    def __float__(self):
        return 1.0

    # Arithmetic on a stood-in value (module-level constants such as torch.finfo(...).max):
    # a plain number, so the expression evaluates; nothing reads the result for identity.
    def _num(self, *other):
        return 1.0

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _num
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __pow__ = __rpow__ = _num
    __neg__ = __pos__ = __abs__ = _num

    def __lt__(self, other):
        return False

    __le__ = __gt__ = __ge__ = __lt__

    def __hash__(self):
        return id(self)

    def __eq__(self, other):
        return self is other

    def __index__(self):
        return 0


def _new_class(name, module):
    return _StandInMeta(name, (StandIn,), {"__module__": module})


class _StandInModule(types.ModuleType):
    def __init__(self, name):
        super().__init__(name)
        self.__path__ = []
        self.__file__ = f"<widetp stand-in {name}>"
        self.__version__ = VERSIONS.get(name.split(".")[0], "99.0.0")

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        v = _new_class(name, self.__name__)
        setattr(self, name, v)
        return v


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        root = name.split(".")[0]
        if root in GENERIC or root in SPECIFIC or _is_vllm_extension(name):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        return _StandInModule(spec.name)

    def exec_module(self, module):
        init = _SPECIFIC_INIT.get(module.__name__)
        if init is not None:
            init(module)


_SPECIFIC_INIT = {}


def _is_vllm_extension(name):
    """vLLM's compiled kernels (vllm._C, vllm._moe_C, vllm._C_stable_libtorch, ...): a source
    tree has none, and planning runs no kernel."""
    parts = name.split(".")
    return len(parts) >= 2 and parts[0] == "vllm" and parts[-1].startswith("_") and "_C" in parts[-1]


def specific(name):
    def register(fn):
        _SPECIFIC_INIT[name] = fn
        return fn

    return register


def install():
    """Makes the stand-ins importable. Call once, before importing vLLM."""
    _ensure_packaging()
    sys.meta_path.insert(0, _Finder())
    real_version = importlib.metadata.version

    def version(name):
        root = name.split(".")[0].replace("-", "_").lower()
        if root in GENERIC or root in SPECIFIC:
            return VERSIONS.get(root, "99.0.0")
        return real_version(name)

    importlib.metadata.version = version
    from . import torch_standin, zmq_standin, msgspec_standin  # noqa: F401  registers inits


@specific("uvloop")
def _init_uvloop(m):
    import asyncio

    m.run = asyncio.run
    m.install = lambda: None
    m.new_event_loop = asyncio.new_event_loop
    m.EventLoopPolicy = asyncio.DefaultEventLoopPolicy


def _ensure_packaging():
    try:
        import packaging.version  # noqa: F401
        return
    except ImportError:
        pass
    debian = "/usr/lib/python3/dist-packages"
    if not os.path.isdir(os.path.join(debian, "packaging")):
        raise ImportError("the Python package 'packaging' is missing (Debian: apt-get install python3-packaging)")
    sys.path.append(debian)
    try:
        import packaging.version  # noqa: F401
        import packaging.specifiers  # noqa: F401
        import packaging.requirements  # noqa: F401
    finally:
        sys.path.remove(debian)
