"""Tokens of exact-substring dedup: integer ids with the byte range each token covers in the ORIGINAL text.

Word units (default)
    A token is a maximal run of bytes that are not ASCII whitespace (space, tab, LF, VT, FF, CR) inside one
    document; its identity is the 128-bit hash (``paragraph.dedup.span_hashes``: XXH64, two seeds) of its
    normalized text (``NormalizeConfig``: NFKC-lowercase per codepoint, Cf deleted), so "The" and "the", or
    full-width and ASCII letters, are one token. A run whose normalized text is empty (only format
    characters) is no token. Ids are the dense ranks of the first hash word over the corpus (0..V-1): a
    stable hash, whatever the input order. Two different words collide only if their 64-bit hashes do
    (about V^2 / 2^65: 3e-6 for ten million distinct words).
Tokenizer (``SubstringConfig.tokenizer``)
    A Hugging Face ``tokenizer.json`` loaded from its path with ``tokenizers`` (never downloaded), applied
    without special tokens; its character offsets are converted to UTF-8 byte offsets. Ids are the
    tokenizer's. Starts and ends are made non-decreasing (byte-level BPE may give several tokens one
    character), so every cut falls on a character boundary and cut ranges stay disjoint.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ..config import NormalizeConfig

logger = logging.getLogger(__name__)

_SPACE = np.zeros(256, bool)
_SPACE[[9, 10, 11, 12, 13, 32]] = True


@dataclass
class Tokens:
    """Tokens of n documents. doc_off int64 (n+1,): document d's tokens are [doc_off[d], doc_off[d+1]);
    ids int64 (N,) dense in [0, vocab); start, end int64 (N,): byte offsets in the document's text; ident
    uint64 (N,): the token's identity (word hash, or tokenizer id) that span hashes are built from."""

    doc_off: np.ndarray
    ids: np.ndarray
    start: np.ndarray
    end: np.ndarray
    ident: np.ndarray
    vocab: int

    @property
    def n_docs(self) -> int:
        return self.doc_off.shape[0] - 1

    def __len__(self) -> int:
        return int(self.ids.shape[0])


def word_spans(data: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Host. Maximal non-whitespace runs of documents data[offsets[d]:offsets[d+1]]: (doc int64, start, end
    int64 absolute byte positions), in document then text order."""
    lo, hi = int(offsets[0]), int(offsets[-1])
    buf = data[lo:hi]
    word = ~_SPACE[buf]
    size = buf.shape[0]
    if size == 0:
        z = np.zeros(0, np.int64)
        return z, z, z
    bound = np.zeros(size + 1, bool)  # True where a document starts (position relative to lo)
    bound[offsets[:-1] - lo] = True
    bound[size] = True
    prev_space = np.concatenate(([True], ~word[:-1]))
    next_space = np.concatenate((~word[1:], [True]))
    first = word & (prev_space | bound[:-1])
    last = word & (next_space | bound[1:])
    start = np.flatnonzero(first).astype(np.int64) + lo
    end = np.flatnonzero(last).astype(np.int64) + lo + 1
    doc = np.searchsorted(offsets, start, side="right").astype(np.int64) - 1
    return doc, start, end


def word_tokens(data: np.ndarray, offsets: np.ndarray, cfg: NormalizeConfig) -> Tokens:
    """Word units of one batch (module docstring), ``ids`` still the 64-bit hashes (``concat_tokens`` maps
    the corpus' to ranks)."""
    from ..paragraph.dedup import span_hashes

    doc, start, end = word_spans(data, offsets)
    h1, _, size = span_hashes(data, start, end, cfg, 0, "cpu")
    keep = size > 0
    doc, start, end, h1 = doc[keep], start[keep], end[keep], h1[keep]
    n = offsets.shape[0] - 1
    doc_off = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(doc, minlength=n), out=doc_off[1:])
    base = offsets[:-1][doc]
    return Tokens(doc_off, h1, start - base, end - base, h1, 0)


def load_tokenizer(path: str | os.PathLike) -> Any:
    """A ``tokenizers.Tokenizer`` from a tokenizer.json path, or a ValueError naming the file."""
    try:
        from tokenizers import Tokenizer
    except ImportError as e:  # pragma: no cover - an extra
        raise ImportError("--tokenizer needs the 'tokenizers' package: pip install 'gpu-dedup[substring]'") from e
    try:
        return Tokenizer.from_file(os.fspath(path))
    except Exception as e:
        raise ValueError(f"{os.fspath(path)!r} is not a Hugging Face tokenizer.json file (--tokenizer): {e}") from e


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
    vocab = int(tok.get_vocab_size(with_added_tokens=True))
    return Tokens(doc_off, ids, start, end, ids.astype(np.uint64), vocab)


def concat_tokens(parts: list[Tokens], dense: bool) -> Tokens:
    """The corpus' tokens from its batches'. dense: map the 64-bit word hashes to ranks 0..V-1."""
    if not parts:
        z = np.zeros(0, np.int64)
        return Tokens(np.zeros(1, np.int64), z, z, z, z.astype(np.uint64), 0)
    offs = [parts[0].doc_off]
    base = int(parts[0].doc_off[-1])
    for p in parts[1:]:
        offs.append(p.doc_off[1:] + base)
        base += int(p.doc_off[-1])
    ids = np.concatenate([p.ids for p in parts])
    if dense:
        uniq, inv = np.unique(ids, return_inverse=True)
        ids, vocab = inv.astype(np.int64).reshape(-1), int(uniq.shape[0])
    else:
        vocab = max(p.vocab for p in parts)
        ids = ids.astype(np.int64)
    return Tokens(np.concatenate(offs), ids, np.concatenate([p.start for p in parts]),
                  np.concatenate([p.end for p in parts]), np.concatenate([p.ident for p in parts]).astype(np.uint64),
                  vocab)

