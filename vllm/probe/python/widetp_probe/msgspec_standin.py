"""Stand-in for msgspec: Struct is a plain record class; msgpack/json encode and decode pass the
object through unchanged (a planning run never crosses a real wire)."""

from .standins import specific, _new_class

_NODEFAULT = object()


class _Field:
    def __init__(self, default=_NODEFAULT, default_factory=None, name=None):
        self.default, self.default_factory = default, default_factory


def field(default=_NODEFAULT, default_factory=None, name=None):
    return _Field(default, default_factory, name)


class Struct:
    __struct_fields__ = ()

    def __init_subclass__(cls, **kwargs):
        names, defaults = [], {}
        for base in reversed(cls.__mro__[1:]):
            for n in getattr(base, "__struct_fields__", ()):
                if n not in names:
                    names.append(n)
            defaults.update(getattr(base, "__struct_defaults__", {}))
        for n in cls.__dict__.get("__annotations__", {}):
            if n.startswith("_") and n.startswith("__"):
                continue
            if n not in names:
                names.append(n)
            if n in cls.__dict__:
                v = cls.__dict__[n]
                defaults[n] = v
        cls.__struct_fields__ = tuple(names)
        cls.__struct_defaults__ = defaults

    def __init__(self, *args, **kwargs):
        names = self.__struct_fields__
        for n, v in zip(names, args):
            kwargs[n] = v
        for n in names:
            if n in kwargs:
                v = kwargs[n]
            else:
                d = self.__struct_defaults__.get(n, _NODEFAULT)
                if isinstance(d, _Field):
                    v = d.default_factory() if d.default_factory is not None else d.default
                else:
                    v = d
                if v is _NODEFAULT:
                    v = None
            object.__setattr__(self, n, v)

    def __repr__(self):
        inner = ", ".join(f"{n}={getattr(self, n, None)!r}" for n in self.__struct_fields__)
        return f"{type(self).__name__}({inner})"


class _Packed(bytes):
    """The bytes a stand-in encode returns: empty, carrying the object."""

    obj = None


def encode(obj, *args, **kwargs):
    p = _Packed()
    p.obj = obj
    return p


def decode(data, *args, type=None, **kwargs):
    return getattr(data, "obj", data)


class Encoder:
    def __init__(self, *args, **kwargs):
        pass

    def encode(self, obj):
        return encode(obj)

    def encode_into(self, obj, buf, *a):
        return None


class Decoder:
    def __init__(self, *args, **kwargs):
        pass

    def decode(self, data):
        return decode(data)


class _Unset:
    def __bool__(self):
        return False

    def __repr__(self):
        return "UNSET"


@specific("msgspec")
def _init(m):
    m.Struct, m.field, m.UNSET = Struct, field, _Unset()
    m.UnsetType = _Unset
    m.ValidationError = type("ValidationError", (ValueError,), {})
    m.DecodeError = type("DecodeError", (ValueError,), {})
    m.EncodeError = type("EncodeError", (ValueError,), {})
    m.Meta = _new_class("Meta", "msgspec")
    m.Raw = _new_class("Raw", "msgspec")
    m.NODEFAULT = _NODEFAULT
    import importlib

    for sub in ("msgpack", "json", "structs"):
        setattr(m, sub, importlib.import_module("msgspec." + sub))


@specific("msgspec.msgpack")
def _init_msgpack(m):
    m.encode, m.decode, m.Encoder, m.Decoder = encode, decode, Encoder, Decoder
    m.Ext = _new_class("Ext", "msgspec.msgpack")


@specific("msgspec.json")
def _init_json(m):
    m.encode, m.decode, m.Encoder, m.Decoder = encode, decode, Encoder, Decoder


@specific("msgspec.structs")
def _init_structs(m):
    def replace(s, **changes):
        new = type(s).__new__(type(s))
        for n in s.__struct_fields__:
            object.__setattr__(new, n, changes.get(n, getattr(s, n)))
        return new

    def asdict(s):
        return {n: getattr(s, n) for n in s.__struct_fields__}

    m.replace, m.asdict = replace, asdict
    m.fields = lambda s: ()
