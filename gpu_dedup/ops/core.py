"""Front end of the core kernel family (``kernels/core_cpu.py`` / ``kernels/core_cuda.py``): normalization,
UTF-8 validity, exact hashes, unit starts, MinHash, band keys, shingle sets, Jaccard, connected components and the
representative policy. One signature per function on both targets (``device`` first; arrays of the device's
array module in and out); the GPU's chunking, scratch arrays and chunk constants live here, not in the stages.

Notation: n documents, T text bytes, K permutations, B bands, m selected documents, E bucket entries.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import numpy as np

from ..constants import BYTE_TILE, FSS_ROUNDS, HOST_COMPONENT, MERSENNE61
from ..errors import ConfigError, RunError
from ..runtime.device import array_module, repeat_index, run_kernel, split_chunks, to_device, to_host

if TYPE_CHECKING:
    from .types import Buckets, Normalized, ShingleSets

logger = logging.getLogger(__name__)

UNIT_CHUNK = BYTE_TILE  # text bytes per block of unit_chunks: at most its shared tile (tests shrink it)
UTF8_CHUNK = BYTE_TILE  # text bytes per block of utf8_invalid_chunks (coalesced; tests shrink it)


def _target(device: str):
    """The kernel module of ``device``: core_cuda on a GPU, else core_cpu (imported on first use)."""
    if device == "cuda":
        from ..kernels import core_cuda
        return core_cuda
    from ..kernels import core_cpu
    return core_cpu


def normalize(device: str, data, offsets, map_off, map_cp, chunk: int | None = None) -> tuple[Any, Any, Any, Any]:
    """Normalize documents data[offsets[i]:offsets[i+1]] (uint8 (T,), int64 (n+1,)) with the tables
    (map_off, map_cp) of ``unicode_tables``: returns (bytes uint8 (T',), offsets int64 (n+1,), words int64 (n,),
    codepoints int64 (n,)). CPU: a sizes pass and a write pass per document. GPU: chunks of about ``chunk``
    bytes (``_normalize_chunks``; default NORM_CHUNK; the output does not depend on it)."""
    if device == "cuda":
        return _normalize_chunks(data, offsets, map_off, map_cp, array_module(device), chunk)
    k = _target(device)
    n = offsets.shape[0] - 1
    sizes = np.empty((n, 3), np.int64)
    out_off = np.zeros(n + 1, np.int64)
    run_kernel(device, k.normalize_sizes, n, data, offsets, map_off, map_cp, sizes)
    np.cumsum(sizes[:, 0], out=out_off[1:])
    out = np.empty(int(out_off[-1]), np.uint8)
    run_kernel(device, k.normalize_write, n, data, offsets, map_off, map_cp, out, out_off)
    return out, out_off, sizes[:, 1].copy(), sizes[:, 2].copy()


def _normalize_chunks(data, offsets, map_off, map_cp, xp, chunk: int | None = None):
    """The GPU's normalization: documents cut into chunks of about ``chunk`` bytes (default
    kernels/core_cuda.py:NORM_CHUNK), one thread each. A plan kernel moves each cut to a codepoint after a
    non-empty image and records the scan state there; the sizes kernel scans each chunk from its state;
    a document's sizes are the sums of its chunks' (its trailing space taken back when its last chunk
    ends on one); the write kernel writes each chunk at its document's offset plus its earlier chunks'
    bytes. Output identical to the CPU's one-document scans (tests: tiny chunks, every cut)."""
    from ..kernels import core_cuda as kc

    n = offsets.shape[0] - 1
    doc, first, _, bounds = split_chunks(xp, offsets[1:] - offsets[:-1], chunk or kc.NORM_CHUNK)
    chunks = int(doc.shape[0])
    totals = xp.zeros((chunks + 1, 4), xp.int64)  # running (bytes, spaces, extra, non-empty chunks)
    lo = xp.empty(chunks, xp.int64)
    prev = xp.empty(chunks, xp.int64)
    counts = xp.empty((chunks, 4), xp.int64)
    if chunks:
        run_kernel("cuda", kc.normalize_plan, chunks, data, offsets, map_off, map_cp, doc, first, lo, prev)
        run_kernel("cuda", kc.normalize_chunk_sizes, chunks, data, offsets, map_off, map_cp, doc, lo, prev, counts)
        xp.cumsum(counts[:, :3], axis=0, out=totals[1:, :3])
        # a chunk that found no cut is empty (lo = the document's end); those are the last ones of their
        # document, and the document's end state is its last non-empty chunk's (chunk 0 never is empty)
        xp.cumsum((lo < offsets[doc + 1]).astype(xp.int64), out=totals[1:, 3])
    doc_sums = totals[bounds[1:]] - totals[bounds[:-1]]  # (n, 4)
    has = doc_sums[:, 3] > 0
    last_state = xp.ones(n, xp.int64)  # a document without chunks (empty) ends in state 1, like one scan
    if chunks:
        last_state[has] = counts[(bounds[:-1] + doc_sums[:, 3])[has] - 1, 3]
    nbytes = doc_sums[:, 0]
    trim = ((last_state == 1) & (nbytes > 0)).astype(xp.int64)
    nbytes = nbytes - trim
    words = xp.where(nbytes > 0, doc_sums[:, 1] - trim + 1, 0)
    out_off = xp.zeros(n + 1, xp.int64)
    xp.cumsum(nbytes, out=out_off[1:])
    out = xp.empty(int(out_off[-1]), xp.uint8)
    if chunks:
        chunk_out = out_off[doc] + totals[:-1, 0] - totals[bounds[doc], 0]
        run_kernel("cuda", kc.normalize_chunk_write, chunks, data, offsets, map_off, map_cp, doc, lo, prev, chunk_out,
                   out, out_off)
    return out, out_off, words, nbytes - doc_sums[:, 2]


