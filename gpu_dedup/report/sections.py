"""The report's sections, one function each: HTML for the page, figures through it."""
from __future__ import annotations

import json
import os
from typing import Any


from ..constants import GIANT_BUCKET
from ..decisions import KEPT_REASONS
from ..lexical import params
from .diff import DIFF_WORDS, diff_words
from .inputs import Scan
from .metrics import JACCARD_BINS, ClusterView
from .page import Page, compact_json, esc, fmt_bytes, html_table, kv_table, pct
from .summary import RunSummary
from .plots import plot_band_load, plot_bucket_sizes, plot_cluster_sizes, plot_counts, plot_s_curve, plot_timings


# -------------------------------------------------------------------------------------------- sections
def run_reasons(summary: RunSummary, stats: dict) -> dict[str, int]:
    """Rows per reason for the report (``reason_counts``: every reason of REASONS, 0 when absent), less the
    semantic reasons of a run that had no semantic stage: no "semantic 0" row after a run without --semantic."""
    by = summary.reasons
    if "semantic" in (stats.get("stages") or {}) or summary.semantic:
        return by
    return {k: v for k, v in by.items() if v or not k.startswith("semantic")}


def _stage_rows(n: int, by: dict[str, int]) -> list[list[Any]]:
    exact = by.get("exact_duplicate", 0) + by.get("short_exact_duplicate", 0)
    near = by.get("near_duplicate", 0)
    semantic = sum(v for k, v in by.items() if k.startswith("semantic"))
    known = set(KEPT_REASONS) | {"exact_duplicate", "short_exact_duplicate", "near_duplicate", "filtered"}
    other = {k: v for k, v in by.items() if k not in known and not k.startswith("semantic")}
    rows: list[list[Any]] = [["input", "", f"{n:,}", ""]]
    left = n
    # a prefiltered run (filters/prefilter.py) filters before it deduplicates
    stages = ([("filtered", by["filtered"])] if "filtered" in by else []) + [("exact", exact),
                                                                             ("near (MinHash/LSH)", near)]
    if semantic or any(k.startswith("semantic") for k in by):
        stages.append(("semantic", semantic))
    stages += [(k, v) for k, v in other.items()]
    for name, removed in stages:
        left -= removed
        rows.append([name, f"{removed:,}", f"{left:,}", pct(removed, n)])
    kept = sum(by.get(k, 0) for k in KEPT_REASONS)
    rows.append(["kept", "", f"{kept:,}", pct(kept, n)])
    return rows


def summary_section(stats: dict, n: int, by: dict[str, int], scan: Scan | None, sizes_note: str | None,
             recorded_sizes: dict | None) -> str:
    kept = sum(by.get(k, 0) for k in KEPT_REASONS)
    t = stats.get("timings_s", {})
    rows = [["documents in", f"{n:,}"], ["kept", f"{kept:,} ({pct(kept, n)})"],
            ["removed", f"{n - kept:,} ({pct(n - kept, n)})"]]
    bin_ = (recorded_sizes or {}).get("text_bytes") or (
        {"input": scan.bytes_input, "kept": scan.bytes_kept} if scan and scan.bytes_input is not None else None)
    win = (recorded_sizes or {}).get("words") or (
        {"input": scan.words_input, "kept": scan.words_kept} if scan and scan.words_input is not None else None)
    read_bytes = stats.get("read", {}).get("bytes_text")
    if bin_:
        rows.append(["text bytes kept", f"{fmt_bytes(bin_['kept'])} of {fmt_bytes(bin_['input'])} "
                     f"({pct(bin_['kept'], bin_['input'])})"])
    elif read_bytes is not None:
        rows.append(["text bytes in", fmt_bytes(read_bytes)])
    if win:
        rows.append(["≈ tokens kept (whitespace words)", f"{win['kept']:,} of {win['input']:,} "
                     f"({pct(win['kept'], win['input'])})"])
    rows.append(["device", f"{stats.get('device', '?')} ({stats.get('threads', '?')} threads)"])
    if "total" in t:
        tp = stats.get("throughput_docs_per_s")
        rows.append(["wall time", f"{t['total']:.2f} s" + (f" ({tp:,.0f} documents/s)" if tp else "")])
    cfg = stats.get("config", {})
    lsh, cl = cfg.get("lsh", {}), cfg.get("cluster", {})
    rows.append(["settings", f"preset {cfg.get('preset_name', '?')}, {cfg.get('shingle', {}).get('kind', '?')} "
                 f"{cfg.get('shingle', {}).get('n', '?')}-grams, {lsh.get('bands', '?')}×{lsh.get('rows', '?')} "
                 f"bands×rows, θ = {cl.get('threshold', '?')}, policy {cl.get('policy', '?')}"
                 f"{'' if cl.get('verify', True) else ' (unverified)'}"])
    rows.append(["created", f"{stats.get('created', '?')} by gpu_dedup {stats.get('gpu_dedup_version', '?')}"])
    out = kv_table(rows)
    notes = ["Tokens are approximated by whitespace-separated words (runs of non-whitespace characters); "
             "a subword tokenizer gives more tokens, so use the figure as a ratio, not a token count."]
    if sizes_note:
        notes.append(f"Retained bytes and tokens are not shown: {sizes_note}")
    return out + "".join(f"<p class=\"note\">{esc(x)}</p>" for x in notes)


