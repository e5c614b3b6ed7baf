"""Documents split into paragraphs or lines: the one definition of a paragraph in the package.

A line is a run of bytes between "\\n"s; it is blank when it holds only ASCII whitespace (space, tab, CR, VT,
FF). A paragraph is a maximal run of non-blank lines (one or more blank lines separate paragraphs); in line
mode a unit is one non-blank line. A unit's span is trimmed of ASCII whitespace at both ends (the bytes
between two units are their separator). The kernels are ``kernels/bloom.py:split_units``, launched by ``ops.bloom.split_units`` (CPU: a scan per
document; GPU: line-aligned pieces, merged back), so every program that needs paragraphs (paragraph dedup,
the filters' ``unit="paragraph"``) splits them the same way, byte for byte.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..ops import bloom as bloom_ops

SplitMode = Literal["paragraph", "line"]


@dataclass
class Units:
    """unit_off int64 (n+1,): units of document d are [unit_off[d], unit_off[d+1]); start, end int64
    (u,): absolute byte positions in the batch's data buffer."""

    unit_off: Any
    start: Any
    end: Any


def split_units(data: Any, offsets: Any, split: SplitMode, device: str = "cpu", chunk: int | None = None) -> Units:
    """Units of documents data[offsets[d]:offsets[d+1]] (data uint8 (T,), offsets int64 (n+1,)), by
    ``ops.bloom.split_units`` (CPU: a scan per document; GPU: line-aligned pieces of about ``chunk`` bytes).
    The same units either way."""
    return Units(*bloom_ops.split_units(device, data, offsets, split == "line", chunk))