def utf8_invalid(device: str, data, offsets):
    """bool (n,): True where data[offsets[i]:offsets[i+1]] is not valid UTF-8. CPU: one document per
    iteration. GPU: a block per UTF8_CHUNK bytes (a long document spreads over many blocks)."""
    xp = array_module(device)
    k = _target(device)
    n = offsets.shape[0] - 1
    out = xp.zeros(n, xp.uint8)
    if n and device == "cuda":
        doc, first, count, _ = split_chunks(xp, offsets[1:] - offsets[:-1], UTF8_CHUNK)
        if doc.shape[0]:
            run_kernel(device, k.utf8_invalid_chunks, int(doc.shape[0]), data, offsets, doc, first, count, out)
    elif n:
        run_kernel(device, k.utf8_invalid_rows, n, data, offsets, out)
    return out.astype(bool)


def exact_hashes(device: str, data, offsets):
    """uint64 (n, 2): two XXH64 (the contract's exact seeds) of each text data[offsets[i]:offsets[i+1]]. CPU: a
    document per iteration; GPU: XXH_TPB threads per document."""
    xp = array_module(device)
    n = offsets.shape[0] - 1
    out = xp.empty((n, 2), xp.uint64)
    if n:
        run_kernel(device, _target(device).exact_hashes, n, data, offsets, out)
    return out


def xxh64_pairs(device: str, data, offsets, seed1: int, seed2: int):
    """uint64 (n, 2): XXH64 of each text data[offsets[i]:offsets[i+1]] with seeds seed1 and seed2, a block of
    XXH_TPB threads per text (so a multi-MB text does not hold one thread). GPU only: on the CPU a thread per
    text hashes as it normalizes (bloom_cpu.span_norm_hash)."""
    if device != "cuda":
        raise ConfigError(f"xxh64_pairs runs on the GPU (device='cuda'), not device={device!r}")
    from ..kernels import core_cuda as kc

    xp = array_module(device)
    n = int(offsets.shape[0] - 1)
    out = xp.zeros((n, 2), xp.uint64)
    if n:
        run_kernel(device, kc.xxh64_pairs, n, data if data.shape[0] else xp.zeros(1, xp.uint8), offsets,
                   np.uint64(seed1), np.uint64(seed2), out)
    return out