def counts_section(page: Page, n: int, by: dict[str, int], summary: RunSummary, stats: dict) -> str:
    rows = _stage_rows(n, by)
    # a run --against an index removes documents in favour of indexed ones: their cluster_id is -1 - position
    n_index = summary.index_removed
    against = ""
    if n_index:
        idx = (stats.get("stages") or {}).get("against_index") or {}
        against = (f"<p class=\"note\">{n_index:,} of the removed documents duplicate a document of the index "
                   f"<code>{esc(idx.get('path', '?'))}</code> (not part of this input); their clusters are not shown "
                   "below.</p>")
    reasons = [[k, f"{v:,}", pct(v, n), "kept" if k in KEPT_REASONS else "removed"] for k, v in by.items()]
    return ("<h3>Per stage</h3>" + html_table(["stage", "removed", "documents left", "% of input"], rows)
            + semantic_long_text(page, stats)
            + "<h3>Per reason</h3>" + html_table(["reason", "documents", "% of input", ""], reasons, left=1)
            + page.figure("counts", lambda: plot_counts(by), "documents per decision reason")
            + "<p class=\"note\">exact = identical normalized text (short_exact_duplicate: documents with fewer "
              "words than the shingle size, which only the exact stage can remove); near = removed for a kept "
              "document at (verified) Jaccard ≥ θ; representative = kept document with duplicates.</p>" + against)


def semantic_long_text(page: Page, stats: dict) -> str:
    """One line on the semantic stage's documents longer than the model's max_seq_length (``long_text`` of
    run.json's semantic stage, else of semantic.json next to the report); empty without such documents."""
    sem = (stats.get("stages") or {}).get("semantic")
    if sem is None:
        return ""
    lt = sem.get("long_text")
    if lt is None:
        try:
            with open(os.path.join(os.path.dirname(page.plot_dir), "semantic.json"), encoding="utf-8") as fh:
                lt = json.load(fh).get("long_text")
        except (OSError, ValueError):
            return ""
    if not lt or not lt.get("over_max_seq_length"):
        return ""
    seq, over = lt.get("max_seq_length"), lt["over_max_seq_length"]
    text = (f"Semantic stage: {over:,} of {lt.get('documents', 0):,} documents "
            f"({pct(over, lt.get('documents', 0))}) are longer than the embedding model's max_seq_length = {seq} "
            f"tokens (longest: {lt.get('max_tokens', 0):,} tokens counted). ")
    if lt.get("policy") == "mean":
        return (f"<p class=\"note\">{esc(text)}They were embedded whole, as the mean of their windows of {seq} "
                f"tokens (long_text = mean).</p>")
    return (f"<p class=\"warn\">{esc(text)}The model embedded only their first {seq} tokens (long_text = truncate): "
            "documents sharing a long beginning look identical to it. <code>--long-text mean</code> embeds whole "
            "texts.</p>")


