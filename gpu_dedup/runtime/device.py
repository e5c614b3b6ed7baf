"""Device selection: ``device="auto"|"cpu"|"cuda"``. GPU libraries are imported lazily, only here and in
the GPU code paths, so the package imports and runs on machines without CUDA.

"auto" picks the GPU when one is usable (numba.cuda sees a device and cupy imports) and logs the choice;
"cuda" without a usable GPU raises. There is never a silent fallback.
"""
from __future__ import annotations

import functools
import importlib
import logging
import os
import sys
import threading

from ..errors import ConfigError, RunError

logger = logging.getLogger(__name__)


# Where a CUDA driver shows itself on Linux: the NVIDIA device nodes and driver, WSL's GPU paravirtualization,
# Tegra's integrated GPU. Without any of them no driver can find a GPU, and numba.cuda's import (0.2-0.4 s, and
# teardown at exit) is skipped: a CPU machine's "auto" costs a few stat calls.
GPU_DEVICE_PATHS = ("/dev/nvidiactl", "/dev/nvidia0", "/proc/driver/nvidia", "/dev/dxg", "/dev/nvgpu",
                    "/dev/nvhost-ctrl-gpu")


def _no_gpu_device() -> str | None:
    """Why no GPU can be found, decided from the file system alone; None when numba.cuda must probe (a device
    path exists, another OS, the simulator, or a driver named by NUMBA_CUDA_DRIVER)."""
    if not sys.platform.startswith("linux") or os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" \
            or os.environ.get("NUMBA_CUDA_DRIVER"):
        return None
    if any(os.path.exists(p) for p in GPU_DEVICE_PATHS):
        return None
    return f"no NVIDIA device or driver on this machine (none of {', '.join(GPU_DEVICE_PATHS)})"


@functools.lru_cache(maxsize=1)
def gpu_status() -> tuple[bool, str]:
    """(usable, reason). Cached; never raises."""
    absent = _no_gpu_device()
    if absent:
        return False, absent
    try:
        from numba import cuda
    except Exception as exc:  # pragma: no cover - numba is a hard dependency
        return False, f"numba.cuda cannot be imported ({exc})"
    try:
        if not cuda.is_available():
            return False, "numba.cuda finds no CUDA driver/GPU"
    except Exception as exc:
        return False, f"numba.cuda probe failed ({exc})"
    try:
        import cupy  # noqa: F401
    except Exception as exc:
        return False, f"cupy is not importable ({exc}); install gpu-dedup[gpu]"
    return True, "CUDA GPU available"


def resolve_device(device: str) -> str:
    """Return "cpu" or "cuda" for a requested device, or raise."""
    if device == "cpu":
        return "cpu"
    if device not in ("auto", "cuda"):
        raise ConfigError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")
    if device == "cuda" and simulator():
        logger.warning("device='cuda' runs under Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1): correct but slow")
        return "cuda"
    usable, reason = gpu_status()
    if device == "cuda":
        if not usable:
            raise RunError(f"device='cuda' was requested but no usable GPU was found: {reason}. "
                           "Run with device='cpu' (or 'auto' to pick whatever is available).")
        return "cuda"
    chosen = "cuda" if usable else "cpu"
    logger.info("device=auto chose %s (%s)", chosen, reason)
    return chosen


def set_threads(threads: int | None) -> int:
    """Set the number of CPU threads the kernels use; returns the number in effect."""
    import numba

    if threads is not None:
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    return numba.get_num_threads()


def kernels(device: str, family: str = "core"):
    """The kernel module of ``device`` ("cpu" or "cuda") in a family: ``kernels/<family>_cpu.py`` or
    ``kernels/<family>_cuda.py`` (``core`` = the dedup kernels). Imported on first use, so a CPU run never
    loads the CUDA kernels."""
    target = "cuda" if device == "cuda" else "cpu"
    return importlib.import_module(f"{__name__.partition('.')[0]}.kernels.{family or 'core'}_{target}")


