"""MinHash stage: permutation parameters, signatures of normalized batches, signature files.

Permutation k maps a shingle hash h to (a_k * (h mod p) + b_k) mod p, p = 2^61 - 1, computed exactly
(32-bit limbs, see ``kernels/hashing.py:permute61``). (a_k, b_k) come from SplitMix64(seed), drawn
interleaved a_0, b_0, a_1, b_1, ... by rejection (61-bit draws; a in [1, p), b in [0, p)), so the first
K' parameters of a K-permutation config equal those of a K'-permutation config with the same seed.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..config import MinHashConfig, ShingleConfig
from ..constants import MERSENNE61
from ..device import array_module, launch, split_chunks, to_device
from ..text.normalize import unit_starts

if TYPE_CHECKING:
    from ..text.normalize import Normalized

logger = logging.getLogger(__name__)

_M64 = (1 << 64) - 1


def splitmix64(state: int) -> tuple[int, int]:
    """One SplitMix64 step: returns (new_state, output). Python ints (exact)."""
    state = (state + 0x9E3779B97F4A7C15) & _M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return state, z ^ (z >> 31)


def permutation_params(cfg: MinHashConfig) -> tuple[np.ndarray, np.ndarray]:
    """(a, b): uint64 arrays of shape (K,)."""
    a = np.empty(cfg.num_perm, np.uint64)
    b = np.empty(cfg.num_perm, np.uint64)
    state = cfg.seed
    for k in range(cfg.num_perm):
        for target, low in ((a, 1), (b, 0)):
            while True:
                state, x = splitmix64(state)
                v = x >> 3
                if low <= v < MERSENNE61:
                    target[k] = v
                    break
    return a, b


@dataclass
class Signatures:
    """values: (n, K) uint32 or uint64; nshingles: (n,) int64 (0 = no shingle: exact path only)."""

    values: np.ndarray
    nshingles: np.ndarray


def compute_signatures(norm: "Normalized", shingle: ShingleConfig, cfg: MinHashConfig,
                       params: tuple[np.ndarray, np.ndarray] | None = None, device: str = "cpu") -> Signatures:
    """Signatures of normalized documents (``normalize.Normalized``; arrays of the device's module).

    CPU: one pass per document (prange) streaming shingle hashes into K running minima.
    GPU: unit (word / codepoint) starts (``unit_starts``), then one block per chunk of <= CHUNK shingles
    with atomic-min merging, so very long documents spread over many blocks. Same values either way.
    """
    xp = array_module(device)
    a, b = params if params is not None else permutation_params(cfg)
    n = len(norm)
    mask = np.uint64(0xFFFFFFFF if cfg.width == 32 else _M64)
    kind_char = shingle.kind == "char"
    if device == "cuda":
        from ..kernels import cuda as kc  # the GPU's chunk size

        nsh = norm.shingle_counts(shingle.n, kind_char)
        out = xp.full((n, cfg.num_perm), MERSENNE61, xp.uint64)
        if n:
            ubase, units = unit_starts(norm, kind_char, device)
            doc, first, count, _ = split_chunks(xp, nsh, kc.CHUNK)
            if doc.shape[0]:
                launch(device, "minhash_chunks", int(doc.shape[0]), norm.data, norm.offsets, units, ubase, doc, first,
                       count, shingle.n, kind_char, np.uint64(shingle.seed), to_device(a, device),
                       to_device(b, device), out)
        out &= mask
    else:
        out = np.empty((n, cfg.num_perm), np.uint64)
        nsh = np.empty(n, np.int64)
        launch(device, "minhash_signatures", n, norm.data, norm.offsets, kind_char, shingle.n, np.uint64(shingle.seed),
               a, b, mask, out, nsh)
    values = out.astype(xp.uint32) if cfg.width == 32 else out
    return Signatures(values, nsh)


def signatures_from_hashes(hashes: np.ndarray, offsets: np.ndarray, cfg: MinHashConfig) -> np.ndarray:
    """MinHash of sets given as 64-bit item hashes (CSR: set i = hashes[offsets[i]:offsets[i+1]]).
    Returns (n, K) uint32|uint64. Used for statistics tests and for callers with their own shingling."""
    a, b = permutation_params(cfg)
    n = offsets.shape[0] - 1
    out = np.empty((n, cfg.num_perm), np.uint64)
    mask = np.uint64(0xFFFFFFFF if cfg.width == 32 else _M64)
    launch("cpu", "minhash_from_hashes", n, np.ascontiguousarray(hashes, np.uint64),
           np.ascontiguousarray(offsets, np.int64), a, b, mask, out)
    return out.astype(np.uint32) if cfg.width == 32 else out
