"""Shared pieces of the device scripts (device_run.sh, gpu_bench.py, gpu_check.py, device_summary.py):
the H200 ceilings and the stage targets, the row format of gpu_bench.json, its table, and atomic JSON
writes. Standard library only, so the summary step still runs when the wheel install failed.

    from device_report import CEILINGS, TARGETS, bench_row, format_rows, write_json_atomic
"""
from __future__ import annotations

import json
import os

# Measured on one H200 of the lent machine, 2026-11-30 (../shared/device/NOTES.md, "Measured ceilings").
CEILINGS = {
    "d2d": (4.18e12, "4.18 TB/s device copy (read+write)"),
    "h2d_pinned": (54.5e9, "54.5 GB/s host->device pinned"),
    # raw CUDA MinHash at K=112, ~550 shingles/doc: 7.9 M docs/s; counted in hash-ops so that other K and
    # other document lengths compare fairly
    "minhash_ops": (489e9, "489 G hash-ops/s MinHash roofline"),
    "parquet_read": (2.0e9, "2.0 GB/s host Parquet read, 16 cores"),
}

# The per-stage targets (docs/s).
TARGETS = {"signatures": 3e6, "parquet": 1e6, "pipeline": 5e5}


def bench_row(stage: str, seconds: float | None, docs: int | None = None, nbytes: float | None = None, *,
              ceiling: str | None = None, ceiling_work: float | None = None, cpu_docs_per_s: float | None = None,
              target: str | None = None, note: str = "") -> dict:
    """One gpu_bench.json row. ``ceiling_work``: the amount the ceiling is a rate of (bytes moved, or hash
    operations), when that is not ``nbytes``; the fraction is (work / seconds) / ceiling."""
    # plain Python numbers: numpy scalars would reach the JSON as strings
    seconds = float(seconds) if seconds is not None else None
    nbytes = float(nbytes) if nbytes is not None else None
    ceiling_work = float(ceiling_work) if ceiling_work is not None else None
    cpu_docs_per_s = float(cpu_docs_per_s) if cpu_docs_per_s is not None else None
    docs = int(docs) if docs is not None else None
    ok = bool(seconds) and seconds > 0
    docs_s = docs / seconds if ok and docs else None
    row = {"stage": stage, "seconds": seconds, "docs": docs, "bytes": nbytes, "docs_per_s": docs_s,
           "GB_per_s": nbytes / seconds / 1e9 if ok and nbytes else None, "ceiling": None, "fraction": None,
           "cpu_docs_per_s": cpu_docs_per_s,
           "gpu_cpu": docs_s / cpu_docs_per_s if docs_s and cpu_docs_per_s else None,
           "target": target, "target_docs_per_s": TARGETS.get(target) if target else None, "meets_target": None,
           "note": note}
    if ceiling is not None:
        rate, name = CEILINGS[ceiling]
        work = ceiling_work if ceiling_work is not None else nbytes
        row["ceiling"] = name
        row["fraction"] = work / seconds / rate if ok and work else None
    if row["target_docs_per_s"] is not None and docs_s is not None:
        row["meets_target"] = bool(docs_s >= row["target_docs_per_s"])
    return row


def _si(x: float | None) -> str:
    if x is None:
        return ""
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.2f}{suffix}"
    return f"{x:.0f}"


def format_rows(rows: list[dict]) -> str:
    """The per-stage table: time, docs/s, GB/s, fraction of a ceiling, CPU docs/s and GPU/CPU, target."""
    head = (f"{'stage':58s} {'docs':>7s} {'s':>8s} {'docs/s':>8s} {'GB/s':>7s} {'of ceiling':>10s} "
            f"{'CPU docs/s':>10s} {'GPU/CPU':>8s}  target")
    lines = [head, "-" * len(head)]
    ceilings = []
    for r in rows:
        frac = f"{r['fraction']:.1%}" if r.get("fraction") is not None else ""
        if r.get("ceiling"):
            if r["ceiling"] not in ceilings:
                ceilings.append(r["ceiling"])
            frac += f" c{ceilings.index(r['ceiling']) + 1}"
        gbs = f"{r['GB_per_s']:.2f}" if r.get("GB_per_s") else ""
        ratio = f"{r['gpu_cpu']:.1f}x" if r.get("gpu_cpu") else ""
        target = ""
        if r.get("target_docs_per_s"):
            verdict = {True: "met", False: "MISSED"}.get(r.get("meets_target"), "?")
            target = f">= {_si(r['target_docs_per_s'])}/s {verdict}"
        sec = f"{r['seconds']:.3f}" if r.get("seconds") is not None else "-"
        lines.append(f"{r['stage'][:58]:58s} {_si(r.get('docs')):>7s} {sec:>8s} {_si(r.get('docs_per_s')):>8s} "
                     f"{gbs:>7s} {frac:>10s} {_si(r.get('cpu_docs_per_s')):>10s} {ratio:>8s}  {target}".rstrip())
        if r.get("note"):
            lines.append(f"{'':4s}({r['note']})")
    if ceilings:
        lines.append("ceilings (H200, shared/device/NOTES.md): "
                     + "; ".join(f"c{i + 1} = {c}" for i, c in enumerate(ceilings)))
    return "\n".join(lines)


def write_json_atomic(path: str, obj) -> None:
    """Replace ``path`` whole: a reader (or a stage killed by its timeout) never sees half a file."""
    tmp = os.path.join(os.path.dirname(path) or ".", "." + os.path.basename(path) + ".tmp")
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, default=str)
    os.replace(tmp, path)


def write_text_atomic(path: str, text: str) -> None:
    tmp = os.path.join(os.path.dirname(path) or ".", "." + os.path.basename(path) + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
