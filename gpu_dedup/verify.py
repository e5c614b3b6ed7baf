"""Verification stage: exact shingle-set Jaccard of candidate pairs.

Sets are the distinct 64-bit XXH64 shingle hashes of each document (sorted), so "exact" is exact on
the hashed sets: two distinct shingles collide with probability 2^-64 per pair, i.e. negligible next
to the LSH sampling error. Intersections are merge walks in a kernel.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from .config import ShingleConfig
from .normalize import Normalized

logger = logging.getLogger(__name__)


@dataclass
class ShingleSets:
    """CSR of sorted distinct shingle hashes: set j is hashes[offsets[j]:offsets[j]+sizes[j]]."""

    hashes: np.ndarray  # uint64
    offsets: np.ndarray  # int64 (m,)
    sizes: np.ndarray  # int64 (m,)

    def __len__(self) -> int:
        return int(self.sizes.shape[0])

    def get(self, j: int) -> np.ndarray:
        return self.hashes[self.offsets[j]:self.offsets[j] + self.sizes[j]]

    @staticmethod
    def concat(parts: list["ShingleSets"]) -> "ShingleSets":
        if not parts:
            return ShingleSets(np.zeros(0, np.uint64), np.zeros(0, np.int64), np.zeros(0, np.int64))
        shift = np.cumsum([0] + [p.hashes.shape[0] for p in parts[:-1]])
        return ShingleSets(np.concatenate([p.hashes for p in parts]),
                           np.concatenate([p.offsets + s for p, s in zip(parts, shift)]),
                           np.concatenate([p.sizes for p in parts]))


def shingle_sets(norm: Normalized, docs: np.ndarray, shingle: ShingleConfig) -> ShingleSets:
    """Sorted distinct shingle hashes of documents ``docs`` (int64 indexes into ``norm``), compacted.
    Memory: 8 bytes per shingle of the selected documents (twice, transiently)."""
    from .kernels import cpu

    docs = np.ascontiguousarray(docs, np.int64)
    units = norm.codepoints[docs] if shingle.kind == "char" else norm.words[docs]
    counts = np.maximum(units - shingle.n + 1, 0)
    reserve = np.zeros(docs.shape[0] + 1, np.int64)
    np.cumsum(counts, out=reserve[1:])
    raw = np.empty(int(reserve[-1]), np.uint64)
    sizes = np.empty(docs.shape[0], np.int64)
    if docs.shape[0]:
        cpu.shingle_sets(norm.data, norm.offsets, docs, shingle.kind == "char", shingle.n, np.uint64(shingle.seed),
                         reserve, raw, sizes)
    offsets = np.zeros(docs.shape[0], np.int64)
    if docs.shape[0] > 1:
        np.cumsum(sizes[:-1], out=offsets[1:])
    keep = (np.arange(raw.shape[0]) - np.repeat(reserve[:-1], counts)) < np.repeat(sizes, counts)
    return ShingleSets(raw[keep], offsets, sizes)


def jaccard(sets: ShingleSets, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Exact Jaccard of pairs of sets (int64 indexes into ``sets``) -> float64 (p,)."""
    from .kernels import cpu

    left = np.ascontiguousarray(left, np.int64)
    right = np.ascontiguousarray(right, np.int64)
    out = np.empty(left.shape[0], np.float64)
    if left.shape[0]:
        cpu.jaccard_pairs(sets.hashes, sets.offsets, sets.sizes, left, right, out)
    return out
