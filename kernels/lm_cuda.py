"""GPU kernels of the n-gram language-model family (``lm.py``'s device functions compiled with
``numba.cuda.jit``). Same results as ``lm_cpu.py`` (whose docstrings give shapes and dtypes); launched by the
family's front end ``gpu_dedup/ops/lm.py``. The tables are built on the host (``lm_cpu.lm_build_table`` /
``lm_build_vocab``) and copied to the device.

Document scoring is cooperative, not one thread per document (``ops/lm.py``'s ``score_docs`` on the GPU):
1. ``lm_word_chunks``: a thread per chunk of <= LM_CHUNK bytes of a line (``device.split_chunks``): counts
   the words that start in it, then (second pass) writes their vocabulary ids (OOV -> unk) and OOV flags at
   the chunk's place in the batch's word order (a word's bytes may run past the chunk: read once, by the
   chunk where the word starts);
2. ``lm_token_scores``: a thread per token (every word, plus one </s> per line with words): its float32
   log10 probability. KenLM's state before a token (the backoffs of the n-grams the previous token matched)
   depends only on the previous token and its history, so the thread recomputes it with the same
   ``token_keys`` + ``score_keys`` (on the previous token, with no carried backoff) instead of waiting for
   it: the same lookups, the same float32 values;
3. ``lm_doc_sums``: a block per document adds them in the CPU's order: float32 within a sentence (each line
   ``0 + lp_1 + ... + lp_</s>``), float64 over the document's sentences. Float addition is not associative,
   so one thread adds, the block staging LM_TILE values at a time in shared memory (the serial part is one
   add per token).
The token counts, sentences and OOVs are integer sums (CuPy, in any order).
"""
import numpy as np
from numba import cuda, float32

from . import lm
from ._build import build
from ._launch import B, I8, f4, f8, i8, i8_2, kernel, u1, u8
from .lm import CBO, HIST, KEY_SEED

LM_CHUNK = 512  # bytes of a line per thread of lm_word_chunks (the orchestration's default cut; no tile)
LM_TILE = 128   # token log probabilities staged per step in lm_doc_sums (shared float32; its threads per block)

_G = build(cuda.jit(device=True), lm)
g_count_words = _G["count_words"]
g_word_key = _G["word_key"]
g_is_ascii_space = _G["is_ascii_space"]
g_ngram_chain = _G["ngram_chain"]
g_ngram_key = _G["ngram_key"]
g_vocab_find = _G["vocab_find"]
g_token_keys = _G["token_keys"]
g_score_keys = _G["score_keys"]
g_start_context = _G["start_context"]


@kernel(stride=True, sigs=[(u1, i8, i8, i8, i8, u8, u8, i8, I8, B, i8, i8, i8)])
def lm_word_chunks(data, line_off, chunk_line, chunk_first, chunk_count, vk1, vk2, vids, unk, write, wpos, ids,
                   oov):
    """One thread per chunk c of line chunk_line[c] (bytes [chunk_first[c], + chunk_count[c]) of it; int64
    (C,) each), grid-stride. A word (a maximal run of non-ASCII-whitespace bytes of its line: the CPU's
    split) belongs to the chunk holding its first byte. write=False: wpos[c] = the chunk's words. write=True:
    word k of the chunk -> ids[wpos[c] + k] (int64: its vocabulary id, unk when absent) and oov[...] (int64:
    1 when absent); wpos = the words of all earlier chunks. data uint8 (T,), line_off int64 (L+1,); vk1, vk2
    uint64, vids int64: the vocabulary table. Local memory: none."""
    c = cuda.grid(1)
    while c < chunk_line.shape[0]:
        li = chunk_line[c]
        ls = line_off[li]
        le = line_off[li + 1]
        a = ls + chunk_first[c]
        b = a + chunk_count[c]
        k = 0
        pos = wpos[c]
        for p in range(a, b):
            if not g_is_ascii_space(data[p]) and (p == ls or g_is_ascii_space(data[p - 1])):
                if write:
                    e = p + 1
                    while e < le and not g_is_ascii_space(data[e]):
                        e += 1
                    h1, h2 = g_word_key(data, p, e)
                    w = g_vocab_find(vk1, vk2, vids, h1, h2)
                    miss = 0
                    if w < 0:
                        w = unk
                        miss = 1
                    ids[pos + k] = w
                    oov[pos + k] = miss
                k += 1
        if not write:
            wpos[c] = k
        c += cuda.gridsize(1)


