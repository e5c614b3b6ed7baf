"""The pairwise step: for each member of a cluster (rows in keep order), the largest cosine to an *earlier*
member (``max_sim_to_earlier``, ``within_cluster_max_sim``), in column blocks (memory O(n_c x block)).

One algorithm (``_max_sim``) serves both array libraries through a small adapter of the few operations that
differ: ``_NumpyOps`` (numpy/BLAS on the host, the CPU path) and ``_TorchOps`` (torch on a device, the GPU
path). chain="kept" decides each block's members in order on the host (``_greedy_block``, Numba).
See the decision and chain rules in the package docstring (``gpu_dedup.semantic``).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..constants import SEMANTIC_TIE_TOL
from ..errors import ConfigError
from .config import bar32


def _greedy_block_py(pre_max, inblock, t, out_max, kept):
    """Sequential part of chain="kept" for one column block. pre_max (b,): best over kept rows before the
    block; inblock (b, b): cosines inside the block, valid above the diagonal (row < col); kept (b,) bool
    is written as the block's members are decided in order. The matched row is chosen afterwards
    (``_earliest_tie``), over the same kept rows."""
    b = inblock.shape[0]
    for c in range(b):
        m = pre_max[c]
        for r in range(c):
            if kept[r] and inblock[r, c] > m:
                m = inblock[r, c]
        out_max[c] = m
        kept[c] = not (m >= t)


_greedy_jit = None


def _greedy_block(*args) -> None:
    global _greedy_jit
    if _greedy_jit is None:
        from numba import njit

        _greedy_jit = njit(cache=True, nogil=True)(_greedy_block_py)
    _greedy_jit(*args)


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


def max_sim_to_earlier(x, block: int = 1024, kept_only: bool = False, threshold: float | None = None):
    """Largest cosine of each row to an earlier row.

    ``max_sim[j] = max(0, max_{i<j} x_i . x_j)`` and ``argmax[j]`` is the smallest i attaining it. Cosines
    within ``SEMANTIC_TIE_TOL`` of the maximum count as attaining it: float32 rounding differs with the block,
    the BLAS threads and the device, and the earliest row wins whatever they are. A row with no earlier row
    at positive cosine (j = 0 in particular) gets 0 and 0. Memory: one (n, block) float32 block of
    similarities plus x. Work: n^2 d / 2 multiply-adds.

    Args:
        x: float32 (n, d) unit rows in keep order: a numpy array (numpy/BLAS path) or a torch tensor (torch
            path on the tensor's device).
        block: columns per block.
        kept_only: only earlier rows that are themselves kept count; a row is kept iff its max_sim <
            ``threshold``. Decided in order.
        threshold: the similarity bar 1 - eps (required with ``kept_only``).

    Returns:
        (max_sim float32 (n,), argmax int64 (n,)), of x's kind and device.

    Raises:
        ConfigError: a bad ``block``, ``kept_only`` without ``threshold``, or x not 2-d.
    """
    if not isinstance(block, int) or isinstance(block, bool) or block < 1:
        raise ConfigError(f"block must be a positive int, got {block!r}")
    if kept_only and threshold is None:
        raise ConfigError("kept_only=True needs threshold (the similarity bar 1 - eps)")
    if x.ndim != 2:
        raise ConfigError(f"x must be a 2-d (n, d) array of unit rows, got shape {tuple(x.shape)}")
    t = bar32(threshold) if kept_only else None
    ops = _TorchOps(x.device) if _is_torch(x) else _NUMPY
    return _max_sim(ops, ops.float32(x), block, kept_only, t)


class _NumpyOps:
    """The array operations of ``_max_sim`` and ``within_cluster_max_sim`` on numpy arrays (host, BLAS)."""

    @staticmethod
    def float32(x):
        return np.ascontiguousarray(x, dtype=np.float32)

    @staticmethod
    def full(n: int, value, dtype):
        return np.full(n, value, dtype)

    @staticmethod
    def mask_not_earlier(sims) -> None:
        """In place on the square block of rows s..e: row i >= column s+c is not earlier -> -inf."""
        sims[np.tri(sims.shape[0], dtype=bool)] = -np.inf

    @staticmethod
    def col_max(sims):
        """Largest value of every column."""
        return sims.max(axis=0)

    @staticmethod
    def first_at_least(sims, bound):
        """First row i with sims[i, c] >= bound[c], for every column c (0 where there is none)."""
        return (sims >= bound).argmax(axis=0)

    @staticmethod
    def flatnonzero(mask):
        return np.flatnonzero(mask)

    @staticmethod
    def host(a) -> np.ndarray:
        return a

    @staticmethod
    def from_host(a: np.ndarray):
        return a


_NUMPY = _NumpyOps()


class _TorchOps:
    """The same operations on torch tensors on ``device`` (torch is imported here, on the torch path only)."""

    def __init__(self, device) -> None:
        import torch

        self.torch = torch
        self.device = device

    def float32(self, x):
        return x.to(self.torch.float32).contiguous()

    def full(self, n: int, value, dtype):
        return self.torch.full((n,), value, dtype=getattr(self.torch, np.dtype(dtype).name), device=self.device)

    def mask_not_earlier(self, sims) -> None:
        tri = self.torch.ones((sims.shape[0], sims.shape[0]), dtype=self.torch.bool, device=self.device).tril()
        sims.masked_fill_(tri, float("-inf"))

    def col_max(self, sims):
        return sims.max(dim=0).values

    def first_at_least(self, sims, bound):
        return (sims >= bound).to(self.torch.uint8).argmax(dim=0)  # torch: first maximal index on ties

    def flatnonzero(self, mask):
        return self.torch.nonzero(mask).reshape(-1)

    def host(self, a) -> np.ndarray:
        return a.cpu().numpy()

    def from_host(self, a: np.ndarray):
        return self.torch.as_tensor(a).to(self.device)


def _max_sim(ops, x, block: int, kept_only: bool, t):
    """``max_sim_to_earlier`` on float32 contiguous x, with the array operations of ``ops``."""
    n = x.shape[0]
    best = ops.full(n, 0.0, np.float32)
    arg = ops.full(n, 0, np.int64)
    kept = ops.full(n, True, np.bool_)
    for s in range(0, n, block):
        e = min(n, s + block)
        b = e - s
        sims = x[:e] @ x[s:e].T  # sims[i, c] = cos(x_i, x_{s+c})
        ops.mask_not_earlier(sims[s:e])  # row i >= column s+c: not earlier
        if not kept_only:
            m = ops.col_max(sims)
        else:
            pre_rows = ops.flatnonzero(kept[:s])
            pm = ops.col_max(sims[pre_rows]) if pre_rows.shape[0] else ops.full(b, -np.inf, np.float32)
            m = np.empty(b, np.float32)
            kb = np.ones(b, bool)
            _greedy_block(ops.host(pm).astype(np.float32), np.ascontiguousarray(ops.host(sims[s:e])), t, m, kb)
            m = ops.from_host(m)
            kept[s:e] = ops.from_host(kb)
            sims[~kept[:e]] = -np.inf  # only kept rows may be matched
        best[s:e] = m
        arg[s:e] = _earliest_tie(ops, sims, m)
    return _zero_unmatched(best, arg)


def _earliest_tie(ops, sims, m):
    """The first row of every column of ``sims`` whose cosine is within ``SEMANTIC_TIE_TOL`` of the column's
    maximum ``m``: ties go to the earliest row whatever the blocking rounded (see ``max_sim_to_earlier``)."""
    return ops.first_at_least(sims, m - SEMANTIC_TIE_TOL)


def _zero_unmatched(best, arg):
    """Members with no earlier (or no kept earlier) member get similarity 0 and match index 0, as in
    SemDeDup's output; works on numpy arrays and torch tensors alike."""
    none = ~(best > 0)
    best[none] = 0.0
    arg[none] = 0
    return best, arg


def within_cluster_max_sim(x: np.ndarray, order: np.ndarray, offsets: np.ndarray, *, block: int = 1024,
                           kept_only: bool = False, threshold: float | None = None, backend: str = "numpy",
                           torch_device: str = "cpu") -> tuple[np.ndarray, np.ndarray]:
    """``max_sim_to_earlier`` within every cluster of ``cluster_order``'s (order, offsets).

    Args:
        x: float32 (n, d) unit rows (host).
        order: int64 (n,) rows grouped by cluster, each in keep order.
        offsets: int64 (k+1,) cluster c is ``order[offsets[c]:offsets[c+1]]``.
        block: columns per block.
        kept_only: only kept earlier members count (chain="kept").
        threshold: the similarity bar 1 - eps (required with ``kept_only``).
        backend: "numpy", or "torch" on ``torch_device`` (x is copied there once).
        torch_device: the torch device of the "torch" backend.

    Returns:
        Host arrays (max_sim float32 (n,), nearest int64 (n,)): nearest is the row of the earlier member
        attaining max_sim, -1 for the first member of each cluster (max_sim 0).

    Raises:
        ConfigError: an unknown backend.
    """
    n = x.shape[0]
    if backend not in ("numpy", "torch"):
        raise ConfigError(f"backend must be 'numpy' or 'torch', got {backend!r}")
    order = np.asarray(order, np.int64)
    sizes = np.diff(offsets)
    multi = np.flatnonzero(sizes > 1)
    ops = _NUMPY if backend == "numpy" else _TorchOps(torch_device)
    x = ops.from_host(np.ascontiguousarray(x, dtype=np.float32))  # copied to the device once
    order = ops.from_host(order)
    best = ops.full(n, 0.0, np.float32)
    nearest = ops.full(n, -1, np.int64)
    for c in multi:
        mem = order[int(offsets[c]):int(offsets[c + 1])]
        m, a = max_sim_to_earlier(x[mem], block, kept_only, threshold)
        best[mem] = m
        nearest[mem[1:]] = mem[a[1:]]
    return ops.host(best), ops.host(nearest)
