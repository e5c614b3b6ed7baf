"""A recipe's composition on the Ray engine (``layout="steps"``, ``engine="ray"``, a removing step in the recipe):
the decisions as one part per input file, each removing step's verdicts folded into them by tasks
(``distributed.compose_step``), so that the driver holds file lists, counts and one keep flag a document (the
rows of the next view), never a decision. The local engine composes the same decisions in one table.

    Parts          the state: the directory of the decisions' parts so far, each input file's keep flags
    fold_step      a removing step's verdicts (its ``VerdictTable``, or its verdicts split per file of its view
                   by the driver, for a step that has no table) folded by tasks
    save, load     a finished step's record for ``resume``: step.json and its parts of the decisions after it
                   (OUT/steps/NN-name/work/composed/), whose keep column gives the flags it gave
    final_counts   the end: every file's counts and sources tally (one task each) and OUT's decisions
                   (``table_layout``: a dataset of the tasks' parts, or one file the driver streams part by part)
"""
from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .. import io
from .._version import __version__
from ..decisions import flags_of, pipeline_schema
from ..errors import RunError
from ..runtime.program import VerdictTable, Verdicts
from .resume import STEP_FILE

logger = logging.getLogger(__name__)

# a removing step's parts of the decisions after it, in its directory: its resume record, beside its program's
# work files (work/), not among its outputs
COMPOSED = "work/composed"


@dataclass
class Parts:
    """The composition's state: whether the decisions carry the semantic columns, ``directory`` (the decisions'
    parts after the last removing step; None before it), ``keep`` (each input file's keep flags so far; None
    before the first removing step) and ``work`` (where the steps' composition tasks exchange files)."""

    semantic: bool
    directory: str | None = None
    keep: list[np.ndarray] | None = None
    work: str = ""


def uses_parts(steps: Sequence[Any], layout: str, engine: str) -> bool:
    """Whether a run composes by tasks: a Ray run of a recipe (the steps layout) with a removing step (a recipe
    of span steps alone composes nothing but their every document kept)."""
    return engine == "ray" and layout == "steps" and any(s.kind != "span" for s in steps)


def _offsets(rows: Sequence[int]) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(np.asarray(rows, np.int64))]).astype(np.int64)


def _files(relpaths: Sequence[str], file_rows: Sequence[int], view_names: Sequence[str] | None,
           step_rows: Sequence[int]) -> list[Any]:
    """The composition's ``FileSpec`` of every input file: its rows' first row, the view file holding its
    documents (``view_names``: each view file's input relpath; None: the input itself) and that file's rows
    in the step's table (``step_rows``, in view file order)."""
    from ..distributed import FileSpec

    names = list(relpaths) if view_names is None else list(view_names)
    if len(step_rows) != len(names):
        raise RunError(f"a step read {len(step_rows)} files of a view of {len(names)}: its rows cannot be placed")
    at = {r: j for j, r in enumerate(names)}
    row0, first = _offsets(file_rows), _offsets(step_rows)
    return [FileSpec(k, r, int(row0[k]), at.get(r, -1), int(first[at[r]]) if r in at else 0,
                     int(step_rows[at[r]]) if r in at else 0) for k, r in enumerate(relpaths)]


def _split(v: Verdicts, step_rows: Sequence[int], directory: str) -> VerdictTable:
    """A step's verdicts (the driver's: a step without a per-document table of them) as one part per view file
    in ``directory``, read by the composition's tasks as a step's own table."""
    n = len(v.ids)
    matched = pa.array(np.maximum(v.matched, 0), pa.int64(), mask=v.matched < 0)
    cols = {"id": v.ids, "keep": pa.array(v.keep), "reason": v.reason.cast(pa.string()),
            "matched_id": v.ids.take(matched) if n else pa.array([], pa.string())}
    if v.representative is not None:
        rep = pa.array(np.maximum(v.representative, 0), pa.int64(), mask=v.representative < 0)
        cols["representative_id"] = v.ids.take(rep) if n else pa.array([], pa.string())
        cols["cluster_id"] = v.values.get("cluster_id", pa.nulls(n, pa.int64()))
    for name, val in v.values.items():
        cols["value:" + name] = val
    t = pa.table(cols)
    off = _offsets(step_rows)
    for j in range(len(step_rows)):
        io.write_parquet_atomic(t.slice(int(off[j]), int(step_rows[j])),
                                os.path.join(directory, "verdicts", f"part-{j:06d}.parquet"))
    core = [c for c in ("id", "keep", "reason", "matched_id", "representative_id") if c in cols]
    return VerdictTable(directory, "verdicts", tuple((c, c) for c in core),
                        tuple((k, "value:" + k) for k in v.values if k not in ("representative_id", "cluster_id")),
                        representative=v.representative is not None)


