"""GPU kernels of exact-substring dedup (``substring.py``'s device functions under ``numba.cuda.jit``), one
thread per range of text positions; same results as ``substring_cpu.py``."""
from numba import cuda

from . import substring
from ._build import build
from ._launch import i4, i8, kernel

_G = build(cuda.jit(device=True), substring)
g_kasai_range = _G["kasai_range"]


@kernel(sigs=[(i4, i8, i8, i8, i4)])
def lcp_kasai(text, sa, rank, starts, lcp):
    """As substring_cpu.lcp_kasai; items = number of ranges (starts.shape[0] - 1)."""
    k = cuda.grid(1)
    if k < starts.shape[0] - 1:
        g_kasai_range(text, sa, rank, starts[k], starts[k + 1], lcp)
