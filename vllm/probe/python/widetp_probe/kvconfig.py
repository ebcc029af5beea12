"""VllmConfig's validation of its command-line fields, then the KV connector part of
VllmConfig.__post_init__, which the probe's cut at ParallelConfig would otherwise skip
(vllm/config/vllm.py): vLLM's own ``_post_init_kv_transfer_config``
(--kv-offloading-size makes a connector), the hybrid KV cache manager block's
``KVConnectorFactory.supports_hma_config`` (it loads the connector's class: an unknown name, an
empty module path or a MultiConnector child that does not validate fails the front end), and
``_verify_kv_transfer_compat``, and before them the CUDA graph check (with full graphs, the
connector's class is resolved and asked whether it needs piecewise graphs). Only the connector
classes are stood in: each registered class is
read from its module's source instead of imported (those modules import the connector's own
packages), as a class that subclasses SupportsHMA exactly when the real one does; a class from
kv_connector_module_path is taken to import and to lack SupportsHMA (the model's assumption).
MultiConnector is the real class: building it validates its children.
"""

import ast
import importlib
import inspect
import os
import types

from .standins import StandIn

_HMA_CACHE = {}


def _module_file(vllm_root, module):
    parts = module.split(".")
    if parts[0] != "vllm":
        return None
    base = os.path.join(vllm_root, *parts[1:])
    if os.path.isfile(base + ".py"):
        return base + ".py"
    init = os.path.join(base, "__init__.py")
    return init if os.path.isfile(init) else None


def _resolve_relative(module, level, target, is_package):
    if level == 0:
        return target
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    return ".".join(parts + ([target] if target else []))


def _find_class(vllm_root, module, name, depth=0):
    """The class statement that binds ``name`` in ``module``, and the module that holds it,
    following the module's plain aliases (X = Y) and from-imports; None when ``name`` is bound
    any other way (a call), or not found."""
    path = _module_file(vllm_root, module)
    if path is None or depth > 8:
        return None
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    is_package = path.endswith("__init__.py")
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return module, node, path
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            if isinstance(node.value, ast.Name):
                return _find_class(vllm_root, module, node.value.id, depth + 1)
            return None
        if isinstance(node, ast.ImportFrom):
            hit = [a for a in node.names if (a.asname or a.name) == name]
            if hit:
                src = _resolve_relative(module, node.level, node.module, is_package)
                return _find_class(vllm_root, src, hit[0].name, depth + 1)
    return None


def _supports_hma(vllm_root, module, name, depth=0):
    """Whether class ``name`` of ``module`` subclasses SupportsHMA, and the class's own name (its
    __name__), following its class statement's bases (_find_class); a name bound any other way
    is taken not to, under its own name."""
    key = (module, name)
    if key in _HMA_CACHE:
        return _HMA_CACHE[key]
    if name == "SupportsHMA":
        return True, name
    result = (False, name)
    found = _find_class(vllm_root, module, name) if depth <= 8 else None
    if found is not None:
        where, cls, _ = found
        # SupportsHMA itself, reached under another name (an alias, an import as).
        hma = cls.name == "SupportsHMA" or any(
            isinstance(b, ast.Name) and _supports_hma(vllm_root, where, b.id, depth + 1)[0] for b in cls.bases)
        result = (hma, cls.name)
    _HMA_CACHE[key] = result
    return result


