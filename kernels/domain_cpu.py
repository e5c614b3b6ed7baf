"""CPU kernels of the filter stage's domain rules (``domain.py``'s device functions under ``numba.njit``),
parallel over documents; same results as ``domain_cuda.py``."""
import numpy as np
from numba import njit, prange

from . import domain
from ._build import build

_C = build(njit(cache=False, nogil=True), domain)
c_domain_stats = _C["domain_stats"]


@njit(parallel=True, cache=True, nogil=True)
def domain_stats(data, offsets, ranges, symbols, kw_data, kw_off, stats):
    """stats[d] = document d's statistics (``domain.domain_stats``). data uint8 (T,); offsets int64 (n+1,);
    stats int64 (n, N_STATS)."""
    for d in prange(offsets.shape[0] - 1):
        # int64(d): Numba types a prange index int64 when it types the kernel and uint64 in the parallel loop
        # it lowers, so a bare d compiled domain_stats twice (issue 28 item 8)
        c_domain_stats(data, offsets[d], offsets[d + 1], ranges, symbols, kw_data, kw_off, stats, np.int64(d))