def unit_starts(device: str, norm: "Normalized", kind_char: bool):
    """(ubase (n+1,), units) int64: the byte offsets of document i's units (word or codepoint starts) of
    normalized text are units[ubase[i]:ubase[i+1]]. GPU only (the CPU kernels find the units as they scan):
    cooperative (kernels/core_cuda.py:unit_chunks), a count pass and a write pass over chunks of UNIT_CHUNK
    bytes, the chunks' counts scanned in between. Used by every GPU kernel over shingles or word n-grams."""
    if device != "cuda":
        raise ConfigError(f"unit_starts runs on the GPU (device='cuda'), not device={device!r}: the CPU kernels "
                          "scan the units themselves")
    if not 0 < UNIT_CHUNK <= BYTE_TILE:  # the kernel stages a chunk in a BYTE_TILE-byte shared tile
        raise ConfigError(f"UNIT_CHUNK={UNIT_CHUNK}: unit_chunks takes chunks of 1..{BYTE_TILE} bytes (BYTE_TILE)")
    from ..kernels import core_cuda as kc

    xp = array_module(device)
    n = len(norm)
    ubase = xp.zeros(n + 1, xp.int64)
    xp.cumsum(norm.codepoints if kind_char else norm.words, out=ubase[1:])
    units = xp.empty(int(ubase[-1]), xp.int64)
    doc, first, count, bounds = split_chunks(xp, norm.offsets[1:] - norm.offsets[:-1], UNIT_CHUNK)
    chunks = int(doc.shape[0])
    if chunks:
        counts = xp.empty(chunks, xp.int64)
        run_kernel(device, kc.unit_chunks, chunks, norm.data, norm.offsets, kind_char, doc, first, count, counts,
                   False, counts, units)
        before = xp.cumsum(counts) - counts  # units in earlier chunks, all documents
        base = ubase[doc] + before - before[bounds[doc]] + (0 if kind_char else 1)
        found = int(counts.sum()) + (0 if kind_char else int(xp.count_nonzero(norm.offsets[1:] > norm.offsets[:-1])))
        if found != units.shape[0]:  # an invariant of normalized text; never write past the array
            raise RunError(f"{found} unit starts in the text but {units.shape[0]} in the normalized sizes: "
                           "the text does not come from normalize_arrays")
        run_kernel(device, kc.unit_chunks, chunks, norm.data, norm.offsets, kind_char, doc, first, count, base, True,
                   counts, units)
    return ubase, units


