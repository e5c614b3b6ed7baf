"""OUT's per-document tables of a Ray run (decisions.parquet, scores.parquet, semantic_decisions.parquet; the span
programs' removed_spans / paragraph_docs and substring_spans / substring_docs), from the tasks' per-file parts:

    file      the local engine's layout (on Ray when asked: --table-layout file): one Parquet file the driver streams
              from the parts, one part (and one row group) in memory at a time, in the local engine's row groups:
              the same bytes (``write_decisions``, ``write_scores``); every row passes through the driver's node
    dataset   the Ray engine's default: OUT/<table>/ (decisions/, scores/, semantic_decisions/, the span tables)
              holds one Parquet file per input file, ``part-<k>.parquet`` for the k-th input file (decisions/,
              semantic_decisions/ and the span tables: every file, an empty one too; scores/: the files with
              rows), written by the tasks (``publish``, the filter's write tasks, the span programs' cut tasks:
              ``write_part``);
              ``pyarrow.parquet.read_table(OUT/<table>)`` (``decisions.read_table``) reads them as one table, in
              input order: the local engine's rows, values and schema. No row passes through the driver.

    TABLE_LAYOUTS, layout_of  the layouts, and the one a run writes (its engine's default unless asked)
    part_path, journal        a part's path; the output session told of the parts the tasks will write
    journal_parts, write_part the same for any tables' parts; one part written (the local engine's row groups)
    table_stats               where a program's statistics say its tables are (path, layout, parts)
    publish                   the task: file ``fi``'s decisions part into OUT/decisions/ (its scores and semantic
                              decisions parts too)
    write_decisions, write_scores   the file layout: the driver streams the parts into one file
"""
from __future__ import annotations

import itertools
import os
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ConfigError
from .rows import Job, run_once
from .shuffle import Layout

TABLE_LAYOUTS = ("file", "dataset")


def layout_of(requested: str | None, engine: str) -> str:
    """The layout of a run's per-document table: ``requested``, else the engine's default (a file locally, a
    dataset on Ray).

    Raises:
        ConfigError: an unknown layout, or a dataset asked of the local engine (one process writes one file).
    """
    if requested is not None and requested not in TABLE_LAYOUTS:
        raise ConfigError(f"table layout must be one of {TABLE_LAYOUTS}, got {requested!r} (--table-layout)")
    if requested == "dataset" and engine != "ray":
        raise ConfigError("--table-layout dataset is the Ray engine's (its tasks write the parts): add --engine ray, "
                          "or drop the flag for the local engine's one file")
    return requested or ("dataset" if engine == "ray" else "file")


def part_path(out: str, table: str, k: int) -> str:
    """OUT/<table>/part-<k>.parquet: the part of the k-th input file (k from 0: an --against index not counted)."""
    return os.path.join(out, table, f"part-{k:06d}.parquet")


def cut_reused(output_dir: str, tables: tuple[str, ...]):
    """The ``valid`` check of a span stage's cut task (``tasks.task``): a stored cut result is reused only for
    the same OUT and layout, its cut file in OUT/``output_dir`` (and in the dataset layout its parts of
    ``tables``) still there."""
    def there(job: Any, fi: int, result: dict, out: str, dataset: bool) -> bool:
        from .. import io

        return result.get("out") == out and result.get("dataset", False) == dataset and \
            (not result["written"]["files"] or os.path.exists(io.output_path(os.path.join(out, output_dir),
                                                                              job.files[fi]))) and \
            (not dataset or all(os.path.exists(part_path(out, t, fi)) for t in tables))
    return there


def journal_paths(paths) -> None:
    """Tell the output session (runtime/outputs.py, through io.write.WRITE_HOOKS) of files tasks will write into
    OUT, before they write them: a failed run removes them, as the local engine's own writes."""
    from ..io.write import WRITE_HOOKS

    for path in paths:
        for hook in WRITE_HOOKS:
            hook(path)


def journal(out: str, n: int, scores: bool = False, semantic: bool = False) -> None:
    """``journal_paths`` of the ``n`` parts the tasks will write into OUT/decisions/ (and OUT/scores/ with
    ``scores``, OUT/semantic_decisions/ with ``semantic``)."""
    journal_parts(out, ("decisions",) + (("scores",) if scores else ()) +
                  (("semantic_decisions",) if semantic else ()), n)


