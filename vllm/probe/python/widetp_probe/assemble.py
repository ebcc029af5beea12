"""Turns the records the simulated processes reported into the plan contract widetp's Go side
reads (vllm/plan.go: NodePlan, ProcessPlan), applying the conventions of conventions.py."""

import os

from . import conventions as cv

# WIDETP_PROBE_DEBUG=1 keeps the traceback of every crash in the plan (crash.traceback).
DEBUG = bool(os.environ.get("WIDETP_PROBE_DEBUG"))

# What a parent raises when a child fails during start-up (vllm/v1/engine/utils.py
# wait_for_engine_startup, vllm/v1/executor/multiproc_executor.py WorkerProc.wait_for_ready);
# "{...}" stands for the failed children, which only a run knows (vllm/plan.go
# ChildFailurePlaceholder).
ENGINE_STARTUP_FAILURE = ("RuntimeError: Engine core initialization failed. See root cause above. "
                          "Failed core proc(s): {...}")
WORKER_STARTUP_FAILURE = ("Exception: WorkerProc initialization failed due to an exception in a "
                          "background process. See stack trace for root cause.")


def walk(rec):
    yield rec
    for c in rec.get("children") or []:
        yield from walk(c)


def in_tree(rec, pid):
    return any(r.get("id") == pid for r in walk(rec))


def _descendant_ids(rec):
    return {r.get("id") for r in walk(rec)}


def _key(host, addr):
    if cv.is_local_address(addr):
        return addr + "@" + host
    return cv.barrier_key(host, cv.strip_scheme(addr))


def _binders(tops):
    """Every front end that bound a handshake, in deployment order: (key, record)."""
    out = []
    for top in tops:
        for r in walk(top):
            b = (r.get("extra") or {}).get("handshake_bind")
            if b:
                out.append((_key(r["host"], b), r))
    return out


def front_ends(tops):
    """The front end serving each handshake key: the first binder (a later binder of the same
    address on one host fails its bind, vllm/plan.go StageHandshakeBind)."""
    out = {}
    for key, r in _binders(tops):
        out.setdefault(key, r)
    return out


def remote_feeds(tops):
    """For every front end, the HELLO and READY messages of the engines outside its own tree that
    dial its handshake, in deployment order. Engines below another binder of the same address
    never start (that binder fails its bind), so they send nothing."""
    binders = _binders(tops)
    fes = front_ends(tops)
    feeds = {}
    for key, fe in fes.items():
        hs = fe.get("handshake")
        if not hs or all(local for _, local in hs["engines"]):
            continue
        skip = set()
        for k, other in binders:
            if k == key:
                skip |= _descendant_ids(other)
        msgs = []
        for top in tops:
            for r in walk(top):
                if r.get("id") in skip:
                    continue
                for h in r.get("hello") or []:
                    if _key(r["host"], h["address"]) == key:
                        msgs.append(h)
        if msgs:
            feeds[fe["id"]] = msgs
    return feeds


def _find(rec, pid):
    for r in walk(rec):
        if r.get("id") == pid:
            return r
    return None


class _Slots:
    def __init__(self, host, cmd):
        self.host, self.cmd, self.n, self.map = host, cmd, 0, {}

    def reserve(self, key=None):
        self.n += 1
        addr = f"{self.host}:{cv.LOCAL_PORT_BASE + cv.LOCAL_PORT_STRIDE * self.cmd + self.n}"
        if key is not None:
            self.map[key] = addr
        return addr

    def address(self, host, addr):
        if not cv.is_local_address(addr):
            return cv.strip_scheme(addr)
        key = addr + "@" + host
        if key not in self.map:
            self.reserve(key)
        return self.map[key]


def node_plans(dep, tops):
    fes = front_ends([t[2] for t in tops if t[2] is not None])
    by_node = {}
    for ni, ci, rec in tops:
        node = dep["nodes"][ni]
        plans = by_node.setdefault(ni, [])
        if rec is None:
            plans.append(None)  # the Go side plans a line the shell cannot run
            continue
        slots = _Slots(node["host"], ci)
        plans.append(_plan(rec, slots, fes))
    out = []
    for ni, node in enumerate(dep["nodes"]):
        out.append({"host": node["host"], "commands": by_node.get(ni, [])})
    return out


