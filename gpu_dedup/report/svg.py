"""Figures as SVG markup, drawn from a run's aggregates without a plotting library (a figure costs milliseconds;
matplotlib's import, layout and PNG encoding cost seconds per report, issue 38 item 2).

    Axis      one axis over [lo, hi], linear or log: where a value lands (``frac``), its ticks (``nice_ticks`` /
              ``log_ticks`` unless given) and their labels (``plain``: 1, 10, 1,000; never 1e3)
    Figure    a plot area with x at the bottom, y on the left and an optional second y on the right (``y2``);
              ``bars`` (vertical, from the axis' floor), ``hbars`` (horizontal, value labels at their ends),
              ``points`` (circles or squares, filled or hollow), ``line``, ``vline`` / ``hline`` (reference lines),
              a legend of every labelled item and a title; ``svg()`` lays the figure out and returns the markup

The markup is self-contained (no script, no external font or style), valid both inline in HTML and as a file;
every text is escaped. Sizes are in px of the viewBox; the page scales the figure down to its width.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from typing import Sequence

COLORS = {"blue": "#1f77b4", "orange": "#ff7f0e", "green": "#2ca02c", "red": "#d62728", "purple": "#9467bd",
          "gray": "#7f7f7f", "black": "#222222", "steel": "#4c72b0", "rose": "#c44e52"}
FONT = 12                 # px, every text but the title
TITLE_FONT = 14
CHAR_W = 0.58 * FONT      # mean advance of a sans-serif character: margins are sized from label lengths
DASH = "5,4"


def plain(v: float) -> str:
    """A tick or value label: thousands separated, no exponent (1, 2.5, 1,000, 0.01)."""
    if v == 0:
        return "0"
    if abs(v) >= 1 and float(v).is_integer():
        return f"{v:,.0f}"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.6g}"


def nice_ticks(lo: float, hi: float, n: int = 6) -> list[float]:
    """About ``n`` round ticks in [lo, hi]: steps of 1, 2, 2.5 or 5 times a power of ten."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo]
    raw = (hi - lo) / max(n - 1, 1)
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9)
    ticks = []
    k = first
    while k * step <= hi + 1e-9 * step:
        ticks.append(round(k * step, 12))
        k += 1
    return ticks


def log_ticks(lo: float, hi: float) -> list[float]:
    """Powers of ten in [lo, hi]; 2 and 5 times them too when the range spans less than three decades."""
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    mults = (1, 2, 5) if math.log10(hi / lo) < 3 else (1,)
    return [m * 10.0 ** e for e in range(a, b + 1) for m in mults
            if lo * (1 - 1e-9) <= m * 10.0 ** e <= hi * (1 + 1e-9)]


@dataclass
class Axis:
    """One axis: values in [lo, hi] on a linear or log scale; ``ticks`` / ``labels`` override the defaults
    (category axes give both); ``rotate`` slants the x tick labels by 45 degrees; ``integer`` keeps whole ticks."""

    lo: float
    hi: float
    scale: str = "linear"
    label: str = ""
    ticks: Sequence[float] | None = None
    labels: Sequence[str] | None = None
    rotate: bool = False
    integer: bool = False

    def __post_init__(self) -> None:
        if self.scale == "log":
            self.lo = max(self.lo, 1e-12)
            self.hi = max(self.hi, self.lo * 10)
        elif not self.hi > self.lo:
            self.hi = self.lo + 1.0

    def _f(self, v: float) -> float:
        return math.log10(max(v, 1e-300)) if self.scale == "log" else v

    def frac(self, v: float) -> float:
        """Where ``v`` lands on the axis, 0 at lo and 1 at hi (outside when v is)."""
        return (self._f(v) - self._f(self.lo)) / (self._f(self.hi) - self._f(self.lo))

    def tick_list(self) -> list[tuple[float, str]]:
        if self.ticks is not None:
            ticks = list(self.ticks)
            labels = list(self.labels) if self.labels is not None else [plain(t) for t in ticks]
            return list(zip(ticks, labels))
        ticks = log_ticks(self.lo, self.hi) if self.scale == "log" else nice_ticks(self.lo, self.hi)
        if self.integer:
            ticks = [t for t in ticks if float(t).is_integer()] or ticks
        return [(t, plain(t)) for t in ticks]


def _n(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".") if math.isfinite(v) else "0"