def _stand_in_registry():
    """KVConnectorFactory's registry with source-read stand-in classes (done once)."""
    from vllm.distributed.kv_transfer.kv_connector import factory

    try:
        from vllm.distributed.kv_transfer.kv_connector.v1.base import SupportsHMA
    except ImportError:
        return  # a vLLM before HMA: nothing asks a class whether it supports it
    import vllm

    registry = factory.KVConnectorFactory._registry
    if getattr(factory.KVConnectorFactory, "_widetp_stood_in", False):
        return
    vllm_root = os.path.dirname(os.path.abspath(vllm.__file__))
    for name, loader in list(registry.items()):
        free = dict(zip(loader.__code__.co_freevars, (c.cell_contents for c in loader.__closure__ or ())))
        module_path, class_name = free.get("module_path"), free.get("class_name")
        if module_path is None or class_name is None:
            continue
        if class_name == "MultiConnector":
            # Its constructor is config code, not a transfer engine: it turns each child of
            # kv_connector_extra_config['connectors'] into a KVTransferConfig and builds it from
            # this registry. The real class runs; its children are the stand-ins.
            registry[name] = lambda m=module_path, c=class_name: getattr(importlib.import_module(m), c)
            continue
        # Read when asked for, as the real loader imports when asked for.
        registry[name] = lambda m=module_path, c=class_name: _connector_class(
            *reversed(_supports_hma(vllm_root, m, c)), SupportsHMA, _piecewise_method(vllm_root, m, c))

    def import_module(path):
        # A connector of kv_connector_module_path: importable, its class without SupportsHMA,
        # and without an answer of its own about CUDA graphs (the base class's).
        mod = types.ModuleType(path)
        mod.__getattr__ = lambda attr: _connector_class(attr, False, SupportsHMA, _piecewise_method(vllm_root, _BASE_MODULE, _BASE_CLASS))
        return mod

    factory.importlib = types.SimpleNamespace(import_module=import_module)
    factory.KVConnectorFactory._widetp_stood_in = True


def _connector_class(name, hma, supports_hma, piecewise=None):
    def __init__(self, vllm_config, role, kv_cache_config):
        pass

    ns = {"__init__": __init__}
    if piecewise is not None:
        ns["requires_piecewise_for_cudagraph"] = piecewise
    if hma:
        # SupportsHMA is an ABC: the stand-in implements its abstract methods as no-ops.
        for m in getattr(supports_hma, "__abstractmethods__", ()):
            ns[m] = lambda self, *a, **k: None
    return type(name, (supports_hma,) if hma else (object,), ns)


_BASE_MODULE = "vllm.distributed.kv_transfer.kv_connector.v1.base"
_BASE_CLASS = "KVConnectorBase_V1"
_PIECEWISE = "requires_piecewise_for_cudagraph"


def _piecewise_method(vllm_root, module, name, depth=0):
    """The class's own requires_piecewise_for_cudagraph, compiled from its source (the class
    statement's method, or the first base class's that has one, as _supports_hma follows them),
    run as vLLM's classmethod; None when the chain has none."""
    found = _find_class(vllm_root, module, name) if depth <= 8 else None
    if found is None:
        return None
    where, cls, path = found
    for item in cls.body:
        if isinstance(item, ast.FunctionDef) and item.name == _PIECEWISE:
            # The method as written, without its decorator and annotations (names of the module
            # the stand-in does not import).
            for a in item.args.posonlyargs + item.args.args + item.args.kwonlyargs:
                a.annotation = None
            fn = ast.FunctionDef(name=item.name, args=item.args, body=item.body, decorator_list=[],
                                 returns=None, type_comment=None)
            code = ast.Module(body=[ast.fix_missing_locations(ast.copy_location(fn, item))], type_ignores=[])
            ns = {}
            exec(compile(code, path, "exec"), {}, ns)
            return classmethod(ns[_PIECEWISE])
    for b in cls.bases:
        if isinstance(b, ast.Name):
            method = _piecewise_method(vllm_root, where, b.id, depth + 1)
            if method is not None:
                return method
    return None


