"""Decisions: keep order inside each cluster (``cluster_order``), the eps sweep (``removal_sweep``), the
decisions table (``decisions_table``, ``semantic_decisions``) and its merge into the lexical decisions
(``merge_decisions``). The decision and chain rules are described in the package docstring
(``gpu_dedup.semantic``).
"""
from __future__ import annotations

import logging
import time
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ConfigError, DataError
from .clustering import Clusters, kmeans
from .config import SEMANTIC_SCHEMA, SemanticConfig, semantic_keep_column, threshold32
from .model import resolve_torch_device, torch_device
from .pairwise import within_cluster_max_sim

logger = logging.getLogger(__name__)


def cluster_order(assign: np.ndarray, centroid_cos: np.ndarray, keep: str, *, seed: int = 0,
                  values: np.ndarray | None = None, n_clusters: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Rows grouped by cluster, each cluster in keep order; a cluster's first row is kept. Ties: input order.

    Args:
        assign: int64 (n,) each row's cluster.
        centroid_cos: float32 (n,) each row's cosine to its centroid (for keep "hard" / "easy").
        keep: "hard", "easy", "random", or "max:<column>" / "min:<column>".
        seed: the permutation's seed for keep="random".
        values: float64 (n,) the column's values for "max:" / "min:" (NaN last).
        n_clusters: k (default: assign.max() + 1).

    Returns:
        (order int64 (n,), offsets int64 (k+1,)): cluster c is ``order[offsets[c]:offsets[c+1]]``.

    Raises:
        ConfigError: a "max:" / "min:" rule without ``values``.
    """
    assign = np.asarray(assign, np.int64)
    n = assign.shape[0]
    rows = np.arange(n, dtype=np.int64)
    k1, k2 = order_keys(keep, centroid_cos, rows, n, seed=seed, values=values)
    order = np.lexsort((rows, k2, k1, assign))
    k = int(n_clusters if n_clusters is not None else (assign.max() + 1 if n else 0))
    offsets = np.zeros(k + 1, np.int64)
    np.cumsum(np.bincount(assign, minlength=k), out=offsets[1:])
    return order, offsets


def order_keys(keep: str, centroid_cos: np.ndarray, rows: np.ndarray, n: int, *, seed: int = 0,
               values: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The keep order's sort keys (float64 (m,) each: by the first, then the second, then the row) of ``rows``
    (int64 (m,), their positions among the ``n`` rows decided), from their centroid cosines and (max:/min:)
    their column's values: within a cluster, the order ``cluster_order`` gives (the Ray engine's tasks compute
    them per file). hard: cosine; easy: -cosine; random: the seeded permutation of the n rows; max:/min: NaN
    last, then the value (largest / smallest first): ``decisions.keep_rank``'s order.

    Raises:
        ConfigError: a "max:" / "min:" rule without ``values``.
    """
    zero = np.zeros(rows.shape[0], np.float64)
    if keep == "hard":
        return np.asarray(centroid_cos, np.float64), zero
    if keep == "easy":
        return -np.asarray(centroid_cos, np.float64), zero
    if keep == "random":
        return np.random.default_rng(seed).permutation(n)[rows].astype(np.float64), zero
    col = semantic_keep_column(keep)
    if values is None:
        raise ConfigError(f"keep={keep!r} needs the values of column {col!r}")
    v = np.asarray(values, np.float64)
    nan = np.isnan(v)
    sign = -1.0 if keep.startswith("max:") else 1.0
    return nan.astype(np.float64), sign * np.where(nan, 0.0, v)


def removal_sweep(max_sim: np.ndarray, has_earlier: np.ndarray, eps_values: Sequence[float]) -> list[dict]:
    """Semantic removals for several eps from one max-similarity column (chain="all": no recomputation).

    Args:
        max_sim: float32 (n,) the largest cosine to an earlier member.
        has_earlier: bool (n,) the rows that have an earlier member.
        eps_values: the eps to count.

    Returns:
        [{eps, removed, fraction}], one per eps.
    """
    n = max_sim.shape[0]
    out = []
    for eps in eps_values:
        removed = int((has_earlier & (max_sim >= threshold32(eps))).sum())
        out.append({"eps": float(eps), "removed": removed, "fraction": removed / n if n else 0.0})
    return out


# ----------------------------------------------------------------------------------------------------
# Decisions
# ----------------------------------------------------------------------------------------------------

def decide_embeddings(ids: pa.Array, embeddings: np.ndarray, cfg: SemanticConfig, device: str,
            keep_values: np.ndarray | None) -> tuple[pa.Table, dict[str, Any], Clusters]:
    n = len(ids)
    if embeddings.shape[0] != n:
        raise ConfigError(f"embeddings have {embeddings.shape[0]} rows but there are {n} ids")
    timings: dict[str, float] = {}
    t = time.perf_counter()
    clusters = kmeans(embeddings, cfg, device)
    timings["kmeans"] = time.perf_counter() - t
    k = clusters.centroids.shape[0]
    order, offsets = cluster_order(clusters.assign, clusters.centroid_cos, cfg.keep, seed=cfg.seed,
                                   values=keep_values, n_clusters=k)
    max_sim, nearest, removed, sweep = decide_clusters(embeddings, order, offsets, cfg, device, timings)
    table = decisions_table(ids, removed, max_sim, nearest, clusters.assign, clusters.centroid_cos)
    stats = decided_stats(cfg, device, n, int(removed.sum()), sweep, clusters.sizes, clusters.backend,
                          embeddings.shape[1], timings)
    return table, stats, clusters


def decide_clusters(x: np.ndarray, order: np.ndarray, offsets: np.ndarray, cfg: SemanticConfig, device: str,
                    timings: dict[str, float]) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict]]:
    """The pairwise step and the decision rule over clusters in keep order (``cluster_order``'s order, offsets
    into the rows of ``x``): (max_sim float32 (n,), nearest int64 (n,) a row of x or -1, removed bool (n,), the
    eps sweep's counts). Clusters are independent: the Ray engine's tasks run it over a range of them.
    ``timings`` gets "pairwise" and "eps_sweep"."""
    t = time.perf_counter()
    kept_only = cfg.chain == "kept"

    def pairwise(eps: float):
        return within_cluster_max_sim(x, order, offsets, block=cfg.block, kept_only=kept_only,
                                      threshold=1.0 - eps, backend=pairwise_backend(device),
                                      torch_device=torch_device(device))

    max_sim, nearest = pairwise(cfg.eps)
    has_earlier = nearest >= 0
    removed = has_earlier & (max_sim >= threshold32(cfg.eps))
    timings["pairwise"] = timings.get("pairwise", 0.0) + time.perf_counter() - t
    t = time.perf_counter()
    if kept_only:  # the similarity column depends on eps: one pass per value
        sweep = []
        for e in cfg.eps_sweep:
            ms, nr = pairwise(e)
            sweep += removal_sweep(ms, nr >= 0, [e])
    else:
        sweep = removal_sweep(max_sim, has_earlier, cfg.eps_sweep)
    timings["eps_sweep"] = timings.get("eps_sweep", 0.0) + time.perf_counter() - t
    return max_sim, nearest, removed, sweep


