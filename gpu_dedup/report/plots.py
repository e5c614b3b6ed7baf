"""The report's figures: the five of report.html drawn as SVG from the run's aggregates (svg.py, no plotting
library: milliseconds each), and ``plot_candidate_rates`` for notebooks, drawn with matplotlib (imported only there).

Each ``plot_*`` returns an ``svg.Figure`` that ``Page.figure`` puts into the page and writes to report/NAME.svg."""
from __future__ import annotations

import logging
import os
from typing import Sequence

import numpy as np

from ..decisions import KEPT_REASONS
from ..errors import ConfigError, DependencyError
from ..lexical import params
from .metrics import CandidateRates, JaccardHistogram
from .svg import COLORS, Axis, Figure

logger = logging.getLogger(__package__)

# ------------------------------------------------------------------------------------------------- plots
def matplotlib_ok() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _hbar_figure(names: Sequence[str], vals: Sequence[float], colors: Sequence[str], labels: Sequence[str],
                 xlabel: str, xmax: float, title: str) -> Figure:
    """Horizontal bars, the first name at the top, each bar's label at its end."""
    n = len(names)
    fig = Figure(800, (0.45 * n + 1.2) * 100, title,
                 x=Axis(0.0, xmax, label=xlabel),
                 y=Axis(-0.6, n - 0.4, ticks=list(range(n)), labels=list(names)[::-1]))
    fig.hbars(list(range(n)), list(vals)[::-1], list(colors)[::-1], list(labels)[::-1])
    return fig


def plot_counts(by_reason: dict[str, int]) -> Figure:
    names = list(by_reason)
    vals = [by_reason[n] for n in names]
    colors = [COLORS["green"] if n in KEPT_REASONS else COLORS["red"] for n in names]
    return _hbar_figure(names, vals, colors, [f"{v:,}" for v in vals], "documents (green: kept, red: removed)",
                        max(vals + [1]) * 1.15, "Documents per decision reason")


def _log_range(values: np.ndarray) -> tuple[float, float]:
    """A log axis' limits around positive values, with the margin matplotlib's autoscale leaves."""
    lo, hi = float(values.min()), float(values.max())
    return lo / 1.6, hi * 1.6


def plot_cluster_sizes(sizes: np.ndarray, cut: int | None = None) -> Figure:
    s, c = np.unique(sizes, return_counts=True)
    docs = s * c
    xlo, xhi = _log_range(s.astype(np.float64) if cut is None else np.append(s, cut + 0.5).astype(np.float64))
    ylo, yhi = _log_range(np.concatenate([c, docs]).astype(np.float64))
    few = len(s) <= 12  # the sizes themselves as ticks when there are few
    fig = Figure(800, 360, "Cluster-size distribution (log-log; size 1 = no duplicate)", grid=True,
                 x=Axis(xlo, xhi, "log", "cluster size (documents, incl. the kept one)",
                        ticks=[float(v) for v in s] if few else None),
                 y=Axis(ylo, yhi, "log", "count"))
    fig.points(s, c, COLORS["blue"], marker="o", label="clusters of this size")
    fig.points(s, docs, COLORS["orange"], marker="s", filled=False, label="documents in clusters of this size")
    if cut is not None:  # the cluster-size policy: clusters right of the line lose their duplicates
        fig.vline(cut + 0.5, COLORS["red"], label=f"remove_clusters_larger_than = {cut:,}")
    fig.legend_loc = "upper right"
    return fig


def plot_band_load(per_band: Sequence[int]) -> Figure:
    n = len(per_band)
    mean = float(np.mean(per_band))
    fig = Figure(800, 360, "Candidate buckets per LSH band",
                 x=Axis(-0.6, n - 0.4, label="band", integer=True),
                 y=Axis(0.0, max(max(per_band), 1) * 1.25, label="buckets with ≥ 2 documents"))  # room for the legend
    fig.bars([i - 0.4 for i in range(n)], 0.8, list(per_band), COLORS["blue"])
    fig.hline(mean, COLORS["black"], label=f"mean {mean:,.1f}")
    fig.legend_loc = "upper right"
    return fig


