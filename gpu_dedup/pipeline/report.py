"""A pipeline run's report.html, drawn from its run.json and decisions.parquet: what each step saw and removed, why
documents went, what each source lost (with the texts of the pairs at the similarity threshold, read from the
inputs), the cost per step, and a link to each step's own report (its outputs are in OUT/steps/NN-name/)."""
from __future__ import annotations

import json
import os

import pyarrow.compute as pc
import pyarrow.parquet as pq

from .. import io
from ..decisions import value_counts
from ..report.page import Page, esc, html_table, kv_table, pct
from ..report.sources import boundary_rows, cost_section, sources_section

REPORTS = ("report.html", "substring_report.html")  # a step's own page, where it writes one


def write_pipeline_report(out: str) -> str:
    """OUT/report.html of the pipeline run in ``out``; returns its path.

    Raises:
        FileNotFoundError: run.json or decisions.parquet is missing (an unfinished run).
    """
    with open(os.path.join(out, "run.json"), encoding="utf-8") as fh:
        stats = json.load(fh)
    d = pq.read_table(os.path.join(out, "decisions.parquet"), columns=["id", "keep", "reason", "step", "source"])
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
    removed = d.filter(pc.invert(d["keep"]))
    by = value_counts(removed["step"]) if removed.num_rows else {}
    reasons = []
    for step in by:
        sub = removed.filter(pc.equal(removed["step"], step))
        for reason, k in value_counts(sub["reason"]).items():
            reasons.append((step, reason, f"{k:,}", pct(k, c["input"])))
    page.add("reasons", "Why documents were removed",
             html_table(("step", "reason", "documents", "of the input"), reasons) if reasons else
             "<p>No document was removed.</p>")
    if sources_section(stats):
        texts, why = _boundary_texts(stats, d)
        page.add("sources", "Sources",
                 sources_section(stats, d["id"].combine_chunks(), texts, why))
    if cost_section(stats):
        page.add("cost", "Cost", cost_section(stats))
    path = os.path.join(out, "report.html")
    with io.atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        fh.write(page.render("gpu_dedup pipeline report", f"<p class=\"note\">{esc(out)}</p>"))
    return path


def _boundary_texts(stats: dict, d) -> tuple[dict[int, str] | None, str | None]:
    """(row -> text of the boundary pairs' documents, None) or (None, why not): read from the run's inputs."""
    from ..report.inputs import Mismatch, locate_inputs, scan_inputs

    want = boundary_rows(stats, d["id"].combine_chunks())
    if want.size == 0:
        return None, None
    files, why = locate_inputs(stats, None)
    if files is None:
        return None, why
    reading = {**((stats.get("config") or {}).get("reading") or {})}
    try:  # the run's reading settings: the same rows and ids
        return scan_inputs(files, {**stats, "config": reading}, d, want, False).texts, None
    except Mismatch as exc:
        return None, f"the inputs found do not match this run's decisions: {exc}"
    except Exception as exc:  # noqa: BLE001 - unreadable inputs must not cost the report
        return None, f"reading the inputs failed: {exc}"
