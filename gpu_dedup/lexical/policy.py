"""Removal policies: keep order, verified representatives, connected components (exact groups: exact.py).

All functions take dense row ids (0..n-1) and return arrays; none loops over documents in Python.
"""
from __future__ import annotations

import functools
import logging
from dataclasses import dataclass

import numpy as np

from ..ops import core
from ..runtime.device import array_module, lexsort_radix, simulator
from .lsh import Buckets
from .verify import ShingleSets, jaccard

logger = logging.getLogger(__name__)


@dataclass
class NearResult:
    """Over m candidate documents: rep int64 (m,) (-1 = kept, else index of the kept representative),
    jaccard float64 (m,) (NaN when not measured), and counters for run.json."""

    rep: np.ndarray
    jaccard: np.ndarray
    stats: dict


def connected_components(m: int, u, v, device: str = "cpu"):
    """Labels int64 (m,) = smallest node index of each component under edges (u, v).
    CPU: union-find with path compression. GPU: cugraph's weakly connected components when cugraph is
    installed, else min-label propagation with atomic min plus pointer jumping, repeated until no label
    changes (same labels every way: all are canonicalised to the component minimum)."""
    if device == "cuda":
        xp = array_module(device)
        u, v = xp.asarray(u, dtype=xp.int64), xp.asarray(v, dtype=xp.int64)  # host edges are copied to the device
        if u.shape[0] and not simulator() and _cugraph_usable():
            return cugraph_components(m, u, v, xp)
    return core.min_label_components(device, m, u, v)


@functools.lru_cache(maxsize=1)
def _cugraph_usable() -> bool:
    try:
        import cudf  # noqa: F401 - cugraph takes its edge list as a cudf DataFrame
        import cugraph
    except Exception as exc:
        logger.info("connected components on the GPU: Numba label propagation (cugraph not importable: %s)", exc)
        return False
    logger.info("connected components on the GPU: cugraph %s", getattr(cugraph, "__version__", "?"))
    return True


def cugraph_components(m: int, u, v, xp):
    """Component labels by cugraph (weakly connected components of the undirected edge list), mapped to
    the smallest node index of each component so they equal the other backends' labels. Nodes without
    an edge are absent from cugraph's answer and keep their own index."""
    import cudf
    import cugraph

    g = cugraph.Graph(directed=False)
    g.from_cudf_edgelist(cudf.DataFrame({"src": u, "dst": v}), source="src", destination="dst", renumber=True)
    found = cugraph.weakly_connected_components(g)
    return min_labels(m, xp.asarray(found["vertex"].values).astype(xp.int64),
                      xp.asarray(found["labels"].values).astype(xp.int64), xp)


def min_labels(m: int, vertex, label, xp):
    """int64 (m,): for listed vertices, the smallest vertex carrying the same (arbitrary) label; other
    nodes keep their own index."""
    out = xp.arange(m, dtype=xp.int64)
    if vertex.shape[0] == 0:
        return out
    order = lexsort_radix(xp, [vertex, label], [m, None])  # by label, then vertex: each run starts at its minimum
    lab, vert = label[order], vertex[order]
    start = xp.ones(order.shape[0], dtype=bool)
    start[1:] = lab[1:] != lab[:-1]
    out[vert] = vert[xp.flatnonzero(start)][xp.cumsum(start) - 1]
    return out


def candidate_components(buckets: Buckets, rank, device: str = "cpu"):
    """Group the documents that have buckets by connected component of the candidate graph, keep
    order within each: returns (order int64 (c_docs,), comp_off int64 (c+1,))."""
    xp = array_module(device)
    rank = xp.asarray(rank, dtype=xp.int64)  # a host rank is copied to the device
    m = rank.shape[0]
    u, v = buckets.chain_edges()
    label = connected_components(m, u, v, device)
    docs = xp.flatnonzero(xp.diff(buckets.doc_offsets) > 0)
    order = docs[lexsort_radix(xp, [rank[docs], label[docs]], [None, m])]
    lab = label[order]
    start = xp.ones(order.shape[0], dtype=bool)
    if order.shape[0]:
        start[1:] = lab[1:] != lab[:-1]
    comp_off = xp.concatenate([xp.flatnonzero(start), xp.asarray([order.shape[0]])]).astype(xp.int64)
    return order.astype(xp.int64), comp_off


def representative_policy(buckets: Buckets, sets: ShingleSets, rank, threshold: float, cap: int,
                          device: str = "cpu", pinned=None) -> NearResult:
    """Verified representative policy over m candidates (rank: keep rank of each candidate).

    A candidate is removed only for an earlier-kept candidate sharing a bucket at exact J >= threshold.
    Components of the candidate graph are independent, so they run in parallel (CPU threads, or one
    GPU thread each), each in keep order with the same device function. ``pinned`` (bool (m,)) marks
    documents that are always kept (an existing index)."""
    xp = array_module(device)
    rank = xp.asarray(rank, dtype=xp.int64)  # a host rank is copied to the device
    m = rank.shape[0]
    order, comp_off = candidate_components(buckets, rank, device)
    pin = xp.zeros(m, xp.uint8) if pinned is None else xp.asarray(pinned).astype(xp.uint8)
    rep, jac, capped, comparisons = core.representative_components(device, order, comp_off, buckets, sets, pin,
                                                                   threshold, cap)
    n_comp = int(comparisons.shape[0])
    n_capped = int(capped.sum())
    if n_capped:
        logger.warning("%d buckets held more than %d kept representatives; comparisons there were capped "
                       "(raise max_representatives_per_bucket to compare against all)", n_capped, cap)
    sizes = xp.diff(comp_off)
    return NearResult(rep, jac, {"verified_pairs": int(comparisons.sum()), "capped_buckets": n_capped,
                                 "candidate_components": n_comp,
                                 "largest_candidate_component": int(sizes.max()) if n_comp else 0,
                                 "removed": int((rep >= 0).sum())})


def components_policy(buckets: Buckets, rank, threshold: float, sets: ShingleSets | None,
                      device: str = "cpu") -> NearResult:
    """Connected components over chain edges (verified edges only when ``sets`` is given); the
    survivor of each component is its first member in keep order."""
    xp = array_module(device)
    rank = xp.asarray(rank, dtype=xp.int64)  # a host rank is copied to the device
    m = rank.shape[0]
    u, v = buckets.chain_edges()
    stats = {"edges": int(u.shape[0])}
    if sets is not None and u.shape[0]:
        j = jaccard(sets, u, v, device)
        ok = j >= threshold
        stats["edges_verified"] = int(ok.sum())
        u, v = u[ok], v[ok]
    label = connected_components(m, u, v, device)
    # survivor = member with the smallest keep rank in each component
    order = lexsort_radix(xp, [rank, label], [None, m])
    lo = label[order]
    first = xp.ones(m, dtype=bool)
    if m:
        first[1:] = lo[1:] != lo[:-1]
    survivor_of_label = xp.full(m, -1, xp.int64)
    survivor_of_label[lo[first]] = order[first]
    survivor = survivor_of_label[label]
    rows = xp.arange(m, dtype=xp.int64)
    rep = xp.where(survivor == rows, -1, survivor)
    jac = xp.full(m, xp.nan)
    removed = xp.flatnonzero(rep >= 0)
    if sets is not None and removed.shape[0]:
        jac[removed] = jaccard(sets, removed, rep[removed], device)
    sizes = xp.bincount(label, minlength=m)
    stats.update({"components": int((sizes > 1).sum()), "largest_component": int(sizes.max()) if m else 0,
                  "removed": int(removed.shape[0])})
    return NearResult(rep, jac, stats)
