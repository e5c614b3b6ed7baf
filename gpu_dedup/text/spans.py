"""Spans of documents, shared by the programs that cut them (paragraph dedup, exact-substring dedup, the filter's
paragraph unit): their keys (``span_hashes``), the byte ranges a removed unit takes with it (``cut_ranges``), their
text gathered into one array (``gather_spans``) and keys as hex (``hex128``). Host arrays unless stated."""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from ..config import NormalizeConfig
from ..constants import EXACT_SEED_HI, EXACT_SEED_LO
from ..ops import bloom as bloom_ops
from .normalize import device_tables

# the two seeds of a span's 128-bit key (XXH64 twice), those of the exact hashes of whole documents
SEED1 = EXACT_SEED_LO
SEED2 = EXACT_SEED_HI


def span_hashes(data: Any, start: Any, end: Any, cfg: NormalizeConfig, seed: int = 0,
                device: str = "cpu", chunk: int | None = None) -> tuple[Any, Any, Any]:
    """Normalize each span data[start[i]:end[i]] and hash it: (h1, h2) uint64 (u,) and the normalized
    size int64 (u,), by ``ops.bloom.span_hashes`` (CPU: a thread per span; GPU: work per thread bounded by
    bytes; ``chunk``: its normalization chunk, for tests)."""
    map_off, map_cp = device_tables(cfg, device)
    return bloom_ops.span_hashes(device, data, start, end, map_off, map_cp, SEED1 ^ seed, SEED2 ^ seed, chunk)


def cut_ranges(unit_off: np.ndarray, start: np.ndarray, end: np.ndarray,
               removed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Host arrays. For every unit, the byte range [cut_start, cut_end) to cut when it is removed: the
    unit plus the separator before it when an earlier unit of its document is kept, else plus the
    separator after it (none for the document's last unit). Only entries where ``removed`` is True are
    meaningful; those ranges are disjoint and ascending within a document."""
    u = start.shape[0]
    if u == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    counts = np.diff(unit_off)
    doc = np.repeat(np.arange(counts.shape[0]), counts)
    kept = (~removed).astype(np.int64)
    before = np.concatenate(([0], np.cumsum(kept)[:-1]))  # kept units before j, over the whole batch
    # (a document without units, last in the batch, starts at u: clamped, it is never read through doc)
    kept_before = (before - before[np.minimum(unit_off[:-1], u - 1)][doc]) > 0
    j = np.arange(u)
    has_next = j + 1 < unit_off[1:][doc]
    prev_end = np.concatenate(([0], end[:-1]))
    next_start = np.concatenate((start[1:], [0]))
    cs = np.where(kept_before, prev_end, start)
    ce = np.where(kept_before, end, np.where(has_next, next_start, end))
    return cs, ce


def gather_spans(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> pa.Array:
    """Host: large_string array of data[starts[i]:ends[i]] (spans on UTF-8 boundaries)."""
    lens = ends - starts
    off = np.zeros(lens.shape[0] + 1, np.int64)
    np.cumsum(lens, out=off[1:])
    pos = np.arange(int(off[-1]), dtype=np.int64) - np.repeat(off[:-1], lens) + np.repeat(starts, lens)
    return pa.LargeStringArray.from_buffers(lens.shape[0], pa.py_buffer(off), pa.py_buffer(data[pos]))


_HEX = np.frombuffer(b"0123456789abcdef", np.uint8)


def hex128(h1: np.ndarray, h2: np.ndarray) -> pa.Array:
    """32 lowercase hex digits per key, h1 then h2 (big-endian), as a string array (vectorized)."""
    n = h1.shape[0]
    raw = np.empty((n, 2), ">u8")
    raw[:, 0], raw[:, 1] = h1, h2
    b = raw.view(np.uint8).reshape(n, 16)
    digits = np.empty((n, 32), np.uint8)
    digits[:, 0::2], digits[:, 1::2] = _HEX[b >> 4], _HEX[b & 15]
    off = np.arange(0, 32 * n + 1, 32, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(off), pa.py_buffer(digits.tobytes()))
