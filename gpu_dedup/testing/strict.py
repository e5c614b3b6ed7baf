"""A strict stand-in for CuPy, so CI (which has no GPU) runs every ``device == "cuda"`` line of the
orchestration under CuPy's host/device rules, or stricter ones.

Under Numba's CUDA simulator the kernels run on the CPU over NumPy arrays; with plain NumPy in CuPy's place a
host array that reaches a CuPy-only call goes unseen and crashes only on a real GPU. With
``GPU_DEDUP_STRICT_DEVICE=1`` (and ``NUMBA_ENABLE_CUDASIM=1``) ``device.array_module("cuda")`` returns this
module instead: its arrays (``StrictArray``) wrap a NumPy buffer and behave as "device" arrays:

- implicit conversion to NumPy raises (``__array__``, as CuPy's does), and so does any NumPy function or ufunc
  applied to them (CuPy would dispatch some; refusing all keeps the orchestration written against ``xp``);
- an operation mixing a host ``numpy.ndarray`` (any shape, 0-d included) with a device array raises, in
  operators, in ``xp.*`` functions, as an index and as an assigned value (CuPy converts NumPy indices and
  values silently; refusing them makes every transfer explicit);
- data moves only through explicit transfers: ``xp.asarray``/``xp.array`` (host -> device) and ``.get()``
  (device -> host); Python scalars and NumPy scalars mix freely, as in CuPy; ``int()``, ``float()``,
  ``bool()`` and ``.item()`` of a one-element array are allowed (CuPy synchronises and copies);
- CuPy's own restrictions where they differ from NumPy: ``ascontiguousarray`` takes device arrays only,
  ``lexsort`` takes one 2-D array of keys (not a sequence), no ``__index__`` (a device scalar is not a Python
  index), and a scatter ``a[idx] = v`` whose integer index repeats a position with different values raises
  (CuPy leaves which write wins undefined);
- kernels accept device arrays only (enforced at launch by ``gpu_dedup.kernels._launch``, which unwraps
  ``StrictArray`` for the simulator and refuses host arrays).

Functions outside the subset listed in ``_FUNCTIONS`` raise ``AttributeError``: each was checked against
CuPy 14's namespace, so code that runs here does not call something CuPy lacks.
"""
from __future__ import annotations

import operator

import numpy as np

__all__ = ["StrictArray", "xp"]

_HOST_MSG = ("a host numpy.ndarray was mixed into a device operation ({what}); CuPy refuses this: move it "
             "explicitly with gpu_dedup.runtime.device.to_device (or xp.asarray)")
_IMPLICIT_MSG = ("Implicit conversion to a NumPy array is not allowed. Please use `.get()` to construct a "
                 "NumPy array explicitly (gpu_dedup.runtime.device.to_host).")


def _host_error(what: str) -> TypeError:
    return TypeError(_HOST_MSG.format(what=what))


def _wrap(x):
    """NumPy results become device arrays; NumPy scalars become 0-d device arrays (CuPy returns 0-d arrays
    from reductions and element access)."""
    if isinstance(x, np.ndarray):
        return StrictArray(x)
    if isinstance(x, np.generic):
        return StrictArray(np.asarray(x))
    if isinstance(x, tuple):
        return tuple(_wrap(v) for v in x)
    if isinstance(x, list):
        return [_wrap(v) for v in x]
    return x


def _unwrap(x, what: str):
    """Device arrays -> their buffer; host ndarrays raise; containers are walked."""
    if isinstance(x, StrictArray):
        return x._a
    if isinstance(x, np.ndarray):
        raise _host_error(what)
    if isinstance(x, (list, tuple)):
        return type(x)(_unwrap(v, what) for v in x)
    return x


def _scalar_ok(x) -> bool:
    return isinstance(x, (bool, int, float, complex, np.generic))


