"""Tokens of exact-substring dedup: integer ids with the byte range each token covers in the ORIGINAL text.

Word units (default)
    A token is a maximal run of bytes that are not ASCII whitespace (space, tab, LF, VT, FF, CR) inside one
    document, except in the scripts written without spaces between words: every character of ``CJK_RANGES``
    (Han ideographs, Hiragana, Katakana, Bopomofo, and the CJK punctuation between them) is a token of its
    own, and U+3000 (the ideographic space) separates tokens like a space. Without this rule a Chinese or
    Japanese paragraph is one "word", and no window of min_tokens words ever repeats: nothing would be cut.
    "東京タワー is tall" is the tokens 東 京 タ ワ ー is tall (BERT's basic tokenizer splits Han the same way;
    kana too here, since a Japanese sentence may hold no Han to split at). Its identity is the 128-bit hash (``paragraph.dedup.span_hashes``: XXH64, two seeds) of its
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
IDEOGRAPHIC_SPACE = 0x3000  # a separator, as a space
# Code points (inclusive ranges, Unicode blocks) of the scripts written without spaces between words: each such
# character is a token by itself (module docstring). Sorted and disjoint (``_in_ranges`` bisects them).
CJK_RANGES = (
    (0x2E80, 0x2FFF),    # CJK Radicals Supplement, Kangxi Radicals, Ideographic Description Characters
    (0x3001, 0x302D),    # CJK Symbols and Punctuation (U+3000, the ideographic space, separates instead; U+302E
    (0x3030, 0x303F),    # and U+302F are Hangul tone marks, which stay with their syllable)
    (0x3040, 0x30FF),    # Hiragana, Katakana
    (0x3100, 0x312F),    # Bopomofo
    (0x3190, 0x31FF),    # Kanbun, Bopomofo Extended, CJK Strokes, Katakana Phonetic Extensions
    (0x3400, 0x4DBF),    # CJK Unified Ideographs Extension A
    (0x4E00, 0x9FFF),    # CJK Unified Ideographs
    (0xF900, 0xFAFF),    # CJK Compatibility Ideographs
    (0xFE30, 0xFE4F),    # CJK Compatibility Forms
    (0xFF61, 0xFF9F),    # Halfwidth CJK punctuation and Katakana
    (0x1AFF0, 0x1B16F),  # Kana Extended-B, Kana Supplement, Kana Extended-A, Small Kana Extension
    (0x20000, 0x3FFFF),  # the Supplementary and Tertiary Ideographic Planes (Extensions B-I, Compatibility)
)


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


def _in_ranges(xp: Any, cp: Any, ranges: tuple[tuple[int, int], ...]) -> Any:
    """bool: which code points ``cp`` (int32 or int64) lie in one of the sorted, disjoint inclusive ``ranges``."""
    los = xp.asarray(np.array([a for a, _ in ranges], cp.dtype))
    his = xp.asarray(np.array([b for _, b in ranges], cp.dtype))
    at = xp.searchsorted(los, cp, side="right") - 1
    return (at >= 0) & (cp <= his[xp.clip(at, 0, len(ranges) - 1)])


def cjk_chars(buf: Any) -> tuple[Any, Any, Any]:
    """The characters of UTF-8 text ``buf`` (uint8, numpy or CuPy) that are tokens of their own: (start int64,
    length int64 (3 or 4 bytes) of each character of ``CJK_RANGES``, start of each ideographic space). Only
    the lead bytes of 3- and 4-byte sequences are decoded (the text is valid UTF-8: io.read repaired it)."""
    xp = module_of(buf)
    lead = xp.flatnonzero(buf >= 0xE0).astype(xp.int64)  # 1110xxxx and 11110xxx
    if lead.shape[0] == 0:
        z = xp.zeros(0, xp.int64)
        return z, z, z
    pad = xp.concatenate((buf, xp.zeros(3, xp.uint8)))  # a 3-byte character at the end reads one byte past it
    b0 = pad[lead].astype(xp.int32)
    b1, b2, b3 = ((pad[lead + k] & 0x3F).astype(xp.int32) for k in (1, 2, 3))
    four = b0 >= 0xF0
    cp = xp.where(four, ((b0 & 0x07) << 18) | (b1 << 12) | (b2 << 6) | b3, ((b0 & 0x0F) << 12) | (b1 << 6) | b2)
    own = _in_ranges(xp, cp, CJK_RANGES)
    return lead[own], xp.where(four[own], 4, 3).astype(xp.int64), lead[cp == IDEOGRAPHIC_SPACE]


def word_spans(data: Any, offsets: Any) -> tuple[Any, Any, Any]:
    """The word units of documents data[offsets[d]:offsets[d+1]] (module docstring: maximal runs of bytes
    that are neither ASCII whitespace, nor an ideographic space, nor part of a CJK character, and each CJK
    character alone), from uint8 / int64 arrays of one module: numpy, or CuPy on a GPU, where this runs as
    array operations on the device. Returns (doc int64, start, end int64 absolute byte positions), in
    document then text order. Transient: ~6 B per text byte, plus ~40 B per character of 3 or 4 bytes."""
    xp = module_of(data)
    lo, hi = int(offsets[0]), int(offsets[-1])
    buf = data[lo:hi]
    size = buf.shape[0]
    if size == 0:
        z = xp.zeros(0, xp.int64)
        return z, z, z
    word = ~xp.asarray(_SPACE)[buf]
    c_start, c_len, ideo = cjk_chars(buf)
    for k in range(3):  # the bytes of the CJK characters and of the ideographic spaces are no run's
        word[c_start + k] = False
        word[ideo + k] = False
    word[c_start[c_len == 4] + 3] = False
    bound = xp.zeros(size + 1, xp.bool_)  # True where a document starts (position relative to lo)
    bound[offsets[:-1] - lo] = True
    bound[size] = True
    edge = xp.ones(1, xp.bool_)
    prev_space = xp.concatenate((edge, ~word[:-1]))
    next_space = xp.concatenate((~word[1:], edge))
    first = word & (prev_space | bound[:-1])
    last = word & (next_space | bound[1:])
    # each CJK character is a unit: its first byte starts one, its last ends one. The units are disjoint, so
    # the k-th start and the k-th end in text order belong together (no sort)
    first[c_start] = True
    last[c_start + c_len - 1] = True
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
        raise DataError(f"{os.fspath(path)!r} is not a Hugging Face tokenizer.json file (SubstringConfig.tokenizer): "
                        f"{e}") from e


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
