"""GPU kernels: the shared device functions of ``hashing.py`` compiled with ``numba.cuda.jit``.

Same results as ``kernels/cpu.py`` bit for bit (tested under NUMBA_ENABLE_CUDASIM=1 in CI and on a real
GPU by benchmarks/gpu_check.py). Kernels (``@kernel``, see _launch.py) are cached and take device arrays
only: CuPy arrays or Numba device arrays; under the simulator NumPy arrays, or the strict backend's arrays.
``blocks`` at the bottom picks grid sizes.

Notation: n documents, K permutations, B bands, T text bytes, S shingles in a batch.
"""
import math

import numpy as np
from numba import cuda, uint64

from ._build import build
from ._launch import kernel
from .hashing import ASCII_GENERIC

_D = build(cuda.jit(device=True))
normalize_doc = _D["normalize_doc"]
normalize_span = _D["normalize_span"]
ascii_mode_guess = _D["ascii_mode_guess"]
ascii_word_fits = _D["ascii_word_fits"]
xxh64 = _D["xxh64"]
reduce61 = _D["reduce61"]
permute61 = _D["permute61"]
utf8_decode = _D["utf8_decode"]
utf8_invalid = _D["utf8_invalid"]
shingle_bounds = _D["shingle_bounds"]
band_key = _D["band_key"]
intersection_sorted = _D["intersection_sorted"]
representative_run = _D["representative_run"]

MERSENNE61 = np.uint64((1 << 61) - 1)
EXACT_SEED_LO = np.uint64(0x9E3779B97F4A7C15)
EXACT_SEED_HI = np.uint64(0xC2B2AE3D27D4EB4F)
SPACE = 0x20

TPB = 128          # threads per block for per-document kernels
TILE = 128         # shingle hashes staged in shared memory per step (= threads per MinHash block)
MAX_K_PER_THREAD = 32  # K <= TILE * MAX_K_PER_THREAD = 4096 (MinHashConfig's bound)
CHUNK = 2048       # shingles per MinHash block: long documents span several blocks (atomic min)


@cuda.jit(device=True)
def block_ascii_mode(map_cp):
    """hashing.ascii_mode for the whole block, its 16 checks shared among the threads (every thread of the
    block must call it: it synchronizes them). Without MODE_BLOCKS: on a GPU thread the block loops of
    hashing.ascii_run would be plain byte loops; the 8-byte word loop is the fast path here."""
    mode = ascii_mode_guess(map_cp)
    fits = 1
    c = 8 * cuda.threadIdx.x
    while c < 128:
        fits &= ascii_word_fits(map_cp, c, mode)
        c += 8 * cuda.blockDim.x
    if cuda.syncthreads_and(fits) == 0:
        return ASCII_GENERIC
    return mode


@kernel
def normalize_sizes(data, offsets, map_off, map_cp, sizes):
    """One thread per document: sizes (n, 3) int64 = (bytes, words, codepoints)."""
    mode = block_ascii_mode(map_cp)
    i = cuda.grid(1)
    if i < offsets.shape[0] - 1:
        nb, nw, nc = normalize_span(data, offsets[i], offsets[i + 1], map_off, map_cp, mode, data, 0, False)
        sizes[i, 0] = nb
        sizes[i, 1] = nw
        sizes[i, 2] = nc


@kernel
def normalize_write(data, offsets, map_off, map_cp, out, out_offsets):
    mode = block_ascii_mode(map_cp)
    i = cuda.grid(1)
    if i < offsets.shape[0] - 1:
        normalize_span(data, offsets[i], offsets[i + 1], map_off, map_cp, mode, out, out_offsets[i], True)


@kernel
def utf8_invalid_rows(data, offsets, out):
    """One thread per document: out uint8 (n,) = 1 where the document is not valid UTF-8."""
    i = cuda.grid(1)
    if i < offsets.shape[0] - 1:
        out[i] = utf8_invalid(data, offsets[i], offsets[i + 1])


@kernel
def exact_hashes(norm, offsets, out):
    i = cuda.grid(1)
    if i < offsets.shape[0] - 1:
        out[i, 0] = xxh64(norm, offsets[i], offsets[i + 1], EXACT_SEED_LO)
        out[i, 1] = xxh64(norm, offsets[i], offsets[i + 1], EXACT_SEED_HI)


@kernel
def unit_starts(norm, offsets, kind_char, ubase, units):
    """One thread per document: byte offsets of each word (kind_char=False) or codepoint start,
    written to units[ubase[i]:ubase[i+1]]."""
    i = cuda.grid(1)
    if i < offsets.shape[0] - 1:
        s = offsets[i]
        e = offsets[i + 1]
        k = ubase[i]
        if kind_char:
            j = s
            while j < e:
                units[k] = j
                k += 1
                cp, step = utf8_decode(norm, j, e)
                j += step
        elif e > s:
            units[k] = s
            k += 1
            for j in range(s, e):
                if norm[j] == SPACE:
                    units[k] = j + 1
                    k += 1


@kernel
def minhash_chunks(norm, offsets, units, ubase, chunk_doc, chunk_first, chunk_count, n, gap, seed, a, b, sig):
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
            s, e = shingle_bounds(units, ubase[d], n_units, first + j, n, gap, doc_end)
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


@kernel
def shingle_hashes(norm, offsets, units, ubase, docs, out_offsets, n, gap, seed, out):
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
            s, e = shingle_bounds(units, ubase[d], n_units, j, n, gap, offsets[d + 1])
            out[base + j] = xxh64(norm, s, e, seed)
            j += cuda.blockDim.x
        p += cuda.gridDim.x


@kernel
def band_keys(sig_bytes, bands, band_bytes, out):
    """One thread per (document, band)."""
    t = cuda.grid(1)
    if t < sig_bytes.shape[0] * bands:
        i = t // bands
        bnd = t - i * bands
        out[i, bnd] = band_key(sig_bytes[i], bnd, band_bytes)


@kernel
def jaccard_pairs(hashes, set_offsets, set_sizes, left, right, out):
    p = cuda.grid(1)
    if p < left.shape[0]:
        x = left[p]
        y = right[p]
        x0 = set_offsets[x]
        y0 = set_offsets[y]
        nx = set_sizes[x]
        ny = set_sizes[y]
        inter = intersection_sorted(hashes, x0, x0 + nx, hashes, y0, y0 + ny)
        union = nx + ny - inter
        out[p] = inter / union if union > 0 else 1.0


@kernel
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


@kernel
def pointer_jump(label):
    """label[x] = label[label[x]]: shortens chains between sweeps."""
    x = cuda.grid(1)
    if x < label.shape[0]:
        label[x] = label[label[x]]


@kernel
def representative_components(order, comp_off, entry_off, entry_bucket, entry_doc, set_offsets, set_sizes, hashes,
                              pinned, threshold, cap, head, tail, nxt, stamp, capped, rep, jac, comparisons):
    """One thread per candidate component, running ``hashing.representative_run`` (the same source as
    the CPU kernel) over its documents in keep order. head/tail (buckets,), nxt (E,), stamp (m,) are
    int64 scratch pre-filled with -1."""
    c = cuda.grid(1)
    if c < comp_off.shape[0] - 1:
        comparisons[c] = representative_run(order, comp_off[c], comp_off[c + 1], entry_off, entry_bucket, entry_doc,
                                            set_offsets, set_sizes, hashes, pinned, threshold, cap, head, tail, nxt,
                                            stamp, capped, rep, jac)


def blocks(n: int, tpb: int = TPB) -> int:
    return max(1, math.ceil(n / tpb))