def run_kernel(device: str, k, items: int, *args) -> None:
    """Run kernel ``k`` (of ``kernels(device, family)``) over ``items`` work items: on the GPU with the geometry its
    ``@kernel`` declares (``kernels/_launch.py``), on the CPU the njit twin (parallel inside) with the same
    arguments. Every kernel launch of the package goes through here, from the family front ends (gpu_dedup/ops/)."""
    if device == "cuda":
        k.launch(items, *args)
    else:
        _note_compiling(k)
        from .compiling import await_ahead

        await_ahead(_family(k), k.__name__)  # a helper compiling this kernel ahead: its cache, not a 2nd compile
        k(*args)


def readonly_bytes(device: str, a):
    """``a`` as a read-only view on the CPU (unchanged on the GPU), for the text bytes a kernel only reads.

    Args:
        device: "cpu" or "cuda".
        a: the array (numpy on the CPU).

    Returns:
        A read-only view of ``a`` on the CPU, ``a`` itself otherwise.

    Numba compiles a CPU device function once per array type, the read-only flag included: text bytes reach a
    kernel read-only (Arrow buffers) or writable (a model's vocabulary, a joined batch), and a device function
    that two kernels call on them (fastText's ``ft_subwords``, the lm family's ``word_key``) compiled twice in
    one process. One flag for every such argument, one compile (issue 28 item 8)."""
    import numpy as np

    if device == "cuda" or not isinstance(a, np.ndarray) or not a.flags.writeable:
        return a
    v = a.view()
    v.flags.writeable = False
    return v


def launch(device: str, name: str, items: int, *args, family: str | None = None) -> None:
    """``run_kernel`` for the kernel called ``name`` of ``kernels(device, family)``: the string-keyed form, for tests
    and tools that go over a family's kernels by name; stage modules call the front ends of gpu_dedup/ops/ instead
    (tests/ops/test_ops.py checks it)."""
    run_kernel(device, getattr(kernels(device, family or "core"), name), items, *args)


_compile_seen: set[str] = set()  # stages / kernel families already checked for cached machine code in this process


def note_compiling(device: str, families: tuple[str, ...] = ("dedup",), ahead: tuple[str, ...] = ()) -> None:
    """Before a stage starts its progress bar: say now, rather than inside the bar, how many CPU kernels of
    the stages ``families`` (``warmup.KERNELS``' names) have no cached machine code yet and will be compiled
    (first run only). ``ahead``: those of the stages that a second process compiles meanwhile
    (``compiling.start_ahead``): the estimate is then the longer of the two halves. The GPU kernels compile in
    the background of a launch."""
    if device == "cuda":
        return
    from .compiling import compile_seconds, uncached_kernels

    fams = tuple(f for f in families if f not in _compile_seen)
    if not fams:
        return
    _compile_seen.update(fams)
    here = uncached_kernels(tuple(f for f in fams if f not in ahead))
    there = uncached_kernels(tuple(f for f in fams if f in ahead))
    if here or there:
        _say_compiling(len(here) + len(there), max(compile_seconds(here), compile_seconds(there)),
                       " in two processes" if there else "")


def _family(k) -> str | None:
    """The kernel family of a CPU kernel (its module kernels/<family>_cpu.py)."""
    mod = getattr(k, "__module__", None) or ""
    name = mod.rsplit(".", 1)[-1]
    if not mod.startswith(f"{__name__.partition('.')[0]}.kernels.") or not name.endswith("_cpu"):
        return None
    return name[:-len("_cpu")]


def _note_compiling(k) -> None:
    """At a CPU kernel's launch, for a stage that did not call ``note_compiling``: say once per family when
    its kernels have no cached machine code yet (later runs load them from the cache in milliseconds)."""
    fam = _family(k)
    if fam is not None:
        from .compiling import KERNELS

        stages = tuple(st for st, parts in KERNELS.items() if any(f == fam and k.__name__ in names
                                                                    for f, names in parts))
        if stages and not any(st in _compile_seen for st in stages):
            note_compiling("cpu", stages[:1])
        return
    if "?" in _compile_seen:  # a kernel outside the families: said once per process
        return
    index = getattr(getattr(getattr(k, "_cache", None), "_cache_file", None), "_index_path", None)
    if index and not os.path.exists(index):
        _compile_seen.add("?")
        from ..constants import COMPILE_S_PER_KERNEL

        _say_compiling(1, COMPILE_S_PER_KERNEL)


