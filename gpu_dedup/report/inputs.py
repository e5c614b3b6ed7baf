"""A run as the report reads it: its outputs (decisions.parquet, run.json) and, again, its input texts.

The inputs are located from run.json or a given source, and read only as far as the report needs them;
every row read is checked against the decisions' ids. ``scan_inputs`` takes the decisions as a table held whole
(the dedup report's) or as ``StreamedRows``: the table on disk, read again forward a batch at a time over the rows
the inputs are read at, with each input file's rows counted beforehand by ``FileRows`` (the pipeline report's,
whose memory does not grow with the corpus).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..config import keep_column
from ..decisions import codes_of, flags_of
from ..errors import DataError, MissingFileError, UsageError
from ..text.split import whitespace_words


# ------------------------------------------------------------------------------------------- run inputs
class Mismatch(DataError):
    """The inputs read now are not the ones the decisions describe."""


@dataclass
class Scan:
    texts: dict[int, str]
    bytes_input: int | None = None
    bytes_kept: int | None = None
    words_input: int | None = None
    words_kept: int | None = None


def _files_from_source(source: Any) -> list:
    from .. import io

    if isinstance(source, (list, tuple)) and source and all(isinstance(f, io.InputFile) for f in source):
        return list(source)
    if isinstance(source, (pa.Table, pa.RecordBatch)) or type(source).__name__ == "DataFrame":
        return io.table_input(source)
    if isinstance(source, (str, os.PathLike)):
        return io.resolve_inputs([source])
    if isinstance(source, (list, tuple)):
        return io.resolve_inputs(list(source))
    raise UsageError(f"source must be path(s)/glob(s), a pyarrow Table, a pandas DataFrame or the run's "
                     f"InputFile list, got {type(source).__name__}")


def locate_inputs(stats: dict, source: Any) -> tuple[list | None, str | None]:
    """(files in the run's order, None) or (None, why the texts are not shown)."""
    from .. import io

    recorded = list(stats.get("inputs") or [])
    if source is not None:
        files = _files_from_source(source)
        if len(files) != len(recorded):
            return None, (f"source= gives {len(files)} input file(s) but the run read {len(recorded)} "
                          f"({', '.join(recorded[:3])}{', …' if len(recorded) > 3 else ''}); pass the run's inputs")
        return files, None
    if recorded == [io.TABLE_PATH]:
        return None, ("the run read an in-memory table; pass it again as write_report(out_dir, source=table) "
                      "to show text excerpts and retained sizes")
    tries = []
    if stats.get("input_paths"):
        tries.append(list(stats["input_paths"]))
    tries.append([os.path.join(os.getcwd(), r) for r in recorded])
    for paths in tries:
        if paths and all(os.path.isfile(p) for p in paths):
            files = io.resolve_inputs(paths)
            if len(files) == len(recorded):
                return files, None
    shown = ", ".join(recorded[:3]) + (", …" if len(recorded) > 3 else "")
    return None, (f"the input files ({shown}) were not found: run.json names them relative to their common "
                  f"folder. Run gpu-dedup report OUT --source INPUT… (Python: write_report(out_dir, source=…)) "
                  "to show text excerpts and retained sizes")


def _file_rows(decisions: pa.Table, recorded: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(start, count) int64 (files,) of each input file's rows in the decisions (rows are in file order)."""
    enc = pc.dictionary_encode(decisions["source"]).combine_chunks()
    names = enc.dictionary.to_pylist()
    pos = {name: i for i, name in enumerate(recorded)}
    missing = [n for n in names if n not in pos]
    if missing:
        raise Mismatch(f"decisions name input {missing[0]!r}, which run.json does not list")
    mapping = np.array([pos[n] for n in names], np.int64)
    file_of_row = mapping[enc.indices.to_numpy(zero_copy_only=False)]
    if file_of_row.size and (np.diff(file_of_row) < 0).any():
        raise Mismatch("decisions rows are not in input-file order")
    counts = np.bincount(file_of_row, minlength=len(recorded)).astype(np.int64)
    return np.cumsum(counts) - counts, counts


class FileRows:
    """Each input file's (start, count) of rows, counted from the decisions' source column a batch at a time, in
    row order (``add``); ``result`` checks them as ``_file_rows`` checks the whole column. Holds one entry per
    distinct source."""

    def __init__(self) -> None:
        self._names: dict[Any, None] = {}   # every source named, in order of first appearance
        self._runs: list[list[Any]] = []    # [source, rows] of each run of equal sources, while in order
        self._disordered = False            # a source came back after another one: not in input-file order

    def add(self, source: pa.Array) -> None:
        enc = source if pa.types.is_dictionary(source.type) else pc.dictionary_encode(source)
        names = enc.dictionary.to_pylist() + [None]  # a null source: None, as run.json lists no such input
        codes = codes_of(enc.indices, len(names) - 1)
        cuts = np.flatnonzero(np.diff(codes)) + 1
        for a, b in zip([0, *cuts.tolist()], [*cuts.tolist(), len(codes)]):
            name = names[codes[a]]
            if self._runs and self._runs[-1][0] == name:
                self._runs[-1][1] += b - a
            elif name in self._names:
                self._disordered = True
            elif not self._disordered:
                self._runs.append([name, b - a])
            self._names.setdefault(name)

    def result(self, recorded: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(start, count) int64 (files,) as ``_file_rows`` gives them, and its Mismatch where it raises one."""
        pos = {name: i for i, name in enumerate(recorded)}
        missing = [n for n in self._names if n not in pos]
        if missing:
            raise Mismatch(f"decisions name input {missing[0]!r}, which run.json does not list")
        at = np.array([pos[n] for n, _ in self._runs], np.int64)
        if self._disordered or (np.diff(at) < 0).any():
            raise Mismatch("decisions rows are not in input-file order")
        counts = np.zeros(len(recorded), np.int64)
        np.add.at(counts, at, np.array([k for _, k in self._runs], np.int64))
        return np.cumsum(counts) - counts, counts


class _TableRows:
    """``scan_inputs``' rows of a decisions table held whole."""

    def __init__(self, decisions: pa.Table):
        self._table = decisions
        self._ids = decisions["id"].combine_chunks()
        self._keep: np.ndarray | None = None

    def file_rows(self, recorded: list[str]) -> tuple[np.ndarray, np.ndarray]:
        return _file_rows(self._table, recorded)

    def ids(self, lo: int, n: int) -> pa.Array:
        return self._ids.slice(lo, n)

    def keep(self, lo: int, n: int) -> np.ndarray:
        if self._keep is None:
            self._keep = self._table["keep"].to_numpy(zero_copy_only=False)
        return self._keep[lo:lo + n]

    def id_of(self, row: int) -> Any:
        return self._ids[row].as_py()


class StreamedRows:
    """``scan_inputs``' rows of a decisions table on disk, not held: the ids and keep flags of the rows asked for,
    read forward a batch at a time (a row behind the last asked for reads again from its row group), so that at
    most one input batch's rows and one decisions batch are held.

    Args:
        path: the table (``decisions.table_path``: one file or a dataset folder of parts).
        files: each input file's rows, counted over the same table (``FileRows``).
        wanted: row -> id of the rows whose texts are read (named by the errors).
    """

    def __init__(self, path: str, files: FileRows, wanted: dict[int, Any]):
        self._path, self._files, self._wanted = path, files, wanted
        self._it: Any = None
        self._lo = 0
        self._buf: list[tuple[int, pa.RecordBatch]] = []  # (first row, batch), covering the rows last asked for

    def file_rows(self, recorded: list[str]) -> tuple[np.ndarray, np.ndarray]:
        return self._files.result(recorded)

    def _rows(self, lo: int, n: int) -> pa.Table:
        from .streamed import table_batches

        if self._it is None or lo < self._lo:
            self._it, self._buf = table_batches(self._path, ["id", "keep"], lo), []
        self._lo = lo
        self._buf = [(r, b) for r, b in self._buf if r + b.num_rows > lo]
        while n > 0 and (not self._buf or self._buf[-1][0] + self._buf[-1][1].num_rows < lo + n):
            r, b = next(self._it, (None, None))
            if b is None:
                raise Mismatch(f"{self._path} ends before row {lo + n - 1:,} (its input files' rows were counted "
                               "beyond it): the decisions changed while the report read them")
            if r + b.num_rows > lo:  # (the parts may differ in string width: one type for the slice)
                self._buf.append((r, pa.record_batch([b.column("id").cast(pa.string()), b.column("keep")],
                                                     names=["id", "keep"])))
        if n <= 0:
            return pa.schema([("id", pa.string()), ("keep", pa.bool_())]).empty_table()
        return pa.Table.from_batches([b for _, b in self._buf]).slice(lo - self._buf[0][0], n)

    def ids(self, lo: int, n: int) -> pa.Array:
        return self._rows(lo, n)["id"].combine_chunks()

    def keep(self, lo: int, n: int) -> np.ndarray:
        return self._rows(lo, n)["keep"].to_numpy()

    def id_of(self, row: int) -> Any:
        return self._wanted[row] if row in self._wanted else self.ids(row, 1)[0].as_py()


def _files_without_skips(stats: dict, recorded: list[str]) -> set[int]:
    """Indexes of the input files of which the run dropped no row, so that its row numbering of the file is
    the file's physical one. run.json's ``read.skipped`` lists every dropped row and skipped file by name
    (``file``: the name in ``inputs``); a run with on_error='raise' drops nothing (a bad row ends it). When
    neither tells, no file qualifies."""
    read = stats.get("read")
    skipped = read.get("skipped") if isinstance(read, dict) else None
    if isinstance(skipped, list) and all(isinstance(s, dict) and "file" in s for s in skipped):
        bad = {s["file"] for s in skipped}
        return {i for i, name in enumerate(recorded) if name not in bad}
    if stats.get("config", {}).get("on_error", "raise") == "raise":
        return set(range(len(recorded)))
    return set()


def _check_ids(got: pa.Array, expected: pa.Array, row: int, relpath: str) -> None:
    """Raise Mismatch at the first position where ``got`` (ids read now) differs from ``expected`` (the
    decisions' ids of the same rows, the first being run row ``row``)."""
    eq = pc.equal(got.cast(pa.string()), expected.cast(pa.string()))
    same = pc.and_kleene(eq, pc.is_valid(eq))  # a null id: a mismatch (no fill_null: its scalar imports pandas)
    if not pc.all(same).as_py():
        k = int(np.flatnonzero(~flags_of(same))[0])
        raise Mismatch(f"row {row + k:,} of the run has id {expected[k].as_py()!r} but the input now "
                        f"has {got[k].as_py()!r} ({relpath})")


def _parquet_texts(f: Any, text_field: str, id_field: str | None, run: _TableRows | StreamedRows, lo: int,
                   hi: int, here: np.ndarray) -> dict[int, str] | None:
    """Texts of the run rows ``here`` (sorted, in [lo, hi): the run's rows of Parquet file ``f``), reading
    only the row groups that hold them; only valid when the run dropped no row of the file (run row
    lo + k is physical row k). Every row of the row groups read has its id checked against ``run``'s (the
    decisions). Ids and texts are converted exactly as the reader converts them (integer ids as decimal strings,
    generated ids '<relpath>:<row>', invalid UTF-8 replaced by U+FFFD). None when the file's columns are not what the
    reader accepts: the sequential read then raises or reports what the run's reader would.

    A row group is read in batches of about ``streamed.BATCH_BYTES`` of its columns (``group_batch_rows``), a page
    at a time (``streamed.open_paged``), each batch's ids checked against as many rows of ``run``: read whole, a row
    group's texts, its ids and the decisions' ids of its rows were held together, memory that grew with the row
    group (Arrow's peak for a row group of 60,000 texts of 350 characters: 79.5 MB whole, 7.0 MB in batches with
    the decisions streamed, tests/report/test_streamed.py)."""

    from .. import io
    from .streamed import READ_BUFFER, group_batch_rows, int64s, release_pool

    with io.open_parquet(f, pre_buffer=False, buffer_size=READ_BUFFER) as pf:
        md = pf.metadata
        schema = pf.schema_arrow
        if text_field not in schema.names or not io.is_stringish(schema.field(text_field).type):
            return None
        has_ids = bool(id_field) and id_field in schema.names
        if has_ids:
            t = schema.field(id_field).type
            base = t.value_type if pa.types.is_dictionary(t) else t
            if not (io.is_stringish(t) or pa.types.is_integer(base)):
                return None
        if md.num_rows != hi - lo:
            raise Mismatch(f"{f.relpath} now has {md.num_rows:,} rows but the run read {hi - lo:,}")
        sizes = np.array([md.row_group(g).num_rows for g in range(md.num_row_groups)], np.int64)
        ends = np.cumsum(sizes)
        phys = here - lo
        group_of = np.searchsorted(ends, phys, side="right")  # empty row groups hold no wanted row
        columns = [text_field] + ([id_field] if has_ids else [])
        texts: dict[int, str] = {}
        for g in np.unique(group_of).tolist():
            first, n = int(ends[g] - sizes[g]), int(sizes[g])
            rows = phys[group_of == g]
            at = first  # the physical row of the batch's first row
            for b in pf.iter_batches(batch_size=group_batch_rows(md.row_group(g), columns), row_groups=[g],
                                     columns=columns, use_threads=False):
                k = b.num_rows
                if has_ids:
                    got, _ = io.as_utf8(b.column(id_field), pa.string())
                else:
                    got = io.generated_ids(f.relpath, at, k)
                _check_ids(got, run.ids(lo + at, k), lo + at, f.relpath)
                mine = rows[(rows >= at) & (rows < at + k)]
                if mine.size:
                    text, _ = io.as_utf8(b.column(text_field).take(int64s(mine - at)), pa.large_string())
                    for r, value in zip((mine + lo).tolist(), text.to_pylist()):
                        if value is None:  # the run read a text there (it dropped no row of this file)
                            raise Mismatch(f"row {r:,} of the run ({run.id_of(r)!r}) now has a null text "
                                           f"({f.relpath})")
                        texts[r] = value
                at += k
                del b
                release_pool()
            if at != first + n:
                raise Mismatch(f"{f.relpath} row group {g} now has {at - first:,} rows, its metadata {n:,}")
    return texts


def scan_inputs(files: list, stats: dict, decisions: pa.Table | StreamedRows, want: np.ndarray,
                need_sizes: bool) -> Scan:
    """Read the texts of rows ``want`` (sorted int64) and, with ``need_sizes``, every document's bytes and
    whitespace words. Batches are numbered as in the run (same reader settings), and each batch's ids are
    checked against the decisions (a table, or ``StreamedRows``: the same reads, checks and errors).

    Without ``need_sizes``, a Parquet file of which the run dropped no row (``_files_without_skips``) is
    read only in the row groups holding wanted rows (``_parquet_texts``). Other files (JSON Lines, tables,
    Parquet files with skipped rows, whose run numbering is not the physical one) are read from their
    start up to their last wanted row."""
    from .. import io

    cfg = stats.get("config", {})
    recorded = list(stats.get("inputs") or [])
    rows = decisions if isinstance(decisions, StreamedRows) else _TableRows(decisions)
    starts, counts = rows.file_rows(recorded)
    clean = _files_without_skips(stats, recorded)
    kc = keep_column(cfg.get("cluster", {}).get("keep", "first"))
    id_field, text_field = cfg.get("id_field", "id"), cfg.get("text_field", "text")
    scan = Scan(texts={})
    sums = np.zeros(4, np.int64)  # bytes in, bytes kept, words in, words kept
    for i, f in enumerate(files):
        lo, hi = int(starts[i]), int(starts[i] + counts[i])
        here = want[(want >= lo) & (want < hi)]
        if not need_sizes and here.size == 0:
            continue
        if not need_sizes and f.fmt == "parquet" and i in clean:
            texts = _parquet_texts(f, text_field, id_field, rows, lo, hi, here)
            if texts is not None:
                scan.texts.update(texts)
                continue
        row = lo
        for batch in io.iter_batches([f], id_field=id_field, text_field=text_field,
                                     batch_bytes=int(cfg.get("batch_bytes") or 64 << 20),
                                     on_error=cfg.get("on_error", "raise"), keep_column=kc):
            n = len(batch)
            if row + n > hi:
                raise Mismatch(f"{f.relpath} now has more rows than the run read ({hi - lo:,})")
            _check_ids(batch.ids, rows.ids(row, n), row, f.relpath)
            if need_sizes:
                nbytes = pc.binary_length(batch.text).to_numpy(zero_copy_only=False).astype(np.int64)
                words = whitespace_words(batch.text)  # a model-free stand-in for tokens
                k = rows.keep(row, n)
                sums += [nbytes.sum(), nbytes[k].sum(), words.sum(), words[k].sum()]
            for r in here[(here >= row) & (here < row + n)].tolist():
                scan.texts[r] = batch.text[r - row].as_py()
            row += n
            if not need_sizes and (here.size == 0 or row > here[-1]):
                break
        if need_sizes and row != hi:
            raise Mismatch(f"{f.relpath} now has {row - lo:,} rows but the run read {hi - lo:,}")
    lost = [r for r in want.tolist() if r not in scan.texts]
    if lost:
        raise Mismatch(f"row {lost[0]:,} of the run ({rows.id_of(lost[0])!r}) is no longer in the inputs")
    if need_sizes:
        scan.bytes_input, scan.bytes_kept, scan.words_input, scan.words_kept = (int(x) for x in sums)
    return scan


# --------------------------------------------------------------------------------------------- run outputs
def load_summary(out_dir: str, max_clusters: int) -> tuple[dict, Any]:
    """(run.json, the run's ``summary.RunSummary``): the aggregates a Ray run recorded, else made from
    decisions.parquet (``load_run``)."""
    from ..io import read_json_record
    from .summary import recorded, summary_of

    run_json = os.path.join(out_dir, "run.json")
    if os.path.isfile(run_json):
        stats = read_json_record(run_json)
        got = recorded(out_dir, stats, max_clusters)
        if got is not None:
            return stats, got
    stats, decisions = load_run(out_dir)
    return stats, summary_of(decisions, max_clusters)


def load_run(out_dir: str) -> tuple[dict, pa.Table]:
    from ..decisions import read_table, table_path
    from ..io import read_json_record

    run_json = os.path.join(out_dir, "run.json")
    if not os.path.isfile(run_json):
        raise MissingFileError(f"{run_json!r} does not exist; point to the output directory of a finished run "
                               "(gpu-dedup run INPUT -o OUT writes decisions.parquet and run.json)")
    dec_path = table_path(out_dir, "decisions")  # one file, or a Ray run's per-file parts
    stats = read_json_record(run_json)
    decisions = read_table(out_dir, "decisions")  # a damaged file or part: a DataError naming it
    missing = {"id", "keep", "reason", "cluster_id", "jaccard", "cluster_size", "source"} - set(decisions.column_names)
    if missing:
        raise DataError(f"{dec_path!r} lacks columns {sorted(missing)}; it was not written by gpu_dedup's run")
    n = stats.get("counts", {}).get("input")
    if n is not None and n != decisions.num_rows:
        raise DataError(f"run.json counts {n:,} input documents but {dec_path!r} has {decisions.num_rows:,} "
                        "rows; the two files come from different runs")
    return stats, decisions
