"""Atomic writing (``atomic_path``, ``write_parquet_atomic``, ``write_json_atomic``) and the writing of the
kept rows (``write_kept``).

Writing
    ``write_kept`` re-reads the inputs with the same reader (so row numbering is identical by
    construction) and writes ``out_dir/<relpath>`` per input: JSON Lines copy the original line bytes of
    kept rows verbatim (same compression); Parquet keeps the original schema and codec; an in-memory
    table becomes ``out_dir/deduplicated.parquet``. Files are written in parallel (``read_threads`` at a
    time, each streamed in chunks); a file's first row number comes from the per-file row counts of the
    read (``file_rows``), or a counting pass when they are not given. Every file is written to a temporary
    name and renamed into place only after all inputs were read and every file's row count matched.

Annotation (``annotate``)
    Integer columns per kept row (a dedup run's ``dup_cluster_size``, ``dup_cluster_id``): Parquet and
    tables get them as int64 columns after the original ones; a JSON Lines line gets them appended as the
    object's last members (``, "name": value`` inserted before its closing brace), every other byte of the
    line unchanged. An input that already has such a field is an error naming it (never two values).

Every path ``atomic_path`` writes is first passed to the hooks in ``WRITE_HOOKS`` (before its temporary file
exists): ``gpu_dedup.runtime.outputs`` records there what a run writes in its output directory.
"""
from __future__ import annotations

import json
import logging
import math
import os
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, Literal, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import ConfigError, DataError, RunError
from .arrow import ArrowReader
from .batch import ReadReport, Spec, make_spec, quiet_logs
from .blocks import UTF8_BOM, read_blocks, split_lines
from .discover import TABLE_OUTPUT_NAME, InputFile
from .jsonl import JsonlReader
from .parquet import resolve_read_threads
from .read import open_readers
from .remote import open_parquet, open_stream

logger = logging.getLogger(__package__)  # the package's one logger, "gpu_dedup.io" (see batch.quiet_logs)


_PARQUET_CODECS = {"SNAPPY": "snappy", "GZIP": "gzip", "BROTLI": "brotli", "ZSTD": "zstd", "LZ4": "lz4",
                   "LZ4_RAW": "lz4", "UNCOMPRESSED": "none"}


def _fsync_path(path: str, directory: bool = False) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if directory else 0))
    except OSError:
        if directory:
            return  # some platforms/filesystems cannot open directories; the rename is still atomic
        raise
    try:
        os.fsync(fd)
    except OSError:
        if not directory:
            raise
    finally:
        os.close(fd)


# Called with the absolute final path of every file ``atomic_path`` writes, before its temporary file is
# created (so a record made there survives a kill at any later moment). Empty unless a run records its outputs.
WRITE_HOOKS: list[Callable[[str], None]] = []


