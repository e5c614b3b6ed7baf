"""CPU kernels of the fastText family (``fasttext.py``'s and ``fasttext_scan.py``'s device functions compiled
with ``numba.njit``), parallel over documents (prange). Same arguments and bit-identical results as
``fasttext_cuda.py``.

Notation: n documents, T text bytes, dim hidden size, kk = min(k, labels), D = Huffman depth + 2 (hs only).
Model arrays (vocabulary, tables, matrices) are described in gpu_dedup/filters/fasttext_format.py.
"""
import numpy as np
from numba import njit, prange

from . import fasttext, fasttext_scan
from ._build import build
from .fasttext import MAX_WORD_NGRAMS
from .fasttext_scan import CS_MAX

# The per-byte and per-n-gram functions are inlined at Numba's IR level: as calls, each one increments and
# decrements the reference counts of the arrays it is passed (atomic instructions) for every byte or n-gram
# (as kernels/core_cpu.py's per-shingle functions; 46-51 us per 2.3 KB document here vs 53-54 us without, lid.176.ftz,
# 1 thread, issue 38; the rest of that change is fasttext.ft_scan_words: docs/performance.md).
_INLINE = {"ft_mul", "ft_is_sep", "ft_fnv_step", "ft_vbyte", "ft_is_eos", "ft_vocab_find", "ft_popcount32",
           "ft_prune_find", "ft_push_hash", "ft_push_row", "ft_fastmod32", "ft_is_word", "ft_pq_centroid",
           "ft_add_row", "ft_row_value", "ft_unit_hash"}
_C = build(lambda fn: njit(cache=False, nogil=True, inline="always" if fn.__name__ in _INLINE else "never")(fn),
           fasttext, fasttext_scan)
c_doc_hidden = _C["ft_doc_hidden"]
c_doc_predict = _C["ft_doc_predict"]
c_doc_label_prob = _C["ft_doc_label_prob"]
c_fnv_step = _C["ft_fnv_step"]
c_subwords = _C["ft_subwords"]
FNV_OFFSET = fasttext.FNV_OFFSET


@njit(parallel=True, cache=True, nogil=True)
def ft_hidden(data, offsets, P, prefix, vbytes, voff, vhash, vtype, vtable, sub_off, sub_rows, pkeys, pvals,
              win, wcodes, wcent, wnc, wncent, hidden, nfeat):
    """hidden[d] (f32 (n, dim)) = fastText's hidden vector of document d = data[offsets[d]:offsets[d+1]]
    (uint8 (T,), int64 (n+1,)), nfeat[d] (int64 (n,)) = its number of feature rows (0: no prediction).
    Memory: the outputs only (4 * dim + 8 bytes per document)."""
    for d in prange(offsets.shape[0] - 1):
        ring = np.empty(MAX_WORD_NGRAMS, np.uint64)
        cs = np.empty(CS_MAX + 3, np.int64)  # a token's character starts (fasttext.ft_scan_words)
        nfeat[d] = c_doc_hidden(data, offsets[d], offsets[d + 1], P, prefix, vbytes, voff, vhash, vtype, vtable,
                                sub_off, sub_rows, pkeys, pvals, win, wcodes, wcent, wnc, wncent, hidden[d], ring, cs)


@njit(parallel=True, cache=True, nogil=True)
def ft_predict(hidden, nfeat, P, ow, ocodes, ocent, onc, oncent, sig, tleft, tright, k, thr,
               snode, sscore, out_prob, out_idx, out_count):
    """Top-k predictions of every document from its hidden vector: out_prob f32 (n, k+1) (reported
    probability, best first), out_idx int32 (n, k+1) (label index), out_count int32 (n,) (how many; 0 when
    nfeat[d] == 0). snode int32 / sscore f32 (n, D): the hierarchical-softmax DFS stacks ((1, 1) otherwise).
    k >= 1 (already clamped to the label count), thr f32."""
    hs = P[fasttext.P_LOSS] == fasttext.LOSS_HS
    for d in prange(hidden.shape[0]):
        if nfeat[d] == 0:
            out_count[d] = 0
            continue
        s = np.int64(d) if hs else np.int64(0)
        out_count[d] = c_doc_predict(hidden[d], P, ow, ocodes, ocent, onc, oncent, sig, tleft, tright, k, thr,
                                     snode[s], sscore[s], out_prob[d], out_idx[d])


@njit(parallel=True, cache=True, nogil=True)
def ft_label_prob(hidden, nfeat, P, ow, ocodes, ocent, onc, oncent, sig, label, pnode, pright, out):
    """out[d] (f64 (n,)) = the probability fastText's predict reports for output ``label`` (NaN when
    nfeat[d] == 0); pnode int32 / pright uint8: the label's Huffman path, root first (hs only)."""
    for d in prange(hidden.shape[0]):
        if nfeat[d] == 0:
            out[d] = np.nan
        else:
            out[d] = c_doc_label_prob(hidden[d], P, ow, ocodes, ocent, onc, oncent, sig, label, pnode, pright)


@njit(cache=True, nogil=True)
def ft_hash_spans(data, offsets, out):
    """out[i] (uint32 (n,)) = fastText's hash of data[offsets[i]:offsets[i+1]] (model loading)."""
    for i in range(offsets.shape[0] - 1):
        h = FNV_OFFSET
        for t in range(offsets[i], offsets[i + 1]):
            h = c_fnv_step(h, data[t])
        out[i] = h


@njit(cache=True, nogil=True)
def ft_build_vocab_table(vhash, table):
    """Insert entry ids 0..N-1 into ``table`` (int32, power-of-two size, all -1) by linear probing from
    hash & (size - 1): the table ``ft_vocab_find`` reads."""
    mask = table.shape[0] - 1
    for e in range(vhash.shape[0]):
        slot = np.int64(vhash[e]) & mask
        while table[slot] >= 0:
            slot = (slot + 1) & mask
        table[slot] = e


@njit(cache=True, nogil=True)
def ft_vocab_subwords(vbytes, voff, vtype, P, pkeys, pvals, sub_off, sub_rows, write):
    """The subword rows of every vocabulary word (fastText's initNgrams, without the word's own row; none
    for "</s>", labels, or when maxn <= 0): write=False: sub_off[e + 1] = their number (int64 (N + 1,));
    write=True: sub_rows[sub_off[e]:sub_off[e + 1]] = the rows (int32; sub_off then holds the running sums)."""
    f1 = np.zeros(1, np.float32)
    u1 = np.zeros(1, np.uint8)
    w2 = np.zeros((1, 1), np.float32)
    c2 = np.zeros((1, 1), np.uint8)
    for e in range(voff.shape[0] - 1):
        ts = voff[e]
        te = voff[e + 1]
        eos = te - ts == 4 and vbytes[ts] == 0x3C and vbytes[ts + 1] == 0x2F and vbytes[ts + 2] == 0x73 \
            and vbytes[ts + 3] == 0x3E
        if vtype[e] != 0 or eos or P[fasttext.P_MAXN] <= 0:
            if not write:
                sub_off[e + 1] = 0
            continue
        if write:
            c_subwords(vbytes, ts, te, 0, te - ts + 2, P, pkeys, pvals, w2, c2, f1, u1, f1, f1, 2, sub_rows,
                       sub_off[e])
        else:
            sub_off[e + 1] = c_subwords(vbytes, ts, te, 0, te - ts + 2, P, pkeys, pvals, w2, c2, f1, u1, f1, f1, 1,
                                        sub_rows, 0)
