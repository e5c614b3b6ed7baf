"""Parallel Parquet decoding: the row-group pool of one read (``ParquetPool``) and its knobs
(``read_threads``, ``read_ahead_bytes``); how it works is told in the comment below.
"""
from __future__ import annotations

import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ..errors import ConfigError, RunError
from .arrow import ArrowReader
from .batch import Chunk, FileReader, ReadReport, Spec, join_chunks
from .discover import InputFile
from .remote import open_parquet

logger = logging.getLogger(__package__)  # the package's one logger, "gpu_dedup.io" (see batch.quiet_logs)


# A file's rows are cut into *ranges* of rows_per_batch physical rows (the record batches a sequential
# ``ParquetFile.iter_batches`` would give; a range may span row groups). Workers decode whole *row
# groups* (each on its own file handle: pyarrow releases the GIL while decoding) and convert every range
# piece inside their row group (null checks, UTF-8 validation / repair, casts, keep values); the worker
# that completes a range's last piece joins the pieces and cuts the range into batches. The consumer
# takes ranges strictly in file order and replays what the workers found (skipped rows, errors) into the
# report, so rows, batches, row numbers, report and errors are those of a sequential read, whatever the
# thread count or timing. Submission is in file order too (across files), bounded by read-ahead bytes.

_READ_AHEAD_MIN = 256 << 20


def resolve_read_threads(threads: int | None) -> int:
    if threads is None:
        return max(1, pa.cpu_count())
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ConfigError(f"read_threads must be a positive int or None (pyarrow's CPU count), got {threads!r}")
    return threads


def resolve_read_ahead(ahead: int | None, batch_bytes: int) -> int:
    if ahead is None:
        return max(2 * batch_bytes, _READ_AHEAD_MIN)
    if isinstance(ahead, bool) or not isinstance(ahead, int) or ahead < 0:
        raise ConfigError(f"read_ahead_bytes must be an int >= 0 or None (automatic), got {ahead!r}")
    return ahead


@dataclass(eq=False)
class _Group:
    """One non-empty row group of a planned file: physical rows [start, start + rows)."""

    g: int
    start: int
    rows: int
    nbytes: int  # uncompressed bytes of the columns read (Parquet metadata): its read-ahead charge
    first: int = -1  # ranges first..last have rows in it
    last: int = -1
    task: Future | None = None
    charged: bool = False


@dataclass(eq=False)
class _Range:
    """Physical rows [start, end) of a planned file, held by row groups first..last."""

    start: int
    end: int
    first: int
    last: int
    waiting: int  # row groups not converted yet
    pieces: dict = field(default_factory=dict)  # group index -> _Piece | _ReadFailed
    future: Future = field(default_factory=Future)  # -> _RangeResult


@dataclass
class _Piece:
    """A range's rows inside one row group, converted by a worker: chunks, the bad rows it skipped
    ((reason, row), on_error='skip') and the exception that stopped the conversion, if any."""

    chunks: list[Chunk]
    skipped: list[tuple[str, int]]
    error: BaseException | None = None


@dataclass
class _ReadFailed:
    """A row group that could not be decoded: ``g``, its index in the file; ``start``, its first physical row."""

    error: BaseException
    g: int
    start: int


@dataclass
class _RangeResult:
    """A range for the consumer: a read failure (then nothing else: no row of the file is used), or the bad
    rows skipped in it (in row order), then the exception that stopped it or its chunks."""

    read_error: BaseException | None = None
    read_error_group: int = 0  # the row group that cannot be decoded
    read_error_row: int = 0  # its first physical row
    skipped: list[tuple[str, int]] = field(default_factory=list)
    error: BaseException | None = None
    chunks: list[Chunk] = field(default_factory=list)


