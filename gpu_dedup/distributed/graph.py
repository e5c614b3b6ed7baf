"""The candidate graph's connected components on the Ray engine: the tasks that turn the buckets' star edges
into one label per candidate row (the smallest row of its component, the local engine's label), and how the
driver runs them.

    EDGES, write_edges   the edge files: undirected edges in both orientations, by the file of their first node
    unique_pairs         distinct (a, b) pairs (the buckets tasks' edges)
    star        per file of rows: one large-star or small-star step (Kiveris et al. 2014) over the edges of its
                nodes; converged, every component is a star around its smallest row
    star_rounds the driver's loop: alternate the steps until a large and a small step changed nothing (the edge
                set's fingerprint repeats), at most MAX_STAR_STEPS
    components  one task over every edge (when at most COMPONENTS_IN_ONE_TASK: the driver's choice): hook each
                root to its neighbours' smallest root, shortcut, repeat; writes the star the rounds converge to
                (edges_c), so the labels stage reads either the same way, without a round of tasks per step
    labels      per file: each candidate row's label from the converged star's edges
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pyarrow as pa

from ..errors import RunError
from .rows import Job, run_once
from .shuffle import file_of, mix64

MAX_STAR_STEPS = 200  # large-star / small-star converge in O(log^2 n) rounds (Kiveris et al. 2014)
COMPONENTS_IN_ONE_TASK = 1 << 24  # candidate edges one task labels at once (~512 MB of int64 pairs and indexes)


EDGES = pa.schema([("a", pa.int64()), ("b", pa.int64())])


def write_edges(job: Job, a: np.ndarray, b: np.ndarray, stage: str, src: str) -> None:
    """Undirected edges (a, b), a != b, written in both orientations to the file partition of their first node."""
    a, b = np.concatenate([a, b]), np.concatenate([b, a])
    t = pa.table({"a": pa.array(a, pa.int64()), "b": pa.array(b, pa.int64())}, schema=EDGES)
    job.layout.write_split(t, file_of(a, job.offs()), job.nfiles, stage, lambda g: f"{src}-f{g:06d}")


def unique_pairs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct pairs (a[i], b[i]), sorted by (a, b) (int64 each)."""
    if not a.shape[0]:
        return a, b
    order = np.lexsort((b, a))
    a, b = a[order], b[order]
    new = np.ones(a.shape[0], bool)
    new[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
    return a[new], b[new]


def _read_edges(job: Job, stage: str, g: int, sources: list[str]) -> tuple[np.ndarray, np.ndarray]:
    t = job.layout.read(stage, [f"{s}-f{g:06d}" for s in sources], EDGES)
    if t.num_rows == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    ab = np.unique(np.stack([t["a"].to_numpy(), t["b"].to_numpy()], axis=1), axis=0)  # sorted by (a, b)
    return ab[:, 0], ab[:, 1]


def _fingerprint(a: np.ndarray, b: np.ndarray) -> list[int]:
    """Order-free fingerprint of the undirected edges with a < b held here: count and two 64-bit sums."""
    sel = a < b
    h1 = mix64(mix64(a[sel], 1) ^ np.asarray(b[sel], np.uint64), 2)
    h2 = mix64(mix64(b[sel], 3) ^ np.asarray(a[sel], np.uint64), 4)
    with np.errstate(over="ignore"):
        return [int(sel.sum()), int(h1.sum(dtype=np.uint64)), int(h2.sum(dtype=np.uint64))]


@run_once("star")
def star(job: Job, g: int, step: int, large: bool, sources: list[str]) -> dict[str, Any]:
    """One star step over the nodes of file ``g``: reads edges_<step>, writes edges_<step+1>.
    Large-star: each node u links its larger neighbours to m(u) = min(u, neighbours). Small-star: each
    node u links itself and its smaller neighbours to m = min(u, smaller neighbours)."""
    a, b = _read_edges(job, f"edges_{step}", g, sources)
    fp = _fingerprint(a, b)
    if a.shape[0]:
        first = np.ones(a.shape[0], bool)
        first[1:] = a[1:] != a[:-1]
        grp = np.cumsum(first) - 1
        if large:
            m = np.minimum(a[first], b[first])  # b sorted within a: the first is the smallest neighbour
            sel = b > a
            x, y = b[sel], m[grp[sel]]
        else:
            small = b < a
            has = np.zeros(first.sum(), bool)
            has[grp[small]] = True
            m = np.where(has, np.minimum(a[first], b[first]), a[first])
            x = np.concatenate([b[small], a[first][has]])
            y = np.concatenate([m[grp[small]], m[has]])
        keep = x != y
        x, y = x[keep], y[keep]
    else:
        x = y = np.zeros(0, np.int64)
    write_edges(job, x, y, f"edges_{step + 1}", f"g{g:06d}")
    return {"fingerprint": fp}


def star_rounds(run_step: Callable[[int, bool, list[str]], list[dict]], partitions: int,
                nfiles: int) -> tuple[int, list[str], list[dict]]:
    """``run_step(step, large, sources)`` (the star tasks of one step, every file) until a large and a small step
    changed nothing (the edge set's fingerprint repeats): every component is then a star around its smallest
    row. Returns the last step, its sources (the edge files' name prefixes) and its tasks' results."""
    step, sources, fps = 0, [f"p{p:04d}" for p in range(partitions)], []
    while True:
        res = run_step(step, step % 2 == 0, sources)
        fps.append([sum(r["fingerprint"][i] for r in res) % (1 << 64) for i in range(3)])
        if len(fps) >= 3 and fps[-1] == fps[-2] == fps[-3]:
            return step, sources, res
        if step >= MAX_STAR_STEPS:
            raise RunError(f"connected components did not converge in {MAX_STAR_STEPS} star steps")
        step, sources = step + 1, [f"g{g:06d}" for g in range(nfiles)]


@run_once("components")
def components(job: Job, key: int) -> dict[str, Any]:
    """Every candidate edge (the buckets tasks' edges_0) in one task, when they are few (driver's
    COMPONENTS_IN_ONE_TASK): connected components by hooking each root to its neighbours' smallest root and
    shortcutting to the roots until nothing changes, so that every component's root is its smallest row; then
    each node linked to that root, in both orientations, by file of the node (edges_c): the star the
    large-star / small-star rounds converge to, which the labels stage reads the same way."""
    names = [f"p{p:04d}-f{g:06d}" for p in range(job.partitions) for g in range(job.nfiles)]
    t = job.layout.read("edges_0", names, EDGES)
    a, b = t["a"].to_numpy(), t["b"].to_numpy()
    nodes = np.unique(a)  # every node: edges_0 holds both orientations
    ai, bi = np.searchsorted(nodes, a), np.searchsorted(nodes, b)
    root = np.arange(nodes.shape[0], dtype=np.int64)
    rounds = 0
    while True:
        rounds += 1
        hooked = root.copy()
        np.minimum.at(hooked, root[ai], root[bi])
        while True:  # shortcut: every node to its root
            up = hooked[hooked]
            if np.array_equal(up, hooked):
                break
            hooked = up
        if np.array_equal(hooked, root):
            break
        root = hooked
    other = root != np.arange(nodes.shape[0])
    write_edges(job, nodes[other], nodes[root[other]], "edges_c", "c")
    return {"nodes": int(nodes.shape[0]), "rounds": rounds}


_LABELS = pa.schema([("row", pa.int64()), ("label", pa.int64())])


@run_once("labels")
def labels(job: Job, g: int, step: int, sources: list[str]) -> dict[str, Any]:
    """Converged edges of file ``g``'s nodes -> (row, label = smallest row of its component)."""
    a, b = _read_edges(job, f"edges_{step}", g, sources)
    first = np.ones(a.shape[0], bool)
    if a.shape[0]:
        first[1:] = a[1:] != a[:-1]
    rows, lab = a[first], np.minimum(a[first], b[first])
    job.layout.write(pa.table({"row": pa.array(rows), "label": pa.array(lab)}, schema=_LABELS), "labels",
                     f"f{g:06d}")
    return {"candidates": int(rows.shape[0])}