def _plan(rec, slots, fes):
    if (rec.get("extra") or {}).get("unsupported"):
        raise RuntimeError(f"unsupported launch ({rec.get('id')}): {rec['extra']['unsupported']}")
    if rec.get("probe_error"):
        raise RuntimeError(f"process {rec.get('id')}: {rec['probe_error']}")
    if rec.get("lost"):
        raise RuntimeError(f"simulated process {rec.get('id')} {rec['lost']}")
    role = rec["role"]
    ident = rec.get("identity") or {}
    conn = rec.get("connector") or {}
    extra = rec.get("extra") or {}
    p = {"identity": {
        "id": rec["id"], "parent": rec.get("parent", ""), "host": rec["host"], "command": rec["command"],
        "role": role, "pid": 0, "replica": "",
        "data_parallel_size": ident.get("data_parallel_size", 0),
        "data_parallel_rank": ident.get("data_parallel_rank", 0),
        "data_parallel_rank_local": ident.get("data_parallel_rank_local"),
        "data_parallel_index": ident.get("data_parallel_index", 0),
        "local_engines_only": ident.get("local_engines_only", False),
        "node_rank_within_dp": ident.get("node_rank_within_dp", 0),
        "mooncake_dp_index": conn.get("mooncake_dp_index"),
        "rank": None, "tp_rank": None, "pp_rank": None, "exit": None,
    }}
    if conn.get("engine_id"):
        p["identity"]["engine_id"] = conn["engine_id"]
    crash = rec.get("crash")
    if crash:
        p["crash"] = {"stage": crash["stage"], "error": crash["error"]}
        if DEBUG and extra.get("traceback"):
            p["crash"]["traceback"] = extra["traceback"]
    rvs = []
    bind = extra.get("handshake_bind")
    if bind is not None:
        # launch_core_engines binds the handshake it serves before starting its engines.
        key = _key(rec["host"], bind)
        addr = slots.reserve(key if cv.is_local_address(bind) else None)
        if not cv.is_local_address(bind):
            addr = cv.strip_scheme(bind)
        hs = rec.get("handshake")
        world = len(hs["engines"]) + 1 if hs else 1
        rv = {"kind": "dp", "address": addr, "world_size": world, "rank": 0, "binds_early": True}
        if hs and hs["engines"]:
            idx = [e[0] for e in hs["engines"]]
            rv["expect"] = {"first": idx[0], "count": len(idx),
                            "local_count": sum(1 for e in hs["engines"] if e[1]),
                            "remote_headless": bool(hs["remote_headless"])}
            if hs.get("config_hash"):
                rv["expect"]["config_hash"] = hs["config_hash"]
        rvs.append(rv)
    elif role == "api-server" and ident and not crash:
        slots.reserve()
    for h in rec.get("hello") or []:
        if h["status"] != "HELLO":
            continue
        key = _key(rec["host"], h["address"])
        fe = fes.get(key)
        engines = [e[0] for e in (fe.get("handshake") or {}).get("engines", [])] if fe else []
        if h["index"] in engines:
            rank, world = 1 + engines.index(h["index"]), len(engines) + 1
        else:
            rank, world = 1 + h["index"], extra.get("launcher_dp_size", 1) + 1
        hello = {"index": h["index"], "local": h["local"], "headless": h["headless"]}
        # The hash the engine's READY to that front end carries (what wait_for_engine_startup checks).
        for r in rec.get("hello") or []:
            if r["status"] == "READY" and r["address"] == h["address"] and r.get("parallel_config_hash"):
                hello["config_hash"] = r["parallel_config_hash"]
                break
        rvs.append({"kind": "dp", "address": slots.address(rec["host"], h["address"]),
                    "world_size": world, "rank": rank, "hello": hello})
    world_rank = None
    for rv in rec.get("rendezvous") or []:
        addr = slots.address(rec["host"], rv["address"])
        rvs.append({"kind": rv["kind"], "address": addr, "world_size": rv["world_size"], "rank": rv["rank"]})
        if rv["kind"] == "workers":
            world_rank = rv["rank"]
            ws = ident.get("world_size", 0)
            dp_slot = rv["rank"] // ws if ws and rv["world_size"] > ws else 0
            p["identity"]["replica"] = f"{cv.barrier_key(rec['host'], addr)}/dp{dp_slot}"
    if crash and crash["stage"] == "engine-init":
        rvs = []
    if rvs:
        p["rendezvous"] = rvs
    if role == "worker" and ident:
        tp_rank, pp_rank = cv.worker_ranks(ident)
        p["identity"]["rank"], p["identity"]["tp_rank"], p["identity"]["pp_rank"] = ident["rank"], tp_rank, pp_rank
        src = conn.get("engine_id_from_world_rank")
        if src is not None and world_rank is not None and src != world_rank:
            p["engine_id_from_rank"] = src
        if conn.get("registers_segment"):
            p["registers_segment"] = True
            p["segment_host"] = conn.get("segment_host", "")
    if conn.get("lookup_path"):
        p["identity"]["lookup_path"] = conn["lookup_path"]
        p["identity"]["lookup_role"] = conn["lookup_role"]
        if conn["lookup_role"] == "server":
            p["binds_lookup"] = True
        else:
            p["connects_lookup"] = True
    if extra.get("handshake_refusal"):
        p["probe_handshake_refusal"] = extra["handshake_refusal"]
    children = [_plan(c, slots, fes) for c in rec.get("children") or []]
    if crash and crash["stage"] == "connector-init" and role in ("engine-core", "ray-actor") \
            and any(c.get("crash") for c in children):
        # EngineCore.__init__ builds its executor, whose workers build their KV connectors,
        # before its scheduler builds one (vllm/v1/engine/core.py): with a worker down, the
        # scheduler's connector, which the probe ran beside, was never built.
        del p["crash"]
    addrs = _addresses(rec, p, rvs, children)
    if addrs:
        p["addresses"] = addrs
    if children:
        p["children"] = children
        first = children[0]["identity"]
        if first["role"] == "worker" and not p["identity"]["replica"]:
            p["identity"]["replica"] = first["replica"]
    config_crash = crash and crash["stage"] in ("config", "engine-init")
    if not config_crash and ident:
        if role == "api-server":
            p["child_failure"] = ENGINE_STARTUP_FAILURE
        elif role == "engine-core":
            p["child_failure"] = WORKER_STARTUP_FAILURE
            # EngineCoreProc.__init__ performs its handshakes and joins its DP group before it
            # builds the executor that starts the workers.
            p["children_after_rendezvous"] = True
        elif role == "headless":
            if children and children[0]["identity"]["role"] == "worker":
                p["child_failure"] = WORKER_STARTUP_FAILURE
            else:
                p["stops_on_child_failure"] = True
    if role == "dp-supervisor" and not crash:
        p["stops_on_child_failure"] = True
    return p


