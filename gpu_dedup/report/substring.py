"""OUT/substring_report.html: what exact-substring dedup cut, and how the text reads at the seams."""
from __future__ import annotations

import os
from typing import Any

from .page import Page, esc, html_table, kv_table

REPORT_FILE = "substring_report.html"


def section(stats: dict[str, Any]) -> str:
    """HTML: the policy, the counts, and the seam sample (the text on both sides of each cut as it reads after
    the cut; the cut is marked ⟦…⟧)."""
    c, p = stats["counts"], stats["policy"]
    policy = kv_table([("tokens", p["tokens"]), ("min tokens", p["min_tokens"]), ("keep", p["keep"]), ("cut", p["cut"]),
                  ("seam rule", p["seam"]), ("short documents", p["short_documents"])])
    counts = kv_table([("documents", f"{c['documents']:,}"), ("documents changed", f"{c['documents_changed']:,}"),
                  ("spans cut", f"{c['spans_cut']:,}"), ("tokens cut", f"{c['tokens_cut']:,} of {c['tokens']:,}"),
                  ("bytes cut", f"{c['bytes_cut']:,} of {c['bytes_in']:,}"),
                  ("flags", ", ".join(f"{k}: {v:,}" for k, v in c["flags"].items()))])
    rows = [(s["row"], s["cut_bytes"], s["before"].replace("\n", "⏎") + "⟦…⟧" + s["after"].replace("\n", "⏎"))
            for s in stats.get("seams", [])]
    seams = (html_table(["row", "bytes cut", "text around the cut, after it (⏎ = newline)"], rows, left=3) if rows
             else "<p class=\"note\">No cut.</p>")
    return f"{policy}\n{counts}\n<h3>Seams (first {len(rows)} cuts)</h3>\n{seams}"


def read_section(out: str) -> str:
    """The section from OUT/substring_dedup.json (for the run report, ``gpu-dedup report``)."""
    import json

    with open(os.path.join(out, "substring_dedup.json"), encoding="utf-8") as fh:
        return section(json.load(fh))


def write_substring_report(out: str, stats: dict[str, Any]) -> str:
    from .. import io

    page = Page(os.path.join(out, "report"), False)
    page.add("substring", "Exact-substring dedup", section(stats))
    path = os.path.join(out, REPORT_FILE)
    intro = f"<p class=\"note\">Output directory <code>{esc(os.path.abspath(out))}</code></p>"
    with io.atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(page.render("gpu_dedup substring dedup", intro))
    return path
