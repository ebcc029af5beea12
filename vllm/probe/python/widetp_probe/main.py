"""widetp's vLLM probe: plans deployments with vLLM's own launch code.

Protocol: one JSON request per line on stdin, one JSON response per line on stdout.
  {"op": "hello"}                        -> {"ok": true, "source": {...}}
  {"op": "plan", "deployment": {...}}    -> {"ok": true, "nodes": [NodePlan, ...]}
  {"op": "flags", "entrypoint": "serve"} -> {"ok": true, "flags": [Option, ...]} (flags.py; "grpc_server"
                                            for python -m vllm.entrypoints.grpc_server's parser)
  {"op": "parse", "lines": [{"argv": [...], "entrypoint": "serve"}, ...]}
                                         -> {"ok": true, "parse": [{"exit": null|N, "message": "..."}, ...]}
Every request is planned in a fork of this process (vLLM's module state stays as imported).
Anything vLLM prints goes to stderr.
"""

import hashlib
import json
import os
import subprocess
import sys
import traceback


def _boot(vllm_path):
    if vllm_path:
        sys.path.insert(0, vllm_path)
    from . import standins

    standins.install()
    import vllm  # noqa: F401
    import vllm.platforms
    import vllm.platforms.cuda

    # The GPU platform is stood in: a CUDA node (its device count is the node's GPUs). Set before
    # any module binds current_platform at import.
    vllm.platforms._current_platform = vllm.platforms.cuda.CudaPlatform()
    import vllm.entrypoints.cli.serve  # noqa: F401
    import vllm.entrypoints.openai.api_server  # noqa: F401
    import vllm.v1.engine.core  # noqa: F401
    import vllm.v1.engine.async_llm  # noqa: F401
    import vllm.v1.engine.utils  # noqa: F401
    import vllm.v1.executor.multiproc_executor  # noqa: F401
    import vllm.v1.executor.uniproc_executor  # noqa: F401
    import vllm.v1.worker.gpu_worker  # noqa: F401
    import vllm.distributed.kv_transfer.kv_transfer_state  # noqa: F401
    import vllm.distributed.kv_transfer.kv_connector.v1.mooncake.store.worker  # noqa: F401
    import vllm.distributed.kv_transfer.kv_connector.v1.mooncake.rdma_utils  # noqa: F401
    import gc

    # Every simulated process is a fork of this one: keep the collector off the imported objects
    # so the forks do not copy the pages it would touch.
    gc.collect()
    gc.freeze()


def source_info():
    import vllm
    import vllm.version

    root = os.path.dirname(os.path.abspath(vllm.__file__))
    commit = ""
    try:
        out = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        if out.returncode == 0:
            commit = out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    version = getattr(vllm.version, "__version__", "dev")
    if not commit and "+g" in version:
        commit = version.split("+g", 1)[1].split(".", 1)[0]
    h = hashlib.sha256()
    files = sorted({m.__file__ for m in list(sys.modules.values())
                    if getattr(m, "__file__", None) and os.path.abspath(m.__file__).startswith(root)})
    for f in files:
        h.update(os.path.relpath(f, root).encode())
        with open(f, "rb") as fh:
            h.update(fh.read())
    # What the launch code reads of its own installation (vllm/envs.py _resolve_rust_cli_path):
    # the package directory and whether the Rust front end's binary is there.
    rust = os.path.join(root, "vllm-rs")
    install = {"package_dir": root}
    if not (os.path.isfile(rust) and os.access(rust, os.X_OK)):
        install["no_rust_frontend"] = True
    # Where validate_chat_template looks up a --chat-template that names no file.
    try:
        install["chat_templates"] = sorted(os.listdir(os.path.join(root, "transformers_utils", "chat_templates")))
    except OSError:
        install["chat_templates"] = []
    return {"name": "vllm", "version": version, "commit": commit, "path": os.path.dirname(root), "install": install,
            "launch_code_sha256": h.hexdigest(), "files": len(files),
            "python": sys.version.split()[0]}


