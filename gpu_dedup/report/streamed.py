"""A per-document score column's figures read in pieces: a report over a table that its process need not hold
(a Ray run's per-file parts, or a large file, read a batch of one column at a time), with the values the whole
column gives.

    table_batches  a table's batches (some of its columns), in order, from the batch holding a given row on (the
                 files and row groups before it skipped unread)
    open_paged   a Parquet file opened to read its column chunks a page at a time (READ_BUFFER), not whole
    group_batch_rows  the rows of a batch of about BATCH_BYTES of a row group's columns
    strings, int64s  Arrow arrays of Python strings / numpy integers made from their buffers, without pandas
    ScoreColumn  the column's finite float64 values, as batches of one column of the table's files (a file,
                 or a dataset's ``part-<k>.parquet`` files in order: ``table_files``), each optionally
                 transformed (log10)
    order_stat   the k-th smallest value, exactly: histograms of the values in a shrinking range, one pass each,
                 until the range holds few enough values to sort (or a single value)
    percentiles  ``numpy.percentile``'s default ("linear") of the column, from its two neighbouring order
                 statistics, bit for bit
    split_at     the values below and above a range, and the min and max of those in it
    histogram    ``numpy.histogram(values, bins)`` over the column, summed over the batches with its edges

Memory: one batch (BATCH_ROWS values) and, at the end of an order statistic's search, at most SORT_LIMIT values.
Each figure reads the column again (a percentile's search: a few passes), which costs time, not memory: 4.7 s for
the 20 score columns of 1 M documents (docs/scale.md).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from ..io.arrow import release_pool  # after each batch: the Arrow pool's unused memory given back

import numpy as np

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

BATCH_ROWS = 1 << 16
# Bytes of a column chunk read at a time: without a buffer pyarrow reads each column chunk whole before decoding
# its first page, so the memory of a batch grew with the row group (a Ray run's input file of 100 k documents: its
# text column chunk, 6.4 MB as stored, read whole to decode 1,000 rows held 8.6 MiB, 2.7 with the buffer).
READ_BUFFER = 1 << 18
# About the bytes of a row group's columns (as stored, uncompressed) in a batch of ``table_batches`` or of the
# report's input texts: bounded in rows alone, a batch of long texts is as large as its rows make them. The pipeline
# report of 1 M documents (input row groups of 100,000 rows): 114.9 MiB peak RSS in 0.81 s; 121.7 MiB in 0.69 s with
# 1 MiB batches.
BATCH_BYTES = 1 << 18
SORT_LIMIT = 1 << 16  # values an order statistic's last range may hold to be sorted
_BINS = 4096  # the bins of each narrowing pass


def table_files(path: str) -> list[str]:
    """The Parquet files of a table: ``path`` itself, or a dataset folder's files in name order."""
    if os.path.isdir(path):
        return [os.path.join(path, n) for n in sorted(os.listdir(path)) if n.endswith(".parquet")]
    return [path]


def open_paged(source: Any, **kwargs: Any) -> pq.ParquetFile:
    """``pyarrow.parquet.ParquetFile(source, **kwargs)`` reading READ_BUFFER bytes of a column chunk at a time (the
    pages a batch needs), none ahead (no ``pre_buffer``)."""
    import pyarrow.parquet as pq

    return pq.ParquetFile(source, pre_buffer=False, buffer_size=READ_BUFFER, **kwargs)