def pairwise_backend(device: str) -> str:
    """The pairwise step's array library: "torch" on a GPU, "numpy" on the CPU."""
    return "torch" if device == "cuda" else "numpy"


def decided_stats(cfg: SemanticConfig, device: str, n: int, removed: int, sweep: list[dict], sizes: np.ndarray,
                  backend: str, d: int, timings: dict[str, float]) -> dict[str, Any]:
    """What the decisions add to semantic.json (both engines): counts, the rule, the eps sweep, the clusters
    (from their sizes), the pairwise backend and the stage timings."""
    k = sizes.shape[0]
    pw = pairwise_backend(device)
    return {
        "counts": {"input": n, "kept": n - removed, "removed": removed},
        "eps": cfg.eps, "threshold": float(threshold32(cfg.eps)), "chain": cfg.chain, "keep": cfg.keep,
        "eps_sweep": sweep,
        "clusters": {"k": int(k), "backend": backend, "largest": int(sizes.max()) if n else 0,
                     "singletons": int((sizes == 1).sum()), "empty": int((sizes == 0).sum()),
                     "mean_size": float(n / k) if k else 0.0,
                     "pairwise_flops": float((sizes.astype(np.float64) ** 2).sum() * d)},
        "pairwise_backend": f"{pw}-{torch_device(device)}" if pw == "torch" else "numpy",
        "timings_s": timings,
    }


