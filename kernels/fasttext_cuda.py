"""GPU kernels of the fastText family (``fasttext.py``'s device functions compiled with ``numba.cuda.jit``).
Same names, arguments and bit-identical results as ``fasttext_cpu.py``; launched by
``gpu_dedup.device.launch(device, name, n, ..., family="fasttext")``.

One thread per document (``ft_hidden``): a long document holds its warp, the one filtering kernel family not
yet cut by bytes (issue #23 item 3). fastText's result depends on the exact f32 order of every sum (the hidden
vector adds the feature rows one after another, in token order), but that order is per dimension: a block per
document whose threads own the dimensions, adding the rows in token order, gives the same bits. The rows
themselves can be enumerated by byte chunks (token starts; per token its vocabulary row and subword rows, the
first literal ``</s>`` cutting the rest; per word position its word n-gram rows), as the LM and DSIR kernels
do; not built yet. The model tables are small and read-only (lid.176.ftz: < 1 MB), so they stay in the L2 cache.

Products go through ``__fmul_rn`` on a real GPU (``ft_mul``): NVVM contracts a*b + c into one FMA by default
(numba passes no ``-fma=0`` unless fastmath is on), which would round differently from the CPU.
"""
import numpy as np
from numba import config, cuda

from . import fasttext
from ._build import build
from ._launch import F4, I8, f4, f4_2, f8, i1, i4, i4_2, i8, kernel, u1, u1_2, u4, u4_2
from .fasttext import MAX_WORD_NGRAMS

_G = build(cuda.jit(device=True), fasttext)
if not config.ENABLE_CUDASIM:  # the simulator has no libdevice; it computes in NumPy, unfused anyway
    from numba.cuda import libdevice

    # the other device functions resolve ``ft_mul`` in this namespace at their first compilation
    _G["ft_mul"] = cuda.jit(device=True)(lambda a, b: libdevice.fmul_rn(a, b))

g_doc_hidden = _G["ft_doc_hidden"]
g_doc_predict = _G["ft_doc_predict"]
g_doc_label_prob = _G["ft_doc_label_prob"]
P_LOSS = fasttext.P_LOSS
LOSS_HS = fasttext.LOSS_HS


@kernel(sigs=[(u1, i8, i8, u1, u1, i8, u4, i1, i4, i8, i4, u4_2, i4, f4_2, u1_2, f4, u1, f4, f4_2, i8)])
def ft_hidden(data, offsets, P, prefix, vbytes, voff, vhash, vtype, vtable, sub_off, sub_rows, pkeys, pvals,
              win, wcodes, wcent, wnc, wncent, hidden, nfeat):
    d = cuda.grid(1)
    if d < offsets.shape[0] - 1:
        ring = cuda.local.array(MAX_WORD_NGRAMS, np.uint64)
        nfeat[d] = g_doc_hidden(data, offsets[d], offsets[d + 1], P, prefix, vbytes, voff, vhash, vtype, vtable,
                                sub_off, sub_rows, pkeys, pvals, win, wcodes, wcent, wnc, wncent, hidden[d], ring)


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
