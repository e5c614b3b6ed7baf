"""CPU kernels of the "features" family (``features.py``'s device functions compiled with ``numba.njit``),
parallel over documents. ``feature_ids`` and ``feature_log_weights`` give the same results as
``features_cuda.py`` bit for bit; ``rule_stats`` is host-only (per-document sorts; see gpu_dedup/filters/rules.py).

Notation: n documents, T text bytes of the batch, F features of the batch, B buckets, w words of a document.
"""
import numpy as np
from numba import njit, prange

from . import features
from ._build import build, one_signature_per_type
from .features import (
    N_BASE_STATS,
    ST_ALPHA_WORDS,
    ST_BULLET_LINES,
    ST_DUP_LINE_CHARS,
    ST_DUP_LINES,
    ST_DUP_PARA_CHARS,
    ST_DUP_PARAS,
    ST_ELLIPSIS,
    ST_ELLIPSIS_LINES,
    ST_HASH,
    ST_MEAN_WORD_LEN,
    ST_STOP_WORDS,
    ST_WORDS,
    U64,
)

_C = build(njit(cache=False, nogil=True), features)
c_scan_features = _C["scan_features"]
c_word_scan = _C["word_scan"]
c_line_scan = _C["line_scan"]
c_count_newlines = _C["count_newlines"]
c_popcount64 = _C["popcount64"]
c_ngram_fold = _C["ngram_fold"]
c_ngram_finish = _C["ngram_finish"]
c_xxh64 = _C["xxh64"]
c_utf8_decode = _C["utf8_decode"]
c_char_class_counts = _C["char_class_counts"]


@njit(parallel=True, cache=True, nogil=True)
def char_counts(data, offsets, table, out):
    """out[d] = (codepoints, non-ASCII codepoints, bytes in the table's ASCII set) of document d =
    data[offsets[d]:offsets[d+1]] (uint8 (T,) UTF-8, offsets int64 (n+1,), table uint8 (256,) of
    features.CC_* bits, out int64 (n, 3)). O(T) work, no scratch."""
    for d in prange(offsets.shape[0] - 1):
        a, b, c = c_char_class_counts(data, offsets[d], offsets[d + 1], table)
        out[d, 0] = a
        out[d, 1] = b
        out[d, 2] = c


@njit(parallel=True, cache=True, nogil=True)
def feature_ids(norm, offsets, n, seed, buckets, base, ids):
    """Feature ids of normalized document d (norm uint8 (T,), offsets int64 (n+1,)) -> ids[base[d]:base[d+1]]
    in features.py's order. n: max n-gram (1..DSIR_MAX_NGRAM); seed, buckets: uint64; base int64 (n+1,) from
    the word counts (features.py's formula); ids int32 (F,)."""
    dummy = np.empty(0, np.float64)
    for d in prange(offsets.shape[0] - 1):
        ring = np.empty(n, np.int64)
        c_scan_features(norm, offsets[d], offsets[d + 1], n, seed, buckets, ring, ids, base[d], dummy, True)


@njit(parallel=True, cache=True, nogil=True)
def feature_log_weights(norm, offsets, n, seed, buckets, logdiff, out):
    """out[d] = sum over document d's features f (with multiplicity, in order) of logdiff[f]. logdiff float64
    (B,), out float64 (n,). No feature array is materialized: O(1) memory beyond the output."""
    dummy = np.empty(0, np.int32)
    for d in prange(offsets.shape[0] - 1):
        ring = np.empty(n, np.int64)
        cnt, total = c_scan_features(norm, offsets[d], offsets[d + 1], n, seed, buckets, ring, dummy, 0, logdiff,
                                     False)
        out[d] = total


@njit(cache=True, nogil=True)
def _sorted_groups_dup(keys, chars):
    """For unit keys (uint64 (u,)) with codepoint counts chars: (duplicate units, their codepoints), a
    duplicate being every occurrence of a key after its first. An open-addressing table (a power of two >=
    2u slots), not a sort: numba's sort is recursive, and a cached kernel that holds one crashes when another
    cached kernel of the process holds a sort too (numba issue #6061)."""
    u = keys.shape[0]
    size = 1
    while size < 2 * u:
        size *= 2
    mask = U64(size - 1)
    used = np.zeros(size, np.uint8)
    seen = np.empty(size, np.uint64)
    dup = 0
    dup_chars = 0
    for t in range(u):
        key = keys[t]
        h = np.int64(key & mask)  # XXH64-avalanched keys: the low bits index the table
        while used[h] != 0 and seen[h] != key:
            h = (h + 1) & (size - 1)
        if used[h] != 0:
            dup += 1
            dup_chars += chars[t]
        else:
            used[h] = 1
            seen[h] = key
    return dup, dup_chars


