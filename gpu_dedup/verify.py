"""Verification stage: exact shingle-set Jaccard of candidate pairs.

Sets are the distinct 64-bit XXH64 shingle hashes of each document (sorted), so "exact" is exact on
the hashed sets: two distinct shingles collide with probability 2^-64 per pair, i.e. negligible next
to the LSH sampling error. Intersections are merge walks in a kernel.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np

from .config import ShingleConfig
from .normalize import Normalized

logger = logging.getLogger(__name__)


@dataclass
class ShingleSets:
    """CSR of sorted distinct shingle hashes: set j is hashes[offsets[j]:offsets[j]+sizes[j]]."""

    hashes: Any  # uint64 (numpy, or cupy on a GPU)
    offsets: Any  # int64 (m,)
    sizes: Any  # int64 (m,)

    def __len__(self) -> int:
        return int(self.sizes.shape[0])

    def get(self, j: int):
        """Set j (an array of the sets' module). Bounds become Python ints: a device scalar is no slice index."""
        start = int(self.offsets[j])
        return self.hashes[start:start + int(self.sizes[j])]

    @staticmethod
    def concat(parts: list["ShingleSets"], xp=np) -> "ShingleSets":
        if not parts:
            return ShingleSets(xp.zeros(0, xp.uint64), xp.zeros(0, xp.int64), xp.zeros(0, xp.int64))
        shift = np.cumsum([0] + [int(p.hashes.shape[0]) for p in parts[:-1]])
        return ShingleSets(xp.concatenate([p.hashes for p in parts]),
                           xp.concatenate([p.offsets + int(s) for p, s in zip(parts, shift)]),
                           xp.concatenate([p.sizes for p in parts]))


def shingle_sets(norm: Normalized, docs, shingle: ShingleConfig, device: str = "cpu") -> ShingleSets:
    """Sorted distinct shingle hashes of documents ``docs`` (int64 indexes into ``norm``), compacted.
    Memory: 8 bytes per shingle of the selected documents (twice, transiently).
    CPU: one document per thread, hashed then sorted in place. GPU: one block per document hashes its
    shingles (one thread each), then a global stable sort by (document, hash) and run boundaries."""
    from .device import array_module, repeat_index

    xp = array_module(device)
    docs = xp.asarray(docs, dtype=xp.int64)  # a host array is copied to the device (explicitly, as CuPy needs)
    m = docs.shape[0]
    kind_char = shingle.kind == "char"
    units_per_doc = norm.codepoints if kind_char else norm.words
    counts = xp.maximum(units_per_doc[docs] - shingle.n + 1, 0)
    reserve = xp.zeros(m + 1, xp.int64)
    xp.cumsum(counts, out=reserve[1:])
    raw = xp.empty(int(reserve[-1]), xp.uint64)
    if device == "cuda":
        from .device import argsort_stable
        from .kernels import cuda as kc
        from .minhash import unit_starts

        if m:
            ubase, units = unit_starts(norm, kind_char, device)
            kc.shingle_hashes[min(m, 65535), kc.TPB](norm.data, norm.offsets, units, ubase, docs, reserve, shingle.n,
                                                     0 if kind_char else 1, np.uint64(shingle.seed), raw)
        seg = repeat_index(xp, counts)
        by_hash = argsort_stable(xp, raw)
        order = by_hash[argsort_stable(xp, seg[by_hash])]
        h, sg = raw[order], seg[order]
        first = xp.ones(h.shape[0], dtype=bool)
        if h.shape[0]:
            first[1:] = (h[1:] != h[:-1]) | (sg[1:] != sg[:-1])
        hashes = h[first]
        sizes = xp.bincount(sg[first], minlength=m).astype(xp.int64)
        offsets = xp.zeros(m, xp.int64)
        if m > 1:
            xp.cumsum(sizes[:-1], out=offsets[1:])
        return ShingleSets(hashes, offsets, sizes)
    from .kernels import cpu

    sizes = np.empty(m, np.int64)
    if m:
        cpu.shingle_sets(norm.data, norm.offsets, docs, kind_char, shingle.n, np.uint64(shingle.seed),
                         reserve, raw, sizes)
    offsets = np.zeros(m, np.int64)
    if m > 1:
        np.cumsum(sizes[:-1], out=offsets[1:])
    keep = (np.arange(raw.shape[0]) - np.repeat(reserve[:-1], counts)) < np.repeat(sizes, counts)
    return ShingleSets(raw[keep], offsets, sizes)


def jaccard(sets: ShingleSets, left, right, device: str = "cpu"):
    """Exact Jaccard of pairs of sets (int64 indexes into ``sets``) -> float64 (p,)."""
    from .device import array_module

    xp = array_module(device)
    left = xp.asarray(left, dtype=xp.int64)  # host indexes are copied to the device
    right = xp.asarray(right, dtype=xp.int64)
    out = xp.empty(left.shape[0], xp.float64)
    if left.shape[0] == 0:
        return out
    if device == "cuda":
        from .kernels import cuda as kc

        kc.jaccard_pairs[kc.blocks(left.shape[0]), kc.TPB](sets.hashes, sets.offsets, sets.sizes, left, right, out)
    else:
        from .kernels import cpu

        cpu.jaccard_pairs(sets.hashes, sets.offsets, sets.sizes, left, right, out)
    return out
