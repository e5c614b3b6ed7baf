"""Unique ids: ``check_unique_ids`` and, only when ids repeat, where the repeated ones are (``locate_rows``).

The common case costs one Arrow hash pass over the ids (``count_distinct``). When some id repeats, the error
names up to 5 of them, each with its count and the positions of its first occurrences: ``file:line`` for
JSON Lines (1-based physical line), ``file row N`` for Parquet files and tables (0-based physical row). The
positions come from a second, targeted read: the global rows of those ids (one vectorised comparison per
shown id), then only the files that hold them (``file_rows``, the rows each file gave, says which; without
it the files are read in order up to the last such row), read with the same rules and positions on. That
read also gives each id as it was in the input, before invalid UTF-8 was replaced by U+FFFD: when the
occurrences of one id differ there, the error says that the collision comes from that replacement.
Without ``files`` the positions are the rows of the run (0-based, input order: the decisions' rows).
"""
from __future__ import annotations

import json
import logging
from contextlib import closing
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .batch import ReadReport, make_spec, quiet_logs
from .discover import InputError, InputFile
from .read import open_readers

logger = logging.getLogger(__package__)  # the package's one logger, "gpu_dedup.io" (see batch.quiet_logs)

_SHOWN_IDS = 5
_SHOWN_POSITIONS = 3
_LOCATE_BATCH = 8 << 20


@dataclass(frozen=True)
class Position:
    """Where a row of the run is: ``where`` ("a.jsonl:3", "b.parquet row 7") and its id as read (bytes,
    before UTF-8 repair; None for generated ids)."""

    where: str
    original: bytes | None


def _as_chunked(ids: Sequence[pa.Array] | pa.ChunkedArray | pa.Array) -> pa.ChunkedArray:
    if isinstance(ids, pa.Array):
        return pa.chunked_array([ids])
    if isinstance(ids, pa.ChunkedArray):
        return ids
    return pa.chunked_array(list(ids), type=pa.string()) if len(ids) else pa.chunked_array([], pa.string())


def check_unique_ids(ids: Sequence[pa.Array] | pa.ChunkedArray | pa.Array, files: list[InputFile] | None = None,
                     file_rows: Sequence[int] | None = None, **reader: Any) -> None:
    """Check that the run's ids are unique. Vectorised: one Arrow hash pass when they are.

    Args:
        ids: the run's ids in row order: pa.string() arrays (one per batch), a chunked array or one array.
        files: the run's inputs, read again to find the positions only when an id repeats; None: the
            positions are rows of the run (0-based, in input order).
        file_rows: the rows each file gave (limits that read to the files concerned); None: the files are
            read in order up to the last row needed.
        **reader: ``iter_batches``' id_field, text_field and on_error of the run.

    Raises:
        InputError: some id repeats. The message names up to 5 duplicated ids with their counts and positions
            (module docstring), says when a collision comes from replacing invalid UTF-8, and gives the fix.
    """
    ids = _as_chunked(ids)
    if len(ids) == 0 or pc.count_distinct(ids, mode="all").as_py() == len(ids):
        return
    counts = pc.value_counts(ids)
    values, freq = counts.field("values"), counts.field("counts")
    dup = pc.greater(freq, 1)
    values, freq = values.filter(dup), freq.filter(dup)
    order = pc.sort_indices(pa.table({"c": freq, "v": values}), sort_keys=[("c", "descending"), ("v", "ascending")])
    top = order[:_SHOWN_IDS].to_pylist()
    shown = [(values[i].as_py(), freq[i].as_py()) for i in top]
    rows = {v: np.flatnonzero(pc.equal(ids, pa.scalar(v, ids.type)).to_numpy(zero_copy_only=False))[:_SHOWN_POSITIONS]
            for v, _ in shown}
    found: dict[int, Position] | None = None
    if files is not None:
        wanted = np.unique(np.concatenate(list(rows.values())))
        try:
            found = locate_rows(files, wanted, file_rows, **reader)
        except Exception as e:  # noqa: BLE001 - the duplicate is the error to raise; positions are a help
            logger.debug("could not locate the duplicated ids in the inputs: %r", e)
        if found is not None and not all(int(r) in found for r in wanted):
            found = None
    parts, replaced = [], False
    for v, n in shown:
        rs = [int(r) for r in rows[v]]
        where = ", ".join(found[r].where for r in rs) if found is not None else "rows " + ", ".join(map(str, rs))
        more = ", ..." if n > len(rs) else ""
        part = f"{v!r} ({n} times: {where}{more})"
        originals = list(dict.fromkeys(found[r].original for r in rs if found[r].original is not None)) if found else []
        if len(originals) > 1:
            replaced = True
            part += (f" — the ids differ in the input ({', '.join(repr(o) for o in originals)}): the collision "
                     f"comes from replacing their invalid UTF-8 with U+FFFD")
        parts.append(part)
    extra = f" and {len(values) - len(top)} more duplicated id(s)" if len(values) > len(top) else ""
    rows_note = "" if found is not None else " (positions are rows of the run: 0-based, in input order)"
    fix = ("Pass --id-field with a unique field (Python: id_field='NAME'), or no id field for generated "
           "'<file>:<row>' ids (--no-id-field; Python: id_field=None), or fix the data")
    if replaced:
        fix = f"Fix the ids' encoding (only valid UTF-8 keeps them apart). {fix}"
    raise InputError(f"ids must be unique; duplicated: {'; '.join(parts)}{extra}{rows_note}. {fix}")


