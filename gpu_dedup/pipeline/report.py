"""A pipeline run's report.html, drawn from its run.json and decisions (OUT/decisions.parquet, or a Ray run's
OUT/decisions/ parts: the same page): what each step saw and removed, why documents went, what each source lost
(with the texts of the pairs at the similarity threshold, read from the inputs), the cost per step, and a link to
each step's own report (its outputs are in OUT/steps/NN-name/).

The decisions are read a batch at a time (``_read_decisions``: the removals per step and reason, the rows of the
boundary pairs and each input file's rows), never whole, so the memory of the process writing the report (a Ray
run's driver) does not grow with the corpus; the boundary pairs' ids are read again, forward, only where their
texts are read from the inputs (``report.inputs.StreamedRows``), whose row groups are read in batches too. A batch
holds about ``streamed.BATCH_BYTES`` of its row group, read a page at a time, and Arrow's pool gives back what it
freed after each batch; no array is built from Python values, nor a column converted by ``to_numpy`` (pyarrow
imports pandas for either: 33 MiB). Peak RSS of the report of a Ray run in a fresh process (pyarrow's mimalloc):
113.5 MiB at 100 k documents, 115.5 at 1 M (206.1 and 259-264 before); in the run's driver, the report adds
0-6 MiB at 100 k and 4-14 at 1 M to the RSS it found (49 and 131 before).
"""
from __future__ import annotations

import json
import os
from typing import Any
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import io
from ..decisions import codes_of, flags_of, table_path
from ..report.inputs import FileRows
from ..report.page import Page, esc, html_table, kv_table, pct
from ..report.sources import boundary_names, cost_section, sources_section
from ..report.streamed import strings, table_batches

REPORTS = ("report.html", "substring_report.html")  # a step's own page, where it writes one


def write_pipeline_report(out: str, source: Any = None, read_inputs: bool = True) -> str:
    """OUT/report.html of the pipeline run in ``out``; returns its path. ``source``: the run's inputs, when they
    are not where run.json says; ``read_inputs`` False: the boundary pairs without their texts.

    Raises:
        FileNotFoundError: run.json or the decisions are missing (an unfinished run).
    """
    with open(os.path.join(out, "run.json"), encoding="utf-8") as fh:
        stats = json.load(fh)
    path = table_path(out, "decisions")  # one file, or a Ray run's per-file parts
    d = _read_decisions(path, boundary_names(stats) if sources_section(stats) else [])
    c = stats["counts"]
    page = Page(os.path.join(out, "report"), plots=False)
    page.add("overview", "Overview", kv_table([
        ("documents", f"{c['input']:,}"), ("kept", f"{c['kept']:,} ({pct(c['kept'], c['input'])})"),
        ("removed", f"{c['removed']:,} ({pct(c['removed'], c['input'])})"), ("device", stats["device"]),
        ("wall time", f"{stats['timings_s'].get('total', 0.0):.2f} s"), ("gpu_dedup", stats["gpu_dedup_version"])]))
    rows = []
    for s in stats["steps"]:
        own = next((r for r in REPORTS if os.path.exists(os.path.join(out, s["dir"], r))), None)
        rows.append((f"{s['index']}. {s['name']}" + ("" if s["phase"] == "main" else f" ({s['phase']})"), s["kind"],
                     f"{s['documents']:,}", f"{s['removed']:,}", f"{s['seconds']:.2f}",
                     "reused" if s["reused"] else "", f"{s['dir']}/" + (own or "")))
    page.add("steps", "Steps", html_table(("step", "kind", "documents seen", "removed", "seconds", "", "outputs"),
                                          rows) + "<p class=\"note\">Each step saw the documents the steps before it "
             "kept (span steps: with the text the earlier span steps left). A span step marked <i>view</i> cut the "
             "text a later step compared; marked <i>final</i>, it ran over the documents kept at the end, so every "
             "cut keeps a copy in a kept document.</p>")
    reasons = [(step, reason, f"{k:,}", pct(k, c["input"])) for step, by in d.removed.items()
               for reason, k in by.items()]
    page.add("reasons", "Why documents were removed",
             html_table(("step", "reason", "documents", "of the input"), reasons) if reasons else
             "<p>No document was removed.</p>")
    if sources_section(stats):
        texts, why = _boundary_texts(stats, path, d, source) if read_inputs else (None, None)
        page.add("sources", "Sources", sources_section(stats, d.rows, texts, why))
    if cost_section(stats):
        page.add("cost", "Cost", cost_section(stats))
    path = os.path.join(out, "report.html")
    with io.atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        fh.write(page.render("gpu_dedup pipeline report", f"<p class=\"note\">{esc(out)}</p>"))
    return path


