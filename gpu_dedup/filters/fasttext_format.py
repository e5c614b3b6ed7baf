"""Reader (and writer: ``write_model``) of fastText model files (``.bin`` and quantized ``.ftz``), version <= 12,
supervised models only.

Layout (little-endian; fastText src/fasttext.cc saveModel, args.cc, dictionary.cc, densematrix.cc,
quantmatrix.cc, productquantizer.cc):
    int32 magic 793712314, int32 version (<= 12)
    args: int32 dim, ws, epoch, minCount, neg, wordNgrams, loss, model, bucket, minn, maxn, lrUpdateRate;
          f64 t
    dictionary: int32 size, nwords, nlabels; int64 ntokens, pruneidx_size; size x {bytes, NUL, int64 count,
          int8 type}; pruneidx_size x (int32 bucket id, int32 new index)   (pruneidx_size -1: not pruned)
    bool quant_input; input matrix (dense: int64 m, n, f32 m*n | quantized, below)
    bool qout; output matrix (quantized only when quant_input and qout)
    quantized matrix: bool qnorm, int64 m, n, int32 codesize, uint8 codes[codesize], product quantizer
          (int32 dim, nsubq, dsub, lastdsub, f32 centroids[dim * 256]); if qnorm: uint8 norm_codes[m] and a
          second product quantizer (dim 1).
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass

import numpy as np
from ..errors import DataError

MAGIC = 793712314
MAX_VERSION = 12
MODEL_NAMES = {1: "cbow", 2: "skipgram", 3: "supervised"}
LOSS_NAMES = {1: "hs", 2: "ns", 3: "softmax", 4: "ova"}
KSUB = 256


class FastTextFormatError(DataError):
    """The file is not a fastText supervised model this reader supports (or it is truncated)."""


@dataclass
class Matrix:
    """One weight matrix: dense (``dense`` f32 (m, n)) or product-quantized (``codes`` uint8 (m, nsubq),
    ``centroids`` f32 (n * 256,), ``dsub``/``lastdsub``/``nsubq``, and when qnorm ``norm_codes`` uint8 (m,),
    ``norm_centroids`` f32 (256,))."""
    m: int
    n: int
    dense: np.ndarray | None = None
    codes: np.ndarray | None = None
    centroids: np.ndarray | None = None
    nsubq: int = 0
    dsub: int = 0
    lastdsub: int = 0
    norm_codes: np.ndarray | None = None
    norm_centroids: np.ndarray | None = None
    norm_pq: tuple[int, int, int] = (1, 1, 1)  # the norm quantizer's nsubq, dsub, lastdsub (qnorm only)

    @property
    def quantized(self) -> bool:
        return self.codes is not None


@dataclass
class ModelFile:
    """Everything ``predict`` needs from a model file, as read."""
    path: str
    version: int
    args: dict
    words: list[bytes]          # all entries, words first then labels (dictionary order)
    counts: np.ndarray          # int64 (size,)
    types: np.ndarray           # int8 (size,): 0 word, 1 label
    nwords: int
    nlabels: int
    prune_keys: np.ndarray | None   # int32 bucket ids kept by pruning (None: not pruned)
    prune_vals: np.ndarray | None   # int32 their new indexes
    input: Matrix
    output: Matrix
    size_bytes: int
    ntokens: int = 0            # the dictionary's token count (kept only to be written back)


class _Reader:
    def __init__(self, f, path: str, size: int):
        self.f, self.path, self.size = f, path, size

    def fail(self, what: str) -> FastTextFormatError:
        return FastTextFormatError(f"{self.path}: {what}")

    def read(self, n: int, what: str) -> bytes:
        pos = self.f.tell()
        b = self.f.read(n)
        if len(b) != n:
            raise self.fail(f"truncated: {what} needs {n} bytes at offset {pos} but the file ends at {self.size} "
                            "bytes; the download or copy is incomplete: fetch the model file again")
        return b

    def unpack(self, fmt: str, what: str):
        return struct.unpack("<" + fmt, self.read(struct.calcsize("<" + fmt), what))

    def array(self, dtype, count: int, what: str) -> np.ndarray:
        nbytes = int(count) * np.dtype(dtype).itemsize
        pos = self.f.tell()
        if count < 0 or pos + nbytes > self.size:
            raise self.fail(f"truncated: {what} needs {nbytes} bytes at offset {pos} but the file ends at "
                            f"{self.size} bytes; the download or copy is incomplete: fetch the model file again")
        out = np.fromfile(self.f, dtype=np.dtype(dtype).newbyteorder("<"), count=int(count))
        return out.astype(dtype, copy=False)


def _pq(r: _Reader, dim: int, what: str) -> tuple[np.ndarray, int, int, int]:
    pq_dim, nsubq, dsub, lastdsub = r.unpack("4i", what + " product quantizer header")
    if pq_dim != dim or dsub <= 0 or nsubq != -(-dim // dsub) or lastdsub != (dim % dsub or dsub):
        raise r.fail(f"{what} product quantizer is inconsistent (dim {pq_dim} for a {dim}-column matrix, nsubq "
                     f"{nsubq}, dsub {dsub}, lastdsub {lastdsub}); the file is damaged: fetch it again")
    cent = r.array(np.float32, pq_dim * KSUB, what + " centroids")
    return cent, nsubq, dsub, lastdsub


def _matrix(r: _Reader, quantized: bool, what: str) -> Matrix:
    if not quantized:
        m, n = r.unpack("qq", what + " matrix shape")
        if m < 0 or n <= 0:
            raise r.fail(f"{what} matrix has shape ({m}, {n}); the file is damaged: fetch it again")
        dense = r.array(np.float32, m * n, f"{what} matrix ({m} x {n} f32)").reshape(m, n)
        return Matrix(m, n, dense=dense)
    qnorm = r.unpack("?", what + " qnorm flag")[0]
    m, n, codesize = r.unpack("qqi", what + " quantized matrix header")
    if m < 0 or n <= 0:
        raise r.fail(f"{what} quantized matrix has shape ({m}, {n}); the file is damaged: fetch it again")
    codes = r.array(np.uint8, codesize, what + " codes")
    cent, nsubq, dsub, lastdsub = _pq(r, n, what)
    if codesize != m * nsubq:
        raise r.fail(f"{what} has {codesize} codes for {m} rows of {nsubq} sub-quantizers; the file is damaged")
    mat = Matrix(m, n, codes=codes.reshape(m, nsubq), centroids=cent, nsubq=nsubq, dsub=dsub, lastdsub=lastdsub)
    if qnorm:
        mat.norm_codes = r.array(np.uint8, m, what + " norm codes")
        mat.norm_centroids, *norm_pq = _pq(r, 1, what + " norm")
        mat.norm_pq = tuple(norm_pq)
    return mat


def read_model(path: str | os.PathLike) -> ModelFile:
    """Parse a fastText supervised model file; raises FastTextFormatError naming the file, what was found
    and the fix."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FastTextFormatError(f"{path}: no such model file; pass the path of a fastText .bin or .ftz file")
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        r = _Reader(f, path, size)
        if size < 8:
            raise r.fail(f"not a fastText model: {size} bytes, too short for the header; pass a .bin/.ftz "
                         "model saved by fastText")
        magic, version = r.unpack("ii", "header")
        if magic != MAGIC:
            raise r.fail(f"not a fastText model: magic number {magic} (0x{magic & 0xFFFFFFFF:08X}) where "
                         f"fastText writes {MAGIC} (0x{MAGIC:08X}); pass a .bin/.ftz model saved by fastText "
                         "(a .vec text file or another format cannot be read)")
        if version > MAX_VERSION or version < 0:
            raise r.fail(f"fastText file format version {version} is not supported (this reader and fastText "
                         f"0.9 read versions <= {MAX_VERSION}); re-save the model with fastText 0.9")
        vals = r.unpack("12id", "model arguments")
        names = ("dim", "ws", "epoch", "minCount", "neg", "wordNgrams", "loss", "model", "bucket", "minn", "maxn",
                 "lrUpdateRate", "t")
        args = dict(zip(names, vals))
        if args["model"] != 3:
            kind = MODEL_NAMES.get(args["model"], f"unknown model type {args['model']}")
            raise r.fail(f"is a {kind} model, not a supervised classifier: predict needs a model trained with "
                         "`fasttext supervised` / fasttext.train_supervised (word-vector models have no labels)")
        if args["loss"] not in LOSS_NAMES:
            raise r.fail(f"unknown loss {args['loss']} (fastText knows 1 hs, 2 ns, 3 softmax, 4 ova); "
                         "the file is damaged or from an unsupported fastText fork")
        if version == 11:  # fastText's own rule: old supervised models had no character n-grams
            args["maxn"] = 0
        if args["dim"] <= 0:
            raise r.fail(f"dim is {args['dim']}; the file is damaged: fetch it again")
        nsize, nwords, nlabels, ntokens, pr_size = r.unpack("iiiqq", "dictionary header")
        if nsize < 0 or nwords < 0 or nlabels <= 0 or nwords + nlabels != nsize:
            raise r.fail(f"dictionary has size {nsize} with {nwords} words and {nlabels} labels; a supervised "
                         "model needs at least one label and size = words + labels: the file is damaged")
        words, counts, types = _dictionary(r, nsize)
        if np.any(types[:nwords] != 0) or np.any(types[nwords:] != 1):
            raise r.fail("dictionary entries are not words first, then labels, as fastText saves them; "
                         "the file is damaged")
        prune_keys = prune_vals = None
        if pr_size >= 0:
            pairs = r.array(np.int32, 2 * pr_size, "pruned n-gram index").reshape(-1, 2)
            prune_keys, prune_vals = pairs[:, 0].copy(), pairs[:, 1].copy()
        quant_input = r.unpack("?", "input quantization flag")[0]
        inp = _matrix(r, quant_input, "input")
        if not quant_input and prune_keys is not None:
            raise r.fail("is a pruned model with a dense input matrix, which fastText refuses (its issue #332); "
                         "download the updated model from fasttext.cc")
        qout = r.unpack("?", "output quantization flag")[0]
        out = _matrix(r, quant_input and qout, "output")
    _check_shapes(r, args, nwords, nlabels, prune_keys, prune_vals, inp, out)
    return ModelFile(path, version, args, words, counts, types, nwords, nlabels, prune_keys, prune_vals,
                     inp, out, size, ntokens)


