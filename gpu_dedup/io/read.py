"""Reading: a reader per input file (``open_readers``) and the batches of a run (``iter_batches``,
``iter_rows``). (``check_unique_ids`` is in ``ids``.)

Reading (``iter_batches``)
    Files are read in order; every batch belongs to one file and holds at most ``batch_bytes`` of UTF-8
    text (a single larger document makes a one-row batch). Global row ids are dense over the whole run.
    JSON Lines are read as byte blocks of at most ``batch_bytes`` cut at newlines and parsed with
    ``pyarrow.json`` (fast path). When that parser rejects a block, or its result is in any way
    doubtful (row count, nulls, ids present in only some rows, invalid UTF-8), the block is re-parsed
    line by line with Python's ``json`` (``strict=False``: raw control characters inside strings are
    accepted), which is the reference: the fast path is only used when it gives the same result.

    Parquet files are read as record batches of about ``batch_bytes`` of the columns read (a record
    batch may span row groups), decoded in parallel: row groups on a pool of ``read_threads`` threads,
    each on its own file handle, with the per-row work (null checks, UTF-8 validation and repair, id
    casts, keep values) done there too, submitted in file order across files while at most
    ``read_ahead_bytes`` are ahead of the consumer. Batches, row numbers, the report and errors are those
    of a sequential read whatever the thread count or timing: the consumer takes the record batches in
    order and replays what the workers found, so the first problem in file order is the one raised.

    JSON Lines rules: a line holding only spaces/tabs/CR is blank; blank lines are not rows and are
    skipped silently. Line numbers are 1-based physical lines of the decompressed file. A UTF-8 byte
    order mark at the very start of a file is ignored (and not copied by ``write_kept``). Duplicate keys
    in one object: the last one wins (Python ``json`` semantics).

    Bad rows (malformed JSON, not an object, missing / null / non-string text, null id, id that is
    neither a string nor an integer, id present in some rows of a file but not in others) raise
    ``InputError`` naming ``relpath:line`` (JSON Lines) or ``relpath row N`` (Parquet / tables; N is the
    0-based physical row) with ``on_error="raise"``; with ``on_error="skip"`` the row is dropped (it is
    not a document and gets no row id) and recorded in ``ReadReport.skipped``. File-level problems are
    handled the same way, naming just the file: a Parquet file whose text / id column is missing or has the
    wrong type. A file with zero rows yields no batch and is listed in ``ReadReport.empty_files``.

Damaged files (``check``, ``batch.FileReader.chunks``)
    A file whose stored data fails to decode (a gzip CRC or length mismatch, a truncated gzip or zstd
    stream, a corrupt zstd frame, a Parquet file that cannot be opened or a row group that does not decode,
    an I/O error) is a file-level problem: no record of it is used. With ``on_error="raise"`` it is an
    ``InputError`` naming the file and where the data failed (decompressed bytes and lines, or the row
    group); a bad row of such a file is reported as the file's failure, not as the row (garbage that a
    codec gave before its check may still parse). With ``on_error="skip"`` the whole file is skipped: one
    entry in ``ReadReport.skipped`` (``level`` "file", the lines or rows and the stored bytes not used),
    none of its rows counted. Codecs check only as they decode (gzip at the end of a member), so in skip
    mode the first read of a compressed JSON Lines or a Parquet file holds its chunks until it has decoded
    the whole file; a file that holds more than ``read_ahead_bytes`` is decoded once more by a check
    (``check.check_stream`` / ``check_parquet``, the columns the read decodes), on a thread beside the read
    from the start when the file is that large as stored, and the read waits for it. Every pass of a run
    reads the same ``InputFile`` objects, which remember what was found (``InputFile.state``): a failed file
    is skipped (or refused) by every later pass without being read, so all passes number rows alike; a file
    whose decoded bytes (JSON Lines: their xxh3 digest) or footer (Parquet) differ from an earlier pass, or
    that fails after an earlier pass decoded it whole, is a ``DataError`` (it changed while the run read it);
    one that fails after a pass used its rows (a writer that copies Parquet columns the first pass did not
    read) is an ``InputError`` in either mode.

Ids
    With ``id_field`` set and present in a file, every row of that file must carry a non-null string or
    integer id (integers become their decimal string). When ``id_field`` is None, or absent from a whole
    file (Parquet schema lacks it; no JSON line of the file has it), ids are generated as
    ``f"{relpath}:{row_in_file}"`` with ``row_in_file`` the 0-based count of real rows of that file.
    For JSON Lines the file's first row decides whether the file has ids.

Invalid UTF-8 (policy)
    Bytes that are not valid UTF-8 are replaced with U+FFFD exactly as ``bytes.decode("utf-8",
    "replace")`` does, applied to the whole JSON line (JSON Lines) or to the text / id value (Parquet,
    tables); lone surrogate escapes such as ``"\\ud800"`` are replaced with one U+FFFD each. The row is
    kept and counted once in ``ReadReport.invalid_utf8_rows``; this is not an error. ``pyarrow.json``
    would silently accept such bytes, so each block is validated first and invalid blocks take the
    line-by-line path.

keep_column
    Numeric (int / float / bool / decimal) values read as float64, null or missing -> NaN. A keep column
    missing from a whole file, or a non-numeric value, always raises ``InputError`` (also with
    ``on_error="skip"``): skipping those rows would make the numbering differ from ``write_kept``, which
    does not read the keep column.

scope_field
    String or integer values (integers become their decimal string), carried per document as
    ``Batch.scope``. A scope field missing from a whole file, a null / missing value or another type always
    raises ``InputError`` naming the row (also with ``on_error="skip"``, for the keep column's reason).
    ``scope_nullable`` (filter's ``--url-field``): a null or missing value is carried as null instead; the
    field missing from a whole file (JSON Lines: from every record, or null in every one) still raises.
"""
from __future__ import annotations

