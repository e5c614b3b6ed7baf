"""Front end of the feature kernel family (``kernels/features_cpu.py`` / ``kernels/features_cuda.py``): DSIR's hashed
word n-gram feature ids of normalized documents and their log-weight sums, and the Gopher rules' statistics. One signature per function on both
targets (``device`` first); the GPU's word chunks and its two-step sum (ids, then ordered sums) stay here.

Notation: n documents, F feature occurrences, B hash buckets.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..runtime.device import array_module, module_of, run_kernel, split_chunks
from . import core

if TYPE_CHECKING:
    from .types import Normalized


def feature_counts_per_doc(words: Any, ngrams: int) -> Any:
    """Features of documents with ``words`` words (int64 array, any module): sum_{m=1..ngrams} max(w-m+1, 0)."""
    xp = module_of(words)
    total = xp.zeros(words.shape[0], xp.int64)
    for m in range(1, ngrams + 1):
        total = total + xp.maximum(words - (m - 1), 0)
    return total


def feature_ids(device: str, norm: "Normalized", ngrams: int, seed: int, buckets: int,
                chunk: int | None = None) -> tuple[Any, Any]:
    """(base int64 (n+1,), ids int32 (F,)): the feature ids of every document in kernels/features.py's order,
    document d's at ids[base[d]:base[d+1]]. CPU: one scan per document (prange). GPU: the word starts
    (``core.unit_starts``), then a block per ``chunk`` words of a document (default
    kernels/features_cuda.FEATURE_CHUNK; the ids do not depend on it), a thread per word."""
    xp = array_module(device)
    n = len(norm)
    base = xp.zeros(n + 1, xp.int64)
    if n:
        xp.cumsum(feature_counts_per_doc(norm.words, ngrams), out=base[1:])
    ids = xp.empty(int(base[-1]), xp.int32)
    if ids.shape[0] == 0:
        return base, ids
    if device == "cuda":
        from ..kernels import features_cuda as k

        ubase, units = core.unit_starts(device, norm, False)
        doc, first, count, _ = split_chunks(xp, norm.words, chunk or k.FEATURE_CHUNK)
        run_kernel(device, k.feature_id_chunks, int(doc.shape[0]), norm.data, norm.offsets, units, ubase, doc, first,
                   count, ngrams, seed, np.uint64(buckets), base, ids)
    else:
        from ..kernels import features_cpu as k

        run_kernel(device, k.feature_ids, n, norm.data, norm.offsets, ngrams, seed, np.uint64(buckets), base, ids)
    return base, ids


def feature_log_weights(device: str, norm: "Normalized", ngrams: int, seed: int, buckets: int, logdiff,
                        chunk: int | None = None) -> Any:
    """float64 (n,): out[d] = 0.0 + the sum over document d's features f, with multiplicity and in feature order,
    of logdiff[f] (float64 (B,)). CPU: one scan per document, no feature array. GPU: the ids (``feature_ids``,
    4 bytes per feature), then a block per document adding them in the CPU's order (the same float64 bits)."""
    xp = array_module(device)
    n = len(norm)
    out = xp.zeros(n, xp.float64)
    if n == 0:
        return out
    if device == "cuda":
        from ..kernels import features_cuda as k

        base, ids = feature_ids(device, norm, ngrams, seed, buckets, chunk)
        run_kernel(device, k.feature_sums, n, ids, base, logdiff, out)
    else:
        from ..kernels import features_cpu as k

        run_kernel(device, k.feature_log_weights, n, norm.data, norm.offsets, ngrams, seed, np.uint64(buckets), logdiff,
                   out)
    return out


def rule_stats_host(data, offsets, cls, bullets, stop_key, stop_len, top_ns, dup_ns, seed, n_stats: int):
    """Host: float64 (n, n_stats) Gopher statistics of raw documents data[offsets[d]:offsets[d+1]]
    (kernels/features_cpu.py ``rule_stats``; the rules have no GPU twin: they run beside the GPU stages)."""
    from ..kernels import features_cpu

    n = int(offsets.shape[0]) - 1
    out = np.zeros((n, n_stats), np.float64)
    if n:
        run_kernel("cpu", features_cpu.rule_stats, n, data, offsets, cls, bullets, stop_key, stop_len, top_ns, dup_ns,
                   seed, out)
    return out


def char_counts_host(data, offsets, table):
    """Host: int64 (n, 3) (codepoints, non-ASCII codepoints, bytes of the table's ASCII set) of raw documents
    data[offsets[d]:offsets[d+1]] (kernels/features_cpu.py ``char_counts``; host work beside the GPU stages, as
    the rules' other statistics)."""
    from ..kernels import features_cpu

    n = int(offsets.shape[0]) - 1
    out = np.zeros((n, 3), np.int64)
    if n:
        run_kernel("cpu", features_cpu.char_counts, n, data, offsets, table, out)
    return out
