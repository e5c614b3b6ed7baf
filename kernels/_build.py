"""Compile the shared device functions of ``hashing.py`` for one target.

Each function is cloned with a fresh globals dict in which every other device function name points to
its compiled twin, then decorated. Numba resolves globals lazily at first compilation, so calls
between device functions bind to the same target's versions.
"""
import types
from typing import Any, Callable

from . import hashing


def build(decorate: Callable[[Callable[..., Any]], Any]) -> dict[str, Any]:
    namespace = dict(vars(hashing))
    for name in hashing.DEVICE_FUNCTIONS:
        fn = getattr(hashing, name)
        clone = types.FunctionType(fn.__code__, namespace, name, fn.__defaults__, fn.__closure__)
        namespace[name] = decorate(clone)
    return namespace