def table_batches(path: str, columns: Sequence[str], start: int = 0,
                  dictionary: Sequence[str] = ()) -> Iterator[tuple[int, pa.RecordBatch]]:
    """(first row, batch) of ``columns`` of the table at ``path`` (a file or a dataset folder: ``table_files``),
    rows numbered as the one table ``pyarrow.parquet.read_table`` reads, a row group at a time in batches of about
    BATCH_BYTES (``group_batch_rows``), from the batch holding row ``start`` on: the files and row groups wholly
    before it are skipped by their metadata, unread. The columns named in ``dictionary`` come as dictionary arrays,
    for string columns of a few values (65,536 rows of the decisions' reason: 0.26 MB, not 1.37 as strings).

    Memory: a batch and each column's reader (about a page decoded, and its dictionary page where it has one),
    whatever the row group's size. A column chunk is read a page at a time (``open_paged``): pyarrow's default
    ``pre_buffer`` reads those of every row group asked for at the start (Arrow held 26.6 MiB, not 8.7, at the first
    batch of 3 M decisions rows), and without a buffer each column chunk is read whole. The columns are decoded in
    this thread: the reader's thread pool left the peak RSS of the pipeline report 30-60 MiB higher, and varying
    from run to run, for no time saved (0.6 s either way over 3 M rows). The pool's unused memory is given back
    after each batch (``release_pool``)."""
    base = 0
    for f in table_files(path):
        with open_paged(f, read_dictionary=list(dictionary) or None) as pf:
            md = pf.metadata
            if base + md.num_rows <= start:
                base += md.num_rows
                continue
            ends = np.cumsum([md.row_group(g).num_rows for g in range(md.num_row_groups)], dtype=np.int64)
            first = int(np.searchsorted(ends, start - base, side="right"))  # the row group holding ``start``
            row = base + (int(ends[first - 1]) if first else 0)
            for g in range(first, len(ends)):
                for b in pf.iter_batches(batch_size=group_batch_rows(md.row_group(g), columns), row_groups=[g],
                                         columns=columns, use_threads=False):
                    if row + b.num_rows > start:
                        yield row, b
                    row += b.num_rows
                    del b
                    release_pool()  # what the caller freed of the batches before
            base += md.num_rows


