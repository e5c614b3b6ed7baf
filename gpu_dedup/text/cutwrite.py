"""The documents with their spans cut (paragraph dedup, exact-substring dedup, the filter's paragraph unit), written
in the input's format (``write_cut_documents``): untouched JSON lines verbatim, changed ones re-serialized with the
text replaced, Parquet with its schema and codec; ``apply_cuts`` cuts the ranges out of a batch's text."""
from __future__ import annotations

import json
import logging
import os
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .. import io
from ..errors import ConfigError, RunError
from ..io.text import arrow_text_buffers
from ..ops import bloom as bloom_ops

if TYPE_CHECKING:
    from ..config import InputConfig

logger = logging.getLogger(__name__)

def apply_cuts(data: np.ndarray, offsets: np.ndarray, doc: np.ndarray, cs: np.ndarray,
               ce: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """Host. Documents data[offsets[d]:offsets[d+1]] with the absolute ranges [cs[i], ce[i]) of document
    doc[i] removed (doc ascending; ranges ascending and disjoint within a document). Returns
    (large_string array, new byte length per document)."""
    n = offsets.shape[0] - 1
    lengths = np.diff(offsets)
    new_len = lengths - np.bincount(doc, weights=(ce - cs), minlength=n).astype(np.int64) if cs.shape[0] else lengths
    new_off = np.zeros(n + 1, np.int64)
    np.cumsum(new_len, out=new_off[1:])
    if cs.shape[0] == 0:
        buf = data[int(offsets[0]):int(offsets[-1])]
    else:
        cut_off = np.searchsorted(doc, np.arange(n + 1), side="left").astype(np.int64)
        buf = bloom_ops.cut_copy_host(data, offsets, cut_off, cs.astype(np.int64), ce.astype(np.int64), new_off)
    arr = pa.LargeStringArray.from_buffers(n, pa.py_buffer(new_off), pa.py_buffer(np.ascontiguousarray(buf)))
    return arr, new_len


class _SpanCursor:
    """Streams (row, cut_start, cut_end) of removed_spans.parquet (ascending rows) chunk by chunk."""

    def __init__(self, path: str) -> None:
        self._it: Iterator[pa.RecordBatch] = pq.ParquetFile(path).iter_batches(
            batch_size=1 << 16, columns=["row", "cut_start", "cut_end"])
        self._buf = [np.zeros(0, np.int64)] * 3
        self._done = False

    def take(self, r0: int, r1: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Spans of rows in [r0, r1) (all earlier rows were already taken)."""
        while not self._done and (self._buf[0].shape[0] == 0 or self._buf[0][-1] < r1):
            try:
                rb = next(self._it)
            except StopIteration:
                self._done = True
                break
            self._buf = [np.concatenate([b, rb.column(i).to_numpy()]) for i, b in enumerate(self._buf)]
        k = int(np.searchsorted(self._buf[0], r1, side="left"))
        got = [b[:k] for b in self._buf]
        self._buf = [b[k:] for b in self._buf]
        if got[0].shape[0] and got[0][0] < r0:
            raise RunError("removed_spans.parquet rows are out of step with the input; rerun the stage")
        return got[0], got[1], got[2]


def write_cut_documents(files: list, spans_path: str, out_dir: str, cfg: "InputConfig",
                        batch_bytes: int = 8 << 20, keep: np.ndarray | None = None) -> dict[str, int]:
    """Re-read the inputs (same reader, so row numbers match pass 1) and write every accepted row with its
    cut ranges removed to ``out_dir/<relpath>`` in the input's format (module docstring). All files
    appear together at the end. ``batch_bytes``: the reader's block size (text read at a time); ``keep``:
    bool per row, only those rows are written (the filter's kept documents; None: every row)."""
    from contextlib import ExitStack

    out_dir = os.path.abspath(out_dir)
    inputs = {os.path.abspath(f.path) for f in files if f.fmt != "table"}
    for f in files:
        if io.output_path(out_dir, f) in inputs:
            raise ConfigError(f"output {io.output_path(out_dir, f)!r} would overwrite an input; choose another "
                              "output directory")
    spec = io.make_spec(cfg.id_field, cfg.text_field, cfg.on_error, None)
    cursor = _SpanCursor(spans_path)
    row, rows_written, changed, n_files = 0, 0, 0, 0
    with ExitStack() as stack:
        for _, reader in io.open_readers(files, spec, io.ReadReport(), batch_bytes, all_columns=True):
            f = reader.f
            target = io.output_path(out_dir, f)
            writer = stream = None
            for chunk in reader.chunks():
                if f.fmt == "jsonl" and stream is None:  # opened at the first rows: a file skipped whole has none
                    stream = _jsonl_stream(stack, target, f)
                n = len(chunk.text)
                srow, cs, ce = cursor.take(row, row + n)
                doc = srow - row
                data, offsets = _text_buffers(chunk.text)
                new_text, _ = apply_cuts(data, offsets, doc, cs + offsets[:-1][doc], ce + offsets[:-1][doc])
                touched = np.unique(doc)
                sel = None if keep is None else np.flatnonzero(keep[row:row + n])
                changed += int(touched.shape[0])
                rows_written += n if sel is None else int(sel.shape[0])
                row += n
                if stream is not None:
                    _write_jsonl_chunk(stream, chunk, touched, new_text, cfg.text_field, sel)
                    continue
                if writer is None:
                    writer = _parquet_writer(stack, target, reader)
                rb = chunk.record.filter(pa.array(chunk.valid))
                if sel is not None:
                    rb, new_text = rb.take(pa.array(sel)), new_text.take(pa.array(sel))
                idx = rb.schema.get_field_index(cfg.text_field)
                col = new_text.cast(rb.schema.field(idx).type)
                writer.write_batch(pa.RecordBatch.from_arrays(
                    [col if i == idx else rb.column(i) for i in range(rb.num_columns)], schema=rb.schema))
            if f.fmt == "jsonl" and stream is None and not reader.unreadable:
                stream = _jsonl_stream(stack, target, f)  # no rows: an empty output, as the input
            if writer is None and stream is None and getattr(reader, "schema", None) is not None \
                    and not reader.unreadable:
                writer = _parquet_writer(stack, target, reader)  # no rows: still write the schema
            if writer is not None or stream is not None:
                n_files += 1
            else:
                logger.warning("%s could not be read; no output written for it", f.relpath)
    return {"files": n_files, "rows_written": rows_written, "rows_changed": changed}


def _jsonl_stream(stack: Any, target: str, f: Any) -> Any:
    return stack.enter_context(pa.output_stream(stack.enter_context(io.atomic_path(target)), compression=f.compression))


def _parquet_writer(stack: Any, target: str, reader: Any) -> pq.ParquetWriter:
    tmp = stack.enter_context(io.atomic_path(target))
    codec = io.parquet_codec(reader.f) if reader.f.fmt == "parquet" else "snappy"
    w = pq.ParquetWriter(tmp, reader.schema, compression=codec)
    stack.callback(w.close)
    return w


def _text_buffers(text: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    if pa.types.is_string(text.type):
        text = text.cast(pa.large_string())
    return arrow_text_buffers(text)


def _write_jsonl_chunk(stream: Any, chunk: Any, touched: np.ndarray, new_text: pa.Array, text_field: str,
                       sel: np.ndarray | None = None) -> None:
    """Untouched rows: their original line bytes; touched rows: the parsed object with the text replaced,
    re-serialized (key order kept, non-ASCII kept as UTF-8). ``sel``: the rows written (ascending; None: all)."""
    raw = memoryview(chunk.raw)
    starts, ends = chunk.starts, chunk.ends
    if sel is not None:  # only these rows: the others' lines are left out (the cut rows among them too)
        starts, ends = starts[sel], ends[sel]
        pos = np.searchsorted(sel, touched)
        touched = pos[(pos < sel.shape[0]) & (sel[np.minimum(pos, max(sel.shape[0] - 1, 0))] == touched)] \
            if sel.shape[0] else touched[:0]
        new_text = new_text.take(pa.array(sel))
    prev = 0
    for i in touched.tolist():
        if i > prev:
            _write_rows(stream, raw, starts[prev:i], ends[prev:i])
        line = bytes(raw[starts[i]:ends[i]]).decode("utf-8", "replace")
        obj = json.loads(line, strict=False)
        obj[text_field] = new_text[i].as_py()
        stream.write((json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8"))
        prev = i + 1
    if prev < starts.shape[0]:
        _write_rows(stream, raw, starts[prev:], ends[prev:])


def _write_rows(stream: Any, raw: memoryview, starts: np.ndarray, ends: np.ndarray) -> None:
    """Original line bytes of consecutive rows, adjacent lines merged into one write; a file's last line
    without a newline gets one (a re-serialized row may follow it)."""
    if starts.shape[0] == 0:
        return
    breaks = np.flatnonzero(starts[1:] != ends[:-1]) + 1
    run_s = starts[np.concatenate(([0], breaks))]
    run_e = ends[np.concatenate((breaks - 1, [ends.shape[0] - 1]))]
    for s, e in zip(run_s.tolist(), run_e.tolist()):
        stream.write(raw[s:e])
    if raw[ends[-1] - 1] != 0x0A:
        stream.write(b"\n")
