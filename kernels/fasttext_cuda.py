"""GPU kernels of the fastText family (``fasttext.py``'s device functions compiled with ``numba.cuda.jit``).
Same names, arguments and bit-identical results as ``fasttext_cpu.py`` for ``ft_predict`` / ``ft_label_prob``;
launched by the family's front end ``gpu_dedup/ops/fasttext.py``.

The hidden vectors are cooperative, with work per thread bounded by bytes (``ops/fasttext.py``'s ``hidden``
composes them on the GPU; together they equal ``fasttext_cpu.ft_hidden`` bit for bit):
1. ``ft_token_chunks``: a thread per chunk of <= FT_CHUNK positions of a document (its bytes, then one
   position for the ``</s>`` of the appended newline): counts, then writes, the word and ``</s>`` tokens
   that start in it (bytes, vocabulary id, kind, sign-extended hash; a token's bytes may run past the chunk:
   read once, by the chunk where it starts). Tokens after a document's first ``</s>`` (a literal one ends
   the line) are dropped by the orchestration.
2. ``ft_token_rows``: a thread per piece of a word token: an in-vocabulary word's one piece writes its row
   and its subword rows (precomputed at load, bounded by the model's words); an unknown word's character
   n-gram rows are listed by pieces of <= FT_CHUNK start bytes of "<" + token + ">", so a long token is
   shared by many threads. Rows land in token order, pieces in start order: fastText's feature order.
3. ``ft_ngram_rows``: a thread per word position i: the word n-gram rows of tokens i..i+1 .. i+n-1
   (at most wordNgrams - 1), after all token rows, as fastText adds them.
4. ``ft_doc_sum``: a block per document whose threads own the dimensions: thread j adds element j of the
   document's rows one after another in feature order (fastText's sum is sequential per dimension, so the
   f32 bits are the CPU's; the serial part is one add per row), then scales by f32(1 / rows).
The model tables are small and read-only (lid.176.ftz: < 1 MB), so they stay in the L2 cache. Memory per
batch: 33 bytes per token, 4 bytes per feature row (about 4 (maxn - minn + 2) per text byte) and per word
n-gram row, 4 dim + 8 bytes per document.

Products go through ``__fmul_rn`` on a real GPU (``ft_mul``): NVVM contracts a*b + c into one FMA by default
(numba passes no ``-fma=0`` unless fastmath is on), which would round differently from the CPU.
"""
import numpy as np
from numba import config, cuda, float32

from . import fasttext
from ._build import build
from ._launch import B, F4, I8, f4, f4_2, f8, i1, i4, i4_2, i8, kernel, u1, u1_2, u4, u4_2, u8
from .fasttext import (BIT31, F0, F32, F64, FNV_OFFSET, KIND_EOS, KIND_WORD, NGRAM_MUL, P_BUCKET, P_DIM,
                       P_EOS_ID, P_TABLE_MASK, P_WORDNGRAMS, SIGN_WORD, U64)

FT_CHUNK = 512       # positions of a document per ft_token_chunks thread, start bytes per ft_token_rows piece
FT_DIM_THREADS = 64  # threads per ft_doc_sum block (each owns dimensions j, j + 64, ...)

_G = build(cuda.jit(device=True), fasttext)
if not config.ENABLE_CUDASIM:  # the simulator has no libdevice; it computes in NumPy, unfused anyway
    from numba.cuda import libdevice

    # the other device functions resolve ``ft_mul`` in this namespace at their first compilation
    _G["ft_mul"] = cuda.jit(device=True)(lambda a, b: libdevice.fmul_rn(a, b))

g_is_sep = _G["ft_is_sep"]
g_fnv_step = _G["ft_fnv_step"]
g_vocab_find = _G["ft_vocab_find"]
g_is_word = _G["ft_is_word"]
g_is_eos = _G["ft_is_eos"]
g_eos_hash = _G["ft_eos_hash"]
g_subwords = _G["ft_subwords"]
g_push_hash = _G["ft_push_hash"]
g_row_value = _G["ft_row_value"]
g_mul = _G["ft_mul"]
g_doc_predict = _G["ft_doc_predict"]
g_doc_label_prob = _G["ft_doc_label_prob"]
P_LOSS = fasttext.P_LOSS
LOSS_HS = fasttext.LOSS_HS