def group_batch_rows(group: Any, columns: Sequence[str]) -> int:
    """Rows of about BATCH_BYTES of ``columns`` of a Parquet row group (``pyarrow.parquet.RowGroupMetaData``), by its
    column chunks' uncompressed sizes (the values as stored: less than the decoded strings where a dictionary page
    stands for repeated ones); at least 1, at most BATCH_ROWS."""
    size = sum(group.column(i).total_uncompressed_size for i in range(group.num_columns)
               if group.column(i).path_in_schema in columns)
    return int(min(BATCH_ROWS, max(1, group.num_rows * BATCH_BYTES // max(size, 1))))


def strings(values: Sequence[str]) -> pa.Array:
    """pa.string() array of ``values``, built from its buffers: ``pyarrow.array`` of Python values (or of a numpy
    array) imports pandas, 33 MiB of a Ray driver that has no other use for it."""
    import pyarrow as pa

    data = [v.encode("utf-8") for v in values]
    offsets = np.zeros(len(data) + 1, np.int32)
    np.cumsum([len(b) for b in data], out=offsets[1:])
    return pa.StringArray.from_buffers(len(data), pa.py_buffer(offsets), pa.py_buffer(b"".join(data)))


def int64s(values: np.ndarray) -> pa.Array:
    """pa.int64() array of the integers ``values``, sharing a contiguous copy's buffer (no pandas, as ``strings``)."""
    import pyarrow as pa

    v = np.ascontiguousarray(values, np.int64)
    return pa.Array.from_buffers(pa.int64(), len(v), [None, pa.py_buffer(v)])


@dataclass
class ScoreColumn:
    """A numeric column read in batches (``read()`` yields float64 arrays); ``transform`` maps each batch before its
    non-finite values are dropped. ``of_files``: a column of Parquet files, ``BATCH_ROWS`` rows at a time;
    ``of_array``: an array in memory, one batch."""

    read: Callable[[], Iterator[np.ndarray]]
    transform: Callable[[np.ndarray], np.ndarray] | None = None

    @staticmethod
    def of_files(files: list[str], name: str) -> ScoreColumn:
        def read() -> Iterator[np.ndarray]:
            import pyarrow.parquet as pq

            for f in files:
                pf = pq.ParquetFile(f)
                if name not in pf.schema_arrow.names:
                    continue
                for b in pf.iter_batches(batch_size=BATCH_ROWS, columns=[name]):
                    yield np.asarray(b.column(0).to_numpy(zero_copy_only=False), np.float64)
        return ScoreColumn(read)

    @staticmethod
    def of_array(values: np.ndarray) -> ScoreColumn:
        return ScoreColumn(lambda: iter([np.asarray(values, np.float64)]))

    def mapped(self, transform: Callable[[np.ndarray], np.ndarray]) -> ScoreColumn:
        return ScoreColumn(self.read, transform)

    def batches(self) -> Iterator[np.ndarray]:
        for v in self.read():
            if self.transform is not None:
                with np.errstate(divide="ignore", invalid="ignore"):
                    v = self.transform(v)
            yield v[np.isfinite(v)]

    def summary(self) -> tuple[int, float, float]:
        """(finite values, their min, their max); min and max are nan without a finite value."""
        n, lo, hi = 0, math.inf, -math.inf
        for v in self.batches():
            if len(v):
                n, lo, hi = n + len(v), min(lo, float(v.min())), max(hi, float(v.max()))
        return (n, lo, hi) if n else (0, math.nan, math.nan)


def _inside(v: np.ndarray, a: float, b: float, closed: bool) -> np.ndarray:
    return v[(v >= a) & ((v <= b) if closed else (v < b))]


def order_stat(col: ScoreColumn, k: int, lo: float, hi: float) -> float:
    """The k-th smallest (from 0) finite value of ``col``, whose values lie in [lo, hi]."""
    a, b, closed, below = lo, hi, True, 0  # the range [a, b] (or [a, b)) holds the rank; ``below`` values < a
    while True:
        count, mn, mx = 0, math.inf, -math.inf
        for v in col.batches():
            v = _inside(v, a, b, closed)
            if len(v):
                count, mn, mx = count + len(v), min(mn, float(v.min())), max(mx, float(v.max()))
        if mn == mx:
            return mn
        if count <= SORT_LIMIT:
            kept = np.sort(np.concatenate([_inside(v, a, b, closed) for v in col.batches()]))
            return float(kept[k - below])
        edges = np.linspace(mn, mx, _BINS + 1)
        counts = np.zeros(_BINS, np.int64)
        for v in col.batches():
            v = _inside(v, mn, mx, True)
            counts += np.bincount(np.minimum(np.searchsorted(edges, v, side="right") - 1, _BINS - 1),
                                  minlength=_BINS)
        j = int(np.searchsorted(np.cumsum(counts), k - below, side="right"))
        below += int(counts[:j].sum())
        a, b, closed = float(edges[j]), float(edges[j + 1]), j == _BINS - 1


def percentiles(col: ScoreColumn, qs: tuple[float, ...], n: int, lo: float, hi: float) -> list[float]:
    """``numpy.percentile(values, qs)`` (method "linear") of ``col``'s ``n`` finite values in [lo, hi]."""
    out = []
    for q in qs:
        vi = np.float64(n - 1) * (np.float64(q) / np.float64(100))
        f = math.floor(vi)
        gamma = vi - np.float64(f)
        a = np.float64(order_stat(col, int(f), lo, hi))
        b = np.float64(order_stat(col, min(int(f) + 1, n - 1), lo, hi)) if f < n - 1 else a
        diff = b - a
        out.append(float(b - diff * (1 - gamma) if gamma >= 0.5 else a + diff * gamma))
    return out


def split_at(col: ScoreColumn, a: float, b: float) -> tuple[int, int, float, float]:
    """(values below ``a``, values above ``b``, min and max of those in [a, b]: nan when none)."""
    below = above = 0
    mn, mx = math.inf, -math.inf
    for v in col.batches():
        below, above = below + int(np.count_nonzero(v < a)), above + int(np.count_nonzero(v > b))
        v = _inside(v, a, b, True)
        if len(v):
            mn, mx = min(mn, float(v.min())), max(mx, float(v.max()))
    return (below, above, mn, mx) if mn <= mx else (below, above, math.nan, math.nan)


def histogram(col: ScoreColumn, bins: int, lo: float, hi: float, within: tuple[float, float] | None = None) \
        -> tuple[np.ndarray, np.ndarray, int]:
    """``numpy.histogram(values, bins)`` of ``col``'s values (those in ``within``, both ends included: None, all),
    whose min and max are ``lo`` and ``hi``: (counts, edges, values counted)."""
    edges = np.histogram_bin_edges(np.array([lo, hi]), bins=bins)
    counts = np.zeros(bins, np.int64)
    n = 0
    for v in col.batches():
        if within is not None:
            v = _inside(v, within[0], within[1], True)
        counts += np.histogram(v, bins=edges)[0]
        n += len(v)
    return counts, edges, n
