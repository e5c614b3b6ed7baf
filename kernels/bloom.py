"""Device code for the Bloom filter, the exact 128-bit set, paragraph splitting and span hashing, and the
word n-gram / word-offset scans of contamination screening.

The plain-Python device functions listed in DEVICE_FUNCTIONS are compiled twice by ``_build.build``
(together with hashing.py's): once with ``numba.njit`` for the CPU kernels and once with
``cuda.jit(device=True)`` for the GPU kernels below. Both targets therefore run the same source and
give bit-identical arrays (the Bloom bit array included). Kernels are array-in / array-out.

Bloom filter layout and hash functions (pinned; recorded in the stage statistics)
    bits: uint32 words, bit j lives in word j >> 5 at position j & 31 (the same layout on CPU and GPU).
    An item is a 128-bit key (h1, h2): XXH64 of its bytes with two seeds. Its k bit indexes come from
    double hashing: a = h1 mod m, b = 1 + (h2 mod (m - 1)) and g_i = (a + i * b) mod m for i < k, i.e.
    (h1 + i * h2') mod m with a step h2' that is never 0 mod m. Indexes are reduced MODULO the bit count
    m (any m >= 2, not only powers of two; a mask would silently use a power-of-two part of the array).
    g_i is computed incrementally (x += b; if x >= m: x -= m), which never overflows because m < 2^63.

Notation: n items / paragraphs / documents, k hash functions, m bits, T text bytes of the batch.
"""
import sys

import numpy as np
from numba import cuda, njit, prange

from ._build import build
from ._launch import kernel
from .hashing import utf8_decode  # the compiled twin replaces it in each target's namespace (_build)

U64 = np.uint64
U32 = np.uint32
B_ONE = U64(1)
B_FIVE = U64(5)
B_31 = U64(31)
NEWLINE = 0x0A
WORD_SPACE = 0x20
MAX_NGRAM = 64  # ShingleConfig's bound on n: the GPU ring buffer is a fixed-size local array


# ----------------------------------------------------------------------------------------------------
# Device functions (compiled for both targets)
# ----------------------------------------------------------------------------------------------------

def bloom_start(h1, h2, m):
    """First index a = h1 mod m and step b = 1 + (h2 mod (m - 1)) in [1, m - 1] (uint64; m >= 2)."""
    return h1 % m, B_ONE + h2 % (m - B_ONE)


def bloom_next(x, b, m):
    """(x + b) mod m for x, b < m < 2^63 (no wrap-around)."""
    x = x + b
    if x >= m:
        x = x - m
    return x


def bloom_word_mask(x):
    """Word index and uint32 bit mask of bit x."""
    return x >> B_FIVE, U32(B_ONE << (x & B_31))


def bloom_contains(bits, m, k, h1, h2):
    """True when all k bits of item (h1, h2) are set."""
    x, b = bloom_start(h1, h2, m)
    for _ in range(k):
        w, mask = bloom_word_mask(x)
        if (bits[w] & mask) == 0:
            return False
        x = bloom_next(x, b, m)
    return True


def bloom_add_range(bits, m, k, h1, h2, lo, hi):
    """Set the bits of item (h1, h2) that fall in words [lo, hi) (uint64). Callers that own disjoint word
    ranges can insert the same items in parallel without atomics and without races."""
    x, b = bloom_start(h1, h2, m)
    for _ in range(k):
        w, mask = bloom_word_mask(x)
        if w >= lo and w < hi:
            bits[w] = bits[w] | mask
        x = bloom_next(x, b, m)


def lower_bound128(k1, k2, q1, q2):
    """First position p with (k1[p], k2[p]) >= (q1, q2) in arrays sorted by (k1, k2)."""
    lo = 0
    hi = k1.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        a = k1[mid]
        if a < q1 or (a == q1 and k2[mid] < q2):
            lo = mid + 1
        else:
            hi = mid
    return lo


def contains128(k1, k2, q1, q2):
    p = lower_bound128(k1, k2, q1, q2)
    return p < k1.shape[0] and k1[p] == q1 and k2[p] == q2


def member_sorted(keys, bitmap, shift, q):
    """Position of q in the sorted distinct uint64 array keys, or -1. bitmap (uint32 words) has bit
    (h >> shift) set for every key h: most absent queries stop at that one read."""
    t = q >> shift
    if (bitmap[t >> B_FIVE] & U32(B_ONE << (t & B_31))) == 0:
        return -1
    lo = 0
    hi = keys.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[mid] < q:
            lo = mid + 1
        else:
            hi = mid
    if lo < keys.shape[0] and keys[lo] == q:
        return lo
    return -1


