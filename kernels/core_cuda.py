"""GPU kernels: the shared device functions of ``core.py`` compiled with ``numba.cuda.jit``.

Same results as ``kernels/core_cpu.py`` bit for bit (tested under NUMBA_ENABLE_CUDASIM=1 in CI and on a real
GPU by benchmarks/gpu_check.py). Kernels (``@kernel``, see _launch.py) are cached and take device arrays
only: CuPy arrays or Numba device arrays; under the simulator NumPy arrays, or the strict backend's arrays.
Each ``@kernel`` declares its launch geometry (``_launch.py``); ``gpu_dedup.ops.core`` launches it.

Notation: n documents, K permutations, B bands, T text bytes, S shingles in a batch.
"""
import numpy as np
from numba import cuda, int64, uint8, uint64

from ._build import build
from ._launch import TPB, B, F8, I8, U8, f8, i4, i8, i8_2, kernel, u1, u1_2, u8, u8_2
from .core import EXACT_SEED_HI, EXACT_SEED_LO, FSS_EMPTY, MERSENNE61, P64_5, SPACE
from .normalize import ASCII_GENERIC
from ..constants import BYTE_TILE

_D = build(cuda.jit(device=True))
normalize_scan = _D["normalize_scan"]
chunk_entry = _D["chunk_entry"]
unit_start = _D["unit_start"]
utf8_invalid_at = _D["utf8_invalid_at"]
xxh64_lane = _D["xxh64_lane"]
xxh64_round = _D["xxh64_round"]
xxh64_converge = _D["xxh64_converge"]
xxh64_tail = _D["xxh64_tail"]
read_u64le = _D["read_u64le"]
ascii_mode_guess = _D["ascii_mode_guess"]
ascii_word_fits = _D["ascii_word_fits"]
xxh64 = _D["xxh64"]
reduce61 = _D["reduce61"]
permute61 = _D["permute61"]
fss_value = _D["fss_value"]
fss_bucket = _D["fss_bucket"]
shingle_bounds = _D["shingle_bounds"]
band_key = _D["band_key"]
jaccard_sorted = _D["jaccard_sorted"]
representative_run = _D["representative_run"]

NORM_CHUNK = 512   # text bytes per thread in the normalization kernels (nominal: chunk_entry moves the cut)
# BYTE_TILE (constants.py; <= TPB * 32: 32 per thread): unit_chunks' shared tile. The machine code is cached, so
# a constant no caller or test changes; the orchestration's chunk (lexical/minhash.py UNIT_CHUNK) must fit
XXH_TPB = 32       # threads per document in exact_hashes: 32 words = 8 stripes of 32 bytes loaded per step
TILE = 128         # shingle hashes staged in shared memory per step (= threads per MinHash block)
MAX_K_PER_THREAD = 72  # K <= TILE * MAX_K_PER_THREAD = 9216 >= 9000 (constants.MAX_NUM_PERM)
CHUNK = 2048       # shingles per MinHash block: long documents span several blocks (atomic min)


@cuda.jit(device=True)
def block_ascii_mode(map_cp):
    """normalize.ascii_mode for the whole block, its 16 checks shared among the threads (every thread of the
    block must call it: it synchronizes them). Without MODE_BLOCKS: on a GPU thread the block loops of
    normalize.ascii_run would be plain byte loops; the 8-byte word loop is the fast path here."""
    mode = ascii_mode_guess(map_cp)
    fits = 1
    c = 8 * cuda.threadIdx.x
    while c < 128:
        fits &= ascii_word_fits(map_cp, c, mode)
        c += 8 * cuda.blockDim.x
    if cuda.syncthreads_and(fits) == 0:
        return ASCII_GENERIC
    return mode


# Text kernels: the work is cut into chunks of a bounded number of bytes (split_chunks in
# gpu_dedup/runtime/device.py: a document of L bytes has ceil(L / chunk) chunks, chunk_doc / chunk_first /
# chunk_count), so a warp never waits for its longest document and a 6 MB document is spread over
# thousands of threads. Results are those of the one-document-at-a-time CPU kernels, bit for bit, for
# any grid and any block size up to the kernel's bound (grid-stride loops; block-wide steps use
# cuda.blockDim): ``geometry`` picks the launch.


