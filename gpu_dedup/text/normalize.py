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

import numpy as np
import pyarrow as pa

from ..config import NormalizeConfig
from ..errors import RunError
from ..io.text import arrow_text_buffers
from ..ops import core
from ..ops.types import Normalized  # noqa: F401 - made here (normalize_arrays), typed beneath the ops
from ..runtime.device import array_backend, to_device
from .unicode_tables import load_tables

logger = logging.getLogger(__name__)


def device_tables(cfg: NormalizeConfig, device: str):
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
    map_off, map_cp = device_tables(cfg, device)
    return Normalized(*core.normalize(device, data, offsets, map_off, map_cp))


def normalize_text(text: pa.Array, cfg: NormalizeConfig, device: str = "cpu") -> Normalized:
    """Normalize an Arrow string array (copied to the device first when device="cuda")."""
    data, offsets = arrow_text_buffers(text)
    return normalize_arrays(to_device(data, device), to_device(offsets, device), cfg, device)


def normalize_strings(texts: list[str], cfg: NormalizeConfig | None = None, device: str = "cpu") -> list[str]:
    """Convenience for notebooks and tests: normalize Python strings with the kernel."""
    norm = normalize_text(pa.array(texts, pa.large_string()), cfg or NormalizeConfig(), device)
    return [norm.text(i) for i in range(len(norm))]