@kernel(sigs=[(i8, i8, i8, i8, u8, f4, f4, I8, I8, I8, f4)])
def lm_token_scores(ids, wbase, tbase, tok_line, keys, prob, bo, order, bos, eos, out):
    """One thread per token t of line l = tok_line[t] (int64 (N,)): token k = t - tbase[l] is word k of the
    line (ids[wbase[l] + k], int64) or, for k = its word count wbase[l+1] - wbase[l], the sentence's </s>:
    out[t] (float32 (N,)) = its log10 probability in the CPU's sentence (lm.score_keys). wbase, tbase int64
    (L+1,); keys uint64, prob, bo float32: the n-gram table. Local memory: HIST uint64 + CBO float32."""
    t = cuda.grid(1)
    if t < tok_line.shape[0]:
        li = tok_line[t]
        k = t - tbase[li]
        wb = wbase[li]
        cap = order - 1
        kk = cuda.local.array(HIST, np.uint64)
        cbo = cuda.local.array(CBO, np.float32)
        if k == 0:
            clen = g_start_context(bos, keys, bo, cbo)
        else:  # KenLM's state after the previous word: the n-grams it matched, recomputed here
            hlen = g_token_keys(ids[wb + k - 1], ids, wb + k - 2, k - 1, cap, bos, kk, 0)
            # (no backoff carried in: an int64 0, not a literal, which numba-cuda's min() cannot type)
            _, clen = g_score_keys(kk, 0, hlen, cbo, np.int64(0), keys, prob, bo)
        w = eos
        if k < wbase[li + 1] - wb:
            w = ids[wb + k]
        hlen = g_token_keys(w, ids, wb + k - 1, k, cap, bos, kk, 0)
        lp, _ = g_score_keys(kk, 0, hlen, cbo, clen, keys, prob, bo)
        out[t] = lp


@kernel(per_block=True, stride=True, tpb=LM_TILE, sigs=[(i8, i8, f4, f8)])
def lm_doc_sums(tbase, doc_lines, lp, out_lp):
    """One block per document d (lines doc_lines[d] .. doc_lines[d+1]-1, int64 (n+1,)), grid-stride:
    out_lp[d] (float64 (n,)) = the sum over its lines with tokens (tbase int64 (L+1,): line l's tokens
    lp[tbase[l]:tbase[l+1]], float32) of float64(0f + lp_1 + ... + lp_last) (float32 adds), in line order:
    lm_cpu.lm_score_docs' sums. One thread adds; the block stages LM_TILE values (threads past it idle).
    Shared memory: LM_TILE float32; two barriers per tile."""
    tile = cuda.shared.array(LM_TILE, float32)
    tid = cuda.threadIdx.x
    width = cuda.blockDim.x
    if width > LM_TILE:
        width = LM_TILE
    d = cuda.blockIdx.x
    while d < doc_lines.shape[0] - 1:
        line = doc_lines[d]
        t1 = tbase[doc_lines[d + 1]]
        k0 = tbase[line]
        total = 0.0
        s_lp = np.float32(0.0)
        left = 0
        while k0 < t1:
            if tid < width and k0 + tid < t1:
                tile[tid] = lp[k0 + tid]
            cuda.syncthreads()
            if tid == 0:
                m = t1 - k0
                if m > width:
                    m = width
                for t in range(m):
                    while left == 0:  # the next line with tokens
                        left = tbase[line + 1] - tbase[line]
                        line += 1
                    s_lp = np.float32(s_lp + tile[t])
                    left -= 1
                    if left == 0:
                        total += np.float64(s_lp)
                        s_lp = np.float32(0.0)
            cuda.syncthreads()
            k0 += width
        if tid == 0:
            out_lp[d] = total
        d += cuda.gridDim.x


@kernel(sigs=[(u1, i8, i8)])
def lm_count_words(data, line_off, out):
    i = cuda.grid(1)
    if i < line_off.shape[0] - 1:
        out[i] = g_count_words(data, line_off[i], line_off[i + 1])


@kernel(sigs=[(u1, i8, i8, i8, i8, u8, u8)])
def lm_word_hashes(data, line_off, word_off, out_start, out_end, out_h1, out_h2):
    i = cuda.grid(1)
    if i < line_off.shape[0] - 1:
        k = word_off[i]
        j = line_off[i]
        end = line_off[i + 1]
        while j < end:
            while j < end and g_is_ascii_space(data[j]):
                j += 1
            if j >= end:
                break
            s = j
            while j < end and not g_is_ascii_space(data[j]):
                j += 1
            h1, h2 = g_word_key(data, s, j)
            out_start[k] = s
            out_end[k] = j
            out_h1[k] = h1
            out_h2[k] = h2
            k += 1


@kernel(sigs=[(i8_2, u8)])
def lm_ngram_keys(rows, out):
    i = cuda.grid(1)
    if i < rows.shape[0]:
        c = KEY_SEED
        for j in range(rows.shape[1] - 1, -1, -1):
            c = g_ngram_chain(c, rows[i, j])
        out[i] = g_ngram_key(c)


@kernel(sigs=[(u1, i8, i8, u8, u8)])
def lm_span_hashes(data, starts, ends, out_h1, out_h2):
    i = cuda.grid(1)
    if i < starts.shape[0]:
        h1, h2 = g_word_key(data, starts[i], ends[i])
        out_h1[i] = h1
        out_h2[i] = h2
