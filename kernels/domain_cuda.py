"""GPU kernels of the filter stage's domain rules (``domain.py``'s device functions under ``numba.cuda.jit``);
same results as ``domain_cpu.py``.

Not one thread per document (a multi-MB document would hold its warp): ``domain_chunks`` runs the unchanged
``domain.domain_stats`` on pieces of a document that start and end at line boundaries (a cut right after a
newline: gpu_dedup/filters/domain.py's ``line_chunks``, nominally DOMAIN_CHUNK bytes). Every count of
domain_stats is additive over such pieces: codepoints, words (a newline is a space) and lines never straddle
a cut, and its per-line rules (the math-line test, whatever it becomes) see whole lines, so the per-document
counts are the sums of the pieces' rows (integer sums: exact in any order). A thread's work is bounded by
max(DOMAIN_CHUNK, the document's longest line) bytes.
"""
from numba import cuda

from . import domain
from ._build import build
from ._launch import i4_2, i8, i8_2, kernel, u1

DOMAIN_CHUNK = 1024  # nominal bytes per thread of domain_chunks (the cut moves forward to a line's start)

_G = build(cuda.jit(device=True), domain)
g_domain_stats = _G["domain_stats"]


@kernel(sigs=[(u1, i8, i8, i4_2, u1, u1, i8, i8_2)])
def domain_chunks(data, starts, ends, ranges, symbols, kw_data, kw_off, stats):
    """One thread per line-aligned piece c = data[starts[c]:ends[c]] (int64 (C,) each; uint8 data):
    stats[c, :N_STATS] (int64 (C, N_STATS)) = domain_stats of the piece (its document's row is the sum of
    its pieces' rows). ranges int32 (R, 3), symbols uint8 (256,), kw_data uint8, kw_off int64: domain.py's
    tables. No shared or local memory."""
    c = cuda.grid(1)
    if c < starts.shape[0]:
        g_domain_stats(data, starts[c], ends[c], ranges, symbols, kw_data, kw_off, stats, c)
