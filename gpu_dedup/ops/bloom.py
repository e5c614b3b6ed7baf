"""Front end of the Bloom / paragraph / screening kernel family (``kernels/bloom_cpu.py`` / ``kernels/bloom_cuda.py``):
128-bit span keys, the Bloom filter's query and insert, the exact set's membership and merge positions, word
n-gram hashes, word spans, sorted-key membership and the host's cut copy. One signature per function on both
targets (``device`` first; arrays of the device's array module in and out); how each target splits the work
(the CPU's per-thread word ranges of an insert, the GPU's n-gram, split and word-span chunks) stays here.

Notation: n items / documents, k hash functions, m bits, S n-grams, W words, T text bytes.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..constants import SPLIT_PARAGRAPH
from ..runtime.device import array_module, line_chunks, repeat_index, run_kernel, split_chunks
from . import core

if TYPE_CHECKING:
    from .types import Normalized


def _target(device: str):
    """The kernel module of ``device``: bloom_cuda on a GPU, else bloom_cpu (imported on first use)."""
    if device == "cuda":
        from ..kernels import bloom_cuda
        return bloom_cuda
    from ..kernels import bloom_cpu
    return bloom_cpu


def hash128(device: str, data, starts, ends, seed1: int, seed2: int) -> tuple[Any, Any]:
    """(h1, h2) uint64 (n,): XXH64 of each span data[starts[i]:ends[i]] with seed1 / seed2 (a thread each)."""
    xp = array_module(device)
    n = int(starts.shape[0])
    h1, h2 = xp.empty(n, xp.uint64), xp.empty(n, xp.uint64)
    if n:
        run_kernel(device, _target(device).hash128, n, data, starts, ends, np.uint64(seed1), np.uint64(seed2), h1, h2)
    return h1, h2


def bloom_query(device: str, bits, m: int, k: int, h1, h2):
    """uint8 (n,): 1 where all k bits of item (h1[i], h2[i]) are set in ``bits`` (uint32 words of m bits)."""
    xp = array_module(device)
    n = int(h1.shape[0])
    out = xp.zeros(n, xp.uint8)
    if n:
        run_kernel(device, _target(device).bloom_query, n, bits, np.uint64(m), k, h1, h2, out)
    return out


def bloom_insert(device: str, bits, m: int, k: int, h1, h2, threads: int | None = None) -> None:
    """Set the k bits of every item (h1[i], h2[i]) in ``bits`` (in place). GPU: a thread per item, atomic OR.
    CPU: the words split into one range per thread (``threads``, default Numba's), each thread walking every item
    and setting only its range's bits: no atomics, and the same bits whatever the schedule."""
    n = int(h1.shape[0])
    if n == 0:
        return
    if device == "cuda":
        run_kernel(device, _target(device).bloom_insert, n, bits, np.uint64(m), k, h1, h2)
        return
    import numba

    parts = max(1, min(threads or numba.get_num_threads(), bits.shape[0]))
    run_kernel(device, _target(device).bloom_insert, n, bits, np.uint64(m), k, h1, h2, parts)


def contains128(device: str, k1, k2, q1, q2):
    """uint8 (n,): 1 where key (q1[i], q2[i]) is among the sorted keys (k1, k2) (uint64 (N,), by (k1, k2))."""
    return _per_key(device, _target(device).contains128, "uint8", k1, k2, q1, q2)


def lower_bound128(device: str, k1, k2, q1, q2):
    """int64 (n,): how many of the sorted keys (k1, k2) lie below each (q1[i], q2[i]) (a binary search each)."""
    return _per_key(device, _target(device).lower_bound128, "int64", k1, k2, q1, q2)


def _per_key(device: str, kernel, dtype: str, k1, k2, q1, q2):
    """A thread per query key (q1[i], q2[i]) against the sorted keys (k1, k2): one output of ``dtype`` each."""
    xp = array_module(device)
    n = int(q1.shape[0])
    out = xp.empty(n, getattr(xp, dtype))
    if n:
        run_kernel(device, kernel, n, k1, k2, q1, q2, out)
    return out


def member_sorted(device: str, keys, bitmap, shift: int, q):
    """int64 (n,): the position of q[i] among the sorted uint64 ``keys`` (-1 when absent), a prefix ``bitmap``
    (indexed by key >> shift) skipping most misses."""
    xp = array_module(device)
    out = xp.empty(q.shape[0], xp.int64)
    if q.shape[0]:
        run_kernel(device, _target(device).member_sorted, int(q.shape[0]), keys, bitmap, np.uint64(shift), q, out)
    return out


def ngram_hashes(device: str, norm: "Normalized", n: int, seed: int, chunk: int | None = None) -> tuple[Any, Any]:
    """Word n-gram hashes of every normalized document, in order: (hashes uint64 (S,), base int64 (docs+1,));
    n-gram j of document d (words j..j+n-1) is hashes[base[d] + j]. CPU: one scan per document (prange). GPU:
    the word starts (``core.unit_starts``), then a block per ``chunk`` n-grams of a document (default
    kernels/bloom_cuda.NGRAM_CHUNK; the hashes do not depend on it), a thread per n-gram."""
    xp = array_module(device)
    d = len(norm)
    counts = norm.shingle_counts(n, kind_char=False)
    base = xp.zeros(d + 1, xp.int64)
    xp.cumsum(counts, out=base[1:])
    out = xp.empty(int(base[-1]), xp.uint64)
    if out.shape[0] == 0:
        return out, base
    k = _target(device)
    if device == "cuda":
        ubase, units = core.unit_starts(device, norm, False)
        doc, first, count, _ = split_chunks(xp, counts, chunk or k.NGRAM_CHUNK)
        run_kernel(device, k.ngram_hash_chunks, int(doc.shape[0]), norm.data, norm.offsets, units, ubase, doc, first,
                   count, n, np.uint64(seed), base, out)
    else:
        run_kernel(device, k.ngram_hashes, d, norm.data, norm.offsets, n, np.uint64(seed), base, out)
    return out, base


def word_spans(device: str, data, starts, ends, map_off, map_cp, words,
               chunk: int | None = None) -> tuple[Any, Any, Any, Any]:
    """Original byte spans of the normalized words of documents data[starts[d]:ends[d]]; ``words`` int64 (docs,)
    their normalized word counts. Returns (wbase int64 (docs+1,), word_start, word_end int64 (W,), counts int64
    (docs,): the words each document's scan found, to check against ``words``). CPU: one scan per document
    (prange; wbase from ``words``). GPU: ``_word_span_chunks`` (work per thread bounded by about ``chunk`` bytes,
    default kernels/bloom_cuda.WORD_SPAN_CHUNK; wbase from the scan's own counts, so a disagreement never writes
    out of bounds). The same arrays when the counts agree."""
    if device == "cuda":
        return _word_span_chunks(data, starts, ends, map_off, map_cp, chunk)
    xp = array_module(device)
    d = int(starts.shape[0])
    wbase = xp.zeros(d + 1, xp.int64)
    xp.cumsum(words, out=wbase[1:])
    ws, we = xp.empty(int(wbase[-1]), xp.int64), xp.empty(int(wbase[-1]), xp.int64)
    counts = xp.zeros(d, xp.int64)
    if d:
        run_kernel(device, _target(device).word_spans, d, data, starts, ends, map_off, map_cp, wbase, ws, we, counts)
    return wbase, ws, we, counts


def _word_span_chunks(data, starts, ends, map_off, map_cp, chunk: int | None = None) -> tuple[Any, Any, Any, Any]:
    """GPU word_spans: each document cut into chunks of about ``chunk`` bytes at normalization entry points
    (``word_span_plan``), a count pass and a write pass per chunk (``word_span_chunks``) at the running word total
    of the earlier chunks (documents in order, so that total is also the document's base plus its earlier
    chunks')."""
    from ..kernels import bloom_cuda as kb

    xp = array_module("cuda")
    doc, first, _, bounds = split_chunks(xp, (ends - starts).astype(xp.int64), chunk or kb.WORD_SPAN_CHUNK)
    c = int(doc.shape[0])
    lo, prev, ccounts = xp.empty(c, xp.int64), xp.empty(c, xp.int64), xp.zeros(c, xp.int64)
    none = xp.empty(0, xp.int64)
    if c:
        run_kernel("cuda", kb.word_span_plan, c, data, starts, ends, map_off, map_cp, doc, first, lo, prev)
        run_kernel("cuda", kb.word_span_chunks, c, data, starts, ends, map_off, map_cp, doc, lo, prev, none, False,
                   none, none, ccounts)
    total = xp.zeros(c + 1, xp.int64)
    xp.cumsum(ccounts, out=total[1:])
    wbase = total[bounds]
    w = int(total[-1])
    ws, we = xp.empty(w, xp.int64), xp.empty(w, xp.int64)
    if w:
        run_kernel("cuda", kb.word_span_chunks, c, data, starts, ends, map_off, map_cp, doc, lo, prev,
                   total[:-1].copy(), True, ws, we, ccounts)
    return wbase, ws, we, wbase[1:] - wbase[:-1]


def cut_copy_host(data, offsets, cut_off, cs, ce, new_off):
    """Host: uint8 (new_off[-1],), documents data[offsets[d]:offsets[d+1]] without the ranges [cs[i], ce[i]) of
    cut_off[d]:cut_off[d+1] (absolute, ascending, disjoint), document d at new_off[d]."""
    from ..kernels import bloom_cpu

    n = int(offsets.shape[0] - 1)
    out = np.empty(int(new_off[-1]), np.uint8)
    run_kernel("cpu", bloom_cpu.cut_copy, n, data, offsets, cut_off, cs, ce, out, new_off)
    return out


def split_units(device: str, data, offsets, mode: int, chunk: int | None = None) -> tuple[Any, Any, Any]:
    """Units of documents data[offsets[d]:offsets[d+1]] in ``mode`` (constants.py: SPLIT_PARAGRAPH, maximal
    runs of non-blank lines; SPLIT_LINE, non-blank lines; SPLIT_SENTENCE, ``split_sentences``'s sentences):
    (unit_off int64 (n+1,), start, end int64 (u,) absolute byte positions); document d's units are
    unit_off[d]:unit_off[d+1]. CPU: a count and a write scan per document (prange). GPU: ``_split_pieces``
    (line-aligned pieces of about ``chunk`` bytes, default kernels/bloom_cuda.SPLIT_CHUNK). The same units."""
    mode = np.int64(mode)
    if device == "cuda":
        return _split_pieces(data, offsets, mode, chunk)
    from ..kernels import bloom_cpu

    n = int(offsets.shape[0]) - 1
    counts = np.zeros(n, np.int64)
    if n:
        run_kernel(device, bloom_cpu.split_count, n, data, offsets, mode, counts)
    unit_off = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=unit_off[1:])
    u = int(unit_off[-1])
    start, end = np.empty(u, np.int64), np.empty(u, np.int64)
    if u:
        run_kernel(device, bloom_cpu.split_write, n, data, offsets, mode, unit_off, start, end)
    return unit_off, start, end