def decisions_table(ids: pa.Array, removed: np.ndarray, max_sim: np.ndarray, nearest: np.ndarray,
                    assign: np.ndarray, centroid_cos: np.ndarray) -> pa.Table:
    """The semantic decisions: one row per document (``SEMANTIC_SCHEMA``), in input order.

    Args:
        ids: pa.string (n,) the document ids.
        removed: bool (n,) the semantic duplicates.
        max_sim: float32 (n,) the largest cosine to an earlier member of the cluster.
        nearest: int64 (n,) that member's row (-1 for a cluster's first).
        assign: int64 (n,) each row's cluster.
        centroid_cos: float32 (n,) each row's cosine to its centroid.

    Returns:
        The table. matched_id: the earlier member a removed document matched (null when kept). cosine /
        nearest_id: the largest cosine to an earlier member and that member, for every document that has one
        (null for a cluster's first); as in ``max_sim_to_earlier``, a maximum <= 0 shows as cosine 0 with the
        cluster's first member.
    """
    has = nearest >= 0
    nearest_id = ids.take(pa.array(np.maximum(nearest, 0), pa.int64(), mask=~has))
    return decisions_of(ids, removed, max_sim, nearest_id, assign, centroid_cos)


def decisions_of(ids: pa.Array, removed: np.ndarray, max_sim: np.ndarray, nearest_id: pa.Array,
                 assign: np.ndarray, centroid_cos: np.ndarray) -> pa.Table:
    """``decisions_table``'s rows from the nearest earlier member's id (null for a cluster's first) instead of its
    row: the Ray engine's write tasks hold one file's rows, their nearest members anywhere."""
    n = len(ids)
    has = np.asarray(nearest_id.is_valid().to_numpy(zero_copy_only=False), bool)
    reason = np.where(removed, "semantic_duplicate", "unique")
    return pa.table({
        "id": ids,
        "keep": pa.array(~removed, pa.bool_()),
        "reason": pa.array(reason.tolist() if n else [], pa.string()),
        "matched_id": pc.if_else(pa.array(removed, pa.bool_()), nearest_id, pa.nulls(n, pa.string())),
        "cosine": pa.array(max_sim.astype(np.float64), pa.float64(), mask=~has),
        "nearest_id": nearest_id,
        "semantic_cluster": pa.array(assign, pa.int64()),
        "centroid_cosine": pa.array(centroid_cos, pa.float32()),
    }, schema=SEMANTIC_SCHEMA)


def semantic_decisions(ids: pa.Array, embeddings: np.ndarray, cfg: SemanticConfig | None = None,
                       device: str = "cpu", keep_values: np.ndarray | None = None) -> pa.Table:
    """Semantic decisions on given embeddings: k-means, keep order, pairwise similarity.

    Pass a subset (e.g. the lexical survivors) to dedup only those.

    Args:
        ids: pa.string (n,) the document ids.
        embeddings: float32 (n, d) unit rows.
        cfg: the ``SemanticConfig`` (None: its defaults).
        device: "cpu" or "cuda".
        keep_values: float64 (n,) the column's values for keep="max:<column>" / "min:<column>".

    Returns:
        A ``SEMANTIC_SCHEMA`` table: id, keep, reason ('semantic_duplicate' | 'unique'), matched_id, cosine,
        nearest_id, semantic_cluster, centroid_cosine.
    """
    cfg = cfg or SemanticConfig()
    return decide_embeddings(ids, np.ascontiguousarray(embeddings, np.float32), cfg, resolve_torch_device(device),
                   keep_values)[0]


