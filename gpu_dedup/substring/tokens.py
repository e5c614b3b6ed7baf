"""Tokens of exact-substring dedup: integer ids with the byte range each token covers in the ORIGINAL text.

Word units (default)
    A token is a maximal run of bytes that are not ASCII whitespace (space, tab, LF, VT, FF, CR) inside one
    document; its identity is the 128-bit hash (``paragraph.dedup.span_hashes``: XXH64, two seeds) of its
    normalized text (``NormalizeConfig``: NFKC-lowercase per codepoint, Cf deleted), so "The" and "the", or
    full-width and ASCII letters, are one token. A run whose normalized text is empty (only format
    characters) is no token. Ids are the dense ranks of the first hash word over the corpus (0..V-1): a
    stable hash, whatever the input order. Two different words collide only if their 64-bit hashes do
    (about V^2 / 2^65: 3e-6 for ten million distinct words). Each suffix array maps the identities it
    holds to dense ranks (``suffix.corpus_text``), so no corpus-wide vocabulary is held.
Tokenizer (``SubstringConfig.tokenizer``)
    A Hugging Face ``tokenizer.json`` loaded from its path with ``tokenizers`` (never downloaded), applied
    without special tokens; its character offsets are converted to UTF-8 byte offsets. Ids are the
    tokenizer's. Starts and ends are made non-decreasing (byte-level BPE may give several tokens one
    character), so every cut falls on a character boundary and cut ranges stay disjoint.
Storage (``TokenStore``)
    The corpus' tokens are appended batch by batch as three columns, identity uint64, start and end int64
    (24 B per token): in memory, or, with a work directory (``SubstringConfig.memory_budget``), in raw
    little-endian files there that later stages read back one range at a time (``Column.read``) into
    private buffers freed after use, so resident memory stays bounded by the ranges in use.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..config import NormalizeConfig
from ..errors import DataError, DependencyError
from ..runtime.device import module_of, to_device, to_host

logger = logging.getLogger(__name__)

_SPACE = np.zeros(256, bool)
_SPACE[[9, 10, 11, 12, 13, 32]] = True


@dataclass
class Tokens:
    """Tokens of n documents. doc_off int64 (n+1,): document d's tokens are [doc_off[d], doc_off[d+1]);
    start, end int64 (N,): byte offsets in the document's text; ident uint64 (N,): the token's identity
    (word hash, or tokenizer id): equal identities are equal tokens, and span hashes are built from them."""

    doc_off: np.ndarray
    start: np.ndarray
    end: np.ndarray
    ident: np.ndarray

    @property
    def n_docs(self) -> int:
        return self.doc_off.shape[0] - 1

    def __len__(self) -> int:
        return int(self.ident.shape[0])


class Column:
    """One int64/uint64 array appended in parts, then read by ranges: held in memory (path None) or in the
    raw file ``path`` (little-endian; reads return fresh arrays, writes go to the file)."""

    def __init__(self, dtype: Any, path: str | None = None) -> None:
        self.dtype, self.path = np.dtype(dtype), path
        self._parts: list[np.ndarray] = []
        self._arr: np.ndarray | None = None
        self._fh = open(path, "w+b") if path is not None else None
        self.size = 0

    def append(self, a: np.ndarray) -> None:
        a = np.ascontiguousarray(a, self.dtype)
        if self._fh is not None:
            self._fh.write(a.tobytes())
        else:
            self._parts.append(a)
        self.size += int(a.shape[0])

    def finish(self) -> "Column":
        if self._fh is None:
            self._arr = np.concatenate(self._parts) if self._parts else np.zeros(0, self.dtype)
            self._parts = []
        else:
            self._fh.flush()
        return self

    def read(self, lo: int, hi: int) -> np.ndarray:
        """A copy of elements [lo, hi)."""
        if self._fh is None:
            return self._arr[lo:hi].copy()
        self._fh.seek(lo * self.dtype.itemsize)
        return np.frombuffer(self._fh.read((hi - lo) * self.dtype.itemsize), self.dtype).copy()

    def write(self, lo: int, a: np.ndarray) -> None:
        if self._fh is None:
            self._arr[lo:lo + a.shape[0]] = a
        else:
            self._fh.seek(lo * self.dtype.itemsize)
            self._fh.write(np.ascontiguousarray(a, self.dtype).tobytes())

    def take(self, idx: np.ndarray) -> np.ndarray:
        """Elements at ``idx`` (any order; from a file through a read-only map, so only the pages touched are
        read, and they are clean pages the system may drop)."""
        if self._fh is None:
            return self._arr[idx]
        if idx.shape[0] == 0:
            return np.zeros(0, self.dtype)
        self._fh.flush()
        return np.array(np.memmap(self.path, self.dtype, mode="r", shape=(self.size,))[idx])

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            os.unlink(self.path)
            self._fh = None


class TokenStore:
    """The corpus' tokens (module docstring, Storage): ``doc_off`` in memory (8 B per document), ident /
    start / end Columns (in memory, or files under ``work_dir``)."""

    def __init__(self, work_dir: str | None = None) -> None:
        path = (lambda name: os.path.join(work_dir, name + ".bin")) if work_dir else (lambda name: None)
        self.ident = Column(np.uint64, path("ident"))
        self.start = Column(np.int64, path("start"))
        self.end = Column(np.int64, path("end"))
        self._counts: list[np.ndarray] = []
        self.doc_off = np.zeros(1, np.int64)

    def append(self, t: Tokens) -> None:
        """A batch's tokens (its own doc_off from 0)."""
        self._counts.append(np.diff(t.doc_off))
        self.ident.append(t.ident)
        self.start.append(t.start)
        self.end.append(t.end)

    def finish(self) -> "TokenStore":
        counts = np.concatenate(self._counts) if self._counts else np.zeros(0, np.int64)
        self.doc_off = np.zeros(counts.shape[0] + 1, np.int64)
        np.cumsum(counts, out=self.doc_off[1:])
        self._counts = []
        for c in (self.ident, self.start, self.end):
            c.finish()
        return self

    @property
    def n_docs(self) -> int:
        return self.doc_off.shape[0] - 1

    def __len__(self) -> int:
        return int(self.doc_off[-1])

    def docs(self, lo: int, hi: int) -> Tokens:
        """Documents [lo, hi) as in-memory Tokens (doc_off from 0, token indexes local)."""
        a, b = int(self.doc_off[lo]), int(self.doc_off[hi])
        return Tokens(self.doc_off[lo:hi + 1] - a, self.start.read(a, b), self.end.read(a, b), self.ident.read(a, b))

    def close(self) -> None:
        for c in (self.ident, self.start, self.end):
            c.close()