@contextmanager
def atomic_path(path: str | os.PathLike, record: bool = True, durable: bool = True) -> Iterator[str]:
    """Write a file atomically: readers never see a partial ``path``.

    A context manager: on success the temporary file is fsynced and renamed onto ``path`` (and the directory
    fsynced); on an exception it is deleted and the exception re-raised. The directory is created if needed.

    Args:
        path: the final file.
        record: pass the absolute final path to the hooks of ``WRITE_HOOKS`` first (False: not reported, for
            the tool's own state files, e.g. a lock's info).
        durable: fsync the file and its directory (False: atomic for readers, durable once the caller syncs
            the file system: the Ray engine's exchange files, one ``syncfs`` per task before its marker).

    Yields:
        The temporary path to write, in the same directory: ``.<name>.<random>.tmp`` (a leading dot, so
        ``resolve_inputs`` never reads it; a unique suffix, so concurrent writers never clash).
    """
    final = os.path.abspath(os.fspath(path))
    for hook in tuple(WRITE_HOOKS) if record else ():
        hook(final)
    directory = os.path.dirname(final)
    os.makedirs(directory, exist_ok=True)
    # Leading dot: directory scans (resolve_inputs) skip it; unique suffix: concurrent writers never clash.
    tmp = os.path.join(directory, f".{os.path.basename(final)}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        yield tmp
        if durable:
            _fsync_path(tmp)
        os.replace(tmp, final)
        if durable:
            _fsync_path(directory, directory=True)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_parquet_atomic(table: pa.Table, path: str | os.PathLike) -> None:
    """Write ``table`` to a Parquet file atomically (``atomic_path``, recorded), with pyarrow's defaults.

    Args:
        table: the table to write.
        path: the final file (its directory is created if needed).
    """
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def _json_safe(obj: Any) -> Any:
    """Non-finite floats -> None; numpy scalars/arrays -> Python values (JSON has no NaN)."""
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _json_safe(obj.tolist())
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def write_json_atomic(obj: Any, path: str | os.PathLike, record: bool = True, durable: bool = True) -> None:
    """Write ``obj`` as indented JSON, atomically (``atomic_path``).

    Args:
        obj: JSON-able values; numpy scalars and arrays become Python values, NaN / inf become null, key order
            is kept.
        path: the final file.
        record: as ``atomic_path``'s (False: not reported to ``WRITE_HOOKS``).
        durable: as ``atomic_path``'s.
    """
    text = json.dumps(_json_safe(obj), indent=2, sort_keys=False, allow_nan=False)
    with atomic_path(path, record, durable) as tmp:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")


def read_json_record(path: str) -> dict[str, Any]:
    """A run's JSON record (run.json, semantic.json, ...: what ``write_json_atomic`` wrote) as a dict.

    Args:
        path: the record's file.

    Returns:
        Its JSON object.

    Raises:
        DataError: a damaged record (cut short, edited, not UTF-8, not an object), naming the file and the fix.
    """
    try:
        with open(path, encoding="utf-8") as fh:
            got = json.load(fh)
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        raise DataError(f"{path!r} is not readable JSON ({exc}); the run's record is damaged: run it again "
                        "(with --overwrite) to rewrite it") from None
    if not isinstance(got, dict):
        raise DataError(f"{path!r} holds a JSON {type(got).__name__}, not the object a run writes; the run's "
                        "record is damaged: run it again (with --overwrite) to rewrite it")
    return got


def parquet_codec(f: InputFile) -> str:
    """The codec a Parquet input's copy is written with: that of its first column chunk.

    Args:
        f: a Parquet ``InputFile``, local or remote.

    Returns:
        A ``pq.write_table`` compression name ("snappy", "gzip", "brotli", "zstd", "lz4" or "none");
        "snappy" for a file without row groups or an unknown codec.
    """
    md = open_parquet(f).metadata
    if md.num_row_groups and md.num_columns:
        return _PARQUET_CODECS.get(md.row_group(0).column(0).compression, "snappy")
    return "snappy"


def output_path(out_dir: str, f: InputFile) -> str:
    """Where ``write_kept`` writes the kept rows of one input.

    Args:
        out_dir: the output directory.
        f: an input.

    Returns:
        ``out_dir/<relpath>`` (with the local separator), or ``out_dir/deduplicated.parquet``
        (``TABLE_OUTPUT_NAME``) for an in-memory table.
    """
    rel = TABLE_OUTPUT_NAME if f.fmt == "table" else f.relpath
    return os.path.join(out_dir, *rel.split("/"))


_WRITE_CHUNK = 8 << 20  # bytes of input per chunk read by write_kept (raw JSON block / Parquet record batch)


def write_kept(files: list[InputFile], keep: np.ndarray, out_dir: str | os.PathLike, *, id_field: str | None,
               text_field: str, on_error: Literal["raise", "skip"], file_rows: Sequence[int] | None = None,
               read_threads: int | None = None, annotate: dict[str, np.ndarray] | None = None,
               texts_of: np.ndarray | None = None) -> dict:
    """Write the rows with ``keep[global_row]`` True to ``out_dir`` (layout in the module docstring).

    Args:
        files: the run's inputs (at most one in-memory table).
        keep: bool [total rows], numbered as ``iter_batches`` with the same files / id_field / text_field /
            on_error.
        out_dir: the output directory; no output may be one of the inputs.
        id_field: the run's id field, or None.
        text_field: the run's text field.
        on_error: the run's "raise" or "skip" (so that the rows are numbered as the run numbered them).
        file_rows: the rows ``iter_batches`` gave per file (the run's pass 1 knows them), which place each
            file's rows in ``keep``; None: counted here first, exactly as ``iter_batches`` numbers them (with
            on_error='raise' cheaply: Parquet metadata, non-blank JSON lines; with 'skip' by reading the files
            once more, as they are read for writing). Every file is checked to hold the rows it was given.
        read_threads: files written at a time (below; None: ``pyarrow.cpu_count()``).
        annotate: column name -> int64 [total rows], added to every kept row (module docstring), or None.
        texts_of: global rows (int64, any order) whose texts to pick up while their files pass through, kept or
            not (a run's report shows them: no second read of the inputs), or None.

    Returns:
        ``{"files": n_files_written, "rows_written": m}`` (a file that could not be read, skipped with
        on_error='skip', is not written and not counted); with ``texts_of`` also ``"texts"``: {row: text} of
        those rows (the text as the reader gives it), for the caller to take out.

    Raises:
        ConfigError: ``keep`` not a 1-D bool array; several in-memory tables; an output that would overwrite
            an input; ``file_rows`` without one count >= 0 per file; ``keep`` or an ``annotate`` column whose
            length is not the inputs' row count; a bad ``read_threads`` or spec.
        DataError: a file that holds more or fewer rows than it was given; an input that already has an
            annotation's field or column.
        InputError: a bad row or file with on_error='raise' (as ``iter_batches``).

    Files are written in parallel, ``read_threads`` at a time (None: ``pyarrow.cpu_count()``, as the
    reader's default; 1: one after the other on this thread, no thread started), each streamed in chunks
    of about 8 MiB of input (``_WRITE_CHUNK``; a JSON block, or the decoded record batches of a Parquet
    range), never a whole file. With fewer files than threads, a Parquet file's row groups are also
    decoded ahead on the spare threads (``read_threads // files`` per file), up to 2 chunks per spare
    thread, while its current chunk is filtered and encoded. Memory: about ``read_threads x 8 MiB`` of
    input in flight, never more than ``2 x read_threads x 8 MiB`` (plus what the JSON parser / Parquet
    decoder and encoder need per chunk, and any single line or row group larger than a chunk). The
    outputs are byte for byte those of a sequential write.

    All outputs become visible together at the end, only if every file was written and the row count
    matched; an error in any file removes every output and raises the first error in file order.
    """
    keep = np.asarray(keep)
    if keep.ndim != 1 or keep.dtype != np.bool_:
        raise ConfigError(f"keep must be a 1-D bool array indexed by global row id, got dtype {keep.dtype} "
                          f"shape {keep.shape}")
    if sum(f.fmt == "table" for f in files) > 1:
        raise ConfigError("write_kept writes one in-memory table to deduplicated.parquet; got several tables, "
                          "concatenate them first")
    out_dir = os.path.abspath(os.fspath(out_dir))
    inputs = {os.path.abspath(f.path) for f in files if f.fmt != "table"}
    for f in files:
        target = output_path(out_dir, f)
        if target in inputs:
            raise ConfigError(f"output {target!r} would overwrite an input; choose another output directory")
    spec = make_spec(id_field, text_field, on_error, None)
    threads = resolve_read_threads(read_threads)
    if file_rows is None:
        counts = _ordered(lambda i: _count_rows(files[i], spec), len(files), min(threads, len(files)), "count")
    else:
        counts = [int(n) for n in file_rows]
        if len(counts) != len(files) or any(n < 0 for n in counts):
            raise ConfigError(f"file_rows must hold one row count >= 0 per input file ({len(files)}), got "
                              f"{len(counts)} value(s)")
    total = sum(counts)
    if total != len(keep):
        raise ConfigError(f"keep has {len(keep)} entries but the inputs have {total} rows; pass the same files, "
                          f"id_field, text_field and on_error as to iter_batches")
    annotate = dict(annotate or {})
    for name, values in annotate.items():
        if np.shape(values) != keep.shape:
            raise ConfigError(f"annotate[{name!r}] must have one value per row ({len(keep)}), got shape "
                              f"{np.shape(values)}")
        annotate[name] = np.asarray(values, np.int64)
    firsts = np.concatenate(([0], np.cumsum(counts, dtype=np.int64)[:-1])).tolist() if files else []
    workers = max(1, min(threads, len(files)))
    decode = threads // workers  # a file's Parquet decoding threads: > 1 only with fewer files than threads
    stop = _Stop()

    pick = np.unique(np.asarray(texts_of if texts_of is not None else [], np.int64))

    def job(i: int) -> _Written:
        try:
            rows = slice(firsts[i], firsts[i] + counts[i])
            here = pick[(pick >= firsts[i]) & (pick < firsts[i] + counts[i])] - firsts[i]
            done = _write_file(files[i], spec, keep[rows], len(keep), out_dir, decode, lambda: stop.after(i),
                               {k: v[rows] for k, v in annotate.items()}, here)
            done.texts = {firsts[i] + r: t for r, t in done.texts.items()}  # file rows -> global rows
            return done
        except BaseException:
            stop.failed(i)  # later files stop at their next chunk; earlier ones go on (their error would win)
            raise

    totals = {"files": 0, "rows": 0}
    texts: dict[int, str] = {}
    with ExitStack() as stack:  # every file's temporary output: renamed together at the end, or removed

        def take(done: _Written) -> None:  # in file order
            stack.enter_context(done.outputs)
            if done.unreadable:
                logger.warning("%s could not be read; no output written for it", done.relpath)
            totals["files"] += done.files
            totals["rows"] += done.rows
            texts.update(done.texts)

        _ordered(job, len(files), workers, "write", take=take,
                 discard=lambda done: stack.enter_context(done.outputs), abort=lambda: stop.failed(-1))
    os.makedirs(out_dir, exist_ok=True)  # there even when no file is written (every input skipped or empty)
    written = {"files": totals["files"], "rows_written": totals["rows"]}
    return written if texts_of is None else {**written, "texts": texts}


@dataclass
class _Written:
    """One file written by ``_write_file``: its temporary output (renamed onto the output path when
    ``outputs`` exits without an exception, removed with one), files written (0 or 1), rows kept, and the
    texts picked up (row -> text)."""

    relpath: str
    outputs: ExitStack
    files: int
    rows: int
    unreadable: bool = False
    texts: dict[int, str] = field(default_factory=dict)


class _Aborted(RunError):
    """A file's write stopped because an earlier file failed (never reaches the caller)."""


class _Stop:
    """The lowest index of a failed file: files after it stop, the ones before it go on."""

    def __init__(self) -> None:
        self.first: float = math.inf
        self.lock = threading.Lock()

    def failed(self, i: int) -> None:
        with self.lock:
            self.first = min(self.first, i)

    def after(self, i: int) -> bool:
        return i > self.first


def _ordered(fn: Callable[[int], Any], n: int, workers: int, name: str, *,
             take: Callable[[Any], None] | None = None, discard: Callable[[Any], None] | None = None,
             abort: Callable[[], None] | None = None) -> list:
    """``[fn(0), .., fn(n - 1)]``, computed ``workers`` at a time (1: on this thread, in order), each result
    passed to ``take`` in index order as soon as it and the ones before it are done. The first exception in
    index order is raised, after ``abort()`` and once every started call has ended; results that came after
    it go to ``discard``."""
    results: list = []
    if workers <= 1 or n <= 1:
        for i in range(n):
            res = fn(i)
            if take is not None:
                take(res)
            results.append(res)
        return results
    executor = ThreadPoolExecutor(workers, thread_name_prefix=f"gpu_dedup-{name}")
    futures = [executor.submit(fn, i) for i in range(n)]
    try:
        for fut in futures:
            res = fut.result()
            if take is not None:
                take(res)
            results.append(res)
        return results
    except BaseException:
        if abort is not None:
            abort()
        for fut in futures:  # the ones not started never will
            fut.cancel()
        for fut in futures[len(results):]:  # wait for the running ones (the first error is the one raised)
            if not fut.cancelled() and fut.exception() is None and discard is not None:
                discard(fut.result())
        raise
    finally:
        executor.shutdown(wait=True)


def _write_file(f: InputFile, spec: Spec, keep: np.ndarray, keep_len: int, out_dir: str, decode_threads: int,
                stopped: Any, annotate: dict[str, np.ndarray] | None = None,
                pick: np.ndarray | None = None) -> _Written:
    """Write the rows of ``f`` with ``keep[row_in_file]`` True to its temporary output, streaming chunks of
    ``_WRITE_CHUNK`` bytes (Parquet: decoded on ``decode_threads`` threads, up to ``2 x (decode_threads -
    1)`` chunks ahead of the one being written), and pick up the texts of its rows ``pick`` (sorted). Raises
    when the file does not hold exactly ``len(keep)`` rows, or ``_Aborted`` when ``stopped()`` turns True."""
    report = ReadReport()  # write_kept's own; iter_batches already reported the problems
    target = output_path(out_dir, f)
    row, written = 0, 0
    picked: dict[int, str] = {}
    pick = np.zeros(0, np.int64) if pick is None else pick

    def texts(chunk_text: pa.Array) -> None:  # after take(): the chunk's rows are [row - len, row)
        lo = row - len(chunk_text)
        for r in pick[np.searchsorted(pick, lo):np.searchsorted(pick, row)].tolist():
            picked[r] = chunk_text[r - lo].as_py()

    annotate = annotate or {}
    extra: dict[str, np.ndarray] = {}

    def take(n: int) -> np.ndarray:
        nonlocal row
        if stopped():
            raise _Aborted(f.relpath)
        if row + n > len(keep):
            raise DataError(f"keep has {keep_len} entries but the inputs have more rows ({f.relpath}: more than "
                            f"{len(keep)}); pass the same files, id_field, text_field and on_error as to "
                            f"iter_batches")
        part = keep[row:row + n]
        for k, v in annotate.items():  # the kept rows' annotations, in order
            extra[k] = v[row:row + n][part]
        row += n
        return part

    ahead = 2 * (decode_threads - 1) * _WRITE_CHUNK  # 2 chunks per spare thread: 1 leaves it idle at times
    outputs = ExitStack()
    with outputs, closing(open_readers([f], spec, report, _WRITE_CHUNK, all_columns=True, threads=decode_threads,
                                   read_ahead=ahead)) as readers:
        _, reader = next(readers)
        unreadable = False
        if isinstance(reader, JsonlReader):
            with ExitStack() as opened:
                out = None
                for chunk in reader.chunks():
                    if out is None:  # opened at the first rows: a file skipped whole gets no output
                        out = opened.enter_context(_jsonl_output(outputs, target, f))
                    mask = take(len(chunk.text))
                    texts(chunk.text)
                    written += int(mask.sum())
                    if annotate:
                        _write_annotated(out, chunk.raw, chunk.starts[mask], chunk.ends[mask], extra, f.relpath)
                    else:
                        _write_spans(out, chunk.raw, chunk.starts[mask], chunk.ends[mask])
                unreadable = reader.unreadable
                if out is None and not unreadable:  # no rows: an empty output, as the input
                    opened.enter_context(_jsonl_output(outputs, target, f))
        else:
            writer = None
            try:
                for chunk in reader.chunks():
                    if writer is None:
                        writer = _open_parquet_writer(outputs, target, reader, annotate)
                    mask = take(len(chunk.text))
                    texts(chunk.text)
                    full = np.zeros(len(chunk.valid), dtype=bool)
                    full[np.flatnonzero(chunk.valid)] = mask
                    written += int(mask.sum())
                    if full.any():
                        kept = chunk.record.filter(pa.array(full))
                        for k in annotate:
                            kept = kept.append_column(k, pa.array(extra[k], pa.int64()))
                        writer.write_batch(kept)
                if writer is None and reader.schema is not None and not reader.unreadable:  # no rows: the schema
                    writer = _open_parquet_writer(outputs, target, reader, annotate)
                unreadable = writer is None
            finally:
                if writer is not None:
                    writer.close()
        if row != len(keep):
            raise DataError(f"keep has {keep_len} entries but the inputs have a different number of rows "
                            f"({f.relpath}: {row}, not {len(keep)}); pass the same files, id_field, text_field "
                            f"and on_error as to iter_batches")
        return _Written(f.relpath, outputs.pop_all(), 0 if unreadable else 1, written, unreadable, picked)


def _jsonl_output(outputs: ExitStack, target: str, f: InputFile) -> Any:
    """The output stream of a JSON Lines input's kept lines (its compression), in a temporary file that
    ``outputs`` renames into place."""
    return pa.output_stream(outputs.enter_context(atomic_path(target)), compression=f.compression)


def _count_rows(f: InputFile, spec: Spec) -> int:
    """The rows ``iter_batches`` gives for ``f`` alone (row numbers restart at every file), as the write
    will read them. With on_error='raise' every physical row / non-blank line is one (or the read raises,
    and so will the write): Parquet metadata, tables' length, a newline scan of JSON Lines. Otherwise, or
    when that fails, the file is read exactly as ``_write_file`` reads it (every line parsed; a file whose
    data fails to decode is skipped whole, or raises its error; what was found stays with ``f.state`` for
    the write)."""
    if spec.on_error == "raise":
        try:
            if f.fmt == "parquet":
                with open_parquet(f) as pf:
                    return pf.metadata.num_rows
            if f.fmt == "table" and f.table is not None:
                return f.table.num_rows
            if f.fmt == "jsonl":
                return _count_lines(f)
        except (OSError, pa.ArrowException, ValueError):
            pass  # the reader raises the error it would raise for this file
    report = ReadReport()
    # the write logs what the reader finds (files without ids, skipped rows...): not twice
    with quiet_logs(), closing(open_readers([f], spec, report, _WRITE_CHUNK, all_columns=True, threads=1)) as readers:
        _, reader = next(readers)
        for _ in reader.chunks():
            pass
        return reader.rows


def _count_lines(f: InputFile) -> int:
    """Non-blank lines of a JSON Lines file, split as ``JsonlReader`` splits them (leading BOM ignored)."""
    n = 0
    with open_stream(f) as stream:
        for k, block in enumerate(read_blocks(stream, _WRITE_CHUNK)):
            if k == 0 and block[:len(UTF8_BOM)] == UTF8_BOM:
                block = block[len(UTF8_BOM):]
            if len(block):
                n += int(split_lines(block)[2].sum())
    return n


def _open_parquet_writer(stack: ExitStack, target: str, reader: ArrowReader,
                         annotate: dict[str, np.ndarray] | None = None) -> pq.ParquetWriter:
    schema = reader.schema
    for k in annotate or ():
        if k in schema.names:
            raise DataError(f"{reader.f.relpath} already has a column {k!r}: annotating would give it two values; "
                            "rename the column or run without --annotate")
        schema = schema.append(pa.field(k, pa.int64()))
    tmp = stack.enter_context(atomic_path(target))
    codec = parquet_codec(reader.f) if reader.f.fmt == "parquet" else "snappy"
    return pq.ParquetWriter(tmp, schema, compression=codec)


_JSON_SPACE = b" \t\r\n"


def _write_annotated(out: Any, raw: memoryview, starts: np.ndarray, ends: np.ndarray, extra: dict[str, np.ndarray],
                     relpath: str) -> None:
    """Write each line raw[starts[i]:ends[i]] with ``, "name": value`` for every annotation inserted before
    the object's closing brace (the last non-space byte of a line the reader accepted as a JSON object); the
    rest of the line byte for byte."""
    view = bytes(raw)
    keys = [json.dumps(k, ensure_ascii=False).encode() for k in extra]
    for k, key in zip(extra, keys):
        if key in view:  # as a key (or a string value equal to the name: refused too, rather than guessed)
            raise DataError(f"{relpath} already has a field {k!r} (or that string as a value): annotating would "
                            "give a record two values; rename the field or run without --annotate")
    cols = [extra[k].tolist() for k in extra]
    parts = []
    for i, (s, e) in enumerate(zip(starts.tolist(), ends.tolist())):
        line = view[s:e]
        brace = len(line.rstrip(_JSON_SPACE)) - 1
        added = b"".join(b", " + key + b": " + str(col[i]).encode() for key, col in zip(keys, cols))
        parts.append(line[:brace] + added + line[brace:])
    out.write(b"".join(parts))


_GATHER_RUNS = 16  # more runs of adjacent spans than this: gathered by Arrow, written at once


def _write_spans(out: Any, raw: memoryview, starts: np.ndarray, ends: np.ndarray) -> None:
    """Write raw[starts[i]:ends[i]] for all i (increasing, not overlapping), merging adjacent spans. Many
    runs are gathered into one buffer by Arrow's ``take`` (no Python per run, without the GIL, so that
    parallel writers do not wait on each other) and written with one call; the bytes are the same."""
    if len(starts) == 0:
        return
    breaks = np.flatnonzero(starts[1:] != ends[:-1]) + 1
    run_starts = starts[np.concatenate(([0], breaks))]
    run_ends = ends[np.concatenate((breaks - 1, [len(ends) - 1]))]
    view = memoryview(raw)
    if len(run_starts) <= _GATHER_RUNS:
        for s, e in zip(run_starts.tolist(), run_ends.tolist()):
            out.write(view[s:e])
        return
    # the block as binary values: the runs (even values) and the gaps between them (odd values)
    bounds = np.empty(2 * len(run_starts), np.int64)
    bounds[0::2], bounds[1::2] = run_starts, run_ends
    values = pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(bounds) - 1,
                                              [None, pa.py_buffer(bounds), pa.py_buffer(view)])
    runs = values.take(pa.array(np.arange(0, len(bounds), 2, dtype=np.int64)))
    offsets = np.frombuffer(runs.buffers()[1], np.int64)
    out.write(runs.buffers()[2].slice(int(offsets[0]), int(offsets[len(runs)] - offsets[0])))
