"""GPU kernels of the filter stage's domain rules (``domain.py``'s device functions under
``numba.cuda.jit``), one thread per document; same results as ``domain_cpu.py``."""
from numba import cuda

from . import domain
from ._build import build
from ._launch import i4_2, i8, i8_2, kernel, u1

_G = build(cuda.jit(device=True), domain)
g_domain_stats = _G["domain_stats"]


@kernel(sigs=[(u1, i8, i4_2, u1, u1, i8, i8_2)])
def domain_stats(data, offsets, ranges, symbols, kw_data, kw_off, stats):
    d = cuda.grid(1)
    if d < offsets.shape[0] - 1:
        g_domain_stats(data, offsets[d], offsets[d + 1], ranges, symbols, kw_data, kw_off, stats, d)