def _full_cudagraphs(engine_args):
    """Whether VllmConfig.__post_init__ reaches its KV connector check with a CUDA graph mode that
    captures full graphs, on CUDA (vllm/config/vllm.py, in its order): --enforce-eager sets the
    compilation mode and the graph mode to NONE, TORCH_COMPILE_DISABLE=1 and breakable graphs the
    compilation mode; an unset compilation mode is VLLM_COMPILE above O0; an unset graph mode is
    the optimization level's default (OPTIMIZATION_LEVEL_TO_CONFIG); a graph mode that needs
    piecewise compilation without VLLM_COMPILE (nor breakable graphs) is NONE. vLLM's own enums,
    defaults and environment readers; the order is the stand-in's, as for the HMA block (the model
    follows the same, vllm/vllmconfig.go fullCUDAGraphs). The pooling, encoder-decoder,
    per-architecture and dynamic speculative decoding overrides need a real model config."""
    from pydantic import TypeAdapter

    from vllm import envs
    from vllm.config.compilation import CompilationMode, CUDAGraphMode

    try:
        from vllm.config.vllm import OPTIMIZATION_LEVEL_TO_CONFIG, OptimizationLevel
    except ImportError:
        return False  # a vLLM before optimization levels: not this check's
    cc = engine_args.compilation_config
    mode, graphs = cc.mode, cc.cudagraph_mode
    if engine_args.enforce_eager:
        mode, graphs = CompilationMode.NONE, CUDAGraphMode.NONE
    breakable = bool(getattr(envs, "VLLM_USE_BREAKABLE_CUDAGRAPH", False))
    if os.environ.get("TORCH_COMPILE_DISABLE") == "1" or breakable:
        mode = CompilationMode.NONE
    try:
        level = TypeAdapter(OptimizationLevel).validate_python(engine_args.optimization_level)
    except Exception:  # noqa: BLE001 (VllmConfig refuses it: not modelled)
        level = OptimizationLevel.O2
    if mode is None:
        mode = CompilationMode.VLLM_COMPILE if level > OptimizationLevel.O0 else CompilationMode.NONE
    if graphs is None:
        graphs = OPTIMIZATION_LEVEL_TO_CONFIG[level]["compilation_config"]["cudagraph_mode"]
    if graphs.requires_piecewise_compilation() and mode != CompilationMode.VLLM_COMPILE and not breakable:
        graphs = CUDAGraphMode.NONE
    return graphs.has_full_cudagraphs()


def _cudagraph_block(cfg, engine_args):
    """VllmConfig.__post_init__'s KV connector check for full CUDA graphs: vLLM's own
    get_connector_class and the class's requires_piecewise_for_cudagraph (MultiConnector's real
    one, which builds and resolves its children; the others' compiled from their source)."""
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory

    kv = cfg.kv_transfer_config
    if kv is None or not kv.is_kv_transfer_instance or not _full_cudagraphs(engine_args):
        return
    cls = KVConnectorFactory.get_connector_class(kv)
    ask = getattr(cls, _PIECEWISE, None)
    if ask is not None:
        ask(kv.kv_connector_extra_config)


def _vllm_config_fields(engine_args):
    """VllmConfig(...)'s pydantic validation of the fields create_engine_config passes straight
    from the command line (the others are configs vLLM built): vLLM's own field definitions
    (optimization_level an OptimizationLevel, shutdown_timeout ge=0), validated as VllmConfig
    validates them, before its __post_init__."""
    from pydantic import ConfigDict, create_model

    from vllm.config.vllm import VllmConfig

    fields = getattr(VllmConfig, "__pydantic_fields__", None) or {}
    names = [n for n in ("optimization_level", "shutdown_timeout") if n in fields and hasattr(engine_args, n)]
    if not names:
        return
    model = create_model("VllmConfig", __config__=ConfigDict(arbitrary_types_allowed=True),
                         **{n: (fields[n].annotation, fields[n]) for n in names})
    model(**{n: getattr(engine_args, n) for n in names})


