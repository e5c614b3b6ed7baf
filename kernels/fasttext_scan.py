"""The CPU's hidden vector of a document (``ft_doc_hidden``): its tokens scanned once, one loop per document
(``ft_scan_words``: every word token's rows; ``ft_scan_ngrams``: the word n-grams after them). Device functions of
fasttext.py's kind, built for the CPU only (``fasttext_cpu.py``: ``build(njit, fasttext, fasttext_scan)``); the
GPU lists tokens and n-grams cooperatively instead (``fasttext_cuda.py``) from fasttext.py's functions, and both
give the same rows in the same order (tests/filters/test_fasttext.py).
"""
import numpy as np

from .fasttext import (BIT31, FNV_OFFSET, FNV_PRIME, MASK32, MAX_WORD_NGRAMS, NGRAM_MUL, P_BUCKET, P_BUCKET_MAGIC,
                       P_DIM, P_EOS_ID, P_IN_QUANT, P_MAXN, P_MINN, P_NWORDS, P_PRUNE, P_TABLE_MASK, P_WORDNGRAMS,
                       SIGN_WORD, U64, F0, F32, F64)
# device functions called by name: build() compiles these modules into one namespace, where the compiled twins
# replace them
from .fasttext import (ft_add_row, ft_eos_hash, ft_fastmod32, ft_fnv_step, ft_is_eos, ft_is_sep, ft_is_word,
                       ft_mul, ft_push_hash, ft_push_row, ft_subwords, ft_vbyte, ft_vocab_find)

CS_MAX = 256  # characters of a token whose n-grams ft_scan_words enumerates itself (longer: ft_subwords)


def ft_unit_hash(h, data, ts, n, cs, u):
    """h (FNV-1a, fastText's sign extension) extended by unit u of "<" + token + ">" (n bytes): the bytes
    cs[u]..cs[u + 1] - 1, a character with its continuation bytes (unit 0 is "<" with the continuation bytes
    that start the token, the last unit is ">")."""
    for k in range(cs[u], cs[u + 1]):
        c = ft_vbyte(data, ts, n, k)
        h = ((h ^ (U64(np.int64(np.int8(c))) & MASK32)) * FNV_PRIME) & MASK32  # ft_fnv_step without a branch
    return h


def ft_ngram_start(ring, i, jmax, P, pkeys, pvals, win, wcodes, wcent, wnc, wncent, hrow):
    """Add the word n-grams that start at word token i and end at tokens i+1..jmax (ring: their hashes,
    sign-extended, at position % MAX_WORD_NGRAMS); returns how many rows were added."""
    bucket = U64(P[P_BUCKET])
    g = ring[i % MAX_WORD_NGRAMS]
    count = 0
    for j in range(i + 1, jmax + 1):
        g = g * NGRAM_MUL + ring[j % MAX_WORD_NGRAMS]
        row = ft_push_hash(P, pkeys, pvals, np.int64(g % bucket))
        if row >= 0:
            ft_add_row(hrow, P, win, wcodes, wcent, wnc, wncent, row)
            count += 1
    return count