def _dictionary(r: _Reader, nsize: int) -> tuple[list[bytes], np.ndarray, np.ndarray]:
    start = r.f.tell()
    # entries are variable length: read generously, parse, then seek back to the first byte after them
    chunk = r.f.read(min(r.size - start, max(1 << 16, nsize * 64)))
    words: list[bytes] = []
    counts = np.empty(nsize, np.int64)
    types = np.empty(nsize, np.int8)
    pos = 0
    base = start
    for i in range(nsize):
        end = chunk.find(b"\0", pos)
        while end < 0 or end + 10 > len(chunk):
            more = r.f.read(max(1 << 20, len(chunk)))
            if not more:
                raise r.fail(f"truncated: dictionary entry {i} of {nsize} runs past the end of the file "
                             f"({r.size} bytes); the download or copy is incomplete: fetch the model file again")
            chunk = chunk[pos:] + more
            base += pos
            pos = 0
            end = chunk.find(b"\0", pos)
        words.append(chunk[pos:end])
        counts[i], types[i] = struct.unpack_from("<qb", chunk, end + 1)
        pos = end + 10
    r.f.seek(base + pos)
    return words, counts, types


def _check_shapes(r: _Reader, args: dict, nwords: int, nlabels: int, prune_keys, prune_vals,
                  inp: Matrix, out: Matrix) -> None:
    dim, bucket = args["dim"], args["bucket"]
    if inp.n != dim or out.n != dim:
        raise r.fail(f"matrix widths {inp.n} (input) / {out.n} (output) differ from dim {dim}; the file is damaged")
    if out.m != nlabels:
        raise r.fail(f"output matrix has {out.m} rows for {nlabels} labels; the file is damaged")
    if bucket < 0 or (bucket == 0 and (args["maxn"] > 0 or args["wordNgrams"] > 1)):
        raise r.fail(f"bucket is {bucket} while the model hashes n-grams (maxn {args['maxn']}, wordNgrams "
                     f"{args['wordNgrams']}); the file is damaged")
    if prune_keys is None:
        need = nwords + bucket
    else:
        if prune_keys.size and (prune_keys.min() < 0 or prune_keys.max() >= max(bucket, 1) or prune_vals.min() < 0):
            raise r.fail("pruned n-gram index holds ids outside [0, bucket); the file is damaged")
        need = nwords + (int(prune_vals.max()) + 1 if prune_vals.size else 0)
    if inp.m < need:
        raise r.fail(f"input matrix has {inp.m} rows but the dictionary addresses {need}; the file is damaged")


