"""GPU kernels of the Bloom / paragraph / screening family (``bloom.py``'s device functions compiled with
``numba.cuda.jit``), one thread per item or document. Same results as ``bloom_cpu.py`` bit for bit; launched
by ``gpu_dedup.device.launch`` (``@kernel`` in ``_launch.py`` declares the geometry).

Word n-gram hashing (screening) is cooperative, not one thread per document: the word starts come from
``kernels/cuda.py:unit_chunks`` (a block per BYTE_CHUNK bytes, via ``lexical.minhash.unit_starts``), then
``ngram_hash_chunks`` gives each block a chunk of <= NGRAM_CHUNK n-grams of one document
(``device.split_chunks``), one n-gram per thread: the work of a thread is one n-gram's bytes.
"""
from numba import cuda

from . import bloom
from ._build import build
from ._launch import kernel

NGRAM_CHUNK = 2048  # n-grams per block of ngram_hash_chunks (the orchestration's default cut; no shared tile)

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
g_shingle_bounds = _G["shingle_bounds"]


@kernel
def hash128(data, starts, ends, seed1, seed2, out1, out2):
    i = cuda.grid(1)
    if i < starts.shape[0]:
        out1[i] = g_xxh64(data, starts[i], ends[i], seed1)
        out2[i] = g_xxh64(data, starts[i], ends[i], seed2)


@kernel
def bloom_query(bits, m, k, h1, h2, out):
    i = cuda.grid(1)
    if i < h1.shape[0]:
        out[i] = 1 if g_bloom_contains(bits, m, k, h1[i], h2[i]) else 0


@kernel
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


@kernel
def contains128(k1, k2, q1, q2, out):
    i = cuda.grid(1)
    if i < q1.shape[0]:
        out[i] = 1 if g_contains128(k1, k2, q1[i], q2[i]) else 0


@kernel
def lower_bound128(k1, k2, q1, q2, out):
    i = cuda.grid(1)
    if i < q1.shape[0]:
        out[i] = g_lower_bound128(k1, k2, q1[i], q2[i])


@kernel
def member_sorted(keys, bitmap, shift, q, out):
    i = cuda.grid(1)
    if i < q.shape[0]:
        out[i] = g_member_sorted(keys, bitmap, shift, q[i])


@kernel
def split_count(data, offsets, line_mode, counts):
    d = cuda.grid(1)
    if d < offsets.shape[0] - 1:
        counts[d] = g_split_units(data, offsets[d], offsets[d + 1], line_mode, counts, counts, 0, False)


@kernel
def split_write(data, offsets, line_mode, unit_off, out_s, out_e):
    d = cuda.grid(1)
    if d < offsets.shape[0] - 1:
        g_split_units(data, offsets[d], offsets[d + 1], line_mode, out_s, out_e, unit_off[d], True)


@kernel
def span_norm_sizes(data, starts, ends, map_off, map_cp, sizes):
    i = cuda.grid(1)
    if i < starts.shape[0]:
        nb, nw, nc = g_normalize_doc(data, starts[i], ends[i], map_off, map_cp, data, 0, False)
        sizes[i] = nb


@kernel
def span_norm_hash(data, starts, ends, map_off, map_cp, out, out_off, seed1, seed2, h1, h2):
    i = cuda.grid(1)
    if i < starts.shape[0]:
        g_normalize_doc(data, starts[i], ends[i], map_off, map_cp, out, out_off[i], True)
        h1[i] = g_xxh64(out, out_off[i], out_off[i + 1], seed1)
        h2[i] = g_xxh64(out, out_off[i], out_off[i + 1], seed2)


@kernel(per_block=True, stride=True)
def ngram_hash_chunks(norm, offsets, units, ubase, chunk_doc, chunk_first, chunk_count, n, seed, base, out):
    """One block per chunk of <= NGRAM_CHUNK word n-grams of one document (split_chunks over the n-gram
    counts max(w - n + 1, 0)), grid-stride; its threads stride the chunk's n-grams. norm uint8 (T,),
    offsets int64 (docs+1,); units int64 (W,) / ubase int64 (docs+1,): the word starts (unit_starts);
    base int64 (docs+1,): n-gram j of document d goes to out[base[d] + j] (uint64 (S,)) = XXH64(seed) of
    words j..j+n-1 joined by their spaces: bloom_cpu.ngram_hashes' array (hashing.scan_shingles).
    No shared memory; a thread reads one n-gram's bytes."""
    c = cuda.blockIdx.x
    while c < chunk_doc.shape[0]:
        d = chunk_doc[c]
        ub = ubase[d]
        n_units = ubase[d + 1] - ub
        doc_end = offsets[d + 1]
        j = chunk_first[c] + cuda.threadIdx.x
        last = chunk_first[c] + chunk_count[c]
        while j < last:
            s, e = g_shingle_bounds(units, ub, n_units, j, n, False, doc_end)
            out[base[d] + j] = g_xxh64(norm, s, e, seed)
            j += cuda.blockDim.x
        c += cuda.gridDim.x


@kernel
def word_spans(data, starts, ends, map_off, map_cp, base, out_s, out_e, counts):
    d = cuda.grid(1)
    if d < starts.shape[0]:
        counts[d] = g_word_spans(data, starts[d], ends[d], map_off, map_cp, out_s, out_e, base[d], True)
