"""The arrays the device boundary takes and gives (``ops/``'s front ends), typed here, beneath the stages that build
them: ``Normalized`` (text/normalize.py makes it), ``Buckets`` (lexical/lsh.py), ``ShingleSets`` (lexical/verify.py).
Arrays of one module: numpy on the CPU, cupy on a GPU."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..runtime.device import lexsort_radix, module_of, to_host


@dataclass
class Normalized:
    """data: uint8 (T',) normalized UTF-8; offsets: int64 (n+1,); words, codepoints: int64 (n,)."""

    data: np.ndarray
    offsets: np.ndarray
    words: np.ndarray
    codepoints: np.ndarray

    def __len__(self) -> int:
        return self.offsets.shape[0] - 1

    def shingle_counts(self, n: int, kind_char: bool):
        """Shingles per document (int64 (n,), the arrays' module): a document of u units (words, or codepoints
        with ``kind_char``) has max(u - n + 1, 0) shingles of n units; 0 means short (exact path only). The
        one formula of the package: the kernels count by enumerating the shingles and agree."""
        units = self.codepoints if kind_char else self.words
        return module_of(units).maximum(units - n + 1, 0)

    def text(self, i: int) -> str:
        return bytes(to_host(self.data[int(self.offsets[i]):int(self.offsets[i + 1])])).decode("utf-8")


@dataclass
class Buckets:
    """Candidate buckets over m documents (indexes 0..m-1 into the keys given to ``group_buckets``).

    entry_doc/entry_bucket: int32 (E,), sorted by (doc, band); doc_offsets: int64 (m+1,) CSR over entries;
    bucket_band: int32 (nb,); bucket_size: int64 (nb,). Arrays of one module (numpy, or cupy on a GPU).
    """

    entry_doc: Any
    entry_bucket: Any
    doc_offsets: Any
    bucket_band: Any
    bucket_size: Any

    @property
    def n_buckets(self) -> int:
        return int(self.bucket_size.shape[0])

    def chain_edges(self):
        """k-1 edges per bucket between consecutive members (sorted by document index), deduplicated
        across bands. Returns (u, v) int64 with u < v."""
        xp = module_of(self.entry_doc)
        if self.entry_doc.size == 0:
            return xp.zeros(0, xp.int64), xp.zeros(0, xp.int64)
        m = int(self.doc_offsets.shape[0] - 1)
        order = lexsort_radix(xp, [self.entry_doc, self.entry_bucket], [m, self.n_buckets])  # one packed key
        b = self.entry_bucket[order]
        d = self.entry_doc[order].astype(xp.int64)
        same = b[1:] == b[:-1]
        u, v = d[:-1][same], d[1:][same]
        key = xp.unique(u * m + v)
        return key // m, key % m


@dataclass
class ShingleSets:
    """CSR of sorted distinct shingle hashes: set j is hashes[offsets[j]:offsets[j]+sizes[j]]."""

    hashes: Any  # uint64 (numpy, or cupy on a GPU)
    offsets: Any  # int64 (m,)
    sizes: Any  # int64 (m,)

    def __len__(self) -> int:
        return int(self.sizes.shape[0])

    @staticmethod
    def empty(m: int, xp=np) -> "ShingleSets":
        """m empty sets (no hashes)."""
        return ShingleSets(xp.zeros(0, xp.uint64), xp.zeros(m, xp.int64), xp.zeros(m, xp.int64))

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
