"""The report's "Sources" and "Cost" sections, drawn from run.json's aggregates (``sources``: runtime/sources.py;
``cost``: runtime/cost.py) as HTML tables; only the boundary pairs' texts are read from the inputs.

    boundary_names  the ids of every boundary pair the section shows (the removed document and the one it was
                    measured against)
    boundary_rows   their rows in the decisions, for the caller to read their texts (``inputs.scan_inputs``)
    sources_section what each source lost (largest share first, the sources over the limit marked), the similarity
                    of its removals per step (a table of BINS bins), and its pairs at the threshold side by side
    cost_section    CPU- and GPU-seconds, bytes and memory of the run and of each step, and the amount at the price
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .diff import diff_words
from .page import esc, fmt_bytes, html_table, kv_table

SHOWN = 50          # sources listed (largest removal share first); run.json has them all
PAIR_SOURCES = 20   # sources whose boundary pairs are shown
PAIR_WORDS = 400    # words of each document of a boundary pair compared


def boundary_names(stats: Mapping[str, Any]) -> list[str]:
    """The ids of every boundary pair the section shows, each pair's removed and matched document, in order."""
    return [p[k] for _, s in _shown_pairs(stats) for p in s["boundary_pairs"] for k in ("id", "matched_id")]


def boundary_rows(stats: Mapping[str, Any], ids: pa.Array) -> np.ndarray:
    """int64, sorted: the rows of ``ids`` (the decisions' id column) of every boundary pair the section shows."""
    names = boundary_names(stats)
    if not names:
        return np.zeros(0, np.int64)
    pos = pc.index_in(pa.array(names, pa.string()), value_set=ids.cast(pa.string()))
    rows = np.asarray(pos.drop_null().to_numpy(zero_copy_only=False), np.int64)
    return np.unique(rows)


def _order(src: Mapping[str, Any]) -> list[str]:
    return sorted(src, key=lambda k: (-src[k]["removed_share"], k))


