"""LSH stage: band keys and sort-based bucket grouping (no dicts of sets, no all-pairs).

A bucket is a run of equal (band, key) values among the candidate documents; only runs of size >= 2
matter. Each bucket of k documents yields k-1 chain edges, so a bucket of 200,000 documents costs
O(k log k) to sort and O(k) edges, never O(k^2).
"""
from __future__ import annotations

import logging
import sys
from dataclasses import dataclass

import numpy as np

from .config import LSHConfig

logger = logging.getLogger(__name__)


def band_keys(sig: np.ndarray, lsh: LSHConfig) -> np.ndarray:
    """sig: (n, K) uint32|uint64 signatures -> (n, bands) uint64 band keys."""
    from .kernels import cpu

    if sig.ndim != 2 or sig.shape[1] < lsh.bands * lsh.rows:
        raise ValueError(f"signatures of shape {sig.shape} cannot feed {lsh.bands} bands x {lsh.rows} rows")
    if sig.dtype not in (np.uint32, np.uint64):
        raise TypeError(f"signatures must be uint32 or uint64, got {sig.dtype}")
    sig = np.ascontiguousarray(sig)
    if sys.byteorder != "little":  # the contract hashes little-endian bytes
        sig = sig.byteswap().view(sig.dtype.newbyteorder())
    n = sig.shape[0]
    out = np.empty((n, lsh.bands), np.uint64)
    if n:
        cpu.band_keys(sig.view(np.uint8).reshape(n, -1), lsh.bands, lsh.rows * sig.dtype.itemsize, out)
    return out


@dataclass
class Buckets:
    """Candidate buckets over m documents (indexes 0..m-1 into the keys given to ``group_buckets``).

    entry_doc/entry_bucket: int64 (E,), sorted by (doc, band); doc_offsets: int64 (m+1,) CSR over entries;
    bucket_band: int32 (nb,); bucket_size: int64 (nb,).
    """

    entry_doc: np.ndarray
    entry_bucket: np.ndarray
    doc_offsets: np.ndarray
    bucket_band: np.ndarray
    bucket_size: np.ndarray

    @property
    def n_buckets(self) -> int:
        return int(self.bucket_size.shape[0])

    def candidate_mask(self, m: int) -> np.ndarray:
        return np.diff(self.doc_offsets) > 0

    def chain_edges(self) -> tuple[np.ndarray, np.ndarray]:
        """k-1 edges per bucket between consecutive members (sorted by document index), deduplicated
        across bands. Returns (u, v) int64 with u < v."""
        if self.entry_doc.size == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        order = np.lexsort((self.entry_doc, self.entry_bucket))
        b = self.entry_bucket[order]
        d = self.entry_doc[order]
        same = b[1:] == b[:-1]
        u, v = d[:-1][same], d[1:][same]
        m = int(self.doc_offsets.shape[0] - 1)
        key = np.unique(u * np.int64(m) + v)
        return key // m, key % m


def group_buckets(keys: np.ndarray) -> Buckets:
    """keys: (m, bands) uint64 band keys of the candidate documents -> Buckets (runs of size >= 2)."""
    m, nbands = keys.shape
    docs_parts, bucket_parts, band_of, size_of = [], [], [], []
    next_bucket = 0
    for band in range(nbands):
        k = keys[:, band]
        order = np.argsort(k, kind="stable")
        sk = k[order]
        start = np.ones(m, bool)
        if m:
            start[1:] = sk[1:] != sk[:-1]
        run = np.cumsum(start) - 1
        sizes = np.bincount(run) if m else np.zeros(0, np.int64)
        member = sizes[run] >= 2
        if not member.any():
            continue
        big = np.flatnonzero(sizes >= 2)
        renumber = np.full(sizes.shape[0], -1, np.int64)
        renumber[big] = np.arange(big.shape[0]) + next_bucket
        docs_parts.append(order[member].astype(np.int64))
        bucket_parts.append(renumber[run[member]])
        band_of.append(np.full(big.shape[0], band, np.int32))
        size_of.append(sizes[big].astype(np.int64))
        next_bucket += big.shape[0]
    if docs_parts:
        entry_doc = np.concatenate(docs_parts)
        entry_bucket = np.concatenate(bucket_parts)
        by_doc = np.argsort(entry_doc, kind="stable")  # stable: keeps band order within a document
        entry_doc, entry_bucket = entry_doc[by_doc], entry_bucket[by_doc]
        bucket_band, bucket_size = np.concatenate(band_of), np.concatenate(size_of)
    else:
        entry_doc = entry_bucket = np.zeros(0, np.int64)
        bucket_band, bucket_size = np.zeros(0, np.int32), np.zeros(0, np.int64)
    doc_offsets = np.zeros(m + 1, np.int64)
    np.cumsum(np.bincount(entry_doc, minlength=m), out=doc_offsets[1:])
    return Buckets(entry_doc, entry_bucket, doc_offsets, bucket_band, bucket_size)
