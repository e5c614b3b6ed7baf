"""The decisions table: its schema, the reasons a row can carry, and the counts every summary is built from.

One row per input document, whatever the device, engine, batch size or worker count (README, "Decisions
schema"). The pipeline writes it, semantic dedup and the incremental index extend it, the report reads it.
``keep_rank`` is the keep order (``--keep``) every program decides by: which copy of a duplicate stays.
"""
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .errors import ConfigError

DECISIONS_SCHEMA = pa.schema([
    ("id", pa.string()), ("keep", pa.bool_()), ("reason", pa.string()), ("cluster_id", pa.int64()),
    ("representative_id", pa.string()), ("matched_id", pa.string()), ("jaccard", pa.float64()),
    ("cluster_size", pa.int64()), ("source", pa.string()),
])
# Reasons in the order summaries list them; a row is kept exactly when its reason is in KEPT_REASONS.
REASONS = ("unique", "representative", "exact_duplicate", "short_exact_duplicate", "near_duplicate",
           "semantic_duplicate")
# Reasons only some runs give, listed by summaries when they occur: a prefiltered run's rejects, and the
# duplicates a cluster-size policy keeps (ClusterConfig.remove_clusters_larger_than / keep_copies); these keep
# representative_id, matched_id and jaccard as a removed duplicate would, so the choice is reversible.
FILTERED = "filtered"
CLUSTER_POLICY_REASONS = ("kept_small_cluster", "kept_copy")
REASON_CODES = REASONS + (FILTERED,) + CLUSTER_POLICY_REASONS  # the vocabulary of the int8 reason codes
KEPT_REASONS = ("unique", "representative") + CLUSTER_POLICY_REASONS
LEXICAL_REMOVALS = ("exact_duplicate", "short_exact_duplicate", "near_duplicate")


def reason_counts(decisions: pa.Table) -> dict[str, int]:
    """Rows per reason: every name of REASONS (0 when absent) in that order, then any other reason found
    (a later stage's), by name."""
    vc = pc.value_counts(decisions["reason"].combine_chunks()).to_pylist() if decisions.num_rows else []
    found = {d["values"]: int(d["counts"]) for d in vc}
    ordered = {r: found.pop(r, 0) for r in REASONS}
    ordered.update(sorted(found.items()))
    return ordered


def summary_counts(decisions: pa.Table, n: int) -> dict[str, Any]:
    """run.json's ``counts``: input, kept, removed and rows per reason of REASONS."""
    found = reason_counts(decisions) if n else {}
    by = {r: found.get(r, 0) for r in REASONS}
    by.update({r: k for r, k in found.items() if r not in by and k})  # a prefiltered run's "filtered"
    kept = sum(by.get(r, 0) for r in KEPT_REASONS)
    return {"input": n, "kept": kept, "removed": n - kept, "by_reason": by}


def keep_rank(keep: str, *, n: int, text_bytes: np.ndarray | None = None, ids: pa.Array | None = None,
              values: np.ndarray | None = None) -> np.ndarray:
    """Position of each row in keep order (int64 (n,), a permutation of 0..n-1; 0 is kept first).

    first: input order. longest: most raw UTF-8 bytes first. min-id: smallest id (binary string order)
    first. max:<column> / min:<column>: largest / smallest value first, NaN/null last. Ties always go to input order."""
    rows = np.arange(n, dtype=np.int64)
    if keep == "first":
        return rows
    if keep == "longest":
        order = np.lexsort((rows, -np.asarray(text_bytes, np.int64)))
    elif keep == "min-id":
        order = np.asarray(pc.sort_indices(pa.table({"id": ids, "row": rows}),
                                           sort_keys=[("id", "ascending"), ("row", "ascending")]), np.int64)
    elif keep.startswith(("max:", "min:")):
        v = np.asarray(values, np.float64)
        nan = np.isnan(v)
        sign = -1.0 if keep.startswith("max:") else 1.0
        order = np.lexsort((rows, sign * np.where(nan, 0.0, v), nan))
    else:
        raise ConfigError(f"unknown keep policy {keep!r}")
    rank = np.empty(n, np.int64)
    rank[order] = rows
    return rank
