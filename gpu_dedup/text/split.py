"""Documents split into paragraphs, lines or sentences: the one definition of those units in the package.

Lines and paragraphs
    A line is a run of bytes between "\\n"s; it is blank when it holds only ASCII whitespace (space, tab, CR,
    VT, FF). A paragraph is a maximal run of non-blank lines (one or more blank lines separate paragraphs); in
    line mode a unit is one non-blank line.

Sentences (``split="sentence"``; a stated rule, not a trained model)
    A sentence never runs over a newline (extracted web text holds one paragraph per line, and a line break
    ends a sentence there; NLTK's punkt, which C4 and datatrove use, does not split at a newline, so lines of a
    headline and a body joined by one newline are two sentences here and one there). Inside a line, a
    *terminal run* is a maximal run that starts with a terminal ('.', '!', '?', or the wide U+3002 "。",
    U+FF01 "！", U+FF1F "？") and goes on over terminals and closers ('"', "'", ')', ']'). A sentence ends
    right after a terminal run that
      - holds a wide terminal (Chinese and Japanese put no space after a sentence), or
      - ends the line, or
      - is followed by ASCII blanks and then a byte that is not an ASCII lowercase letter a-z.
    So "3.14", "e.g. the", "a.m. on" and "U.S.-made" do not end a sentence (the lookahead is what punkt's
    orthographic heuristic also uses: a lowercase next word continues the sentence), while "Dr. Smith" does (a
    known limit of any rule without an abbreviation list: both sentences are then shorter units, still exact).
    Other scripts' terminals (Devanagari danda, Arabic question mark, ...) are not terminals: their lines are
    one sentence each.

Spans
    Every unit's span is trimmed of ASCII whitespace at both ends (the bytes between two units are their
    separator).

Three-sentence spans (``sentence_windows``: C4's unit, seed 002 §21.3.1)
    The windows of ``size`` consecutive sentences of a document (sentences i..i+size-1, for every i; they overlap
    and run over line breaks, as datatrove's n-sentence spans do over its sentence list); a document with fewer
    sentences has none.

The kernels are ``kernels/bloom.py:split_units`` / ``split_sentences``, launched by ``ops.bloom.split_units``
(CPU: a scan per document; GPU: line-aligned pieces, merged back for paragraphs; lines and sentences never
straddle a piece's cut), so every program that needs these units (paragraph dedup, the filters'
``unit="paragraph"``) splits them the same way, byte for byte.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..runtime.device import array_module, repeat_index
from ..errors import ConfigError
from ..constants import SPLIT_LINE, SPLIT_PARAGRAPH, SPLIT_SENTENCE
from ..ops import bloom as bloom_ops

SplitMode = Literal["paragraph", "line", "sentence"]
MODES = {"paragraph": SPLIT_PARAGRAPH, "line": SPLIT_LINE, "sentence": SPLIT_SENTENCE}


@dataclass
class Units:
    """unit_off int64 (n+1,): units of document d are [unit_off[d], unit_off[d+1]); start, end int64
    (u,): absolute byte positions in the batch's data buffer."""

    unit_off: Any
    start: Any
    end: Any


@dataclass
class Windows:
    """Windows of ``size`` consecutive units: first int64 (w,) the index of each window's first unit (ascending);
    start, end int64 (w,) its byte span (the first unit's start, the last unit's end); win_off int64 (n+1,):
    document d's windows are [win_off[d], win_off[d+1])."""

    win_off: Any
    first: Any
    start: Any
    end: Any


def split_units(data: Any, offsets: Any, split: SplitMode, device: str = "cpu", chunk: int | None = None) -> Units:
    """Units of documents data[offsets[d]:offsets[d+1]] (data uint8 (T,), offsets int64 (n+1,)), by
    ``ops.bloom.split_units`` (CPU: a scan per document; GPU: line-aligned pieces of about ``chunk`` bytes).
    The same units either way.

    Raises:
        ConfigError: ``split`` is not one of ``SplitMode``.
    """
    if split not in MODES:
        raise ConfigError(f"split must be one of {tuple(MODES)}, got {split!r}")
    return Units(*bloom_ops.split_units(device, data, offsets, MODES[split], chunk))


def sentence_windows(units: Units, size: int, device: str = "cpu") -> Windows:
    """The windows of ``size`` consecutive units of each document (module docstring), arrays of the device's
    module: document d with c units has max(c - size + 1, 0) windows.

    Raises:
        ConfigError: ``size`` < 1.
    """
    if not isinstance(size, int) or size < 1:
        raise ConfigError(f"sentence_windows needs size >= 1, got {size!r}")
    xp = array_module(device)
    counts = units.unit_off[1:] - units.unit_off[:-1]
    per_doc = xp.maximum(counts - (size - 1), 0)
    win_off = xp.zeros(per_doc.shape[0] + 1, xp.int64)
    xp.cumsum(per_doc, out=win_off[1:])
    doc = repeat_index(xp, per_doc)
    first = xp.arange(doc.shape[0], dtype=xp.int64) - win_off[doc] + units.unit_off[doc]
    return Windows(win_off, first, units.start[first], units.end[first + (size - 1)])


def whitespace_words(text: Any) -> Any:
    """int64 (n,): the words of each document of ``text`` (a pyarrow string array, no nulls): maximal runs of
    characters other than ASCII whitespace (space, tab, newline, vertical tab, form feed, carriage return), the
    model-free stand-in for tokens the reports count retention in. Arrow's ASCII split of the trimmed text (4x
    the speed of counting ``\\S+`` matches; docs/performance.md)."""
    import numpy as np
    import pyarrow.compute as pc

    trimmed = pc.ascii_trim_whitespace(text)
    runs = pc.list_value_length(pc.ascii_split_whitespace(trimmed)).to_numpy(zero_copy_only=False)
    # a blank text splits into one empty string
    return np.where(pc.binary_length(trimmed).to_numpy(zero_copy_only=False) == 0, 0, runs).astype(np.int64)
