"""The options of vLLM's `vllm serve` parser, described for widetp's Go flag catalog.

The `flags` op (`go run ./vllm/internal/genflags`, `make flags`) builds the parser as vLLM's CLI does
(vllm/entrypoints/cli/serve.py ServeSubcommand.subparser_init over
vllm/entrypoints/openai/cli_args.py make_arg_parser and vllm/engine/arg_utils.py
EngineArgs.add_cli_args) and reports, for every option: its spellings in the parser's order, how
argparse consumes it (action, nargs), what its type= accepts, and its choices. A type this module
does not know is an error naming the option, so a vLLM that adds one cannot pass unnoticed. The
same for the parser `python -m vllm.entrypoints.grpc_server` builds in its main()
(grpc_server_parser).
"""

import argparse
import dataclasses
import json


def _unwrap(fn):
    """Strips vllm/engine/arg_utils.py's optional_type / parse_type wrappers: (inner, nullable,
    wrapped)."""
    nullable = wrapped = False
    while callable(fn) and getattr(fn, "__name__", "") in ("_optional_type", "_parse_type") \
            and getattr(fn, "__closure__", None):
        nullable = nullable or fn.__name__ == "_optional_type"
        wrapped = True
        inner = [c.cell_contents for c in fn.__closure__ if callable(c.cell_contents)]
        if len(inner) != 1:
            raise ValueError(f"{fn!r} wraps {len(inner)} callables")
        fn = inner[0]
    return fn, nullable, wrapped


def _value_type(opt, fn):
    """Names what an option's type= accepts, as the Go catalog's kinds do."""
    if fn is None or fn is str:
        return "string"
    name = getattr(fn, "__name__", "")
    if fn is int:
        return "int"
    if fn is float:
        return "float"
    if name == "human_readable_int":
        return "human_int"
    if name == "human_readable_int_or_auto":
        return "human_int_or_auto"
    if name == "parse_dataclass":
        return "dataclass"  # JSON with human-readable numbers expanded, then pydantic
    if fn is json.loads:
        return "json"
    if name == "union_dict_and_str":
        return "json_or_string"  # JSON when it looks like an object, else the string
    if name == "<lambda>":
        # Lambdas in arg_utils normalise a backend name, or split a device list: tell them
        # apart by what they do.
        try:
            out = fn("Ab-C")
        except Exception:  # noqa: BLE001
            out = None
        if out == "ab_c":
            return "string_lower_underscore"
        if isinstance(out, list):
            return "string"
    raise ValueError(f"option {opt}: type {fn!r} is not one the catalog knows")


def _dataclass_fields(fn):
    """The config class a parse_dataclass option reads and, when pydantic refuses keys the
    class does not have, the keys it accepts (its init fields)."""
    cls = (fn.__defaults__ or (None,))[0]
    if cls is None or not dataclasses.is_dataclass(cls):
        raise ValueError(f"parse_dataclass {fn!r} has no dataclass")
    out = {"class": cls.__name__}
    try:
        fn(json.dumps({"widetp_no_such_field": 1}))
    except argparse.ArgumentTypeError:
        out["fields"] = sorted(f.name for f in dataclasses.fields(cls) if f.init)
    from pydantic import TypeAdapter

    out["schema"] = json.dumps(_compact(TypeAdapter(cls).core_schema), sort_keys=True, separators=(",", ":"))
    return out


_BOUNDS = ("ge", "gt", "le", "lt")


def _plain(v):
    """A literal or enum value as JSON has it, or None when JSON has no such value; a tuple (an
    enum member's value no JSON value equals, which pydantic still lists) as {"tuple": [...]}."""
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if isinstance(v, tuple):
        return {"tuple": [_plain(x) for x in v]}
    raise TypeError(v)