def is_blank_byte(c):
    """ASCII whitespace other than the newline: space, tab, CR, VT, FF."""
    return c == 0x20 or c == 0x09 or c == 0x0D or c == 0x0B or c == 0x0C


def split_units(buf, start, end, line_mode, out_s, out_e, pos, write):
    """Split buf[start:end] into units; return their number (write=True: spans to out_s/out_e[pos:]).

    Lines are separated by "\\n"; a line is blank when it holds only ASCII whitespace. line_mode=False
    (paragraphs): a unit is a maximal run of non-blank lines (one or more blank lines separate units).
    line_mode=True: a unit is one non-blank line. Spans are absolute byte positions [s, e), trimmed of
    ASCII whitespace at both ends; the bytes between two units (newlines, blank lines, indentation) are
    their separator.
    """
    count = 0
    ps = -1
    pe = -1
    fs = -1
    ls = -1
    i = start
    while i <= end:
        if i == end or buf[i] == NEWLINE:
            if fs >= 0:
                if line_mode:
                    if write:
                        out_s[pos + count] = fs
                        out_e[pos + count] = ls + 1
                    count += 1
                else:
                    if ps < 0:
                        ps = fs
                    pe = ls + 1
            elif ps >= 0:
                if write:
                    out_s[pos + count] = ps
                    out_e[pos + count] = pe
                count += 1
                ps = -1
            fs = -1
            ls = -1
        elif not is_blank_byte(buf[i]):
            if fs < 0:
                fs = i
            ls = i
        i += 1
    if ps >= 0:
        if write:
            out_s[pos + count] = ps
            out_e[pos + count] = pe
        count += 1
    return count


def word_spans(src, start, end, map_off, map_cp, out_s, out_e, pos, write):
    """Original byte span of every word of the normalized text of src[start:end]; return the number of
    words (equal to normalize_doc's). A normalized word is a maximal run of non-space image codepoints
    (normalize_doc's rule); its span runs from the start of the source codepoint that produced its first
    image codepoint to the end of the one that produced its last. With write, spans (absolute byte
    positions) go to out_s/out_e[pos:]."""
    n = 0
    in_word = False
    i = start
    while i < end:
        cp, step = utf8_decode(src, i, end)
        for j in range(map_off[cp], map_off[cp + 1]):
            if map_cp[j] == WORD_SPACE:
                in_word = False
            else:
                if not in_word:
                    if write:
                        out_s[pos + n] = i
                    n += 1
                    in_word = True
                if write:
                    out_e[pos + n - 1] = i + step
        i += step
    return n


DEVICE_FUNCTIONS = ["bloom_start", "bloom_next", "bloom_word_mask", "bloom_contains", "bloom_add_range",
                    "lower_bound128", "contains128", "member_sorted", "is_blank_byte", "split_units", "word_spans"]

_C = build(njit(cache=False, nogil=True), sys.modules[__name__])
_G = build(cuda.jit(device=True), sys.modules[__name__])
c_bloom_contains = _C["bloom_contains"]
c_bloom_add_range = _C["bloom_add_range"]
c_contains128 = _C["contains128"]
c_lower_bound128 = _C["lower_bound128"]
c_split_units = _C["split_units"]
c_member_sorted = _C["member_sorted"]
c_word_spans = _C["word_spans"]
c_normalize_doc = _C["normalize_doc"]
c_xxh64 = _C["xxh64"]
c_scan_shingles = _C["scan_shingles"]
g_bloom_contains = _G["bloom_contains"]
g_bloom_start = _G["bloom_start"]
g_bloom_next = _G["bloom_next"]
g_bloom_word_mask = _G["bloom_word_mask"]
g_contains128 = _G["contains128"]
g_lower_bound128 = _G["lower_bound128"]
g_split_units = _G["split_units"]
g_member_sorted = _G["member_sorted"]
g_word_spans = _G["word_spans"]
g_normalize_doc = _G["normalize_doc"]
g_xxh64 = _G["xxh64"]
g_scan_shingles = _G["scan_shingles"]


# ----------------------------------------------------------------------------------------------------
# CPU kernels (numba.njit, parallel over items / documents)
# ----------------------------------------------------------------------------------------------------

@njit(parallel=True, cache=True, nogil=True)
def cpu_hash128(data, starts, ends, seed1, seed2, out1, out2):
    """out1[i], out2[i] = XXH64(data[starts[i]:ends[i]], seed1 / seed2). data uint8 (T,); starts, ends
    int64 (n,); out1, out2 uint64 (n,)."""
    for i in prange(starts.shape[0]):
        out1[i] = c_xxh64(data, starts[i], ends[i], seed1)
        out2[i] = c_xxh64(data, starts[i], ends[i], seed2)