def minhash(device: str, norm: "Normalized", kind_char: bool, n: int, seed: int, a, b, width: int,
            family: str = "exact", rounds: int = FSS_ROUNDS) -> tuple[Any, Any]:
    """Signatures of normalized documents over shingles of ``n`` units (MinHashConfig's families): returns
    (values uint64 (docs, K) reduced to ``width`` bits, shingle counts int64 (docs,)); a, b: uint64 host arrays
    (``lexical.minhash.permutation_params``).
    family "exact": min over shingles of (a*h+b) mod p, the low ``width`` bits; documents without shingles get
    2^61-1 (masked). CPU: each document's shingle hashes, then their K minima. GPU: unit starts, then one
    block per chunk of <= CHUNK shingles (kernels/core_cuda.py) with atomic-min merging.
    family "fss": ``kernels/core.py`` fss_sketch with ``rounds`` rounds (a, b: (rounds + K,)), width 32 the high
    halves; documents without shingles get all ones. CPU: each document's shingle hashes, then its sketch. GPU:
    ``_fss_device`` (a launch per round over every document's shingles)."""
    if family == "fss":
        return _fss(device, norm, kind_char, n, seed, a, b, width, rounds)
    xp = array_module(device)
    docs = len(norm)
    mask = np.uint64(0xFFFFFFFF if width == 32 else 0xFFFFFFFFFFFFFFFF)
    if device == "cuda":
        from ..kernels import core_cuda as kc

        nsh = norm.shingle_counts(n, kind_char)
        out = xp.full((docs, a.shape[0]), MERSENNE61, xp.uint64)
        if docs:
            ubase, units = unit_starts(device, norm, kind_char)
            doc, first, count, _ = split_chunks(xp, nsh, kc.CHUNK)
            if doc.shape[0]:
                run_kernel(device, kc.minhash_chunks, int(doc.shape[0]), norm.data, norm.offsets, units, ubase, doc,
                           first, count, n, kind_char, np.uint64(seed), to_device(a, device), to_device(b, device), out)
        out &= mask
        return out, nsh
    from ..kernels import core_cpu

    out = np.empty((docs, a.shape[0]), np.uint64)
    nsh = np.empty(docs, np.int64)
    run_kernel(device, core_cpu.minhash_signatures, docs, norm.data, norm.offsets, norm.shingle_counts(n, kind_char),
               kind_char, n, np.uint64(seed), a, b, mask, out, nsh)
    return out, nsh


def _fss(device: str, norm: "Normalized", kind_char: bool, n: int, seed: int, a, b, width: int, rounds: int):
    """``minhash``'s fss family."""
    xp = array_module(device)
    docs = len(norm)
    K = int(a.shape[0]) - rounds
    shift = np.uint64(64 - width)
    counts = norm.shingle_counts(n, kind_char)
    if device == "cuda":
        return _fss_device(norm, kind_char, n, seed, a, b, rounds, K, counts, xp) >> shift, counts
    from ..kernels import core_cpu

    out = np.empty((docs, K), np.uint64)
    nsh = np.empty(docs, np.int64)
    run_kernel(device, core_cpu.sketch_signatures, docs, norm.data, norm.offsets, counts, kind_char, n,
               np.uint64(seed), a, b, rounds, shift, out, nsh)
    return out, nsh


def _fss_device(norm: "Normalized", kind_char: bool, n: int, seed: int, a, b, rounds: int, K: int, counts, xp):
    """The GPU's fss signatures (uint64 (docs, K), all 64 bits): the rounds of ``kernels/core.py`` fss_sketch over
    every document at once. Round 0 (``fss_first_round``: one block per chunk of <= CHUNK shingles, a thread per
    shingle) hashes the shingles into ``hx`` (8 bytes per shingle of the batch) and offers their values by atomic
    min; each later round (``fss_next_round``) reads ``hx`` back and offers only to the buckets empty when it
    began (``opened``, a snapshot, so that the order of the atomics does not matter); ``fss_fill`` gives each
    bucket still empty its own MinHash, a block per document that has one."""
    from ..kernels import core_cuda as kc
    from ..kernels.core import FSS_EMPTY

    docs = len(norm)
    sig = xp.full((docs, K), FSS_EMPTY, xp.uint64)
    base = xp.zeros(docs + 1, xp.int64)
    xp.cumsum(counts, out=base[1:])
    total = int(base[-1])
    if not total:
        return sig
    a_d, b_d = to_device(a, "cuda"), to_device(b, "cuda")
    hx = xp.empty(total, xp.uint64)
    ubase, units = unit_starts("cuda", norm, kind_char)
    doc, first, count, _ = split_chunks(xp, counts, kc.CHUNK)
    chunks = int(doc.shape[0])
    run_kernel("cuda", kc.fss_first_round, chunks, norm.data, norm.offsets, units, ubase, doc, first, count, base, n,
               kind_char, np.uint64(seed), np.uint64(a[0]), np.uint64(b[0]), hx, sig)
    has = (counts > 0)[:, None]
    for r in range(1, rounds + 1):
        opened = ((sig == FSS_EMPTY) & has).astype(xp.uint8)
        if not bool(opened.any()):
            break
        if r < rounds:
            run_kernel("cuda", kc.fss_next_round, chunks, hx, base, doc, first, count, np.uint64(a[r]),
                       np.uint64(b[r]), opened, sig)
        else:
            fill = xp.flatnonzero(opened.any(axis=1)).astype(xp.int64)
            run_kernel("cuda", kc.fss_fill, int(fill.shape[0]), hx, base, fill, a_d, b_d, rounds, opened, sig)
    return sig


