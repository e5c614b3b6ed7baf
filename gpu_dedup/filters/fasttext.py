"""fastText supervised models (language identification, quality classifiers) run by our own kernels.

``load_fasttext(path)`` reads a ``.bin`` or quantized ``.ftz`` file (fasttext_format.py) into NumPy arrays;
``FastTextModel.predict`` / ``label_prob`` run ``kernels/fasttext_cpu.py`` (Numba, parallel over documents) or
``kernels/fasttext_cuda.py`` (through ``ops/fasttext.py``; work per GPU thread bounded by bytes) and return what the
``fasttext`` Python package's ``predict`` returns: the same labels in the same order, the same f32
probabilities (see kernels/fasttext.py for the one-ulp ``expf`` caveat), with no ``fasttext`` package needed.

How a document is given to the model (as fastText users do): as ONE line: every newline (\\n, and \\r) counts
as a space, and the line ends with one newline, exactly like ``model.predict(text.replace("\\n", " "))`` (the
package appends "\\n", i.e. one ``</s>`` token). No other normalization (no lowercasing). fastText works on
bytes: pyarrow strings are valid UTF-8; a Python ``bytes`` document is used as it is (invalid UTF-8 bytes are
hashed like any other byte, as fastText does); a ``str`` is encoded as UTF-8 (lone surrogates with
"surrogatepass").

The word lookup is exact: an open-addressing table over the vocabulary's fastText hashes, every candidate
compared byte for byte against the concatenated vocabulary.
"""
from __future__ import annotations

import difflib
import logging
import math
import os
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..constants import LABEL_PREFIX
from ..errors import ConfigError, UsageError
from ..io.discover import file_sha256
from ..kernels import fasttext as K
from ..ops import fasttext as fasttext_ops
from ..runtime import device as dev
from .fasttext_format import KSUB, LOSS_NAMES, FastTextFormatError, Matrix, ModelFile, read_model

__all__ = ["FastTextFormatError", "FastTextModel", "load_fasttext"]

logger = logging.getLogger(__name__)
BATCH_DOCS = 1 << 16          # documents per kernel launch: bounds the scratch arrays
# A quantized input matrix up to this size (as f32) is expanded once at load: fastText adds norm * centroid
# (one f32 product, then the add), so storing that product gives the same sums bit for bit, and the kernels
# then add plain rows (lid.176.ftz: 3.2 MB). Larger ones stay product-quantized (decoded per feature).
DEQUANTIZE_MAX_BYTES = 256 << 20


def load_fasttext(path: str | os.PathLike) -> "FastTextModel":
    """Read a fastText supervised model.

    Args:
        path: a ``.bin`` file, or a ``.ftz`` one (product-quantized input and optionally output matrices, norm
            quantization, a pruned vocabulary).

    Returns:
        The ``FastTextModel``, scored by our own kernels on CPU and GPU.

    Raises:
        FastTextFormatError: the file is not such a model, or it is truncated (a ``DataError``; the message
            names the file).
    """
    return FastTextModel(read_model(path))


def _pow2_at_least(n: int) -> int:
    return 1 << max(1, int(n - 1).bit_length())


def _sigmoid_table() -> np.ndarray:
    """fastText's 513-entry sigmoid table: t[i] = 1 / (1 + expf(-x)) in double, stored f32, with
    x = f32(i * 16) / 512 - 8 in f32. expf is the C library's (what fastText calls) when ctypes finds it."""
    x = (np.arange(513, dtype=np.float32) * np.float32(16)) / np.float32(512) - np.float32(8)
    try:
        import ctypes
        import ctypes.util

        libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
        expf = libm.expf
        expf.restype, expf.argtypes = ctypes.c_float, [ctypes.c_float]
        e = np.array([expf(float(-v)) for v in x], np.float64)
    except (OSError, AttributeError):  # no C math library reachable: exp in double, rounded to f32
        e = np.exp(-x.astype(np.float64)).astype(np.float32).astype(np.float64)
    return (1.0 / (1.0 + e)).astype(np.float32)


