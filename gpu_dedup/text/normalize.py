"""The normalizer every program shares: raw UTF-8 text (Arrow buffers) -> normalized UTF-8 bytes + offsets.

Policy ``nfkc-cp-lower-v1`` (tables in ``unicode_tables``; details and the measured difference to full
NFKC in docs/normalization.md): every codepoint is replaced by the lowercase of its NFKC image;
whitespace and control characters become a space, format characters (Cf) are deleted, optionally
punctuation/symbols become a space and decimal digits '0'; space runs collapse to one and the ends are
trimmed. It is per codepoint (no canonical composition, no final-sigma context), which is what lets
one table-driven kernel run at memory speed on CPU and GPU with identical output.

``normalize_text`` / ``normalize_arrays`` give a ``Normalized`` batch; ``unit_starts`` the byte offsets of its
words or codepoints (GPU); ``device_tables`` the tables where a device's kernels read them (for kernels that
normalize on the fly: paragraph spans, contamination screening).
"""
from __future__ import annotations

import functools
import logging
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..config import NormalizeConfig
from ..constants import BYTE_TILE
from ..device import array_backend, array_module, launch, module_of, split_chunks, to_device, to_host
from ..io.text import arrow_text_buffers
from .unicode_tables import load_tables

UNIT_CHUNK = BYTE_TILE  # text bytes per block of unit_chunks: at most its shared tile (tests shrink it)

logger = logging.getLogger(__name__)


@dataclass
class Normalized:
    """data: uint8 (T',) normalized UTF-8; offsets: int64 (n+1,); words, codepoints: int64 (n,)."""

    data: np.ndarray
    offsets: np.ndarray
    words: np.ndarray
    codepoints: np.ndarray

    def __len__(self) -> int:
        return self.offsets.shape[0] - 1

    def shingle_counts(self, n: int, kind_char: bool):
        """Shingles per document (int64 (n,), the arrays' module): a document of u units (words, or codepoints
        with ``kind_char``) has max(u - n + 1, 0) shingles of n units; 0 means short (exact path only). The
        one formula of the package: the kernels count by enumerating the shingles and agree."""
        units = self.codepoints if kind_char else self.words
        return module_of(units).maximum(units - n + 1, 0)

    def text(self, i: int) -> str:
        return bytes(to_host(self.data[int(self.offsets[i]):int(self.offsets[i + 1])])).decode("utf-8")


def unit_starts(norm: Normalized, kind_char: bool, device: str):
    """GPU: (ubase (n+1,), units) int64 device arrays: the byte offsets of document i's units (word or
    codepoint starts) are units[ubase[i]:ubase[i+1]]. Cooperative (kernels/cuda.py:unit_chunks): a count
    pass and a write pass over chunks of UNIT_CHUNK bytes, the chunks' counts scanned in between."""
    if not 0 < UNIT_CHUNK <= BYTE_TILE:  # the kernel stages a chunk in a BYTE_TILE-byte shared tile
        raise ValueError(f"UNIT_CHUNK={UNIT_CHUNK}: unit_chunks takes chunks of 1..{BYTE_TILE} bytes (BYTE_TILE)")
    xp = array_module(device)
    n = len(norm)
    ubase = xp.zeros(n + 1, xp.int64)
    xp.cumsum(norm.codepoints if kind_char else norm.words, out=ubase[1:])
    units = xp.empty(int(ubase[-1]), xp.int64)
    doc, first, count, bounds = split_chunks(xp, norm.offsets[1:] - norm.offsets[:-1], UNIT_CHUNK)
    chunks = int(doc.shape[0])
    if chunks:
        counts = xp.empty(chunks, xp.int64)
        launch(device, "unit_chunks", chunks, norm.data, norm.offsets, kind_char, doc, first, count, counts, False,
               counts, units)
        before = xp.cumsum(counts) - counts  # units in earlier chunks, all documents
        base = ubase[doc] + before - before[bounds[doc]] + (0 if kind_char else 1)
        found = int(counts.sum()) + (0 if kind_char else int(xp.count_nonzero(norm.offsets[1:] > norm.offsets[:-1])))
        if found != units.shape[0]:  # an invariant of normalized text; never write past the array
            raise RuntimeError(f"{found} unit starts in the text but {units.shape[0]} in the normalized sizes: "
                               "the text does not come from normalize_arrays")
        launch(device, "unit_chunks", chunks, norm.data, norm.offsets, kind_char, doc, first, count, base, True, counts,
               units)
    return ubase, units


def device_tables(cfg: NormalizeConfig, device: str):
    """The normalization tables where ``device``'s kernels read them (cached per array backend)."""
    return _tables_on(cfg, device, array_backend(device))


@functools.lru_cache(maxsize=8)
def _tables_on(cfg: NormalizeConfig, device: str, backend: str):
    t = load_tables(cfg)
    # the kernel's ASCII fast path assumes every ASCII codepoint maps to exactly one ASCII codepoint
    if not (np.all(np.diff(t.map_off[:129]) == 1) and t.map_cp[t.map_off[:128]].max() < 0x80):
        raise RuntimeError(f"normalization tables for {cfg} map an ASCII codepoint to something other than one "
                           "ASCII codepoint; the kernel's fast path cannot use them")
    return to_device(t.map_off, device), to_device(t.map_cp, device)


