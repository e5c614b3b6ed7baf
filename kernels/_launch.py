"""How GPU kernels are compiled and launched: ``@kernel`` = ``numba.cuda.jit(cache=True)`` plus a guard that
every array argument is a device array.

On a real GPU Numba would silently copy a host (NumPy) argument to the device and back on every launch: a
hidden transfer, so it is refused. Under the CUDA simulator with ``GPU_DEDUP_STRICT_DEVICE=1`` (the strict
array backend, ``gpu_dedup/strict.py``) device arrays are ``StrictArray``s: the guard hands the simulator
their buffers (it runs the kernel over NumPy arrays and writes them back) and refuses plain NumPy arrays,
exactly as on a GPU. Under the simulator without strict mode NumPy arrays are the device arrays.

``cache=True``: each process loads the compiled kernels from ``__pycache__`` instead of recompiling them
(numba-cuda keys the cache on the kernel's source file and argument types).
"""
import os

import numpy as np
from numba import config, cuda

STRICT_ENV = "GPU_DEDUP_STRICT_DEVICE"


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
    """A compiled CUDA kernel launched as ``k[grid, block](*args)``, with the argument guard."""

    def __init__(self, fn):
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self.dispatcher = cuda.jit(cache=True)(fn)

    def __getitem__(self, launch_config):
        launch = self.dispatcher[launch_config]
        name = self.__name__

        def run(*args):
            return launch(*device_args(name, args))
        return run


def kernel(fn) -> Kernel:
    """Decorator for a GPU kernel (see ``Kernel``)."""
    return Kernel(fn)