class StrictArray:
    """A "device" array: a NumPy buffer that refuses every implicit host/device crossing (module doc)."""

    __slots__ = ("_a",)
    # NumPy ufuncs and binary operators with a NumPy operand refuse us: ndarray.__add__ returns
    # NotImplemented, and our reflected operator then raises for the host operand.
    __array_ufunc__ = None

    def __init__(self, a: np.ndarray):
        self._a = a

    # ---- the host boundary
    def __array__(self, dtype=None, copy=None):
        raise TypeError(_IMPLICIT_MSG)

    def __array_function__(self, func, types, args, kwargs):
        raise TypeError(f"numpy.{func.__name__} was applied to a device array; use the array module "
                        f"(xp.{func.__name__}) or move it to the host with to_host() first")

    def __strict_device_buffer__(self) -> np.ndarray:
        """The buffer a simulated kernel reads and writes (``kernels._launch`` only)."""
        return self._a

    def get(self, stream=None, order="C", out=None) -> np.ndarray:
        """Device -> host copy, as ``cupy.ndarray.get``."""
        if out is not None:
            np.copyto(out, self._a)
            return out
        return np.array(self._a, order=order, copy=True)

    def set(self, arr, stream=None) -> None:
        """Host -> device copy into this array, as ``cupy.ndarray.set``."""
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"set() takes a numpy.ndarray, got {type(arr).__name__}")
        if arr.shape != self._a.shape or arr.dtype != self._a.dtype:
            raise ValueError(f"set(): shape/dtype mismatch {arr.shape}/{arr.dtype} vs {self._a.shape}/{self._a.dtype}")
        self._a[...] = arr

    def tolist(self):
        return self._a.tolist()

    def item(self):
        return self._a.item()

    def __int__(self):
        return int(self._a)

    def __float__(self):
        return float(self._a)

    def __bool__(self):
        return bool(self._a)

    def __repr__(self):
        return f"StrictArray({self._a!r})"

    __str__ = __repr__

    def __format__(self, spec):
        return format(self._a, spec)

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        if self._a.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self._a.shape[0]))

    def __reduce__(self):
        raise TypeError("a device array cannot be pickled; send to_host(x) to another process")

    # ---- attributes
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    nbytes = property(lambda self: self._a.nbytes)
    itemsize = property(lambda self: self._a.itemsize)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: self._a.flags)
    T = property(lambda self: StrictArray(self._a.T))

    def __getattr__(self, name):
        """Methods of the NumPy buffer under the same rules as the functions (args checked, results wrapped)."""
        if name.startswith("__") or name not in _METHODS:
            raise AttributeError(f"StrictArray has no attribute {name!r} (not in the CuPy ndarray subset "
                                 "modelled by gpu_dedup.testing.strict)")
        method = getattr(self._a, name)

        def call(*args, **kwargs):
            if name in ("sort", "argsort"):
                kwargs = _stable(name, kwargs)
            return _wrap(method(*_unwrap(args, f"ndarray.{name}"),
                                **{k: _unwrap(v, f"ndarray.{name}") for k, v in kwargs.items()}))
        return call

    # ---- indexing
    def __getitem__(self, key):
        return _wrap(self._a[_index(key)])

    def __setitem__(self, key, value):
        k = _index(key)
        if isinstance(value, StrictArray):
            v = value._a
        elif isinstance(value, np.ndarray):
            raise _host_error("assigned value")
        elif _scalar_ok(value) or value is None:
            v = value
        else:
            raise TypeError(f"cannot assign a {type(value).__name__} to a device array; assign a device "
                            "array or a scalar")
        if isinstance(v, np.ndarray):
            _check_scatter(self._a, k, v)
        self._a[k] = v


def _index(key):
    """An index for a device array: slices, ints, None, Ellipsis and device arrays; host arrays and lists of
    arrays raise; device scalars are not Python indices (CuPy has no __index__) but work as 0-d arrays."""
    if isinstance(key, tuple):
        return tuple(_index(k) for k in key)
    if isinstance(key, StrictArray):
        return key._a
    if isinstance(key, np.ndarray):
        raise _host_error("index")
    if isinstance(key, list):
        raise TypeError("a Python list as an index is an implicit host -> device transfer; pass a device array")
    return key