@kernel(stride=True, sigs=[(u1, i8, i8, i8, i8, i8, u1, u1, i8, u4, i1, i4, B, i8, i8, i8, i8, u1, u8)])
def ft_token_chunks(data, offsets, cdoc, cfirst, ccount, P, prefix, vbytes, voff, vhash, vtype, vtable, write,
                    tpos, tstart, tend, twid, tkind, thash):
    """One thread per chunk c (grid-stride) of document d = cdoc[c]: positions [cfirst[c], + ccount[c]) of
    its len + 1 positions (int64 (C,) each; position len = the appended newline's ``</s>``). A token (a run
    of non-separator bytes, fasttext.ft_is_sep) belongs to the chunk holding its first byte; the chunk emits
    its word tokens and its ``</s>`` tokens (label tokens are no feature). write=False: tpos[c] = how many;
    write=True: token k of the chunk -> index tpos[c] + k (tpos = the tokens of all earlier chunks) of
    tstart / tend (int64: its bytes; both = the document's end for the appended ``</s>``), twid (int64:
    vocabulary id or -1), tkind (uint8: KIND_WORD | KIND_EOS bits), thash (uint64: fastText's hash,
    sign-extended to 64 bits as word n-grams use it). data uint8 (T,), offsets int64 (n + 1,); the
    vocabulary arrays as in fasttext.ft_vocab_find. Local memory: none."""
    c = cuda.grid(1)
    mask = U64(P[P_TABLE_MASK])
    while c < cdoc.shape[0]:
        d = cdoc[c]
        s = offsets[d]
        e = offsets[d + 1]
        a = s + cfirst[c]
        b = a + ccount[c]
        pos = tpos[c]
        k = 0
        for p in range(a, b):
            if p == e:  # the newline fastText's predict appends: one </s>, a word unless the model labels it
                wid = P[P_EOS_ID]
                kind = KIND_EOS
                if wid < 0 or vtype[wid] == 0:
                    kind = KIND_EOS | KIND_WORD
                h = g_eos_hash()
                te = e
            elif not g_is_sep(data[p]) and (p == s or g_is_sep(data[p - 1])):
                te = p
                h = FNV_OFFSET
                while te < e and not g_is_sep(data[te]):
                    h = g_fnv_step(h, data[te])
                    te += 1
                wid = g_vocab_find(data, p, te, h, vbytes, voff, vhash, vtable, mask)
                kind = 0
                if g_is_word(data, p, te, wid, vtype, prefix):
                    kind = KIND_WORD
                if g_is_eos(data, p, te):
                    kind = kind | KIND_EOS
                if kind == 0:
                    continue
            else:
                continue
            if write:
                tstart[pos + k] = p
                tend[pos + k] = te
                twid[pos + k] = wid
                tkind[pos + k] = kind
                thash[pos + k] = h | SIGN_WORD if h & BIT31 else h
            k += 1
        if not write:
            tpos[c] = k
        c += cuda.gridsize(1)


@kernel(stride=True, sigs=[(u1, i8, i8, i8, i8, i8, i8, i8, u4_2, i4, f4_2, u1_2, f4, u1, f4, i8, i4, B, i8, i4)])
def ft_token_rows(data, tstart, tend, twid, ptok, pfirst, pcount, P, pkeys, pvals, win, wcodes, wcent,
                  wnc, wncent, sub_off, sub_rows, write, rpos, rows):
    """One thread per piece q (grid-stride) of word token t = ptok[q] (int64 (Q,); the token arrays of
    ft_token_chunks, int64 / uint8 (W,)): an in-vocabulary word's one piece lists its row, then its subword
    rows sub_rows[sub_off[w]:sub_off[w + 1]]; an unknown word's piece lists the character n-gram rows
    starting at bytes [pfirst[q], + pcount[q]) of "<" + token + ">" (none for ``</s>`` or maxn <= 0: no
    piece). write=False: rpos[q] = how many; write=True: rows[rpos[q] + k] = row k (int32; rpos = the rows
    of all earlier pieces). The model matrices are passed for fasttext.ft_subwords' signature only (this
    kernel adds nothing). Local memory: 4 bytes."""
    q = cuda.grid(1)
    unused = cuda.local.array(1, float32)
    while q < ptok.shape[0]:
        t = ptok[q]
        w = twid[t]
        pos = rpos[q]
        if w >= 0:
            lo = sub_off[w]
            hi = sub_off[w + 1]
            if write:
                rows[pos] = w
                for i in range(lo, hi):
                    rows[pos + 1 + i - lo] = sub_rows[i]
            else:
                rpos[q] = 1 + hi - lo
        else:
            i0 = pfirst[q]
            m = g_subwords(data, tstart[t], tend[t], i0, i0 + pcount[q], P, pkeys, pvals, win, wcodes, wcent, wnc,
                           wncent, unused, 2 if write else 1, rows, pos)
            if not write:
                rpos[q] = m
        q += cuda.gridsize(1)