def word_spans(data: Any, offsets: Any) -> tuple[Any, Any, Any]:
    """Maximal non-whitespace runs of documents data[offsets[d]:offsets[d+1]] (uint8 / int64 arrays of one
    module: numpy, or CuPy on a GPU, where this runs as array operations on the device): (doc int64, start,
    end int64 absolute byte positions), in document then text order. Transient: ~6 B per text byte."""
    xp = module_of(data)
    lo, hi = int(offsets[0]), int(offsets[-1])
    buf = data[lo:hi]
    size = buf.shape[0]
    if size == 0:
        z = xp.zeros(0, xp.int64)
        return z, z, z
    word = ~xp.asarray(_SPACE)[buf]
    bound = xp.zeros(size + 1, xp.bool_)  # True where a document starts (position relative to lo)
    bound[offsets[:-1] - lo] = True
    bound[size] = True
    edge = xp.ones(1, xp.bool_)
    prev_space = xp.concatenate((edge, ~word[:-1]))
    next_space = xp.concatenate((~word[1:], edge))
    first = word & (prev_space | bound[:-1])
    last = word & (next_space | bound[1:])
    start = xp.flatnonzero(first).astype(xp.int64) + lo
    end = xp.flatnonzero(last).astype(xp.int64) + lo + 1
    doc = xp.searchsorted(offsets, start, side="right").astype(xp.int64) - 1
    return doc, start, end


def word_tokens(data: np.ndarray, offsets: np.ndarray, cfg: NormalizeConfig, device: str = "cpu") -> Tokens:
    """Word units of one batch (module docstring; host arrays in and out). device="cuda": the runs are
    found with array operations on the device and normalized and hashed by the paragraph stage's span
    kernels (``span_hashes``: span_norm_sizes, span_norm_hash), no kernel of its own; the same tokens."""
    from ..text.spans import span_hashes

    d_data, d_off = to_device(np.ascontiguousarray(data), device), to_device(offsets, device)
    doc, start, end = word_spans(d_data, d_off)
    h1, _, size = span_hashes(d_data, start, end, cfg, 0, device)
    doc, start, end, h1, size = (to_host(x) for x in (doc, start, end, h1, size))
    keep = size > 0
    doc, start, end, h1 = doc[keep], start[keep], end[keep], h1[keep]
    n = offsets.shape[0] - 1
    doc_off = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(doc, minlength=n), out=doc_off[1:])
    base = offsets[:-1][doc]
    return Tokens(doc_off, start - base, end - base, h1)


def load_tokenizer(path: str | os.PathLike) -> Any:
    """A ``tokenizers.Tokenizer`` from a tokenizer.json path, or a ValueError naming the file."""
    try:
        from tokenizers import Tokenizer
    except ImportError as e:  # pragma: no cover - an extra
        raise DependencyError("--tokenizer needs the 'tokenizers' package: pip install 'gpu-dedup[substring]'") from e
    try:
        return Tokenizer.from_file(os.fspath(path))
    except Exception as e:
        raise DataError(f"{os.fspath(path)!r} is not a Hugging Face tokenizer.json file (--tokenizer): {e}") from e


def tokenizer_tokens(data: np.ndarray, offsets: np.ndarray, texts: list[str], tok: Any) -> Tokens:
    """Tokens of one batch with a Hugging Face tokenizer (module docstring)."""
    encs = tok.encode_batch(texts, add_special_tokens=False)
    n = len(texts)
    counts = np.array([len(e.ids) for e in encs], np.int64)
    doc_off = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=doc_off[1:])
    ids = np.empty(int(doc_off[-1]), np.int64)
    start = np.empty_like(ids)
    end = np.empty_like(ids)
    for d, e in enumerate(encs):
        a, b = int(doc_off[d]), int(doc_off[d + 1])
        if a == b:
            continue
        raw = data[int(offsets[d]):int(offsets[d + 1])]
        c2b = np.concatenate((np.flatnonzero((raw & 0xC0) != 0x80), [raw.shape[0]])).astype(np.int64)
        off = np.asarray(e.offsets, np.int64).reshape(-1, 2)
        ids[a:b] = e.ids
        s = np.maximum.accumulate(c2b[off[:, 0]])
        start[a:b] = s
        end[a:b] = np.maximum.accumulate(np.maximum(c2b[off[:, 1]], s))
    return Tokens(doc_off, start, end, ids.astype(np.uint64))