def fold_step(state: Parts, i: int, step: Any, sr: Any, view_names: Sequence[str] | None, relpaths: Sequence[str],
              file_rows: Sequence[int], d: str, env: Any) -> tuple[int, int, list[np.ndarray]]:
    """Step ``i``'s verdicts folded into the decisions' parts (into ``d``/COMPOSED): (documents it saw,
    removed, its keep flags of each input file's documents it saw). The state moves on to them."""
    from ..distributed import StepSpec, compose_step

    stats = sr.result.stats
    step_rows = list(stats.get("read", {}).get("file_rows") or [])
    if len(step_rows) != len(stats.get("inputs") or []):
        raise RunError(f"step {i + 1} ({step.name}) read {len(step_rows)} of its {len(stats.get('inputs') or [])} "
                       "files: its rows cannot be placed")
    work = os.path.join(state.work, f"{i + 1:02d}-{step.name}")
    table = sr.table if sr.table is not None else _split(sr.verdicts, step_rows, work)
    after = os.path.join(d, COMPOSED)
    spec = StepSpec(state.directory, after, os.path.join(work, "tasks"), step.name, step.kind, table,
                    state.semantic)
    files = _files(relpaths, file_rows, view_names, step_rows)
    seen, removed, saw = compose_step(files, spec, workers=env.workers, address=env.address)
    shutil.rmtree(work, ignore_errors=True)  # the tasks' exchange files, the split verdicts: the parts hold it all
    _advance(state, after, saw)
    return seen, removed, saw


def _advance(state: Parts, directory: str, saw: list[np.ndarray]) -> None:
    """The state after a step: its parts, each file's keep flags with the step's verdicts of the rows it saw."""
    if state.keep is None:
        state.keep = [np.asarray(s, bool).copy() for s in saw]
    else:
        for k, s in enumerate(saw):
            state.keep[k][state.keep[k]] = s
    state.directory = directory


def save(d: str, fingerprint: str, kept: str | None, seen: int, removed: int, file_rows: Sequence[int],
         relpaths: Sequence[str], composed: bool) -> None:
    """A finished step's record (a removing step's parts of the decisions after it are in ``d``/COMPOSED)."""
    io.write_json_atomic({"fingerprint": fingerprint, "kept": kept, "seen": seen, "removed": removed,
                          "composed": COMPOSED if composed else None, "relpaths": list(relpaths),
                          "file_rows": list(file_rows),
                          "gpu_dedup_version": __version__}, os.path.join(d, STEP_FILE))


def load(state: Parts, d: str, fingerprint: str) -> dict[str, Any] | None:
    """The record of a finished step whose fingerprint matches and whose parts are all there (None: none); after
    a removing step's the state moves on to its parts (its keep flags read from their keep column alone)."""
    path = os.path.join(d, STEP_FILE)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as fh:
        rec = json.load(fh)
    if rec.get("fingerprint") != fingerprint or (rec.get("kept") and not os.path.isdir(rec["kept"])) or \
            "seen" not in rec:
        return None
    if not rec.get("composed"):  # a span step: it composed nothing
        return rec
    after = os.path.join(d, rec["composed"])
    n = len(rec.get("relpaths") or [])
    if not all(os.path.isfile(os.path.join(after, f"part-{k:06d}.parquet")) for k in range(n)):
        return None
    keep = [flags_of(pq.read_table(os.path.join(after, f"part-{k:06d}.parquet"), columns=["keep"])["keep"])
            for k in range(n)]
    saw = keep if state.keep is None else [keep[k][state.keep[k]] for k in range(n)]
    _advance(state, after, saw)
    rec["saw"] = saw
    return rec


def final_counts(state: Parts, out: str, relpaths: Sequence[str], files: Sequence[Any], tally: Any, env: Any
            ) -> dict[str, Any]:
    """The end: every file's counts (kept; removed per step, per reason) and the merged sources tally (one task
    per file), and OUT's decisions: OUT/decisions/ (the dataset layout: the tasks' parts) or
    OUT/decisions.parquet (streamed by the driver, a part at a time)."""
    from functools import partial

    from ..distributed import journal_parts, layout_of, totals_all
    from ..runtime.run import write_tables
    from ..runtime.sources import Tally, source_labels

    dataset = layout_of(env.table_layout, "ray") == "dataset"
    n = len(relpaths)
    field_ = env.sources.source_field
    labels = (lambda k: partial(source_labels, [files[k]], field_, env.reading)) if field_ is not None else None
    target = os.path.join(out, "decisions") if dataset else None
    if dataset:
        journal_parts(out, ("decisions",), n)
    res = totals_all(n, state.directory, labels, Tally(tally.thresholds), target, workers=env.workers,
                      address=env.address, names=relpaths)
    if not dataset:
        schema = pipeline_schema(state.semantic)
        write_tables((pq.read_table(os.path.join(state.directory, f"part-{k:06d}.parquet")) for k in range(n)),
                     schema, os.path.join(out, "decisions.parquet"))
    for r in res:
        tally.merge(Tally.from_dict(r["tally"]))
    by_step: dict[str, int] = {}
    by_reason: dict[str, int] = {}
    for r in res:
        for key, total in (("by_step", by_step), ("by_reason", by_reason)):
            for name, c in r[key].items():
                total[name] = total.get(name, 0) + c
    total = sum(r["n"] for r in res)
    kept = sum(r["kept"] for r in res)
    return {"input": total, "kept": kept, "removed": total - kept, "by_step": by_step,
            "by_reason": dict(sorted(by_reason.items())), "layout": "dataset" if dataset else "file"}


def kept_flags(state: Parts) -> np.ndarray:
    """bool (n,): every input document's keep flag so far, in input order."""
    return np.concatenate(state.keep) if state.keep else np.zeros(0, bool)