def minhash_of_hashes_host(hashes, offsets, a, b, width: int, family: str = "exact", rounds: int = FSS_ROUNDS):
    """Signatures of pre-hashed sets, on the host: set i = hashes[offsets[i]:offsets[i+1]] (uint64, any order,
    duplicates allowed) -> uint64 (n, K) as ``minhash`` gives them (empty sets: as a document without shingles).
    For statistics tests and callers with their own shingling (there is no GPU twin)."""
    from ..kernels import core_cpu

    n = offsets.shape[0] - 1
    hashes = np.ascontiguousarray(hashes, np.uint64)
    offsets = np.ascontiguousarray(offsets, np.int64)
    if family == "fss":
        out = np.empty((n, a.shape[0] - rounds), np.uint64)
        run_kernel("cpu", core_cpu.sketch_from_hashes, n, hashes, offsets, a, b, rounds, np.uint64(64 - width), out)
        return out
    out = np.empty((n, a.shape[0]), np.uint64)
    run_kernel("cpu", core_cpu.minhash_from_hashes, n, hashes, offsets, a, b,
               np.uint64(0xFFFFFFFF if width == 32 else 0xFFFFFFFFFFFFFFFF), out)
    return out


def band_keys(device: str, sig_bytes, bands: int, band_bytes: int):
    """uint64 (n, bands): band key of each band of each row of sig_bytes (uint8 (n, K*width/8), little-endian
    signature rows; band_bytes bytes per band). One thread / iteration per (row, band)."""
    xp = array_module(device)
    n = sig_bytes.shape[0]
    out = xp.empty((n, bands), xp.uint64)
    if n:
        run_kernel(device, _target(device).band_keys, n * bands, sig_bytes, bands, band_bytes, out)
    return out


def shingle_sets(device: str, norm: "Normalized", docs, kind_char: bool, n: int, seed: int) -> tuple[Any, Any, Any]:
    """Sorted distinct 64-bit shingle hashes of documents ``docs`` (int64 (m,) indexes into ``norm``), as CSR:
    (hashes uint64, offsets int64 (m,), sizes int64 (m,)), set j = hashes[offsets[j]:offsets[j] + sizes[j]].
    Memory: 8 bytes per shingle of the selected documents (twice, transiently). CPU: one document per thread,
    hashed then sorted in place. GPU: a block per document hashes its shingles (one thread each), then a global
    stable sort by (document, hash) and run boundaries."""
    from ..runtime.device import argsort_stable

    xp = array_module(device)
    m = docs.shape[0]
    counts = norm.shingle_counts(n, kind_char)[docs]
    reserve = xp.zeros(m + 1, xp.int64)
    xp.cumsum(counts, out=reserve[1:])
    raw = xp.empty(int(reserve[-1]), xp.uint64)
    if device == "cuda":
        from ..kernels import core_cuda as kc

        if m:
            ubase, units = unit_starts(device, norm, kind_char)
            run_kernel(device, kc.shingle_hashes, m, norm.data, norm.offsets, units, ubase, docs, reserve, n,
                       kind_char, np.uint64(seed), raw)
        seg = repeat_index(xp, counts)
        by_hash = argsort_stable(xp, raw)
        order = by_hash[argsort_stable(xp, seg[by_hash])]
        h, sg = raw[order], seg[order]
        first = xp.ones(h.shape[0], dtype=bool)
        if h.shape[0]:
            first[1:] = (h[1:] != h[:-1]) | (sg[1:] != sg[:-1])
        sizes = xp.bincount(sg[first], minlength=m).astype(xp.int64)
        offsets = xp.zeros(m, xp.int64)
        if m > 1:
            xp.cumsum(sizes[:-1], out=offsets[1:])
        return h[first], offsets, sizes
    from ..kernels import core_cpu

    sizes = np.empty(m, np.int64)
    if m:
        run_kernel(device, core_cpu.shingle_sets, m, norm.data, norm.offsets, docs, kind_char, n, np.uint64(seed),
                   reserve, raw, sizes)
    offsets = np.zeros(m, np.int64)
    if m > 1:
        np.cumsum(sizes[:-1], out=offsets[1:])
    if m == 0 or int(offsets[-1] + sizes[-1]) == raw.shape[0]:  # no repeated shingle: already compact
        return raw, offsets, sizes
    out = np.empty(int(offsets[-1] + sizes[-1]), np.uint64)
    run_kernel(device, core_cpu.compact_sets, m, raw, reserve, sizes, offsets, out)
    return out, offsets, sizes