def locate_rows(files: list[InputFile], rows: np.ndarray, file_rows: Sequence[int] | None = None, *,
                id_field: str | None, text_field: str, on_error: str = "raise", **_ignored: Any
                ) -> dict[int, Position]:
    """Where some rows of a run are in its inputs, by reading the files that hold them once more (silently:
    the first read logged what there was to say).

    Args:
        files: the run's inputs.
        rows: int64 global row ids (any order; repeats ignored), numbered as ``iter_batches`` numbers them
            with the same files, id_field, text_field and on_error.
        file_rows: the rows each file gave, so that only the files holding ``rows`` are read; None: the
            files are read in order up to the last row wanted.
        id_field: the run's id field, or None.
        text_field: the run's text field.
        on_error: the run's "raise" or "skip".
        **_ignored: other ``iter_batches`` keywords (batch_bytes, ...), accepted and not used.

    Returns:
        {global row: ``Position``}: ``where`` ("a.jsonl:3", "b.parquet row 7") and the id as read (bytes,
        before UTF-8 repair; None for generated ids). A row beyond the inputs is absent.

    Raises:
        ConfigError: a bad spec (``make_spec``).
        InputError: a file that cannot be read again with these settings.
    """
    rows = np.unique(np.asarray(rows, np.int64))
    spec = make_spec(id_field, text_field, on_error, None, positions=True)
    out: dict[int, Position] = {}
    if len(rows) == 0:
        return out
    starts = None
    if file_rows is not None:
        counts = np.asarray(file_rows, np.int64)
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        needed = set(np.searchsorted(np.cumsum(counts), rows, side="right").tolist())
    first = 0
    report = ReadReport()
    with quiet_logs():
        for i, f in enumerate(files):
            if first > rows[-1]:
                break
            end = None
            if starts is not None:
                if i not in needed:
                    continue
                first, end = int(starts[i]), int(starts[i] + counts[i])
            first += _locate_in_file(f, spec, report, rows, first, out, end)
    return out


def _locate_in_file(f: InputFile, spec: Any, report: ReadReport, rows: np.ndarray, first: int,
                    out: dict[int, Position], end: int | None) -> int:
    """Positions of the wanted ``rows`` in file ``f``, whose rows are the global rows ``first ..`` (``end``:
    its end, when known: the read stops after its last wanted row); returns the rows read from it."""
    k = 0
    with closing(open_readers([f], spec, report, _LOCATE_BATCH, all_columns=False, threads=1)) as readers:
        _, reader = next(readers)
        with closing(reader.chunks()) as chunks:
            for chunk in chunks:
                n = chunk.rows
                lo, hi = np.searchsorted(rows, [first + k, first + k + n])
                for r in rows[lo:hi].tolist():
                    out[r] = _position(f, spec, chunk, r - first - k)
                k += n
                if end is not None and np.searchsorted(rows, end) <= hi:  # no wanted row left in the file
                    break
    return k


def _position(f: InputFile, spec: Any, chunk: Any, j: int) -> Position:
    pos = int(chunk.positions[j])
    if f.fmt == "jsonl":
        original = None
        if chunk.ids is not None:
            original = _jsonl_id(chunk.raw[int(chunk.starts[j]):int(chunk.ends[j])], spec.id_field)
        return Position(f"{f.relpath}:{pos}", original)
    original = chunk.raw_ids[j].as_py() if chunk.raw_ids is not None else None
    return Position(f"{f.relpath} row {pos}", original)


def _jsonl_id(line: memoryview, id_field: str) -> bytes | None:
    """The id of a JSON line as written: its bytes, invalid UTF-8 and lone surrogate escapes kept."""
    try:
        obj = json.loads(bytes(line).decode("utf-8", "surrogateescape"), strict=False)
    except (ValueError, RecursionError):
        return None
    v = obj.get(id_field) if isinstance(obj, dict) else None
    if isinstance(v, bool) or not isinstance(v, (str, int)):
        return None
    if isinstance(v, int):
        return str(v).encode()
    try:
        return v.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return v.encode("utf-8", "surrogatepass")


