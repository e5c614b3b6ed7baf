"""GPU kernels of the n-gram language-model family (``lm.py``'s device functions compiled with
``numba.cuda.jit``), one thread per document / line / row. Same names, arguments and results as ``lm_cpu.py``
(whose docstrings give shapes and dtypes); launched by ``gpu_dedup.device.launch(..., family="lm")``. The
tables are built on the host (``lm_cpu.lm_build_table`` / ``lm_build_vocab``) and copied to the device.
"""
import numpy as np
from numba import cuda

from . import lm
from ._build import build
from ._launch import I8, f4, f8, i8, i8_2, kernel, u1, u8
from .lm import CBO, HIST, KEY_SEED

_G = build(cuda.jit(device=True), lm)
g_score_doc = _G["score_doc"]
g_count_words = _G["count_words"]
g_word_hash = _G["word_hash"]
g_is_ascii_space = _G["is_ascii_space"]
g_ngram_ext = _G["ngram_ext"]


@kernel(sigs=[(u1, i8, i8, u8, u8, i8, u8, f4, f4, I8, I8, I8, I8, f8, i8, i8, i8)])
def lm_score_docs(data, line_off, doc_lines, vk1, vk2, vids, keys, prob, bo, order, bos, eos, unk,
                  out_lp, out_tok, out_sent, out_oov):
    d = cuda.grid(1)
    if d < doc_lines.shape[0] - 1:
        hist = cuda.local.array(HIST, np.int64)
        cbo = cuda.local.array(CBO, np.float32)
        lp, tok, sent, oov = g_score_doc(data, line_off, doc_lines[d], doc_lines[d + 1], hist, cbo, vk1, vk2, vids,
                                         keys, prob, bo, order, bos, eos, unk)
        out_lp[d] = lp
        out_tok[d] = tok
        out_sent[d] = sent
        out_oov[d] = oov


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
            h1, h2 = g_word_hash(data, s, j)
            out_start[k] = s
            out_end[k] = j
            out_h1[k] = h1
            out_h2[k] = h2
            k += 1


@kernel(sigs=[(i8_2, u8)])
def lm_ngram_keys(rows, out):
    i = cuda.grid(1)
    if i < rows.shape[0]:
        k = KEY_SEED
        for j in range(rows.shape[1] - 1, -1, -1):
            k = g_ngram_ext(k, rows[i, j])
        out[i] = k


@kernel(sigs=[(u1, i8, i8, u8, u8)])
def lm_span_hashes(data, starts, ends, out_h1, out_h2):
    i = cuda.grid(1)
    if i < starts.shape[0]:
        h1, h2 = g_word_hash(data, starts[i], ends[i])
        out_h1[i] = h1
        out_h2[i] = h2
