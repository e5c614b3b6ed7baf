"""GPU kernels of the Bloom / paragraph / screening family (``bloom.py``'s device functions compiled with
``numba.cuda.jit``), one thread per item or document. Same results as ``bloom_cpu.py`` bit for bit; launched
by ``gpu_dedup.device.launch`` (``@kernel`` in ``_launch.py`` declares the geometry).
"""
import numpy as np
from numba import cuda

from . import bloom
from ._build import build
from ._launch import B, I8, U8, i4, i8, kernel, u1, u4, u8
from .bloom import MAX_NGRAM

_G = build(cuda.jit(device=True), bloom)
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


@kernel(sigs=[(u1, i8, i8, U8, U8, u8, u8)])
def hash128(data, starts, ends, seed1, seed2, out1, out2):
    i = cuda.grid(1)
    if i < starts.shape[0]:
        out1[i] = g_xxh64(data, starts[i], ends[i], seed1)
        out2[i] = g_xxh64(data, starts[i], ends[i], seed2)


@kernel(sigs=[(u4, U8, I8, u8, u8, u1)])
def bloom_query(bits, m, k, h1, h2, out):
    i = cuda.grid(1)
    if i < h1.shape[0]:
        out[i] = 1 if g_bloom_contains(bits, m, k, h1[i], h2[i]) else 0


@kernel(sigs=[(u4, U8, I8, u8, u8)])
def bloom_insert(bits, m, k, h1, h2):
    """One thread per item; bits are set with atomic OR on uint32 words (the final array is the OR of
    all items' bits, whatever the thread order: identical to the CPU kernel's)."""
    i = cuda.grid(1)
    if i < h1.shape[0]:
        x, b = g_bloom_start(h1[i], h2[i], m)
        for _ in range(k):
            w, mask = g_bloom_word_mask(x)
            cuda.atomic.or_(bits, w, mask)
            x = g_bloom_next(x, b, m)


@kernel(sigs=[(u8, u8, u8, u8, u1)])
def contains128(k1, k2, q1, q2, out):
    i = cuda.grid(1)
    if i < q1.shape[0]:
        out[i] = 1 if g_contains128(k1, k2, q1[i], q2[i]) else 0


@kernel(sigs=[(u8, u8, u8, u8, i8)])
def lower_bound128(k1, k2, q1, q2, out):
    i = cuda.grid(1)
    if i < q1.shape[0]:
        out[i] = g_lower_bound128(k1, k2, q1[i], q2[i])


@kernel(sigs=[(u8, u4, U8, u8, i8)])
def member_sorted(keys, bitmap, shift, q, out):
    i = cuda.grid(1)
    if i < q.shape[0]:
        out[i] = g_member_sorted(keys, bitmap, shift, q[i])


@kernel(sigs=[(u1, i8, B, i8)])
def split_count(data, offsets, line_mode, counts):
    d = cuda.grid(1)
    if d < offsets.shape[0] - 1:
        counts[d] = g_split_units(data, offsets[d], offsets[d + 1], line_mode, counts, counts, 0, False)


@kernel(sigs=[(u1, i8, B, i8, i8, i8)])
def split_write(data, offsets, line_mode, unit_off, out_s, out_e):
    d = cuda.grid(1)
    if d < offsets.shape[0] - 1:
        g_split_units(data, offsets[d], offsets[d + 1], line_mode, out_s, out_e, unit_off[d], True)


@kernel(sigs=[(u1, i8, i8, i4, i4, i8)])
def span_norm_sizes(data, starts, ends, map_off, map_cp, sizes):
    i = cuda.grid(1)
    if i < starts.shape[0]:
        nb, nw, nc = g_normalize_doc(data, starts[i], ends[i], map_off, map_cp, data, 0, False)
        sizes[i] = nb


@kernel(sigs=[(u1, i8, i8, i4, i4, u1, i8, U8, U8, u8, u8)])
def span_norm_hash(data, starts, ends, map_off, map_cp, out, out_off, seed1, seed2, h1, h2):
    i = cuda.grid(1)
    if i < starts.shape[0]:
        g_normalize_doc(data, starts[i], ends[i], map_off, map_cp, out, out_off[i], True)
        h1[i] = g_xxh64(out, out_off[i], out_off[i + 1], seed1)
        h2[i] = g_xxh64(out, out_off[i], out_off[i + 1], seed2)


@kernel(sigs=[(u1, i8, I8, U8, i8, u8, u8)])
def ngram_hashes(norm, offsets, n, seed, base, out, dummy):
    """One thread per document (dummy: an empty uint64 device array for scan_shingles' unused MinHash
    arguments)."""
    d = cuda.grid(1)
    if d < offsets.shape[0] - 1:
        ring = cuda.local.array(MAX_NGRAM, np.int64)
        g_scan_shingles(norm, offsets[d], offsets[d + 1], False, n, seed, dummy, dummy, dummy, out, base[d], ring,
                        True)


@kernel(sigs=[(u1, i8, i8, i4, i4, i8, i8, i8, i8)])
def word_spans(data, starts, ends, map_off, map_cp, base, out_s, out_e, counts):
    d = cuda.grid(1)
    if d < starts.shape[0]:
        counts[d] = g_word_spans(data, starts[d], ends[d], map_off, map_cp, out_s, out_e, base[d], True)
