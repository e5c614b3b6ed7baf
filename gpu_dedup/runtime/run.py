"""The run skeleton: what every program's run does (dedup, filter, paragraph, screen, substring, semantic, the
index writer, classifier training), in one place. Each program supplies only its steps and its table's schema.

    own        ``owned``: the output directories outside the inputs, locked, an earlier run's files replaced
               (``outputs.check_outside_inputs`` + ``outputs.own``)
    resources  ``resources``: the device ("auto" resolved, never a silent fallback) and the CPU threads in effect
    steps      ``Steps``: timed named steps; their seconds are run.json's ``timings_s``, a first run's kernel
               compilation its own ``compile`` entry (``seconds_line`` says it on the summary line)
    header     ``header``: the keys every program's run.json starts with (``HEADER_KEYS``), built here only;
               ``created`` and ``versions`` are the one source of those two values for every file the tool writes
    table      ``write_table``: the per-document table, checked against its declared schema, written atomically
               (``write_tables``: from parts, in fixed row groups, so that both engines write the same bytes)
    finish     ``finish``: run.json (with ``cost``: the run's meter, ``cost.Meter.usage``), then the report, which
               can never fail the run (a warning says how to retry)
    result     ``RunResult``: the surface every program's result shares (``summary()``, ``filter(df)``,
               ``keep_mask``, ``to_pandas()``)
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import logging
import os
import platform
import time
from typing import Any, Callable, ClassVar, Iterable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import io
from .._version import __version__
from ..errors import DataError, RunError, UsageError
from .compiling import compile_clock
from .cost import current, metered, peak_rss_bytes  # noqa: F401 - peak_rss_bytes: every program's, from here
from .device import array_backend, resolve_device, set_threads
from .heartbeat import phase
from .outputs import check_outside_inputs, own

logger = logging.getLogger(__name__)

# run.json's first keys, in this order, in every program's run statistics (tests/test_run.py holds them to it)
HEADER_KEYS = ("program", "gpu_dedup_version", "created", "device", "array_backend", "threads", "versions",
               "config", "inputs", "read", "bytes_read", "counts", "timings_s")


# ---------------------------------------------------------------------------------------------- own

@contextlib.contextmanager
def owned(out: str | os.PathLike | None, *, roots: Sequence[str], command: str, overwrite: bool,
          work_dir: str | os.PathLike | None = None, index_dir: str | os.PathLike | None = None,
          resume: bool = False, flag: str = "overwrite=True", overwrite_same_command: bool = False) -> Iterator[Any]:
    """Own a run's directories while the block runs: each must lie outside the inputs (``roots``, from
    ``outputs.input_roots``), then ``outputs.own`` locks them, replaces the earlier run's files and removes this
    run's again when the block raises. The run's cost is metered meanwhile (``cost.metered``: a pipeline step's
    meter when there is one). Yields ``own``'s session (None without ``out``).

    Raises:
        ValueError: a directory at or under an input.
        FileExistsError: ``out`` holds a finished run and neither ``overwrite`` nor ``resume`` is given.
        outputs.LockedError: another run holds one of the directories.
    """
    check_outside_inputs({"output_dir": out, "work_dir": work_dir, "save_index": index_dir}, roots)
    with metered(), own(out, work_dir=work_dir, index_dir=index_dir, command=command, overwrite=overwrite,
                        resume=resume, roots=roots, flag=flag, overwrite_same_command=overwrite_same_command) as session:
        yield session


# ---------------------------------------------------------------------------------------------- resources

def resources(device: str, threads: int | None = None) -> tuple[str, int]:
    """(device, threads): ``device`` ("auto" | "cpu" | "cuda") resolved by ``device.resolve_device`` (an
    unavailable "cuda" raises, it never falls back), and the CPU threads the kernels use (``threads`` when
    given, else numba's default)."""
    return resolve_device(device), set_threads(threads)


# ---------------------------------------------------------------------------------------------- engine

def ray_dirs(output_dir: str | os.PathLike | None, work_dir: str | os.PathLike | None, what: str) -> tuple[str, str]:
    """(OUT, the work dir) of a program on engine="ray": its tasks write the outputs, so OUT is required; the work
    dir (every node must see it: a shared path or an fsspec URL) defaults to OUT/work.

    Raises:
        ConfigError: no ``output_dir``.
    """
    from ..errors import ConfigError

    if output_dir is None:
        raise ConfigError(f"{what} on engine='ray' writes its outputs from the Ray tasks: pass an output directory "
                          "(-o OUT)")
    out = os.fspath(output_dir)
    return out, os.fspath(work_dir) if work_dir is not None else os.path.join(out, "work")


# ---------------------------------------------------------------------------------------------- steps

class Steps:
    """Timed named steps: ``with steps("score"): ...`` adds the block's seconds to ``timings[name]`` (a step
    run twice sums). ``t_start``: the run's start (``perf_counter``), for ``total``. Seconds spent compiling
    kernels inside a step (a first run: ``compiling.compile_clock``) go to ``timings["compile"]`` instead, so
    that step timings and throughputs are the work's own (issue 28 item 8); steps of one ``Steps`` do not
    nest."""

    def __init__(self, t_start: float | None = None, timings: dict[str, float] | None = None) -> None:
        self.t_start = time.perf_counter() if t_start is None else t_start
        self.timings: dict[str, float] = {} if timings is None else timings

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        c = compile_clock()
        t = time.perf_counter()
        try:
            yield
        finally:
            wall = time.perf_counter() - t
            compiled = min(compile_clock() - c, wall)  # a compile in another thread cannot exceed the block
            self.timings[name] = self.timings.get(name, 0.0) + wall - compiled
            if compiled > 0:
                self.timings["compile"] = self.timings.get("compile", 0.0) + compiled

    def total(self) -> float:
        """Set and return ``timings["total"]``: seconds since ``t_start`` (compilation included)."""
        self.timings["total"] = time.perf_counter() - self.t_start
        return self.timings["total"]


def seconds_line(timings: dict[str, float]) -> str:
    """A run's wall time as its summary line says it: "12.30 s", and "(9.80 s of it compiling kernels, first
    run only)" when ``timings`` (run.json's ``timings_s``) has a compile entry."""
    line = f"{timings['total']:.2f} s"
    if timings.get("compile"):
        line += f" ({timings['compile']:.2f} s of it compiling kernels, first run only)"
    return line


def timing_line(timings: dict[str, float], top: int = 6) -> str:
    """Where a run's time went, as its summary says it: the ``top`` longest steps of ``timings`` (run.json's
    ``timings_s``) with their share of the total, longest first: "time: read 12.30 s (45%), verify 5.10 s
    (19%), ... of 27.10 s"."""
    total = timings.get("total") or sum(v for k, v in timings.items() if k != "total")
    parts = sorted(((k, v) for k, v in timings.items() if k != "total" and v >= 0.005), key=lambda kv: -kv[1])
    shown = ", ".join(f"{k} {v:.2f} s" + (f" ({100 * v / total:.0f}%)" if total else "") for k, v in parts[:top])
    rest = sum(v for _, v in parts[top:])
    return f"time: {shown or 'nothing measurable'}" + (f", {len(parts) - top} more {rest:.2f} s" if rest else "") + \
        f" of {total:.2f} s"


# ---------------------------------------------------------------------------------------------- header

def created() -> str:
    """Now, as every file of the tool records it: UTC, ISO 8601, whole seconds."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def versions(*distributions: str, modules: Sequence[str] = ()) -> dict[str, str]:
    """The software a run's numbers came from: Python, numpy, numba and pyarrow, then each of ``distributions``
    that is installed, then every distribution providing one of ``modules`` (import names such as "fasttext",
    provided by e.g. "fasttext-community": found by a scan of the installed distributions, done only then),
    as {name: version}."""
    import importlib.metadata as md

    import numba

    out = {"python": platform.python_version(), "numpy": np.__version__, "numba": numba.__version__,
           "pyarrow": pa.__version__}
    providers = md.packages_distributions() if modules else {}
    wanted = [*distributions, *(d for m in modules for d in sorted(set(providers.get(m, []))))]
    for dist in wanted:
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            continue
    return out


def header(program: str, *, device: str, threads: int, config: Mapping[str, Any], files: Sequence[Any],
           read: Any, counts: Mapping[str, Any], timings: dict[str, float],
           bytes_read: Mapping[str, int] | None = None, packages: Sequence[str] = ()) -> dict[str, Any]:
    """The keys every program's run.json starts with (``HEADER_KEYS``, in that order); the program adds its own
    after them. ``files``: ``io.source_files``'s inputs (their relative paths are listed); ``read``: the
    reader's ``io.ReadReport`` (or its dict); ``bytes_read``: bytes read per pass (default: one pass, the
    reader's text bytes); ``timings``: the run's ``Steps.timings`` (the same dict: later steps appear);
    ``packages``: more distributions to name in ``versions``."""
    rd = read.to_dict() if hasattr(read, "to_dict") else dict(read or {})
    return {"program": program, "gpu_dedup_version": __version__, "created": created(), "device": device,
            "array_backend": array_backend(device), "threads": threads, "versions": versions(*packages),
            "config": dict(config), "inputs": [f.relpath for f in files], "read": rd,
            "bytes_read": dict(bytes_read) if bytes_read is not None else {"text": int(rd.get("bytes_text", 0))},
            "counts": dict(counts), "timings_s": timings}


# ---------------------------------------------------------------------------------------------- table

def check_schema(table: pa.Table, schema: pa.Schema, what: str) -> None:
    """Raise RuntimeError unless ``table`` has exactly ``schema``'s columns, in its order, of its types (a
    table that does not is a bug of the program that built it, never of the input)."""
    got = [(f.name, f.type) for f in table.schema]
    want = [(f.name, f.type) for f in schema]
    if got != want:
        diff = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w), min(len(got), len(want)))
        g = f"{got[diff][0]}: {got[diff][1]}" if diff < len(got) else "nothing"
        w = f"{want[diff][0]}: {want[diff][1]}" if diff < len(want) else "nothing"
        raise RunError(f"{what}: column {diff} is {g}, but its declared schema says {w}")


def write_table(table: pa.Table, schema: pa.Schema, path: str | os.PathLike) -> None:
    """The per-document table to ``path`` (Parquet), atomically (``io.atomic_path``: complete or absent,
    recorded in OUT's manifest), after ``check_schema`` against the program's declared schema: ``write_tables``
    of one part (every program's table in the same row groups)."""
    write_tables([table], schema, path)


# rows per row group of write_tables: what a process streaming a table holds at once (the Ray driver writing a
# one-file table from its tasks' parts: pyarrow's default of 1 Mi rows grew its RSS by ~100-160 MiB from 100 k to
# 1 M documents, docs/scale.md), and small enough for readers to skip what they do not need
ROW_GROUP_ROWS = 1 << 17


def write_tables(tables: Iterable[pa.Table], schema: pa.Schema, path: str | os.PathLike) -> None:
    """The parts of one per-document table, in order, to ``path`` (Parquet, atomically, as ``write_table``),
    in row groups of ROW_GROUP_ROWS rows (``RowGroups``): the file's bytes depend on the rows alone, not on how
    they were split into parts or chunks (the Ray engine's per-file parts give the local engine's file). One
    row group in memory at a time."""
    import pyarrow.parquet as pq

    with io.atomic_path(path) as tmp:
        writer = pq.ParquetWriter(tmp, schema)
        try:
            groups = RowGroups(writer, schema, os.path.basename(os.fspath(path)))
            for t in tables:
                groups.add(t)
            groups.flush()
        finally:
            writer.close()


class RowGroups:
    """The parts of one table pushed, in order, into a ``pyarrow.parquet.ParquetWriter`` in row groups of
    ROW_GROUP_ROWS rows, each written as one contiguous chunk under ``schema`` (checked, ``check_schema``):
    ``add`` each part, ``flush`` once at the end. A streaming writer of two tables at once (paragraph and
    substring dedup's spans and documents) writes the bytes ``write_tables`` writes from the same rows."""

    def __init__(self, writer: Any, schema: pa.Schema, what: str) -> None:
        self.writer, self.schema, self.what = writer, schema, what
        self.buf: list[pa.Table] = []
        self.n = 0

    def add(self, t: pa.Table) -> None:
        check_schema(t, self.schema, self.what)
        self.buf.append(pa.Table.from_arrays(t.columns, schema=self.schema))  # the declared schema's metadata
        self.n += t.num_rows
        while self.n >= ROW_GROUP_ROWS:
            rows = pa.concat_tables(self.buf)
            _row_group(self.writer, rows.slice(0, ROW_GROUP_ROWS))
            self.buf = [rows.slice(ROW_GROUP_ROWS)]
            self.n = self.buf[0].num_rows

    def flush(self) -> None:
        if self.n:
            _row_group(self.writer, pa.concat_tables(self.buf))
        self.buf, self.n = [], 0



@contextlib.contextmanager
def row_group_files(out: str, tables: Sequence[tuple[str, pa.Schema]]) -> Iterator[list[RowGroups]]:
    """OUT/<name> for each (name, schema) of ``tables``, streamed in fixed row groups (``RowGroups``, one per
    table, in order) and atomic: every file appears, flushed, when the block ends without an error; on an error
    (a flush's included) none is left."""
    import pyarrow.parquet as pq

    os.makedirs(out, exist_ok=True)
    with contextlib.ExitStack() as stack:
        groups = []
        for name, schema in tables:
            tmp = stack.enter_context(io.atomic_path(os.path.join(out, name)))
            w = pq.ParquetWriter(tmp, schema)
            stack.callback(w.close)
            groups.append(RowGroups(w, schema, name))
        yield groups
        for g in groups:
            g.flush()

def _row_group(writer, rows: pa.Table) -> None:
    from ..io.arrow import release_pool

    writer.write_table(rows.combine_chunks(), row_group_size=ROW_GROUP_ROWS)
    release_pool()  # the group's freed buffers: mimalloc kept them (a Ray driver's peak grew with the parts)


# ---------------------------------------------------------------------------------------------- finish

def report_safely(out: str, write: Callable[[], Any], what: str = "run") -> float:
    """Run ``write`` (a program's report writer; it may return the page's path, which is logged); a failure is logged as a warning, never raised: the report is
    a convenience, drawn from files that are already complete. Returns the seconds it took."""
    t = time.perf_counter()
    phase(logger, "%s: writing the report in %s", what, out)
    try:
        path = write()
        logger.info("report: %s (%.1f s)", path if isinstance(path, str) else out, time.perf_counter() - t)
    except Exception as exc:  # noqa: BLE001 - never lose a finished run to its report
        logger.warning("%s report not written (%s); the outputs are complete; retry with: gpu-dedup report %s",
                       what, exc, out, exc_info=True)
    return time.perf_counter() - t


def finish(out: str, stats: dict[str, Any], *, name: str = "run.json",
           report: Callable[[], Any] | None = None, what: str = "run") -> None:
    """Write ``stats`` to OUT/``name`` (atomically), then, with ``report``, the report (``report_safely``; it
    reads that file) and the file again with the report's seconds in ``timings_s`` (``report``, and added to
    ``total``: the report is part of the run's wall time). Inside a metered run (``cost.metered``: every owned
    run) ``stats["cost"]`` is its cost so far, then with the report."""
    meter = current()
    path = os.path.join(out, name)
    if meter is not None:
        stats["cost"] = meter.usage(out, stats, exclude=(name,))
    io.write_json_atomic(stats, path)
    if report is None:
        return
    seconds = report_safely(out, report, what)
    timings = stats["timings_s"]
    timings["report"] = seconds
    timings["total"] = timings.get("total", 0.0) + seconds
    if meter is not None:
        stats["cost"] = meter.usage(out, stats, exclude=(name,))
    io.write_json_atomic(stats, path)


# ---------------------------------------------------------------------------------------------- result

class RunResult:
    """The surface every program's result shares. A subclass names its per-document table (``TABLE``: one row
    per input document in input order, with a bool ``keep`` column) and holds ``stats`` (run.json, whose
    ``counts`` has ``input``, ``kept``, ``removed`` and ``by_reason``)."""

    TABLE: ClassVar[str]
    stats: dict[str, Any]

    @property
    def table(self) -> pa.Table:
        """The per-document table (``decisions`` of a dedup run, ``scores`` of a filter run)."""
        return getattr(self, self.TABLE)

    @property
    def kept(self) -> int:
        return int(pc.sum(self.table["keep"]).as_py() or 0)

    @property
    def removed(self) -> int:
        return self.table.num_rows - self.kept

    @property
    def keep_mask(self) -> np.ndarray:
        """bool (n,): True for the kept documents, in input order."""
        return np.asarray(self.table["keep"].to_numpy(zero_copy_only=False), bool)

    def filter(self, data: Any) -> Any:
        """The kept rows of ``data``: a pyarrow Table or a pandas DataFrame holding one row per input document
        in input order (the source of an in-memory run, or any table aligned with it). Returns the same type.

        Raises:
            ValueError: ``data`` has another number of rows than the run decided.
            TypeError: ``data`` is neither a pyarrow Table nor a pandas DataFrame.
        """
        n = len(data)
        rows = self.table.num_rows
        if n != rows:
            raise DataError(f"filter: the data has {n:,} rows but this run decided {rows:,} documents; pass the "
                            "table the run read (one row per document, in input order)")
        mask = self.keep_mask
        if isinstance(data, pa.Table):
            return data.filter(pa.array(mask))
        if hasattr(data, "iloc"):  # pandas
            return data.iloc[np.flatnonzero(mask)]
        raise UsageError(f"filter takes a pyarrow Table or a pandas DataFrame, got {type(data).__name__}")

    def to_pandas(self):
        """The per-document table as a pandas DataFrame."""
        return self.table.to_pandas()

    def summary(self) -> str:
        """One line: documents, kept, removed, and the rows per reason that occur."""
        c = self.stats["counts"]
        line = f"{c['input']:,} documents: {c['kept']:,} kept, {c['removed']:,} removed"
        by = ", ".join(f"{k} {v:,}" for k, v in c["by_reason"].items() if v)
        return line + (f" ({by})" if by else "")