import logging
from contextlib import closing
from typing import Any, Iterator, Literal

import numpy as np
import pyarrow as pa

from ..errors import ConfigError
from .arrow import ArrowReader
from .batch import Batch, FileReader, ReadReport, Spec, generated_ids, make_spec, text_parts
from .discover import InputFile
from .jsonl import JsonlReader
from .parquet import ParquetPool, resolve_read_ahead, resolve_read_threads

logger = logging.getLogger(__package__)  # the package's one logger, "gpu_dedup.io" (see batch.quiet_logs)


def open_readers(files: list[InputFile], spec: Spec, report: ReadReport, batch_bytes: int,
             all_columns: bool, device_reader: Any = None, threads: int | None = None,
             read_ahead: int | None = None) -> Iterator[tuple[int, FileReader]]:
    """A reader per file, in order. Parquet files share one ``ParquetPool``, closed when this generator ends
    or is closed (close it explicitly, e.g. with ``contextlib.closing``, so an abandoned read stops the pool).

    Args:
        files: the inputs (``resolve_inputs`` / ``table_input``).
        spec: the reader spec (``make_spec``).
        report: the ``ReadReport`` the readers add skipped rows and problems to.
        batch_bytes: the most bytes of text (JSON Lines: of raw JSON) per chunk, except a single larger row.
        all_columns: Parquet / tables read every column (``write_kept`` copies them), not only the needed ones.
        device_reader: a device reader (``gpu.resolve_reader``) for Parquet text, or None for pyarrow.
        threads: the pool's decoding threads (None: ``pyarrow.cpu_count()``).
        read_ahead: the pool's bytes decoded ahead of the consumer, and the most a reader holds while a file's
            data is checked (None: max(2 x batch_bytes, 256 MiB)).

    Yields:
        (index in ``files``, the file's ``FileReader``: a ``JsonlReader``, a pool reader of a Parquet file
        or an ``ArrowReader`` of a table), whose ``chunks()`` give its accepted rows.

    Raises:
        ConfigError: an input of fmt "table" without a table, an unknown format (build inputs with
            ``resolve_inputs`` / ``table_input``), or bad ``threads`` / ``read_ahead``.
    """
    pool: ParquetPool | None = None
    ahead = resolve_read_ahead(read_ahead, batch_bytes)
    try:
        for index, f in enumerate(files):
            reader: FileReader
            if f.fmt == "jsonl":
                reader = JsonlReader(f, spec, report, batch_bytes)
            elif f.fmt == "parquet":
                if pool is None:
                    pool = ParquetPool(files, spec, report, batch_bytes, all_columns, device_reader,
                                        resolve_read_threads(threads), ahead)
                reader = pool.reader(index)
            elif f.fmt == "table":
                if f.table is None:
                    raise ConfigError(f"input {index} has fmt='table' but no table; build it with table_input()")
                reader = ArrowReader(f, spec, report, batch_bytes, all_columns, device_reader)
            else:
                raise ConfigError(f"unknown input format {f.fmt!r} for {f.path!r}; build inputs with resolve_inputs()")
            reader.hold_bytes = ahead  # chunks held while a file's data is checked (FileReader.chunks)
            yield index, reader
    finally:
        if pool is not None:
            pool.close()