def clusters_section(page: Page, summary: RunSummary, cluster_cfg: dict | None = None) -> str:
    # the clusters per size (one per cluster: with keep_copies > 1 a cluster has several kept members)
    sizes, counts = summary.cluster_sizes, summary.cluster_counts
    if not counts.sum():
        return "<p>No documents.</p>"
    dup = sizes > 1
    n_dup = int(counts[dup].sum())
    cut = (cluster_cfg or {}).get("remove_clusters_larger_than")
    copies = int((cluster_cfg or {}).get("keep_copies") or 1)
    rows = [["clusters", f"{int(counts.sum()):,}"], ["clusters with duplicates", f"{n_dup:,}"],
            ["largest cluster", f"{int(sizes.max()):,}"],
            ["mean size of clusters with duplicates", f"{(sizes[dup] * counts[dup]).sum() / n_dup:.2f}"
             if n_dup else "–"]]
    if cut is not None:
        small = dup & (sizes <= cut)
        rows.append([f"clusters of ≤ {cut:,} documents (keep every member: remove_clusters_larger_than)",
                     f"{int(counts[small].sum()):,} ({int((sizes[small] * counts[small]).sum()):,} documents)"])
    if copies > 1:
        rows.append(["members kept per cluster (keep_copies)", f"up to {copies}"])
    return (kv_table(rows) + page.figure("cluster_sizes", lambda: plot_cluster_sizes(sizes, counts, cut),
                                 "cluster-size distribution, log-log"))


def scopes_section(stats: dict) -> str:
    """A scoped run's per-scope counts (run.json stages.scope); empty for a global run."""
    sc = (stats.get("stages") or {}).get("scope")
    if not sc:
        return ""
    rows = [[v, f"{c['input']:,}", f"{c['kept']:,}", f"{c['removed']:,}", pct(c["removed"], c["input"])]
            for v, c in sc["scopes"].items()]
    return (f"<p>Deduplicated within each value of <code>{esc(sc['field'])}</code> (scope_field): no document is "
            "removed for a document of another scope.</p>"
            + html_table([sc["field"], "documents", "kept", "removed", "removed %"], rows))


def excerpts_section(summary: RunSummary, views: list[ClusterView], texts: dict[int, str] | None,
                      why_missing: str | None) -> str:
    if not views:
        return "<p>No clusters with duplicates.</p>"
    ids = _Column(summary, "id")
    reason = _Column(summary, "reason")
    jac = _Column(summary, "jaccard")
    if texts is None:
        parts = [f"<p class=\"warn\">Text excerpts are not shown: {esc(why_missing)}.</p>"]
    else:
        parts = ["<p class=\"note\">Each removed member (right) next to the document kept for it (left), first "
                 f"{DIFF_WORDS:,} words compared, whitespace collapsed, unchanged stretches shortened. "
                 "<del>Struck</del> words appear only in the kept document, <mark>highlighted</mark> words only "
                 "in the member. Members shown: the least similar first.</p>"]
    for v in views:
        rid = ids[v.rep].as_py()
        parts.append(f"<h3>Cluster of {v.size:,} documents, kept: <code>{esc(rid)}</code></h3>")
        if texts is None:
            members = ", ".join(f"<code>{esc(ids[m].as_py())}</code> ({esc(reason[m].as_py())}"
                                + (f", J with kept = {jac[m].as_py():.3f}" if jac[m].is_valid else "") + ")"
                                for m in v.members)
            parts.append(f"<p>members: {members}{' …' if v.size - 1 > len(v.members) else ''}</p>")
            continue
        for m in v.members:
            left, right = diff_words(texts[v.rep], texts[m])
            j = jac[m].as_py()
            jtxt = f"J with kept = {j:.3f}" if j is not None else "J not measured"
            parts.append(
                "<div class=\"pair\">"
                f"<div><div class=\"head\">kept <code>{esc(rid)}</code></div><div class=\"doc\">{left}</div></div>"
                f"<div><div class=\"head\">{esc(reason[m].as_py())} <code>{esc(ids[m].as_py())}</code> · {jtxt}</div>"
                f"<div class=\"doc\">{right}</div></div></div>")
        if v.size - 1 > len(v.members):
            parts.append(f"<p class=\"note\">… and {v.size - 1 - len(v.members):,} more removed members.</p>")
    return "".join(parts)


class _Column:
    """A column of the summary's shown rows, read as Arrow's (``col[row].as_py()``, ``.is_valid``)."""

    def __init__(self, summary: RunSummary, name: str):
        self.rows, self.name = summary.rows, name

    def __getitem__(self, row: int) -> "_Value":
        v = self.rows[int(row)][self.name]
        return _Value(float(v) if v is not None and self.name == "jaccard" else v)


