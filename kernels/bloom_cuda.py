"""GPU kernels of the Bloom / paragraph / screening family (``bloom.py``'s device functions compiled with
``numba.cuda.jit``); the queries, inserts and span-hash kernels take one thread per item. Same results as
``bloom_cpu.py`` bit for bit; launched by ``gpu_dedup.ops.bloom`` (``@kernel`` in ``_launch.py`` declares
the geometry).

Word n-gram hashing (screening) is cooperative, not one thread per document: the word starts come from
``kernels/core_cuda.py:unit_chunks`` (a block per BYTE_TILE bytes, via ``ops.core.unit_starts``), then
``ngram_hash_chunks`` gives each block a chunk of <= NGRAM_CHUNK n-grams of one document
(``device.split_chunks``), one n-gram per thread: the work of a thread is one n-gram's bytes.

Paragraph hashing (normalize, then two XXH64 per paragraph) has no kernel here: gpu_dedup/ops/bloom.py
``span_hashes`` gathers the paragraphs and runs the dedup path's chunked normalization and its block-per-text
hash (kernels/core_cuda.py ``xxh64_pairs``), so a multi-MB paragraph no longer holds one thread (the CPU twins
``bloom_cpu.span_norm_sizes`` / ``span_norm_hash`` stay: a thread per paragraph on the CPU).

Paragraph / line splitting is not one thread per document either: ``split_piece_count`` / ``split_piece_write``
run the unchanged ``bloom.split_units`` on each line-aligned piece (``device.line_chunks``: cut right after a
newline, nominally SPLIT_CHUNK bytes; work per thread <= max(SPLIT_CHUNK, the longest line)). Lines never
straddle a cut, so line units are the pieces' units; a paragraph (a run of non-blank lines) that runs over a
cut is the last unit of one piece and the first of the next, merged by gpu_dedup/ops/bloom.py where
the piece's last line and the next piece's first line are both non-blank (``line_edges``).

Word spans (screening's original byte offsets) are not one thread per document either: ``word_span_plan`` cuts
each document into chunks of about WORD_SPAN_CHUNK bytes at ``chunk_entry`` boundaries (the normalization's:
the scan state there is read off one codepoint's image), then ``word_span_chunks`` scans each chunk from that
state (``bloom.word_span_scan``, the CPU's word_spans in pieces): a count pass, then a write pass at the
chunks' running word totals. A word that runs over a cut gets its start from the chunk it begins in and its
end from the chunk it closes in.
"""
from numba import cuda

from . import bloom
from ._build import build
from ._launch import B, I8, U8, i4, i8, i8_2, kernel, u1, u4, u8

NGRAM_CHUNK = 2048  # n-grams per block of ngram_hash_chunks (the orchestration's default cut; no shared tile)
WORD_SPAN_CHUNK = 512  # nominal text bytes per thread of word_span_chunks (moved by chunk_entry; no shared tile)
SPLIT_CHUNK = 1024  # nominal bytes per thread of split_piece_count / split_piece_write (moved to a line start)
NEWLINE = bloom.NEWLINE

_G = build(cuda.jit(device=True), bloom)
g_bloom_contains = _G["bloom_contains"]
g_bloom_start = _G["bloom_start"]
g_bloom_next = _G["bloom_next"]
g_bloom_word_mask = _G["bloom_word_mask"]
g_contains128 = _G["contains128"]
g_lower_bound128 = _G["lower_bound128"]
g_split_units = _G["split_units"]
g_member_sorted = _G["member_sorted"]
g_word_span_scan = _G["word_span_scan"]
g_chunk_entry = _G["chunk_entry"]
g_xxh64 = _G["xxh64"]
g_shingle_bounds = _G["shingle_bounds"]
g_is_blank_byte = _G["is_blank_byte"]


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


@cuda.jit(device=True)
def line_edges(buf, a, b):
    """(1 if the first line of piece buf[a:b] is non-blank, 1 if its last line is): a piece ends right after
    a newline or at its document's end. Reads up to the first / last non-blank byte of those lines."""
    head = 0
    i = a
    while i < b and buf[i] != NEWLINE:
        if not g_is_blank_byte(buf[i]):
            head = 1
            break
        i += 1
    tail = 0
    j = b - 1
    if j >= a and buf[j] == NEWLINE:
        j -= 1
    while j >= a and buf[j] != NEWLINE:
        if not g_is_blank_byte(buf[j]):
            tail = 1
            break
        j -= 1
    return head, tail