@one_signature_per_type  # called with top=True and top=False: one compile, not one per literal
@njit(cache=True, nogil=True)
def _ngram_stats(keys, pref, nw, n, top, slot, tkey, tcount, tlast, tcov):
    """Codepoints of the words covered (each word once) by occurrences of word n-grams of a document (keys:
    uint64 n-gram keys by start position, pref: int64 prefix sums of word codepoints, nw words). top=True:
    the occurrences of the most frequent n-gram if it occurs at least twice (of several equally frequent,
    the largest coverage); top=False: the occurrences of every n-gram occurring at least twice. Divide by
    pref[nw] for the fraction.

    O(m) for m = nw - n + 1 n-grams: an open-addressing table counts them (a per-document sort measured 2x
    slower). Scratch: slot int64 (>= m,); tkey uint64, tcount/tlast/tcov int64 (a power of two >= 2m,)."""
    m = nw - n + 1
    if m < 2:
        return 0
    size = 1
    while size < 2 * m:
        size *= 2
    mask = U64(size - 1)
    for t in range(size):
        tcount[t] = 0
    best_count = 0
    for j in range(m):
        key = keys[j]
        h = np.int64(key & mask)  # the key is XXH64-avalanched: its low bits index the table
        while tcount[h] != 0 and tkey[h] != key:
            h = (h + 1) & (size - 1)
        if tcount[h] == 0:
            tkey[h] = key
            tlast[h] = -1
            tcov[h] = 0
        tcount[h] += 1
        slot[j] = h
        best_count = max(best_count, tcount[h])
    if best_count < 2:
        return 0
    if top:
        # per n-gram of the top count: the union of its occurrences, walking them in increasing position (an
        # occurrence at l covers words l .. min(l + n, next occurrence) - 1)
        for j in range(m):
            h = slot[j]
            if tcount[h] == best_count:
                last = tlast[h]
                if last >= 0:
                    tcov[h] += pref[min(last + n, j)] - pref[last]
                tlast[h] = j
        best = 0
        for j in range(m):
            h = slot[j]
            if tcount[h] == best_count and tlast[h] == j:
                best = max(best, tcov[h] + pref[j + n] - pref[j])
        return best
    covered = 0
    until = 0
    for i in range(nw):
        if i < m and tcount[slot[i]] >= 2 and i + n > until:
            until = i + n
        if i < until:
            covered += pref[i + 1] - pref[i]
    return covered