def normalize_arrays(data, offsets, cfg: NormalizeConfig, device: str = "cpu") -> Normalized:
    """Normalize documents data[offsets[i]:offsets[i+1]] (two passes: sizes, then bytes).
    Arrays stay in the device's array module (numpy on the CPU, cupy on a GPU)."""
    xp = array_module(device)
    map_off, map_cp = device_tables(cfg, device)
    if device == "cuda":
        return normalize_chunks(data, offsets, map_off, map_cp, xp)
    n = offsets.shape[0] - 1
    sizes = xp.empty((n, 3), xp.int64)
    out_off = xp.zeros(n + 1, xp.int64)
    launch(device, "normalize_sizes", n, data, offsets, map_off, map_cp, sizes)
    xp.cumsum(sizes[:, 0], out=out_off[1:])
    out = xp.empty(int(out_off[-1]), xp.uint8)
    launch(device, "normalize_write", n, data, offsets, map_off, map_cp, out, out_off)
    return Normalized(out, out_off, sizes[:, 1].copy(), sizes[:, 2].copy())


def normalize_chunks(data, offsets, map_off, map_cp, xp, chunk: int | None = None) -> Normalized:
    """The GPU's normalization: documents cut into chunks of about ``chunk`` bytes (default
    kernels/cuda.py:NORM_CHUNK), one thread each. A plan kernel moves each cut to a codepoint after a
    non-empty image and records the scan state there; the sizes kernel scans each chunk from its state;
    a document's sizes are the sums of its chunks' (its trailing space taken back when its last chunk
    ends on one); the write kernel writes each chunk at its document's offset plus its earlier chunks'
    bytes. Output identical to the CPU's one-document scans (tests: tiny chunks, every cut)."""
    from ..kernels import cuda as kc

    n = offsets.shape[0] - 1
    doc, first, _, bounds = split_chunks(xp, offsets[1:] - offsets[:-1], chunk or kc.NORM_CHUNK)
    chunks = int(doc.shape[0])
    totals = xp.zeros((chunks + 1, 4), xp.int64)  # running (bytes, spaces, extra, non-empty chunks)
    lo = xp.empty(chunks, xp.int64)
    prev = xp.empty(chunks, xp.int64)
    counts = xp.empty((chunks, 4), xp.int64)
    if chunks:
        launch("cuda", "normalize_plan", chunks, data, offsets, map_off, map_cp, doc, first, lo, prev)
        launch("cuda", "normalize_chunk_sizes", chunks, data, offsets, map_off, map_cp, doc, lo, prev, counts)
        xp.cumsum(counts[:, :3], axis=0, out=totals[1:, :3])
        # a chunk that found no cut is empty (lo = the document's end); those are the last ones of their
        # document, and the document's end state is its last non-empty chunk's (chunk 0 never is empty)
        xp.cumsum((lo < offsets[doc + 1]).astype(xp.int64), out=totals[1:, 3])
    doc_sums = totals[bounds[1:]] - totals[bounds[:-1]]  # (n, 4)
    has = doc_sums[:, 3] > 0
    last_state = xp.ones(n, xp.int64)  # a document without chunks (empty) ends in state 1, like one scan
    if chunks:
        last_state[has] = counts[(bounds[:-1] + doc_sums[:, 3])[has] - 1, 3]
    nbytes = doc_sums[:, 0]
    trim = ((last_state == 1) & (nbytes > 0)).astype(xp.int64)
    nbytes = nbytes - trim
    words = xp.where(nbytes > 0, doc_sums[:, 1] - trim + 1, 0)
    out_off = xp.zeros(n + 1, xp.int64)
    xp.cumsum(nbytes, out=out_off[1:])
    out = xp.empty(int(out_off[-1]), xp.uint8)
    if chunks:
        chunk_out = out_off[doc] + totals[:-1, 0] - totals[bounds[doc], 0]
        launch("cuda", "normalize_chunk_write", chunks, data, offsets, map_off, map_cp, doc, lo, prev, chunk_out, out,
               out_off)
    return Normalized(out, out_off, words, nbytes - doc_sums[:, 2])


def normalize_text(text: pa.Array, cfg: NormalizeConfig, device: str = "cpu") -> Normalized:
    """Normalize an Arrow string array (copied to the device first when device="cuda")."""
    data, offsets = arrow_text_buffers(text)
    return normalize_arrays(to_device(data, device), to_device(offsets, device), cfg, device)


def normalize_strings(texts: list[str], cfg: NormalizeConfig | None = None, device: str = "cpu") -> list[str]:
    """Convenience for notebooks and tests: normalize Python strings with the kernel."""
    norm = normalize_text(pa.array(texts, pa.large_string()), cfg or NormalizeConfig(), device)
    return [norm.text(i) for i in range(len(norm))]