def ft_scan_ngrams(data, s, e, P, prefix, vbytes, voff, vhash, vtype, vtable, pkeys, pvals, win, wcodes, wcent,
                   wnc, wncent, hrow, ring):
    """The word n-gram rows of data[s:e] plus the final "</s>" (fastText adds them after every token's own
    features, ``ft_scan_words``); returns the number of rows added."""
    count = 0
    nw = 0          # word tokens seen
    wn = P[P_WORDNGRAMS]
    pos = s
    stopped = False
    while True:
        while pos < e and ft_is_sep(data[pos]):
            pos += 1
        if pos >= e:
            break
        ts = pos
        h = FNV_OFFSET
        while pos < e and not ft_is_sep(data[pos]):
            h = ft_fnv_step(h, data[pos])
            pos += 1
        wid = ft_vocab_find(data, ts, pos, h, vbytes, voff, vhash, vtable, U64(P[P_TABLE_MASK]))
        eos = ft_is_eos(data, ts, pos)
        if ft_is_word(data, ts, pos, wid, vtype, prefix):
            ring[nw % MAX_WORD_NGRAMS] = h | SIGN_WORD if h & BIT31 else h
            nw += 1
            if nw >= wn:
                count += ft_ngram_start(ring, nw - wn, nw - 1, P, pkeys, pvals, win, wcodes, wcent, wnc, wncent,
                                        hrow)
        if eos:     # a literal "</s>" ends the line: fastText reads nothing after it
            stopped = True
            break
    if not stopped:  # the "</s>" of the appended newline
        wid = P[P_EOS_ID]
        if wid < 0 or vtype[wid] == 0:
            h = ft_eos_hash()
            ring[nw % MAX_WORD_NGRAMS] = h | SIGN_WORD if h & BIT31 else h
            nw += 1
            if nw >= wn:
                count += ft_ngram_start(ring, nw - wn, nw - 1, P, pkeys, pvals, win, wcodes, wcent, wnc, wncent,
                                        hrow)
    first = nw - wn + 1
    if first < 0:
        first = 0
    for i in range(first, nw):
        count += ft_ngram_start(ring, i, nw - 1, P, pkeys, pvals, win, wcodes, wcent, wnc, wncent, hrow)
    return count


def ft_scan_words(data, s, e, P, prefix, vbytes, voff, vhash, vtype, vtable, sub_off, sub_rows, pkeys, pvals,
                  win, wcodes, wcent, wnc, wncent, hrow, cs):
    """Every word token's rows of data[s:e] (its vocabulary row, then its subword rows: precomputed at load for
    a vocabulary word, else its character n-grams, ``ft_subwords``' rows in its order), then the final "</s>"
    row; returns how many. One loop for the CPU: a token's hash and its characters' starts (cs, int64 (CS_MAX +
    3,)) are found in one scan, its n-grams enumerated from the starts (no test of every byte of every n-gram
    for a continuation byte or the "<" / ">" ends), P's fields read once; a call per token costs the reference
    counts of a dozen arrays, more than the token's own work, so nothing per token is a call. A token of more
    than CS_MAX characters goes through ``ft_subwords``. The token scan, the n-gram loop and the row adds repeat
    ``ft_scan_ngrams``' and ``ft_subwords``' on purpose: through shared inlined helpers (a row add, a separator
    skip) this loop measured 58-62 us per lid.176 document instead of 46-51."""
    minn = P[P_MINN]
    maxn = P[P_MAXN]
    bucket = U64(P[P_BUCKET])
    magic = U64(P[P_BUCKET_MAGIC])
    prune = P[P_PRUNE]
    nwords = P[P_NWORDS]
    dense = P[P_IN_QUANT] == 0
    dim = P[P_DIM]
    mask = U64(P[P_TABLE_MASK])
    count = 0
    pos = s
    stopped = False
    while True:
        while pos < e and ft_is_sep(data[pos]):
            pos += 1
        if pos >= e:
            break
        ts = pos
        h = FNV_OFFSET
        nu = 1
        while pos < e and not ft_is_sep(data[pos]):
            c = data[pos]
            h = ((h ^ (U64(np.int64(np.int8(c))) & MASK32)) * FNV_PRIME) & MASK32  # ft_fnv_step, no branch
            if (c & 0xC0) != 0x80:
                if nu <= CS_MAX:
                    cs[nu] = pos - ts + 1
                nu += 1
            pos += 1
        wid = ft_vocab_find(data, ts, pos, h, vbytes, voff, vhash, vtable, mask)
        eos = ft_is_eos(data, ts, pos)
        if ft_is_word(data, ts, pos, wid, vtype, prefix):
            if wid >= 0:  # in vocabulary: its row, then its subword rows precomputed at load (as fastText)
                if dense:
                    for t in range(dim):
                        hrow[t] = hrow[t] + win[wid, t]
                    for q in range(sub_off[wid], sub_off[wid + 1]):
                        row = np.int64(sub_rows[q])
                        for t in range(dim):
                            hrow[t] = hrow[t] + win[row, t]
                else:
                    ft_add_row(hrow, P, win, wcodes, wcent, wnc, wncent, wid)
                    for q in range(sub_off[wid], sub_off[wid + 1]):
                        ft_add_row(hrow, P, win, wcodes, wcent, wnc, wncent, np.int64(sub_rows[q]))
                count += 1 + sub_off[wid + 1] - sub_off[wid]
            elif not eos and maxn > 0:
                if nu > CS_MAX + 1:  # more than CS_MAX characters
                    count += ft_subwords(data, ts, pos, 0, pos - ts + 2, P, pkeys, pvals, win, wcodes, wcent, wnc,
                                         wncent, hrow, 0, sub_rows, 0)
                else:
                    n = pos - ts + 2
                    cs[0] = 0
                    cs[nu] = n - 1  # ">"
                    nu += 1
                    cs[nu] = n
                    for a in range(nu):
                        hh = FNV_OFFSET
                        last = a + maxn - 1
                        if last > nu - 1:
                            last = nu - 1
                        for b in range(a, last + 1):
                            hh = ft_unit_hash(hh, data, ts, n, cs, b)
                            ln = b - a + 1
                            if ln >= minn and not (ln == 1 and (a == 0 or b == nu - 1)):
                                row = ft_push_row(prune, nwords, pkeys, pvals,
                                                  np.int64(ft_fastmod32(hh, bucket, magic)))
                                if row >= 0:
                                    if dense:
                                        for t in range(dim):
                                            hrow[t] = hrow[t] + win[row, t]
                                    else:
                                        ft_add_row(hrow, P, win, wcodes, wcent, wnc, wncent, row)
                                    count += 1
        if eos:     # a literal "</s>" ends the line: fastText reads nothing after it
            stopped = True
            break
    if not stopped:  # the "</s>" of the appended newline: its own row only, never subwords
        wid = P[P_EOS_ID]
        if wid >= 0 and vtype[wid] == 0:
            ft_add_row(hrow, P, win, wcodes, wcent, wnc, wncent, wid)
            count += 1
    return count