@kernel(stride=True, sigs=[(u1, i8, i4, i4, i8, i8, i8, i8)])
def normalize_plan(data, offsets, map_off, map_cp, chunk_doc, chunk_first, lo, prev):
    """One thread per normalization chunk: lo (C,) int64 = where chunk c really begins (its nominal first
    byte moved forward by normalize.chunk_entry to a codepoint whose predecessor has a non-empty image),
    prev (C,) int64 = the scan state there (1 at a document's start). Chunk c ends where the next chunk
    of its document begins, or at the document's end."""
    c = cuda.grid(1)
    while c < chunk_doc.shape[0]:
        d = chunk_doc[c]
        s = offsets[d]
        b, pv = chunk_entry(data, s, s + chunk_first[c], offsets[d + 1], map_off, map_cp)
        lo[c] = b
        prev[c] = pv
        c += cuda.gridsize(1)


@cuda.jit(device=True)
def chunk_end(chunk_doc, lo, offsets, c, d):
    """Last byte (exclusive) of normalization chunk c of document d: the next chunk's start or the
    document's end."""
    if c + 1 < chunk_doc.shape[0] and chunk_doc[c + 1] == d:
        return lo[c + 1]
    return offsets[d + 1]


@kernel(stride=True, sigs=[(u1, i8, i4, i4, i8, i8, i8, i8_2)])
def normalize_chunk_sizes(data, offsets, map_off, map_cp, chunk_doc, lo, prev, counts):
    """One thread per chunk (normalize_plan's): counts (C, 4) int64 = (bytes, spaces, bytes - codepoints,
    end state) of the chunk's eager scan, the document's trailing space not yet taken back (the caller
    sums a document's chunks and takes it back when its last non-empty chunk ends in state 1)."""
    mode = block_ascii_mode(map_cp)
    c = cuda.grid(1)
    while c < chunk_doc.shape[0]:
        d = chunk_doc[c]
        p, sp, extra, pv = normalize_scan(data, lo[c], chunk_end(chunk_doc, lo, offsets, c, d), map_off, map_cp,
                                          mode, data, 0, False, prev[c])
        counts[c, 0] = p
        counts[c, 1] = sp
        counts[c, 2] = extra
        counts[c, 3] = pv
        c += cuda.gridsize(1)


@kernel(stride=True, sigs=[(u1, i8, i4, i4, i8, i8, i8, i8, u1, i8)])
def normalize_chunk_write(data, offsets, map_off, map_cp, chunk_doc, lo, prev, chunk_out, out, out_offsets):
    """One thread per chunk: writes its bytes at out[chunk_out[c]:] (chunk_out from the sizes: the
    document's offset plus its earlier chunks' bytes). A space the chunk counted last is stored only if
    it is not the document's trailing space (it lies before the document's end)."""
    mode = block_ascii_mode(map_cp)
    c = cuda.grid(1)
    while c < chunk_doc.shape[0]:
        d = chunk_doc[c]
        pos = chunk_out[c]
        p, sp, extra, pv = normalize_scan(data, lo[c], chunk_end(chunk_doc, lo, offsets, c, d), map_off, map_cp,
                                          mode, out, pos, True, prev[c])
        if pv == 1 and p > 0 and pos + p - 1 < out_offsets[d + 1]:
            out[pos + p - 1] = SPACE
        c += cuda.gridsize(1)


@cuda.jit(device=True)
def chunk_span(chunk_doc, chunk_first, offsets, c):
    """(document, its first byte, its end, the chunk's first byte) of byte chunk c (split_chunks)."""
    d = chunk_doc[c]
    s = offsets[d]
    return d, s, offsets[d + 1], s + chunk_first[c]


