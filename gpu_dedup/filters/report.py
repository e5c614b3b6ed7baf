"""OUT/report.html of a ``gpu-dedup filter`` run, from its files alone (run.json, scores.parquet or a Ray run's
scores/ parts, read a column's batch at a time: report/streamed.py; audit.parquet): counts by reason, a
histogram of every score with its threshold, retention per threshold, and the audit sample (accepted and rejected
documents with their scores and reason)."""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from .. import io
from ..decisions import read_table, table_path
from ..report.page import Page, esc, html_table, kv_table, pct
from ..report.sources import cost_section, sources_section
from ..report.streamed import (
    BATCH_ROWS,
    ScoreColumn,
    histogram,
    percentiles,
    split_at,
    table_files,
)
from ..report.svg import COLORS, Axis, Figure

logger = logging.getLogger(__name__)
AUDIT_SHOWN = 25          # documents of each side shown on the page (all of them are in audit.parquet)
AUDIT_CHARS = 1500        # characters of each shown document
PERCENTILE_CHARS = 600    # characters of each document shown at a percentile
NOT_SCORES = {"id", "row", "keep", "reason", "lid_label", "script_lang", "domain", "perplexity_bucket",
              "perplexity_lang", "lid_short", "paragraphs", "paragraphs_removed", "words", "perplexity_words",
              "perplexity_short", "perplexity_ranked", "domain_label"}


def _thresholds(stats: dict[str, Any]) -> dict[str, list[tuple[float, str]]]:
    """column -> [(threshold, direction)] of the run's tests that have one (a two-sided rule: both)."""
    out: dict[str, list[tuple[float, str]]] = {}
    cfg = stats.get("config", {})
    models = stats.get("models", {})
    if "lid" in models:
        out["lid_prob"] = [(float(cfg.get("lid_threshold", 0.5)), "min")]
    for c in models.get("classifiers", []):
        if c.get("threshold") is not None:
            out[c["column"]] = [(float(c["threshold"]), c["direction"])]
    if cfg.get("max_perplexity") is not None:
        out["perplexity"] = [(float(cfg["max_perplexity"]), "max")]
    if (stats.get("perplexity_rank") or {}).get("cut") is not None:
        out["perplexity"] = [(float(stats["perplexity_rank"]["cut"]), "max")]
    for column, rule in models.get("rules", {}).items():
        out[column] = [(float(rule[d]), d) for d in ("min", "max") if rule.get(d) is not None]
    return out


HIST_BINS = 50
CLIP_PERCENTILES = (1.0, 99.0)  # a heavy tail beyond these is counted, not drawn


@dataclass
class HistView:
    """What a score's histogram draws (``hist_view``)."""

    counts: np.ndarray  # int64 (HIST_BINS,) of the values shown (empty: no finite value)
    edges: np.ndarray   # float64 (HIST_BINS + 1,)
    shown: int          # values drawn
    below: int          # values below / above the drawn range (a clipped heavy tail)
    above: int
    log: bool           # a logarithmic y axis


def hist_view(values: ScoreColumn | np.ndarray) -> HistView:
    """What a score's histogram draws: the finite values' histogram, clipped to the 1st..99th percentiles when a
    few values stretch the range more than 10-fold beyond them (DSIR weights, word counts; the rest counted in
    the axis label), with a logarithmic y axis when one bin holds more than half of the values (so the other bins
    stay visible). ``values`` a column read in batches (report.streamed: a Ray run's parts are never gathered) or
    an array; each figure equals numpy's over the whole column."""
    col = values if isinstance(values, ScoreColumn) else ScoreColumn.of_array(values)
    n, lo, hi = col.summary()
    below = above = 0
    within = None
    if n > 1:
        p_lo, p_hi = percentiles(col, CLIP_PERCENTILES, n, lo, hi)
        if p_hi > p_lo and (hi - lo) > 10 * (p_hi - p_lo):
            within = (p_lo, p_hi)
            below, above, lo, hi = split_at(col, p_lo, p_hi)
    if n == 0:
        return HistView(np.zeros(0, np.int64), np.array([0.0, 1.0]), 0, 0, 0, False)
    counts, edges, shown = histogram(col, HIST_BINS, lo, hi, within)
    return HistView(counts, edges, shown, below, above, bool(shown and counts.max() > 0.5 * shown))


