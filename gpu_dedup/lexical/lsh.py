"""LSH stage: band keys and sort-based bucket grouping (no dicts of sets, no all-pairs).

A bucket is a run of equal (band, key) values among the candidate documents; only runs of size >= 2
matter. Each bucket of k documents yields k-1 chain edges, so a bucket of 200,000 documents costs
O(k log k) to sort and O(k) edges, never O(k^2).
"""
from __future__ import annotations

import logging
import sys

import numpy as np

from ..config import LSHConfig
from ..errors import ConfigError, UsageError
from ..ops import core
from ..ops.types import Buckets
from ..runtime.device import array_module, module_of
from .bandkeys import BandKeys

logger = logging.getLogger(__name__)


def band_keys(sig, lsh: LSHConfig, device: str = "cpu"):
    """sig: (n, K) uint32|uint64 signatures -> (n, bands) uint64 band keys (same array module)."""
    xp = array_module(device)
    if sig.ndim != 2 or sig.shape[1] < lsh.bands * lsh.rows:
        raise ConfigError(f"signatures of shape {sig.shape} cannot feed {lsh.bands} bands x {lsh.rows} rows")
    if sig.dtype not in (np.uint32, np.uint64):
        raise UsageError(f"signatures must be uint32 or uint64, got {sig.dtype}")
    sig = xp.ascontiguousarray(sig)
    if sys.byteorder != "little":  # the contract hashes little-endian bytes
        sig = sig.byteswap().view(sig.dtype.newbyteorder())
    sig_bytes = sig.view(xp.uint8).reshape(sig.shape[0], sig.shape[1] * sig.dtype.itemsize)
    return core.band_keys(device, sig_bytes, lsh.bands, lsh.rows * sig.dtype.itemsize)


GROUPING_BYTES_PER_ROW = 64  # key, order, sorted key, run id, flags and entries of one (row, band)


def partitions_for(m: int, budget: int | None) -> int:
    """Key-range partitions per band so that grouping m rows stays within ``budget`` bytes (a power of
    two; 1 without a budget)."""
    if not budget or m == 0:
        return 1
    need = -(-m * GROUPING_BYTES_PER_ROW // budget)
    return 1 << max(0, (need - 1).bit_length())


def group_buckets(keys, rows=None, partitions: int = 1) -> Buckets:
    """Buckets (runs of size >= 2 of equal band keys) over the m documents ``rows`` (sorted int64
    indexes; None = all).

    keys: an (n, bands) uint64 matrix (numpy or cupy) or a ``BandKeys`` (in memory or on disk). Each band
    is processed alone, and within a band in ``partitions`` key ranges (top bits of the key), each sorted
    stably with run boundaries found by comparison: the transient memory is that of one key range. Runs
    never cross ranges, and ranges are visited in key order, so buckets, their numbering and the entries
    are the same for any partition count.
    """
    if not isinstance(keys, BandKeys):
        keys = BandKeys(keys.shape[1], matrix=keys, device="cuda" if module_of(keys) is not np else "cpu")
    xp = keys.xp
    if rows is None:
        rows = xp.arange(keys.n, dtype=xp.int64)
    m = int(rows.shape[0])
    nbands = keys.bands
    bits = max(0, (partitions - 1).bit_length())
    ranges = [(p << (64 - bits), (p + 1) << (64 - bits)) for p in range(1 << bits)] if bits else [(0, 1 << 64)]
    docs_parts, bucket_parts, band_of, size_of = [], [], [], []
    next_bucket = 0
    for band in range(nbands):
        for lo, hi in ranges:
            sel_rows, k = keys.column(band, rows, lo, hi)
            local = xp.arange(m, dtype=xp.int64) if sel_rows.shape[0] == m else xp.searchsorted(rows, sel_rows)
            c = int(k.shape[0])
            if c < 2:
                continue
            # any order of equal keys: a document has one key per band, and the entries are put in (document,
            # band) order below, so ties cannot reach the result (numpy's default sort: SIMD quicksort, about
            # twice timsort's speed on uint64; CuPy's: radix either way)
            order = xp.argsort(k)
            sk = k[order]
            start = xp.ones(c, dtype=bool)
            start[1:] = sk[1:] != sk[:-1]
            run = xp.cumsum(start) - 1
            sizes = xp.bincount(run)
            member = sizes[run] >= 2
            big = xp.flatnonzero(sizes >= 2)
            if big.shape[0] == 0:
                continue
            renumber = xp.full(sizes.shape[0], -1, xp.int64)
            renumber[big] = xp.arange(big.shape[0]) + next_bucket
            docs_parts.append(local[order[member]].astype(xp.int32))
            bucket_parts.append(renumber[run[member]])
            band_of.append(xp.full(big.shape[0], band, xp.int32))
            size_of.append(sizes[big].astype(xp.int64))
            next_bucket += int(big.shape[0])
    if m >= 2**31 or next_bucket >= 2**31:
        raise ConfigError(f"{m:,} documents / {next_bucket:,} buckets in one grouping exceed the 32-bit entry "
                          "indexes; split the run (e.g. --against an index of the first part)")
    if docs_parts:
        # 32-bit entries: a bucket entry per (document, band) of every bucket of size >= 2 is the largest
        # array of the grouping on duplicate-heavy corpora
        entry_doc = xp.concatenate(docs_parts)
        entry_bucket = xp.concatenate(bucket_parts).astype(xp.int32)
        del docs_parts, bucket_parts
        bucket_band, bucket_size = xp.concatenate(band_of), xp.concatenate(size_of)
        # (document, band) order: that key is unique (a document has one key per band), so the plain sort gives
        # the stable sort by document of these band-major entries, faster
        by_doc = xp.argsort(entry_doc.astype(xp.int64) * nbands + bucket_band[entry_bucket])
        entry_doc, entry_bucket = entry_doc[by_doc], entry_bucket[by_doc]
    else:
        entry_doc = xp.zeros(0, xp.int32)
        entry_bucket = xp.zeros(0, xp.int32)
        bucket_band, bucket_size = xp.zeros(0, xp.int32), xp.zeros(0, xp.int64)
    doc_offsets = xp.zeros(m + 1, xp.int64)
    xp.cumsum(xp.bincount(entry_doc, minlength=m), out=doc_offsets[1:])
    return Buckets(entry_doc, entry_bucket, doc_offsets, bucket_band, bucket_size)