def jaccard_pairs(device: str, hashes, set_offsets, set_sizes, left, right):
    """float64 (p,): exact Jaccard of the sorted sets (CSR hashes / offsets / sizes) for pairs (left[q], right[q])
    (int64 (p,) indexes into the sets). A merge walk per pair."""
    xp = array_module(device)
    out = xp.empty(left.shape[0], xp.float64)
    if left.shape[0]:
        run_kernel(device, _target(device).jaccard_pairs, left.shape[0], hashes, set_offsets, set_sizes, left, right,
                   out)
    return out


def min_label_components(device: str, m: int, u, v):
    """int64 (m,): the smallest node index of each connected component of m nodes under edges (u[e], v[e]) (int64).
    CPU: union-find with path compression. GPU: min-label propagation with atomic min plus pointer jumping, repeated
    until no label changes, then the chains finished (the same labels)."""
    if device != "cuda":
        from ..kernels import core_cpu

        return core_cpu.union_find(m, u, v)
    from ..kernels import core_cuda as kc

    xp = array_module(device)
    label = xp.arange(m, dtype=xp.int64)
    if u.shape[0] == 0:
        return label
    changed = xp.zeros(1, xp.int32)
    while True:
        changed[0] = 0
        run_kernel(device, kc.propagate_min_labels, u.shape[0], u, v, label, changed)
        run_kernel(device, kc.pointer_jump, m, label)
        if int(changed[0]) == 0:
            break
    # labels point at nodes of the same component; finish the chains
    while True:
        nxt = label[label]
        if bool((nxt == label).all()):
            return label
        label = nxt


def representative_components(device: str, order, comp_off, buckets: "Buckets", sets: "ShingleSets", pinned,
                              threshold: float, cap: int) -> tuple[Any, Any, Any, Any]:
    """The representative policy (``kernels/core.py:representative_run``) over candidate components, in parallel
    (CPU threads, or one GPU thread per component): order int64 (m_c,) the documents grouped by component in keep
    order, comp_off int64 (c+1,); buckets (``lexical.lsh.Buckets``) over the m candidates, their shingle sets
    ``sets``; pinned uint8 (m,) (nonzero = always kept). Returns (rep int64 (m,) -1 = kept, jac float64 (m,) NaN =
    not measured, capped uint8 (buckets,), comparisons int64 (c,)). On a GPU, components of more than
    HOST_COMPONENT members run on the host CPU kernel (the same device function, so the same decisions): the
    policy walks a component serially, and a giant one must not hold the whole launch."""
    xp = array_module(device)
    m = int(pinned.shape[0])
    n_comp = int(comp_off.shape[0] - 1)
    rep = xp.full(m, -1, xp.int64)
    jac = xp.full(m, xp.nan)
    capped = xp.zeros(buckets.n_buckets, xp.uint8)
    comparisons = xp.zeros(n_comp, xp.int64)
    giant = xp.diff(comp_off) > HOST_COMPONENT if device == "cuda" else xp.zeros(n_comp, bool)
    n_giant = int(giant.sum())
    small = _select_components(xp, order, comp_off, ~giant) if n_giant else (order, comp_off)
    n_small = int(small[1].shape[0] - 1)
    if n_small:
        # per-component counts (only their total reaches run.json): small components first, then giant
        _representative_run(device, xp, *small, buckets.doc_offsets, buckets.entry_bucket, buckets.entry_doc,
                            buckets.n_buckets, sets.offsets, sets.sizes, sets.hashes, pinned, threshold, cap, capped,
                            rep, jac, comparisons[:n_small])
    if n_giant:
        comparisons[n_small:] = _giant_components_on_host(xp, *_select_components(xp, order, comp_off, giant),
                                                          buckets, sets, pinned, threshold, cap, rep, jac, capped)
    return rep, jac, capped, comparisons