def plan(dep):
    from . import conventions, launch, assemble

    conventions.SEED = dep.get("seed", "")
    model = dep["model"]
    try:
        launch.patch_vllm(model)
    except (AttributeError, ImportError) as e:
        # A cut point names a vLLM function this vLLM does not have (renamed or moved): say so
        # rather than plan with vLLM's code only partly in the loop.
        raise RuntimeError(f"the probe's cut points do not fit this vLLM's launch code: {type(e).__name__}: {e}") from e
    tops = []  # (node index, command index, record)
    for ni, node in enumerate(dep["nodes"]):
        for ci, cmd in enumerate(node.get("commands") or []):
            if "error" in cmd:
                tops.append((ni, ci, None))
                continue
            tops.append((ni, ci, launch.run_command(node, ci, cmd, model)))
    # Second pass: front ends whose handshake remote engines dial hear their HELLO messages.
    feeds = assemble.remote_feeds([t[2] for t in tops if t[2] is not None])
    for i, (ni, ci, rec) in enumerate(tops):
        if rec is None:
            continue
        mine = {fid: msgs for fid, msgs in feeds.items() if assemble.in_tree(rec, fid)}
        if not mine:
            continue
        launch.REMOTE_FEED = mine
        tops[i] = (ni, ci, launch.run_command(dep["nodes"][ni], ci, dep["nodes"][ni]["commands"][ci], model))
        launch.REMOTE_FEED = {}
    return assemble.node_plans(dep, tops)


def _flags(entrypoint):
    from . import flags

    return flags.serve_options(entrypoint)


def _parse(argv, entrypoint):
    from . import flags

    return flags.parse(argv, entrypoint)


def _in_fork(fn):
    r, w = os.pipe()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            out = {"ok": True, "result": fn()}
        except BaseException:  # noqa: BLE001
            out = {"ok": False, "error": traceback.format_exc()}
        data = json.dumps(out, default=repr).encode()
        view = memoryview(data)
        while view:
            view = view[os.write(w, view):]
        os.close(w)
        os._exit(0)
    os.close(w)
    chunks = []
    while True:
        b = os.read(r, 1 << 16)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    if not chunks:
        return {"ok": False, "error": f"planning process died (wait status {status})"}
    return json.loads(b"".join(chunks))


def serve(vllm_path, out):
    try:
        _boot(vllm_path)
    except BaseException:  # noqa: BLE001
        out.write(json.dumps({"ok": False, "fatal": True, "error": "import vLLM: " + traceback.format_exc()}) + "\n")
        out.flush()
        return 3
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            req = json.loads(line)
        except ValueError as e:
            resp = {"ok": False, "error": f"bad request: {e}"}
        else:
            op = req.get("op")
            if op == "hello":
                resp = {"ok": True, "source": source_info()}
            elif op == "flags":
                r = _in_fork(lambda: _flags(req.get("entrypoint", "serve")))
                resp = {"ok": r["ok"], "flags": r.get("result"), "error": r.get("error", "")}
            elif op == "parse":
                r = _in_fork(lambda: [_parse(ln.get("argv") or [], ln.get("entrypoint", "serve"))
                                      for ln in req.get("lines") or []])
                resp = {"ok": r["ok"], "parse": r.get("result"), "error": r.get("error", "")}
            elif op == "plan":
                r = _in_fork(lambda: plan(req["deployment"]))
                resp = {"ok": r["ok"], "nodes": r.get("result"), "error": r.get("error", "")}
            else:
                resp = {"ok": False, "error": f"unknown op {op!r}"}
        out.write(json.dumps(resp, default=repr) + "\n")
        out.flush()
    return 0


def main():
    vllm_path = os.environ.get("WIDETP_PROBE_VLLM_PATH", "")
    # vLLM's logging and prints go to stderr: stdout carries the protocol only.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    sys.exit(serve(vllm_path, out))


if __name__ == "__main__":
    main()