@kernel(stride=True, sigs=[(u1, i8, i8, I8, i8, i8_2)])
def split_piece_count(data, starts, ends, mode, counts, edges):
    """One thread per piece c = data[starts[c]:ends[c]] (int64 (C,) each, line-aligned: device.line_chunks),
    grid-stride: counts[c] (int64 (C,)) = bloom.split_units' units of the piece; edges[c, 0 / 1] (int64
    (C, 2)) = line_edges (its first / last line non-blank)."""
    c = cuda.grid(1)
    while c < starts.shape[0]:
        counts[c] = g_split_units(data, starts[c], ends[c], mode, counts, counts, 0, False)
        head, tail = line_edges(data, starts[c], ends[c])
        edges[c, 0] = head
        edges[c, 1] = tail
        c += cuda.gridsize(1)


@kernel(stride=True, sigs=[(u1, i8, i8, I8, i8, i8, i8)])
def split_piece_write(data, starts, ends, mode, base, out_s, out_e):
    """One thread per piece (split_piece_count's), grid-stride: its units' spans (absolute byte positions)
    -> out_s / out_e[base[c]:] (int64; base int64 (C,) = the units of all earlier pieces)."""
    c = cuda.grid(1)
    while c < starts.shape[0]:
        g_split_units(data, starts[c], ends[c], mode, out_s, out_e, base[c], True)
        c += cuda.gridsize(1)


@kernel(per_block=True, stride=True, sigs=[(u1, i8, i8, i8, i8, i8, i8, I8, U8, i8, u8)])
def ngram_hash_chunks(norm, offsets, units, ubase, chunk_doc, chunk_first, chunk_count, n, seed, base, out):
    """One block per chunk of <= NGRAM_CHUNK word n-grams of one document (split_chunks over the n-gram
    counts max(w - n + 1, 0)), grid-stride; its threads stride the chunk's n-grams. norm uint8 (T,),
    offsets int64 (docs+1,); units int64 (W,) / ubase int64 (docs+1,): the word starts (unit_starts);
    base int64 (docs+1,): n-gram j of document d goes to out[base[d] + j] (uint64 (S,)) = XXH64(seed) of
    words j..j+n-1 joined by their spaces: bloom_cpu.ngram_hashes' array (core.hash_shingles).
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


@kernel(stride=True, sigs=[(u1, i8, i8, i4, i4, i8, i8, i8, i8)])
def word_span_plan(data, starts, ends, map_off, map_cp, chunk_doc, chunk_first, lo, prev):
    """One thread per byte chunk of the documents data[starts[d]:ends[d]] (split_chunks over ends - starts:
    chunk_doc, chunk_first int64 (C,)), grid-stride: lo[c] (int64 (C,)) = where chunk c really begins (its
    nominal first byte moved forward by normalize.chunk_entry to a codepoint whose predecessor has a non-empty
    image, or to the document's end), prev[c] (int64 (C,)) = 1 when the last image before it is a space (no word
    open there; 1 at a document's start)."""
    c = cuda.grid(1)
    while c < chunk_doc.shape[0]:
        d = chunk_doc[c]
        b, pv = g_chunk_entry(data, starts[d], starts[d] + chunk_first[c], ends[d], map_off, map_cp)
        lo[c] = b
        prev[c] = pv
        c += cuda.gridsize(1)


@kernel(stride=True, sigs=[(u1, i8, i8, i4, i4, i8, i8, i8, i8, B, i8, i8, i8)])
def word_span_chunks(data, starts, ends, map_off, map_cp, chunk_doc, lo, prev, base, write, out_s, out_e, counts):
    """One thread per chunk of word_span_plan, grid-stride: bloom.word_span_scan of data[lo[c]:the next chunk's lo
    or the document's end] from its entry state (a word open when prev[c] == 0, its end so far lo[c]); counts[c]
    (int64 (C,)) = the words that start in the chunk. With write, their spans go to out_s / out_e[base[c]:]
    (int64; base int64 (C,) = the words of all earlier chunks, in document order); a word's end is written by
    the chunk where it closes. Work per thread: the chunk's bytes (plus chunk_entry's move in the plan)."""
    c = cuda.grid(1)
    while c < chunk_doc.shape[0]:
        d = chunk_doc[c]
        e = ends[d]
        if c + 1 < chunk_doc.shape[0] and chunk_doc[c + 1] == d:
            e = lo[c + 1]
        pos = 0
        if write:  # the count pass passes no base
            pos = base[c]
        counts[c] = g_word_span_scan(data, lo[c], e, map_off, map_cp, out_s, out_e, pos, write, prev[c] == 0, lo[c],
                                     e == ends[d])
        c += cuda.gridsize(1)
