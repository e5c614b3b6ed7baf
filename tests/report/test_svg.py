"""The report's figures as SVG (report/svg.py, report/plots.py): ticks by hand, and each figure's marks read back
from its markup against the numbers it was drawn from."""
import math
from xml.etree import ElementTree

import numpy as np
import pytest

from gpu_dedup.lexical import params
from gpu_dedup.report import plots
from gpu_dedup.report.metrics import jaccard_histogram
from gpu_dedup.report.svg import Axis, Figure, log_ticks, nice_ticks, plain

NS = "{http://www.w3.org/2000/svg}"


def _root(fig: Figure, ident: str = "f") -> ElementTree.Element:
    root = ElementTree.fromstring(fig.svg("alt", ident=ident))  # well-formed XML, every text escaped
    assert root.tag == f"{NS}svg"
    return root


def _texts(root) -> list[str]:
    return [t.text for t in root.iter(f"{NS}text")]


def _bars(root, fill: str) -> list[dict]:
    """The plot area's rectangles of one colour (not the legend's swatches)."""
    area = next(g for g in root.iter(f"{NS}g") if g.get("clip-path"))
    return [r.attrib for r in area.iter(f"{NS}rect") if r.get("fill") == fill]


def test_ticks_by_hand():
    assert nice_ticks(0.0, 1.0) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert nice_ticks(0.0, 89_789.7) == [0.0, 20_000.0, 40_000.0, 60_000.0, 80_000.0]
    assert nice_ticks(-0.6, 19.6) == [0.0, 5.0, 10.0, 15.0]
    assert nice_ticks(0.0, 1.02) == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert log_ticks(0.6, 150.0) == [1, 2, 5, 10, 20, 50, 100]
    assert log_ticks(0.5, 2e5) == [1, 10, 100, 1_000, 10_000, 100_000]
    assert [plain(v) for v in (0, 1, 1000, 2.5, 0.25, 1e6, 1234.5)] == ["0", "1", "1,000", "2.5", "0.25",
                                                                        "1,000,000", "1,234"]
    a = Axis(1.0, 1000.0, "log")
    assert a.frac(1.0) == 0.0 and a.frac(1000.0) == 1.0 and math.isclose(a.frac(10.0), 1 / 3)
    assert Axis(5.0, 5.0).hi == 6.0  # an empty range is widened, never a division by zero


def test_counts_bars_are_the_counts():
    by = {"unique": 78_078, "representative": 10_057, "exact_duplicate": 5_003, "near<dup>&": 0}
    root = _root(plots.plot_counts(by))
    green, red = _bars(root, "#2ca02c"), _bars(root, "#d62728")
    assert len(green) == 2 and len(red) == 2
    widths = {round(float(b["y"])): float(b["width"]) for b in green + red}
    ordered = [widths[k] for k in sorted(widths)]  # top to bottom: the reasons in the order given
    assert ordered[3] == 0.0
    for k in (1, 2):  # bar lengths in proportion to the counts
        assert ordered[k] / ordered[0] == pytest.approx(list(by.values())[k] / 78_078, abs=2e-3)
    texts = _texts(root)
    assert {"78,078", "10,057", "5,003", "0", "near<dup>&", "Documents per decision reason"} <= set(texts)


def test_s_curve_line_and_removed_histogram():
    jac = np.array([0.81, 0.82, 0.86, 0.91, 0.93, 0.95, 0.95, 1.0])
    hist = jaccard_histogram(jac)
    root = _root(plots.plot_s_curve(20, 5, 0.8, hist))
    line = next(root.iter(f"{NS}polyline"))
    pts = np.array([[float(v) for v in p.split(",")] for p in line.get("points").split()])
    assert len(pts) == 201 and np.all(np.diff(pts[:, 0]) > 0) and np.all(np.diff(pts[:, 1]) <= 1e-9)
    # the curve's pixel height at s = p50 is half way between its heights at P = 0 and P = 1 (y axis 0..1.02)
    x = np.linspace(0, 1, 201)
    y_half = np.interp(params.p50(20, 5), x, pts[:, 1])
    y0, y1 = pts[0, 1], pts[0, 1] - (pts[0, 1] - pts[-1, 1]) / params.candidate_probability(1.0, 20, 5)
    assert y_half == pytest.approx((y0 + y1) / 2, abs=0.6)
    bars = _bars(root, "#ff7f0e")
    heights = sorted(float(b["height"]) for b in bars)
    assert len(bars) == int(np.count_nonzero(hist.counts))  # empty bins draw nothing
    assert heights[-1] / heights[0] == pytest.approx(hist.counts.max() / hist.counts[hist.counts > 0].min(), abs=0.01)
    assert any("removed near-duplicates" in t for t in _texts(root))


def test_log_axes_skip_what_they_cannot_show():
    root = _root(plots.plot_bucket_sizes([0, 500, 60, 7, 1]))
    bars = _bars(root, "#9467bd")
    assert len(bars) == 4  # the empty class has no bar on a log axis
    assert "2–3" in _texts(root) and "16–31" in _texts(root)
    sizes = np.array([1] * 50 + [2] * 7 + [9, 9, 40])
    root = _root(plots.plot_cluster_sizes(sizes, cut=5))
    circles = list(root.iter(f"{NS}circle"))
    assert len(circles) == 4 + 1  # one per size (1, 2, 9, 40), and the legend's marker
    assert "remove_clusters_larger_than = 5" in _texts(root)


def test_figures_on_one_page_keep_their_own_clip_paths():
    a = plots.plot_timings({"read": 1.5, "minhash": 0.25}).svg("t", ident="timings")
    b = plots.plot_band_load([3, 4, 5]).svg("b", ident="band_load")
    ids = [ElementTree.fromstring(x).find(f".//{NS}clipPath").get("id") for x in (a, b)]
    assert ids == ["clip-timings", "clip-band_load"]
    assert "1.5 s" in a and "0.25 s" in a
