"""CPU-only helpers of kernels/core_cpu.py against numpy (``sort_distinct``: the shingle sets' sort)."""
import numpy as np
import pytest
from numba import njit

from gpu_dedup.kernels import core_cpu


@njit
def _sort_distinct(a, tmp, hist):
    return core_cpu.sort_distinct(a, tmp, hist)


def _cases():
    rng = np.random.default_rng(1)
    yield np.zeros(0, np.uint64)
    yield np.array([5], np.uint64)
    yield np.full(300, 7, np.uint64)  # every byte pass skipped
    for c in (2, core_cpu.RADIX_MIN - 1, core_cpu.RADIX_MIN, core_cpu.RADIX_MIN + 1, 400, 5000):
        yield rng.integers(0, 2**64, c, dtype=np.uint64)
        yield rng.integers(0, 5, c, dtype=np.uint64)  # repeats; 7 constant bytes: an odd number of passes runs
        yield rng.integers(0, 2**64, c, dtype=np.uint64) & np.uint64(0xFF00FF0000000000)  # 2 passes
        yield np.repeat(rng.integers(0, 2**64, max(1, c // 10), dtype=np.uint64), 10)  # a repeated paragraph
        yield np.sort(rng.integers(0, 2**64, c, dtype=np.uint64))[::-1].copy()
        yield rng.integers(2**63, 2**64, c, dtype=np.uint64)  # the top bit set (unsigned order)


@pytest.mark.parametrize("a", list(_cases()), ids=lambda a: str(len(a)))
def test_sort_distinct_is_numpy_unique(a):
    want = np.unique(a)
    b = a.copy()
    tmp = np.full(len(b) + 3, 99, np.uint64)  # longer than needed: only its front is used
    m = _sort_distinct(b, tmp, np.full((8, 256), -1, np.int64))
    assert m == len(want) and np.array_equal(b[:m], want)
