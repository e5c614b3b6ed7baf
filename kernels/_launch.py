"""How GPU kernels are compiled and launched: ``@kernel`` = ``numba.cuda.jit(cache=True)`` plus a guard that
every array argument is a device array, plus the kernel's launch geometry, declared once beside its source.

Geometry: a kernel takes one work item per thread (default) or per block (``per_block=True``), ``tpb``
threads per block. A plain kernel is launched with enough blocks for every item; a grid-stride kernel
(``stride=True``) loops over its items, so ``geometry`` caps its grid (and, under the simulator, its
threads: every simulated thread is a Python thread). Results never depend on the geometry (tests vary it).

On a real GPU Numba would silently copy a host (NumPy) argument to the device and back on every launch: a
hidden transfer, so it is refused. Under the CUDA simulator with ``GPU_DEDUP_STRICT_DEVICE=1`` (the strict
array backend, ``gpu_dedup/strict.py``) device arrays are ``StrictArray``s: the guard hands the simulator
their buffers (it runs the kernel over NumPy arrays and writes them back) and refuses plain NumPy arrays,
exactly as on a GPU. Under the simulator without strict mode NumPy arrays are the device arrays.

``cache=True``: each process loads the compiled kernels from ``__pycache__`` instead of recompiling them
(numba-cuda keys the cache on the kernel's source file and argument types).
"""
import math
import os

import numpy as np
from numba import config, cuda

STRICT_ENV = "GPU_DEDUP_STRICT_DEVICE"
TPB = 128           # threads per block unless a kernel declares otherwise
MAX_GRID = 1 << 16  # blocks of a grid-stride launch on a GPU: enough to fill any current GPU many times over
SIM_GRID = 2        # ... and under the simulator, which runs every thread as a Python thread: few
SIM_THREADS = 8     # threads per block of a grid-stride launch under the simulator


def blocks(n: int, tpb: int = TPB) -> int:
    """Blocks of ``tpb`` threads that cover ``n`` items, one per thread (at least one block)."""
    return max(1, math.ceil(n / tpb))


def geometry(items: int, tpb: int, per_block: bool) -> tuple[int, int]:
    """(blocks, threads per block) for a grid-stride launch over ``items`` work items, one per thread
    (per_block=False) or one per block. The kernels' results do not depend on it; under the simulator
    it keeps the Python thread count small (tests shrink it further, or raise it, to cover geometries)."""
    threads = tpb
    cap = MAX_GRID
    if config.ENABLE_CUDASIM:
        threads = min(tpb, SIM_THREADS)
        cap = SIM_GRID
    need = items if per_block else math.ceil(items / threads)
    return max(1, min(need, cap)), threads


def strict_enabled() -> bool:
    """True when ``GPU_DEDUP_STRICT_DEVICE`` asks for the strict array backend (read at every call, so a
    test can switch it)."""
    return os.environ.get(STRICT_ENV, "").strip() not in ("", "0")


def device_args(name: str, args) -> list:
    """The arguments a launch of kernel ``name`` passes on: strict arrays unwrapped for the simulator, host
    arrays refused where they would not be device arrays (module doc)."""
    sim = bool(config.ENABLE_CUDASIM)
    host_ok = sim and not strict_enabled()
    out = list(args)
    for i, a in enumerate(args):
        buffer = getattr(a, "__strict_device_buffer__", None)
        if buffer is not None:
            out[i] = buffer()
        elif isinstance(a, np.ndarray) and not host_ok:
            raise TypeError(f"kernel {name}: argument {i} is a host numpy.ndarray (shape {a.shape}, {a.dtype}); "
                            "kernels take device arrays only: move it with gpu_dedup.device.to_device first")
    return out


class Kernel:
    """A compiled CUDA kernel with the argument guard and its declared geometry: ``k.launch(items, *args)``
    (what ``gpu_dedup.device.launch`` calls), or ``k[grid, block](*args)`` for an explicit geometry (tests)."""

    def __init__(self, fn, per_block: bool = False, tpb: int = TPB, stride: bool = False):
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        fn.__globals__.setdefault("__warningregistry__", {})  # see _build.build: simulator threads and warnings
        self.dispatcher = cuda.jit(cache=True)(fn)
        self.per_block = per_block
        self.tpb = tpb
        self.stride = stride

    def grid(self, items: int) -> tuple[int, int]:
        """(blocks, threads per block) of a launch over ``items`` work items."""
        if self.stride:
            return geometry(items, self.tpb, self.per_block)
        return (max(1, items) if self.per_block else blocks(items, self.tpb)), self.tpb

    def launch(self, items: int, *args) -> None:
        self[self.grid(items)](*args)

    def __getitem__(self, launch_config):
        launch = self.dispatcher[launch_config]
        name = self.__name__

        def run(*args):
            return launch(*device_args(name, args))
        return run


def kernel(fn=None, *, per_block: bool = False, tpb: int = TPB, stride: bool = False):
    """Decorator for a GPU kernel: ``@kernel`` (one item per thread, TPB threads, a block per TPB items) or
    ``@kernel(per_block=..., tpb=..., stride=...)`` (see ``Kernel`` and the module doc)."""
    if fn is None:
        return lambda f: Kernel(f, per_block, tpb, stride)
    return Kernel(fn)
