"""Compile shared device functions for one target.

Each function is cloned with a fresh globals dict in which every other device function name points to
its compiled twin, then decorated. Numba resolves globals lazily at first compilation, so calls
between device functions bind to the same target's versions. A module of device functions lists its
functions in DEVICE_FUNCTIONS (in dependency order is not required) and may build on hashing.py's and
normalize.py's (always compiled), e.g. bloom.py.
"""
import types
from typing import Any, Callable

from . import hashing, normalize


def build(decorate: Callable[[Callable[..., Any]], Any], module: types.ModuleType | None = None) -> dict[str, Any]:
    """Namespace holding hashing.py's and normalize.py's device functions (and ``module``'s, if another module
    of device functions is given) compiled with ``decorate``."""
    mods = [hashing, normalize] + ([module] if module is not None else [])
    namespace: dict[str, Any] = {}
    for mod in mods:
        namespace.update(vars(mod))
    # Python inserts "__warningregistry__" into a function's globals at its first warning (numpy's overflow
    # warnings of the uint64 wrap-around, under the CUDA simulator); the simulator's threads iterate these
    # globals while they run, so an insertion there fails another thread with "dictionary changed size
    # during iteration": the key exists from the start
    namespace["__warningregistry__"] = {}
    for mod in mods:
        for name in mod.DEVICE_FUNCTIONS:
            fn = getattr(mod, name)
            namespace[name] = decorate(types.FunctionType(fn.__code__, namespace, name, fn.__defaults__,
                                                          fn.__closure__))
    return namespace