def _say_compiling(n: int, seconds: float, how: str = "") -> None:
    """The one line a first run prints before its bar: ``n`` kernels (compiled ``how``), about ``seconds`` to
    compile them (``compiling.compile_seconds``: measured on 2 idle cores), and where the machine code is
    cached."""
    from ..kernels import core

    where = os.environ.get("NUMBA_CACHE_DIR") or os.path.join(os.path.dirname(core.__file__), "__pycache__")
    logger.info("compiling %d kernel%s%s (first run only, ~%.0f s on an idle machine, longer on a busy one; "
                "cached in %s; `gpu-dedup warmup` compiles every command's ahead)", n, "" if n == 1 else "s", how,
                max(1.0, seconds), where)


def simulator() -> bool:
    """True when Numba's CUDA simulator is on (NUMBA_ENABLE_CUDASIM=1): CUDA kernels run on the CPU
    over NumPy arrays, which is how CI checks the GPU kernels against the CPU ones."""
    from numba import config

    return bool(config.ENABLE_CUDASIM)


def strict_device() -> bool:
    """True when the strict array backend is on: the CUDA simulator plus ``GPU_DEDUP_STRICT_DEVICE=1``."""
    from ..kernels._launch import strict_enabled

    return simulator() and strict_enabled()


def array_module(device: str):
    """cupy on a real GPU; under the simulator the strict CuPy stand-in (``gpu_dedup.testing.strict``) when
    ``GPU_DEDUP_STRICT_DEVICE=1``, else numpy; numpy for the CPU path."""
    if device == "cuda":
        if not simulator():
            import cupy

            return cupy
        if strict_device():
            from ..testing.strict import xp

            return xp
    import numpy

    return numpy


def module_of(a):
    """The array module an array belongs to: cupy, the strict backend, or numpy (anything else)."""
    import sys

    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(a, cupy.ndarray):
        return cupy
    strict = sys.modules.get(__name__.partition('.')[0] + ".testing.strict")
    if strict is not None and isinstance(a, strict.StrictArray):
        return strict.xp
    import numpy

    return numpy


def array_backend(device: str) -> str:
    """What run.json records as the array backend of a run: "cupy", "strict" or "numpy"."""
    if device == "cuda" and not simulator():
        return "cupy"
    return "strict" if device == "cuda" and strict_device() else "numpy"


def to_device(x, device: str):
    """Move a host array to where ``device``'s kernels read it: a no-op on the CPU; a copy on a GPU
    and under the simulator (which writes every kernel argument back, so it must be writable). An array
    already on the device is returned as it is."""
    import numpy

    if device != "cuda":
        return numpy.asarray(x)
    if simulator() and not strict_device():
        return numpy.array(x, copy=True)
    xp = array_module(device)
    if module_of(x) is xp:
        return x
    if isinstance(x, numpy.ndarray) and x.nbytes >= _PINNED_MIN:
        if simulator():  # the strict backend: the staging logic runs in CI, with pageable "pinned" buffers
            return _via_pinned(numpy.ascontiguousarray(x), xp, numpy.empty, lambda: None)
        import cupy
        import cupyx

        return _via_pinned(numpy.ascontiguousarray(x), cupy, cupyx.empty_pinned,
                           lambda: cupy.cuda.get_current_stream().synchronize())
    return xp.asarray(x)


_PINNED_MIN = 1 << 20
_STAGING_KEEP = 2  # staging buffers kept for reuse: the reading thread's and the main thread's
_staging: list = []  # reusable page-locked staging buffers (each grows to the largest batch)
_staging_lock = threading.Lock()


