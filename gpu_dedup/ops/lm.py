"""Front end of the n-gram language-model kernel family (``kernels/lm_cpu.py`` / ``kernels/lm_cuda.py``): the words
of lines and their keys (training), n-gram keys and the host-built lookup tables (loading), and document scoring.
One signature per function on both targets (``device`` first; arrays of the device's array module in and out); the
GPU's cooperative scoring (chunks of lines, a thread per token, a block per document) and its chunk constant live
here, not in ``filters/lm.py``.

``tables`` below is a model's six lookup arrays where ``device``'s kernels read them (``NgramLM.tables``: the word
table vk1, vk2 uint64, vids int64 and the n-gram table keys uint64, prob, bo float32).

Notation: n documents, L lines, W words, V vocabulary words, M n-grams.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..kernels.lm import HIST
from ..runtime.device import array_module, readonly_bytes, repeat_index, run_kernel, split_chunks

# the highest order the kernels score: a token's n-gram keys and its matched backoffs are fixed-size arrays of
# HIST entries per thread (a GPU thread's local memory); KenLM's default build stops at 6
MAX_SCORED_ORDER = HIST


def _target(device: str):
    """The kernel module of ``device``: lm_cuda on a GPU, else lm_cpu (imported on first use)."""
    if device == "cuda":
        from ..kernels import lm_cuda
        return lm_cuda
    from ..kernels import lm_cpu
    return lm_cpu


def line_words(device: str, data, line_off) -> tuple[Any, Any, Any, Any, Any]:
    """The words (runs of non-ASCII-whitespace bytes) of lines data[line_off[i]:line_off[i+1]] (uint8, int64
    (L+1,)): (word_off int64 (L+1,): line i's words are word_off[i]:word_off[i+1]; start, end int64 (W,) absolute
    byte spans; h1, h2 uint64 (W,) their 128-bit word keys). A count pass and a write pass, one line per thread
    (iteration)."""
    xp = array_module(device)
    k = _target(device)
    data = readonly_bytes(device, data)
    lines = int(line_off.shape[0]) - 1
    per_line = xp.zeros(lines, xp.int64)
    run_kernel(device, k.lm_count_words, lines, data, line_off, per_line)
    word_off = xp.zeros(lines + 1, xp.int64)
    xp.cumsum(per_line, out=word_off[1:])
    w = int(word_off[-1])
    spans = (xp.empty(w, xp.int64), xp.empty(w, xp.int64), xp.empty(w, xp.uint64), xp.empty(w, xp.uint64))
    run_kernel(device, k.lm_word_hashes, lines, data, line_off, word_off, *spans)
    return (word_off, *spans)


def span_hashes(device: str, data, starts, ends) -> tuple[Any, Any]:
    """(h1, h2 uint64 (V,)): the 128-bit word keys of the spans data[starts[i]:ends[i]] (int64 (V,)), the keys
    ``line_words`` gives the same bytes. A span per thread (iteration)."""
    xp = array_module(device)
    v = int(starts.shape[0])
    h1, h2 = xp.empty(v, xp.uint64), xp.empty(v, xp.uint64)
    run_kernel(device, _target(device).lm_span_hashes, v, readonly_bytes(device, data), starts, ends, h1, h2)
    return h1, h2


def ngram_keys(device: str, rows):
    """uint64 (M,): the 64-bit table key of each n-gram rows[i] (int64 (M, n) word ids). A row per thread."""
    xp = array_module(device)
    out = xp.empty(int(rows.shape[0]), xp.uint64)
    run_kernel(device, _target(device).lm_ngram_keys, int(rows.shape[0]), rows, out)
    return out


def vocab_table_host(h1, h2, ids, capacity: int) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], int]:
    """Host: ((vk1, vk2 uint64, vids int64 (capacity,)), clash): the open-addressing table of word keys (h1[i],
    h2[i]) -> ids[i] (capacity a power of two >= 2 V); clash is -1, or the first i whose key was already in it.
    Serial: built once per model."""
    from ..kernels import lm_cpu

    vk1, vk2, vids = np.zeros(capacity, np.uint64), np.zeros(capacity, np.uint64), np.zeros(capacity, np.int64)
    clash = int(lm_cpu.lm_build_vocab(h1, h2, ids, vk1, vk2, vids))
    return (vk1, vk2, vids), clash


def ngram_table_host(keys, prob, bo, capacity: int) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], int]:
    """Host: ((keys uint64, prob, bo float32 (capacity,)), clash): the open-addressing table of n-gram keys[i]
    (uint64 (M,)) with their log10 probability and backoff (float32 (M,)); capacity a power of two >= 2 M; clash
    is -1, or the first i whose key was already in it (a duplicate n-gram or a 64-bit collision). Serial."""
    from ..kernels import lm_cpu

    tk, tp, tb = np.zeros(capacity, np.uint64), np.zeros(capacity, np.float32), np.zeros(capacity, np.float32)
    clash = int(lm_cpu.lm_build_table(keys, prob, bo, tk, tp, tb))
    return (tk, tp, tb), clash


def score_docs(device: str, data, line_off, doc_lines, tables: tuple, order: int, bos: int, eos: int, unk: int,
               chunk: int | None = None) -> tuple[Any, Any, Any, Any]:
    """Score every sentence (a line with words, ``<s> w1 ... wk </s>``) of documents whose lines are
    doc_lines[d]:doc_lines[d+1] (int64 (n+1,)) of data[line_off[i]:line_off[i+1]]: (log10 probability float64,
    tokens, sentences, OOV words int64 (n,)), the float32 per-sentence sums added in float64 per document. CPU:
    one document per thread (``lm_cpu.lm_score_docs``). GPU: ``_score_chunks``, work per thread bounded by bytes
    (``chunk`` bytes of a line, default kernels/lm_cuda.LM_CHUNK). The same bits either way."""
    if device == "cuda":
        return _score_chunks(data, line_off, doc_lines, tables, order, bos, eos, unk, chunk)
    xp = array_module(device)
    n = int(doc_lines.shape[0]) - 1
    outs = (xp.zeros(n, xp.float64), xp.zeros(n, xp.int64), xp.zeros(n, xp.int64), xp.zeros(n, xp.int64))
    run_kernel(device, _target(device).lm_score_docs, n, readonly_bytes(device, data), line_off, doc_lines, *tables,
               order, bos, eos, unk, *outs)
    return outs


def _score_chunks(data, line_off, doc_lines, tables: tuple, order: int, bos: int, eos: int, unk: int,
                  chunk: int | None = None) -> tuple:
    """The GPU's ``score_docs`` (kernels/lm_cuda.py's module doc): word ids by chunks of ``chunk`` bytes of a line
    (tests cut at every byte), a thread per token for its probability, a block per document for the ordered float
    sums; the integer counts are prefix sums."""
    kl = _target("cuda")
    xp = array_module("cuda")
    vk1, vk2, vids, keys, prob, bo = tables
    n = doc_lines.shape[0] - 1
    lines = line_off.shape[0] - 1
    cline, first, count, bounds = split_chunks(xp, line_off[1:] - line_off[:-1], chunk or kl.LM_CHUNK)
    chunks = int(cline.shape[0])
    wpos = xp.zeros(chunks, xp.int64)
    if chunks:
        unused = xp.zeros(1, xp.int64)  # ids / oov of the counting pass (the simulator copies each argument back)
        run_kernel("cuda", kl.lm_word_chunks, chunks, data, line_off, cline, first, count, vk1, vk2, vids, unk, False,
                   wpos, unused, unused.copy())
    cw = xp.zeros(chunks + 1, xp.int64)
    xp.cumsum(wpos, out=cw[1:])
    nwords = int(cw[-1])
    ids, oov = xp.zeros(nwords, xp.int64), xp.zeros(nwords, xp.int64)
    if nwords:
        run_kernel("cuda", kl.lm_word_chunks, chunks, data, line_off, cline, first, count, vk1, vk2, vids, unk, True,
                   cw[:-1].copy(), ids, oov)
    words = cw[bounds[1:]] - cw[bounds[:-1]]  # per line
    wbase = cw[bounds]                         # line l's words: ids[wbase[l]:wbase[l+1]]
    ntok = xp.where(words > 0, words + 1, 0)   # a sentence per line with words: its words and </s>
    tbase = xp.zeros(lines + 1, xp.int64)
    xp.cumsum(ntok, out=tbase[1:])
    tokens = int(tbase[-1])
    out_lp = xp.zeros(n, xp.float64)
    if tokens:
        lp = xp.empty(tokens, xp.float32)
        run_kernel("cuda", kl.lm_token_scores, tokens, ids, wbase, tbase, repeat_index(xp, ntok), keys, prob, bo,
                   order, bos, eos, lp)
        run_kernel("cuda", kl.lm_doc_sums, n, tbase, doc_lines, lp, out_lp)
    co = xp.zeros(nwords + 1, xp.int64)
    xp.cumsum(oov, out=co[1:])
    cs = xp.zeros(lines + 1, xp.int64)
    xp.cumsum((words > 0).astype(xp.int64), out=cs[1:])
    out_tok = tbase[doc_lines[1:]] - tbase[doc_lines[:-1]]
    out_sent = cs[doc_lines[1:]] - cs[doc_lines[:-1]]
    out_oov = co[wbase[doc_lines[1:]]] - co[wbase[doc_lines[:-1]]]
    return out_lp, out_tok, out_sent, out_oov