def _text(x: float, y: float, s: str, *, anchor: str = "start", size: int = FONT, rotate: float = 0.0,
          baseline: str | None = None, weight: str | None = None, fill: str = "#222") -> str:
    attrs = f'x="{_n(x)}" y="{_n(y)}" font-size="{size}" fill="{fill}"'
    if anchor != "start":
        attrs += f' text-anchor="{anchor}"'
    if baseline:
        attrs += f' dominant-baseline="{baseline}"'
    if weight:
        attrs += f' font-weight="{weight}"'
    if rotate:
        attrs += f' transform="rotate({_n(rotate)} {_n(x)} {_n(y)})"'
    return f"<text {attrs}>{escape(s)}</text>"


class Figure:
    """A figure of ``width`` x ``height`` px with one plot area (module docstring). Set ``x`` and ``y`` (and
    ``y2``) before ``svg()``; items refer to them by name and are laid out when ``svg()`` runs."""

    def __init__(self, width: float = 800, height: float = 360, title: str = "", *, x: Axis | None = None,
                 y: Axis | None = None, y2: Axis | None = None, grid: bool = False) -> None:
        self.width, self.height, self.title = width, height, title
        self.x, self.y, self.y2 = x, y, y2
        self.grid = grid
        self.items: list[tuple] = []
        self.legend_loc = "upper left"

    # ----------------------------------------------------------------------------------------- items
    def bars(self, left: Sequence[float], width: Sequence[float] | float, heights: Sequence[float], color: str,
             *, axis: str = "y", label: str | None = None, opacity: float = 1.0) -> None:
        """Vertical bars from x = left to left + width, from the axis floor up to each height."""
        w = [float(width)] * len(left) if isinstance(width, (int, float)) else list(width)
        self.items.append(("bars", list(left), w, list(heights), color, axis, label, opacity))

    def hbars(self, ys: Sequence[float], values: Sequence[float], colors: Sequence[str],
              labels: Sequence[str] | None = None, height: float = 0.8) -> None:
        """Horizontal bars centred on ys from 0 to each value, with ``labels`` at their ends."""
        self.items.append(("hbars", list(ys), list(values), list(colors), list(labels or []), height))

    def points(self, xs: Sequence[float], ys: Sequence[float], color: str, *, marker: str = "o",
               filled: bool = True, label: str | None = None, size: float = 4.0) -> None:
        self.items.append(("points", list(xs), list(ys), color, marker, filled, label, size))

    def line(self, xs: Sequence[float], ys: Sequence[float], color: str, *, label: str | None = None,
             dash: bool = False, width: float = 1.8) -> None:
        self.items.append(("line", list(xs), list(ys), color, label, dash, width))

    def vline(self, x: float, color: str, *, label: str | None = None, dash: bool = True) -> None:
        self.items.append(("vline", x, color, label, dash))

    def hline(self, y: float, color: str, *, label: str | None = None, dash: bool = True) -> None:
        self.items.append(("hline", y, color, label, dash))

    # ---------------------------------------------------------------------------------------- layout
    def _margins(self) -> tuple[float, float, float, float]:
        assert self.x is not None and self.y is not None, "set x and y before svg()"
        ylab = max((len(s) for _, s in self.y.tick_list()), default=1)
        left = 14 + ylab * CHAR_W + (FONT + 10 if self.y.label else 0)
        right = 18
        if self.y2 is not None:
            right += 10 + max((len(s) for _, s in self.y2.tick_list()), default=1) * CHAR_W
            right += FONT + 8 if self.y2.label else 0
        if any(it[0] == "hbars" and it[4] for it in self.items):  # room for the value at the longest bar's end
            right += 10
        top = 14 + (TITLE_FONT + 10 if self.title else 0)
        xl = max((len(s) for _, s in self.x.tick_list()), default=1)
        bottom = 10 + (xl * CHAR_W * 0.72 + FONT if self.x.rotate else FONT + 6) + (FONT + 12 if self.x.label else 0)
        return left, right, top, bottom

    def svg(self, alt: str = "", ident: str = "plot") -> str:
        """The figure's markup: an ``<svg>`` element with a viewBox, readable inline or as a file; ``ident`` names
        its clip path (unique per page: several figures share one HTML document's ids)."""
        left, right, top, bottom = self._margins()
        W, H = self.width, self.height
        pw, ph = W - left - right, H - top - bottom
        x, y = self.x, self.y

        def px(v: float) -> float:
            return left + x.frac(v) * pw

        def py(v: float, ax: Axis) -> float:
            return top + (1.0 - ax.frac(v)) * ph

        out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {_n(W)} {_n(H)}" width="{_n(W)}" '
               f'height="{_n(H)}" role="img" aria-label="{escape(alt or self.title)}" '
               'font-family="DejaVu Sans,Helvetica,Arial,sans-serif">',
               f"<title>{escape(alt or self.title)}</title>",
               f'<rect x="0" y="0" width="{_n(W)}" height="{_n(H)}" fill="#fff"/>']
        if self.title:
            out.append(_text(left + pw / 2, 14 + TITLE_FONT * 0.8, self.title, anchor="middle", size=TITLE_FONT))
        # grid and ticks
        for t, s in x.tick_list():
            if not -1e-9 <= x.frac(t) <= 1 + 1e-9:
                continue
            X = px(t)
            if self.grid:
                out.append(f'<line x1="{_n(X)}" y1="{_n(top)}" x2="{_n(X)}" y2="{_n(top + ph)}" stroke="#ddd"/>')
            out.append(f'<line x1="{_n(X)}" y1="{_n(top + ph)}" x2="{_n(X)}" y2="{_n(top + ph + 5)}" stroke="#444"/>')
            if x.rotate:
                out.append(_text(X + 3, top + ph + 12, s, anchor="end", rotate=-45))
            else:
                out.append(_text(X, top + ph + 8 + FONT * 0.8, s, anchor="middle"))
        for ax, side in ((y, "left"), (self.y2, "right")):
            if ax is None:
                continue
            for t, s in ax.tick_list():
                if not -1e-9 <= ax.frac(t) <= 1 + 1e-9:
                    continue
                Y = py(t, ax)
                if self.grid and side == "left":
                    out.append(f'<line x1="{_n(left)}" y1="{_n(Y)}" x2="{_n(left + pw)}" y2="{_n(Y)}" stroke="#ddd"/>')
                if side == "left":
                    out.append(f'<line x1="{_n(left - 5)}" y1="{_n(Y)}" x2="{_n(left)}" y2="{_n(Y)}" stroke="#444"/>')
                    out.append(_text(left - 8, Y + FONT * 0.35, s, anchor="end"))
                else:
                    out.append(f'<line x1="{_n(left + pw)}" y1="{_n(Y)}" x2="{_n(left + pw + 5)}" y2="{_n(Y)}" '
                               'stroke="#444"/>')
                    out.append(_text(left + pw + 8, Y + FONT * 0.35, s))
        # items, clipped to the plot area
        clip = "clip-" + "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in ident)
        out.append(f'<clipPath id="{clip}"><rect x="{_n(left)}" y="{_n(top)}" width="{_n(pw)}" height="{_n(ph)}"/>'
                   f'</clipPath><g clip-path="url(#{clip})">')
        legend: list[tuple[str, str]] = []  # (swatch markup at 0,0, label)
        after: list[str] = []               # drawn unclipped, above the items (value labels of hbars)
        for it in self.items:
            kind = it[0]
            if kind == "bars":
                _, ls, ws, hs, color, axname, label, opacity = it
                ax = self.y2 if axname == "y2" else y
                base = py(ax.lo, ax)
                op = f' fill-opacity="{opacity}"' if opacity < 1 else ""
                for l0, w0, h0 in zip(ls, ws, hs):
                    if h0 <= 0 or (ax.scale == "log" and h0 < ax.lo):
                        continue
                    X0, X1, Y = px(l0), px(l0 + w0), py(h0, ax)
                    out.append(f'<rect x="{_n(X0)}" y="{_n(Y)}" width="{_n(max(X1 - X0, 0.5))}" '
                               f'height="{_n(base - Y)}" fill="{color}"{op}/>')
                if label:
                    legend.append((f'<rect x="0" y="-5" width="18" height="10" fill="{color}"{op}/>', label))
            elif kind == "hbars":
                _, ys, vs, colors, labels, hgt = it
                X0 = px(0.0)
                for k, (yy, v, c) in enumerate(zip(ys, vs, colors)):
                    Y0, Y1 = py(yy + hgt / 2, y), py(yy - hgt / 2, y)
                    X1 = px(v)
                    out.append(f'<rect x="{_n(X0)}" y="{_n(Y0)}" width="{_n(max(X1 - X0, 0))}" '
                               f'height="{_n(Y1 - Y0)}" fill="{c}"/>')
                    if k < len(labels):
                        after.append(_text(X1 + 4, (Y0 + Y1) / 2 + FONT * 0.35, labels[k]))
            elif kind == "points":
                _, xs, ys, color, marker, filled, label, size = it
                fill = color if filled else "none"
                for xx, yy in zip(xs, ys):
                    if (x.scale == "log" and xx <= 0) or (y.scale == "log" and yy <= 0):
                        continue
                    out.append(_marker(px(xx), py(yy, y), marker, size, color, fill))
                if label:
                    legend.append((_marker(9, 0, marker, size, color, fill), label))
            elif kind == "line":
                _, xs, ys, color, label, dash, width = it
                pts = " ".join(f"{_n(px(a))},{_n(py(b, y))}" for a, b in zip(xs, ys))
                da = f' stroke-dasharray="{DASH}"' if dash else ""
                out.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="{width}"{da}/>')
                if label:
                    legend.append((f'<line x1="0" y1="0" x2="18" y2="0" stroke="{color}" stroke-width="{width}"'
                                   f"{da}/>", label))
            elif kind in ("vline", "hline"):
                _, v, color, label, dash = it
                da = f' stroke-dasharray="{DASH}"' if dash else ""
                if kind == "vline":
                    X = px(v)
                    out.append(f'<line x1="{_n(X)}" y1="{_n(top)}" x2="{_n(X)}" y2="{_n(top + ph)}" stroke="{color}" '
                               f'stroke-width="1.2"{da}/>')
                else:
                    Y = py(v, y)
                    out.append(f'<line x1="{_n(left)}" y1="{_n(Y)}" x2="{_n(left + pw)}" y2="{_n(Y)}" '
                               f'stroke="{color}" stroke-width="1.2"{da}/>')
                if label:
                    legend.append((f'<line x1="0" y1="0" x2="18" y2="0" stroke="{color}" stroke-width="1.2"{da}/>',
                                   label))
        out.append("</g>")
        out.extend(after)
        # frame and axis labels
        out.append(f'<rect x="{_n(left)}" y="{_n(top)}" width="{_n(pw)}" height="{_n(ph)}" fill="none" '
                   'stroke="#444"/>')
        if x.label:
            out.append(_text(left + pw / 2, H - 8, x.label, anchor="middle"))
        if y.label:
            out.append(_text(14, top + ph / 2, y.label, anchor="middle", rotate=-90, baseline="middle"))
        if self.y2 is not None and self.y2.label:
            out.append(_text(W - 10, top + ph / 2, self.y2.label, anchor="middle", rotate=-90, baseline="middle"))
        if legend:
            out.append(self._legend(legend, left, top, pw))
        out.append("</svg>")
        return "".join(out)

    def _legend(self, entries: list[tuple[str, str]], left: float, top: float, pw: float) -> str:
        size = FONT - 1
        w = 36 + max(len(s) for _, s in entries) * size * 0.58
        h = 8 + len(entries) * (size + 6)
        x0 = left + 8 if self.legend_loc.endswith("left") else left + pw - 8 - w
        y0 = top + 8
        parts = [f'<g transform="translate({_n(x0)},{_n(y0)})">',
                 f'<rect x="0" y="0" width="{_n(w)}" height="{_n(h)}" fill="#fff" fill-opacity="0.85" '
                 'stroke="#ccc"/>']
        for k, (swatch, label) in enumerate(entries):
            cy = 4 + (size + 6) * k + (size + 6) / 2
            parts.append(f'<g transform="translate(6,{_n(cy)})">{swatch}</g>')
            parts.append(_text(30, cy + size * 0.35, label, size=size))
        parts.append("</g>")
        return "".join(parts)


def _marker(x: float, y: float, marker: str, size: float, color: str, fill: str) -> str:
    if marker == "s":
        return (f'<rect x="{_n(x - size)}" y="{_n(y - size)}" width="{_n(2 * size)}" height="{_n(2 * size)}" '
                f'fill="{fill}" stroke="{color}" stroke-width="1.3"/>')
    return f'<circle cx="{_n(x)}" cy="{_n(y)}" r="{_n(size)}" fill="{fill}" stroke="{color}" stroke-width="1.3"/>'
