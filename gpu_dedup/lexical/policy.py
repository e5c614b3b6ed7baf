"""Removal policies: keep order, exact groups, verified representatives, connected components.

All functions take dense row ids (0..n-1) and return arrays; none loops over documents in Python.
"""
from __future__ import annotations

import functools
import logging
from dataclasses import dataclass

import numpy as np

from ..constants import HOST_COMPONENT
from ..device import array_module, launch, lexsort_radix, repeat_index, simulator, to_device, to_host
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
    xp = array_module(device)
    if device != "cuda":
        from ..kernels import cpu

        return cpu.union_find(m, u, v)
    u, v = xp.asarray(u, dtype=xp.int64), xp.asarray(v, dtype=xp.int64)  # host edges are copied to the device
    if u.shape[0] and not simulator() and _cugraph_usable():
        return cugraph_components(m, u, v, xp)
    label = xp.arange(m, dtype=xp.int64)
    if u.shape[0] == 0:
        return label
    changed = xp.zeros(1, xp.int32)
    while True:
        changed[0] = 0
        launch(device, "propagate_min_labels", u.shape[0], u, v, label, changed)
        launch(device, "pointer_jump", m, label)
        if int(changed[0]) == 0:
            break
    # labels point at nodes of the same component; finish the chains
    while True:
        nxt = label[label]
        if bool((nxt == label).all()):
            return label
        label = nxt


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
    n_comp = int(comp_off.shape[0] - 1)
    rep = xp.full(m, -1, xp.int64)
    jac = xp.full(m, xp.nan)
    capped = xp.zeros(buckets.n_buckets, xp.uint8)
    comparisons = xp.zeros(n_comp, xp.int64)
    pin = xp.zeros(m, xp.uint8) if pinned is None else xp.asarray(pinned).astype(xp.uint8)
    args = (order, comp_off, buckets.doc_offsets, buckets.entry_bucket, buckets.entry_doc)
    if device == "cuda":
        giant = xp.diff(comp_off) > HOST_COMPONENT
        n_giant = int(giant.sum())
        if n_giant:
            # the GPU kernel runs the small components; the few giant ones run on the host below
            args = (*_select_components(xp, order, comp_off, ~giant), *args[2:])
        n_small = int(args[1].shape[0] - 1)
        if n_small:
            head = xp.full(buckets.n_buckets, -1, xp.int64)
            tail = xp.full(buckets.n_buckets, -1, xp.int64)
            nxt = xp.full(buckets.entry_bucket.shape[0], -1, xp.int64)
            stamp = xp.full(m, -1, xp.int64)
            # per-component counts (only their total reaches run.json): small components first, then giant
            launch(device, "representative_components", n_small, *args, sets.offsets, sets.sizes, sets.hashes, pin,
                   float(threshold), int(cap), head, tail, nxt, stamp, capped, rep, jac, comparisons[:n_small])
        if n_giant:
            comparisons[n_small:] = _giant_components_on_host(xp, *_select_components(xp, order, comp_off, giant),
                                                              buckets, sets, pin, threshold, cap, rep, jac, capped)
    else:
        launch(device, "representative_components", n_comp, *args, buckets.n_buckets, sets.offsets, sets.sizes,
               sets.hashes, pin, float(threshold), int(cap), rep, jac, capped, comparisons)
    n_capped = int(capped.sum())
    if n_capped:
        logger.warning("%d buckets held more than %d kept representatives; comparisons there were capped "
                       "(raise max_representatives_per_bucket to compare against all)", n_capped, cap)
    sizes = xp.diff(comp_off)
    return NearResult(rep, jac, {"verified_pairs": int(comparisons.sum()), "capped_buckets": n_capped,
                                 "candidate_components": n_comp,
                                 "largest_candidate_component": int(sizes.max()) if n_comp else 0,
                                 "removed": int((rep >= 0).sum())})


# A candidate component of more members than this runs on the host CPU kernel during a GPU run: the policy
# walks a component serially, and one CPU core does that merge-walk far faster than one GPU thread, so a
# giant templated component must not hold the whole launch (the GPU kernel takes every other component).


def _select_components(xp, order, comp_off, keep):
    """(order, comp_off) of the components where ``keep`` (bool (c,)) is set, in their original order."""
    sizes = xp.diff(comp_off)
    member = keep[repeat_index(xp, sizes)]  # each position's component, then whether it is kept
    sub_off = xp.zeros(int(keep.sum()) + 1, xp.int64)
    xp.cumsum(sizes[keep], out=sub_off[1:])
    return order[member], sub_off


def _giant_components_on_host(xp, order, comp_off, buckets: Buckets, sets: ShingleSets, pin, threshold: float,
                              cap: int, rep, jac, capped):
    """The representative policy over giant components with the CPU kernel (the same device function as the
    GPU kernel, so the same decisions), its results written back into the device arrays. Copies the bucket
    entries and the candidate shingle sets to the host once. Returns the comparisons per component (device)."""
    order_h = to_host(order)
    m = int(rep.shape[0])
    rep_h = np.full(m, -1, np.int64)
    jac_h = np.full(m, np.nan)
    capped_h = np.zeros(buckets.n_buckets, np.uint8)
    comparisons_h = np.zeros(comp_off.shape[0] - 1, np.int64)
    launch("cpu", "representative_components", comparisons_h.shape[0], order_h, to_host(comp_off),
           to_host(buckets.doc_offsets), to_host(buckets.entry_bucket), to_host(buckets.entry_doc), buckets.n_buckets,
           to_host(sets.offsets), to_host(sets.sizes), to_host(sets.hashes), to_host(pin), float(threshold), int(cap),
           rep_h, jac_h, capped_h, comparisons_h)
    members = to_device(order_h, "cuda")
    rep[members] = to_device(rep_h[order_h], "cuda")
    jac[members] = to_device(jac_h[order_h], "cuda")
    capped |= to_device(capped_h, "cuda")  # components touch disjoint buckets
    logger.info("%d giant candidate components (%d documents, > %d each) ran on the host", comp_off.shape[0] - 1,
                order_h.shape[0], HOST_COMPONENT)
    return to_device(comparisons_h, "cuda")


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