def _representative_run(device, xp, order, comp_off, entry_off, entry_bucket, entry_doc, n_buckets, set_offsets,
                        set_sizes, hashes, pinned, threshold, cap, capped, rep, jac, comparisons) -> None:
    """One launch of the representative_components kernel of ``device``, its scratch arrays made here."""
    head = xp.full(n_buckets, -1, xp.int64)
    tail = xp.full(n_buckets, -1, xp.int64)
    nxt = xp.full(entry_bucket.shape[0], -1, xp.int64)
    stamp = xp.full(entry_off.shape[0] - 1, -1, xp.int64)
    run_kernel(device, _target(device).representative_components, int(comp_off.shape[0] - 1), order, comp_off,
               entry_off, entry_bucket, entry_doc, set_offsets, set_sizes, hashes, pinned, float(threshold), int(cap),
               head, tail, nxt, stamp, capped, rep, jac, comparisons)


def _select_components(xp, order, comp_off, keep):
    """(order, comp_off) of the components where ``keep`` (bool (c,)) is set, in their original order."""
    sizes = xp.diff(comp_off)
    member = keep[repeat_index(xp, sizes)]  # each position's component, then whether it is kept
    sub_off = xp.zeros(int(keep.sum()) + 1, xp.int64)
    xp.cumsum(sizes[keep], out=sub_off[1:])
    return order[member], sub_off


def _giant_components_on_host(xp, order, comp_off, buckets: "Buckets", sets: "ShingleSets", pin, threshold: float,
                              cap: int, rep, jac, capped):
    """The representative policy over giant components with the CPU kernel, its results written back into the
    device arrays. Copies the bucket entries and the candidate shingle sets to the host once. Returns the
    comparisons per component (device)."""
    order_h = to_host(order)
    m = int(rep.shape[0])
    rep_h = np.full(m, -1, np.int64)
    jac_h = np.full(m, np.nan)
    capped_h = np.zeros(buckets.n_buckets, np.uint8)
    comparisons_h = np.zeros(comp_off.shape[0] - 1, np.int64)
    _representative_run("cpu", np, order_h, to_host(comp_off), to_host(buckets.doc_offsets),
                        to_host(buckets.entry_bucket), to_host(buckets.entry_doc), buckets.n_buckets,
                        to_host(sets.offsets), to_host(sets.sizes), to_host(sets.hashes), to_host(pin), threshold, cap,
                        capped_h, rep_h, jac_h, comparisons_h)
    members = to_device(order_h, "cuda")
    rep[members] = to_device(rep_h[order_h], "cuda")
    jac[members] = to_device(jac_h[order_h], "cuda")
    capped |= to_device(capped_h, "cuda")  # components touch disjoint buckets
    logger.info("%d giant candidate components (%d documents, > %d each) ran on the host", comp_off.shape[0] - 1,
                order_h.shape[0], HOST_COMPONENT)
    return to_device(comparisons_h, "cuda")
