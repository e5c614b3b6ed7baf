"""write_report: read a run, build the report page section by section, write it and its figures."""
from __future__ import annotations

import logging
import os
from typing import Any, Mapping

import numpy as np
import pyarrow as pa

from ..errors import ConfigError
from .inputs import Mismatch, Scan, load_run, locate_inputs, scan_inputs
from .metrics import largest_clusters
from .page import Page, esc
from .sources import boundary_rows, cost_section, sources_section
from .sections import (
    clusters_section,
    counts_section,
    environment_section,
    excerpts_section,
    lsh_section,
    run_reasons,
    s_curve_section,
    scopes_section,
    summary_section,
    timings_section,
)

logger = logging.getLogger(__package__)

REPORT_FILE = "report.html"
PLOTS_DIR = "report"
PLOT_NAMES = ("counts", "cluster_sizes", "band_load", "bucket_sizes", "s_curve", "timings")
PLOT_SUFFIXES = (".svg", ".png")  # .png: an earlier version's figures, removed when a report is rewritten


MAX_CLUSTERS = 10  # the largest clusters shown with excerpts by default


def shown_rows(decisions: pa.Table, stats: dict, max_clusters: int = MAX_CLUSTERS) -> np.ndarray:
    """The decisions rows whose texts the report shows. A run passes their texts to ``write_report`` when it met
    them anyway (writing deduplicated/).

    Args:
        decisions: the run's decisions table.
        stats: the run's run.json (its ``sources`` name the boundary pairs shown).
        max_clusters: the largest clusters shown (``write_report``'s).

    Returns:
        int64, sorted: the rows of those clusters' kept documents and of the members shown, and of the boundary
        pairs of the Sources section.
    """
    return _shown(largest_clusters(decisions, max_clusters), stats, decisions)


def _shown(views, stats: dict, decisions: pa.Table) -> np.ndarray:
    clusters = np.array([r for v in views for r in (v.rep, *v.members)], np.int64)
    return np.unique(np.concatenate([clusters, boundary_rows(stats, decisions["id"].combine_chunks())]))


def write_report(out_dir: str | os.PathLike, *, max_clusters: int = MAX_CLUSTERS, source: Any = None,
                 read_inputs: bool = True, texts: Mapping[int, str] | None = None) -> str:
    """Write ``out_dir/report.html`` (self-contained: its figures inline as SVG) and ``out_dir/report/*.svg``.

    Args:
        out_dir: the output directory of a finished run (decisions.parquet and run.json).
        max_clusters: how many of the largest clusters to show with text excerpts (0: none).
        source: the run's inputs (paths/globs, a pyarrow Table / pandas DataFrame, or the run's InputFile list)
            when run.json's paths do not lead to them.
        read_inputs: False skips reading the inputs (no excerpts, no retained bytes/tokens unless the run
            recorded them): use it for very large runs.
        texts: row -> text of rows the caller has read already (a run's writer picks up ``shown_rows`` while it
            copies the kept records); when it holds every row shown and the run recorded the retained sizes, the
            inputs are not read again.

    Returns:
        The path of report.html.

    Raises:
        ConfigError: ``max_clusters`` < 0.
        MissingFileError: ``out_dir`` holds no finished run.
        DataError: its decisions are not this tool's, or disagree with run.json.
    """
    if not isinstance(max_clusters, int) or isinstance(max_clusters, bool) or max_clusters < 0:
        raise ConfigError(f"max_clusters must be an int >= 0, got {max_clusters!r}")
    out = os.fspath(out_dir)
    stats, decisions = load_run(out)
    n = decisions.num_rows
    by = run_reasons(decisions, stats)
    views = largest_clusters(decisions, max_clusters)

    recorded = {k: v for k, v in (stats.get("counts") or {}).items() if k in ("text_bytes", "words")}
    need_sizes = not ("text_bytes" in recorded and "words" in recorded)
    want = _shown(views, stats, decisions)
    scan: Scan | None = None
    why: str | None = None
    if texts is not None and not need_sizes and all(r in texts for r in want.tolist()):
        scan = Scan(texts={r: texts[r] for r in want.tolist()})
    elif not read_inputs:
        why = "the inputs were not read (read_inputs=False / --no-inputs)"
    elif want.size or need_sizes:
        files, why = locate_inputs(stats, source)
        if files is not None:
            try:
                scan = scan_inputs(files, stats, decisions, want, need_sizes)
            except Mismatch as exc:
                why = f"the inputs found do not match this run's decisions: {exc}"
            except Exception as exc:  # unreadable inputs must not cost the report
                logger.warning("reading the inputs for the report failed: %s", exc, exc_info=True)
                why = f"reading the inputs failed: {exc}"
    if why:
        logger.info("report without input texts: %s", why)

    plot_dir = os.path.join(out, PLOTS_DIR)
    page = Page(plot_dir)
    page.add("summary", "Summary", summary_section(stats, n, by, scan, None if scan else why, recorded or None))
    page.add("counts", "Documents per stage and reason", counts_section(page, n, by, decisions, stats))
    cluster_cfg = (stats.get("config") or {}).get("cluster")
    page.add("clusters", "Cluster sizes", clusters_section(page, decisions, cluster_cfg))
    if scopes_section(stats):
        page.add("scopes", "Scopes", scopes_section(stats))
    page.add("largest", "Largest clusters", excerpts_section(decisions, views, scan.texts if scan else None, why))
    if sources_section(stats):
        page.add("sources", "Sources",
                 sources_section(stats, decisions["id"].combine_chunks(), scan.texts if scan else None, why))
    page.add("lsh", "LSH bands and buckets", lsh_section(page, stats))
    page.add("s-curve", "S-curve and measured similarities", s_curve_section(page, stats, decisions))
    page.add("timings", "Timings and throughput", timings_section(page, stats, n))
    if cost_section(stats):
        page.add("cost", "Cost", cost_section(stats))
    page.add("environment", "Device, config and contract", environment_section(stats))
    if os.path.exists(os.path.join(out, "paragraph_dedup.json")):  # a --paragraph-dedup stage wrote it
        from .paragraph import read_section as paragraph_section

        page.add("paragraph", "Paragraph dedup: cuts, seen-set and measured false positives", paragraph_section(out))
    if os.path.exists(os.path.join(out, "substring_dedup.json")):  # a --substring-dedup stage wrote it
        from .substring import read_section

        page.add("substring", "Exact-substring dedup: cuts and seams", read_section(out))

    intro = f"<p class=\"note\">Output directory <code>{esc(os.path.abspath(out))}</code></p>"
    text = page.render("gpu_dedup run report", intro)

    from .. import io

    for name in PLOT_NAMES:  # drop a previous report's figures that this run did not draw
        for suffix in PLOT_SUFFIXES:
            stale = os.path.join(plot_dir, name + suffix)
            if stale not in page.written and os.path.exists(stale):
                os.remove(stale)
    path = os.path.join(out, REPORT_FILE)
    with io.atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
    logger.info("wrote run report %s (%d figures)", path, len(page.written))
    return path