def _compact(cs):
    """The part of a pydantic core schema the model checks a config's JSON against (the Go
    package vllm, configschema.go): the types and bounds of its fields, in lax mode. A validator
    function that runs before a field is "before", with the function's name and the field's type;
    one that runs around it (it may accept anything), a reference and any kind not listed here are
    "any"; an after-validator is its inner schema (what it raises is not checked)."""
    t = cs.get("type")
    if t in ("default", "function-after", "definitions"):
        return _compact(cs["schema"])
    if t == "function-before":
        # A validator the class runs on a field's value before its type: named by its qualified
        # name, so the model runs its own version of the ones it knows (configschema.go
        # beforeValidators) and takes any value where it does not.
        fn = getattr((cs.get("function") or {}).get("function"), "__qualname__", "")
        return {"t": "before", "fn": fn, "s": _compact(cs["schema"])}
    if t == "function-wrap" and getattr((cs.get("function") or {}).get("function"), "__name__", "") == "_skip_none_validation":
        # vLLM's configs (vllm/config/compilation.py, kernel.py) skip a field's validation for
        # None and validate anything else as its type.
        return {"t": "nullable", "s": _compact(cs["schema"])}
    if t == "lax-or-strict":
        return _compact(cs["lax_schema"])
    if t == "nullable":
        return {"t": "nullable", "s": _compact(cs["schema"])}
    if t == "dataclass":
        inner = _compact(cs["schema"])
        if inner["t"] == "dc" and (cs.get("config") or {}).get("extra_fields_behavior") == "forbid":
            inner["forbid"] = True  # extra="forbid" in the class's config
        return inner
    if t == "dataclass-args":
        fields = []
        for f in cs["fields"]:
            if f.get("init") is False or f.get("init_only"):
                continue
            fields.append({"n": f["name"], "s": _compact(f["schema"]), "req": f["schema"].get("type") != "default"})
        # Unknown keys are ignored unless the class forbids them (its config, on the dataclass
        # schema around this one, or here).
        return {"t": "dc", "f": fields, "forbid": cs.get("extra_behavior") == "forbid"}
    if t in ("int", "float"):
        out = {"t": t}
        for b in _BOUNDS:
            if b in cs:
                out[b] = cs[b]
        if cs.get("strict") or "multiple_of" in cs or cs.get("allow_inf_nan") is False:
            return {"t": "any"}
        return out
    if t == "bool":
        return {"t": "any"} if cs.get("strict") else {"t": "bool"}
    if t == "str":
        if cs.get("strict") or "pattern" in cs or "min_length" in cs or "max_length" in cs:
            return {"t": "any"}
        return {"t": "str"}
    if t in ("list", "set", "frozenset"):
        if "min_length" in cs or "max_length" in cs:
            return {"t": "any"}
        return {"t": "list", "s": _compact(cs.get("items_schema") or {"type": "any"})}
    if t == "dict":
        return {"t": "dict", "k": _compact(cs.get("keys_schema") or {"type": "any"}),
                "s": _compact(cs.get("values_schema") or {"type": "any"})}
    if t == "union":
        choices = [c[0] if isinstance(c, tuple) else c for c in cs["choices"]]
        return {"t": "union", "c": [_compact(c) for c in choices]}
    try:
        if t == "literal":
            return {"t": "literal", "v": [_plain(v) for v in cs["expected"]]}
        if t == "enum":
            # names: every name the class answers to (__members__, aliases too), in order, as a
            # validator's Enum[name] lookup and its error list them.
            return {"t": "enum", "sub": cs.get("sub_type") or "any", "v": [_plain(m.value) for m in cs["members"]],
                    "names": list(cs["cls"].__members__)}
    except TypeError:
        return {"t": "any"}
    return {"t": "any"}


def _action(a):
    if isinstance(a, argparse.BooleanOptionalAction):
        return "bool"
    if isinstance(a, argparse._StoreTrueAction):
        return "store_true"
    if isinstance(a, argparse._HelpAction):
        return "help"
    if isinstance(a, argparse._AppendAction):
        return "append"
    if isinstance(a, argparse._StoreAction):
        return "store"
    # cli_args.LoRAParserAction reads `name=path` or a JSON object per value.
    if type(a).__name__ == "LoRAParserAction":
        return "lora_modules"
    raise ValueError(f"option {a.option_strings}: action {type(a).__name__} is not one the catalog knows")


