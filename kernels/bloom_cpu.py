"""CPU kernels of the Bloom / paragraph / screening family (``bloom.py``'s device functions compiled with
``numba.njit``), parallel over items or documents. Same results as ``bloom_cuda.py`` bit for bit.

Notation: n items / paragraphs / documents, k hash functions, m bits, T text bytes of the batch.
"""
import numpy as np
from numba import njit, prange

from . import bloom
from ._build import build
from .bloom import U64

_C = build(njit(cache=False, nogil=True), bloom)
c_bloom_contains = _C["bloom_contains"]
c_bloom_add_range = _C["bloom_add_range"]
c_contains128 = _C["contains128"]
c_lower_bound128 = _C["lower_bound128"]
c_split_units = _C["split_units"]
c_member_sorted = _C["member_sorted"]
c_word_spans = _C["word_spans"]
c_normalize_doc = _C["normalize_doc"]
c_xxh64 = _C["xxh64"]
c_hash_shingles = _C["hash_shingles"]


@njit(parallel=True, cache=True, nogil=True)
def hash128(data, starts, ends, seed1, seed2, out1, out2):
    """out1[i], out2[i] = XXH64(data[starts[i]:ends[i]], seed1 / seed2). data uint8 (T,); starts, ends
    int64 (n,); out1, out2 uint64 (n,)."""
    for i in prange(starts.shape[0]):
        out1[i] = c_xxh64(data, starts[i], ends[i], seed1)
        out2[i] = c_xxh64(data, starts[i], ends[i], seed2)


@njit(parallel=True, cache=True, nogil=True)
def bloom_query(bits, m, k, h1, h2, out):
    """out[i] = 1 when item (h1[i], h2[i]) may be in the filter (all k bits set), else 0. bits uint32
    (ceil(m/32),), read only; h1, h2 uint64 (n,); out uint8 (n,)."""
    for i in prange(h1.shape[0]):
        out[i] = 1 if c_bloom_contains(bits, m, k, h1[i], h2[i]) else 0