def _hist(col: ScoreColumn, name: str, thresholds: list[tuple[float, str]]) -> Figure:
    if name == "perplexity":
        n, lo, _ = col.summary()
        if n and lo > 0:
            col = col.mapped(np.log10)
            name = "log10 perplexity"
            thresholds = [(float(np.log10(t)), d) for t, d in thresholds]
    h = hist_view(col)
    counts, edges, below, above, log = h.counts, h.edges, h.below, h.above, h.log
    lo, hi = min([float(edges[0])] + [t for t, _ in thresholds]), max([float(edges[-1])] + [t for t, _ in thresholds])
    pad = 0.05 * (hi - lo) if hi > lo else 0.5
    clipped = f" ({below:,} below, {above:,} above the 1st-99th percentile range, not drawn)" if below or above else ""
    top = float(counts.max()) if len(counts) else 1.0
    y = (Axis(0.5, max(top, 1.0) * 2.0, "log", "documents (log scale)") if log
         else Axis(0.0, max(top, 1.0) * 1.05, label="documents"))
    fig = Figure(700, 280, x=Axis(lo - pad, hi + pad, label=name + clipped), y=y)
    fig.bars(edges[:-1], np.diff(edges), counts, COLORS["steel"])
    for t, d in thresholds:
        fig.vline(t, COLORS["rose"], label=f"keep {'>=' if d == 'min' else '<='} {t:g}")
    fig.legend_loc = "upper right"
    return fig


