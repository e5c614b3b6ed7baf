"""Front end of the exact-substring kernel family (``kernels/substring_cpu.py`` / ``kernels/substring_cuda.py``):
the LCP array of a suffix array by Kasai's algorithm over ranges of KASAI_RANGE text positions (a CPU iteration
or a GPU thread each). One signature on both targets; the ranges are cut here."""
from __future__ import annotations

import numpy as np

from .. import constants as C
from ..runtime.device import array_module, run_kernel, to_device


def lcp_kasai(device: str, text, sa):
    """int32 (n,): lcp[r] = LCP(suffix sa[r], suffix sa[r + 1]), lcp[n - 1] = 0, of text (int32 (n,)) and its
    suffix array sa (int64 (n,)), both of the device's array module. Work per range: its length plus the longest
    LCP it meets."""
    if device == "cuda":
        from ..kernels import substring_cuda as k
    else:
        from ..kernels import substring_cpu as k
    xp = array_module(device)
    n = int(text.shape[0])
    lcp = xp.zeros(n, xp.int32)
    if n == 0:
        return lcp
    rank = xp.empty(n, xp.int64)
    rank[sa] = xp.arange(n, dtype=xp.int64)
    starts = to_device(np.append(np.arange(0, n, C.KASAI_RANGE, dtype=np.int64), np.int64(n)), device)
    run_kernel(device, k.lcp_kasai, int(starts.shape[0]) - 1, text, sa, rank, starts, lcp)
    return lcp
