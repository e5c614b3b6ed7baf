"""The reader of Parquet files and in-memory tables (``ArrowReader``): columns are typed, so type errors
are file-level. Parquet files are planned and decoded by the read's row-group pool (``parquet``), or their
text by a device reader (``gpu``); tables are read here. Also the Arrow column helpers other modules use:
``is_stringish`` and ``as_utf8`` (invalid UTF-8 replaced as ``bytes.decode("utf-8", "replace")`` does).
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import DataError, RunError
from .batch import Chunk, FileReader, ReadReport, Spec, StreamFailed, missing_text_field, scope_strings
from .check import UNREADABLE_PARQUET, StreamFailure, check_parquet, settle_footer, stream_failure
from .discover import InputFile

logger = logging.getLogger(__package__)  # the package's one logger, "gpu_dedup.io" (see batch.quiet_logs)


def release_pool() -> None:
    """Give the memory Arrow's pool holds unused back to the system (``MemoryPool.release_unused``), as a batch is
    done with. mimalloc, pyarrow's default pool, keeps freed memory for a while (in 2 MiB huge pages where the
    system allows them), and buffers of other sizes take new memory meanwhile: without a release after each batch
    the pipeline report's peak RSS grew with the rows read, 121.9 → 131.1 MiB from 100 k to 1 M documents (113.5
    → 115.5 with it; jemalloc's 94.8 → 102.6 and the system allocator's 95.1 → 101.9 hardly change), for 0.03 s
    of 648 releases at 1 M (0.08 s of ``malloc_trim`` with the system allocator); a Ray driver streaming a
    table's parts into one file (``runtime.run.RowGroups``) likewise."""
    pa.default_memory_pool().release_unused()


def is_stringish(t: pa.DataType) -> bool:
    """Can a column of type ``t`` be read as text (or string ids)?

    Args:
        t: an Arrow type; a dictionary type counts as its value type.

    Returns:
        True for string, large_string, binary, large_binary and null (all-null) types.
    """
    if pa.types.is_dictionary(t):
        t = t.value_type
    return (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
            or pa.types.is_large_binary(t) or pa.types.is_null(t))


def _is_numeric(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        t = t.value_type
    return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
            or pa.types.is_decimal(t) or pa.types.is_null(t))


def as_utf8(arr: pa.Array, out_type: pa.DataType) -> tuple[pa.Array, np.ndarray | None]:
    """Cast a string / binary / integer array to ``out_type``, replacing invalid UTF-8 like
    ``bytes.decode("utf-8", "replace")``.

    Args:
        arr: a string, binary, integer or null Arrow array (a dictionary array is decoded first).
        out_type: ``pa.string()`` or ``pa.large_string()``.

    Returns:
        (array of ``out_type`` [n], nulls kept, integers as decimal strings; bool [n] mask of the rows whose
        bytes were replaced, or None when none were).
    """
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if pa.types.is_integer(arr.type):
        return arr.cast(out_type), None
    if pa.types.is_null(arr.type):
        return pa.nulls(len(arr), out_type), None
    big = pa.large_binary() if out_type == pa.large_string() else pa.binary()
    as_bin = arr.cast(big)
    as_text = as_bin.view(out_type)
    try:
        as_text.validate(full=True)
        return as_text, None
    except pa.ArrowInvalid:
        pass
    values = as_bin.to_pylist()
    fixed = np.zeros(len(values), dtype=bool)
    out = []
    for i, v in enumerate(values):
        if v is None:
            out.append(None)
            continue
        try:
            out.append(v.decode("utf-8"))
        except UnicodeDecodeError:
            out.append(v.decode("utf-8", "replace"))
            fixed[i] = True
    return pa.array(out, out_type), fixed


