"""The paragraph-dedup section of the run report (report/html.py adds it when OUT holds paragraph_dedup.json): the
policy, the counts, the seen-set and, when the run measured it (``fp_sample``), the Bloom filter's measured
false-positive rate next to its target."""
from __future__ import annotations

import json
import os
from typing import Any

from .page import kv_table

STATS_FILE = "paragraph_dedup.json"


def _rate(x: Any) -> str:
    return "n/a" if x is None else f"{x:.3g}"


def section(stats: dict[str, Any]) -> str:
    """HTML of one paragraph_dedup.json: policy, counts, seen-set(s) and the false-positive audit."""
    c, p = stats["counts"], stats["policy"]
    policy = kv_table([("unit", f"{p['split']}: {p['units']}"), ("action", p.get("action", "keep-first")),
                       ("keep", p["keep"]), ("minimum", f"{p['min_paragraph_bytes']} normalized bytes"),
                       ("cut", p["cut"])])
    counts = kv_table([("documents", f"{c['documents']:,}"), ("documents changed", f"{c['documents_changed']:,}"),
                       ("units removed", f"{c['units_removed']:,} of {c['units']:,}"),
                       ("bytes cut", f"{c['bytes_cut']:,} of {c['bytes_in']:,}"),
                       ("flags", ", ".join(f"{k}: {v:,}" for k, v in c["flags"].items()))])
    s = stats["seen_set"]
    rows = [("seen-set", s["mode"]), ("items", f"{s['items_inserted']:,} (design {s['design_items']:,})")]
    if s["mode"] == "bloom":
        rows += [("target false-positive rate", _rate(s["target_fp_rate"])),
                 ("estimated from the bit fill", _rate(s["estimated_fp_rate_from_fill"]))]
    out = f"{policy}\n{counts}\n<h3>Seen-set</h3>\n{kv_table(rows)}"
    a = stats.get("fp_audit")
    if a is None:
        return out + ("\n<p class=\"note\">False positives not measured (run with --paragraph-fp-sample "
                      "FRACTION to check a sample of the keys against exact sets).</p>")
    audit = kv_table([
        ("sample", f"{a['sample_fraction']:g} of the keys ({a['sampling']})"),
        ("sampled units", f"{a['sampled_units']:,}, of them kept by the exact rule {a['units_kept_by_exact_rule']:,}"),
        ("false removals", f"{a['false_removals']:,}"),
        ("measured false-positive rate", f"{_rate(a['measured_fp_rate'])} (95% CI {_rate(a['ci95'][0])} to "
                                         f"{_rate(a['ci95'][1])})"),
        ("target", _rate(a["target_fp_rate"])),
        ("verdict", "OVER TARGET: the filter is undersized (raise --expected-paragraphs)" if a["exceeds_target"]
         else "consistent with the target")])
    return f"{out}\n<h3>Measured false positives</h3>\n{audit}"


def read_section(out: str) -> str:
    """The section from OUT/paragraph_dedup.json (for the run report, ``gpu-dedup report``)."""
    with open(os.path.join(out, STATS_FILE), encoding="utf-8") as fh:
        return section(json.load(fh))