@njit(parallel=True, cache=True, nogil=True)
def cpu_bloom_query(bits, m, k, h1, h2, out):
    """out[i] = 1 when item (h1[i], h2[i]) may be in the filter (all k bits set), else 0. bits uint32
    (ceil(m/32),), read only; h1, h2 uint64 (n,); out uint8 (n,)."""
    for i in prange(h1.shape[0]):
        out[i] = 1 if c_bloom_contains(bits, m, k, h1[i], h2[i]) else 0


@njit(parallel=True, cache=True, nogil=True)
def cpu_bloom_insert(bits, m, k, h1, h2, parts):
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
def cpu_contains128(k1, k2, q1, q2, out):
    """out[i] = 1 when (q1[i], q2[i]) is in the set held by k1, k2 (uint64 (N,), sorted by (k1, k2))."""
    for i in prange(q1.shape[0]):
        out[i] = 1 if c_contains128(k1, k2, q1[i], q2[i]) else 0


@njit(parallel=True, cache=True, nogil=True)
def cpu_lower_bound128(k1, k2, q1, q2, out):
    """out[i] = number of keys (k1, k2) (sorted) below (q1[i], q2[i]) (int64 (n,)): merge positions."""
    for i in prange(q1.shape[0]):
        out[i] = c_lower_bound128(k1, k2, q1[i], q2[i])


@njit(parallel=True, cache=True, nogil=True)
def cpu_member_sorted(keys, bitmap, shift, q, out):
    """out[i] = position of q[i] in keys (sorted distinct uint64 (H,)) or -1; bitmap/shift: see
    member_sorted. out int64 (n,)."""
    for i in prange(q.shape[0]):
        out[i] = c_member_sorted(keys, bitmap, shift, q[i])


@njit(parallel=True, cache=True, nogil=True)
def cpu_split_count(data, offsets, line_mode, counts):
    """counts[d] = number of units of document d (data[offsets[d]:offsets[d+1]]); counts int64 (n,)."""
    dummy = np.empty(0, np.int64)
    for d in prange(offsets.shape[0] - 1):
        counts[d] = c_split_units(data, offsets[d], offsets[d + 1], line_mode, dummy, dummy, 0, False)


@njit(parallel=True, cache=True, nogil=True)
def cpu_split_write(data, offsets, line_mode, unit_off, out_s, out_e):
    """Spans of the units of document d to out_s/out_e[unit_off[d]:unit_off[d+1]] (absolute positions)."""
    for d in prange(offsets.shape[0] - 1):
        c_split_units(data, offsets[d], offsets[d + 1], line_mode, out_s, out_e, unit_off[d], True)


@njit(parallel=True, cache=True, nogil=True)
def cpu_span_norm_sizes(data, starts, ends, map_off, map_cp, sizes):
    """sizes[i] = bytes of the normalized text of data[starts[i]:ends[i]] (int64 (n,))."""
    dummy = np.empty(0, np.uint8)
    for i in prange(starts.shape[0]):
        nb, nw, nc = c_normalize_doc(data, starts[i], ends[i], map_off, map_cp, dummy, 0, False)
        sizes[i] = nb


@njit(parallel=True, cache=True, nogil=True)
def cpu_span_norm_hash(data, starts, ends, map_off, map_cp, out, out_off, seed1, seed2, h1, h2):
    """Normalize span i into out[out_off[i]:out_off[i+1]] (uint8, sized by cpu_span_norm_sizes) and hash
    it: h1[i], h2[i] = XXH64(normalized bytes, seed1 / seed2)."""
    for i in prange(starts.shape[0]):
        c_normalize_doc(data, starts[i], ends[i], map_off, map_cp, out, out_off[i], True)
        h1[i] = c_xxh64(out, out_off[i], out_off[i + 1], seed1)
        h2[i] = c_xxh64(out, out_off[i], out_off[i + 1], seed2)


@njit(parallel=True, cache=True, nogil=True)
def cpu_ngram_hashes(norm, offsets, n, seed, base, out):
    """Word n-gram hashes of every normalized document in order: n-gram j of document d (words j..j+n-1)
    -> out[base[d] + j] = XXH64(seed) of its bytes. base int64 (docs+1,) reserves max(words-n+1, 0)."""
    dummy = np.empty(0, np.uint64)
    for d in prange(offsets.shape[0] - 1):
        ring = np.empty(n, np.int64)
        c_scan_shingles(norm, offsets[d], offsets[d + 1], False, n, seed, dummy, dummy, dummy, out, base[d], ring,
                        True)