def post_init(cfg, engine_args):
    """Run the KV connector part of VllmConfig.__post_init__ on the probe's config stand-in. A
    vLLM without a step (an older one) skips it, as its own __post_init__ would."""
    from vllm.config.vllm import VllmConfig
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory

    _vllm_config_fields(engine_args)
    _stand_in_registry()
    cfg.cache_config = StandIn()
    cfg.cache_config.kv_offloading_size = getattr(engine_args, "kv_offloading_size", None)
    cfg.cache_config.kv_offloading_backend = getattr(engine_args, "kv_offloading_backend", "native")
    if _PIECEWISE in inspect.getsource(VllmConfig.__post_init__):
        _cudagraph_block(cfg, engine_args)  # a vLLM whose __post_init__ has the check
    step = getattr(VllmConfig, "_post_init_kv_transfer_config", None)
    if step is not None:
        step(cfg)
    # The HMA block: with no preference, a connector whose class lacks SupportsHMA turns the
    # manager off (CUDA supports it, and the stood-in model has no chunked local attention).
    disable = getattr(engine_args, "disable_hybrid_kv_cache_manager", None)
    supports = getattr(KVConnectorFactory, "supports_hma_config", None)
    if disable is None and cfg.kv_transfer_config is not None and supports is not None:
        if not supports(cfg.kv_transfer_config):
            disable = True
    cfg.scheduler_config = StandIn()
    cfg.scheduler_config.disable_hybrid_kv_cache_manager = bool(disable)
    step = getattr(VllmConfig, "_verify_kv_transfer_compat", None)
    if step is not None:
        step(cfg)


def create_connector(cfg, role):
    """KVConnectorFactory.create_connector as ensure_kv_transfer_initialized calls it in a worker
    (role WORKER) and the Scheduler in an engine core (SCHEDULER): the class
    (get_connector_class) and the HMA check run for real; the class built is the stand-in, or
    MultiConnector's own. Only for a factory with the HMA check (older ones build with another
    signature)."""
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
    from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole

    if getattr(KVConnectorFactory, "supports_hma_config", None) is None:
        return
    _stand_in_registry()
    KVConnectorFactory.create_connector(config=cfg, role=getattr(KVConnectorRole, role), kv_cache_config=None)


def _stand_in_ec_registry():
    """ECConnectorFactory's registry with stand-in classes (their modules import torch): the
    factory's own get_connector_class and create_connector run; a class of
    ec_connector_module_path imports (as the model takes it), an empty path fails importlib's
    own way."""
    try:
        from vllm.distributed.ec_transfer.ec_connector import factory
    except ImportError:
        return False  # a vLLM before EC transfer
    if getattr(factory.ECConnectorFactory, "_widetp_stood_in", False):
        return True

    def ec_class(name):
        return type(name, (object,), {"__init__": lambda self, vllm_config, role: None})

    registry = factory.ECConnectorFactory._registry
    for name in list(registry):
        registry[name] = lambda n=name: ec_class(n)
    real_import = importlib.import_module

    def import_module(path):
        if not path:
            return real_import(path)
        mod = types.ModuleType(path)
        mod.__getattr__ = ec_class
        return mod

    factory.importlib = types.SimpleNamespace(import_module=import_module)
    factory.ECConnectorFactory._widetp_stood_in = True
    return True


def ec_connector(cfg, role):
    """The EC connector a worker (ensure_ec_transfer_initialized, a transfer instance only) or a
    Scheduler (create_connector, for any --ec-transfer-config) builds, with vLLM's own code and
    stand-in classes."""
    ec = getattr(cfg, "ec_transfer_config", None) if cfg is not None else None
    if ec is None or not _stand_in_ec_registry():
        return
    if role == "WORKER":
        from vllm.distributed.ec_transfer import ec_transfer_state

        ec_transfer_state.ensure_ec_transfer_initialized(cfg)
        return
    from vllm.distributed.ec_transfer.ec_connector.base import ECConnectorRole
    from vllm.distributed.ec_transfer.ec_connector.factory import ECConnectorFactory

    ECConnectorFactory.create_connector(config=cfg, role=ECConnectorRole.SCHEDULER)