@njit(parallel=True, cache=True, nogil=True)
def bloom_insert(bits, m, k, h1, h2, parts):
    """Set the k bits of every item. The words are split into ``parts`` disjoint ranges, one per thread;
    each thread walks all items and sets only the bits in its range: no two threads write the same word,
    so no atomics are needed and the result does not depend on scheduling (bit OR is commutative)."""
    nw = bits.shape[0]
    for p in prange(parts):
        lo = U64(p * nw // parts)
        hi = U64((p + 1) * nw // parts)
        for i in range(h1.shape[0]):
            c_bloom_add_range(bits, m, k, h1[i], h2[i], lo, hi)


@njit(parallel=True, cache=True, nogil=True)
def contains128(k1, k2, q1, q2, out):
    """out[i] = 1 when (q1[i], q2[i]) is in the set held by k1, k2 (uint64 (N,), sorted by (k1, k2))."""
    for i in prange(q1.shape[0]):
        out[i] = 1 if c_contains128(k1, k2, q1[i], q2[i]) else 0


@njit(parallel=True, cache=True, nogil=True)
def lower_bound128(k1, k2, q1, q2, out):
    """out[i] = number of keys (k1, k2) (sorted) below (q1[i], q2[i]) (int64 (n,)): merge positions."""
    for i in prange(q1.shape[0]):
        out[i] = c_lower_bound128(k1, k2, q1[i], q2[i])


@njit(parallel=True, cache=True, nogil=True)
def member_sorted(keys, bitmap, shift, q, out):
    """out[i] = position of q[i] in keys (sorted distinct uint64 (H,)) or -1; bitmap/shift: see
    member_sorted. out int64 (n,)."""
    for i in prange(q.shape[0]):
        out[i] = c_member_sorted(keys, bitmap, shift, q[i])


@njit(parallel=True, cache=True, nogil=True)
def split_count(data, offsets, mode, counts):
    """counts[d] = number of units of document d (data[offsets[d]:offsets[d+1]]); counts int64 (n,); mode: one
    of bloom.SPLIT_PARAGRAPH / SPLIT_LINE / SPLIT_SENTENCE (int64)."""
    dummy = np.empty(0, np.int64)
    for d in prange(offsets.shape[0] - 1):
        counts[d] = c_split_units(data, offsets[d], offsets[d + 1], mode, dummy, dummy, 0, False)


@njit(parallel=True, cache=True, nogil=True)
def split_write(data, offsets, mode, unit_off, out_s, out_e):
    """Spans of the units of document d to out_s/out_e[unit_off[d]:unit_off[d+1]] (absolute positions)."""
    for d in prange(offsets.shape[0] - 1):
        c_split_units(data, offsets[d], offsets[d + 1], mode, out_s, out_e, unit_off[d], True)


@njit(parallel=True, cache=True, nogil=True)
def span_norm_sizes(data, starts, ends, map_off, map_cp, sizes):
    """sizes[i] = bytes of the normalized text of data[starts[i]:ends[i]] (int64 (n,))."""
    dummy = np.empty(0, np.uint8)
    for i in prange(starts.shape[0]):
        nb, nw, nc = c_normalize_doc(data, starts[i], ends[i], map_off, map_cp, dummy, 0, False)
        sizes[i] = nb


@njit(parallel=True, cache=True, nogil=True)
def span_norm_hash(data, starts, ends, map_off, map_cp, out, out_off, seed1, seed2, h1, h2):
    """Normalize span i into out[out_off[i]:out_off[i+1]] (uint8, sized by cpu_span_norm_sizes) and hash
    it: h1[i], h2[i] = XXH64(normalized bytes, seed1 / seed2)."""
    for i in prange(starts.shape[0]):
        c_normalize_doc(data, starts[i], ends[i], map_off, map_cp, out, out_off[i], True)
        h1[i] = c_xxh64(out, out_off[i], out_off[i + 1], seed1)
        h2[i] = c_xxh64(out, out_off[i], out_off[i + 1], seed2)


@njit(parallel=True, cache=True, nogil=True)
def ngram_hashes(norm, offsets, n, seed, base, out):
    """Word n-gram hashes of every normalized document in order: n-gram j of document d (words j..j+n-1)
    -> out[base[d] + j] = XXH64(seed) of its bytes. base int64 (docs+1,) reserves max(words-n+1, 0)."""
    for d in prange(offsets.shape[0] - 1):
        units = np.empty(base[d + 1] - base[d] + n, np.int64)
        c_hash_shingles(norm, offsets[d], offsets[d + 1], False, n, seed, out, base[d], units)


@njit(parallel=True, cache=True, nogil=True)
def word_spans(data, starts, ends, map_off, map_cp, base, out_s, out_e, counts):
    """Original byte spans of the normalized words of document d = data[starts[d]:ends[d]] ->
    out_s/out_e[base[d]:] (absolute positions); counts[d] = number of words (int64). base reserves the
    document's normalized word count."""
    for d in prange(starts.shape[0]):
        counts[d] = c_word_spans(data, starts[d], ends[d], map_off, map_cp, out_s, out_e, base[d], True)


@njit(parallel=True, cache=True, nogil=True)
def cut_copy(data, offsets, cut_off, cs, ce, out, new_off):
    """Host-side: copy document d = data[offsets[d]:offsets[d+1]] to out[new_off[d]:new_off[d+1]] without
    its cut ranges [cs[c], ce[c]) for c in [cut_off[d], cut_off[d+1]) (absolute, ascending, disjoint).
    Used on both devices: cut documents are assembled on the host for writing."""
    for d in prange(offsets.shape[0] - 1):
        pos = new_off[d]
        src = offsets[d]
        for c in range(cut_off[d], cut_off[d + 1] + 1):
            stop = cs[c] if c < cut_off[d + 1] else offsets[d + 1]
            for i in range(src, stop):
                out[pos] = data[i]
                pos += 1
            if c < cut_off[d + 1]:
                src = ce[c]
