"""Documents split into paragraphs or lines: the one definition of a paragraph in the package.

A line is a run of bytes between "\\n"s; it is blank when it holds only ASCII whitespace (space, tab, CR, VT,
FF). A paragraph is a maximal run of non-blank lines (one or more blank lines separate paragraphs); in line
mode a unit is one non-blank line. A unit's span is trimmed of ASCII whitespace at both ends (the bytes
between two units are their separator). The kernels are ``kernels/bloom.py:split_units`` (CPU: a scan per
document; GPU: line-aligned pieces, merged back), so every program that needs paragraphs (paragraph dedup,
the filters' ``unit="paragraph"``) splits them the same way, byte for byte.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..device import array_module, launch, line_chunks, repeat_index

SplitMode = Literal["paragraph", "line"]


@dataclass
class Units:
    """unit_off int64 (n+1,): units of document d are [unit_off[d], unit_off[d+1]); start, end int64
    (u,): absolute byte positions in the batch's data buffer."""

    unit_off: Any
    start: Any
    end: Any


def split_units(data: Any, offsets: Any, split: SplitMode, device: str = "cpu", chunk: int | None = None) -> Units:
    """Units of documents data[offsets[d]:offsets[d+1]] (data uint8 (T,), offsets int64 (n+1,)). CPU: a scan
    per document (prange). GPU: ``split_pieces`` (line-aligned pieces of about ``chunk`` bytes). Same units."""
    xp = array_module(device)
    n = int(offsets.shape[0]) - 1
    line_mode = split == "line"
    if device == "cuda":
        return split_pieces(data, offsets, line_mode, chunk)
    counts = xp.zeros(n, xp.int64)
    if n:
        launch(device, "split_count", n, data, offsets, line_mode, counts, family="bloom")
    unit_off = xp.zeros(n + 1, xp.int64)
    xp.cumsum(counts, out=unit_off[1:])
    u = int(unit_off[-1])
    start, end = xp.empty(u, xp.int64), xp.empty(u, xp.int64)
    if u:
        launch(device, "split_write", n, data, offsets, line_mode, unit_off, start, end, family="bloom")
    return Units(unit_off, start, end)


def split_pieces(data: Any, offsets: Any, line_mode: bool, chunk: int | None = None) -> Units:
    """GPU: split_units with work per thread bounded by max(chunk, the longest line) bytes (default
    kernels/bloom_cuda.SPLIT_CHUNK; tests cut at every line): each non-empty line-aligned piece
    (device.line_chunks) is split by one thread (the CPU's device function), then a paragraph that runs over
    a cut (the piece's last line and the next piece's first line both non-blank) is merged back into one
    unit: its first part's start, its last part's end. Lines never straddle a cut (no merge in line mode)."""
    from ..kernels import bloom_cuda as kb  # the GPU's piece size (imports the CUDA kernels)

    xp = array_module("cuda")
    n = int(offsets.shape[0]) - 1
    starts, ends, bounds = line_chunks(xp, data, offsets, chunk or kb.SPLIT_CHUNK)
    keep = xp.flatnonzero(ends > starts)
    starts, ends = starts[keep], ends[keep]
    pdoc = repeat_index(xp, bounds[1:] - bounds[:-1])[keep]
    p = int(starts.shape[0])
    counts = xp.zeros(p, xp.int64)
    edges = xp.zeros((p, 2), xp.int64)
    if p:
        launch("cuda", "split_piece_count", p, data, starts, ends, line_mode, counts, edges, family="bloom")
    pbase = xp.zeros(p + 1, xp.int64)
    xp.cumsum(counts, out=pbase[1:])
    u = int(pbase[-1])
    start, end = xp.empty(u, xp.int64), xp.empty(u, xp.int64)
    if u:
        launch("cuda", "split_piece_write", p, data, starts, ends, line_mode, pbase[:-1].copy(), start, end,
               family="bloom")
    continues = xp.zeros(u, xp.bool_)  # unit i and unit i + 1 are parts of one paragraph
    if not line_mode and p > 1:
        merge = xp.flatnonzero((pdoc[1:] == pdoc[:-1]) & (edges[:-1, 1] == 1) & (edges[1:, 0] == 1))
        continues[pbase[merge + 1] - 1] = True  # the last unit of piece ``merge`` (it has one: a non-blank line)
    udoc = pdoc[repeat_index(xp, counts)]
    heads = xp.flatnonzero(xp.concatenate([xp.ones(min(u, 1), xp.bool_), ~continues[:-1]]))
    lasts = xp.flatnonzero(~continues)
    unit_off = xp.searchsorted(udoc[heads], xp.arange(n + 1, dtype=xp.int64), side="left").astype(xp.int64)
    return Units(unit_off, start[heads], end[lasts])
