"""Stand-in for pyzmq: sockets record what vLLM binds and connects and hand every send, recv and
poll to ``HOOKS`` (set by the launch module), which plays the far end of the engine handshake.
Nothing touches the network."""

import itertools

from .standins import specific, _new_class

_consts = {}
_next = itertools.count(1000)

SOCKET_TYPES = {"PAIR": 0, "PUB": 1, "SUB": 2, "REQ": 3, "REP": 4, "DEALER": 5, "ROUTER": 6,
                "PULL": 7, "PUSH": 8, "XPUB": 9, "XSUB": 10}


class _Hooks:
    """Default hooks: every socket is silent (poll never ready)."""

    def bind(self, sock, addr):
        pass

    def connect(self, sock, addr):
        pass

    def send(self, sock, frames):
        pass

    def poll(self, sock, timeout):
        return 0

    def recv(self, sock):
        raise Again()


HOOKS = _Hooks()


class ZMQError(Exception):
    def __init__(self, errno=None, msg=None):
        super().__init__(msg or "")
        self.errno = errno
        self.strerror = msg or ""


class Again(ZMQError):
    pass


class ContextTerminated(ZMQError):
    pass


class Socket:
    def __init__(self, ctx=None, socket_type=None, **kw):
        self.type = socket_type
        self.socket_type = socket_type
        self.identity = b""
        self.addresses = []
        self.closed = False
        self.bound = None

    @classmethod
    def shadow(cls, other):
        return other

    def setsockopt(self, opt, value):
        if opt == _consts.get("IDENTITY"):
            self.identity = value

    set = setsockopt
    setsockopt_string = setsockopt

    def getsockopt(self, opt):
        if opt == _consts.get("LAST_ENDPOINT"):
            return (self.bound or "").encode()
        return 0

    get = getsockopt

    def set_hwm(self, v):
        pass

    def bind(self, addr):
        self.bound = addr
        self.addresses.append(addr)
        HOOKS.bind(self, addr)

    def bind_to_random_port(self, addr, *a, **k):
        self.bind(addr + ":0")
        return 0

    def connect(self, addr):
        self.addresses.append(addr)
        HOOKS.connect(self, addr)

    def send(self, data, *a, **k):
        HOOKS.send(self, [data])

    def send_multipart(self, frames, *a, **k):
        HOOKS.send(self, list(frames))

    send_pyobj = send
    send_string = send

    def recv(self, *a, **k):
        frames = HOOKS.recv(self)
        return frames[-1]

    def recv_multipart(self, *a, **k):
        return HOOKS.recv(self)

    def poll(self, timeout=None, flags=None):
        return HOOKS.poll(self, timeout)

    def close(self, *a, **k):
        self.closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class Context:
    def __init__(self, *a, **k):
        pass

    @classmethod
    def instance(cls, *a, **k):
        return cls()

    def socket(self, socket_type, **kw):
        return Socket(self, socket_type)

    def term(self):
        pass

    def destroy(self, *a, **k):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class Poller:
    def __init__(self):
        self.socks = []

    def register(self, s, flags=None):
        self.socks.append(s)

    def unregister(self, s):
        pass

    def poll(self, timeout=None):
        ready = []
        for s in self.socks:
            if not isinstance(s, Socket):
                continue  # process sentinels: no simulated process dies while the plan is made
            if HOOKS.poll(s, timeout):
                ready.append((s, _consts["POLLIN"]))
        return ready


class Frame:
    def __init__(self, data=b""):
        self.bytes = bytes(data)
        self.buffer = memoryview(self.bytes)


def _module_getattr(name):
    if name.isupper():
        if name not in _consts:
            _consts[name] = SOCKET_TYPES.get(name, next(_next))
        return _consts[name]
    raise AttributeError(name)


@specific("zmq")
def _init(m):
    for n in ("ZMQError", "Again", "ContextTerminated", "Socket", "Context", "Poller", "Frame"):
        setattr(m, n, globals()[n])
    m.error = None  # replaced by the submodule import below
    m.__getattr__ = _module_getattr
    m.zmq_version = lambda: "4.3.5"
    m.pyzmq_version = lambda: "26.0.0"
    m.__version__ = "26.0.0"
    for n in list(SOCKET_TYPES) + ["POLLIN", "POLLOUT", "IDENTITY", "LINGER", "LAST_ENDPOINT",
                                    "NOBLOCK", "SNDHWM", "RCVHWM", "ROUTER_HANDOVER"]:
        setattr(m, n, _module_getattr(n))
    import importlib
    m.error = importlib.import_module("zmq.error")
    m.asyncio = importlib.import_module("zmq.asyncio")
    m.constants = m


@specific("zmq.error")
def _init_error(m):
    m.ZMQError, m.Again, m.ContextTerminated = ZMQError, Again, ContextTerminated


@specific("zmq.asyncio")
def _init_asyncio(m):
    m.Context, m.Socket, m.Poller = Context, Socket, Poller


@specific("zmq.constants")
def _init_constants(m):
    m.__getattr__ = _module_getattr
    m.SocketType = _new_class("SocketType", "zmq.constants")