HANDSHAKE_SOURCE = "vllm/v1/engine/utils.py launch_core_engines (handshake ROUTER; engines dial it)"


def _addresses(rec, p, rvs, children):
    """The process's addresses: those vLLM's code bound, probed or opened where the probe ran it
    (launch.address), then what it binds or dials where it meets others (its rendezvous, as
    vllm/addresses.go rendezvousAddresses lists them). A process that failed its configuration
    lists none (the plan contract's StageConfig crash)."""
    crash = rec.get("crash")
    if crash and crash["stage"] == "config":
        return []
    ident = rec.get("identity")
    out = []
    for a in rec.get("addresses") or []:
        a = dict(a)
        if a["channel"] == "api-server":
            a["key"] = f"api-server dp{ident['data_parallel_rank']}" if ident else "api-server"
        out.append(a)
    if rec["role"] == "engine-core":
        # UniProcExecutor runs its worker in the engine core's own process (the probe forks it to
        # simulate it): what it computes is the engine core's.
        for c in rec.get("children") or []:
            if c.get("role") == "worker":
                out.extend(a for a in c.get("addresses") or [] if a["channel"] == "executor-init")
    if rec["role"] == "worker":
        out = [a for a in out if a["channel"] != "executor-init"]
    bind = (rec.get("extra") or {}).get("handshake_bind")
    hellos = [h for h in rec.get("hello") or [] if h["status"] == "HELLO"]
    for rv in rvs:
        role = "bind" if rv["rank"] == 0 else "connect"
        a = {"channel": "dp-group", "role": role, "endpoint": "tcp://" + rv["address"], "key": rv["address"],
             "stage": "engine-init",
             "source": "vllm/config/parallel.py stateless_init_dp_group (stateless_init_torch_distributed_process_group)"}
        if rv["kind"] == "workers":
            a["channel"], a["key"] = "torch-world", p["identity"]["replica"]
            a["source"] = "vllm/distributed/parallel_state.py init_distributed_environment (rank 0's store)"
        elif rv.get("binds_early") or rv.get("hello"):
            a["channel"], a["source"] = "dp-handshake", HANDSHAKE_SOURCE
            raw = bind if rv.get("binds_early") else hellos.pop(0)["address"]
            if raw and raw.startswith("ipc://"):
                a["endpoint"] = raw  # vLLM's own path; the simulation meets at rv["address"]
        out.append(a)
    return out