def _shown_pairs(stats: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    sec = stats.get("sources") or {}
    src = sec.get("sources") or {}
    return [(k, src[k]) for k in _order(src) if src[k]["boundary_pairs"]][:PAIR_SOURCES]


def sources_section(stats: Mapping[str, Any], ids: pa.Array | Mapping[str, int] | None = None,
                    texts: dict[int, str] | None = None, why: str | None = None) -> str:
    """The "Sources" section (module docstring); "" for a run.json without ``sources``. ``ids``: the decisions'
    id column, or the first row of each of ``boundary_names`` found there (a caller that streams the decisions);
    ``texts``: row -> text (``boundary_rows``' rows), or ``why`` they are not shown."""
    sec = stats.get("sources")
    if not sec or not sec.get("sources"):
        return ""
    src = sec["sources"]
    order = _order(src)
    over = set(sec.get("over_limit") or [])
    limit = sec.get("max_removal")
    parts = []
    if over:
        parts.append(f"<p class=\"warn\">{len(over):,} source(s) lost more than the limit of {limit:.0%} "
                     "(--max-source-removal): the run stopped before writing its kept records. Check their removals "
                     "below.</p>")
    steps = sorted({st for k in order for st in src[k]["by_step"]})
    rows = [(k, f"{src[k]['input']:,}", f"{src[k]['kept']:,}", f"{src[k]['removed']:,}",
             f"{src[k]['removed_share']:.1%}", *(f"{src[k]['by_step'].get(st, 0):,}" for st in steps),
             "over the limit" if k in over else "") for k in order[:SHOWN]]
    what = "limit " + (f"{limit:.0%}" if limit is not None else "none (--max-source-removal)")
    parts.append(f"<p>{len(src):,} source(s), by {esc(sec['by'])}; {what}. Largest removal share first"
                 + (f" (the first {SHOWN}; run.json <code>sources</code> has all)" if len(src) > SHOWN else "")
                 + ".</p>")
    parts.append(html_table(("source", "documents", "kept", "removed", "share removed",
                             *(f"removed by {st}" for st in steps), ""), rows))
    if (sec.get("boundary") or {}).get("thresholds") or any(src[k]["similarity"] for k in order):
        parts.append(_similarity(sec, order[:SHOWN]))  # a filter's removals have no similarity: not shown
        parts.append(_pairs(stats, ids, texts, why))
    return "".join(parts)


def _similarity(sec: Mapping[str, Any], order: list[str]) -> str:
    """The similarity of the removals per source, step and measure: counts per bin of ``bin_width``."""
    src = sec["sources"]
    bins = sec["bins"]
    width = sec["bin_width"]
    body = []
    for k in order:
        s = src[k]
        for st, by in s["similarity"].items():
            for ms, h in by.items():
                body.append((k, st, ms, *(f"{c:,}" if c else "" for c in h)))
        for st, n in s["unmeasured"].items():
            body.append((k, st, "not measured", *([""] * (len(bins) - 1)), f"{n:,} removals"))
    if not body:
        return "<h3>Similarity of the removed documents</h3><p>No removal carries a measured similarity.</p>"
    thr = sec.get("boundary", {}).get("thresholds") or {}
    note = ", ".join(f"{m} θ = {t:g}" for m, t in thr.items())
    head = ("source", "step", "measure", *(f"{b:.2f}" for b in bins))
    return (f"<h3>Similarity of the removed documents</h3><p class=\"note\">Removals per bin of {width:g} of their "
            "measured similarity (exact shingle-set Jaccard with the document kept for them; cosine for a semantic "
            f"duplicate); the column is the bin's lower edge{'; ' + esc(note) if note else ''}. Precision is "
            "weakest at the threshold: the pairs there are shown below.</p>" + html_table(head, body, left=3))


def _pairs(stats: Mapping[str, Any], ids: pa.Array | Mapping[str, int] | None, texts: dict[int, str] | None,
           why: str | None) -> str:
    """Each shown source's sampled pairs at the boundary, side by side (the texts when read)."""
    sec = stats["sources"]
    b = sec.get("boundary") or {}
    shown = _shown_pairs(stats)
    head = (f"<h3>Pairs at the threshold</h3><p class=\"note\">Per source, up to {b.get('pairs', 0)} removals whose "
            f"similarity lies in [θ, θ + {b.get('width', 0):g}) (a sample by a hash of the id: the same whatever the "
            "engine), each next to the document it was measured against"
            + (f"; the first {PAIR_WORDS} words compared, <del>struck</del> words only in that document, "
               "<mark>highlighted</mark> ones only in the removed one" if texts else "") + ".</p>")
    if not shown:
        return head + "<p>No removal lies at the threshold.</p>"
    pos: Mapping[str, int] = {}
    if isinstance(ids, Mapping) and texts:
        pos = ids
    elif ids is not None and texts:
        names = boundary_names(stats)
        found = pc.index_in(pa.array(names, pa.string()), value_set=ids.cast(pa.string())).to_pylist()
        pos = {n: r for n, r in zip(names, found) if r is not None}
    parts = [head]
    if not texts:
        parts.append(f"<p class=\"warn\">Texts are not shown: {esc(why or 'the inputs were not read')}.</p>")
    for k, s in shown:
        pairs = s["boundary_pairs"]
        inner = []
        for p in pairs:
            a, r = pos.get(p["matched_id"]), pos.get(p["id"])
            label = f"{esc(p['step'])}: {esc(p['measure'])} = {p['value']:.3f}"
            if a is None or r is None or a not in texts or r not in texts:
                inner.append(f"<p><code>{esc(p['id'])}</code> removed for <code>{esc(p['matched_id'])}</code> "
                             f"({label})</p>")
                continue
            left, right = diff_words(texts[a], texts[r], max_words=PAIR_WORDS)
            inner.append("<div class=\"pair\">"
                         f"<div><div class=\"head\">kept <code>{esc(p['matched_id'])}</code></div>"
                         f"<div class=\"doc\">{left}</div></div>"
                         f"<div><div class=\"head\">removed <code>{esc(p['id'])}</code> · {label}</div>"
                         f"<div class=\"doc\">{right}</div></div></div>")
        parts.append(f"<details><summary>{esc(k)}: {len(pairs)} pair(s) at the threshold, "
                     f"{s['removed_share']:.1%} of the source removed</summary>{''.join(inner)}</details>")
    total = sum(1 for s in (sec.get("sources") or {}).values() if s["boundary_pairs"])
    if total > len(shown):
        parts.append(f"<p class=\"note\">… and {total - len(shown):,} more sources with pairs at the threshold "
                     "(run.json <code>sources</code>).</p>")
    return "".join(parts)


def cost_section(stats: Mapping[str, Any]) -> str:
    """The "Cost" section: the run's ``cost`` and, for a pipeline, each step's; "" without ``cost``."""
    c = stats.get("cost")
    if not c:
        return ""
    price = c.get("price") or {}
    rows = [("CPU-seconds", f"{c['cpu_s']:,.1f} ({c['cpu_s'] / 3600:.4f} CPU-hours)"
             + (f"; {c['cpu_s_tasks']:,.1f} of them in {c['tasks']:,} Ray tasks" if c.get("tasks") else "")),
            ("GPU-seconds", f"{c['gpu_s']:,.1f} ({c['gpu_s'] / 3600:.4f} GPU-hours)"
             + (f"; tasks busy {c['gpu_busy_s_tasks']:,.1f}" if c.get("gpu_busy_s_tasks") else "")),
            ("wall seconds", f"{c['wall_s']:,.1f}"),
            ("bytes read", fmt_bytes(c["bytes_read"])), ("bytes written", fmt_bytes(c["bytes_written"])),
            ("peak memory (this process)", fmt_bytes(c["peak_rss_bytes"]) if c.get("peak_rss_bytes") else "–")]
    if c.get("peak_rss_bytes_tasks"):
        rows.append(("peak memory (largest Ray task)", fmt_bytes(c["peak_rss_bytes_tasks"])))
    if c.get("device_pool_bytes"):
        rows.append(("GPU memory pool (CuPy, at the end)", fmt_bytes(c["device_pool_bytes"])))
    if c.get("amount") is not None:
        rows.append(("at the given price", f"{c['amount']:.4g} (CPU-hour {price.get('cpu_hour')}, GPU-hour "
                                            f"{price.get('gpu_hour')})"))
    out = kv_table(rows)
    steps = [s for s in stats.get("steps") or [] if isinstance(s, dict) and s.get("cost")]
    if steps:
        body = [(f"{s['index']}. {s['name']}" + ("" if s.get("phase", "main") == "main" else f" ({s['phase']})"),
                 f"{s['cost']['cpu_s']:,.1f}", f"{s['cost']['gpu_s']:,.1f}", f"{s['cost']['wall_s']:,.1f}",
                 fmt_bytes(s["cost"]["bytes_read"]), fmt_bytes(s["cost"]["bytes_written"]),
                 "" if s["cost"].get("amount") is None else f"{s['cost']['amount']:.4g}") for s in steps]
        out += html_table(("step", "CPU-s", "GPU-s", "wall s", "read", "written", "amount"), body)
    return out + ("<p class=\"note\">CPU-seconds: user + system time of this process (every thread) and of its Ray "
                  "tasks, each measured by the task itself; GPU-seconds: the seconds a GPU was held (a local run on "
                  "cuda: its wall time; Ray: its GPU actors' lifetime); bytes written: the files written into the "
                  "output directory; peak memory: the process's peak so far.</p>")
