"""CPU kernels of the n-gram language-model family (``lm.py``'s device functions compiled with ``numba.njit``),
parallel over documents / lines / rows. Same results as ``lm_cuda.py``; the table builders are host-only (the
tables are built once per model on the host and copied to the device).

Notation: n documents, L lines, T text bytes, W words, M n-grams, V vocabulary words, C table capacity.
"""
import numpy as np
from numba import njit, prange

from . import lm
from ._build import build
from .lm import CBO, HIST, KEY_SEED, U64

_C = build(njit(cache=False, nogil=True), lm)
c_score_doc = _C["score_doc"]
c_count_words = _C["count_words"]
c_word_hash = _C["word_hash"]
c_is_ascii_space = _C["is_ascii_space"]
c_ngram_ext = _C["ngram_ext"]


@njit(parallel=True, cache=True, nogil=True)
def lm_score_docs(data, line_off, doc_lines, vk1, vk2, vids, keys, prob, bo, order, bos, eos, unk,
                  out_lp, out_tok, out_sent, out_oov):
    """Per document d (lines doc_lines[d] .. doc_lines[d+1]-1; line i = data[line_off[i]:line_off[i+1]]):
    out_lp float64 (n,) log10 probability, out_tok / out_sent / out_oov int64 (n,). data uint8 (T,); line_off
    int64 (L+1,); doc_lines int64 (n+1,); vk1, vk2 uint64 (Cv,), vids int64 (Cv,) the vocabulary table; keys
    uint64 (C,), prob, bo float32 (C,) the n-gram table. Memory per thread: 8 int64 of history, 16 float32 of
    context backoffs."""
    for d in prange(doc_lines.shape[0] - 1):
        hist = np.empty(HIST, np.int64)
        cbo = np.empty(CBO, np.float32)
        lp, tok, sent, oov = c_score_doc(data, line_off, doc_lines[d], doc_lines[d + 1], hist, cbo, vk1, vk2, vids,
                                         keys, prob, bo, order, bos, eos, unk)
        out_lp[d] = lp
        out_tok[d] = tok
        out_sent[d] = sent
        out_oov[d] = oov


@njit(parallel=True, cache=True, nogil=True)
def lm_count_words(data, line_off, out):
    """out[i] = words of line i (int64 (L,)); data uint8 (T,), line_off int64 (L+1,)."""
    for i in prange(line_off.shape[0] - 1):
        out[i] = c_count_words(data, line_off[i], line_off[i + 1])


@njit(parallel=True, cache=True, nogil=True)
def lm_word_hashes(data, line_off, word_off, out_start, out_end, out_h1, out_h2):
    """Line i's words go to positions word_off[i] .. word_off[i+1]-1 (word_off int64 (L+1,), the cumulated
    lm_count_words): byte span [out_start, out_end) int64 (W,) and 128-bit key out_h1, out_h2 uint64 (W,)."""
    for i in prange(line_off.shape[0] - 1):
        k = word_off[i]
        j = line_off[i]
        end = line_off[i + 1]
        while j < end:
            while j < end and c_is_ascii_space(data[j]):
                j += 1
            if j >= end:
                break
            s = j
            while j < end and not c_is_ascii_space(data[j]):
                j += 1
            h1, h2 = c_word_hash(data, s, j)
            out_start[k] = s
            out_end[k] = j
            out_h1[k] = h1
            out_h2[k] = h2
            k += 1


@njit(parallel=True, cache=True, nogil=True)
def lm_ngram_keys(rows, out):
    """out[i] = n-gram key of rows[i] (int64 (M, n), words in text order) -> uint64 (M,)."""
    n = rows.shape[1]
    for i in prange(rows.shape[0]):
        k = KEY_SEED
        for j in range(n - 1, -1, -1):
            k = c_ngram_ext(k, rows[i, j])
        out[i] = k


@njit(cache=True, nogil=True)
def lm_build_table(keys_in, prob_in, bo_in, keys, prob, bo):
    """Insert n-gram keys_in[i] uint64 (M,) with prob_in / bo_in float32 (M,) into the empty table keys uint64
    (C,), prob, bo float32 (C,) (C a power of two >= 2 M). Returns -1, or the first i whose key is already in
    the table (a duplicate n-gram, or a 64-bit key collision). Serial: built once per model."""
    mask = U64(keys.shape[0] - 1)
    for i in range(keys_in.shape[0]):
        key = keys_in[i]
        s = key & mask
        while keys[s] != U64(0) and keys[s] != key:
            s = (s + U64(1)) & mask
        if keys[s] == key:
            return i
        keys[s] = key
        prob[s] = prob_in[i]
        bo[s] = bo_in[i]
    return -1


@njit(cache=True, nogil=True)
def lm_build_vocab(h1, h2, ids, vk1, vk2, vids):
    """Insert word keys (h1[i], h2[i]) uint64 (V,) -> ids[i] int64 into the empty table vk1, vk2 uint64 (C,),
    vids int64 (C,) (C a power of two >= 2 V). Returns -1, or the first i whose key is already present."""
    mask = U64(vk1.shape[0] - 1)
    for i in range(h1.shape[0]):
        s = h1[i] & mask
        while vk1[s] != U64(0) and not (vk1[s] == h1[i] and vk2[s] == h2[i]):
            s = (s + U64(1)) & mask
        if vk1[s] != U64(0):
            return i
        vk1[s] = h1[i]
        vk2[s] = h2[i]
        vids[s] = ids[i]
    return -1


@njit(parallel=True, cache=True, nogil=True)
def lm_span_hashes(data, starts, ends, out_h1, out_h2):
    """Word keys of the spans data[starts[i]:ends[i]] (int64 (V,)) -> out_h1, out_h2 uint64 (V,)."""
    for i in prange(starts.shape[0]):
        h1, h2 = c_word_hash(data, starts[i], ends[i])
        out_h1[i] = h1
        out_h2[i] = h2