@one_signature_per_type
@njit(cache=True, nogil=True)
def _rule_stats_doc(data, s, e, cls, bullets, stop_key, stop_len, top_ns, dup_ns, seed, row):
    """rule_stats of one document data[s:e] -> row (float64 (N_BASE_STATS + len(top_ns) + len(dup_ns),)).
    Serial, out of the prange loop: Numba's parallel passes then see a loop of one call instead of this body
    (less compile time; the same operations in the same order, so the same bits)."""
    na = top_ns.shape[0]
    cap_w = (e - s + 1) // 2 + 1
    ws = np.empty(cap_w, np.int64)
    we = np.empty(cap_w, np.int64)
    wc = np.empty(cap_w, np.int64)
    nw, alpha_words, stops, chars, hashes, ellipses = c_word_scan(data, s, e, cls, stop_key, stop_len, ws, we,
                                                                  wc, True)
    cap_l = c_count_newlines(data, s, e) + 1
    ls = np.empty(cap_l, np.int64)
    le = np.empty(cap_l, np.int64)
    lc = np.empty(cap_l, np.int64)
    lp = np.empty(cap_l, np.int64)
    nl, npara, bullet_lines, ellipsis_lines = c_line_scan(data, s, e, cls, bullets, ls, le, lc, lp)
    row[:] = 0.0
    row[ST_WORDS] = nw
    row[ST_HASH] = hashes
    row[ST_ELLIPSIS] = ellipses
    row[ST_STOP_WORDS] = c_popcount64(stops)
    pref = np.zeros(nw + 1, np.int64)
    for k in range(nw):
        pref[k + 1] = pref[k] + wc[k]
    if nw > 0:
        row[ST_MEAN_WORD_LEN] = pref[nw] / nw
        row[ST_ALPHA_WORDS] = alpha_words / nw
    if nl > 0:
        row[ST_BULLET_LINES] = bullet_lines / nl
        row[ST_ELLIPSIS_LINES] = ellipsis_lines / nl
        lkeys = np.empty(nl, np.uint64)
        for k in range(nl):
            lkeys[k] = c_xxh64(data, ls[k], le[k], seed)
        dup, dup_chars = _sorted_groups_dup(lkeys, lc)
        row[ST_DUP_LINES] = dup / nl
        row[ST_DUP_LINE_CHARS] = dup_chars / chars
        # a paragraph spans from its first line's trimmed start to its last line's trimmed end; its
        # codepoints are its lines' plus everything between them (newlines, indentation)
        pkeys = np.empty(npara, np.uint64)
        pchars = np.zeros(npara, np.int64)
        k = 0
        for p in range(npara):
            k0 = k
            while k < nl and lp[k] == p:
                k += 1
            pkeys[p] = c_xxh64(data, ls[k0], le[k - 1], seed)
            i = ls[k0]
            while i < le[k - 1]:
                cp, step = c_utf8_decode(data, i, e)
                i += step
                pchars[p] += 1
        dup, dup_chars = _sorted_groups_dup(pkeys, pchars)
        row[ST_DUP_PARAS] = dup / npara
        row[ST_DUP_PARA_CHARS] = dup_chars / chars
    total = pref[nw]
    if total > 0 and (na + dup_ns.shape[0]) > 0:
        wh = np.empty(nw, np.uint64)
        for k in range(nw):
            wh[k] = c_xxh64(data, ws[k], we[k], seed)
        size = 1
        while size < 2 * nw:
            size *= 2
        slot = np.empty(nw, np.int64)
        tkey = np.empty(size, np.uint64)
        tcount = np.empty(size, np.int64)
        tlast = np.empty(size, np.int64)
        tcov = np.empty(size, np.int64)
        state = wh.copy()
        keys = np.empty(nw, np.uint64)
        max_n = 0
        for t in range(na):
            max_n = max(max_n, top_ns[t])
        for t in range(dup_ns.shape[0]):
            max_n = max(max_n, dup_ns[t])
        for n in range(1, min(max_n, nw - 1) + 1):  # n >= nw: fewer than 2 n-grams, the 0 already set
            if n > 1:
                for j in range(nw - n + 1):
                    state[j] = c_ngram_fold(state[j], wh[j + n - 1])
            for j in range(nw - n + 1):
                keys[j] = c_ngram_finish(state[j])
            for t in range(na):
                if top_ns[t] == n:
                    row[N_BASE_STATS + t] = _ngram_stats(keys, pref, nw, n, True, slot, tkey, tcount, tlast,
                                                         tcov) / total
            for t in range(dup_ns.shape[0]):
                if dup_ns[t] == n:
                    row[N_BASE_STATS + na + t] = _ngram_stats(keys, pref, nw, n, False, slot, tkey, tcount,
                                                              tlast, tcov) / total


@njit(parallel=True, cache=True, nogil=True)
def rule_stats(data, offsets, cls, bullets, stop_key, stop_len, top_ns, dup_ns, seed, out):
    """Gopher statistics of raw document d = data[offsets[d]:offsets[d+1]] (UTF-8) -> out[d, :] (float64 (n,
    N_BASE_STATS + len(top_ns) + len(dup_ns)); columns ST_* of features.py, then the top-n-gram character
    fraction for each n of top_ns and the duplicate-n-gram character fraction for each n of dup_ns, both
    _ngram_stats over the codepoints of all words). cls uint8 (0x110000,) class bits; bullets int32
    codepoints; stop_key/stop_len see features.stop_word_match; seed uint64.
    Scratch per document: O(w + lines) int64, freed after it."""
    for d in prange(offsets.shape[0] - 1):
        _rule_stats_doc(data, offsets[d], offsets[d + 1], cls, bullets, stop_key, stop_len, top_ns, dup_ns, seed,
                        out[d])
