"""Device selection: ``device="auto"|"cpu"|"cuda"``. GPU libraries are imported lazily, only here and in
the GPU code paths, so the package imports and runs on machines without CUDA.

"auto" picks the GPU when one is usable (numba.cuda sees a device and cupy imports) and logs the choice;
"cuda" without a usable GPU raises. There is never a silent fallback.
"""
from __future__ import annotations

import functools
import logging

logger = logging.getLogger(__name__)


@functools.lru_cache(maxsize=1)
def gpu_status() -> tuple[bool, str]:
    """(usable, reason). Cached; never raises."""
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
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")
    usable, reason = gpu_status()
    if device == "cuda":
        if not usable:
            raise RuntimeError(f"device='cuda' was requested but no usable GPU was found: {reason}. "
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
