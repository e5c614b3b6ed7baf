"""MinHash stage: signature parameters, signatures of normalized batches, signature files.

Two families (``MinHashConfig.family``; the contract records which):

- "fss" (default): fast similarity sketching (``kernels/core.py`` fss_sketch): about one value a*h + b mod 2^64
  per shingle and round into K buckets, FSS_ROUNDS rounds, then one MinHash per bucket still empty. Parameters:
  SplitMix64(seed) drawn a_0, b_0, a_1, b_1, ... for the rounds, then for the K buckets; each a made odd.
- "exact": permutation k maps a shingle hash h to (a_k * (h mod p) + b_k) mod p, p = 2^61 - 1, computed exactly
  (32-bit limbs, see ``kernels/core.py:permute61``). (a_k, b_k) come from SplitMix64(seed), drawn interleaved
  a_0, b_0, a_1, b_1, ... by rejection (61-bit draws; a in [1, p), b in [0, p)), so the first K' parameters of a
  K-permutation config equal those of a K'-permutation config with the same seed.

Either way two documents agree in a position with probability their shingle sets' Jaccard; the candidates LSH
finds are verified on the exact sets, so the family decides recall only (benchmarks/sketch_families.py measures
it against the S-curve, benchmarks/sketch_bench.py its speed against rensa's).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..config import MinHashConfig, ShingleConfig
from ..constants import FSS_ROUNDS, MERSENNE61
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


def permutation_params(cfg: MinHashConfig, rounds: int = FSS_ROUNDS) -> tuple[np.ndarray, np.ndarray]:
    """(a, b): uint64 arrays, the family's parameters (module doc): (K,) for "exact", (rounds + K,) for "fss"
    (the rounds', then the buckets'; ``rounds`` other than FSS_ROUNDS only for benchmarks/sketch_families.py)."""
    if cfg.family == "fss":
        n = rounds + cfg.num_perm
        a = np.empty(n, np.uint64)
        b = np.empty(n, np.uint64)
        state = cfg.seed
        for k in range(n):
            state, x = splitmix64(state)
            a[k] = x | 1
            state, b[k] = splitmix64(state)
        return a, b
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
    out, nsh = core.minhash(device, norm, shingle.kind == "char", shingle.n, shingle.seed, a, b, cfg.width,
                            cfg.family)
    values = out.astype(xp.uint32) if cfg.width == 32 else out
    return Signatures(values, nsh)


def signatures_from_hashes(hashes: np.ndarray, offsets: np.ndarray, cfg: MinHashConfig) -> np.ndarray:
    """Signatures of sets given as 64-bit item hashes (CSR: set i = hashes[offsets[i]:offsets[i+1]]).
    Returns (n, K) uint32|uint64. Used for statistics tests and for callers with their own shingling."""
    a, b = permutation_params(cfg)
    out = core.minhash_of_hashes_host(hashes, offsets, a, b, cfg.width, cfg.family)
    return out.astype(np.uint32) if cfg.width == 32 else out