def plot_bucket_sizes(log2_counts: Sequence[int]) -> Figure:
    k = list(range(len(log2_counts)))
    labels = [f"{2**i:,}" if i == 0 else f"{2**i:,}–{2**(i + 1) - 1:,}" for i in k]
    top = max([v for v in log2_counts if v > 0] + [1])
    fig = Figure(800, 360, "Bucket-size distribution",
                 x=Axis(-0.6, len(k) - 0.4, label="bucket size (documents)", ticks=k, labels=labels, rotate=True),
                 y=Axis(0.5, top * 2.0, "log", "buckets"))
    fig.bars([i - 0.4 for i in k], 0.8, list(log2_counts), COLORS["purple"])
    return fig


def plot_s_curve(bands: int, rows: int, theta: float, hist: JaccardHistogram | None) -> Figure:
    s, p = params.s_curve(bands, rows, n=201)
    y2 = None
    if hist is not None and hist.total:
        y2 = Axis(0.0, max(1, int(hist.counts.max())) * 1.1, label="removed near-duplicates per bin", integer=True)
    fig = Figure(800, 420, f"S-curve of {bands} bands × {rows} rows", grid=True,
                 x=Axis(0.0, 1.0, label="Jaccard similarity s"),
                 y=Axis(0.0, 1.02, label="P(candidate) = 1 − (1 − s^r)^b"), y2=y2)
    fig.line(s, p, COLORS["blue"], label=f"{bands}×{rows} theory (p50 = {params.p50(bands, rows):.3f})")
    fig.vline(theta, COLORS["black"], label=f"θ = {theta:g}")
    if y2 is not None:
        fig.bars(hist.edges[:-1], np.diff(hist.edges), hist.counts, COLORS["orange"], axis="y2", opacity=0.45,
                 label="removed near-duplicates: exact J to the kept document (right axis)")
    return fig


def plot_timings(timings: dict[str, float]) -> Figure:
    names = list(timings)
    vals = [timings[n] for n in names]
    return _hbar_figure(names, vals, [COLORS["gray"]] * len(names), [f"{v:.3g} s" for v in vals], "seconds",
                        max(vals + [1e-9]) * 1.2, "Time per stage")


def plot_candidate_rates(rates: Sequence[CandidateRates], theta: float, path: str) -> None:
    """Write measured candidate rates (points with ±1 standard error) over each choice's S-curve.

    Args:
        rates: one ``CandidateRates`` per (bands, rows) choice.
        theta: the Jaccard threshold, marked on the plot.
        path: the image to write, ending in .png or .svg.

    Raises:
        ConfigError: no rates, or another suffix.
        DependencyError: matplotlib (the ``plot`` extra) is missing.
    """
    if not rates:
        raise ConfigError("plot_candidate_rates needs at least one CandidateRates, got none")
    suffix = os.path.splitext(str(path))[1].lower()
    if suffix not in (".png", ".svg"):
        raise ConfigError(f"path must end in .png or .svg, got {str(path)!r}")
    if not matplotlib_ok():
        raise DependencyError("plotting needs matplotlib: pip install 'gpu-dedup[plot]'")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure as MplFigure

    fig = MplFigure(figsize=(8.0, 4.5))
    FigureCanvasAgg(fig)  # the Agg canvas directly: pyplot's global backend is left alone
    ax = fig.add_subplot(1, 1, 1)
    for i, cr in enumerate(rates):
        color = f"C{i}"
        s, p = params.s_curve(cr.bands, cr.rows, n=401)
        ax.plot(s, p, color=color, label=f"{cr.bands}×{cr.rows} theory (p50 = {params.p50(cr.bands, cr.rows):.3f})")
        mid = 0.5 * (cr.edges[:-1] + cr.edges[1:])
        ok = cr.pairs > 0
        ax.errorbar(mid[ok], cr.rate[ok], yerr=cr.stderr[ok], fmt="o", color=color, markersize=4, capsize=2,
                    label=f"{cr.bands}×{cr.rows} measured ({int(cr.pairs.sum()):,} labelled pairs)")
    ax.axvline(theta, color="black", linestyle="--", linewidth=1, label=f"θ = {theta:g}")
    ax.set_xlabel("exact Jaccard similarity of the pair")
    ax.set_ylabel("share of pairs that became candidates")
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(-0.02, 1.05)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, format=suffix[1:])
    logger.info("wrote candidate-rate plot of %d choices to %s", len(rates), path)
