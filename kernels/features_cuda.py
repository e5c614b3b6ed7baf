"""GPU kernels of the "features" family (``features.py``'s device functions compiled with ``numba.cuda.jit``),
one thread per document. Same results as ``features_cpu.py`` bit for bit (the same source; each document's
features are visited and summed in the same order); launched by ``gpu_dedup.device.launch``.

The Gopher statistics (``features_cpu.rule_stats``) have no GPU kernel: they sort each document's lines and
n-grams, which is host work (gpu_dedup/filters/rules.py runs them on the CPU for either device).

Notation: n documents, T text bytes, F features of the batch, B buckets.
"""
import numpy as np
from numba import cuda

from . import features
from ._build import build
from ._launch import I8, U8, f8, i4, i8, kernel, u1
from .features import DSIR_MAX_NGRAM

_G = build(cuda.jit(device=True), features)
g_scan_features = _G["scan_features"]


@kernel(sigs=[(u1, i8, I8, U8, U8, i8, i4)])
def feature_ids(norm, offsets, n, seed, buckets, base, ids):
    """See features_cpu.feature_ids (n <= DSIR_MAX_NGRAM: the ring of word starts is a local array)."""
    d = cuda.grid(1)
    if d < offsets.shape[0] - 1:
        ring = cuda.local.array(DSIR_MAX_NGRAM, np.int64)
        g_scan_features(norm, offsets[d], offsets[d + 1], n, seed, buckets, ring, ids, base[d], ids, True)


@kernel(sigs=[(u1, i8, I8, U8, U8, f8, f8)])
def feature_log_weights(norm, offsets, n, seed, buckets, logdiff, out):
    """See features_cpu.feature_log_weights."""
    d = cuda.grid(1)
    if d < offsets.shape[0] - 1:
        ring = cuda.local.array(DSIR_MAX_NGRAM, np.int64)
        cnt, total = g_scan_features(norm, offsets[d], offsets[d + 1], n, seed, buckets, ring, out, 0, logdiff,
                                     False)
        out[d] = total
