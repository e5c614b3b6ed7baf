"""GPU kernels of the "features" family (``features.py``'s device functions compiled with ``numba.cuda.jit``).
Same results as ``features_cpu.py`` bit for bit; launched by ``gpu_dedup.device.launch``.

DSIR features are cooperative, not one thread per document (a multi-MB document would hold its warp):
the word starts come from ``kernels/cuda.py:unit_chunks`` (a block per BYTE_TILE bytes of text; gpu_dedup's
``text.normalize.unit_starts``), then ``feature_id_chunks`` gives each block a chunk of <= FEATURE_CHUNK
words of one document (``device.split_chunks``) and each thread the <= n features that END at one word:
the work of a thread is at most n words' bytes. The log weight is a float64 sum in feature order (the CPU's
``scan_features`` adds logdiff[f] one feature after the other); float addition is not associative, so
``feature_sums`` keeps exactly that order: a block per document gathers FEATURE_TILE values at a time into
shared memory (coalesced id loads, the table gathers in parallel) and one thread adds them in order. The
serial part is one f64 add per feature, the irreducible cost of a bit-identical ordered sum; the hashing
and the byte reads are spread over the block and the chunks.

The Gopher statistics (``features_cpu.rule_stats``) have no GPU kernel: they sort each document's lines and
n-grams, which is host work (gpu_dedup/filters/rules.py runs them on the CPU for either device).

Notation: n documents, T text bytes, W words, F features of the batch, B buckets.
"""
from numba import cuda, float64

from . import features
from ._build import build
from ._launch import I8, U8, f8, i4, i8, kernel, u1

FEATURE_CHUNK = 1024  # words per block of feature_id_chunks (the orchestration's default cut; no shared tile)
FEATURE_TILE = 128    # logdiff values staged per step in feature_sums (shared float64; = its threads per block)

_G = build(cuda.jit(device=True), features)
g_xxh64 = _G["xxh64"]


@cuda.jit(device=True)
def features_before(j, n):
    """Features of a document's words 0..j-1 (word i ends min(n, i + 1) of them): features.py's order puts
    word j's first feature there."""
    if j <= n:
        return j * (j + 1) // 2
    return n * (n + 1) // 2 + (j - n) * n


@kernel(per_block=True, stride=True, sigs=[(u1, i8, i8, i8, i8, i8, i8, I8, U8, U8, i8, i4)])
def feature_id_chunks(norm, offsets, units, ubase, chunk_doc, chunk_first, chunk_count, n, seed, buckets, base,
                      ids):
    """One block per chunk of <= FEATURE_CHUNK words of one document (split_chunks over the word counts),
    grid-stride; thread per word j: the m-grams ending at word j (m = 1..min(n, j + 1), in that order) ->
    ids[base[d] + features_before(j, n) + m - 1] = XXH64(words j-m+1..j, seed) mod buckets. norm uint8 (T,),
    offsets int64 (docs+1,), units int64 (W,) / ubase int64 (docs+1,): word starts (unit_starts); n int64
    (1..DSIR_MAX_NGRAM), seed / buckets uint64, base int64 (docs+1,), ids int32 (F,): features_cpu.feature_ids'
    array. No shared memory."""
    c = cuda.blockIdx.x
    while c < chunk_doc.shape[0]:
        d = chunk_doc[c]
        ub = ubase[d]
        nw = ubase[d + 1] - ub
        j = chunk_first[c] + cuda.threadIdx.x
        last = chunk_first[c] + chunk_count[c]
        while j < last:
            e = offsets[d + 1]
            if j + 1 < nw:
                e = units[ub + j + 1] - 1  # before the space that separates word j from word j + 1
            top = n
            if j + 1 < n:
                top = j + 1
            pos = base[d] + features_before(j, n)
            for m in range(1, top + 1):
                ids[pos + m - 1] = g_xxh64(norm, units[ub + j - m + 1], e, seed) % buckets
            j += cuda.blockDim.x
        c += cuda.gridDim.x


@kernel(per_block=True, stride=True, tpb=FEATURE_TILE, sigs=[(i4, i8, f8, f8)])
def feature_sums(ids, base, logdiff, out):
    """One block per document, grid-stride (threads past FEATURE_TILE idle): out[d] (float64 (docs,)) = 0.0 +
    logdiff[ids[base[d]]] + logdiff[ids[base[d] + 1]] + ..., added in that order by thread 0 (the CPU's
    order, so the same float64 bits); the block stages the values FEATURE_TILE at a time. ids int32 (F,),
    base int64 (docs+1,), logdiff float64 (B,). Shared memory: FEATURE_TILE float64; two barriers per tile."""
    tile = cuda.shared.array(FEATURE_TILE, float64)
    tid = cuda.threadIdx.x
    width = cuda.blockDim.x
    if width > FEATURE_TILE:  # (no min(): numba-cuda 0.30 cannot type min(int32, int64))
        width = FEATURE_TILE
    d = cuda.blockIdx.x
    while d < base.shape[0] - 1:
        total = 0.0
        k0 = base[d]
        end = base[d + 1]
        while k0 < end:
            if tid < width and k0 + tid < end:
                tile[tid] = logdiff[ids[k0 + tid]]
            cuda.syncthreads()
            if tid == 0:
                m = end - k0
                if m > width:
                    m = width
                for t in range(m):
                    total += tile[t]
            cuda.syncthreads()
            k0 += width
        if tid == 0:
            out[d] = total
        d += cuda.gridDim.x
