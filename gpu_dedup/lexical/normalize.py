"""Normalization stage: raw UTF-8 text (Arrow buffers) -> normalized UTF-8 bytes + offsets.

Policy ``nfkc-cp-lower-v1`` (tables in ``unicode_tables``; details and the measured difference to full
NFKC in docs/normalization.md): every codepoint is replaced by the lowercase of its NFKC image;
whitespace and control characters become a space, format characters (Cf) are deleted, optionally
punctuation/symbols become a space and decimal digits '0'; space runs collapse to one and the ends are
trimmed. It is per codepoint (no canonical composition, no final-sigma context), which is what lets
one table-driven kernel run at memory speed on CPU and GPU with identical output.
"""
from __future__ import annotations

import functools
import logging
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..config import NormalizeConfig
from ..device import array_backend, module_of, to_device, to_host
from ..errors import DataError, RunError, UsageError
from ..ops import core
from .unicode_tables import load_tables

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


def arrow_text_buffers(text: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Zero-copy views of an Arrow string array: (data uint8 (T,), offsets int64 (n+1,)).

    Offsets are absolute positions into data (they need not start at 0)."""
    if text.null_count:
        raise DataError(f"text array has {text.null_count} null values; the reader must reject or skip them")
    if pa.types.is_string(text.type):
        off_dtype = np.int32
    elif pa.types.is_large_string(text.type):
        off_dtype = np.int64
    else:
        raise UsageError(f"text must be an Arrow string or large_string array, got {text.type}")
    bufs = text.buffers()
    n = len(text)
    offsets = np.frombuffer(bufs[1], dtype=off_dtype)[text.offset:text.offset + n + 1].astype(np.int64, copy=False)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    if n and offsets[-1] > data.shape[0]:
        raise DataError("corrupt Arrow string array: offsets exceed the data buffer")
    return data, offsets


def _device_tables(cfg: NormalizeConfig, device: str):
    """The normalization tables where ``device``'s kernels read them (cached per array backend)."""
    return _tables_on(cfg, device, array_backend(device))


@functools.lru_cache(maxsize=8)
def _tables_on(cfg: NormalizeConfig, device: str, backend: str):
    t = load_tables(cfg)
    # the kernel's ASCII fast path assumes every ASCII codepoint maps to exactly one ASCII codepoint
    if not (np.all(np.diff(t.map_off[:129]) == 1) and t.map_cp[t.map_off[:128]].max() < 0x80):
        raise RunError(f"normalization tables for {cfg} map an ASCII codepoint to something other than one "
                       "ASCII codepoint; the kernel's fast path cannot use them")
    return to_device(t.map_off, device), to_device(t.map_cp, device)


def normalize_arrays(data, offsets, cfg: NormalizeConfig, device: str = "cpu") -> Normalized:
    """Normalize documents data[offsets[i]:offsets[i+1]] (``ops.core.normalize``: a sizes pass, then the bytes).
    Arrays stay in the device's array module (numpy on the CPU, cupy on a GPU)."""
    map_off, map_cp = _device_tables(cfg, device)
    return Normalized(*core.normalize(device, data, offsets, map_off, map_cp))


def invalid_utf8_rows(data, offsets, device: str = "cpu"):
    """bool (n,) in the device's array module: True where data[offsets[i]:offsets[i+1]] is not valid
    UTF-8. The pyarrow reader validates on the host; a reader that puts the text straight on the device
    (cudf) checks here and sends the few batches with invalid rows through the host repair instead."""
    return core.utf8_invalid(device, data, offsets)


def normalize_text(text: pa.Array, cfg: NormalizeConfig, device: str = "cpu") -> Normalized:
    """Normalize an Arrow string array (copied to the device first when device="cuda")."""
    data, offsets = arrow_text_buffers(text)
    return normalize_arrays(to_device(data, device), to_device(offsets, device), cfg, device)


def normalize_strings(texts: list[str], cfg: NormalizeConfig | None = None, device: str = "cpu") -> list[str]:
    """Convenience for notebooks and tests: normalize Python strings with the kernel."""
    norm = normalize_text(pa.array(texts, pa.large_string()), cfg or NormalizeConfig(), device)
    return [norm.text(i) for i in range(len(norm))]