def _huffman(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """fastText's hierarchical-softmax tree (HierarchicalSoftmaxLoss::buildTree) over the label counts:
    (left, right, parent int32 (2 osz - 1,), binary uint8: 1 for a right child)."""
    osz = counts.shape[0]
    n = 2 * osz - 1
    left = np.full(n, -1, np.int32)
    right = np.full(n, -1, np.int32)
    parent = np.full(n, -1, np.int32)
    binary = np.zeros(n, np.uint8)
    count = [int(c) for c in counts] + [10**15] * (osz - 1)
    leaf, node = osz - 1, osz
    for i in range(osz, n):
        mini = [0, 0]
        for j in range(2):
            if leaf >= 0 and count[leaf] < count[node]:
                mini[j], leaf = leaf, leaf - 1
            else:
                mini[j], node = node, node + 1
        left[i], right[i] = mini
        count[i] = count[mini[0]] + count[mini[1]]
        parent[mini[0]] = parent[mini[1]] = i
        binary[mini[1]] = 1
    return left, right, parent, binary


def _matrix_arrays(m: Matrix, dim: int) -> tuple[np.ndarray, ...]:
    """(dense f32 2-D, codes uint8 2-D, centroids f32, norm codes uint8, norm centroids f32), with 1-element
    stand-ins for the parts a matrix does not have (the kernels' signatures stay fixed)."""
    f1, u1 = np.zeros(1, np.float32), np.zeros(1, np.uint8)
    if not m.quantized:
        return np.ascontiguousarray(m.dense), np.zeros((1, 1), np.uint8), f1, u1, f1
    return (np.zeros((1, dim), np.float32), np.ascontiguousarray(m.codes), m.centroids,
            m.norm_codes if m.norm_codes is not None else u1,
            m.norm_centroids if m.norm_centroids is not None else f1)


def _dequantize(m: Matrix) -> Matrix:
    """The dense f32 matrix whose rows are exactly what fastText's addcode adds: f32(norm * centroid[j])."""
    rows = np.arange(m.m)
    norm = (m.norm_centroids[m.norm_codes] if m.norm_codes is not None
            else np.ones(m.m, np.float32)).astype(np.float32)
    dense = np.empty((m.m, m.n), np.float32)
    for q in range(m.nsubq):
        d = m.lastdsub if q == m.nsubq - 1 else m.dsub
        code = m.codes[rows, q].astype(np.int64)
        base = q * KSUB * m.dsub + code * d if q == m.nsubq - 1 else (q * KSUB + code) * m.dsub
        for t in range(d):
            dense[:, q * m.dsub + t] = norm * m.centroids[base + t]   # f32 * f32: one rounding, as fastText
    return Matrix(m.m, m.n, dense=dense)


class FastTextModel:
    """A loaded fastText supervised model. Attributes: ``path``, ``labels`` (full strings, e.g. "__label__en",
    in fastText's label order: ``predict``'s indexes point here), ``label_prefix`` ("__label__": what fastText
    uses to tell an unknown token is a label; it is not saved in the file), ``dim``, ``loss`` ("softmax" | "hs"
    | "ns" | "ova"), ``quantized``, ``nwords``, ``bucket``, ``minn``, ``maxn``, ``word_ngrams``.

    Memory: the model's arrays once on the host (lid.176.ftz: about 1 MB; a dense .bin: its matrices) and once
    per device used (cached on the object after the first call); per batch of at most BATCH_DOCS documents the
    kernels need hidden vectors (4 dim bytes per document), the top-k arrays (8 (k + 1) bytes per document) and,
    for hierarchical softmax, the DFS stacks (8 (depth + 2) bytes per document).
    """

    def __init__(self, mf: ModelFile):
        a = mf.args
        self.path = mf.path
        self.labels = [w.decode("utf-8", "replace") for w in mf.words[mf.nwords:]]
        self.label_prefix = LABEL_PREFIX
        self.dim = int(a["dim"])
        self.loss = LOSS_NAMES[a["loss"]]
        self.quantized = mf.input.quantized
        self.nwords = mf.nwords
        self.bucket = int(a["bucket"])
        self.minn = int(a["minn"])
        self.maxn = int(a["maxn"])
        self.word_ngrams = int(a["wordNgrams"])
        self.version = mf.version
        self.size_bytes = mf.size_bytes
        self._sha256: str | None = None
        if self.word_ngrams > K.MAX_WORD_NGRAMS:
            raise FastTextFormatError(f"{self.path}: wordNgrams is {self.word_ngrams}; these kernels support up to "
                                      f"{K.MAX_WORD_NGRAMS} (retrain with a smaller -wordNgrams)")
        self._host = self._build_arrays(mf)
        self._devices: dict[str, dict[str, Any]] = {}
        self._paths: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._hs_depth = 0
        if self.loss == "hs":
            left, right, parent, binary = _huffman(mf.counts[mf.nwords:])
            self._host["tleft"], self._host["tright"] = left, right
            self._parent, self._binary = parent, binary
            self._hs_depth = max((self._path_of(i)[0].shape[0] for i in range(len(self.labels))), default=0)

    # ------------------------------------------------------------------------------------------ loading
    def _build_arrays(self, mf: ModelFile) -> dict[str, np.ndarray]:
        size = len(mf.words)
        lens = np.fromiter((len(w) for w in mf.words), np.int64, size)
        voff = np.zeros(size + 1, np.int64)
        np.cumsum(lens, out=voff[1:])
        vbytes = np.frombuffer(b"".join(mf.words), np.uint8) if voff[-1] else np.zeros(1, np.uint8)
        vhash = fasttext_ops.vocab_hashes_host(vbytes, voff)
        vtable = fasttext_ops.vocab_table_host(vhash, _pow2_at_least(2 * size + 2))
        eos = _find(mf.words, b"</s>")
        a = mf.args
        pkeys, pvals = np.zeros((1, 2), np.uint32), np.full(1, -1, np.int32)
        if mf.prune_keys is None:
            prune_mode = K.PRUNE_NONE
        elif mf.prune_keys.size == 0:
            prune_mode = K.PRUNE_ALL
        else:  # bitmap + rank over the bucket ids (ft_prune_find)
            prune_mode = K.PRUNE_MAP
            order = np.argsort(mf.prune_keys, kind="stable")
            keys = mf.prune_keys[order].astype(np.int64)
            pvals = mf.prune_vals[order].astype(np.int32)
            words = (max(int(a["bucket"]), 1) + 31) // 32
            pkeys = np.zeros((words, 2), np.uint32)
            np.bitwise_or.at(pkeys[:, 0], keys >> 5, (np.uint32(1) << (keys & 31).astype(np.uint32)))
            per_word = np.bincount(keys >> 5, minlength=words)
            pkeys[1:, 1] = np.cumsum(per_word)[:-1]
        P = np.zeros(K.P_SIZE, np.int64)
        P[[K.P_NWORDS, K.P_BUCKET, K.P_MINN, K.P_MAXN, K.P_WORDNGRAMS, K.P_PRUNE, K.P_DIM]] = (
            mf.nwords, a["bucket"], a["minn"], a["maxn"], a["wordNgrams"], prune_mode, a["dim"])
        for m, base in ((mf.input, K.P_IN_QUANT), (mf.output, K.P_OUT_QUANT)):
            P[base:base + 5] = (int(m.quantized), int(m.norm_codes is not None), m.nsubq, m.dsub, m.lastdsub)
        P[K.P_EOS_ID], P[K.P_TABLE_MASK] = eos, vtable.shape[0] - 1
        bucket = int(a["bucket"])  # fastmod's multiplier of h % bucket (kernels/fasttext.py ft_fastmod32)
        P[K.P_BUCKET_MAGIC] = np.uint64((2**64 // bucket + 1) % 2**64).view(np.int64) if bucket > 0 else 0
        P[K.P_LOSS], P[K.P_OSZ] = a["loss"], mf.nlabels
        sub_off, sub_rows = fasttext_ops.vocab_subwords_host(vbytes, voff, mf.types, P, pkeys, pvals)
        inp = mf.input
        if inp.quantized and inp.m * inp.n * 4 <= DEQUANTIZE_MAX_BYTES:
            inp = _dequantize(inp)
            P[K.P_IN_QUANT] = 0
        win, wcodes, wcent, wnc, wncent = _matrix_arrays(inp, self.dim)
        ow, ocodes, ocent, onc, oncent = _matrix_arrays(mf.output, self.dim)
        return dict(P=P, prefix=np.frombuffer(LABEL_PREFIX.encode(), np.uint8).copy(), vbytes=vbytes, voff=voff,
                    vhash=vhash, vtype=mf.types.copy(), vtable=vtable,
                    sub_off=sub_off, sub_rows=sub_rows, pkeys=pkeys, pvals=pvals, win=win, wcodes=wcodes,
                    wcent=wcent, wnc=wnc, wncent=wncent, ow=ow, ocodes=ocodes, ocent=ocent, onc=onc, oncent=oncent,
                    sig=_sigmoid_table(), tleft=np.full(1, -1, np.int32), tright=np.full(1, -1, np.int32))

    def _path_of(self, label: int) -> tuple[np.ndarray, np.ndarray]:
        """Huffman path of a label, root first: (internal node rows int32, 1 where it goes right uint8)."""
        if label not in self._paths:
            osz = len(self.labels)
            nodes, right = [], []
            j = label
            while self._parent[j] != -1:
                nodes.append(self._parent[j] - osz)
                right.append(self._binary[j])
                j = self._parent[j]
            self._paths[label] = (np.array(nodes[::-1], np.int32), np.array(right[::-1], np.uint8))
        return self._paths[label]

    def _arrays(self, device: str) -> dict[str, Any]:
        """The model arrays where ``device``'s kernels read them: moved once per device and array backend."""
        key = f"{device}:{dev.array_backend(device)}"
        if key not in self._devices:
            self._devices[key] = {k: dev.to_device(v, device) for k, v in self._host.items()}
        return self._devices[key]

    # ------------------------------------------------------------------------------------------ info
    def describe(self) -> dict:
        """What run.json records about the model: path, size, sha256 (computed once), labels, shape."""
        if self._sha256 is None:
            self._sha256 = file_sha256(self.path)
        size_now = os.path.getsize(self.path) if os.path.exists(self.path) else None
        return {"path": os.path.abspath(self.path), "size_bytes": self.size_bytes, "sha256": self._sha256,
                "size_ok": size_now == self.size_bytes, "labels": len(self.labels), "dim": self.dim,
                "loss": self.loss, "quantized": self.quantized, "nwords": self.nwords, "bucket": self.bucket,
                "minn": self.minn, "maxn": self.maxn, "word_ngrams": self.word_ngrams, "version": self.version}

    def __repr__(self) -> str:
        return (f"FastTextModel({self.path!r}, labels={len(self.labels)}, dim={self.dim}, loss={self.loss!r}, "
                f"quantized={self.quantized})")

    # ------------------------------------------------------------------------------------------ predict
    def predict(self, texts: Sequence[str | bytes | None] | pa.Array | pa.ChunkedArray, k: int = 1,
                threshold: float = 0.0, device: str = "cpu") -> tuple[np.ndarray, np.ndarray]:
        """fastText's ``predict(text, k, threshold)`` for every document (see the module doc for how a
        document becomes one line: newlines count as spaces, one ``</s>`` at the end).

        texts: list of str/bytes/None or a pyarrow string / large_string array (None / null = empty text).
        k: labels per document, >= 1, or -1 for all. threshold: fastText's (a label is returned only when its
        probability is >= threshold; for hierarchical softmax fastText prunes on log-probabilities, so with
        threshold 0 labels below about 1e-5 are not returned, as in fastText).
        Returns (labels int32 (n, kk), probs float64 (n, kk)) with kk = min(k, len(labels)) (all labels for
        k=-1): indexes into ``self.labels`` ranked as fastText ranks them (ties as its heap leaves them), -1 /
        NaN where fastText returns fewer. A document with no feature at all (possible only when ``</s>`` is not
        in the vocabulary) gets only -1 / NaN: fastText returns nothing for it. Probabilities are fastText's
        reported values exp(log(p + 1e-5)), so they can exceed 1 by 1e-5, as fastText's do."""
        data, offsets = texts_to_arrays(texts)
        return self.predict_arrays(data, offsets, k=k, threshold=threshold, device=device)

    def predict_arrays(self, data, offsets, k: int = 1, threshold: float = 0.0,
                       device: str = "cpu") -> tuple[np.ndarray, np.ndarray]:
        """``predict`` on UTF-8 bytes: data uint8 (T,), offsets int64 (n + 1,) (document d is
        data[offsets[d]:offsets[d+1]]), host or device arrays (device="cuda": moved there if on the host)."""
        kk = self._check_k(k)
        thr = _check_threshold(threshold)
        device = dev.resolve_device(device)
        data, offsets, n = self._inputs(data, offsets, device)
        labels = np.full((n, kk), -1, np.int32)
        probs = np.full((n, kk), np.nan, np.float64)
        arr = self._arrays(device)
        depth = self._hs_depth if self.loss == "hs" else None
        for lo in range(0, n, BATCH_DOCS):
            hi = min(n, lo + BATCH_DOCS)
            hidden, nfeat = self._hidden(data, offsets, lo, hi, device)
            idx, pr, cnt = (dev.to_host(a) for a in fasttext_ops.predict(device, hidden, nfeat, arr, kk, thr, depth))
            valid = np.arange(kk)[None, :] < cnt[:, None]
            labels[lo:hi] = np.where(valid, idx, -1)
            probs[lo:hi] = np.where(valid, pr.astype(np.float64), np.nan)
        return labels, probs

    def label_prob(self, texts: Sequence[str | bytes | None] | pa.Array | pa.ChunkedArray, label: str,
                   device: str = "cpu") -> np.ndarray:
        """float64 (n,): the probability fastText's ``predict(k=-1)`` reports for ``label`` (a full label such
        as "__label__hq", or "hq" for "__label__hq"), computed directly for that label only: softmax output,
        one-vs-all / ns sigmoid, or for hierarchical softmax the product along the label's Huffman path (for a
        label fastText would omit as below ~1e-5 this still gives the value). NaN for a document with no
        feature. An unknown label raises ValueError listing the model's labels."""
        data, offsets = texts_to_arrays(texts)
        return self.label_prob_arrays(data, offsets, label, device=device)

    def label_prob_arrays(self, data, offsets, label: str, device: str = "cpu") -> np.ndarray:
        """``label_prob`` on UTF-8 bytes + offsets (see ``predict_arrays``)."""
        li = self.label_index(label)
        device = dev.resolve_device(device)
        arr = self._arrays(device)
        if self.loss == "hs":
            pnode, pright = self._path_of(li)
        else:
            pnode, pright = np.zeros(1, np.int32), np.zeros(1, np.uint8)  # unused outside hs
        pnode, pright = dev.to_device(pnode, device), dev.to_device(pright, device)
        data, offsets, n = self._inputs(data, offsets, device)
        out = np.full(n, np.nan, np.float64)
        for lo in range(0, n, BATCH_DOCS):
            hi = min(n, lo + BATCH_DOCS)
            hidden, nfeat = self._hidden(data, offsets, lo, hi, device)
            out[lo:hi] = dev.to_host(fasttext_ops.label_prob(device, hidden, nfeat, arr, li, pnode, pright))
        return out

    def hidden(self, texts: Sequence[str | bytes | None] | pa.Array | pa.ChunkedArray, device: str = "cpu"
               ) -> tuple[np.ndarray, np.ndarray]:
        """(float32 (n, dim), int64 (n,)): each document's hidden vector (the mean of the input-matrix rows of
        its words, n-grams and ``</s>``: what ``predict`` multiplies by the output matrix; fastText's
        ``get_sentence_vector`` of a supervised model) and its number of features (0: no feature, a zero vector)."""
        device = dev.resolve_device(device)
        data, offsets, n = self._inputs(*texts_to_arrays(texts), device)
        vecs, feats = [np.zeros((0, self.dim), np.float32)], [np.zeros(0, np.int64)]
        for lo in range(0, n, BATCH_DOCS):
            h, nf = self._hidden(data, offsets, lo, min(n, lo + BATCH_DOCS), device)
            vecs.append(np.asarray(dev.to_host(h), np.float32))
            feats.append(np.asarray(dev.to_host(nf), np.int64))
        return np.concatenate(vecs), np.concatenate(feats)

    def label_index(self, label: str) -> int:
        """Index of ``label`` in ``self.labels`` (full string, or without the "__label__" prefix)."""
        if not isinstance(label, str):
            raise UsageError(f"label must be a str such as {self.labels[0]!r}, got {type(label).__name__}")
        for cand in (label, self.label_prefix + label):
            if cand in self.labels:
                return self.labels.index(cand)
        close = difflib.get_close_matches(label, self.labels, n=3) or \
            difflib.get_close_matches(self.label_prefix + label, self.labels, n=3)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        shown = ", ".join(map(repr, self.labels[:20])) + (f", ... ({len(self.labels)} in all)"
                                                         if len(self.labels) > 20 else "")
        raise ConfigError(f"label {label!r} is not one of the labels of {self.path}: {shown}.{hint}")

    def _hidden(self, data, offsets, lo: int, hi: int, device: str):
        """Hidden vectors (f32 (hi - lo, dim)) and feature counts (int64) of documents lo..hi-1 (data and
        offsets already where ``device``'s kernels read them: ``_inputs``)."""
        return fasttext_ops.hidden(device, data, offsets[lo:hi + 1], self._arrays(device), self._host["P"], self.dim)

    @staticmethod
    def _inputs(data, offsets, device: str):
        """(data, offsets, n) where ``device``'s kernels read them: moved once to the GPU if on the host."""
        if device == "cuda":
            data, offsets = dev.to_device(data, device), dev.to_device(offsets, device)
        else:
            data, offsets = dev.to_host(data), dev.to_host(offsets)
            data = np.ascontiguousarray(data, dtype=np.uint8)
            offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        if data.dtype != np.uint8 or offsets.dtype != np.int64 or offsets.ndim != 1 or offsets.shape[0] < 1:
            raise UsageError(f"data must be uint8 and offsets int64 (n + 1,); got {data.dtype} and "
                             f"{offsets.dtype} {offsets.shape}")
        if data.shape[0] == 0:  # a zero-length array is not a valid kernel argument on every backend
            data = dev.to_device(np.zeros(1, np.uint8), device)
        return data, offsets, int(offsets.shape[0]) - 1

    def _check_k(self, k: int) -> int:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or (k != -1 and k < 1):
            raise ConfigError(f"k must be an int >= 1, or -1 for all labels; got {k!r}")
        return len(self.labels) if k == -1 else min(int(k), len(self.labels))


def _check_threshold(threshold: float) -> np.float32:
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.floating, np.integer)) \
            or not math.isfinite(float(threshold)):
        raise ConfigError(f"threshold must be a finite number (fastText's probability threshold, usually 0.0); "
                          f"got {threshold!r}")
    return np.float32(threshold)


def _find(words: list[bytes], w: bytes) -> int:
    try:
        return words.index(w)
    except ValueError:
        return -1


def texts_to_arrays(texts) -> tuple[np.ndarray, np.ndarray]:
    """(data uint8 (T,), offsets int64 (n + 1,)) of the documents' UTF-8 bytes. A pyarrow array is used
    without copying its text (nulls become empty strings first); a list of str is encoded as UTF-8."""
    from ..io.text import arrow_text_buffers

    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks else pa.array([], pa.string())
    if isinstance(texts, pa.Array):
        if not (pa.types.is_string(texts.type) or pa.types.is_large_string(texts.type)):
            raise UsageError(f"texts must be a pyarrow string or large_string array, got {texts.type}")
        if texts.null_count:
            texts = pc.fill_null(texts, "")
        return arrow_text_buffers(texts)
    if isinstance(texts, (str, bytes)):
        raise UsageError("texts must be a list of documents (or a pyarrow string array), not a single string: "
                         "wrap it as [text]")
    encoded = []
    for i, t in enumerate(texts):
        if t is None:
            encoded.append(b"")
        elif isinstance(t, str):
            encoded.append(t.encode("utf-8", "surrogatepass"))
        elif isinstance(t, (bytes, bytearray, memoryview)):
            encoded.append(bytes(t))
        else:
            raise UsageError(f"texts[{i}] is a {type(t).__name__}; documents must be str, bytes or None")
    offsets = np.zeros(len(encoded) + 1, np.int64)
    np.cumsum(np.fromiter((len(b) for b in encoded), np.int64, len(encoded)), out=offsets[1:])
    data = np.frombuffer(b"".join(encoded), np.uint8) if offsets[-1] else np.zeros(1, np.uint8)
    return data, offsets