def empty_strings(col: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Bool mask of the rows of a string/binary column holding an empty string (nulls and numbers: False).
    An empty id is refused like a null one: it names nothing a user could look up."""
    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type) or pa.types.is_binary(col.type)
            or pa.types.is_large_binary(col.type)):
        return np.zeros(len(col), dtype=bool)
    lengths = pc.binary_length(col)
    return np.asarray(pc.fill_null(pc.equal(lengths, 0), False).to_numpy(zero_copy_only=False), dtype=bool)


def _raw_bytes(ids: pa.Array) -> pa.Array:
    """Ids as read, before UTF-8 repair: large_binary (integers as their decimal string)."""
    if pa.types.is_dictionary(ids.type):
        ids = ids.dictionary_decode()
    if pa.types.is_integer(ids.type):
        ids = ids.cast(pa.string())
    return ids.cast(pa.large_binary())


class KeepValueError(DataError):
    """A keep-column value that is neither a number nor an ISO 8601 date; ``index``: its row in the array."""

    def __init__(self, index: int, value: Any):
        super().__init__(f"value {value!r} is neither a number nor an ISO 8601 date or date-time (e.g. 2024-05-01, "
                         "2024-05-01T12:30:00Z)")
        self.index = index


def _is_temporal(t: pa.DataType) -> bool:
    return pa.types.is_timestamp(t) or pa.types.is_date(t)


# a zone designator after the time of an ISO 8601 date-time: Z, +HH, +HHMM, +HH:MM (a date's own -DD is none)
_ZONE = r"\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:[Zz]|[+-]\d{2}(?::?\d{2})?)$"


def iso_seconds(values: pa.Array) -> np.ndarray:
    """ISO 8601 dates / date-times (strings) as float64 seconds since 1970-01-01 UTC (null -> NaN). A value
    without a zone is taken as UTC, so a date column orders as its dates (``--keep max:crawl_date``: newest
    first). Raises ``KeepValueError`` naming the first value that does not parse."""
    out = np.full(len(values), np.nan)
    zoned = pc.fill_null(pc.match_substring_regex(values, _ZONE), False)
    for mask, target in ((pc.invert(zoned), pa.timestamp("us")), (zoned, pa.timestamp("us", tz="UTC"))):
        rows = np.flatnonzero(np.asarray(mask.to_numpy(zero_copy_only=False), bool))
        if rows.size == 0:
            continue
        sub = values.take(pa.array(rows))
        try:
            us = sub.cast(target).cast(pa.int64())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            for i, v in zip(rows.tolist(), sub.to_pylist()):
                try:
                    pa.array([v], values.type).cast(target)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    raise KeepValueError(i, v) from None
            raise
        out[rows] = pc.fill_null(us, 0).to_numpy(zero_copy_only=False) / 1e6
        out[rows[np.asarray(us.is_null().to_numpy(zero_copy_only=False), bool)]] = np.nan
    return out


def _keep_values(col: pa.Array) -> np.ndarray:
    """A keep column as float64 (null -> NaN): numbers as they are; dates, timestamps and ISO 8601 strings as
    seconds since 1970-01-01 UTC (``iso_seconds``)."""
    if pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    if _is_temporal(col.type):
        ts = col.cast(pa.timestamp("us", tz=getattr(col.type, "tz", None))) if pa.types.is_date(col.type) else col
        ts = ts.cast(pa.timestamp("us", tz=getattr(ts.type, "tz", None)))
        us = ts.cast(pa.int64())
        return np.where(np.asarray(us.is_null().to_numpy(zero_copy_only=False), bool), np.nan,
                        pc.fill_null(us, 0).to_numpy(zero_copy_only=False) / 1e6)
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        return iso_seconds(col)
    return col.cast(pa.float64()).to_numpy(zero_copy_only=False).astype(np.float64)


class ArrowReader(FileReader):
    """Parquet files and in-memory tables: columns are typed, so type errors are file-level.

    Parquet files are planned and decoded by the run's ``ParquetPool`` (``pool``, ``index``: this file's
    position in the run), row group by row group; in-memory tables are read here, record batch by record
    batch."""

    def __init__(self, f: InputFile, spec: Spec, report: ReadReport, batch_bytes: int, all_columns: bool,
                 device_reader: Any = None, pool: Any = None, index: int = 0):
        super().__init__(f, spec, report)
        self.batch_bytes = batch_bytes
        self.all_columns = all_columns
        self.device_reader = device_reader
        self.pool, self.index = pool, index
        self.schema: pa.Schema | None = None  # set once the file is open (None: unreadable)

    def _record_batches(self, table: pa.Table, columns: list[str] | None) -> Iterator[pa.RecordBatch]:
        """Record batches of an in-memory table, about batch_bytes (all selected columns) each."""
        table = table if columns is None else table.select(columns)
        per_row = max(1, table.nbytes // max(1, table.num_rows))
        yield from table.to_batches(max_chunksize=max(1, self.batch_bytes // per_row))

    def _schema_problem(self, schema: pa.Schema) -> tuple[bool, str, str | None] | None:
        """(fatal, reason, fix or None) of the file-level problem of ``schema``, or None. Fatal problems raise
        even with on_error='skip'; the others skip the file. Pure, so the pool can plan files ahead of the
        reader."""
        spec = self.spec
        names = schema.names
        if spec.keep_column and spec.keep_column not in names:
            return True, (f"keep column {spec.keep_column!r} is not in the file (columns: {names[:20]}); "
                          f"choose another {spec.keep_label}"), None
        kt = schema.field(spec.keep_column).type if spec.keep_column else None
        if kt is not None:
            base = kt.value_type if pa.types.is_dictionary(kt) else kt
            stringy = pa.types.is_string(base) or pa.types.is_large_string(base)
            if not (_is_numeric(kt) or _is_temporal(base) or stringy):
                return True, (f"keep column {spec.keep_column!r} has type {kt}, neither numeric nor a date; choose "
                              "a numeric, date or ISO 8601 string column"), None
 
        if spec.scope_field:
            if spec.scope_field not in names:
                return True, (f"{spec.scope_label} {spec.scope_field!r} is not in the file (columns: {names[:20]}); "
                              f"choose another {spec.scope_flag}"), None
            st = schema.field(spec.scope_field).type
            base = st.value_type if pa.types.is_dictionary(st) else st
            if not (is_stringish(base) or pa.types.is_integer(base)):
                return True, (f"{spec.scope_label} {spec.scope_field!r} has type {st}; scope values must be strings "
                              "or integers"), None
        if spec.text_field not in names:
            what = "the table" if self.f.fmt == "table" else self.f.relpath
            return (False, *missing_text_field(spec.text_field, names, f"{what} has no such column", "columns"))
        t = schema.field(spec.text_field).type
        if not is_stringish(t):
            return False, f"text field {spec.text_field!r} has type {t}, not a string", None
        if spec.id_field and spec.id_field in names:
            t = schema.field(spec.id_field).type
            base = t.value_type if pa.types.is_dictionary(t) else t
            if not (is_stringish(t) or pa.types.is_integer(base)):
                return False, f"id field {spec.id_field!r} has type {t}; ids must be strings or integers", None
        return None

    def _check_schema(self, schema: pa.Schema, rows: int | None = None) -> bool:
        """File-level checks; returns False when the file must be skipped (``rows``: the file's, when known)."""
        problem = self._schema_problem(schema)
        if problem is None:
            return True
        fatal, reason, fix = problem
        if fatal:
            raise self.fatal(reason)
        self.bad(reason, fix=fix)
        # skipped (on_error="skip"): the whole file, as a file whose data fails (check.StreamFailure.entry), so
        # that run.json and the warning count its rows, not "1 bad row"
        unit = "rows"
        not_used = f"{rows:,} {unit}" if rows is not None else "the whole file"
        self.report.skipped[-1].update(level="file", what=reason.split(":")[0], records=rows, unit=unit,
                                       not_used=not_used)
        if not self.f.state.skip_said:  # a later pass (e.g. writing the kept records) skips it again, silently
            self.f.state.skip_said = True
            logger.warning("%s: skipped the whole file: %s; %s not used", self.f.relpath, reason, not_used)
        return False

    def _wanted(self, schema: pa.Schema) -> tuple[list[str], bool]:
        """(columns to read, whether the file has ids)."""
        spec = self.spec
        has_ids = bool(spec.id_field) and spec.id_field in schema.names
        wanted = [spec.text_field] + ([spec.id_field] if has_ids else [])
        if spec.keep_column and spec.keep_column not in wanted:
            wanted.append(spec.keep_column)
        if spec.scope_field and spec.scope_field not in wanted:
            wanted.append(spec.scope_field)
        return wanted, has_ids

    def _on_device(self, schema: pa.Schema) -> bool:
        """Does the device reader decode this file's text?"""
        return (self.device_reader is not None and self.f.fmt == "parquet" and not self.all_columns
                and self.f.fs is None  # remote files: pyarrow through fsspec
                and schema.field(self.spec.text_field).type in (pa.string(), pa.large_string()))

    def _start(self, schema: pa.Schema, rows: int | None = None) -> tuple[list[str], bool] | None:
        """Check ``schema`` (raising or recording problems; ``rows``: the file's); None when the file is skipped."""
        self.schema = schema
        if not self._check_schema(schema, rows):
            self.unreadable = True
            return None
        wanted, has_ids = self._wanted(schema)
        if self.spec.id_field and not has_ids:
            self.ids_generated(schema.names)
        return wanted, has_ids

    def may_fail_late(self) -> bool:
        return self.f.fmt == "parquet"  # a page is checked only as it is decoded

    def check_data(self, stop: threading.Event | None = None) -> StreamFailure | None | bool:
        if self.f.fmt != "parquet":
            return None
        return check_parquet(self.f, stop, columns=None if self.all_columns else lambda s: self._wanted(s)[0])

    def reads_more(self) -> bool:
        return self.f.fmt == "parquet" and self.all_columns

    def _read_chunks(self) -> Iterator[Chunk]:
        if self.f.fmt == "parquet":
            yield from self._parquet_chunks()
            return
        started = self._start(self.f.table.schema, self.f.table.num_rows)
        if started is None:
            return
        wanted, has_ids = started
        physical = 0
        for rb in self._record_batches(self.f.table, None if self.all_columns else wanted):
            chunk = self._convert(rb, physical, has_ids)
            physical += rb.num_rows
            yield chunk

    def _footer(self, metadata: Any) -> None:
        """The footer every pass of a run must find (``check.settle_footer``)."""
        if not settle_footer(self.f, metadata):
            raise DataError(f"{self.f.relpath}: its Parquet footer differs from the one an earlier pass of this run "
                            "read: the file changed while the run read it; rerun once it no longer changes")

    def _parquet_chunks(self) -> Iterator[Chunk]:
        """The file's chunks in order, from the pool's decoded ranges. Problems found by the workers are
        raised / recorded here, in file order, so the first one in the file wins as in a sequential read.
        A row group that cannot be decoded stops the file (``StreamFailed``: no row of it is used)."""
        pool = self.pool
        plan = pool.plan(self.index)
        try:
            if plan.open_error is not None:
                e = plan.open_error
                raise StreamFailed(e, stream_failure(self.f, e, what=UNREADABLE_PARQUET))
            self._footer(plan.metadata)
            started = self._start(plan.schema, plan.metadata.num_rows)
            if started is None:
                return
            wanted, has_ids = started
            if self._on_device(plan.schema):
                yield from self._device_chunks(plan.pf, wanted, has_ids)
                return
            for k, rng in enumerate(plan.ranges):
                result = pool.take(plan, k)
                if result.read_error is not None:
                    raise StreamFailed(result.read_error, stream_failure(
                        self.f, result.read_error, group=result.read_error_group, row=result.read_error_row,
                        records=plan.metadata.num_rows))
                for reason, row in result.skipped:
                    self.bad(reason, row=row)
                if result.error is not None:
                    raise result.error
                yield from result.chunks
        finally:
            pool.done(plan)

    def _row_group_batches(self, pf: Any) -> list[tuple[list[int], int]]:
        """(row groups, rows) of consecutive row groups holding about batch_bytes of (uncompressed) text
        each; a row group is never split, so one larger than batch_bytes is a batch of its own."""
        md = pf.metadata
        groups: list[list[int]] = []
        rows: list[int] = []
        size = 0
        for g in range(md.num_row_groups):
            rg = md.row_group(g)
            if rg.num_rows == 0:
                continue
            nbytes = sum(rg.column(c).total_uncompressed_size for c in range(rg.num_columns)
                         if rg.column(c).path_in_schema.split(".")[0] == self.spec.text_field)
            if groups and size + nbytes <= self.batch_bytes:
                groups[-1].append(g)
                rows[-1] += rg.num_rows
                size += nbytes
            else:
                groups.append([g])
                rows.append(rg.num_rows)
                size = nbytes
        return list(zip(groups, rows))

    def _device_chunks(self, pf: Any, wanted: list[str], has_ids: bool) -> Iterator[Chunk]:
        """Text by the device reader, ids / keep values by pyarrow, for the same row groups. A batch that
        is not clean (null text or ids, invalid UTF-8) is read again by pyarrow and goes through
        ``_convert``, so skipping, reporting and repair are exactly the host reader's."""
        spec = self.spec
        side = [c for c in wanted if c != spec.text_field]
        physical = 0
        for rgs, n in self._row_group_batches(pf):
            try:
                dev = self.device_reader.read(self.f.path, rgs, spec.text_field)
                side_table = pf.read_row_groups(rgs, columns=side, use_threads=True) if side else None
            except (OSError, RuntimeError, pa.ArrowException) as e:  # libcudf reports corrupt data as RuntimeError
                raise StreamFailed(e) from e  # described by a check of the file, which finds the row group
            if len(dev) != n:
                raise RunError(f"{self.f.relpath}: the {self.device_reader.name} reader returned {len(dev)} rows "
                               f"for row groups {rgs}, the file's metadata says {n}; use reader='pyarrow'")
            ids = id_col = None
            if has_ids:
                id_col = side_table.column(spec.id_field).combine_chunks()
            if dev.clean and (id_col is None or (id_col.null_count == 0 and not empty_strings(id_col).any())):
                fixed = None
                if id_col is not None:
                    ids, fixed = as_utf8(id_col, pa.string())
                keep = (self._keep(side_table.column(spec.keep_column).combine_chunks(), physical + np.arange(n))
                        if spec.keep_column else None)
                scope = (self._scope(side_table.column(spec.scope_field).combine_chunks(), physical + np.arange(n))
                         if spec.scope_field else None)
                physical += n
                yield Chunk(ids=ids, text=None, keep=keep, invalid_utf8=int(fixed.sum()) if fixed is not None else 0,
                             device_text=dev, scope=scope)
                continue
            del dev  # free its device memory before the host re-read
            table = pf.read_row_groups(rgs, columns=wanted, use_threads=True)
            for rb in table.to_batches():
                chunk = self._convert(rb, physical, has_ids)
                physical += rb.num_rows
                if chunk is not None:
                    yield chunk

    def _keep(self, col: pa.Array, rows: np.ndarray) -> np.ndarray:
        """``_keep_values`` of ``col`` (physical rows ``rows``); a value that is no number and no date is a
        file error naming its row (not skippable: a keep order with holes would silently change)."""
        try:
            return _keep_values(col)
        except KeepValueError as e:
            raise self.fatal(f"keep column {self.spec.keep_column!r}: {e}; fix the data or choose another "
                             f"{self.spec.keep_label}", row=int(rows[e.index])) from None

    def _scope(self, col: pa.Array, rows: np.ndarray) -> pa.Array:
        """``scope_strings`` of ``col`` (physical rows ``rows``); a null is a file error naming its row (not
        skippable, like a keep value)."""
        if col.null_count and not self.spec.scope_nullable:
            i = int(np.flatnonzero(~np.asarray(col.is_valid().to_numpy(zero_copy_only=False), bool))[0])
            raise self.fatal(f"scope field {self.spec.scope_field!r} is null; every document needs a scope value "
                             "(fix the data or choose another --scope-field)", row=int(rows[i]))
        out, _ = as_utf8(scope_strings(col), pa.string())
        return out

    def _convert(self, rb: pa.RecordBatch, physical: int, has_ids: bool, bad: Any = None) -> Chunk:
        """Accepted rows of ``rb`` (physical rows ``physical ..``). ``bad``: where bad rows go (default
        ``self.bad``; pool workers pass a ``_Deferred``'s, since only the consumer may touch the report)."""
        spec = self.spec
        bad = bad if bad is not None else self.bad
        text_col = rb.column(rb.schema.get_field_index(spec.text_field))
        valid = np.asarray(text_col.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        id_col = rb.column(rb.schema.get_field_index(spec.id_field)) if has_ids else None
        id_valid = (np.asarray(id_col.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
                    if id_col is not None else np.ones(rb.num_rows, dtype=bool))
        id_empty = empty_strings(id_col) if id_col is not None else np.zeros(rb.num_rows, dtype=bool)
        for i in np.flatnonzero(~(valid & id_valid) | id_empty).tolist():
            if not valid[i]:
                bad(f"text field {spec.text_field!r} is null", row=physical + i)
            elif id_empty[i]:
                bad(f"id field {spec.id_field!r} is an empty string; ids must be non-empty", row=physical + i)
            else:
                bad(f"id field {spec.id_field!r} is null", row=physical + i)
        id_valid &= ~id_empty
        valid &= id_valid
        positions = physical + np.flatnonzero(valid) if spec.positions else None
        if not valid.any():
            return Chunk(ids=None, text=pa.array([], pa.large_string()), keep=None, record=rb, valid=valid,
                          positions=positions)
        sel = pa.array(valid)
        all_valid = bool(valid.all())
        text, fixed = as_utf8(text_col if all_valid else text_col.filter(sel), pa.large_string())
        bad_rows = fixed if fixed is not None else np.zeros(len(text), dtype=bool)
        ids = raw_ids = None
        if id_col is not None:
            read_ids = id_col if all_valid else id_col.filter(sel)
            ids, fixed_ids = as_utf8(read_ids, pa.string())
            if fixed_ids is not None:
                bad_rows = bad_rows | fixed_ids
            if spec.positions:
                raw_ids = _raw_bytes(read_ids)
        keep = None
        if spec.keep_column:
            kcol = rb.column(rb.schema.get_field_index(spec.keep_column))
            keep = self._keep(kcol if all_valid else kcol.filter(sel), physical + np.flatnonzero(valid))
        scope = None
        if spec.scope_field:
            scol = rb.column(rb.schema.get_field_index(spec.scope_field))
            scope = self._scope(scol if all_valid else scol.filter(sel), physical + np.flatnonzero(valid))
        return Chunk(ids=ids, text=text, keep=keep, invalid_utf8=int(bad_rows.sum()), record=rb, valid=valid,
                      positions=positions, raw_ids=raw_ids, scope=scope)
