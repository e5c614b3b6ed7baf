"""The one program shape: what every program (dedup, filter, paragraph, substring, semantic, screen) is to the engine
that runs and composes it (gpu_dedup/pipeline/), and what it gives back.

    Step       the protocol every program's step implements: ``name``, ``kind``, ``outputs``, ``config`` and
               ``run(view, out, env) -> StepRun``; a frozen dataclass holding the program's config
    Env        what the engine hands every step: device, threads, progress bars, how the input is read
               (``Reading``: the same for every step of a run, so rows and ids agree), overwrite
    Outputs    a program's declared outputs: its statistics file (written last: a directory without it holds an
               unfinished step), its per-document table and schema, the directory of its kept records
    Verdicts   a step's decisions over its own input, in the terms the engine composes (``decisions.fold_removals``)
    StepRun    what ``run`` returns: the program's own result (a ``run.RunResult``) and its ``Verdicts``

Kinds (how a step's verdicts compose):
    select  removes documents by a test (a filter's rules and models, a contamination screen): no representative
    dedup   removes documents for a kept representative (exact + MinHash, SemDeDup)
    span    cuts spans out of documents and removes none (paragraph dedup, exact-substring dedup)

A step reads its ``view``: the documents the earlier steps kept, with the text the span steps left, as files in the
input's format and layout (or the input itself for the first step). Its ``kept`` output is the next step's view.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Literal, Protocol

import numpy as np
import pyarrow as pa

from ..config import InputConfig, check_literal
from ..errors import ConfigError, RunError
from .cost import Price
from .sources import SourceGuard

Kind = Literal["select", "dedup", "span"]
KINDS: tuple[str, ...] = ("select", "dedup", "span")


@dataclass(frozen=True)
class Reading(InputConfig):
    """How every step of a run reads its view (``InputConfig``'s fields: id and text fields, batch size, bad
    records). One setting for the whole run: a later step's rows are the earlier step's kept rows, in order."""

    def apply(self, cfg: Any) -> Any:
        """``cfg`` (an ``InputConfig`` subclass) reading this way; any other config unchanged."""
        if not isinstance(cfg, InputConfig):
            return cfg
        return dataclasses.replace(cfg, **{f.name: getattr(self, f.name) for f in dataclasses.fields(InputConfig)})

    @classmethod
    def of(cls, cfg: InputConfig) -> "Reading":
        """The reading settings of ``cfg``."""
        return cls(**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(InputConfig)})


def check_ray_args(engine: str, **given: Any) -> None:
    """Ray's arguments (``workers``, ``address``, ``partitions``) only with engine='ray', and ``workers`` a whole
    number >= 1: one check for every entry point (the refusal names the ones given, with their values; on the
    command line ``cli.flags`` writes it ``--workers 2 needs --engine 'ray'``).

    Raises:
        ConfigError: naming the values.
    """
    check_workers(given.get("workers"))
    named = [f"{k}={v!r}" for k, v in given.items() if v is not None]
    if engine != "ray" and named:
        raise ConfigError(f"{', '.join(named)} need{'s' if len(named) == 1 else ''} engine='ray': add it, or leave "
                          f"{'it' if len(named) == 1 else 'them'} out")


def check_workers(workers: Any) -> None:
    """``workers`` None or a whole number >= 1 (the CLI's type says the same): Ray would take 0 for every CPU.

    Raises:
        ConfigError: naming the value.
    """
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ConfigError(f"workers={workers!r} is no number of Ray worker processes: pass a whole number >= 1, or "
                          f"leave it out to use every CPU")


@dataclass(frozen=True)
class Env:
    """What the engine hands every step: ``device`` ("auto" | "cpu" | "cuda", never a silent fallback),
    ``threads`` (None: numba's default), ``progress`` (bars on stderr), ``reading``, ``overwrite`` (replace an
    earlier run's outputs in the step's directory), ``engine`` / ``workers`` / ``address`` (where a step that
    runs on Ray runs: ``engine="ray"``), ``work_dir`` (a step's intermediate files, e.g. dedup's pass-1 pieces)
    and ``resume`` (reuse them), ``write_kept`` (False: a step writes no kept records of its own; the engine
    writes the final ones), ``sources`` (``sources.SourceGuard``: what names each document's source, and the
    largest share of a source's documents the run may remove), ``price`` (``cost.Price``: run.json's ``cost``
    at the user's price; None: seconds and bytes only), ``table_layout`` (a step's per-document table: "file",
    one Parquet file; "dataset", a directory of per-input-file parts the Ray engine's tasks write; None: the
    engine's default, a file locally, a dataset on Ray)."""

    device: str = "cpu"
    threads: int | None = None
    progress: bool = False
    reading: Reading = field(default_factory=Reading)
    overwrite: bool = True
    engine: Literal["local", "ray"] = "local"
    workers: int | None = None
    address: str | None = None
    work_dir: str | None = None
    resume: bool = False
    write_kept: bool = True
    sources: SourceGuard = field(default_factory=SourceGuard)
    price: Price | None = None
    table_layout: Literal["file", "dataset"] | None = None

    def __post_init__(self) -> None:
        check_literal("Env.device", self.device, Literal["auto", "cpu", "cuda"])
        check_literal("Env.engine", self.engine, Literal["local", "ray"])
        check_ray_args(self.engine, workers=self.workers, address=self.address)
        if self.table_layout is not None:
            check_literal("Env.table_layout", self.table_layout, Literal["file", "dataset"])
        if not isinstance(self.sources, SourceGuard):
            raise ConfigError(f"Env.sources must be a SourceGuard, got {self.sources!r}")
        if self.price is not None and not isinstance(self.price, Price):
            raise ConfigError(f"Env.price must be a Price or None, got {self.price!r}")


@dataclass(frozen=True)
class Outputs:
    """A program's declared outputs, relative to its directory: ``stats`` (its statistics file, written last),
    ``table`` (its per-document table file, or None), ``kept`` (the directory of its kept records in the input's
    format: the next step's view; None when the engine writes it), ``files`` (everything else it may write)."""

    stats: str
    table: str | None = None
    kept: str | None = None
    files: tuple[str, ...] = ()

    def all(self) -> tuple[str, ...]:
        """Every declared file and directory (directories end in "/")."""
        return tuple(x for x in (self.stats, self.table, self.kept and self.kept + "/") if x) + self.files


@dataclass
class Verdicts:
    """A step's decisions over the ``m`` documents of its view, in view order.

    ids: string (m,), the view's ids; sources: string (m,), the file each came from. keep: bool (m,). reason:
    string (m,), why a document was removed (ignored where kept). matched: int64 (m,), the view position of the
    document a removal matched (-1: none). representative: int64 (m,) or None, the view position of a removal's
    kept representative (kind "dedup"; None: the end of its chain of matches). values: more columns for the
    removed rows (e.g. ``jaccard``, ``cosine``), one value per view row."""

    ids: pa.Array
    sources: pa.Array
    keep: np.ndarray
    reason: pa.Array
    matched: np.ndarray
    representative: np.ndarray | None = None
    values: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        m = len(self.ids)
        sizes = {"sources": len(self.sources), "keep": len(self.keep), "reason": len(self.reason),
                 "matched": len(self.matched)}
        if self.representative is not None:
            sizes["representative"] = len(self.representative)
        bad = {k: v for k, v in sizes.items() if v != m}
        if bad:
            raise RunError(f"a step's verdicts must hold one value per document ({m}); got {bad}")

    @classmethod
    def all_kept(cls, ids: pa.Array, sources: pa.Array) -> "Verdicts":
        """The verdicts of a step that removes nothing (a span step)."""
        m = len(ids)
        return cls(ids, sources, np.ones(m, bool), pa.array(["unique"] * m, pa.string()), np.full(m, -1, np.int64))


@dataclass(frozen=True)
class VerdictTable:
    """Where a step's verdicts are, file by file of its view (what the Ray engine's composition tasks read, the
    driver holding none): its per-document table ``table`` in ``out`` (``decisions.table_path``: a dataset of
    one part per view file, or one file), ``columns`` mapping the verdict columns (id, keep, reason, and where
    the table has them matched_id, representative_id) and ``values`` (decisions column -> the table's column:
    more columns for the removed rows) to the table's. ``representative``: the table names each removal's
    kept representative (kind "dedup"); then its ``cluster_id`` is that of a representative outside the run
    (an --against index's document). Picklable: a task reads its own file's part (``read``)."""

    out: str
    table: str
    columns: tuple[tuple[str, str], ...]
    values: tuple[tuple[str, str], ...] = ()
    representative: bool = False

    def read(self, j: int, first: int, count: int) -> pa.Table:
        """The verdicts of view file ``j`` (rows ``first`` .. ``first + count - 1`` of a one-file table):
        id, keep, reason (strings), matched_id, representative_id (strings, null: none), then "v:<name>" for
        each of ``values`` (and "v:cluster_id" with ``representative``)."""
        import os

        import pyarrow.parquet as pq

        from ..decisions import table_path

        path = table_path(self.out, self.table)
        names = dict(self.columns)
        want = list(dict.fromkeys(list(names.values()) + [c for _, c in self.values] +
                                  (["cluster_id"] if self.representative else [])))
        if os.path.isdir(path):
            one = os.path.join(path, f"part-{j:06d}.parquet")
            if not os.path.exists(one) and count == 0:  # a file without a document may have no part (scores/)
                some = sorted(n for n in os.listdir(path) if n.endswith(".parquet"))
                t = pq.read_schema(os.path.join(path, some[0])).empty_table().select(want)
            else:
                t = pq.read_table(one, columns=want)
        else:
            f = pq.ParquetFile(path)
            starts = np.concatenate([[0], np.cumsum([f.metadata.row_group(g).num_rows
                                                     for g in range(f.num_row_groups)])])
            groups = [g for g in range(f.num_row_groups) if starts[g] < first + count and starts[g + 1] > first]
            t = f.read_row_groups(groups, columns=want) if groups else f.schema_arrow.empty_table().select(want)
            t = t.slice(first - int(starts[groups[0]]) if groups else 0, count)
        if t.num_rows != count:
            raise RunError(f"{path}: {t.num_rows} rows for view file {j}, which held {count}: the step's table "
                           "and its view disagree")
        m = t.num_rows
        cols = {"id": t[names["id"]], "keep": t[names["keep"]], "reason": t[names["reason"]].cast(pa.string())}
        for name in ("matched_id", "representative_id"):
            cols[name] = t[names[name]].cast(pa.string()) if name in names else pa.nulls(m, pa.string())
        for name, col in self.values:
            cols["v:" + name] = t[col]
        if self.representative:
            cols["v:cluster_id"] = t["cluster_id"]
        return pa.table(cols)


class StepRun:
    """What a step's ``run`` returns: ``result`` (the program's own result, a ``run.RunResult`` with its
    statistics), ``verdicts`` (over its view; or a function making them, called the first time they are asked
    for: a run that composes nothing, one command's one step, never builds them), ``kept`` (the directory of
    its kept records, None when it wrote none: the engine writes them from the view), ``counts`` ((documents
    seen, removed), or None: the engine counts the verdicts) and ``table`` (where its verdicts are, per file:
    the Ray engine's composition reads them there; None: from ``verdicts``)."""

    def __init__(self, result: Any, verdicts: "Verdicts | Callable[[], Verdicts]", kept: str | None = None,
                 counts: tuple[int, int] | None = None, table: VerdictTable | None = None):
        self.result, self._verdicts, self.kept, self.counts, self.table = result, verdicts, kept, counts, table

    @property
    def verdicts(self) -> Verdicts:
        if not isinstance(self._verdicts, Verdicts):
            self._verdicts = self._verdicts()
        return self._verdicts


class Step(Protocol):
    """A program as one step of a pipeline (module docstring)."""

    name: ClassVar[str]
    kind: ClassVar[Kind]
    outputs: ClassVar[Outputs]
    config: Any

    def run(self, view: Any, out: str, env: Env) -> StepRun:
        """Run the program over ``view`` (paths of files, in the input's format) into the directory ``out``."""
        ...


def file_sources(stats: dict[str, Any]) -> pa.Array:
    """The input file of each document a program read (its statistics' ``inputs`` and ``read.file_rows``)."""
    rows = stats["read"].get("file_rows") or []
    inputs = stats["inputs"]
    if len(rows) != len(inputs):
        raise RunError(f"a step read {len(rows)} of its {len(inputs)} input files: its rows cannot be placed")
    return pa.array(inputs, pa.string()).take(pa.array(np.repeat(np.arange(len(inputs)), rows), pa.int64()))


def span_verdicts(out: str, table: str, stats: dict[str, Any]) -> Verdicts:
    """The verdicts of a span step (every document kept): the ids of its per-document table ``table`` in ``out``
    (``decisions.read_table``: OUT/<table>.parquet, or a Ray run's dataset OUT/<table>/ of per-file parts), the
    file each came from (its statistics: ``file_sources``). Built only when the engine composes."""
    from ..decisions import read_table

    ids = read_table(out, table, ["id"])["id"].combine_chunks()
    return Verdicts.all_kept(ids, file_sources(stats))


def check_config(step: Any, cls: type) -> None:
    """Refuse a step whose ``config`` is not its program's config dataclass (``cls``).

    Raises:
        ConfigError: naming the step, the class it takes and what it got.
    """
    if not isinstance(step.config, cls):
        raise ConfigError(f"{type(step).__name__} takes a {cls.__name__}, got {type(step.config).__name__}")
