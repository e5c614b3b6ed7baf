"""Removal policies: keep order, exact groups, verified representatives, connected components.

All functions take dense row ids (0..n-1) and return arrays; none loops over documents in Python.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .lsh import Buckets
from .verify import ShingleSets, jaccard

logger = logging.getLogger(__name__)


def keep_rank(keep: str, *, n: int, text_bytes: np.ndarray | None = None, ids: pa.Array | None = None,
              values: np.ndarray | None = None) -> np.ndarray:
    """Position of each row in keep order (int64 (n,), a permutation of 0..n-1; 0 is kept first).

    first: input order. longest: most raw UTF-8 bytes first. min-id: smallest id (binary string order)
    first. max:<column>: largest value first, NaN/null last. Ties always go to input order."""
    rows = np.arange(n, dtype=np.int64)
    if keep == "first":
        return rows
    if keep == "longest":
        order = np.lexsort((rows, -np.asarray(text_bytes, np.int64)))
    elif keep == "min-id":
        order = np.asarray(pc.sort_indices(pa.table({"id": ids, "row": rows}),
                                           sort_keys=[("id", "ascending"), ("row", "ascending")]), np.int64)
    elif keep.startswith("max:"):
        v = np.asarray(values, np.float64)
        nan = np.isnan(v)
        order = np.lexsort((rows, -np.where(nan, 0.0, v), nan))
    else:
        raise ValueError(f"unknown keep policy {keep!r}")
    rank = np.empty(n, np.int64)
    rank[order] = rows
    return rank


def exact_groups(h: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """h: (n, 2) uint64 exact hashes. Returns leader int64 (n,): the first row in keep order with the
    same hash (a row is its own leader when it is the first)."""
    n = h.shape[0]
    leader = np.arange(n, dtype=np.int64)
    if n == 0:
        return leader
    order = np.lexsort((rank, h[:, 1], h[:, 0]))
    hs = h[order]
    start = np.ones(n, bool)
    start[1:] = (hs[1:, 0] != hs[:-1, 0]) | (hs[1:, 1] != hs[:-1, 1])
    group_first = order[np.flatnonzero(start)]
    group_of = np.cumsum(start) - 1
    leader[order] = group_first[group_of]
    return leader


@dataclass
class NearResult:
    """Over m candidate documents: rep int64 (m,) (-1 = kept, else index of the kept representative),
    jaccard float64 (m,) (NaN when not measured), and counters for run.json."""

    rep: np.ndarray
    jaccard: np.ndarray
    stats: dict


def candidate_components(buckets: Buckets, rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Group the documents that have buckets by connected component of the candidate graph, keep
    order within each: returns (order int64 (c_docs,), comp_off int64 (c+1,))."""
    from .kernels import cpu

    m = rank.shape[0]
    u, v = buckets.chain_edges()
    label = cpu.union_find(m, u, v)
    docs = np.flatnonzero(np.diff(buckets.doc_offsets) > 0)
    order = docs[np.lexsort((rank[docs], label[docs]))]
    lab = label[order]
    start = np.ones(order.shape[0], bool)
    start[1:] = lab[1:] != lab[:-1]
    comp_off = np.append(np.flatnonzero(start), order.shape[0]).astype(np.int64)
    return order.astype(np.int64), comp_off


def representative_policy(buckets: Buckets, sets: ShingleSets, rank: np.ndarray, threshold: float,
                          cap: int) -> NearResult:
    """Verified representative policy over m candidates (rank: keep rank of each candidate).

    A candidate is removed only for an earlier-kept candidate sharing a bucket at exact J >= threshold.
    Components of the candidate graph are independent, so they run in parallel, each in keep order."""
    from .kernels import cpu

    m = rank.shape[0]
    order, comp_off = candidate_components(buckets, rank)
    rep = np.full(m, -1, np.int64)
    jac = np.full(m, np.nan)
    capped = np.zeros(buckets.n_buckets, np.uint8)
    comparisons = np.zeros(comp_off.shape[0] - 1, np.int64)
    cpu.representative_components(order, comp_off, buckets.doc_offsets, buckets.entry_bucket, buckets.entry_doc,
                                  buckets.n_buckets, sets.offsets, sets.sizes, sets.hashes, float(threshold),
                                  int(cap), rep, jac, capped, comparisons)
    n_capped = int(capped.sum())
    if n_capped:
        logger.warning("%d buckets held more than %d kept representatives; comparisons there were capped "
                       "(raise max_representatives_per_bucket to compare against all)", n_capped, cap)
    sizes = np.diff(comp_off)
    return NearResult(rep, jac, {"verified_pairs": int(comparisons.sum()), "capped_buckets": n_capped,
                                 "candidate_components": int(sizes.shape[0]),
                                 "largest_candidate_component": int(sizes.max()) if sizes.shape[0] else 0,
                                 "removed": int((rep >= 0).sum())})


def components_policy(buckets: Buckets, rank: np.ndarray, threshold: float,
                      sets: ShingleSets | None) -> NearResult:
    """Connected components over chain edges (verified edges only when ``sets`` is given); the
    survivor of each component is its first member in keep order."""
    from .kernels import cpu

    m = rank.shape[0]
    u, v = buckets.chain_edges()
    stats = {"edges": int(u.shape[0])}
    if sets is not None and u.shape[0]:
        j = jaccard(sets, u, v)
        ok = j >= threshold
        stats["edges_verified"] = int(ok.sum())
        u, v = u[ok], v[ok]
    label = cpu.union_find(m, u, v)
    # survivor = member with the smallest keep rank in each component
    order = np.lexsort((rank, label))
    first = np.ones(m, bool)
    first[1:] = label[order][1:] != label[order][:-1]
    survivor_of_label = np.full(m, -1, np.int64)
    survivor_of_label[label[order][first]] = order[first]
    survivor = survivor_of_label[label]
    rows = np.arange(m, dtype=np.int64)
    rep = np.where(survivor == rows, -1, survivor)
    jac = np.full(m, np.nan)
    removed = np.flatnonzero(rep >= 0)
    if sets is not None and removed.shape[0]:
        jac[removed] = jaccard(sets, removed, rep[removed])
    sizes = np.bincount(label, minlength=m)
    stats.update({"components": int((sizes > 1).sum()), "largest_component": int(sizes.max()) if m else 0,
                  "removed": int(removed.shape[0])})
    return NearResult(rep, jac, stats)