class _Deferred:
    """``bad`` for a pool worker: with on_error='raise' it raises the reader's error (the worker stores
    it); with 'skip' it keeps the row for the consumer to record in file order."""

    def __init__(self, reader: FileReader) -> None:
        self.reader = reader
        self.skipped: list[tuple[str, int]] = []

    def bad(self, reason: str, *, row: int) -> None:
        if self.reader.spec.on_error == "raise":
            raise self.reader.bad_error(reason, row=row)
        self.skipped.append((reason, row))


@dataclass(eq=False)
class _ParquetPlan:
    """One Parquet file of a read: its reader, open handle (or the open error), schema and row
    groups / ranges to decode (none when the schema is rejected or the device reader reads it)."""

    index: int
    reader: ArrowReader
    pf: Any = None
    open_error: BaseException | None = None
    schema: pa.Schema | None = None
    metadata: Any = None
    has_ids: bool = False
    columns: list[str] | None = None
    groups: list[_Group] = field(default_factory=list)
    ranges: list[_Range] = field(default_factory=list)
    finished: bool = False


class ParquetPool:
    """Decodes the Parquet inputs of one read on ``threads`` worker threads (``threads`` 1, or a device
    reader: no threads, each range decoded when the consumer asks for it). Row groups are submitted in
    file order, across files, while the ones submitted and not yet handed to the consumer hold at most
    ``ahead`` bytes (uncompressed sizes from the Parquet metadata of the columns read); the row groups of
    the range the consumer waits for are always submitted, and one row group when none is in flight, so
    at any time ``in_flight <= max(ahead, largest row group, row groups of one range)``. ``peak``
    records the most that was in flight. Used from one consumer thread; workers touch only ranges."""

    def __init__(self, files: list[InputFile], spec: Spec, report: ReadReport, batch_bytes: int,
                 all_columns: bool, device_reader: Any, threads: int, ahead: int) -> None:
        self.files, self.spec, self.report = files, spec, report
        self.batch_bytes, self.all_columns, self.device_reader = batch_bytes, all_columns, device_reader
        # With a device reader the host decodes only files (or batches) the device cannot: sequentially,
        # and never ahead (that would decode text the device is about to read).
        inline = threads == 1 or device_reader is not None
        self.ahead = 0 if inline else ahead
        self.executor = None if inline else ThreadPoolExecutor(threads, thread_name_prefix="gpu_dedup-parquet")
        self.plans: dict[int, _ParquetPlan] = {}
        self.finished: set[int] = set()
        self.cursor = (0, 0)  # the next (file index, group index) to submit
        self.in_flight = 0
        self.peak = 0
        self.lock = threading.Lock()
        self.closed = False
        logger.debug("parquet pool: %s, read-ahead %d bytes", f"{threads} threads" if self.executor else "inline",
                     self.ahead)

    # ----------------------------------------------------------------------------------- consumer side

    def reader(self, index: int) -> ArrowReader:
        return self.plan(index).reader

    def plan(self, index: int) -> _ParquetPlan:
        """The plan of file ``index``, opening the file on first use (errors are kept for the reader)."""
        plan = self.plans.get(index)
        if plan is not None:
            return plan
        if index in self.finished:
            raise RunError(f"file {index} was already read; a pool reads each file once")
        f = self.files[index]
        reader = ArrowReader(f, self.spec, self.report, self.batch_bytes, self.all_columns, self.device_reader,
                              pool=self, index=index)
        plan = self.plans[index] = _ParquetPlan(index=index, reader=reader)
        try:
            plan.pf = open_parquet(f)
        except (OSError, pa.ArrowException) as e:
            plan.open_error = e
            return plan
        plan.schema, plan.metadata = plan.pf.schema_arrow, plan.pf.metadata
        if reader._schema_problem(plan.schema) is not None or reader._on_device(plan.schema):
            return plan  # nothing for the pool: the reader reports the problem / the device reads it
        wanted, plan.has_ids = reader._wanted(plan.schema)
        plan.columns = None if self.all_columns else wanted
        self._cut(plan)
        return plan

    def _cut(self, plan: _ParquetPlan) -> None:
        """Row groups and ranges of a file. Ranges hold rows_per_batch rows: about batch_bytes of the
        columns read, from the average row size in the metadata (as ``iter_batches(batch_size=)``)."""
        md = plan.metadata
        total, start = 0, 0
        for g in range(md.num_row_groups):
            rg = md.row_group(g)
            nbytes = sum(rg.column(c).total_uncompressed_size for c in range(rg.num_columns)
                         if plan.columns is None or rg.column(c).path_in_schema.split(".")[0] in plan.columns)
            total += nbytes
            if rg.num_rows:
                plan.groups.append(_Group(g=g, start=start, rows=rg.num_rows, nbytes=nbytes))
                start += rg.num_rows
        rows_per_batch = int(max(1, min(1 << 20, self.batch_bytes // max(1, total // max(1, md.num_rows)))))
        j = 0
        for s in range(0, start, rows_per_batch):
            e = min(s + rows_per_batch, start)
            while plan.groups[j].start + plan.groups[j].rows <= s:
                j += 1
            last = j
            while plan.groups[last].start + plan.groups[last].rows < e:
                last += 1
            k = len(plan.ranges)
            plan.ranges.append(_Range(start=s, end=e, first=j, last=last, waiting=last - j + 1))
            for grp in plan.groups[j:last + 1]:
                grp.first = k if grp.first < 0 else grp.first
                grp.last = k

    def _next(self) -> tuple[_ParquetPlan, int] | None:
        """The row group at the cursor (planning files as it reaches them), or None at the end."""
        i, j = self.cursor
        while i < len(self.files):
            if self.files[i].fmt == "parquet" and i not in self.finished:
                plan = self.plan(i)
                if j < len(plan.groups):
                    self.cursor = (i, j)
                    return plan, j
            i, j = i + 1, 0
        self.cursor = (i, 0)
        return None

    def _fill(self, upto: tuple[int, int] | None = None) -> None:
        """Submit row groups in file order: every one up to ``upto`` (file, group), then more while the
        read-ahead allows."""
        while not self.closed:
            nxt = self._next()
            if nxt is None:
                return
            plan, j = nxt
            grp = plan.groups[j]
            forced = upto is not None and (plan.index, j) <= upto
            if not forced and (self.ahead == 0 or (self.in_flight and self.in_flight + grp.nbytes > self.ahead)):
                return
            self.cursor = (plan.index, j + 1)
            grp.charged = True
            self.in_flight += grp.nbytes
            self.peak = max(self.peak, self.in_flight)
            if self.executor is None:
                self._work(plan, j)
            else:
                grp.task = self.executor.submit(self._work, plan, j)

    def take(self, plan: _ParquetPlan, k: int) -> _RangeResult:
        """Range ``k`` of ``plan``, waiting for it; releases its row groups' read-ahead when they hold no
        later range."""
        rng = plan.ranges[k]
        self._fill(upto=(plan.index, rng.last))
        result = rng.future.result()
        rng.future = None  # the consumer owns the result now
        for grp in plan.groups[rng.first:rng.last + 1]:
            if grp.last == k:
                self._release(grp)
        self._fill()
        return result

    def _release(self, grp: _Group) -> None:
        if grp.charged:
            grp.charged = False
            self.in_flight -= grp.nbytes
        grp.task = None

    def done(self, plan: _ParquetPlan) -> None:
        """The reader is done with the file (at its end, after a read error, or abandoned): drop what
        is still queued or held for it and never submit more of it."""
        plan.finished = True
        for grp in plan.groups:
            if grp.task is not None:
                grp.task.cancel()
            self._release(grp)
        if self.cursor[0] <= plan.index:
            self.cursor = (plan.index + 1, 0)
        self.plans.pop(plan.index, None)
        self.finished.add(plan.index)
        if plan.pf is not None:
            plan.pf.close()

    def close(self) -> None:
        self.closed = True
        for plan in list(self.plans.values()):
            self.done(plan)
        if self.executor is not None:
            self.executor.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------------------------- worker side

    def _work(self, plan: _ParquetPlan, j: int) -> None:
        """Decode row group j of ``plan`` and convert each range's rows in it (runs in a worker)."""
        if self.closed or plan.finished:
            return
        grp = plan.groups[j]
        table, failed = None, None
        try:
            with open_parquet(plan.reader.f, metadata=plan.metadata) as pf:  # own handle per task
                table = pf.read_row_groups([grp.g], columns=plan.columns, use_threads=True)
            if table.num_rows != grp.rows:
                raise pa.ArrowInvalid(f"row group {grp.g} has {table.num_rows} rows, its metadata says {grp.rows}")
        except (OSError, pa.ArrowException) as e:  # unreadable: ends the file (reported by the consumer)
            failed = _ReadFailed(e, grp.g, grp.start)
        except BaseException as e:  # noqa: BLE001 - anything else reaches the consumer unchanged
            failed = _Piece([], [], e)
        try:
            for k in range(grp.first, grp.last + 1):
                self._deposit(plan, k, j,
                              failed if failed is not None else self._piece(plan, table, grp, plan.ranges[k]))
        except BaseException as e:  # noqa: BLE001 - a bug here must not leave the consumer waiting forever
            for rng in plan.ranges[grp.first:grp.last + 1]:
                future = rng.future
                if future is not None and not future.done():
                    future.set_exception(e)

    def _piece(self, plan: _ParquetPlan, table: pa.Table, grp: _Group, rng: _Range) -> _Piece:
        a = max(rng.start, grp.start) - grp.start
        b = min(rng.end, grp.start + grp.rows) - grp.start
        deferred = _Deferred(plan.reader)
        chunks: list[Chunk] = []
        physical = grp.start + a
        try:
            for rb in table.slice(a, b - a).to_batches():
                if rb.num_rows:
                    chunks.append(plan.reader._convert(rb, physical, plan.has_ids, bad=deferred.bad))
                    physical += rb.num_rows
        except Exception as e:  # noqa: BLE001 - the first bad row (on_error='raise') or a failure: raised in order
            return _Piece(chunks, deferred.skipped, e)
        return _Piece(chunks, deferred.skipped)

    def _deposit(self, plan: _ParquetPlan, k: int, j: int, piece: _Piece | _ReadFailed) -> None:
        rng = plan.ranges[k]
        with self.lock:
            rng.pieces[j] = piece
            rng.waiting -= 1
            complete = rng.waiting == 0
        if not complete:
            return
        future = rng.future
        try:
            result = self._finish(rng)
        except BaseException as e:  # noqa: BLE001 - raised by the consumer's take()
            future.set_exception(e)
        else:
            future.set_result(result)

    def _finish(self, rng: _Range) -> _RangeResult:
        """Join a range's pieces in row order: its chunks, joined and cut into batches unless all columns are
        read (``write_kept`` takes the pieces' own record batches), and the bad rows skipped. A row group that
        cannot be decoded is the whole result: the file fails (``ArrowReader._parquet_chunks``)."""
        pieces = [rng.pieces.pop(j) for j in range(rng.first, rng.last + 1)]
        failed = next((p for p in pieces if isinstance(p, _ReadFailed)), None)
        if failed is not None:
            return _RangeResult(read_error=failed.error, read_error_group=failed.g, read_error_row=failed.start)
        skipped: list[tuple[str, int]] = []
        chunks: list[Chunk] = []
        for p in pieces:
            skipped += p.skipped
            if p.error is not None:
                return _RangeResult(skipped=skipped, error=p.error)
            chunks += p.chunks
        if not self.all_columns:  # the pieces are not kept: batches
            chunks = [join_chunks(chunks, self.batch_bytes)]
        return _RangeResult(skipped=skipped, chunks=chunks)