def journal_parts(out: str, tables, n: int) -> None:
    """``journal_paths`` of the ``n`` parts (input files 0..n-1) of each of ``tables`` in OUT."""
    journal_paths(part_path(out, table, k) for table in tables for k in range(n))


def write_part(t: pa.Table, schema: pa.Schema, out: str, table: str, k: int) -> None:
    """The k-th input file's rows ``t`` (numbered in the run) as OUT/<table>/part-<k>.parquet, atomically, in the
    local engine's row groups under ``schema`` (no row: a part of none, as decisions/)."""
    from ..runtime.run import write_tables

    write_tables([t], schema, part_path(out, table, k))


def table_stats(tables, dataset: bool, n: int) -> dict[str, dict[str, Any]]:
    """A program's statistics' record of where its ``tables`` are: each one's path in OUT and layout (as run.json's
    ``decisions``): OUT/<table>/ of ``n`` parts, or OUT/<table>.parquet."""
    return {t: {"path": t, "layout": "dataset", "parts": n} if dataset else {"path": f"{t}.parquet", "layout": "file"}
            for t in tables}


def _published(job: Job, fi: int, result: dict, out: str, sem: tuple | None = None) -> bool:
    k = fi - job.first
    return result.get("out") == out and os.path.exists(part_path(out, "decisions", k)) and \
        (sem is None or os.path.exists(part_path(out, "semantic_decisions", k)))


@run_once("publish", valid=_published)
def publish(job: Job, fi: int, out: str, sem: tuple | None = None) -> dict[str, Any]:
    """File ``fi``'s decisions part into OUT/decisions/ (``part_path``), in the local engine's row groups; with a
    prefilter its scores part into OUT/scores/ (its rows numbered in the run; an empty file has none); with
    ``sem`` (``run --semantic``'s stage: its work dir and how many documents it saw) its semantic decisions
    into OUT/semantic_decisions/ (a file whose documents it did not see: an empty part, as decisions/)."""
    from ..decisions import decisions_schema, scores_schema
    from ..runtime.run import write_tables

    lay, k = job.layout, fi - job.first
    t = lay.read_one("decisions", f"f{fi:06d}")
    write_tables([t], decisions_schema(semantic="cosine" in t.column_names), part_path(out, "decisions", k))
    if sem is not None:
        from ..semantic.config import SEMANTIC_SCHEMA

        work, seen = sem
        s = Layout(work).read_one("decisions", f"f{k:06d}") if seen else SEMANTIC_SCHEMA.empty_table()
        write_tables([s], SEMANTIC_SCHEMA, part_path(out, "semantic_decisions", k))
    if job.prefilter is not None and lay.exists("scores", f"f{fi:06d}"):
        s = lay.read_one("scores", f"f{fi:06d}")
        s = s.set_column(s.schema.get_field_index("row"), "row",
                         pc.add(s["row"], pa.scalar(int(job.offsets[fi]), pa.int64())))
        write_tables([s], scores_schema(s.column_names), part_path(out, "scores", k))
    return {"out": out, "rows": t.num_rows}


def write_scores(lay: Layout, file_range, offsets: list[int], path: str) -> None:
    """OUT/scores.parquet from the sign tasks' parts (their rows numbered in their file: the file's offset
    added here), one part in memory at a time; the local engine's rows, columns, schema and row groups."""
    from ..decisions import scores_schema
    from ..runtime.run import write_tables

    def parts():
        for fi in file_range:
            if not lay.exists("scores", f"f{fi:06d}"):
                continue  # an empty file: no scored batch
            t = lay.read_one("scores", f"f{fi:06d}")
            i = t.schema.get_field_index("row")
            yield t.set_column(i, "row", pc.add(t["row"], pa.scalar(int(offsets[fi]), pa.int64())))

    it = parts()
    head = next(it, None)
    schema = scores_schema(head.column_names if head is not None else ["id", "row"])
    write_tables(itertools.chain([head] if head is not None else [], it), schema, path)


def write_decisions(work: str, nfiles: int, path: str, first: int = 0, semantic: bool = False) -> None:
    """OUT/decisions.parquet from the per-file parts (files ``first``.. : not an --against index), one part
    (and one row group) in memory at a time, in the local engine's row groups: the same bytes (``semantic``:
    with the semantic columns)."""
    from ..decisions import decisions_schema
    from ..runtime.run import write_tables

    lay = Layout(work)
    write_tables((lay.read_one("decisions", f"f{fi:06d}") for fi in range(first, nfiles)),
                 decisions_schema(semantic=semantic), path)