def iter_batches(files: list[InputFile], *, id_field: str | None, text_field: str, batch_bytes: int,
                 on_error: Literal["raise", "skip"], keep_column: str | None = None,
                 report: ReadReport | None = None, device_reader: Any = None, read_threads: int | None = None,
                 read_ahead_bytes: int | None = None, scope_field: str | None = None,
                 scope_nullable: bool = False, scope_flag: str = "--scope-field",
                 keep_name: str | None = None) -> Iterator[Batch]:
    """Yield batches of (ids, text[, keep values]) in file order; see the module docstring for the rules.

    Args:
        files: the inputs (``resolve_inputs`` / ``table_input`` / ``source_files``).
        id_field: the id field or column, or None for generated ids ``"<relpath>:<row>"``.
        text_field: the text field or column.
        batch_bytes: the most bytes of UTF-8 text per batch (a single larger document makes a one-row batch).
        on_error: "raise": a bad row is an error; "skip": it is dropped and recorded in ``report.skipped``.
        keep_column: a numeric column read into ``Batch.keep_values`` (float64, null -> NaN), or None.
        report: the ``ReadReport`` to fill in (None: a new one, not returned).
        device_reader: ``gpu.resolve_reader``'s reader for Parquet text, or None for pyarrow.
        read_threads: Parquet decoding threads (below; None: ``pyarrow.cpu_count()``).
        read_ahead_bytes: Parquet bytes decoded ahead, and the most held while a file is checked (below; None:
            automatic).
        scope_field: a string / integer field carried as ``Batch.scope``, or None.
        scope_nullable: a null / missing scope value is carried as null, not an error (filter's --url-field;
            a JSON Lines file in which no record has a non-null value is still an error).
        scope_flag: the flag the scope field's errors name.
        keep_name: the setting that chose the keep policy, named by the keep column's errors
            (``SemanticConfig.keep``), or None.

    Yields:
        ``Batch``: rows of one file, row ids dense over the whole run (``row_start``), holding at most
        ``batch_bytes`` of text.

    Raises:
        ConfigError: a ``batch_bytes`` that is not a positive int, a bad ``read_threads`` /
            ``read_ahead_bytes``, or a bad spec (``make_spec``); raised before anything is read.
        InputError: a bad row or file with on_error="raise" (the message names ``relpath:line`` or
            ``relpath row N``); a missing or non-numeric keep column or a bad scope value in either mode.
        RunError: a device reader that gave another number of rows than the file holds.

    Memory: JSON Lines: one block (<= batch_bytes of raw JSON, or one longer line) at a time, plus what
    pyarrow's JSON parser needs for it (several times the block). Parquet: row groups are decoded by
    ``read_threads`` threads (None: ``pyarrow.cpu_count()``; 1: sequentially, no thread) at most
    ``read_ahead_bytes`` ahead (uncompressed column bytes from the file metadata; None: max(2 x
    batch_bytes, 256 MiB); more when one row group, or the row groups of one record batch, are larger).
    Neither changes the batches, row numbers, report or errors. With on_error="skip", the first read of a
    compressed JSON Lines or a Parquet file also holds up to ``read_ahead_bytes`` of its chunks until it has
    decoded the whole file, or a check has (module docstring: damaged files; the check holds 4 MiB for JSON
    Lines, one row group for Parquet).
    ``device_reader`` (``gpu.resolve_reader``): Parquet text is read into device memory by it, one
    batch per run of row groups holding about batch_bytes of text; same rows, ids and errors.
    """
    if not isinstance(batch_bytes, int) or batch_bytes < 1:
        raise ConfigError(f"batch_bytes must be a positive int, got {batch_bytes!r}")
    spec = make_spec(id_field, text_field, on_error, keep_column, scope_field=scope_field,
                     scope_nullable=scope_nullable, scope_flag=scope_flag, keep_name=keep_name)
    resolve_read_threads(read_threads)  # bad knobs fail here, before anything is read
    resolve_read_ahead(read_ahead_bytes, batch_bytes)
    report = report if report is not None else ReadReport()
    readers = open_readers(files, spec, report, batch_bytes, all_columns=False, device_reader=device_reader,
                       threads=read_threads, read_ahead=read_ahead_bytes)
    # closed explicitly (not when garbage collected) so an error or an abandoned read stops the pool now
    with closing(readers):
        yield from _batches(readers, report, batch_bytes)