def _via_pinned(x, xp, empty_pinned, synchronize):
    """Host -> device through a page-locked staging buffer: pageable copies run at ~2.5-9 GB/s, pinned
    ones near the link's 54 GB/s (measured on an H200, 2026-12). Threads check buffers out of a small pool (the
    pipeline copies in its reading thread while the main thread may copy too); the copy is synchronized
    before the buffer goes back, and it is issued on the thread's current stream (the default stream:
    ordered with the kernels, so memory-pool reuse stays safe). ``xp``/``empty_pinned``/``synchronize``:
    cupy, cupyx.empty_pinned and the stream's synchronize on a GPU; the strict backend's stand-ins in CI."""
    import numpy

    with _staging_lock:
        fits = [b for b in _staging if b.nbytes >= x.nbytes]
        buf = min(fits, key=lambda b: b.nbytes) if fits else None
        if buf is not None:
            _staging.remove(buf)
    if buf is None:
        buf = empty_pinned(max(x.nbytes, 64 << 20), numpy.uint8)
    try:
        host = buf[:x.nbytes].view(x.dtype).reshape(x.shape)
        numpy.copyto(host, x)
        out = xp.empty(x.shape, x.dtype)
        out.set(host)
        synchronize()
    finally:
        with _staging_lock:
            _staging.append(buf)
            _staging.sort(key=lambda b: -b.nbytes)
            del _staging[_STAGING_KEEP:]
    return out


def to_host(x):
    """NumPy copy (or the array itself when it is already NumPy) of an array of any backend."""
    import numpy

    if isinstance(x, numpy.ndarray):
        return x
    return x.get() if hasattr(x, "get") else numpy.asarray(x)


def repeat_index(xp, counts):
    """Index i repeated counts[i] times (int64), for either array module (cupy.repeat takes no array
    of repeats): a searchsorted over the running total."""
    ends = xp.cumsum(counts)
    total = int(ends[-1]) if counts.shape[0] else 0
    return xp.searchsorted(ends, xp.arange(total, dtype=xp.int64), side="right").astype(xp.int64)


def split_chunks(xp, lengths, chunk: int):
    """Cut item i of ``lengths`` (int64, n) into ceil(lengths[i] / chunk) chunks of <= chunk: returns
    (doc, first, count, bounds), int64: chunk c covers [first[c], first[c] + count[c]) of item doc[c];
    item i's chunks are bounds[i]:bounds[i + 1] (bounds: n + 1). Empty items have no chunk. Used by every
    kernel that cuts long documents (text bytes, shingles) into pieces of bounded work."""
    per_doc = (lengths + chunk - 1) // chunk
    doc = repeat_index(xp, per_doc)
    bounds = xp.zeros(lengths.shape[0] + 1, xp.int64)
    xp.cumsum(per_doc, out=bounds[1:])
    first = (xp.arange(doc.shape[0], dtype=xp.int64) - bounds[doc]) * chunk
    count = xp.minimum(lengths[doc] - first, chunk)
    return doc, first, count, bounds


def line_chunks(xp, data, offsets, chunk: int):
    """Pieces of every document that start and end at line boundaries: (starts, ends, bounds), int64, in the
    array module ``xp``; document d's pieces are bounds[d]:bounds[d + 1] (empty documents have none). Each
    nominal cut of ``split_chunks`` (every ``chunk`` bytes) moves forward to just after the next newline of
    its document (or to the document's end: the piece before it then holds the rest, and empty pieces are
    allowed). A piece's work is bounded by max(chunk, the longest line) bytes; line-local counts are additive
    over pieces (kernels/domain_cuda.py, paragraph splitting in kernels/bloom_cuda.py)."""
    lengths = offsets[1:] - offsets[:-1]
    doc, first, _, bounds = split_chunks(xp, lengths, chunk)
    doc_end = offsets[1:][doc]
    nominal = offsets[:-1][doc] + first
    nl = xp.flatnonzero(data == 0x0A).astype(xp.int64)
    starts = nominal
    if nl.shape[0] and doc.shape[0]:
        k = xp.searchsorted(nl, nominal - 1, side="left")  # the first newline at or after the cut's byte - 1
        after = nl[xp.minimum(k, nl.shape[0] - 1)] + 1
        moved = xp.where(k < nl.shape[0], xp.minimum(after, doc_end), doc_end)
        starts = xp.where(first == 0, nominal, moved)
    elif doc.shape[0]:
        starts = xp.where(first == 0, nominal, doc_end)
    ends = doc_end.copy()
    if doc.shape[0] > 1:
        same = doc[1:] == doc[:-1]
        ends[:-1] = xp.where(same, starts[1:], doc_end[:-1])
    return starts, ends, bounds


