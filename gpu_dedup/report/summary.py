"""What report.html shows of a run's decisions, the same whatever wrote them (``RunSummary``): computed here from
decisions.parquet (``summary_of``), or read from the aggregates a Ray run's tasks recorded (run.json's ``report``,
report/shown.json: gpu_dedup/distributed/summary.py), so that a Ray run's report never reads the whole table."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..decisions import REASONS, reason_counts
from .metrics import JACCARD_BINS, ClusterView, JaccardHistogram, jaccard_histogram, largest_clusters

SHOWN_FILE = "shown.json"  # a Ray run's shown rows, in OUT/report/ (the distributed engine's summary.SHOWN_FILE)


@dataclass
class RunSummary:
    """n: documents; reasons: rows per reason (``decisions.reason_counts``' order); semantic: the table has the
    semantic columns; index_removed: rows removed for an --against index's document; cluster_sizes /
    cluster_counts int64: the distinct cluster sizes and the clusters of each (size 1: no duplicate); near: the
    removed near-duplicates' Jaccard histogram; views: the largest clusters (``metrics.largest_clusters``); rows:
    row -> {id, reason, jaccard} of the rows they show; texts: row -> text of those rows when the run recorded
    them (None: read from the inputs); table: the decisions, when the summary was made from them."""

    n: int
    reasons: dict[str, int]
    semantic: bool
    index_removed: int
    cluster_sizes: np.ndarray
    cluster_counts: np.ndarray
    near: JaccardHistogram
    views: list[ClusterView]
    rows: dict[int, dict[str, Any]]
    texts: dict[int, str] | None = None
    table: pa.Table | None = None

    @property
    def ids(self) -> pa.Array | None:
        """Every document's id (the decisions' id column), or None without the table."""
        return self.table["id"].combine_chunks() if self.table is not None else None


def summary_of(decisions: pa.Table, max_clusters: int) -> RunSummary:
    """The ``RunSummary`` of a decisions table (its ``max_clusters`` largest clusters)."""
    n = decisions.num_rows
    _, first = np.unique(decisions["cluster_id"].to_numpy(), return_index=True)  # one row per cluster
    sizes, counts = np.unique(decisions["cluster_size"].to_numpy()[first], return_counts=True)
    near = pc.equal(decisions["reason"], "near_duplicate")
    views = largest_clusters(decisions, max_clusters)
    shown = sorted({r for v in views for r in (v.rep, *v.members)})
    sub = decisions.select(["id", "reason", "jaccard"]).take(pa.array(shown, pa.int64())).to_pylist()
    return RunSummary(n, reason_counts(decisions), "cosine" in decisions.column_names,
                      int(pc.sum(pc.less(decisions["cluster_id"], 0)).as_py() or 0) if n else 0,
                      sizes.astype(np.int64), counts.astype(np.int64),
                      jaccard_histogram(decisions["jaccard"].filter(near).to_numpy(zero_copy_only=False)
                                        .astype(np.float64)),
                      views, dict(zip(shown, sub)), table=decisions)


def recorded(out: str, stats: dict[str, Any], max_clusters: int) -> RunSummary | None:
    """The ``RunSummary`` a Ray run recorded (run.json's ``report``, report/shown.json), its ``max_clusters``
    largest clusters; None when the run recorded none."""
    agg = stats.get("report")
    path = os.path.join(out, "report", SHOWN_FILE)
    if not agg or not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as fh:
        shown = {int(k): v for k, v in json.load(fh).items()}
    by = dict((stats.get("counts") or {}).get("by_reason") or {})
    reasons = {r: by.pop(r, 0) for r in REASONS}
    reasons.update(sorted((k, v) for k, v in by.items() if v))
    sizes = np.array([s for s, _ in agg["cluster_sizes"]], np.int64)
    counts = np.array([c for _, c in agg["cluster_sizes"]], np.int64)
    near = JaccardHistogram(np.arange(JACCARD_BINS + 1, dtype=np.float64) / JACCARD_BINS,
                            np.asarray(agg["near_jaccard"]["counts"], np.int64), int(agg["near_jaccard"]["missing"]))
    views = [ClusterView(v["rep"], int(v["size"]), tuple(v["members"])) for v in agg["largest"][:max_clusters]]
    texts = {r: v["text"] for r, v in shown.items() if v.get("text") is not None}
    return RunSummary(int(stats["counts"]["input"]), reasons, "semantic" in (stats.get("stages") or {}),
                      int(agg["index_removed"]), sizes, counts, near, views,
                      {r: {k: v[k] for k in ("id", "reason", "jaccard")} for r, v in shown.items()}, texts)