@kernel(stride=True, sigs=[(u8, i8, i8, u4_2, i4, B, i8, i4)])
def ft_ngram_rows(whash, wend, P, pkeys, pvals, write, npos, rows):
    """One thread per word position i (grid-stride) of the documents' kept word tokens (whash uint64 (W,):
    sign-extended hashes in token order; wend int64 (W,): the end of i's document's words): the rows of the
    word n-grams i..j for j = i+1 .. min(i + wordNgrams - 1, wend[i] - 1) (fastText's addWordNgrams,
    through pushHash: a pruned model drops some). write=False: npos[i] = how many; write=True:
    rows[npos[i] + k] = row k (int32; npos = the rows of all earlier positions). Local memory: none."""
    i = cuda.grid(1)
    bucket = U64(P[P_BUCKET])
    wn = P[P_WORDNGRAMS]
    while i < whash.shape[0]:
        jmax = i + wn - 1
        if jmax > wend[i] - 1:
            jmax = wend[i] - 1
        g = whash[i]
        pos = npos[i]
        k = 0
        for j in range(i + 1, jmax + 1):
            g = g * NGRAM_MUL + whash[j]
            row = g_push_hash(P, pkeys, pvals, np.int64(g % bucket))
            if row >= 0:
                if write:
                    rows[pos + k] = row
                k += 1
        if not write:
            npos[i] = k
        i += cuda.gridsize(1)


@kernel(per_block=True, stride=True, tpb=FT_DIM_THREADS,
        sigs=[(i8, i4, i8, i4, i8, f4_2, u1_2, f4, u1, f4, f4_2, i8)])
def ft_doc_sum(off1, rows1, off2, rows2, P, win, wcodes, wcent, wnc, wncent, hidden, nfeat):
    """One block per document d (grid-stride), its threads owning the dimensions j (strided by the block):
    hidden[d, j] (f32 (n, dim)) = the f32 sum, one row after another, of element j of the rows
    rows1[off1[d]:off1[d + 1]] then rows2[off2[d]:off2[d + 1]] (int32; off int64 (n + 1,): token rows,
    then word n-gram rows: fastText's order), times f32(1 / rows); nfeat[d] (int64 (n,)) = rows (0: hidden
    stays 0). fasttext.ft_row_value gives an element (dense or product-quantized). Local / shared: none."""
    tid = cuda.threadIdx.x
    dim = P[P_DIM]
    d = cuda.blockIdx.x
    while d < nfeat.shape[0]:
        a1 = off1[d]
        b1 = off1[d + 1]
        a2 = off2[d]
        b2 = off2[d + 1]
        count = b1 - a1 + b2 - a2
        j = tid
        while j < dim:
            h = F0
            for r in range(a1, b1):
                h = h + g_row_value(P, win, wcodes, wcent, wnc, wncent, rows1[r], j)
            for r in range(a2, b2):
                h = h + g_row_value(P, win, wcodes, wcent, wnc, wncent, rows2[r], j)
            if count > 0:
                h = g_mul(h, F32(1.0 / F64(count)))
            hidden[d, j] = h
            j += cuda.blockDim.x
        if tid == 0:
            nfeat[d] = count
        d += cuda.gridDim.x


@kernel(sigs=[(f4_2, i8, i8, f4_2, u1_2, f4, u1, f4, f4, i4, i4, I8, F4, i4_2, f4_2, f4_2, i4_2, i4)])
def ft_predict(hidden, nfeat, P, ow, ocodes, ocent, onc, oncent, sig, tleft, tright, k, thr,
               snode, sscore, out_prob, out_idx, out_count):
    d = cuda.grid(1)
    if d < hidden.shape[0]:
        if nfeat[d] == 0:
            out_count[d] = 0
        else:
            s = d if P[P_LOSS] == LOSS_HS else 0
            out_count[d] = g_doc_predict(hidden[d], P, ow, ocodes, ocent, onc, oncent, sig, tleft, tright, k, thr,
                                         snode[s], sscore[s], out_prob[d], out_idx[d])


@kernel(sigs=[(f4_2, i8, i8, f4_2, u1_2, f4, u1, f4, f4, I8, i4, u1, f8)])
def ft_label_prob(hidden, nfeat, P, ow, ocodes, ocent, onc, oncent, sig, label, pnode, pright, out):
    d = cuda.grid(1)
    if d < hidden.shape[0]:
        if nfeat[d] == 0:
            out[d] = np.nan
        else:
            out[d] = g_doc_label_prob(hidden[d], P, ow, ocodes, ocent, onc, oncent, sig, label, pnode, pright)