def _split_pieces(data, offsets, mode, chunk: int | None = None) -> tuple[Any, Any, Any]:
    """GPU: split_units with work per thread bounded by max(chunk, the longest line) bytes: each non-empty
    line-aligned piece (device.line_chunks) is split by one thread (the CPU's device function), then a paragraph
    that runs over a cut (the piece's last line and the next piece's first line both non-blank) is merged back
    into one unit: its first part's start, its last part's end. Lines and sentences never straddle a cut (no
    merge in those modes)."""
    from ..kernels import bloom_cuda as kb

    xp = array_module("cuda")
    n = int(offsets.shape[0]) - 1
    starts, ends, bounds = line_chunks(xp, data, offsets, chunk or kb.SPLIT_CHUNK)
    keep = xp.flatnonzero(ends > starts)
    starts, ends = starts[keep], ends[keep]
    pdoc = repeat_index(xp, bounds[1:] - bounds[:-1])[keep]
    p = int(starts.shape[0])
    counts = xp.zeros(p, xp.int64)
    edges = xp.zeros((p, 2), xp.int64)
    if p:
        run_kernel("cuda", kb.split_piece_count, p, data, starts, ends, mode, counts, edges)
    pbase = xp.zeros(p + 1, xp.int64)
    xp.cumsum(counts, out=pbase[1:])
    u = int(pbase[-1])
    start, end = xp.empty(u, xp.int64), xp.empty(u, xp.int64)
    if u:
        run_kernel("cuda", kb.split_piece_write, p, data, starts, ends, mode, pbase[:-1].copy(), start, end)
    continues = xp.zeros(u, xp.bool_)  # unit i and unit i + 1 are parts of one paragraph
    if int(mode) == SPLIT_PARAGRAPH and p > 1:
        merge = xp.flatnonzero((pdoc[1:] == pdoc[:-1]) & (edges[:-1, 1] == 1) & (edges[1:, 0] == 1))
        continues[pbase[merge + 1] - 1] = True  # the last unit of piece ``merge`` (it has one: a non-blank line)
    udoc = pdoc[repeat_index(xp, counts)]
    heads = xp.flatnonzero(xp.concatenate([xp.ones(min(u, 1), xp.bool_), ~continues[:-1]]))
    lasts = xp.flatnonzero(~continues)
    unit_off = xp.searchsorted(udoc[heads], xp.arange(n + 1, dtype=xp.int64), side="left").astype(xp.int64)
    return unit_off, start[heads], end[lasts]