def merge_decisions(lexical: pa.Table, semantic: pa.Table, order: str = "after") -> pa.Table:
    """Fold the semantic decisions into the lexical decisions table (``decisions.fold_removals``, the composition
    rule every composed run follows).

    order="after" (the default): the semantic stage saw only the documents the lexical stages kept, in input
    order. Its removals become keep=False, reason 'semantic_duplicate', matched_id = the semantic match; the
    representative of a removed document is the kept end of its chain of matches, and the lexical duplicates of
    a document the semantic stage removed move to that representative: every removed row names a kept
    document, no group loses every copy. order="beside": the semantic stage saw every document (for
    ``comparison.compare``); its decisions are recorded in the added columns only, the lexical decisions stand.

    Args:
        lexical: the lexical decisions (all documents).
        semantic: the semantic decisions: of the lexically kept documents ("after") or of all ("beside"), in
            input order.
        order: "after" or "beside".

    Returns:
        The lexical table with the semantic removals folded in, plus columns cosine, semantic_nearest_id and
        semantic_cluster (null for a document the semantic stage did not see).

    Raises:
        DataError: the semantic table does not list the documents its order says it saw.
    """

    from ..decisions import SEMANTIC_COLUMNS, fold_removals, row_positions

    if order not in ("after", "beside"):
        raise ConfigError(f"order must be 'after' or 'beside', got {order!r}")
    keep = np.asarray(lexical["keep"].to_numpy(zero_copy_only=False), bool)
    seen = np.flatnonzero(keep) if order == "after" else np.arange(lexical.num_rows, dtype=np.int64)
    ids = lexical["id"].combine_chunks()
    if semantic.num_rows != seen.shape[0] or not ids.take(pa.array(seen)).equals(semantic["id"].combine_chunks()):
        what = "the documents the lexical stages kept" if order == "after" else "every document"
        raise DataError(f"the semantic decisions ({semantic.num_rows} rows) must list {what} ({seen.shape[0]}), in "
                        "input order: run both stages on the same input")
    sem_removed = ~np.asarray(semantic["keep"].to_numpy(zero_copy_only=False), bool)
    out = lexical
    if order == "after":
        matched = row_positions(semantic["matched_id"], semantic["id"].combine_chunks())
        out = fold_removals(lexical, seen, sem_removed, matched, "semantic_duplicate")
        if sem_removed.any():
            logger.info("semantic: %d of the %d documents the lexical stages kept are semantic duplicates, removed "
                        "for a kept representative", int(sem_removed.sum()), seen.shape[0])
    else:
        logger.info("semantic (beside): %d of %d documents are semantic duplicates; recorded in the semantic "
                    "columns, the lexical decisions stand", int(sem_removed.sum()), seen.shape[0])

    for field, values in zip(SEMANTIC_COLUMNS, semantic_columns(semantic, seen, lexical.num_rows)):
        out = out.append_column(field, values)
    return out


def semantic_columns(semantic: pa.Table, seen: np.ndarray, n: int) -> list[pa.Array]:
    """The decisions' ``SEMANTIC_COLUMNS`` (cosine, semantic_nearest_id, semantic_cluster) of ``n`` rows from the
    semantic decisions of the rows ``seen`` (int64, ascending; one semantic row each, in order); null for a row the
    semantic stage did not see. ``merge_decisions`` and the Ray engine's fold (distributed/semfold.py) add them."""
    from ..decisions import SEMANTIC_COLUMNS

    at = np.full(n, -1, np.int64)
    at[seen] = np.arange(seen.shape[0])
    idx = pa.array(np.maximum(at, 0), mask=at < 0)
    return [semantic[src].combine_chunks().take(idx).cast(f.type) if seen.shape[0] else pa.nulls(n, f.type)
            for src, f in zip(("cosine", "nearest_id", "semantic_cluster"), SEMANTIC_COLUMNS)]