def ft_doc_hidden(data, s, e, P, prefix, vbytes, voff, vhash, vtype, vtable, sub_off, sub_rows, pkeys, pvals,
                  win, wcodes, wcent, wnc, wncent, hrow, ring, cs):
    """hrow (f32 (dim,)) = fastText's hidden vector of document data[s:e]; returns the number of feature
    rows (0: fastText predicts nothing, hrow stays 0). ring: uint64 (MAX_WORD_NGRAMS,), cs: int64 (CS_MAX + 3,)
    scratch."""
    for j in range(P[P_DIM]):
        hrow[j] = F0
    count = ft_scan_words(data, s, e, P, prefix, vbytes, voff, vhash, vtype, vtable, sub_off, sub_rows, pkeys,
                          pvals, win, wcodes, wcent, wnc, wncent, hrow, cs)
    if P[P_WORDNGRAMS] > 1:
        count += ft_scan_ngrams(data, s, e, P, prefix, vbytes, voff, vhash, vtype, vtable, pkeys, pvals, win,
                                wcodes, wcent, wnc, wncent, hrow, ring)
    if count > 0:
        inv = F32(1.0 / F64(count))
        for j in range(P[P_DIM]):
            hrow[j] = ft_mul(hrow[j], inv)
    return count


DEVICE_FUNCTIONS = ["ft_unit_hash", "ft_ngram_start", "ft_scan_ngrams", "ft_scan_words", "ft_doc_hidden"]
