"""CPU kernels: the shared device functions compiled with ``numba.njit``, parallel over documents.

Every kernel is array-in / array-out. Notation: n = documents in the batch, K = permutations,
B = bands, T = text bytes of the batch. Temporary memory is per document unless stated.
"""
import numpy as np
from numba import njit, prange

from ._build import build
from .core import EXACT_SEED_HI, EXACT_SEED_LO, MERSENNE61
from .normalize import ASCII_GENERIC, MODE_BLOCKS

# The per-shingle functions are inlined at Numba's IR level: as calls, each one increments and decrements
# the reference counts of the arrays it is passed (atomic instructions), per shingle. With the unsigned
# byte loads of core.read_u64le, the cost per shingle besides the permutations fell from 65 to 26 ns
# (benchmarks/minhash_limit.py, old and new kernels in the same hour, 1 thread); the permutations
# themselves run at 2.2 G/s (AVX-512, the loop over K vectorized). Output unchanged.
_INLINE = {"minhash_update", "xxh64", "xxh64_tail", "xxh64_converge", "xxh64_avalanche", "xxh64_tail_select",
           "xxh64_short", "unit_start", "shingle_end", "fss_value", "fss_bucket", "fss_offer", "fss_open", "fss_fill",
           "fss_sketch"}
_D = build(lambda fn: njit(cache=False, nogil=True, inline="always" if fn.__name__ in _INLINE else "never")(fn))
normalize_span = _D["normalize_span"]
ascii_mode = _D["ascii_mode"]
hash_shingles = _D["hash_shingles"]
xxh64 = _D["xxh64"]
band_key = _D["band_key"]
jaccard_sorted = _D["jaccard_sorted"]
representative_run = _D["representative_run"]
utf8_invalid = _D["utf8_invalid"]
reduce61 = _D["reduce61"]
fss_sketch = _D["fss_sketch"]
minhash_update = _D["minhash_update"]
SKETCH_GROUP = 64  # documents per parallel iteration of the signature kernels: they share one set of scratch arrays



@njit(parallel=True, cache=True, nogil=True)
def normalize_sizes(data, offsets, map_off, map_cp, sizes):
    """Pass 1 of normalization. data: uint8 (T,), offsets: int64 (n+1,), tables from unicode_tables.
    Writes sizes (n, 3) int64 = (bytes, words, codepoints) of each normalized document. No temporaries."""
    dummy = np.empty(0, np.uint8)
    mode = ascii_mode(map_cp)  # the ASCII fast paths, checked once per launch (kernels/normalize.py)
    if mode != ASCII_GENERIC:
        mode |= MODE_BLOCKS
    for i in prange(offsets.shape[0] - 1):
        nb, nw, nc = normalize_span(data, offsets[i], offsets[i + 1], map_off, map_cp, mode, dummy, 0, False)
        sizes[i, 0] = nb
        sizes[i, 1] = nw
        sizes[i, 2] = nc


@njit(parallel=True, cache=True, nogil=True)
def normalize_write(data, offsets, map_off, map_cp, out, out_offsets):
    """Pass 2 of normalization: writes document i to out[out_offsets[i]:out_offsets[i+1]] (uint8,
    sized by pass 1)."""
    mode = ascii_mode(map_cp)
    if mode != ASCII_GENERIC:
        mode |= MODE_BLOCKS
    for i in prange(offsets.shape[0] - 1):
        normalize_span(data, offsets[i], offsets[i + 1], map_off, map_cp, mode, out, out_offsets[i], True)


@njit(parallel=True, cache=True, nogil=True)
def utf8_invalid_rows(data, offsets, out):
    """out: uint8 (n,) = 1 where data[offsets[i]:offsets[i+1]] is not valid UTF-8. No temporaries."""
    for i in prange(offsets.shape[0] - 1):
        out[i] = utf8_invalid(data, offsets[i], offsets[i + 1])


@njit(parallel=True, cache=True, nogil=True)
def exact_hashes(norm, offsets, out):
    """128-bit exact-dedup hash of each normalized document: out (n, 2) uint64 = XXH64 with two
    fixed seeds (pinned in the contract). Collision probability for N documents ~ N^2 / 2^129."""
    for i in prange(offsets.shape[0] - 1):
        out[i, 0] = xxh64(norm, offsets[i], offsets[i + 1], EXACT_SEED_LO)
        out[i, 1] = xxh64(norm, offsets[i], offsets[i + 1], EXACT_SEED_HI)