def span_hashes(device: str, data, start, end, map_off, map_cp, seed1: int, seed2: int,
                chunk: int | None = None) -> tuple[Any, Any, Any]:
    """Normalize each span data[start[i]:end[i]] (tables map_off / map_cp) and hash it with XXH64, seeds seed1 and
    seed2: (h1, h2 uint64 (u,), normalized sizes int64 (u,)). CPU: a thread per span (a sizes pass, then normalize
    and hash). GPU: work per thread bounded by bytes: the spans gathered into one buffer (transient: their bytes
    plus a 16-byte gather index per byte), normalized as documents by ``core.normalize``'s chunks (``chunk``
    bytes, for tests) and hashed by a block per span (``core.xxh64_pairs``). The same bits either way."""
    xp = array_module(device)
    u = int(start.shape[0])
    if u == 0:
        return xp.empty(0, xp.uint64), xp.empty(0, xp.uint64), xp.zeros(0, xp.int64)
    if device == "cuda":
        lengths = (end - start).astype(xp.int64)
        goff = xp.zeros(u + 1, xp.int64)
        xp.cumsum(lengths, out=goff[1:])
        total = int(goff[-1])
        if total:
            span = repeat_index(xp, lengths)
            gathered = data[start[span] + xp.arange(total, dtype=xp.int64) - goff[span]]
        else:
            gathered = xp.zeros(1, xp.uint8)
        norm_data, norm_off, _, _ = core.normalize(device, gathered, goff, map_off, map_cp, chunk)
        h = core.xxh64_pairs(device, norm_data, norm_off, seed1, seed2)
        return h[:, 0].copy(), h[:, 1].copy(), norm_off[1:] - norm_off[:-1]
    from ..kernels import bloom_cpu

    sizes = np.zeros(u, np.int64)
    h1, h2 = np.empty(u, np.uint64), np.empty(u, np.uint64)
    run_kernel(device, bloom_cpu.span_norm_sizes, u, data, start, end, map_off, map_cp, sizes)
    off = np.zeros(u + 1, np.int64)
    np.cumsum(sizes, out=off[1:])
    out = np.empty(max(int(off[-1]), 1), np.uint8)
    run_kernel(device, bloom_cpu.span_norm_hash, u, data, start, end, map_off, map_cp, out, off, np.uint64(seed1),
               np.uint64(seed2), h1, h2)
    return h1, h2, sizes