def write_filter_report(out_dir: str | os.PathLike) -> str:
    """Write OUT/report.html (figures inline as SVG, also as OUT/report/*.svg); returns its path."""
    import json

    out = os.fspath(out_dir)
    with open(os.path.join(out, "run.json"), encoding="utf-8") as fh:
        stats = json.load(fh)
    # one file, or a Ray run's per-file parts: read a column's batch at a time (report.streamed), never whole;
    # every part's footer read first (no column): a damaged part is a DataError naming it, not a missing figure
    read_table(out, "scores", columns=[])
    files = table_files(table_path(out, "scores"))
    names = _columns(files)
    audit_path = os.path.join(out, "audit.parquet")
    audit = pq.read_table(audit_path) if os.path.exists(audit_path) else None
    page = Page(os.path.join(out, "report"))
    c = stats["counts"]
    page.add("counts", "Decisions", kv_table([("documents", f"{c['input']:,}"),
                                          ("kept", f"{c['kept']:,} ({pct(c['kept'], c['input'])})"),
                                          ("removed", f"{c['removed']:,}")])
             + html_table(["reason", "documents", "share"],
                      [(r, f"{k:,}", pct(k, c["input"])) for r, k in
                       sorted(c["by_reason"].items(), key=lambda x: -x[1])])
             + f"<p class=\"note\">Order of the tests (the first failing one is the reason): "
               f"{esc(', '.join(stats.get('order', [])))}.</p>")
    if sources_section(stats):  # a filter's removals carry no similarity: the table only
        page.add("sources", "Sources", sources_section(stats))
    if cost_section(stats):
        page.add("cost", "Cost", cost_section(stats))
    if stats.get("retained_tokens"):
        page.add("tokens", "Retained words per stage, language and domain", _tokens_html(stats))
    thresholds = _thresholds(stats)
    body = []
    for name in names:
        if name in NOT_SCORES or name.startswith("script_") or name.endswith("_draw"):
            continue
        col = ScoreColumn.of_files(files, name)
        # one collapsible block per score (the page was very long): the first one open
        part = page.figure(f"hist_{name}", lambda v=col, n=name: _hist(v, n, thresholds.get(n, [])),
                        f"histogram of {name}")
        ret = stats.get("retention", {}).get(name)
        if ret:
            part += html_table(["threshold", "retention"], [(f"{r['threshold']:.4g}", f"{100 * r['retention']:.1f}%")
                                                        for r in ret])
        sto = stats.get("stochastic_retention", {}).get(name)
        if sto:
            part += (f"<p class=\"note\">Stochastic retention: {esc(sto['formula'])}; implied retention "
                     f"{100 * (sto['expected_retention'] or 0):.1f}%, observed "
                     f"{100 * (sto['observed_retention'] or 0):.1f}% of {sto['scored']:,} scored.</p>"
                     + html_table(["score", "P(keep)"], [(f"{r['score']:.2f}", f"{r['p_keep']:.4f}")
                                                     for r in sto["curve"]]))
        body.append(_details(name, part, open_=not body))
    page.add("scores", "Scores and retention per threshold", "".join(body) or "<p>No score columns.</p>")
    if "lid_label" in names:
        labels, total = _value_counts(files, "lid_label")
        top = sorted(labels.items(), key=lambda kv: (-kv[1], kv[0]))[:20]
        page.add("languages", "Languages", html_table(["language", "documents", "share"],
                                                  [(u or "(none)", f"{k:,}", pct(k, total)) for u, k in top]))
    if "dsir" in stats:
        d, rep = stats["dsir"], stats["dsir"].get("report") or {}
        page.add("dsir", "Importance resampling (DSIR)", kv_table([
            ("target", ", ".join(d.get("target", []))), ("target documents", f"{d.get('target_documents', 0):,}"),
            ("pool (kept by every other test)", f"{d.get('pool', 0):,}"), ("requested", d.get("requested")),
            ("selected", f"{d.get('selected', 0):,}"),
            ("KL(target ‖ raw)", f"{rep.get('kl_target_raw', float('nan')):.4f}"),
            ("KL(target ‖ selected)", f"{rep.get('kl_target_selected', float('nan')):.4f}"),
            ("documents without features (never selected)", rep.get("documents_without_features"))])
            + "<p class=\"note\">KL over the hashed n-gram distributions: selection should lower it.</p>")
    if audit is not None:
        page.add("audit", "Audit sample", _audit_html(audit))
    pct_path = os.path.join(out, "audit_percentiles.parquet")
    if os.path.exists(pct_path):
        rows = pq.read_table(pct_path, columns=["score", "percentile", "value", "id", "reason", "text"]).to_pylist()
        blocks: dict[str, list[str]] = {}
        for r in rows:
            text = r["text"] or ""
            more = f" … ({len(text) - PERCENTILE_CHARS:,} more characters)" if len(text) > PERCENTILE_CHARS else ""
            blocks.setdefault(r["score"], []).append(
                f"<div class=\"head\"><b>{r['percentile']}th percentile</b> · {r['value']:.4g} · "
                f"{esc(r['id'])} · reason <code>{esc(r['reason'])}</code></div>"
                f"<div class=\"doc\">{esc(text[:PERCENTILE_CHARS])}{esc(more)}</div>")
        page.add("percentiles", "Documents at the 33rd / 50th / 67th percentile of every score",
                 "<p class=\"note\">Read them before locking a threshold (audit_percentiles.parquet).</p>"
                 + "".join(_details(k, "".join(v), open_=False) for k, v in blocks.items()))
    html = page.render("gpu-dedup filter report",
                       f"<p class=\"note\">{esc(out)} · {esc(stats.get('created', ''))} · device "
                       f"{esc(stats.get('device', ''))}</p>")
    path = os.path.join(out, "report.html")
    with io.atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(html)
    return path


