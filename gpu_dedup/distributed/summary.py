"""What report.html shows of a Ray run's decisions, from per-task aggregates: the report (report/summary.py) reads
them from run.json's ``report`` and OUT/report/shown.json, never the decisions table.

    file_summary  per write task (stages.write): its own clusters' sizes (size -> clusters), its near duplicates'
                  Jaccard histogram, its rows removed for an --against index's document, and its ``LARGEST``
                  largest kept rows of clusters with duplicates (the report's candidates, by size then row)
    largest       the driver's: the ``LARGEST`` largest of every file's candidates
    shown         per input file (after write): the rows of those clusters it holds (the kept ones, and up to
                  ``MEMBERS_SHOWN`` removed members per cluster, the least similar first), with their id, reason,
                  Jaccard and the first ``DIFF_WORDS`` words of their text
    report        the driver's: run.json's ``report`` (the files' counts added, the index's clusters from its
                  sizes task) and shown.json's rows (each cluster's members chosen over the files)
"""
from __future__ import annotations

import re
from typing import Any

import numpy as np
import pyarrow as pa

from .. import io
from ..report.diff import DIFF_WORDS
from ..report.metrics import JACCARD_BINS, MEMBERS_SHOWN, jaccard_histogram
from .rows import Job, run_once

LARGEST = 10  # the clusters report.html shows (write_report's max_clusters)


def _hist(values: np.ndarray) -> list[list[int]]:
    s, c = np.unique(np.asarray(values, np.int64), return_counts=True)
    return [[int(a), int(b)] for a, b in zip(s, c)]


def file_summary(d: pa.Table, first: int) -> dict[str, Any]:
    """The report's counts of one file's decisions part ``d`` (module doc); ``first``: the file's first row among the
    run's decisions (its position, an --against index's rows not counted)."""
    n = d.num_rows
    pos = first + np.arange(n, dtype=np.int64)
    cid, size = d["cluster_id"].to_numpy(), d["cluster_size"].to_numpy()
    keep = np.asarray(d["keep"].to_numpy(zero_copy_only=False), bool)
    near = np.asarray(d["reason"].to_numpy(zero_copy_only=False) == "near_duplicate", bool)
    h = jaccard_histogram(d["jaccard"].to_numpy(zero_copy_only=False).astype(np.float64)[near])
    cand = np.flatnonzero(keep & (size > 1))
    cand = cand[np.lexsort((cand, -size[cand]))][:LARGEST]
    return {"cluster_sizes": _hist(size[cid == pos]), "index_removed": int((cid < 0).sum()),
            "near_jaccard": h.counts.tolist(), "near_missing": h.missing,
            "largest": [[int(size[i]), int(pos[i])] for i in cand]}


def index_sizes(count: np.ndarray) -> list[list[int]]:
    """The sizes task of an --against index's file: its clusters' sizes (size -> clusters)."""
    return _hist(count)


def largest(written: list[dict[str, Any]]) -> list[list[int]]:
    """[size, row] of the ``LARGEST`` largest kept rows of clusters (rows: positions), over every file's candidates
    (by size, then row: report.metrics.largest_clusters)."""
    return [[s, r] for s, r in sorted(([s, r] for w in written for s, r in w["summary"]["largest"]),
                                      key=lambda x: (-x[0], x[1]))[:LARGEST]]


def _texts(job: Job, fi: int, local: np.ndarray) -> dict[int, str]:
    """The first DIFF_WORDS words (whitespace kept) of the texts of file ``fi``'s rows ``local`` (sorted)."""
    cfg, out = job.cfg, {}
    if not len(local):
        return out
    for sel, text in io.iter_rows([job.files[fi]], local, **{**cfg.reader_options(), "keep_column": None}):
        for r, t in zip(sel.tolist(), text.to_pylist()):
            cut = re.search(r"^(?:\S+\s+){%d}" % DIFF_WORDS, t)
            out[int(r)] = t[:cut.end()] if cut else t
    return out


@run_once("shown")
def shown(job: Job, fi: int, top: list[list[int]]) -> dict[str, Any]:
    """File ``fi``'s rows of the clusters ``top`` ([size, row], ``largest``; module doc): [position, cluster, kept,
    id, reason, Jaccard or None, text], the kept rows of ``top`` and each cluster's candidate members."""
    d = job.layout.read_one("decisions", f"f{fi:06d}", ["id", "keep", "reason", "cluster_id", "jaccard"])
    first = int(job.offsets[fi]) - job.n_index
    pos = first + np.arange(d.num_rows, dtype=np.int64)
    cid = d["cluster_id"].to_numpy()
    keep = np.asarray(d["keep"].to_numpy(zero_copy_only=False), bool)
    jac = d["jaccard"].to_numpy(zero_copy_only=False).astype(np.float64)
    top_a = np.asarray([r for _, r in top], np.int64)
    pick = [np.flatnonzero(np.isin(pos, top_a))]
    removed = np.flatnonzero(~keep & np.isin(cid, top_a))
    removed = removed[np.lexsort((removed, np.where(np.isnan(jac[removed]), np.inf, jac[removed]), cid[removed]))]
    for c in np.unique(cid[removed]):
        pick.append(removed[cid[removed] == c][:MEMBERS_SHOWN])
    rows = np.unique(np.concatenate(pick)).astype(np.int64)
    texts = _texts(job, fi, rows)
    ids, reason = d["id"].to_pylist(), d["reason"].to_pylist()
    return {"rows": [[int(pos[r]), int(cid[r]), bool(keep[r]), ids[r], reason[r],
                      None if np.isnan(jac[r]) else float(jac[r]), texts.get(int(r))] for r in rows.tolist()]}


SHOWN_FILE = "shown.json"  # in OUT/report/ (report.PLOTS_DIR): the shown rows, their ids, reasons and texts


def report(written: list[dict], index: list[dict], rows: list[dict], out: str) -> dict[str, Any]:
    """run.json's ``report`` from the write tasks' summaries, the index file's sizes task (none without --against)
    and the ``shown`` tasks' rows of the clusters ``largest(written)``; those rows into OUT/report/shown.json."""
    import os

    top = largest(written)
    sizes: dict[int, int] = {}
    for part in [w["summary"]["cluster_sizes"] for w in written] + [i.get("index_sizes", []) for i in index]:
        for s, c in part:
            sizes[s] = sizes.get(s, 0) + c
    by = {r[0]: r for x in rows for r in x["rows"]}
    reps = {r for _, r in top}
    members: dict[int, list] = {}
    for r in sorted(by.values(), key=lambda r: (r[1], np.inf if r[5] is None else r[5], r[0])):
        if not r[2] and r[1] in reps:  # a removed member (least similar first, then by row)
            members.setdefault(r[1], []).append(r[0])
    views = [{"rep": r, "size": s, "members": members.get(r, [])[:MEMBERS_SHOWN]} for s, r in top]
    keepers = reps | {m for v in views for m in v["members"]}
    summary = {"cluster_sizes": sorted([s, c] for s, c in sizes.items()),
               "index_removed": sum(w["summary"]["index_removed"] for w in written),
               "near_jaccard": {"counts": np.sum([w["summary"]["near_jaccard"] for w in written]
                                                 or [[0] * JACCARD_BINS], axis=0).tolist(),
                                "missing": sum(w["summary"]["near_missing"] for w in written)},
               "largest": views}
    io.write_json_atomic({str(p): {"id": r[3], "reason": r[4], "jaccard": r[5], "text": r[6]}
                          for p, r in sorted(by.items()) if p in keepers}, os.path.join(out, "report", SHOWN_FILE))
    return summary
