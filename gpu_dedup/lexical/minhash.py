"""MinHash stage: permutation parameters, signatures of normalized batches, signature files.

Permutation k maps a shingle hash h to (a_k * (h mod p) + b_k) mod p, p = 2^61 - 1, computed exactly
(32-bit limbs, see ``kernels/core.py:permute61``). (a_k, b_k) come from SplitMix64(seed), drawn
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
from ..ops import core
from ..runtime.device import array_module

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
    """Signatures of normalized documents (``normalize.Normalized``; arrays of the device's module), by
    ``ops.core.minhash`` (the same values on the CPU and the GPU)."""
    xp = array_module(device)
    a, b = params if params is not None else permutation_params(cfg)
    mask = np.uint64(0xFFFFFFFF if cfg.width == 32 else _M64)
    out, nsh = core.minhash(device, norm, shingle.kind == "char", shingle.n, shingle.seed, a, b, mask)
    values = out.astype(xp.uint32) if cfg.width == 32 else out
    return Signatures(values, nsh)


def signatures_from_hashes(hashes: np.ndarray, offsets: np.ndarray, cfg: MinHashConfig) -> np.ndarray:
    """MinHash of sets given as 64-bit item hashes (CSR: set i = hashes[offsets[i]:offsets[i+1]]).
    Returns (n, K) uint32|uint64. Used for statistics tests and for callers with their own shingling."""
    a, b = permutation_params(cfg)
    out = core.minhash_of_hashes_host(hashes, offsets, a, b, np.uint64(0xFFFFFFFF if cfg.width == 32 else _M64))
    return out.astype(np.uint32) if cfg.width == 32 else out
