"""HTML building blocks of the report page: escaping, tables, number formats, and the page itself."""
from __future__ import annotations

import html
import json
import logging
import os
from typing import Any, Sequence

logger = logging.getLogger(__package__)


# -------------------------------------------------------------------------------------------------- html
_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;max-width:1200px;
margin:0 auto;padding:1em 2em 3em;color:#222;line-height:1.45}
h1{margin-bottom:.2em} h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:2em}
h3{margin:1.4em 0 .4em;font-size:1.05em}
nav{margin:.6em 0 1em;font-size:.95em} nav a{margin-right:1.1em}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:.93em}
td,th{border:1px solid #ddd;padding:.25em .65em;text-align:right;vertical-align:top}
th{background:#f4f4f4} .l{text-align:left} .kv th{font-weight:normal;background:#f8f8f8}
img,svg{max-width:100%;height:auto;display:block;margin:.5em 0}
.warn{background:#fff3cd;border:1px solid #e0b800;padding:.5em 1em;border-radius:4px}
.note{color:#555;font-size:.92em} figure.plot{margin:.5em 0}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:1em;margin:.3em 0 1em}
.head{font-size:.85em;color:#444;margin-bottom:.2em}
.doc{border:1px solid #ccc;border-radius:4px;padding:.5em .7em;max-height:15em;overflow:auto;font-size:.88em;
overflow-wrap:anywhere;background:#fcfcfc}
mark{background:#ffe58a} del{background:#ffd6d6;color:#8a0000}
.skip{color:#888;font-style:italic;font-size:.92em}
pre{background:#f6f6f6;padding:.7em;overflow:auto;border-radius:4px;margin:.3em 0;
font:12.5px/1.4 ui-monospace,"DejaVu Sans Mono",Menlo,Consolas,monospace}
.cols{display:grid;grid-template-columns:1fr 1fr;gap:1em} .cols h3{margin-top:.6em}
code{font-size:.92em}
"""


def esc(x: Any) -> str:
    return html.escape(str(x), quote=True)


_LEFT = ' class="l"'


def html_table(header: Sequence[str], rows: Sequence[Sequence[Any]], left: int = 1) -> str:
    """HTML table; cells are escaped; the first ``left`` columns are left-aligned."""
    def cells(tag: str, values: Sequence[Any]) -> str:
        return "".join(f"<{tag}{_LEFT if i < left else ''}>{esc(v)}</{tag}>" for i, v in enumerate(values))

    body = "".join(f"<tr>{cells('td', r)}</tr>" for r in rows)
    return f"<table><tr>{cells('th', header)}</tr>{body}</table>"


def kv_table(rows: Sequence[Sequence[Any]]) -> str:
    """Two-column key/value table without a header row; cells are escaped."""
    body = "".join(f"<tr><th class=\"l\">{esc(k)}</th><td class=\"l\">{esc(v)}</td></tr>" for k, v in rows)
    return f"<table class=\"kv\">{body}</table>"


def compact_json(obj: Any, indent: int = 0) -> str:
    """JSON with one key per line but lists of scalars on one line (per-band counts stay readable)."""
    pad = "  " * (indent + 1)
    if isinstance(obj, dict) and obj:
        items = [f"{pad}{json.dumps(str(k))}: {compact_json(v, indent + 1)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + "  " * indent + "}"
    if isinstance(obj, list) and obj and any(isinstance(v, (dict, list)) for v in obj):
        return "[\n" + ",\n".join(pad + compact_json(v, indent + 1) for v in obj) + "\n" + "  " * indent + "]"
    return json.dumps(obj, ensure_ascii=False)


def pct(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "–"


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.2f} {unit}"
        n /= 1000.0
    return f"{n:,.2f} TB"  # pragma: no cover


class Page:
    """Collects sections and figures; a figure goes into the page as inline SVG and to plot_dir/NAME.svg.
    ``plots=False``: a page without figures (``figure`` returns "")."""

    def __init__(self, plot_dir: str, plots: bool = True) -> None:
        self.plot_dir = plot_dir
        self.plots = plots
        self.sections: list[tuple[str, str, str]] = []
        self.written: list[str] = []

    def figure(self, name: str, draw, alt: str) -> str:
        """``draw()`` -> an ``svg.Figure``: its markup inline (and in plot_dir/NAME.svg), or a warning if it fails."""
        if not self.plots:
            return ""
        try:
            svg = draw().svg(alt, ident=name)
        except Exception as exc:  # one bad figure must not cost the whole report
            logger.warning("report figure %s failed: %s", name, exc, exc_info=True)
            return f"<p class=\"warn\">Figure {esc(name)} failed: {esc(exc)}</p>"
        from .. import io

        path = os.path.join(self.plot_dir, f"{name}.svg")
        with io.atomic_path(path) as tmp:
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write('<?xml version="1.0" encoding="utf-8"?>\n' + svg + "\n")
        self.written.append(path)
        return f"<figure class=\"plot\">{svg}</figure>"

    def add(self, anchor: str, title: str, body: str) -> None:
        self.sections.append((anchor, title, body))

    def render(self, title: str, intro: str) -> str:
        nav = " ".join(f"<a href=\"#{a}\">{esc(t)}</a>" for a, t, _ in self.sections)
        secs = "\n".join(f"<section id=\"{a}\"><h2>{esc(t)}</h2>\n{b}\n</section>" for a, t, b in self.sections)
        return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
                f"<title>{esc(title)}</title><style>{_CSS}</style></head>\n<body>\n<h1>{esc(title)}</h1>\n{intro}\n"
                f"<nav>{nav}</nav>\n{secs}\n</body></html>\n")