@njit(parallel=True, cache=True, nogil=True)
def cpu_word_spans(data, starts, ends, map_off, map_cp, base, out_s, out_e, counts):
    """Original byte spans of the normalized words of document d = data[starts[d]:ends[d]] ->
    out_s/out_e[base[d]:] (absolute positions); counts[d] = number of words (int64). base reserves the
    document's normalized word count."""
    for d in prange(starts.shape[0]):
        counts[d] = c_word_spans(data, starts[d], ends[d], map_off, map_cp, out_s, out_e, base[d], True)


@njit(parallel=True, cache=True, nogil=True)
def cpu_cut_copy(data, offsets, cut_off, cs, ce, out, new_off):
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


# ----------------------------------------------------------------------------------------------------
# GPU kernels (numba.cuda.jit; one thread per item / document)
# ----------------------------------------------------------------------------------------------------

@kernel
def gpu_hash128(data, starts, ends, seed1, seed2, out1, out2):
    i = cuda.grid(1)
    if i < starts.shape[0]:
        out1[i] = g_xxh64(data, starts[i], ends[i], seed1)
        out2[i] = g_xxh64(data, starts[i], ends[i], seed2)


@kernel
def gpu_bloom_query(bits, m, k, h1, h2, out):
    i = cuda.grid(1)
    if i < h1.shape[0]:
        out[i] = 1 if g_bloom_contains(bits, m, k, h1[i], h2[i]) else 0


@kernel
def gpu_bloom_insert(bits, m, k, h1, h2):
    """One thread per item; bits are set with atomic OR on uint32 words (the final array is the OR of
    all items' bits, whatever the thread order: identical to the CPU kernel's)."""
    i = cuda.grid(1)
    if i < h1.shape[0]:
        x, b = g_bloom_start(h1[i], h2[i], m)
        for _ in range(k):
            w, mask = g_bloom_word_mask(x)
            cuda.atomic.or_(bits, w, mask)
            x = g_bloom_next(x, b, m)


@kernel
def gpu_contains128(k1, k2, q1, q2, out):
    i = cuda.grid(1)
    if i < q1.shape[0]:
        out[i] = 1 if g_contains128(k1, k2, q1[i], q2[i]) else 0


@kernel
def gpu_lower_bound128(k1, k2, q1, q2, out):
    i = cuda.grid(1)
    if i < q1.shape[0]:
        out[i] = g_lower_bound128(k1, k2, q1[i], q2[i])


@kernel
def gpu_member_sorted(keys, bitmap, shift, q, out):
    i = cuda.grid(1)
    if i < q.shape[0]:
        out[i] = g_member_sorted(keys, bitmap, shift, q[i])


@kernel
def gpu_split_count(data, offsets, line_mode, counts):
    d = cuda.grid(1)
    if d < offsets.shape[0] - 1:
        counts[d] = g_split_units(data, offsets[d], offsets[d + 1], line_mode, counts, counts, 0, False)


@kernel
def gpu_split_write(data, offsets, line_mode, unit_off, out_s, out_e):
    d = cuda.grid(1)
    if d < offsets.shape[0] - 1:
        g_split_units(data, offsets[d], offsets[d + 1], line_mode, out_s, out_e, unit_off[d], True)


@kernel
def gpu_span_norm_sizes(data, starts, ends, map_off, map_cp, sizes):
    i = cuda.grid(1)
    if i < starts.shape[0]:
        nb, nw, nc = g_normalize_doc(data, starts[i], ends[i], map_off, map_cp, data, 0, False)
        sizes[i] = nb


@kernel
def gpu_span_norm_hash(data, starts, ends, map_off, map_cp, out, out_off, seed1, seed2, h1, h2):
    i = cuda.grid(1)
    if i < starts.shape[0]:
        g_normalize_doc(data, starts[i], ends[i], map_off, map_cp, out, out_off[i], True)
        h1[i] = g_xxh64(out, out_off[i], out_off[i + 1], seed1)
        h2[i] = g_xxh64(out, out_off[i], out_off[i + 1], seed2)


@kernel
def gpu_ngram_hashes(norm, offsets, n, seed, base, out, dummy):
    """One thread per document (dummy: an empty uint64 device array for scan_shingles' unused MinHash
    arguments)."""
    d = cuda.grid(1)
    if d < offsets.shape[0] - 1:
        ring = cuda.local.array(MAX_NGRAM, np.int64)
        g_scan_shingles(norm, offsets[d], offsets[d + 1], False, n, seed, dummy, dummy, dummy, out, base[d], ring,
                        True)


@kernel
def gpu_word_spans(data, starts, ends, map_off, map_cp, base, out_s, out_e, counts):
    d = cuda.grid(1)
    if d < starts.shape[0]:
        counts[d] = g_word_spans(data, starts[d], ends[d], map_off, map_cp, out_s, out_e, base[d], True)


TPB = 128


def blocks(n: int, tpb: int = TPB) -> int:
    return max(1, -(-n // tpb))
