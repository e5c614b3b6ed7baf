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

Argument types: every kernel declares the argument types its launches pass (``sigs=``, a list of tuples
of the short aliases below: ``u1`` a C-contiguous 1-d uint8 array, ``i8_2`` a 2-d int64 one, ``I8`` a
Python int, ``U8`` a numpy.uint64, ``B`` a bool, ...). Under the CUDA simulator a launch whose argument
types (``numba.typeof``) are not declared raises, so the test suite keeps the declarations equal to the
real launches; ``gpu_dedup.testing.kernel_check`` compiles every declared signature with the real CUDA
compiler for sm_90 (NVVM, then ptxas) without a GPU, and fails a kernel that declares none.
"""
import math
import os

import numba
import numpy as np
from numba import config, cuda, types

STRICT_ENV = "GPU_DEDUP_STRICT_DEVICE"
TPB = 128           # threads per block unless a kernel declares otherwise
MAX_GRID = 1 << 16  # blocks of a grid-stride launch on a GPU: enough to fill any current GPU many times over
SIM_GRID = 2        # ... and under the simulator, which runs every thread as a Python thread: few
SIM_THREADS = 8     # threads per block of a grid-stride launch under the simulator

if config.ENABLE_CUDASIM:  # the simulator's barrier scheduler without its busy-wait (same semantics)
    from ..testing.simulator import install

    install()


# argument-type aliases of ``sigs=`` (numpy's dtype codes): arrays C-contiguous, 1-d unless suffixed _2
i1, u1, u4, i4, u8, i8, f4, f8, b1 = (types.Array(t, 1, "C") for t in (
    types.int8, types.uint8, types.uint32, types.int32, types.uint64, types.int64, types.float32, types.float64,
    types.boolean))
u1_2, u4_2, i4_2, u8_2, i8_2, f4_2, f8_2 = (types.Array(t, 2, "C") for t in (
    types.uint8, types.uint32, types.int32, types.uint64, types.int64, types.float32, types.float64))
I8, U8, F4, F8, B = types.int64, types.uint64, types.float32, types.float64, types.boolean


ALIASES = ("i1", "u1", "u4", "i4", "u8", "i8", "f4", "f8", "b1", "u1_2", "u4_2", "i4_2", "u8_2", "i8_2", "f4_2", "f8_2",
           "I8", "U8", "F4", "F8", "B")


def alias(t) -> str:
    """The short name of an argument type in ``sigs=`` (the type itself where there is none)."""
    return next((name for name in ALIASES if globals()[name] == t), str(t))


def arg_type(a):
    """The Numba type of a kernel argument as a signature names it: ``numba.typeof``, an array's
    read-only and alignment flags dropped (they do not change the compiled code's arithmetic)."""
    t = numba.typeof(a)
    if isinstance(t, types.Array):
        return types.Array(t.dtype, t.ndim, t.layout)
    return t


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
                            "kernels take device arrays only: move it with gpu_dedup.runtime.device.to_device first")
    return out


class Kernel:
    """A compiled CUDA kernel with the argument guard and its declared geometry: ``k.launch(items, *args)``
    (what ``gpu_dedup.runtime.device.run_kernel`` calls), or ``k[grid, block](*args)`` for an explicit geometry (tests)."""

    def __init__(self, fn, per_block: bool = False, tpb: int = TPB, stride: bool = False, sigs=None):
        self.__name__ = fn.__name__
        self.module = fn.__module__
        self.sigs = [tuple(sig) for sig in sigs] if sigs is not None else []
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
            passed = device_args(name, args)
            if config.ENABLE_CUDASIM:
                self.check_sig(passed)
            return launch(*passed)
        return run

    def check_sig(self, args) -> None:
        """Raise unless the argument types of a launch (simulator) are among the declared ``sigs``: the
        compile check compiles exactly those (module doc)."""
        sig = tuple(arg_type(a) for a in args)
        if sig not in self.sigs:
            declared = [f"({', '.join(map(alias, s))})" for s in self.sigs]
            raise TypeError(f"kernel {self.__name__} ({self.module}) launched with argument types "
                            f"({', '.join(map(alias, sig))}), not among its declared sigs [{', '.join(declared)}]: add "
                            "the tuple to sigs= of its @kernel (aliases in kernels/_launch.py) so the real compiler "
                            "checks it")


def kernel(fn=None, *, per_block: bool = False, tpb: int = TPB, stride: bool = False, sigs=None):
    """Decorator for a GPU kernel: ``@kernel(sigs=[(u1, i8, ...)])`` (one item per thread, TPB threads, a
    block per TPB items) or ``@kernel(per_block=..., tpb=..., stride=..., sigs=...)`` (see ``Kernel`` and the
    module doc; a kernel without ``sigs`` cannot be launched under the simulator nor pass the compile check)."""
    if fn is None:
        return lambda f: Kernel(f, per_block, tpb, stride, sigs)
    return Kernel(fn)
