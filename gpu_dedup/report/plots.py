"""The report's plots, drawn with matplotlib (the ``plot`` extra), which is imported only when they are drawn."""
from __future__ import annotations

import io as _bytes_io
import logging
import os
from typing import Sequence

import numpy as np

from ..decisions import KEPT_REASONS
from ..errors import ConfigError, DependencyError
from ..lexical import params
from .metrics import CandidateRates, JaccardHistogram

logger = logging.getLogger(__package__)


# ------------------------------------------------------------------------------------------------- plots
def matplotlib_ok() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def new_figure(width: float = 8.0, height: float = 3.6):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)  # the Agg canvas directly: pyplot's global backend is left alone
    return fig, fig.add_subplot(1, 1, 1)


def png_bytes(fig) -> bytes:
    buf = _bytes_io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def plot_counts(by_reason: dict[str, int]) -> bytes:
    names = list(by_reason)
    vals = [by_reason[n] for n in names]
    fig, ax = new_figure(8.0, 0.45 * len(names) + 1.2)
    colors = ["tab:green" if n in KEPT_REASONS else "tab:red" for n in names]
    bars = ax.barh(names[::-1], vals[::-1], color=colors[::-1])
    ax.bar_label(bars, labels=[f"{v:,}" for v in vals[::-1]], padding=3)
    ax.set_xlabel("documents (green: kept, red: removed)")
    ax.set_xlim(0, max(vals + [1]) * 1.15)
    ax.set_title("Documents per decision reason")
    return png_bytes(fig)


def _plain_log_ticks(ax, xs: np.ndarray) -> None:
    """Log axes labelled 1, 2, 10, 100 instead of 2x10^0; the sizes themselves when there are few."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    plain = FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(plain)
        axis.set_minor_formatter(NullFormatter())
    if len(xs) <= 12:
        ax.set_xticks(xs)


def plot_cluster_sizes(s: np.ndarray, c: np.ndarray, cut: int | None = None) -> bytes:
    """Clusters (``c``) and their documents per cluster size (``s``, distinct, ascending)."""
    fig, ax = new_figure()
    ax.loglog(s, c, "o", label="clusters of this size")
    ax.loglog(s, s * c, "s", markerfacecolor="none", label="documents in clusters of this size")
    if cut is not None:  # the cluster-size policy: clusters right of the line lose their duplicates
        ax.axvline(cut + 0.5, color="tab:red", linestyle="--", linewidth=1,
                   label=f"remove_clusters_larger_than = {cut:,}")
    _plain_log_ticks(ax, s)
    ax.set_xlabel("cluster size (documents, incl. the kept one)")
    ax.set_ylabel("count")
    ax.set_title("Cluster-size distribution (log-log; size 1 = no duplicate)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return png_bytes(fig)


def plot_band_load(per_band: Sequence[int]) -> bytes:
    fig, ax = new_figure()
    ax.bar(np.arange(len(per_band)), per_band, color="tab:blue")
    ax.axhline(float(np.mean(per_band)), color="black", linestyle="--", linewidth=1,
               label=f"mean {np.mean(per_band):,.1f}")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("band")
    ax.set_ylabel("buckets with ≥ 2 documents")
    ax.set_title("Candidate buckets per LSH band")
    ax.legend()
    return png_bytes(fig)


def plot_bucket_sizes(log2_counts: Sequence[int]) -> bytes:
    k = np.arange(len(log2_counts))
    fig, ax = new_figure()
    ax.bar(k, log2_counts, color="tab:purple")
    ax.set_yscale("log")
    labels = [f"{2**i:,}" if i == 0 else f"{2**i:,}–{2**(i + 1) - 1:,}" for i in k]
    ax.set_xticks(k, labels, rotation=45, ha="right")
    from matplotlib.ticker import FuncFormatter

    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
    ax.set_xlabel("bucket size (documents)")
    ax.set_ylabel("buckets")
    ax.set_title("Bucket-size distribution")
    return png_bytes(fig)


def _draw_s_curve(ax, bands: int, rows: int, color: str | None = None, label: str | None = None):
    s, p = params.s_curve(bands, rows, n=401)
    line, = ax.plot(s, p, color=color, label=label or f"{bands}×{rows} theory (p50 = {params.p50(bands, rows):.3f})")
    return line


def plot_s_curve(bands: int, rows: int, theta: float, hist: JaccardHistogram | None) -> bytes:
    fig, ax = new_figure(8.0, 4.2)
    _draw_s_curve(ax, bands, rows, color="tab:blue")
    params.style_s_curve_axes(ax, theta)
    handles, labels = ax.get_legend_handles_labels()
    if hist is not None and hist.total:
        ax2 = ax.twinx()
        bars = ax2.bar(hist.edges[:-1], hist.counts, width=np.diff(hist.edges), align="edge", alpha=0.45,
                       color="tab:orange", edgecolor="tab:orange")
        from matplotlib.ticker import MaxNLocator

        ax2.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax2.set_ylabel("removed near-duplicates per bin")
        ax2.set_ylim(0, max(1, int(hist.counts.max())) * 1.1)
        handles.append(bars)
        labels.append("removed near-duplicates: exact J to the kept document (right axis)")
    ax.legend(handles, labels, loc="upper left", fontsize=8)
    ax.set_title(f"S-curve of {bands} bands × {rows} rows")
    return png_bytes(fig)


def plot_timings(timings: dict[str, float]) -> bytes:
    names = list(timings)
    vals = [timings[n] for n in names]
    fig, ax = new_figure(8.0, 0.4 * len(names) + 1.2)
    bars = ax.barh(names[::-1], vals[::-1], color="tab:gray")
    ax.bar_label(bars, labels=[f"{v:.3g} s" for v in vals[::-1]], padding=3)
    ax.set_xlabel("seconds")
    ax.set_xlim(0, max(vals + [1e-9]) * 1.2)
    ax.set_title("Time per stage")
    return png_bytes(fig)


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
    fig, ax = new_figure(8.0, 4.5)
    for i, cr in enumerate(rates):
        color = f"C{i}"
        _draw_s_curve(ax, cr.bands, cr.rows, color=color)
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
