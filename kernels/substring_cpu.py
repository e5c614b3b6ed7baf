"""CPU kernels of exact-substring dedup (``substring.py``'s device functions under ``numba.njit``), parallel over
ranges of text positions; same results as ``substring_cuda.py``."""
from numba import njit, prange

from . import substring
from ._build import build

_C = build(njit(cache=False, nogil=True), substring)
c_kasai_range = _C["kasai_range"]


@njit(parallel=True, cache=True, nogil=True)
def lcp_kasai(text, sa, rank, starts, lcp):
    """lcp (int32 (n,)) of suffix array sa over text (int32 (n,)); rank = inverse of sa (int64 (n,)); starts
    int64 (c+1,): range k covers text positions [starts[k], starts[k+1]), starts[c] = n."""
    for k in prange(starts.shape[0] - 1):
        c_kasai_range(text, sa, rank, starts[k], starts[k + 1], lcp)