@njit(inline="always", nogil=True)
def _group(g, counts):
    """The signature kernels' parallel unit: documents [lo, hi) of group g (SKETCH_GROUP each), and the most
    shingles one of them has (counts: int64 (docs,)), which sizes the group's scratch."""
    lo = g * SKETCH_GROUP
    hi = min(counts.shape[0], lo + SKETCH_GROUP)
    most = 0
    for i in range(lo, hi):
        most = max(most, counts[i])
    return lo, hi, most


@njit(inline="always", nogil=True)
def _fss_scratch(most, K):
    """fss_sketch's scratch for documents of up to ``most`` shingles: (vals, bkts, sig, opened)."""
    return np.empty(most, np.uint64), np.empty(most, np.int64), np.empty(K, np.uint64), np.empty(K, np.uint8)


@njit(parallel=True, cache=True, nogil=True)
def minhash_signatures(norm, offsets, counts, kind_char, n, seed, a, b, mask, sig_out, nshingles):
    """MinHash of every normalized document (MinHashConfig family "exact").

    counts: int64 (docs,) shingles per document (``Normalized.shingle_counts``; the scratch is sized by it).
    a, b: uint64 (K,) permutation parameters < 2^61-1. mask: 0xFFFFFFFF (32-bit signatures) or
    all ones. sig_out: uint64 (n, K), value = min over shingles of (a*h+b) mod p, masked; documents
    without shingles get 2^61-1 (masked) and nshingles 0 -- callers must route them to the exact path,
    never to LSH. Temporaries per SKETCH_GROUP documents: 16 bytes per shingle of the longest + 8 bytes per K.
    """
    K = a.shape[0]
    for g in prange((counts.shape[0] + SKETCH_GROUP - 1) // SKETCH_GROUP):
        lo, hi, most = _group(g, counts)
        hh = np.empty(most, np.uint64)
        units = np.empty(most + n, np.int64)
        sig = np.empty(K, np.uint64)
        for i in range(lo, hi):
            c = hash_shingles(norm, offsets[i], offsets[i + 1], kind_char, n, seed, hh, 0, units)
            nshingles[i] = c
            sig[:] = MERSENNE61
            for t in range(c):
                minhash_update(sig, a, b, reduce61(hh[t]))
            for k in range(K):
                sig_out[i, k] = sig[k] & mask


@njit(parallel=True, cache=True, nogil=True)
def sketch_signatures(norm, offsets, counts, kind_char, n, seed, a, b, rounds, shift, sig_out, nshingles):
    """fss signatures (``core.fss_sketch``, MinHashConfig family "fss") of every normalized document.

    counts: int64 (docs,) shingles per document (``Normalized.shingle_counts``; the scratch is sized by it).
    a, b: uint64 (rounds + K,). shift: 0 (width 64) or 32 (width 32: the values' high halves). sig_out: uint64
    (docs, K); a document without shingles gets FSS_EMPTY >> shift and nshingles 0 (the exact path only).
    Temporaries per SKETCH_GROUP documents: 32 bytes per shingle of the longest + 9 bytes per bucket."""
    K = sig_out.shape[1]
    for g in prange((counts.shape[0] + SKETCH_GROUP - 1) // SKETCH_GROUP):
        lo, hi, most = _group(g, counts)
        hh = np.empty(most, np.uint64)
        units = np.empty(most + n, np.int64)
        vals, bkts, sig, opened = _fss_scratch(most, K)
        for i in range(lo, hi):
            c = hash_shingles(norm, offsets[i], offsets[i + 1], kind_char, n, seed, hh, 0, units)
            nshingles[i] = c
            fss_sketch(hh[:c], a, b, rounds, sig, vals, bkts, opened)
            for k in range(K):
                sig_out[i, k] = sig[k] >> shift


@njit(parallel=True, cache=True, nogil=True)
def sketch_from_hashes(hashes, offsets, a, b, rounds, shift, sig_out):
    """fss signatures of pre-hashed sets: set i = hashes[offsets[i]:offsets[i+1]] (uint64, any order, repeats
    allowed); the arguments of ``sketch_signatures``. Empty sets get FSS_EMPTY >> shift."""
    K = sig_out.shape[1]
    counts = offsets[1:] - offsets[:-1]
    for g in prange((counts.shape[0] + SKETCH_GROUP - 1) // SKETCH_GROUP):
        lo, hi, most = _group(g, counts)
        vals, bkts, sig, opened = _fss_scratch(most, K)
        for i in range(lo, hi):
            fss_sketch(hashes[offsets[i]:offsets[i + 1]], a, b, rounds, sig, vals, bkts, opened)
            for k in range(K):
                sig_out[i, k] = sig[k] >> shift


@njit(parallel=True, cache=True, nogil=True)
def band_keys(sig_bytes, bands, band_bytes, out):
    """sig_bytes: uint8 (n, K*width/8) little-endian signature rows. out: uint64 (n, bands)."""
    for i in prange(sig_bytes.shape[0]):
        row = sig_bytes[i]
        for bnd in range(bands):
            out[i, bnd] = band_key(row, bnd, band_bytes)


RADIX_MIN = 48  # fewer values than this: insertion sort (a radix sort's 8 x 256 counters cost more)


@njit(inline="always", nogil=True)
def sort_distinct(a, tmp, hist):
    """Sort uint64 ``a`` ascending in place and move its distinct values to its front; returns their number.
    tmp: uint64 scratch (>= len(a)); hist: int64 (8, 256) scratch. An LSD radix sort, 8 passes of a byte
    (a pass whose byte is the same in every value is skipped), insertion sort below RADIX_MIN values: 11 ns
    per value of a ~400-shingle document against 33 for np.sort (quicksort) with its copy (1 thread,
    2026-12-05). Linear whatever the values (many repeats included)."""
    c = a.shape[0]
    if c < RADIX_MIN:
        for t in range(1, c):
            v = a[t]
            s = t
            while s > 0 and a[s - 1] > v:
                a[s] = a[s - 1]
                s -= 1
            a[s] = v
    else:
        hist[:, :] = 0
        for t in range(c):
            v = a[t]
            for p in range(8):
                hist[p, (v >> np.uint64(8 * p)) & np.uint64(255)] += 1
        src = a
        dst = tmp[:c]
        in_tmp = False
        for p in range(8):
            h = hist[p]
            if h[(a[0] >> np.uint64(8 * p)) & np.uint64(255)] == c:
                continue  # every value has this byte: the pass would not move anything
            total = 0
            for b in range(256):
                k = h[b]
                h[b] = total
                total += k
            sh = np.uint64(8 * p)
            for t in range(c):
                v = src[t]
                b = (v >> sh) & np.uint64(255)
                dst[h[b]] = v
                h[b] += 1
            src, dst = dst, src
            in_tmp = not in_tmp
        if in_tmp:  # an odd number of passes ran: the sorted values are in tmp
            a[:] = src
    m = 0
    for t in range(c):
        if t == 0 or a[t] != a[m - 1]:
            a[m] = a[t]
            m += 1
    return m


@njit(parallel=True, cache=True, nogil=True)
def shingle_sets(norm, offsets, docs, kind_char, n, seed, set_offsets, out, sizes):
    """Sorted distinct 64-bit shingle hashes of the documents ``docs`` (int64 (m,) indexes into
    offsets). set_offsets (m+1,) reserves room for every shingle (duplicates included); document j's
    distinct sorted hashes are written to out[set_offsets[j]:set_offsets[j] + sizes[j]]. Temporaries per
    SKETCH_GROUP documents: 16 bytes per shingle of the longest + 8 x n + 16 KiB (``sort_distinct``)."""
    counts = set_offsets[1:] - set_offsets[:-1]
    for g in prange((counts.shape[0] + SKETCH_GROUP - 1) // SKETCH_GROUP):
        lo, hi, most = _group(g, counts)
        units = np.empty(most + n, np.int64)
        tmp = np.empty(most, np.uint64)
        hist = np.empty((8, 256), np.int64)
        for j in range(lo, hi):
            d = docs[j]
            base = set_offsets[j]
            cnt = hash_shingles(norm, offsets[d], offsets[d + 1], kind_char, n, seed, out, base, units)
            sizes[j] = sort_distinct(out[base:base + cnt], tmp, hist)


@njit(parallel=True, cache=True, nogil=True)
def compact_sets(raw, set_offsets, sizes, offsets, out):
    """Copy set j = raw[set_offsets[j]:set_offsets[j] + sizes[j]] to out[offsets[j]:offsets[j] + sizes[j]]
    (``shingle_sets``' output without the room its repeated shingles left). No temporaries."""
    for j in prange(sizes.shape[0]):
        a = set_offsets[j]
        b = offsets[j]
        for t in range(sizes[j]):
            out[b + t] = raw[a + t]


@njit(parallel=True, cache=True, nogil=True)
def jaccard_pairs(hashes, set_offsets, set_sizes, left, right, out):
    """Exact Jaccard of shingle-hash sets for the pairs (left[p], right[p]) (indexes into the sets)."""
    for p in prange(left.shape[0]):
        x = left[p]
        y = right[p]
        out[p] = jaccard_sorted(hashes, set_offsets[x], set_sizes[x], set_offsets[y], set_sizes[y])


@njit(cache=True)
def _find(parent, x):
    root = x
    while parent[root] != root:
        root = parent[root]
    while parent[x] != root:  # path compression
        nxt = parent[x]
        parent[x] = root
        x = nxt
    return root


@njit(cache=True)
def union_find(n, u, v):
    """Connected components of n nodes under edges (u[e], v[e]) (int64). Returns int64 (n,) labels:
    the smallest node index of each component (deterministic whatever the edge order)."""
    parent = np.arange(n)
    for e in range(u.shape[0]):
        ru = _find(parent, u[e])
        rv = _find(parent, v[e])
        if ru != rv:
            # link the larger index under the smaller: the root is always the component minimum
            if ru < rv:
                parent[rv] = ru
            else:
                parent[ru] = rv
    for x in range(n):
        parent[x] = _find(parent, x)
    return parent


@njit(parallel=True, cache=True, nogil=True)
def representative_components(order, comp_off, entry_off, entry_bucket, entry_doc, set_offsets, set_sizes, hashes,
                              pinned, threshold, cap, head, tail, nxt, stamp, capped, rep, jac, comparisons):
    """The representative policy (``core.representative_run``), parallel over candidate components; the
    arguments of core_cuda.representative_components.

    order: int64 (m,) documents grouped by component, keep order within; comp_off: int64 (c+1,).
    entry_off (m+1,), entry_bucket/entry_doc (E,): each document's buckets (CSR by document).
    pinned: uint8 (m,), nonzero = always kept (indexed documents).
    Scratch: head/tail int64 (buckets,), nxt int64 (E,), stamp int64 (m,), pre-filled -1 (components touch
    disjoint buckets, entries and documents, so the threads share them).
    Outputs: capped uint8 (buckets,), rep int64 (m,) pre-filled -1, jac float64 (m,) pre-filled NaN,
    comparisons int64 (c,).
    """
    for c in prange(comp_off.shape[0] - 1):
        comparisons[c] = representative_run(order, comp_off[c], comp_off[c + 1], entry_off, entry_bucket, entry_doc,
                                            set_offsets, set_sizes, hashes, pinned, threshold, cap, head, tail, nxt,
                                            stamp, capped, rep, jac)



@njit(parallel=True, cache=True, nogil=True)
def minhash_from_hashes(hashes, offsets, a, b, mask, sig_out):
    """MinHash of pre-hashed sets: set i = hashes[offsets[i]:offsets[i+1]] (uint64, any order,
    duplicates allowed). sig_out: uint64 (n, K). Empty sets get 2^61-1 (masked)."""
    K = a.shape[0]
    for i in prange(offsets.shape[0] - 1):
        sig = np.full(K, MERSENNE61, np.uint64)
        for t in range(offsets[i], offsets[i + 1]):
            minhash_update(sig, a, b, reduce61(hashes[t]))
        for k in range(K):
            sig_out[i, k] = sig[k] & mask