@dataclass
class _Decisions:
    """What the report needs of the decisions, counted a batch at a time."""
    # step -> reason -> rows removed, each in order of first appearance among the removed rows (the order of
    # ``decisions.value_counts`` over the whole table, by step and then within each step)
    removed: dict[str, dict[str, int]] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)  # boundary pair id -> its first row
    files: FileRows = field(default_factory=FileRows)   # each input file's rows (counted with boundary pairs only)


def _read_decisions(path: str, names: list[str]) -> _Decisions:
    """The removals per step and reason of the table at ``path`` and, for the boundary pair ids ``names``, their
    rows and each input file's rows: one pass, one batch of its columns held at a time."""
    d = _Decisions()
    want = strings(list(dict.fromkeys(names)))
    for row, b in table_batches(path, ["keep", "reason", "step"] + (["id", "source"] if names else []),
                                dictionary=["reason", "step", "source"]):
        keep = b.column("keep")  # a null keep: not removed (as pc.filter drops it); no fill_null, whose scalar
        gone = pc.and_kleene(pc.invert(keep), pc.is_valid(keep))  # ... imports pandas (``strings``)
        if pc.any(gone).as_py():
            _count(d.removed, pc.filter(b.column("step"), gone), pc.filter(b.column("reason"), gone))
        if names:
            d.files.add(b.column("source"))
            at = pc.index_in(b.column("id").cast(pa.string()), value_set=want)
            for i in np.flatnonzero(flags_of(pc.is_valid(at))).tolist():
                d.rows.setdefault(want[at[i].as_py()].as_py(), row + i)
    return d


def _codes(values: pa.Array) -> tuple[list, np.ndarray]:
    """(names, int64 codes into them) of a string or dictionary column; a null is the last name, None."""
    enc = values if pa.types.is_dictionary(values.type) else pc.dictionary_encode(values)
    names = enc.dictionary.to_pylist() + [None]
    return names, codes_of(enc.indices, len(names) - 1)


def _count(removed: dict[str, dict[str, int]], step: pa.Array, reason: pa.Array) -> None:
    """Add one batch's removed rows to ``removed``, by (step, reason) in order of first appearance: a step's first
    pair is its first row, so the steps and each step's reasons come in the order the whole column gives."""
    steps, s = _codes(step)
    reasons, r = _codes(reason)
    pair, first, n = np.unique(s * len(reasons) + r, return_index=True, return_counts=True)
    for j in np.argsort(first, kind="stable").tolist():
        st, why = steps[int(pair[j]) // len(reasons)], reasons[int(pair[j]) % len(reasons)]
        if st is None:  # a removal without a step: counted by no step (a filter on step == null matches nothing)
            continue
        by = removed.setdefault(st, {})
        by[why] = by.get(why, 0) + int(n[j])


def _boundary_texts(stats: dict, path: str, d: _Decisions, source: Any = None
                    ) -> tuple[dict[int, str] | None, str | None]:
    """(row -> text of the boundary pairs' documents, None) or (None, why not): read from the run's inputs."""
    from ..report.inputs import Mismatch, StreamedRows, locate_inputs, scan_inputs

    want = np.unique(np.fromiter(d.rows.values(), np.int64, len(d.rows)))
    if want.size == 0:
        return None, None
    files, why = locate_inputs(stats, source)
    if files is None:
        return None, why
    reading = {**((stats.get("config") or {}).get("reading") or {})}
    try:  # the run's reading settings: the same rows and ids
        rows = StreamedRows(path, d.files, {r: name for name, r in d.rows.items()})
        return scan_inputs(files, {**stats, "config": reading}, rows, want, False).texts, None
    except Mismatch as exc:
        return None, f"the inputs found do not match this run's decisions: {exc}"
    except Exception as exc:  # noqa: BLE001 - unreadable inputs must not cost the report
        return None, f"reading the inputs failed: {exc}"
