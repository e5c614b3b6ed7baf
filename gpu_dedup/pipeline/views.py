"""A pipeline's views: what each step reads (the documents the steps before it kept, with the text the span steps
left), written as files when a step needs them.

    View          a step's input: files, or a parent view's rows it kept, not yet written
    view_files    the view of a step's kept records in its directory, named by their input relpaths
    materialize   a view as files (``write_rows``)
    write_rows    a view's rows where a mask is set, written (``io.write_kept``; on Ray one task per file)
    input_paths   the input as a list of paths (an in-memory table written once as Parquet)
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from .. import io
from ..decisions import value_counts

STEPS_DIR = "steps"


@dataclass
class View:
    """What a step reads: ``files`` (paths, in the input's order and layout) holding the input rows ``rows``
    (int64, ascending; None: all of them), their text the input's own unless a span step cut it (``original``).
    A view not yet written is ``parent``'s rows where ``keep`` (``materialize`` writes it when a step needs it)."""

    files: list[str] | None
    rows: np.ndarray | None
    original: bool = True
    parent: "View | None" = None
    keep: np.ndarray | None = None
    names: list[str] | None = None  # the input relpath of each of ``files`` (a step's kept records)
    count: int | None = None  # how many documents ``files`` hold when ``rows`` is not kept (``_uncomposed``)
    counts: dict[str, int] | None = None  # the documents of each input file among them (composed by tasks)


def view_files(directory: str, relpaths: Sequence[str], rows: np.ndarray | None, original: bool) -> View:
    """The view of a step's kept records in ``directory``: its files in the input's order (a file left with no
    record may be absent), each named by its input relpath."""
    found = [(os.path.join(directory, *r.split("/")), r) for r in relpaths]
    there = [(p, r) for p, r in found if os.path.exists(p)]
    return View([p for p, _ in there], rows, original, names=[r for _, r in there])


def materialize(run: Any, view: View, target: str) -> View:
    """``view`` as files: a view not yet written is written (``io.write_kept`` of its parent's kept rows)."""
    if view.files is not None:
        return view
    write_rows(run, view.parent, view.keep, target)
    return dataclasses.replace(view_files(target, run.relpaths, view.rows, view.original), count=view.count,
                               counts=view.counts)


def write_rows(run: Any, view: View, keep: np.ndarray, target: str) -> dict[str, int]:
    """The records of ``view`` (written) where ``keep``, into ``target`` (``io.write_kept``; the input's own files
    with the rows the first step read from each, so that a file that changed since is an error)."""
    r = run.env.reading
    files = io.source_files(view.files)
    rows = run.file_rows if view.rows is None and run.file_rows is not None and len(run.file_rows) == len(files) \
        else None
    if view.counts is not None:  # composed by tasks: each file's documents among the view's
        rows = [int(view.counts.get(name, 0)) for name in view.names or run.relpaths]
    if run.env.engine == "ray":  # one task per file (distributed/views.py), each given its file's rows
        from ..distributed import write_view

        if rows is None:  # each file's rows: the documents of its input file among the view's rows
            src = run.decisions["source"]
            counts = value_counts(src if view.rows is None else src.take(pa.array(view.rows, pa.int64())))
            names = run.relpaths if view.rows is None else view.names or []
            rows = [int(counts.get(name, 0)) for name in names]
        return write_view(files, np.asarray(keep, bool), rows, target, r, workers=run.env.workers,
                          address=run.env.address)
    return io.write_kept(files, np.asarray(keep, bool), target, id_field=r.id_field, text_field=r.text_field,
                         on_error=r.on_error, file_rows=rows)


def input_paths(source: Any, out: str) -> list[str]:
    """The input as a list of paths (an in-memory table written once as Parquet into OUT/steps/input/)."""
    files = io.source_files(source)
    if all(f.fmt != "table" for f in files):
        return [f.path for f in files]
    path = os.path.join(out, STEPS_DIR, "input", "table.parquet")
    if not os.path.exists(path):
        io.write_parquet_atomic(files[0].table, path)
    return [path]
