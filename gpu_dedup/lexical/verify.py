"""Verification stage: the candidates' shingle sets (pass 2) and the exact Jaccard of candidate pairs.

Sets are the distinct 64-bit XXH64 shingle hashes of each document (sorted), so "exact" is exact on
the hashed sets: two distinct shingles collide with probability 2^-64 per pair, i.e. negligible next
to the LSH sampling error. Intersections are merge walks in a kernel. Pass 2 hashes only the candidates'
sets, from pass 1's kept normalized text (``runtime.passes.TextCache``: the whole run, or a prefix of it), and
the rest by re-reading the input files after that prefix.
"""
from __future__ import annotations

import logging

import numpy as np

from .. import io
from ..config import RunConfig, ShingleConfig
from ..errors import RunError
from ..ops import core
from ..ops.types import ShingleSets
from ..runtime.device import array_module, to_device, to_host
from ..runtime.passes import TextCache, prefetched, progress
from ..text.normalize import Normalized, normalize_text

logger = logging.getLogger(__name__)


def shingle_sets(norm: Normalized, docs, shingle: ShingleConfig, device: str = "cpu") -> ShingleSets:
    """Sorted distinct shingle hashes of documents ``docs`` (int64 indexes into ``norm``), compacted
    (``ops.core.shingle_sets``: 8 bytes per shingle of the selected documents, twice, transiently)."""
    xp = array_module(device)
    docs = xp.asarray(docs, dtype=xp.int64)  # a host array is copied to the device (explicitly, as CuPy needs)
    return ShingleSets(*core.shingle_sets(device, norm, docs, shingle.kind == "char", shingle.n, shingle.seed))


def jaccard(sets: ShingleSets, left, right, device: str = "cpu"):
    """Exact Jaccard of pairs of sets (int64 indexes into ``sets``) -> float64 (p,)."""
    xp = array_module(device)
    left = xp.asarray(left, dtype=xp.int64)  # host indexes are copied to the device
    right = xp.asarray(right, dtype=xp.int64)
    return core.jaccard_pairs(device, sets.hashes, sets.offsets, sets.sizes, left, right)


def candidate_sets(cfg: RunConfig, device: str, files, lsh_rows, cand_local, index=None,
                   cache: TextCache | None = None, file_rows=None) -> tuple[ShingleSets, int]:
    """Shingle sets of the candidates: indexed documents' from the index, the input's from pass 2 (and from
    pass 1's kept text; ``file_rows``: the run's rows per input file). lsh_rows (int64 (m,)) is sorted, so the indexed documents (rows < I) come first; it and
    cand_local (int64) may be device arrays: the rows select what to read, so they are used on the host."""
    lsh_rows, cand_local = to_host(lsh_rows), to_host(cand_local)
    if index is None:
        return shingle_sets_pass(cfg, device, files, lsh_rows, cand_local, cache, file_rows)  # (sets, bytes re-read)
    xp = array_module(device)
    n_index = len(index)
    n_idx_lsh = int(np.searchsorted(lsh_rows, n_index))
    in_index = cand_local < n_idx_lsh
    idx_sets = index.shingle_sets(lsh_rows[cand_local[in_index]])
    new_sets, reread = shingle_sets_pass(cfg, device, files, lsh_rows[n_idx_lsh:] - n_index,
                                          cand_local[~in_index] - n_idx_lsh, cache, file_rows)
    m = lsh_rows.shape[0]
    offsets = xp.zeros(m, xp.int64)
    sizes = xp.zeros(m, xp.int64)
    picked = to_device(cand_local[in_index], device)
    offsets[picked] = to_device(idx_sets.offsets, device)
    sizes[picked] = to_device(idx_sets.sizes, device)
    offsets[n_idx_lsh:] = new_sets.offsets + int(idx_sets.hashes.shape[0])
    sizes[n_idx_lsh:] = new_sets.sizes
    return ShingleSets(xp.concatenate([to_device(idx_sets.hashes, device), new_sets.hashes]), offsets, sizes), reread


def shingle_sets_pass(cfg: RunConfig, device: str, files, lsh_rows: np.ndarray, cand_local: np.ndarray,
                       cache: TextCache | None = None, file_rows=None) -> tuple[ShingleSets, int]:
    """Pass 2: hash the candidates' shingle sets: those of the rows ``cache`` holds (a prefix of the run:
    pass 1's kept normalized text) from it, the others by re-reading the input, from the first file the
    cache does not hold whole (``file_rows``: the run's rows per file; None: every file). Returns (sets over
    all m LSH documents (empty for non-candidates), text bytes read again: 0 when the cache held them all)."""
    xp = array_module(device)
    m = lsh_rows.shape[0]
    cand_rows = lsh_rows[cand_local]
    held = cache.rows if cache is not None else 0
    split = int(np.searchsorted(cand_rows, held))  # candidates [0, split) are in the kept text
    parts = []
    reread = io.ReadReport()
    with progress(cfg, "verify: shingle sets", total=int(cand_rows.shape[0])) as bar:
        for row0, norm in cache.entries if cache is not None else ():
            lo, hi = np.searchsorted(cand_rows[:split], [row0, row0 + len(norm)])
            if lo < hi:
                parts.append(shingle_sets(norm, to_device(cand_rows[lo:hi] - row0, device), cfg.shingle, device))
                bar.update(int(hi - lo))
        if split < cand_rows.shape[0]:
            skip, first = files_before(file_rows, held)
            # normalize only the candidates (iter_rows packs their bytes into one contiguous buffer); the
            # text only: a keep column that pass 1 computed (a prefilter's score) is not in the input
            reader = {**cfg.reader_options(), "keep_column": None}
            for sel, text in prefetched(io.iter_rows(files[skip:], cand_rows[split:] - first, report=reread,
                                                     **reader)):
                norm = normalize_text(text, cfg.normalize, device)
                parts.append(shingle_sets(norm, xp.arange(sel.shape[0], dtype=xp.int64), cfg.shingle, device))
                bar.update(int(sel.shape[0]))
    cand_sets = ShingleSets.concat(parts, xp)
    if len(cand_sets) != cand_local.shape[0]:
        raise RunError(f"input changed between passes: expected {cand_local.shape[0]} candidate documents, "
                       f"re-read {len(cand_sets)}")
    offsets = xp.zeros(m, xp.int64)
    sizes = xp.zeros(m, xp.int64)
    cl = to_device(cand_local, device)
    offsets[cl] = cand_sets.offsets
    sizes[cl] = cand_sets.sizes
    return ShingleSets(cand_sets.hashes, offsets, sizes), reread.bytes_text


def files_before(file_rows, rows: int) -> tuple[int, int]:
    """(k, r): the leading k input files whose rows all lie below ``rows`` and their r rows (iter_batches numbers
    the rows of files[k:] from 0, so row r + i of the run is their row i). file_rows None: (0, 0)."""
    if file_rows is None:
        return 0, 0
    ends = np.cumsum(np.asarray(file_rows, np.int64))
    k = int(np.searchsorted(ends, rows, side="right"))
    return k, int(ends[k - 1]) if k else 0