def _batches(readers: Iterator[tuple[int, FileReader]], report: ReadReport, batch_bytes: int) -> Iterator[Batch]:
    row = 0
    for index, reader in readers:
        report.files += 1
        file_start = row
        skipped_before = len(report.skipped)
        for chunk in reader.chunks():
            report.invalid_utf8_rows += chunk.invalid_utf8
            first_in_file = reader.rows - chunk.rows
            dev = chunk.device_text
            if chunk.parts is not None:  # cut by a Parquet pool worker
                parts = chunk.parts
            elif dev is not None:
                parts = [(0, chunk.rows, None, dev.nbytes)]
            else:
                parts = text_parts(chunk.text, batch_bytes)
            for a, b, text, nbytes in parts:
                ids = (chunk.ids.slice(a, b - a) if chunk.ids is not None
                       else generated_ids(reader.f.relpath, first_in_file + a, b - a))
                keep = chunk.keep[a:b] if chunk.keep is not None else None
                scope = chunk.scope.slice(a, b - a) if chunk.scope is not None else None
                report.rows += b - a
                report.bytes_text += nbytes
                yield Batch(file_index=index, row_start=row, ids=ids, text=text, keep_values=keep, device_text=dev,
                            scope=scope)
                row += b - a
        report.file_rows.append(row - file_start)
        if reader.rows == 0 and not reader.unreadable:
            report.empty_files.append(reader.f.relpath)
        skipped_here = sum(s.get("level") != "file" for s in report.skipped[skipped_before:])  # a file: said
        if skipped_here:
            logger.warning("%s: skipped %d bad row(s) (see the read report)", reader.f.relpath, skipped_here)


def iter_rows(files: list[InputFile], rows: np.ndarray, **reader) -> Iterator[tuple[np.ndarray, pa.Array]]:
    """The texts of some rows of a run, read again.

    Args:
        files: the run's inputs.
        rows: int64 [k], sorted global row ids, numbered as ``iter_batches`` numbers them.
        **reader: the keyword arguments of ``iter_batches`` (id_field, text_field, batch_bytes, on_error,
            ...), the run's, so that the rows are numbered the same.

    Yields:
        (global row ids int64 [j], their texts: an Arrow string array [j]), one pair per batch that holds
        any of ``rows`` (other batches are read but yield nothing); ``take`` packs the selected texts into
        one contiguous array.

    Raises:
        ConfigError, InputError: as ``iter_batches``.
    """
    rows = np.asarray(rows, np.int64)
    for batch in iter_batches(files, **reader):
        lo, hi = np.searchsorted(rows, [batch.row_start, batch.row_start + len(batch)])
        if lo < hi:
            sel = rows[lo:hi]
            yield sel, batch.text.take(pa.array(sel - batch.row_start, pa.int64()))
