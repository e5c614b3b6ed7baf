"""Compile shared device functions for one target.

Each function is cloned with a fresh globals dict in which every other device function name points to
its compiled twin, then decorated. Numba resolves globals lazily at first compilation, so calls
between device functions bind to the same target's versions. A module of device functions lists its
functions in DEVICE_FUNCTIONS (in dependency order is not required) and may build on core.py's and
normalize.py's (always compiled), e.g. bloom.py.

Cached machine code (``cache=True`` of every CPU and GPU kernel) is validated by Numba against the kernel's
own file only, but a kernel inlines device functions of other files (core.py, normalize.py, bloom.py, ...,
and gpu_dedup/constants.py): ``drop_stale_cache`` (run when this module is first imported, i.e. before any
kernel module builds its kernels) deletes the cache files older than the newest of those, in every place
Numba keeps them, so an edited device function never runs as its old machine code (CLI, benchmarks, tests).
"""
import glob
import os
import types
from typing import Any, Callable

from .. import constants
from . import core, normalize

_HERE = os.path.dirname(os.path.abspath(__file__))


def _cache_dirs() -> list[str]:
    """Where Numba may keep this directory's cached kernels: __pycache__ beside the sources, or (read-only
    install, or NUMBA_CACHE_DIR) a per-directory subfolder of the user's or the configured cache."""
    from numba.core import caching, config

    sub = caching._CacheLocator.get_suitable_cache_subpath(os.path.join(_HERE, "_build.py"))
    dirs = [os.path.join(_HERE, "__pycache__")]
    if config.CACHE_DIR:
        dirs.append(os.path.join(config.CACHE_DIR, sub))
    from numba.misc.appdirs import AppDirs
    dirs.append(os.path.join(AppDirs(appname="numba", appauthor=False).user_cache_dir, sub))
    return dirs


def newest_source() -> float:
    """mtime of the newest device-function source (see drop_stale_cache)."""
    deps = [p for p in glob.glob(os.path.join(_HERE, "*.py"))
            if not p.endswith(("_cpu.py", "_cuda.py"))]
    deps.append(constants.__file__)
    return max(os.path.getmtime(p) for p in deps if os.path.exists(p))


def drop_stale_cache() -> int:
    """Delete cached kernels (.nbi index, .nbc code) older than the newest device-function source: every
    kernels/*.py but the *_cpu.py / *_cuda.py entry modules (Numba checks those itself)
    and gpu_dedup/constants.py. Returns the number of files removed (a concurrent process may remove
    the same ones: missing files are fine; files written after the newest source are kept)."""
    newest = newest_source()
    removed = 0
    for d in _cache_dirs():
        for f in glob.glob(os.path.join(d, "*.nb[ic]")):
            try:
                if os.path.getmtime(f) < newest:
                    os.remove(f)
                    removed += 1
            except OSError:
                pass
    return removed


drop_stale_cache()


def one_signature_per_type(dispatcher: Any) -> Any:
    """Make a CPU device function compile once per argument *type*, not once per constant value; returns
    ``dispatcher`` itself. Every CPU device function gets it: ``build``'s, and a kernel module's own helpers
    called from its kernels (e.g. features_cpu's ``_ngram_stats``, called with ``top=True`` and ``False``).

    Numba types a constant argument at a call site between jitted functions as a literal (``Literal[int](0)``,
    ``Literal[bool](True)``) and compiles the callee again for every distinct literal: normalize_span, called
    with ``write=False`` by one kernel and ``write=True`` by another, and the helpers it calls with constant
    offsets, were compiled 2 to 4 times each (25 specializations for ``run``'s kernels), most of a first run's
    compile time. Here the callee is compiled for the arguments' plain types (``int64``, ``bool``); literal
    arguments still match that signature by conversion. The kernels themselves (called from Python) never get
    literals. The GPU twins are left as they are (one compile per kernel there, and a branch on a constant is
    cheaper to fold than to take per thread)."""
    from numba.core import types as nbtypes

    resolve = dispatcher.get_call_template

    def get_call_template(args, kws):
        return resolve(tuple(nbtypes.unliteral(a) for a in args), {k: nbtypes.unliteral(v) for k, v in kws.items()})

    dispatcher.get_call_template = get_call_template
    return dispatcher


def build(decorate: Callable[[Callable[..., Any]], Any], *modules: types.ModuleType | None) -> dict[str, Any]:
    """Namespace holding core.py's and normalize.py's device functions (and those of ``modules``, other modules
    of device functions, later ones calling earlier ones' by name) compiled with ``decorate``; CPU
    (``numba.njit``) device functions compile once per argument type (``one_signature_per_type``)."""
    mods = [core, normalize] + [m for m in modules if m is not None]
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
            compiled = decorate(types.FunctionType(fn.__code__, namespace, name, fn.__defaults__, fn.__closure__))
            if type(compiled).__name__ == "CPUDispatcher":
                compiled = one_signature_per_type(compiled)
            namespace[name] = compiled
    return namespace