def argsort_stable(xp, a):
    """Stable argsort in either module (CuPy's sort is a stable radix/merge sort and takes no kind)."""
    return xp.argsort(a, kind="stable") if xp.__name__ == "numpy" else xp.argsort(a)


def lexsort_radix(xp, keys, bounds=None):
    """The order of ``numpy.lexsort(keys)`` (the last key primary, ties in index order) from radix sorts,
    not CuPy's lexsort (one comparison merge sort per key with a gathering comparator): non-negative
    integer keys whose bit widths add up to <= 64 are packed into one uint64 and argsorted once; other keys
    take one stable argsort per key, the first key first. ``bounds``: an exclusive upper bound per key
    (None, or None for one key: measured with one reduction)."""
    keys = list(keys)
    n = int(keys[0].shape[0])
    if n == 0:
        return xp.zeros(0, xp.int64)
    bounds = list(bounds) if bounds is not None else [None] * len(keys)
    widths = []
    for k, bound in zip(keys, bounds):
        if k.dtype.kind not in "iu":
            widths = None
            break
        if bound is None:
            if k.dtype.kind == "i" and int(k.min()) < 0:
                widths = None
                break
            bound = int(k.max()) + 1
        widths.append(max(1, (max(int(bound), 1) - 1).bit_length()))
    if widths is not None and sum(widths) <= 64:
        packed = xp.zeros(n, xp.uint64)
        shift = 0
        for k, w in zip(keys, widths):
            packed |= k.astype(xp.uint64) << xp.uint64(shift)
            shift += w
        return argsort_stable(xp, packed).astype(xp.int64)
    order = argsort_stable(xp, keys[0]).astype(xp.int64)
    for k in keys[1:]:
        order = order[argsort_stable(xp, k[order])]
    return order


CPU_BATCH_BYTES = 64 << 20


def batch_bytes(requested: int | None, device: str) -> int:
    """Text bytes per batch. The CPU default bounds memory at a few hundred MB; on a GPU the default
    takes 1/32 of the free device memory (a batch needs about 4-6x its text on the device: text,
    normalized text, unit offsets, signatures), between 64 MiB and 2 GiB."""
    if requested is not None:
        return requested
    if device != "cuda" or simulator():
        return CPU_BATCH_BYTES
    import cupy

    free, _total = cupy.cuda.runtime.memGetInfo()
    chosen = int(min(max(free // 32, CPU_BATCH_BYTES), 2 << 30))
    logger.info("GPU batches of %.0f MiB of text (%.1f GiB free on the device)", chosen / 2**20, free / 2**30)
    return chosen


CPU_CACHE_BYTES = 1 << 30


def cache_bytes(requested: int | None, device: str) -> int:
    """Bytes of normalized text a run may keep from pass 1 for verification (instead of re-reading the input).
    Default: 1 GiB of host memory on the CPU; a quarter of the free device memory on a GPU (the text then
    stays on the device)."""
    if requested is not None:
        return requested
    if device != "cuda" or simulator():
        return CPU_CACHE_BYTES
    import cupy

    free, _total = cupy.cuda.runtime.memGetInfo()
    return int(free // 4)