def _check_scatter(target: np.ndarray, key, value: np.ndarray) -> None:
    """a[idx] = value with an integer array index that repeats a position: CuPy does not say which write
    wins (NumPy: the last). Refuse it unless every write to a position carries the same value."""
    idx = key[0] if isinstance(key, tuple) and len(key) == 1 else key
    if not (isinstance(idx, np.ndarray) and idx.dtype.kind in "iu" and idx.ndim == 1 and idx.size > 1):
        return
    pos = np.where(idx < 0, idx + target.shape[0], idx)
    order = np.argsort(pos, kind="stable")
    s = pos[order]
    dup = np.flatnonzero(s[1:] == s[:-1])
    if dup.size == 0:
        return
    v = np.broadcast_to(value, (idx.size,) + target.shape[1:])[order]
    differs = (v[dup] != v[dup + 1]).reshape(dup.size, -1).any(axis=1)
    if differs.any():
        raise ValueError(f"scatter a[idx] = v writes position {int(s[dup[differs][0]])} more than once with "
                         "different values; which write wins is undefined on a GPU (CuPy). Make idx unique.")


def _binary(op, name: str):
    def forward(self, other):
        o = _operand(other, name)
        if o is NotImplemented:
            return NotImplemented
        return _wrap(op(self._a, o))

    def reflected(self, other):
        o = _operand(other, name)
        if o is NotImplemented:
            return NotImplemented
        return _wrap(op(o, self._a))
    return forward, reflected


def _operand(other, name: str):
    if isinstance(other, StrictArray):
        return other._a
    if isinstance(other, np.ndarray):
        raise _host_error(f"operator {name}")
    if _scalar_ok(other):
        return other
    return NotImplemented