ARG_NAMES = ("dim", "ws", "epoch", "minCount", "neg", "wordNgrams", "loss", "model", "bucket", "minn", "maxn",
             "lrUpdateRate")


def _write_matrix(f, m: Matrix) -> None:
    if not m.quantized:
        f.write(struct.pack("<qq", m.m, m.n))
        f.write(np.ascontiguousarray(m.dense, "<f4").tobytes())
        return
    f.write(struct.pack("<?qqi", m.norm_codes is not None, m.m, m.n, m.codes.size))
    f.write(np.ascontiguousarray(m.codes, np.uint8).tobytes())
    f.write(struct.pack("<4i", m.n, m.nsubq, m.dsub, m.lastdsub))
    f.write(np.ascontiguousarray(m.centroids, "<f4").tobytes())
    if m.norm_codes is not None:
        f.write(np.ascontiguousarray(m.norm_codes, np.uint8).tobytes())
        f.write(struct.pack("<4i", 1, *m.norm_pq))
        f.write(np.ascontiguousarray(m.norm_centroids, "<f4").tobytes())


def write_model(mf: ModelFile, path: str | os.PathLike) -> None:
    """Write ``mf`` as a fastText model file, the layout of the module docstring (what ``read_model`` reads):
    a model read and written back is the same file byte for byte (version 12). The output matrix is written
    dense unless it is quantized."""
    if mf.input.quantized is False and mf.output.quantized:
        raise FastTextFormatError(f"{path}: a quantized output matrix needs a quantized input matrix")
    with open(os.fspath(path), "wb") as f:
        f.write(struct.pack("<ii", MAGIC, mf.version))
        f.write(struct.pack("<12id", *(int(mf.args[k]) for k in ARG_NAMES), float(mf.args["t"])))
        pr = -1 if mf.prune_keys is None else int(mf.prune_keys.size)
        f.write(struct.pack("<iiiqq", len(mf.words), mf.nwords, mf.nlabels, mf.ntokens, pr))
        for w, c, t in zip(mf.words, mf.counts.tolist(), mf.types.tolist()):
            f.write(w + b"\0" + struct.pack("<qb", c, t))
        if mf.prune_keys is not None:
            f.write(np.column_stack([mf.prune_keys, mf.prune_vals]).astype("<i4").tobytes())
        f.write(struct.pack("<?", mf.input.quantized))
        _write_matrix(f, mf.input)
        f.write(struct.pack("<?", mf.output.quantized))
        _write_matrix(f, mf.output)