@kernel(per_block=True, stride=True, sigs=[(u1, i8, i8, i8, i8, u1)])
def utf8_invalid_chunks(data, offsets, chunk_doc, chunk_first, chunk_count, out):
    """One block per chunk of bytes (grid-stride; any chunk size), its threads striding the bytes
    (coalesced): out[d] = 1 (uint8, pre-zeroed) where some byte of document d is invalid UTF-8
    (core.utf8_invalid_at: the same verdict as utf8_invalid)."""
    c = cuda.blockIdx.x
    while c < chunk_doc.shape[0]:
        d, s, e, a = chunk_span(chunk_doc, chunk_first, offsets, c)
        bad = 0
        k = cuda.threadIdx.x
        while k < chunk_count[c]:
            if data[a + k] >= 0x80:
                bad |= utf8_invalid_at(data, s, a + k, e)
            k += cuda.blockDim.x
        if cuda.syncthreads_or(bad) != 0 and cuda.threadIdx.x == 0:
            out[d] = 1
        c += cuda.gridDim.x


@cuda.jit(device=True)
def block_xxh64_pairs(norm, offsets, seed_lo, seed_hi, out):
    """The body of exact_hashes / xxh64_pairs: one block of 8 <= blockDim <= XXH_TPB threads (a multiple of 4)
    per document, grid-stride: out (n, 2) uint64 = XXH64 of document d with seed_lo, seed_hi. Each step the
    block loads blockDim 8-byte words (blockDim / 4 stripes) coalesced into shared memory; threads 0-3 run
    the four stripe accumulators of the first seed, 4-7 those of the second; the last < 32 bytes go through
    core.xxh64_tail (threads 0 and 4). Shared memory: XXH_TPB + 8 uint64."""
    tile = cuda.shared.array(XXH_TPB, uint64)
    acc = cuda.shared.array(8, uint64)
    tid = cuda.threadIdx.x
    width = cuda.blockDim.x
    q = tid & 3
    seed = seed_lo
    if tid >= 4:
        seed = seed_hi
    d = cuda.blockIdx.x
    while d < offsets.shape[0] - 1:
        s = offsets[d]
        e = offsets[d + 1]
        words = ((e - s) // 32) * 4
        v = xxh64_lane(seed, q)
        w0 = 0
        while w0 < words:
            if w0 + tid < words:
                tile[tid] = read_u64le(norm, s + 8 * (w0 + tid))
            cuda.syncthreads()
            if tid < 8:
                w = q
                while w < width and w0 + w < words:
                    v = xxh64_round(v, tile[w])
                    w += 4
            cuda.syncthreads()
            w0 += width
        if tid < 8:
            acc[tid] = v
        cuda.syncthreads()
        if tid == 0 or tid == 4:
            h = seed + P64_5
            if words > 0:
                h = xxh64_converge(acc[tid], acc[tid + 1], acc[tid + 2], acc[tid + 3])
            out[d, tid >> 2] = xxh64_tail(norm, s + 8 * words, e, h + np.uint64(e - s))
        cuda.syncthreads()
        d += cuda.gridDim.x


@kernel(per_block=True, stride=True, tpb=XXH_TPB, sigs=[(u1, i8, u8_2)])
def exact_hashes(norm, offsets, out):
    """out (n, 2) uint64 = XXH64 of each document with EXACT_SEED_LO, EXACT_SEED_HI (block_xxh64_pairs)."""
    block_xxh64_pairs(norm, offsets, EXACT_SEED_LO, EXACT_SEED_HI, out)


@kernel(per_block=True, stride=True, tpb=XXH_TPB, sigs=[(u1, i8, U8, U8, u8_2)])
def xxh64_pairs(norm, offsets, seed1, seed2, out):
    """out (n, 2) uint64 = XXH64 of each document with seed1, seed2 (block_xxh64_pairs): the GPU's
    paragraph / span hashes (gpu_dedup/paragraph/dedup.py span_hashes)."""
    block_xxh64_pairs(norm, offsets, seed1, seed2, out)


@kernel(per_block=True, stride=True, sigs=[(u1, i8, B, i8, i8, i8, i8, B, i8, i8)])
def unit_chunks(norm, offsets, kind_char, chunk_doc, chunk_first, chunk_count, chunk_base, write, counts, units):
    """One block (<= TPB threads) per chunk of <= BYTE_TILE bytes of normalized text, grid-stride. The
    chunk is staged in shared memory (coalesced), then each thread takes a contiguous run of it. A unit
    starts at each position utf8_decode visits (codepoints: kind_char) or after each space (words; a
    document's first word starts at its first byte, written by its first chunk). write=False: counts[c]
    = the chunk's unit starts (words: not counting the first word). write=True: writes them in order to
    units[chunk_base[c]:] (int64; chunk_base = ubase of the document, + 1 for words, + the earlier
    chunks' counts): the same array as one thread walking each document. Shared memory: BYTE_TILE bytes
    + TPB int64; three block barriers per chunk."""
    tile = cuda.shared.array(BYTE_TILE, uint8)
    before = cuda.shared.array(TPB, int64)
    tid = cuda.threadIdx.x
    width = cuda.blockDim.x
    c = cuda.blockIdx.x
    while c < chunk_doc.shape[0]:
        d, s, e, a = chunk_span(chunk_doc, chunk_first, offsets, c)
        count = chunk_count[c]
        k = tid
        while k < count:
            tile[k] = norm[a + k]
            k += width
        cuda.syncthreads()
        per = (count + width - 1) // width
        first = tid * per
        last = first + per
        if last > count:
            last = count
        mine = 0
        for k in range(first, last):
            if unit_start(tile[k], norm, s, a + k, e, kind_char) >= 0:
                mine += 1
        before[tid] = mine
        cuda.syncthreads()
        if tid == 0:  # exclusive prefix sum of the threads' counts (one thread: two barriers, not 2 log2)
            total = 0
            for t in range(width):
                m = before[t]
                before[t] = total
                total += m
            if not write:
                counts[c] = total
        cuda.syncthreads()
        if write:
            pos = chunk_base[c] + before[tid]
            if tid == 0 and chunk_first[c] == 0 and not kind_char:
                units[pos - 1] = s
            for k in range(first, last):
                u = unit_start(tile[k], norm, s, a + k, e, kind_char)
                if u >= 0:
                    units[pos] = u
                    pos += 1
        cuda.syncthreads()  # the tile and the prefix sums are rewritten for the next chunk
        c += cuda.gridDim.x


@kernel(per_block=True, tpb=TILE, sigs=[(u1, i8, i8, i8, i8, i8, i8, I8, B, U8, u8, u8, u8_2)])
def minhash_chunks(norm, offsets, units, ubase, chunk_doc, chunk_first, chunk_count, n, kind_char, seed, a, b, sig):
    """One block per chunk of <= CHUNK shingles of one document; thread t owns permutations
    t, t+TILE, ... Shingle hashes are computed cooperatively into shared memory, TILE at a time, then
    every thread folds the tile into its minima; the block's minima are merged into sig (n, K) uint64
    (pre-filled with 2^61-1) with atomic min, so a long document spread over blocks gets the same
    result as one block. Shared memory: TILE uint64; registers: MAX_K_PER_THREAD uint64."""
    c = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    d = chunk_doc[c]
    first = chunk_first[c]
    count = chunk_count[c]
    K = a.shape[0]
    tile = cuda.shared.array(TILE, uint64)
    mins = cuda.local.array(MAX_K_PER_THREAD, uint64)
    for q in range(MAX_K_PER_THREAD):
        mins[q] = MERSENNE61
    doc_end = offsets[d + 1]
    n_units = ubase[d + 1] - ubase[d]
    t0 = 0
    while t0 < count:
        j = t0 + tid
        if j < count:
            s, e = shingle_bounds(units, ubase[d], n_units, first + j, n, kind_char, doc_end)
            tile[tid] = reduce61(xxh64(norm, s, e, seed))
        cuda.syncthreads()
        m = min(TILE, count - t0)
        q = 0
        k = tid
        while k < K:
            ak = a[k]
            bk = b[k]
            cur = mins[q]
            for t in range(m):
                v = permute61(ak, bk, tile[t])
                if v < cur:
                    cur = v
            mins[q] = cur
            q += 1
            k += TILE
        cuda.syncthreads()
        t0 += TILE
    q = 0
    k = tid
    while k < K:
        cuda.atomic.min(sig, (d, k), mins[q])
        q += 1
        k += TILE


# The fss family on the GPU (ops/core.py _fss_device): the rounds of core.fss_sketch over every document at once,
# a launch per round. Blocks take the chunks of <= CHUNK shingles of minhash_chunks; a thread handles one shingle
# at a time. Buckets merge by atomic min, and a later round reads the "opened" snapshot taken before it, never sig
# itself, so the result does not depend on the order of the atomics: the CPU's values, bit for bit.


@kernel(per_block=True, tpb=TILE, sigs=[(u1, i8, i8, i8, i8, i8, i8, i8, I8, B, U8, U8, U8, u8, u8_2)])
def fss_first_round(norm, offsets, units, ubase, chunk_doc, chunk_first, chunk_count, base, n, kind_char, seed, a0,
                    b0, hx, sig):
    """Round 0 of fss, one block per chunk of <= CHUNK shingles of one document: shingle j of document d is hashed
    (XXH64(seed)) into hx[base[d] + j] (uint64 (S,): the later rounds read it back) and its value under (a0, b0)
    offered to its bucket of sig (docs, K) uint64, pre-filled FSS_EMPTY, by atomic min."""
    c = cuda.blockIdx.x
    d = chunk_doc[c]
    first = chunk_first[c]
    K = uint64(sig.shape[1])
    doc_end = offsets[d + 1]
    n_units = ubase[d + 1] - ubase[d]
    j = cuda.threadIdx.x
    while j < chunk_count[c]:
        s, e = shingle_bounds(units, ubase[d], n_units, first + j, n, kind_char, doc_end)
        x = xxh64(norm, s, e, seed)
        hx[base[d] + first + j] = x
        v = fss_value(a0, b0, x)
        cuda.atomic.min(sig, (d, int64(fss_bucket(v, K))), v)
        j += cuda.blockDim.x


@kernel(per_block=True, tpb=TILE, sigs=[(u8, i8, i8, i8, i8, U8, U8, u1_2, u8_2)])
def fss_next_round(hx, base, chunk_doc, chunk_first, chunk_count, a, b, opened, sig):
    """A later round of fss over the chunks of fss_first_round: the value under (a, b) of each shingle hash (hx)
    is offered to its bucket only where opened[d, bucket] != 0 (uint8 (docs, K): empty when the round began)."""
    c = cuda.blockIdx.x
    d = chunk_doc[c]
    at = base[d] + chunk_first[c]
    K = uint64(sig.shape[1])
    j = cuda.threadIdx.x
    while j < chunk_count[c]:
        v = fss_value(a, b, hx[at + j])
        bkt = int64(fss_bucket(v, K))
        if opened[d, bkt] != 0:
            cuda.atomic.min(sig, (d, bkt), v)
        j += cuda.blockDim.x


@kernel(per_block=True, stride=True, tpb=TILE, sigs=[(u8, i8, i8, u8, u8, I8, u1_2, u8_2)])
def fss_fill(hx, base, docs, a, b, rounds, opened, sig):
    """The last step of fss, one block per document of ``docs`` (int64: those with an empty bucket), grid-stride:
    each bucket j with opened[d, j] != 0 takes the least value under (a[rounds + j], b[rounds + j]) over the
    document's shingle hashes hx[base[d]:base[d + 1]]; the threads split the shingles and merge by atomic min."""
    p = cuda.blockIdx.x
    K = sig.shape[1]
    while p < docs.shape[0]:
        d = docs[p]
        for j in range(K):
            if opened[d, j] != 0:
                aj = a[rounds + j]
                bj = b[rounds + j]
                m = FSS_EMPTY
                t = base[d] + cuda.threadIdx.x
                while t < base[d + 1]:
                    m = min(m, fss_value(aj, bj, hx[t]))
                    t += cuda.blockDim.x
                if m != FSS_EMPTY:
                    cuda.atomic.min(sig, (d, j), m)
        p += cuda.gridDim.x


@kernel(per_block=True, stride=True, sigs=[(u1, i8, i8, i8, i8, i8, I8, B, U8, u8)])
def shingle_hashes(norm, offsets, units, ubase, docs, out_offsets, n, kind_char, seed, out):
    """One thread per (selected document, shingle): raw XXH64 of shingle j of docs[p] goes to
    out[out_offsets[p] + j]. Grid-stride over documents in x, shingles in y."""
    p = cuda.blockIdx.x
    while p < docs.shape[0]:
        d = docs[p]
        base = out_offsets[p]
        cnt = out_offsets[p + 1] - base
        n_units = ubase[d + 1] - ubase[d]
        j = cuda.threadIdx.x
        while j < cnt:
            s, e = shingle_bounds(units, ubase[d], n_units, j, n, kind_char, offsets[d + 1])
            out[base + j] = xxh64(norm, s, e, seed)
            j += cuda.blockDim.x
        p += cuda.gridDim.x


@kernel(sigs=[(u1_2, I8, I8, u8_2)])
def band_keys(sig_bytes, bands, band_bytes, out):
    """One thread per (document, band)."""
    t = cuda.grid(1)
    if t < sig_bytes.shape[0] * bands:
        i = t // bands
        bnd = t - i * bands
        out[i, bnd] = band_key(sig_bytes[i], bnd, band_bytes)


@kernel(sigs=[(u8, i8, i8, i8, i8, f8)])
def jaccard_pairs(hashes, set_offsets, set_sizes, left, right, out):
    p = cuda.grid(1)
    if p < left.shape[0]:
        x = left[p]
        y = right[p]
        out[p] = jaccard_sorted(hashes, set_offsets[x], set_sizes[x], set_offsets[y], set_sizes[y])


@kernel(sigs=[(i8, i8, i8, i4)])
def propagate_min_labels(u, v, label, changed):
    """One thread per edge: label[x] = min over neighbours (one relaxation sweep with atomic min).
    Repeated until no label changes, labels converge to the component minimum."""
    e = cuda.grid(1)
    if e < u.shape[0]:
        lu = label[u[e]]
        lv = label[v[e]]
        if lu < lv:
            old = cuda.atomic.min(label, v[e], lu)
            if lu < old:
                changed[0] = 1
        elif lv < lu:
            old = cuda.atomic.min(label, u[e], lv)
            if lv < old:
                changed[0] = 1


@kernel(sigs=[(i8,)])
def pointer_jump(label):
    """label[x] = label[label[x]]: shortens chains between sweeps."""
    x = cuda.grid(1)
    if x < label.shape[0]:
        label[x] = label[label[x]]


@kernel(tpb=64, sigs=[(i8, i8, i8, i4, i4, i8, i8, u8, u1, F8, I8, i8, i8, i8, i8, u1, i8, f8, i8)])
def representative_components(order, comp_off, entry_off, entry_bucket, entry_doc, set_offsets, set_sizes, hashes,
                              pinned, threshold, cap, head, tail, nxt, stamp, capped, rep, jac, comparisons):
    """One thread per candidate component, running ``core.representative_run`` (the same source as
    the CPU kernel) over its documents in keep order. head/tail (buckets,), nxt (E,), stamp (m,) are
    int64 scratch pre-filled with -1."""
    c = cuda.grid(1)
    if c < comp_off.shape[0] - 1:
        comparisons[c] = representative_run(order, comp_off[c], comp_off[c + 1], entry_off, entry_bucket, entry_doc,
                                            set_offsets, set_sizes, hashes, pinned, threshold, cap, head, tail, nxt,
                                            stamp, capped, rep, jac)