for _name, _op in [("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                   ("truediv", operator.truediv), ("floordiv", operator.floordiv), ("mod", operator.mod),
                   ("pow", operator.pow), ("and", operator.and_), ("or", operator.or_), ("xor", operator.xor),
                   ("lshift", operator.lshift), ("rshift", operator.rshift), ("matmul", operator.matmul)]:
    _f, _r = _binary(_op, _name)
    setattr(StrictArray, f"__{_name}__", _f)
    setattr(StrictArray, f"__r{_name}__", _r)

for _name, _op in [("lt", operator.lt), ("le", operator.le), ("gt", operator.gt), ("ge", operator.ge),
                   ("eq", operator.eq), ("ne", operator.ne)]:
    setattr(StrictArray, f"__{_name}__", _binary(_op, _name)[0])
StrictArray.__hash__ = None

for _name, _op in [("iadd", operator.iadd), ("isub", operator.isub), ("imul", operator.imul),
                   ("itruediv", operator.itruediv), ("ifloordiv", operator.ifloordiv), ("imod", operator.imod),
                   ("iand", operator.iand), ("ior", operator.ior), ("ixor", operator.ixor),
                   ("ilshift", operator.ilshift), ("irshift", operator.irshift)]:
    def _inplace(self, other, _op=_op, _name=_name):
        o = _operand(other, _name)
        if o is NotImplemented:
            return NotImplemented
        _op(self._a, o)
        return self
    setattr(StrictArray, f"__{_name}__", _inplace)

for _name, _op in [("neg", operator.neg), ("pos", operator.pos), ("invert", operator.invert), ("abs", abs)]:
    setattr(StrictArray, f"__{_name}__", lambda self, _op=_op: _wrap(_op(self._a)))

# cupy.ndarray methods the orchestration may call (all exist in CuPy 14).
_METHODS = frozenset("""
all any argmax argmin argsort astype clip copy cumsum dot fill flatten max mean min nonzero ravel repeat reshape
round searchsorted sort squeeze std sum swapaxes take transpose var view
""".split())

# Module-level functions, each present in CuPy 14's namespace (checked against cupy/__init__.py).
_FUNCTIONS = frozenset("""
abs absolute add all allclose any arange argmax argmin argsort argwhere around array_equal atleast_1d
bincount bitwise_and bitwise_count bitwise_not bitwise_or bitwise_xor broadcast_to ceil clip column_stack
concatenate count_nonzero cumprod cumsum diff divide dot empty empty_like equal exp expand_dims flatnonzero
flip floor floor_divide full full_like greater greater_equal hstack invert isfinite isin isnan
left_shift less less_equal lexsort log log2 logical_and logical_not logical_or logical_xor matmul max
maximum mean min minimum mod multiply nonzero not_equal ones ones_like power prod ravel repeat reshape
right_shift round searchsorted sign sort sqrt square stack subtract sum take tile transpose true_divide
unique vstack where zeros zeros_like
""".split())

# Names that are not functions of arrays: dtypes, constants, type helpers.
_PASSTHROUGH = frozenset("""
bool_ int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 float32 float64 complex64 complex128
intp uintp dtype iinfo finfo newaxis inf nan pi e integer floating signedinteger unsignedinteger generic
promote_types issubdtype
""".split())


def _stable(name: str, kwargs: dict) -> dict:
    """CuPy's sorts are stable radix/merge sorts whatever ``kind`` says; NumPy's default is not."""
    if kwargs.get("kind") not in (None, "stable"):
        raise TypeError(f"cupy.{name} sorts stably; pass kind=None or 'stable', got {kwargs['kind']!r}")
    return {**kwargs, "kind": "stable"}


def _function(name: str):
    fn = getattr(np, name)

    def call(*args, **kwargs):
        if name == "lexsort":
            keys = args[0] if args else kwargs.get("keys")
            if not isinstance(keys, StrictArray) or keys.ndim not in (1, 2):
                raise TypeError("cupy.lexsort takes one 1-D or 2-D device array of keys (xp.stack([...])), "
                                f"got {type(keys).__name__}")
        if name in ("sort", "argsort"):
            kwargs = _stable(name, kwargs)
        out = fn(*_unwrap(args, f"xp.{name}"), **{k: _unwrap(v, f"xp.{name}") for k, v in kwargs.items()})
        return _wrap(out)
    call.__name__ = name
    return call


def _transfer(name: str):
    """asarray/array: the explicit host -> device transfer (a copy of host data, never a view of it)."""
    def call(obj, dtype=None, copy=None, **kwargs):
        if isinstance(obj, StrictArray):
            a = obj._a
            if dtype is not None and np.dtype(dtype) != a.dtype:
                return StrictArray(a.astype(dtype))
            return StrictArray(a.copy()) if (name == "array" and copy is not False) else obj
        if isinstance(obj, (list, tuple)) and any(isinstance(v, StrictArray) for v in obj):
            raise TypeError(f"xp.{name} of a sequence holding device arrays: use xp.stack/xp.concatenate")
        out = np.array(obj, dtype=dtype, copy=True, **kwargs)
        if out.dtype.kind in "OUSV":
            raise ValueError(f"Unsupported dtype {out.dtype} (CuPy holds numeric and bool arrays only)")
        return StrictArray(out)
    call.__name__ = name
    return call


def _ascontiguousarray(a, dtype=None):
    """CuPy declares ``ascontiguousarray(_ndarray_base a, ...)``: a host array is a TypeError."""
    if not isinstance(a, StrictArray):
        raise TypeError(f"cupy.ascontiguousarray takes a device array, got {type(a).__name__}; use "
                        "xp.asarray(x, dtype=...) for a host array")
    return StrictArray(np.ascontiguousarray(a._a, dtype=dtype))


class _Module:
    """The ``xp`` handed to the orchestration in strict mode (see module doc)."""

    __name__ = "gpu_dedup.testing.strict"

    def __init__(self):
        self._cache = {"asarray": _transfer("asarray"), "array": _transfer("array"),
                       "asanyarray": _transfer("asarray"), "ascontiguousarray": _ascontiguousarray,
                       "ndarray": StrictArray}

    def __getattr__(self, name):
        cache = self.__dict__["_cache"]
        if name in cache:
            return cache[name]
        if name in _PASSTHROUGH:
            value = getattr(np, name)
        elif name in _FUNCTIONS:
            value = _function(name)
        else:
            raise AttributeError(f"gpu_dedup.testing.strict has no {name!r}: it is outside the CuPy subset modelled "
                                 "here; check that CuPy provides it with the same signature, then add it")
        cache[name] = value
        return value


xp = _Module()