class _Value:
    """One shown value with an Arrow scalar's surface (``as_py()``, ``is_valid``): a Python value made a pyarrow
    scalar imports pandas, 0.3 s of a Ray run's report (its driver has no other use for it)."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def as_py(self) -> Any:
        return self.value

    @property
    def is_valid(self) -> bool:
        return self.value is not None


def lsh_section(page: Page, stats: dict) -> str:
    lsh = stats.get("stages", {}).get("lsh")
    if not lsh:
        return "<p>The run recorded no LSH statistics.</p>"
    docs, buckets, entries = lsh.get("documents", 0), lsh.get("buckets", 0), lsh.get("bucket_entries", 0)
    largest = lsh.get("largest_bucket", 0)
    per_band = lsh.get("buckets_per_band") or []
    rows = [["documents hashed into bands (not exact duplicates, not short)", f"{docs:,}"],
            ["candidate documents (in any bucket of ≥ 2)", f"{lsh.get('candidate_documents', 0):,}"],
            ["buckets with ≥ 2 documents", f"{buckets:,}"], ["bucket entries (document × band)", f"{entries:,}"],
            ["mean bucket size", f"{entries / buckets:.2f}" if buckets else "–"],
            ["largest bucket", f"{largest:,}"]]
    pol = stats.get("stages", {}).get("policy", {})
    for key, label in (("verified_pairs", "verified pairs (exact Jaccard computed)"),
                       ("edges", "candidate edges"), ("edges_verified", "edges passing verification"),
                       ("capped_buckets", "buckets capped at max_representatives_per_bucket"),
                       ("largest_candidate_component", "largest candidate component"),
                       ("largest_component", "largest component")):
        if key in pol:
            rows.append([label, f"{pol[key]:,}"])
    out = ""
    if largest >= GIANT_BUCKET:
        out += (f"<p class=\"warn\">Giant bucket: {largest:,} documents share one band key "
                f"({pct(largest, docs)} of the hashed documents). This is usually templated text (boilerplate, "
                "navigation, cookie notices); its documents dominate verification work. Check the Largest clusters "
                "section, and consider removing the template or raising rows per band.</p>")
    out += kv_table(rows)
    if per_band:
        out += page.figure("band_load", lambda: plot_band_load(per_band), "candidate buckets per band")
        out += ("<p class=\"note\">Each band is an independent chance to become candidates; a band with far "
                "more buckets than the others points at a hash or data problem.</p>")
    log2 = lsh.get("bucket_size_log2_counts")
    if log2:
        out += page.figure("bucket_sizes", lambda: plot_bucket_sizes(log2), "bucket-size distribution")
    else:
        out += ("<p class=\"note\">The full bucket-size distribution is not recorded by this run (only the "
                "largest bucket and the mean).</p>")
    return out


def s_curve_section(page: Page, stats: dict, summary: RunSummary) -> str:
    cfg = stats.get("config", {})
    b, r = int(cfg.get("lsh", {}).get("bands", 0)), int(cfg.get("lsh", {}).get("rows", 0))
    theta = float(cfg.get("cluster", {}).get("threshold", 0.8))
    verify = bool(cfg.get("cluster", {}).get("verify", True))
    if b < 1 or r < 1:
        return "<p>The run's config has no LSH bands/rows.</p>"
    theta_plot = min(max(theta, 1e-9), 1 - 1e-9)  # θ = 1 is allowed by the config; the curve math needs < 1
    rows = [["bands × rows", f"{b} × {r} = {b * r} hashes"],
            ["rule-of-thumb threshold (1/b)^(1/r)", f"{params.threshold_approx(b, r):.4f}"],
            ["50% point (1 − 2^(−1/b))^(1/r)", f"{params.p50(b, r):.4f}"],
            ["steepest point s* = ((r − 1)/(b·r − 1))^(1/r), slope there P′(s*)",
             f"{params.steepest_point(b, r):.4f}, {params.sharpness(b, r):.3f}"],
            [f"P(candidate) at θ = {theta:g}", f"{params.candidate_probability(theta, b, r):.4f}"]]
    for s in (theta - 0.1, theta + 0.05):
        if 0.0 < s < 1.0:
            rows.append([f"P(candidate) at J = {s:.2f}", f"{params.candidate_probability(s, b, r):.4f}"])
    hist = None
    note = ""
    if verify:
        hist = summary.near
        note = (f"<p class=\"note\">Bars: the {hist.total:,} removed near-duplicates counted by their exact "
                f"Jaccard with the document kept for them (decisions' <code>jaccard</code>, bins of "
                f"{1 / JACCARD_BINS:g}). This shows where removals happened, not a candidate rate: pairs that LSH "
                "never proposed are missing from it. To measure the candidate rate per Jaccard bin, use labelled "
                "pairs (notebooks/03_choosing_parameters.ipynb, <code>report.candidate_rates</code>).</p>")
        if not hist.total:
            note = "<p class=\"note\">No near-duplicates were removed, so there are no measured Jaccard values.</p>"
    else:
        note = ("<p class=\"note\">Verification was off, so the run measured no exact Jaccard values; only the "
                "theoretical curve is drawn.</p>")
    return (kv_table(rows)
            + page.figure("s_curve", lambda: plot_s_curve(b, r, theta_plot, hist),
                          "S-curve of the chosen bands and rows")
            + note)


def timings_section(page: Page, stats: dict, n: int) -> str:
    t = {k: float(v) for k, v in (stats.get("timings_s") or {}).items() if k != "total" and v is not None}
    total = (stats.get("timings_s") or {}).get("total")
    if not t:
        return "<p>The run recorded no timings.</p>"
    text_bytes = stats.get("read", {}).get("bytes_text") or 0
    rows = []
    for k, v in t.items():
        rows.append([k, f"{v:.3f}", pct(v, total) if total else "–", f"{n / v:,.0f}" if v > 0 else "–",
                     f"{text_bytes / v / 1e6:,.1f}" if v > 0 and text_bytes else "–"])
    if total:
        rows.append(["total", f"{total:.3f}", "100%", f"{n / total:,.0f}" if total > 0 else "–",
                     f"{text_bytes / total / 1e6:,.1f}" if text_bytes and total > 0 else "–"])
    return (html_table(["stage", "seconds", "% of total", "input docs / s", "input text MB / s"], rows)
            + "<p class=\"note\">Throughput columns divide the whole input (documents, text bytes) by each "
              "stage's time, so stages that touch only candidates (shingle_sets, policy) look faster than "
              "their per-document rate. Stages overlap with reading (prefetch), so the stage times need not sum "
              "to the total.</p>"
            + page.figure("timings", lambda: plot_timings(t), "time per stage"))


def environment_section(stats: dict) -> str:
    rows = [["device", stats.get("device", "?")], ["threads", stats.get("threads", "?")],
            ["gpu_dedup", stats.get("gpu_dedup_version", "?")]]
    rows += [[k, v] for k, v in (stats.get("versions") or {}).items()]
    rows.append(["contract fingerprint", stats.get("contract_fingerprint", "?")])
    read = stats.get("read") or {}
    first = stats.get("input_read") or {}  # a span step read the input first: what it skipped (pipeline/engine.py)
    skipped = (read.get("skipped") or []) + (first.get("skipped") or [])
    rrows = [["files", f"{read.get('files', 0):,}"], ["rows", f"{read.get('rows', 0):,}"],
             ["text bytes", fmt_bytes(read.get("bytes_text", 0) or 0)],
             ["skipped records", f"{len(skipped):,}"],
             ["rows with invalid UTF-8 (repaired)",
              f"{(read.get('invalid_utf8_rows') or 0) + (first.get('invalid_utf8_rows') or 0):,}"],
             ["empty files", f"{len(read.get('empty_files') or []) + len(first.get('empty_files') or []):,}"]]
    extra = ""
    if skipped:
        extra = ("<p class=\"note\">First skipped records:</p><pre>"
                 + esc(compact_json(skipped[:5])) + "</pre>")
    inputs = stats.get("inputs") or []
    shown = inputs[:20]
    more = f"\n… ({len(inputs) - 20:,} more)" if len(inputs) > 20 else ""
    inp = "<pre>" + esc("\n".join(shown) + more) + "</pre>"
    return (kv_table(rows) + "<h3>Input</h3>" + kv_table(rrows) + extra + inp
            + "<div class=\"cols\"><div><h3>Config</h3><pre>" + esc(compact_json(stats.get("config", {})))
            + "</pre></div>"
            + "<div><h3>Contract</h3><pre>" + esc(compact_json(stats.get("contract", {}))) + "</pre>"
            + "<p class=\"note\">The contract: what must match for signatures or band keys of two runs to be "
              "comparable.</p></div></div>"
            + "<h3>Stage statistics (run.json)</h3><pre>" + esc(compact_json(stats.get("stages", {}))) + "</pre>")
