"""Front end of the fastText kernel family (``kernels/fasttext_cpu.py`` / ``kernels/fasttext_cuda.py``): a document's
hidden vector (the mean of its feature rows), the top-k labels and one label's probability, and the host-only
builders of the model's lookup tables. One signature per function on both targets (``device`` first; arrays of the
device's array module in and out); the GPU's cooperative hidden vectors (chunks, pieces, the prefix sums between
them) and their chunk constant live here, not in ``filters/fasttext.py``.

``model`` below is the dict of a model's arrays where ``device``'s kernels read them (``FastTextModel._arrays``:
the parameter array P, the vocabulary and its table, the input and output matrices, the sigmoid table, the
Huffman tree); P (host) is the same parameter array on the host, read by the GPU's orchestration.

Notation: n documents, dim the hidden size, k labels per document.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ConfigError
from ..kernels import fasttext as K
from ..runtime.device import array_module, readonly_bytes, repeat_index, run_kernel, split_chunks

# the model arrays each kernel reads, in its argument order (after its leading inputs)
HIDDEN_ARRAYS = ("P", "prefix", "vbytes", "voff", "vhash", "vtype", "vtable", "sub_off", "sub_rows", "pkeys", "pvals",
                 "win", "wcodes", "wcent", "wnc", "wncent")
OUTPUT_ARRAYS = ("P", "ow", "ocodes", "ocent", "onc", "oncent", "sig")


def _target(device: str):
    """The kernel module of ``device``: fasttext_cuda on a GPU, else fasttext_cpu (imported on first use)."""
    if device == "cuda":
        from ..kernels import fasttext_cuda
        return fasttext_cuda
    from ..kernels import fasttext_cpu
    return fasttext_cpu


def hidden(device: str, data, offsets, model: dict, P: np.ndarray, dim: int,
           chunk: int | None = None) -> tuple[Any, Any]:
    """(hidden f32 (n, dim), nfeat int64 (n,)): the hidden vectors and feature counts of documents
    data[offsets[d]:offsets[d + 1]] (uint8, int64 (n + 1,); offsets may start past 0), each read as one fastText
    line. CPU: ``fasttext_cpu.ft_hidden``, one document per thread. GPU: ``_hidden_chunks``, work per thread
    bounded by bytes (``chunk`` positions, default kernels/fasttext_cuda.FT_CHUNK; the bits do not depend on it)."""
    if device == "cuda":
        return _hidden_chunks(data, offsets, model, P, dim, chunk)
    xp = array_module(device)
    n = int(offsets.shape[0]) - 1
    out = xp.zeros((n, dim), np.float32)
    nfeat = xp.zeros(n, np.int64)
    data = readonly_bytes(device, data)
    run_kernel(device, _target(device).ft_hidden, n, data, offsets, *(model[a] for a in HIDDEN_ARRAYS), out, nfeat)
    return out, nfeat


def predict(device: str, hidden, nfeat, model: dict, k: int, threshold: np.float32,
            hs_depth: int | None) -> tuple[Any, Any, Any]:
    """fastText's top-k of each hidden vector (f32 (b, dim), nfeat int64 (b,)): (labels int32 (b, k), probs f32
    (b, k), count int32 (b,): the first count[d] entries of row d are set). hs_depth: the Huffman tree's depth
    for hierarchical softmax (its DFS stacks, 8 (depth + 2) bytes per document, are made here), None for the
    other losses. A thread (iteration) per document."""
    xp = array_module(device)
    b = int(hidden.shape[0])
    stack = (b, hs_depth + 2) if hs_depth is not None else (1, 1)
    snode = xp.zeros(stack, np.int32)
    sscore = xp.zeros(stack, np.float32)
    out_prob = xp.zeros((b, k + 1), np.float32)
    out_idx = xp.full((b, k + 1), -1, np.int32)
    out_count = xp.zeros(b, np.int32)
    run_kernel(device, _target(device).ft_predict, b, hidden, nfeat, *(model[a] for a in OUTPUT_ARRAYS),
               model["tleft"], model["tright"], np.int64(k), threshold, snode, sscore, out_prob, out_idx, out_count)
    return out_idx[:, :k], out_prob[:, :k], out_count


def label_prob(device: str, hidden, nfeat, model: dict, label: int, pnode, pright):
    """float64 (b,): the probability of label index ``label`` for each hidden vector (f32 (b, dim), nfeat int64
    (b,)); NaN for a document without features. pnode int32, pright uint8: the label's Huffman path, root first
    (hierarchical softmax; one-element stand-ins for the other losses). A thread (iteration) per document."""
    xp = array_module(device)
    b = int(hidden.shape[0])
    out = xp.zeros(b, np.float64)
    run_kernel(device, _target(device).ft_label_prob, b, hidden, nfeat, *(model[a] for a in OUTPUT_ARRAYS),
               np.int64(label), pnode, pright, out)
    return out


# ---------------------------------------------------------------------------------------------------- the GPU

def _hidden_chunks(data, offsets, model: dict, P: np.ndarray, dim: int, chunk: int | None = None):
    """The GPU's ``hidden`` (kernels/fasttext_cuda.py's module doc): four kernels, CuPy in between for the prefix
    sums and the one rule that spans chunks (a document's first ``</s>`` ends its line: the tokens after it are
    dropped): tokens by byte chunks -> the kept word tokens -> their feature rows by pieces -> word n-gram rows
    per position -> a block per document sums the rows per dimension in fastText's order. Equal, bit for bit, to
    ``fasttext_cpu.ft_hidden`` (tests cut at every few bytes)."""
    kf = _target("cuda")
    xp = array_module("cuda")
    chunk = int(chunk or kf.FT_CHUNK)
    if chunk < 1:
        raise ConfigError(f"chunk must be >= 1 position, got {chunk}")
    n = int(offsets.shape[0]) - 1
    out = xp.zeros((n, dim), xp.float32)
    nfeat = xp.zeros(n, xp.int64)
    if n == 0:
        return out, nfeat
    # 1. tokens, by chunks of every document's bytes plus one position for the appended newline's </s>
    cdoc, cfirst, ccount, cbounds = split_chunks(xp, offsets[1:] - offsets[:-1] + 1, chunk)
    chunks = int(cdoc.shape[0])
    tpos = xp.zeros(chunks, xp.int64)
    tok_args = (data, offsets, cdoc, cfirst, ccount, *(model[a] for a in HIDDEN_ARRAYS[:7]))
    u8, i8, b1 = xp.zeros(1, xp.uint64), xp.zeros(1, xp.int64), xp.zeros(1, xp.uint8)
    # (the counting pass's outputs: distinct arrays, the simulator copies each argument back)
    run_kernel("cuda", kf.ft_token_chunks, chunks, *tok_args, False, tpos, i8, i8.copy(), i8.copy(), b1, u8)
    tb = xp.zeros(chunks + 1, xp.int64)
    xp.cumsum(tpos, out=tb[1:])
    ntok = int(tb[-1])  # >= n: every document has its appended </s>
    tstart, tend, twid = (xp.zeros(ntok, xp.int64) for _ in range(3))
    tkind, thash = xp.zeros(ntok, xp.uint8), xp.zeros(ntok, xp.uint64)
    run_kernel("cuda", kf.ft_token_chunks, chunks, *tok_args, True, tb[:-1].copy(), tstart, tend, twid, tkind, thash)
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
    row_args = (data, _nonempty(xp, ws), _nonempty(xp, we), _nonempty(xp, wid), ptok, pfirst, pcount,
                *(model[a] for a in ("P", "pkeys", "pvals", "win", "wcodes", "wcent", "wnc", "wncent", "sub_off",
                                     "sub_rows")))
    rows1, rb = _listed(xp, kf.ft_token_rows, pieces, row_args)
    off1 = rb[pbounds[wb]]
    # 4. word n-gram rows, after all token rows
    off2 = xp.zeros(n + 1, xp.int64)
    rows2 = xp.zeros(1, xp.int32)
    if int(P[K.P_WORDNGRAMS]) > 1 and words:
        ngram_args = (thash[widx], wb[wdoc + 1], model["P"], model["pkeys"], model["pvals"])
        rows2, nb = _listed(xp, kf.ft_ngram_rows, words, ngram_args)
        off2 = nb[wb]
    # 5. the sums, per dimension in feature order
    run_kernel("cuda", kf.ft_doc_sum, n, off1, rows1, off2, rows2,
               *(model[a] for a in ("P", "win", "wcodes", "wcent", "wnc", "wncent")), out, nfeat)
    return out, nfeat


def _nonempty(xp, a):
    """``a``, or a one-element stand-in when it is empty (a zero-length array is not a valid kernel argument
    on every backend)."""
    return a if a.shape[0] else xp.zeros(1, a.dtype)


def _listed(xp, k, items: int, args: tuple):
    """Run a count / write kernel pair ``k`` (ft_token_rows, ft_ngram_rows) over ``items``: (rows int32, bounds
    int64 (items + 1,): item i's rows are rows[bounds[i]:bounds[i + 1]])."""
    bounds = xp.zeros(items + 1, xp.int64)
    rows = xp.zeros(1, xp.int32)
    if items == 0:
        return rows, bounds
    pos = xp.zeros(items, xp.int64)
    run_kernel("cuda", k, items, *args, False, pos, rows)
    xp.cumsum(pos, out=bounds[1:])
    total = int(bounds[-1])
    if total:
        rows = xp.zeros(total, xp.int32)
        run_kernel("cuda", k, items, *args, True, bounds[:-1].copy(), rows)
    return rows, bounds


# ---------------------------------------------------------------------------------------------------- loading

def vocab_hashes_host(vbytes, voff):
    """Host: uint32 (N,): fastText's hash of each vocabulary entry vbytes[voff[e]:voff[e + 1]]."""
    from ..kernels import fasttext_cpu

    out = np.empty(int(voff.shape[0]) - 1, np.uint32)
    run_kernel("cpu", fasttext_cpu.ft_hash_spans, out.shape[0], vbytes, voff, out)
    return out


def vocab_table_host(vhash, size: int):
    """Host: int32 (size,) (a power of two > N): entry ids 0..N-1 by linear probing from vhash & (size - 1), -1
    elsewhere (the table the kernels' word lookup reads)."""
    from ..kernels import fasttext_cpu

    table = np.full(size, -1, np.int32)
    run_kernel("cpu", fasttext_cpu.ft_build_vocab_table, int(vhash.shape[0]), vhash, table)
    return table


def vocab_subwords_host(vbytes, voff, vtype, P, pkeys, pvals) -> tuple[np.ndarray, np.ndarray]:
    """Host: the subword rows of every vocabulary word (fastText's initNgrams, without the word's own row):
    (sub_off int64 (N + 1,), sub_rows int32 (max(1, R),)); entry e's rows are sub_rows[sub_off[e]:sub_off[e + 1]].
    A count pass, then a write pass."""
    from ..kernels import fasttext_cpu

    size = int(voff.shape[0]) - 1
    vbytes = readonly_bytes("cpu", vbytes)  # as ft_hidden's text bytes: one compile of ft_subwords
    sub_off = np.zeros(size + 1, np.int64)
    sub_rows = np.zeros(1, np.int32)
    run_kernel("cpu", fasttext_cpu.ft_vocab_subwords, size, vbytes, voff, vtype, P, pkeys, pvals, sub_off, sub_rows,
               False)
    np.cumsum(sub_off, out=sub_off)
    sub_rows = np.zeros(max(1, int(sub_off[-1])), np.int32)
    run_kernel("cpu", fasttext_cpu.ft_vocab_subwords, size, vbytes, voff, vtype, P, pkeys, pvals, sub_off, sub_rows,
               True)
    return sub_off, sub_rows
