"""fastText hidden vectors on the GPU with work per thread bounded by bytes (kernels/fasttext_cuda.py's module
doc): equal, bit for bit, to ``kernels/fasttext_cpu.ft_hidden`` (one document per CPU thread).

``hidden_gpu`` composes four kernels, with CuPy in between for the prefix sums and the one rule that spans
chunks (a document's first ``</s>`` ends its line: the tokens after it are dropped):
tokens by byte chunks -> the kept word tokens -> their feature rows by pieces -> word n-gram rows per
position -> a block per document sums the rows per dimension in fastText's order.
"""
from __future__ import annotations

import numpy as np

from ..device import array_module, launch, repeat_index, split_chunks
from ..errors import ConfigError
from ..kernels import fasttext as K


def hidden_gpu(data, offsets, arr: dict, P: np.ndarray, dim: int, chunk: int | None = None):
    """(hidden f32 (n, dim), nfeat int64 (n,)) of documents data[offsets[d]:offsets[d + 1]] (device arrays;
    offsets may start past 0), as ``fasttext_cpu.ft_hidden`` computes them. arr: the model's device arrays
    (FastTextModel._arrays), P: its host parameter array. chunk: positions per token-chunk thread and start
    bytes per subword piece (default FT_CHUNK; tests cut at every few bytes)."""
    from ..kernels import fasttext_cuda as kf  # the GPU's chunk size (imports the CUDA kernels)

    xp = array_module("cuda")
    chunk = int(chunk or kf.FT_CHUNK)
    if chunk < 1:
        raise ConfigError(f"chunk must be >= 1 position, got {chunk}")
    n = int(offsets.shape[0]) - 1
    hidden = xp.zeros((n, dim), xp.float32)
    nfeat = xp.zeros(n, xp.int64)
    if n == 0:
        return hidden, nfeat
    # 1. tokens, by chunks of every document's bytes plus one position for the appended newline's </s>
    cdoc, cfirst, ccount, cbounds = split_chunks(xp, offsets[1:] - offsets[:-1] + 1, chunk)
    chunks = int(cdoc.shape[0])
    tpos = xp.zeros(chunks, xp.int64)
    tok_args = (data, offsets, cdoc, cfirst, ccount, arr["P"], arr["prefix"], arr["vbytes"], arr["voff"],
                arr["vhash"], arr["vtype"], arr["vtable"])
    u8, i8, b1 = xp.zeros(1, xp.uint64), xp.zeros(1, xp.int64), xp.zeros(1, xp.uint8)
    # (the counting pass's outputs: distinct arrays, the simulator copies each argument back)
    launch("cuda", "ft_token_chunks", chunks, *tok_args, False, tpos, i8, i8.copy(), i8.copy(), b1, u8,
           family="fasttext")
    tb = xp.zeros(chunks + 1, xp.int64)
    xp.cumsum(tpos, out=tb[1:])
    ntok = int(tb[-1])  # >= n: every document has its appended </s>
    tstart, tend, twid = (xp.zeros(ntok, xp.int64) for _ in range(3))
    tkind, thash = xp.zeros(ntok, xp.uint8), xp.zeros(ntok, xp.uint64)
    launch("cuda", "ft_token_chunks", chunks, *tok_args, True, tb[:-1].copy(), tstart, tend, twid, tkind, thash,
           family="fasttext")
    # 2. keep each document's tokens up to its first </s>, then only the words
    doc_tok = tb[cbounds]                       # document d's tokens: doc_tok[d]:doc_tok[d + 1]
    tdoc = repeat_index(xp, doc_tok[1:] - doc_tok[:-1])
    eos = ((tkind & K.KIND_EOS) != 0).astype(xp.int64)
    before = xp.cumsum(eos) - eos               # </s> tokens before each token, over the batch
    keep = (before - before[doc_tok[:-1]][tdoc] == 0) & ((tkind & K.KIND_WORD) != 0)
    widx = xp.flatnonzero(keep).astype(xp.int64)
    words = int(widx.shape[0])
    wdoc = tdoc[widx]
    wb = xp.searchsorted(wdoc, xp.arange(n + 1, dtype=xp.int64), side="left").astype(xp.int64)
    ws, we, wid = tstart[widx], tend[widx], twid[widx]
    # 3. feature rows of the words: an in-vocabulary word one piece, an unknown one pieces of its subword starts
    subs = (int(P[K.P_MAXN]) > 0) & ((tkind[widx] & K.KIND_EOS) == 0)
    plen = xp.where(wid >= 0, 1, xp.where(subs, we - ws + 2, 0)).astype(xp.int64)
    ptok, pfirst, pcount, pbounds = split_chunks(xp, plen, chunk)
    pieces = int(ptok.shape[0])
    row_args = (data, _nonempty(xp, ws), _nonempty(xp, we), _nonempty(xp, wid), ptok, pfirst, pcount, arr["P"],
                arr["pkeys"], arr["pvals"], arr["win"], arr["wcodes"], arr["wcent"], arr["wnc"], arr["wncent"],
                arr["sub_off"], arr["sub_rows"])
    rows1, rb = _listed(xp, "ft_token_rows", pieces, row_args)
    off1 = rb[pbounds[wb]]
    # 4. word n-gram rows, after all token rows
    off2 = xp.zeros(n + 1, xp.int64)
    rows2 = xp.zeros(1, xp.int32)
    if int(P[K.P_WORDNGRAMS]) > 1 and words:
        ngram_args = (thash[widx], wb[wdoc + 1], arr["P"], arr["pkeys"], arr["pvals"])
        rows2, nb = _listed(xp, "ft_ngram_rows", words, ngram_args)
        off2 = nb[wb]
    # 5. the sums, per dimension in feature order
    launch("cuda", "ft_doc_sum", n, off1, rows1, off2, rows2, arr["P"], arr["win"], arr["wcodes"], arr["wcent"],
           arr["wnc"], arr["wncent"], hidden, nfeat, family="fasttext")
    return hidden, nfeat


def _nonempty(xp, a):
    """``a``, or a one-element stand-in when it is empty (a zero-length array is not a valid kernel argument
    on every backend)."""
    return a if a.shape[0] else xp.zeros(1, a.dtype)


def _listed(xp, name: str, items: int, args: tuple):
    """Run a count / write kernel pair (ft_token_rows, ft_ngram_rows) over ``items``: (rows int32, bounds
    int64 (items + 1,): item i's rows are rows[bounds[i]:bounds[i + 1]])."""
    bounds = xp.zeros(items + 1, xp.int64)
    rows = xp.zeros(1, xp.int32)
    if items == 0:
        return rows, bounds
    pos = xp.zeros(items, xp.int64)
    launch("cuda", name, items, *args, False, pos, rows, family="fasttext")
    xp.cumsum(pos, out=bounds[1:])
    total = int(bounds[-1])
    if total:
        rows = xp.zeros(total, xp.int32)
        launch("cuda", name, items, *args, True, bounds[:-1].copy(), rows, family="fasttext")
    return rows, bounds