class _Built(BaseException):
    """grpc_server.main() reached parse_args: the parser it built."""

    def __init__(self, parser):
        super().__init__()
        self.parser = parser


def grpc_server_parser():
    """The parser vllm/entrypoints/grpc_server.py main() builds (it parses sys.argv and starts the
    server in the same function): main() runs up to its parse_args, which hands the parser back."""
    import sys
    import vllm.entrypoints.grpc_server as gs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    real = FlexibleArgumentParser.parse_args

    def parse_args(self, args=None, namespace=None):
        raise _Built(self)

    old_argv = sys.argv
    sys.argv = [gs.__file__]
    FlexibleArgumentParser.parse_args = parse_args
    try:
        gs.main()
    except _Built as b:
        return b.parser
    finally:
        FlexibleArgumentParser.parse_args = real
        sys.argv = old_argv
    raise RuntimeError("vllm.entrypoints.grpc_server main() returned without parsing its arguments")


def serve_options(entrypoint="serve"):
    """The options of the entrypoint's parser (`vllm serve`, or grpc_server's), in its order."""
    from vllm.utils.argparse_utils import FlexibleArgumentParser
    import vllm.entrypoints.cli.serve as serve

    if entrypoint == "grpc_server":
        sp = grpc_server_parser()
    else:
        parser = FlexibleArgumentParser(prog="vllm", description="vLLM CLI")
        sub = parser.add_subparsers(required=False, dest="subparser")
        sp = serve.ServeSubcommand().subparser_init(sub)
    out = []
    for a in sp._actions:
        if not a.option_strings:
            continue
        names = list(a.option_strings)
        if isinstance(a, argparse.BooleanOptionalAction):
            names = [n for n in names if not n.startswith("--no-")]
        opt = {"names": names, "action": _action(a)}
        if opt["action"] in ("store", "append", "lora_modules"):
            fn, nullable, wrapped = _unwrap(a.type)
            opt["type"] = _value_type(names[0], fn)
            opt["nullable"] = nullable
            opt["wrapped"] = wrapped
            opt["nargs"] = a.nargs if isinstance(a.nargs, str) else ("" if a.nargs is None else str(a.nargs))
            if opt["type"] == "dataclass":
                opt.update(_dataclass_fields(fn))
        if a.choices is not None:
            # repr(): argparse compares the converted value (None, an int, a str) with them and
            # prints them so in its error.
            opt["choices"] = [repr(c) for c in a.choices]
        out.append(opt)
    return out


def parse(argv, entrypoint):
    """Runs vLLM's parser on argv (the words after `vllm serve`, or after the OpenAI entrypoint's
    module), as the process would: {"exit": None} when it parses, else argparse's exit status and
    the error it printed, from its "<prog>: error:" line on, or the exception it raised."""
    import contextlib
    import io
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    if entrypoint == "api_server":
        from vllm.entrypoints.openai.cli_args import make_arg_parser

        parser = make_arg_parser(FlexibleArgumentParser(prog="api_server.py"))
        words = list(argv)
    elif entrypoint == "grpc_server":
        # main()'s own parser; its program name is the module file's, as python -m gives it.
        parser = grpc_server_parser()
        words = list(argv)
    else:
        import vllm.entrypoints.cli.serve as serve

        parser = FlexibleArgumentParser(prog="vllm", description="vLLM CLI")
        sub = parser.add_subparsers(required=False, dest="subparser")
        serve.ServeSubcommand().subparser_init(sub)
        words = ["serve"] + list(argv)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            parser.parse_args(words)
    except SystemExit as e:
        lines = err.getvalue().splitlines()
        start = max((i for i, ln in enumerate(lines) if ": error: " in ln), default=len(lines))
        return {"exit": e.code, "message": "\n".join(lines[start:]).strip()}
    except Exception as e:  # noqa: BLE001 - the parser raised instead of exiting (--config)
        return {"exit": None, "raised": f"{type(e).__name__}: {e}"}
    return {"exit": None, "message": ""}