def _columns(files: list[str]) -> list[str]:
    """The scores table's column names (its first file's: every part has the run's schema)."""
    return pq.read_schema(files[0]).names if files else []


def _value_counts(files: list[str], name: str) -> tuple[dict[str, int], int]:
    """({value: documents} of a string column, its null as "", and the rows), a batch at a time."""
    import pyarrow.compute as pc

    counts: dict[str, int] = {}
    total = 0
    for f in files:
        for b in pq.ParquetFile(f).iter_batches(batch_size=BATCH_ROWS, columns=[name]):
            total += b.num_rows
            for row in pc.value_counts(pc.fill_null(b.column(0), "")).to_pylist():
                counts[row["values"]] = counts.get(row["values"], 0) + row["counts"]
    return counts, total


def _tokens_html(stats: dict[str, Any]) -> str:
    """run.json's ``retained_tokens`` and ``selections``: words and documents still in after each stage (in the
    order the run applied them), then kept per language and per domain."""
    rt = stats["retained_tokens"]
    total = rt["input"]["words"]
    parts = [f"<p class=\"note\">Retained words (002: \"quantify the expected token retention at each stage\"); "
             f"{esc(rt['unit'])}{'; ' + esc(rt['note']) if rt.get('note') else ''}.</p>",
             html_table(["after stage", "documents", "words", "words removed here", "words retained"],
                        [(r["stage"], f"{r['documents']:,}", f"{r['words']:,}", f"{r['words_removed']:,}",
                          pct(r["words"], total)) for r in rt["after_each_stage"]])]
    for sel in ("perplexity", "dsir"):
        x = (stats.get("selections") or {}).get(sel)
        if x:
            parts.append(f"<p class=\"note\">{esc(sel)}: {esc(x['kind'])}, ranked {x['ranked']:,}: "
                         f"{esc(x['ranked_from'])}.</p>")
    for key, title in (("by_language", "language"), ("by_domain", "domain")):
        by = rt.get(key)
        if by:
            rows = sorted(by["values"].items(), key=lambda kv: -kv[1]["words"])
            parts.append(_details(f"Retained words per {title} ({by['column']})", html_table(
                [title, "documents", "kept", "words", "words kept", "words retained"],
                [(v, f"{m['documents']:,}", f"{m['documents_kept']:,}", f"{m['words']:,}", f"{m['words_kept']:,}",
                  pct(m["words_kept"], m["words"])) for v, m in rows]), open_=False))
    return "".join(parts)


def _audit_html(audit) -> str:
    rows = audit.to_pylist()
    parts = [f"<p class=\"note\">audit.parquet holds {len(rows):,} documents drawn uniformly at random from each "
             f"side (seeded); the first {AUDIT_SHOWN} of each are shown. Read the rejections before locking a "
             f"threshold.</p>"]
    for side, title in ((False, "Rejected"), (True, "Accepted")):
        shown = [r for r in rows if bool(r["keep"]) == side][:AUDIT_SHOWN]
        docs = []
        for r in shown:
            scores = ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items()
                               if k not in ("id", "row", "keep", "text", "reason") and v not in (None, ""))
            text = r["text"]
            more = f" … ({len(text) - AUDIT_CHARS:,} more characters)" if len(text) > AUDIT_CHARS else ""
            docs.append(f"<div class=\"head\"><b>{esc(r['id'])}</b> · reason <code>{esc(r['reason'])}</code> · "
                        f"{esc(scores)}</div><div class=\"doc\">{esc(text[:AUDIT_CHARS])}{esc(more)}</div>")
        parts.append(_details(f"{title} ({len(shown)} shown)", "".join(docs), open_=False))
    return "".join(parts)


def _details(title: str, body: str, open_: bool) -> str:
    """A collapsible block (HTML <details>) titled ``title``."""
    return f"<details{' open' if open_ else ''}><summary><b>{esc(title)}</b></summary>{body}</details>"
