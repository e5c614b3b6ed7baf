"""A recipe's composition on the Ray engine (``gpu-dedup pipeline --engine ray``): each removing step's verdicts
folded into the run's decisions by tasks, so that the driver holds no decision; the local engine's fold
(``decisions.fold_removals``), byte for byte.

The decisions after each step are one part per input file (``part-<k>.parquet``: the input's file k, its rows in
input order, ``decisions.pipeline_schema``) in a directory of the work dir; a step's verdicts are read file by file
of its view (``runtime.program.VerdictTable``: its own per-document table, or the driver's verdicts split per file
for a step that has none). A removal changes the rows of the clusters it touches (its own, its match's, its
representative's) and no other. A test's removal (kind "select") of a document alone in its cluster, as every
document is before the first dedup step, changes that row only: it is folded where it lies. Any other is folded
with every row of the clusters it touches, gathered from every file (``fold_removals`` of a part holding whole
clusters equals that of the whole table; so does that of a part holding whole groups of clusters that no removal
links to a cluster outside the part: the fold is spread over shares of such groups):

    compose_touched     per file: its removals not folded in place, with their matches and representatives
    compose_clusters    per file: its rows whose id is among every file's touched ids (id, cluster, size)
    compose_components  one task: the touched clusters grouped by the links between them (a removal's cluster,
                        its match's, its representative's; the clusters of one id), the groups dealt in order
                        into shares of about FOLD_ROWS rows (``semfold.fold_shares``, which SemDeDup's fold in
                        ``run --semantic`` deals the same way)
    compose_local       per file: its removals folded in place, its rows of the touched clusters (with their
                        verdicts) gathered by share
    compose_fold        per share: ``fold_removals`` over its gathered rows, each file's folded rows sent back
    compose_merge       per file: its part with the fold's rows in their places: the decisions after the step, and
                        the step's keep flags of the file's documents it saw (the next view's rows)
    compose_totals      (at the end) per file: its final part's counts and sources tally; its part of
                        OUT/decisions/ (the dataset layout)

With no removal to gather only compose_touched, compose_local and compose_merge run. A task holds one file's
rows, a share's gathered rows (at most FOLD_ROWS but the largest group's), or (the ids and clusters the clusters
and components tasks read) the touched ids: the duplicates' links, not the corpus. The driver holds file lists,
per-file counts and the keep flags (one bit a document, packed) that choose the rows of the next view.
"""
from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..decisions import base_decisions, flags_of, fold_removals, pipeline_schema, row_positions, value_counts
from ..errors import RunError
from .cluster import ray_cluster, ray_get
from . import semfold
from .semfold import ID_CLUSTERS, LINKS, fold_shares, put_back, share_of, touched_rows

logger = logging.getLogger(__name__)



@dataclass(frozen=True)
class FileSpec:
    """One input file of the run: its index ``k``, relpath, first row in the whole decisions table (``row0``),
    and the view file of the step that holds its documents (``j``: its index among the step's view files, -1:
    none; ``first``: its first row in a one-file table of the step's; ``count``: its rows there)."""

    k: int
    relpath: str
    row0: int
    j: int
    first: int
    count: int


@dataclass(frozen=True)
class StepSpec:
    """What every task of one step's composition reads: ``before`` (the directory of the decisions' parts before
    the step; None: the step is the first, its verdicts' ids the base decisions), ``after`` (where the parts
    after it go), ``work`` (the tasks' exchange files), the step's ``name``, ``kind`` and verdicts (``table``:
    a ``VerdictTable``), and whether the decisions carry the semantic columns."""

    before: str | None
    after: str
    work: str
    name: str
    kind: str
    table: Any
    semantic: bool


def part(directory: str, k: int) -> str:
    return os.path.join(directory, f"part-{k:06d}.parquet")


def _write(t: pa.Table, path: str) -> None:
    """A part, atomically (a retried task writes the same bytes)."""
    from ..io import write_parquet_atomic

    write_parquet_atomic(t, path)


def _written(stage: str) -> None:
    """A task's outputs are written (the fault tests kill a worker here: Ray runs the task again)."""
    from ..runtime.workdir import checkpoint

    checkpoint(f"ray-{stage}")


def _read_all(directory: str, n: int, schema: pa.Schema) -> pa.Table:
    tables = [pq.read_table(part(directory, k)) for k in range(n) if os.path.exists(part(directory, k))]
    return pa.concat_tables(tables).cast(schema) if tables else schema.empty_table()


def _parts(f: FileSpec, spec: StepSpec) -> tuple[pa.Table, pa.Table, np.ndarray]:
    """(file ``f``'s decisions before the step, the step's verdicts of its documents, the rows it saw)."""
    before = pq.read_table(part(spec.before, f.k)) if spec.before is not None else None
    v = spec.table.read(f.j, f.first, f.count) if f.j >= 0 else _empty_verdicts(spec)
    if before is None:
        before = base_decisions(v["id"].combine_chunks(), pa.array([f.relpath] * v.num_rows, pa.string()),
                                spec.semantic, f.row0)
    seen = np.flatnonzero(flags_of(before["keep"]))
    if seen.shape[0] != v.num_rows or not before["id"].take(pa.array(seen, pa.int64())).equals(v["id"]):
        raise RunError(f"step {spec.name} read {v.num_rows:,} documents of {f.relpath} but the steps before it kept "
                       f"{seen.shape[0]:,}: its view changed while the pipeline ran")
    return before, v, seen


def _empty_verdicts(spec: StepSpec) -> pa.Table:
    cols = {"id": pa.array([], pa.string()), "keep": pa.array([], pa.bool_()), "reason": pa.array([], pa.string()),
            "matched_id": pa.array([], pa.string()), "representative_id": pa.array([], pa.string())}
    for name, _ in spec.table.values:
        cols["v:" + name] = pa.nulls(0)
    if spec.table.representative:
        cols["v:cluster_id"] = pa.array([], pa.int64())
    return pa.table(cols)


def _in_place(before: pa.Table, v: pa.Table, seen: np.ndarray, kind: str) -> np.ndarray:
    """bool (m,): the step's removals folded where they lie: a test's removal of a document alone in its
    cluster (its cluster of one, so no other row names it)."""
    removed = ~flags_of(v["keep"])
    if kind != "select":
        return np.zeros(removed.shape[0], bool)
    size = np.asarray(before["cluster_size"].to_numpy(), np.int64)[seen]
    return removed & (size == 1)


def touched(f: FileSpec, spec: StepSpec) -> dict[str, Any]:
    """compose_touched: file ``f``'s removals not folded in place, with their matches and representatives."""
    before, v, seen = _parts(f, spec)
    removed = ~flags_of(v["keep"])
    away = pa.array(removed & ~_in_place(before, v, seen, spec.kind))
    links = pa.table({c: v[c].filter(away).combine_chunks() for c in LINKS.names}, schema=LINKS)
    _write(links, part(os.path.join(spec.work, "touched"), f.k))
    _written("compose_touched")
    return {"touched": int(pc.sum(away).as_py() or 0)}


def clusters(f: FileSpec, spec: StepSpec, n: int) -> dict[str, Any]:
    """compose_clusters: file ``f``'s rows whose id every file's removals link (``semfold.touched_rows``)."""
    cols = ["id", "cluster_id", "cluster_size"]
    # the first step: every document its own cluster, numbered by its row
    before = pq.read_table(part(spec.before, f.k), columns=cols) if spec.before is not None else \
        _parts(f, spec)[0].select(cols)
    rows = touched_rows(before, _read_all(os.path.join(spec.work, "touched"), n, LINKS))
    _write(rows, part(os.path.join(spec.work, "clusters"), f.k))
    return {"rows": rows.num_rows}


def linked(spec: StepSpec, n: int, fold_rows: int) -> dict[str, Any]:
    """compose_components: the touched clusters' shares of the fold (``semfold.fold_shares``)."""
    shares, info = fold_shares(_read_all(os.path.join(spec.work, "touched"), n, LINKS),
                               _read_all(os.path.join(spec.work, "clusters"), n, ID_CLUSTERS), fold_rows)
    _write(shares, os.path.join(spec.work, "shares.parquet"))
    _written("compose_components")
    return info


def _values(spec: StepSpec, v: pa.Table, names: Sequence[str], m: int) -> dict[str, Any]:
    """The step's values for the removed rows (the decisions' columns of those names), and the step's name."""
    values = {name: v["v:" + name].combine_chunks() for name, _ in spec.table.values if name in names}
    values["step"] = pa.array([spec.name] * m, pa.string())
    return values


def local(f: FileSpec, spec: StepSpec, n: int, gather: bool) -> dict[str, Any]:
    """compose_local: file ``f``'s removals folded in place; with ``gather``, its rows of the touched clusters
    and their verdicts written for the fold tasks, by share."""
    before, v, seen = _parts(f, spec)
    m = v.num_rows
    here = _in_place(before, v, seen, spec.kind)
    share = np.full(before.num_rows, -1, np.int64)
    if gather:
        share = share_of(np.asarray(before["cluster_id"].to_numpy(), np.int64),
                         pq.read_table(os.path.join(spec.work, "shares.parquet")))
        here &= share[seen] < 0
    out = before
    if here.any():
        out = fold_removals(before, seen, here, np.full(m, -1, np.int64), v["reason"], kind=spec.kind,
                            values=_values(spec, v, before.column_names, m),
                            positions=np.arange(f.row0, f.row0 + before.num_rows, dtype=np.int64))
    _write(out, part(os.path.join(spec.work, "local"), f.k))
    pick = share >= 0
    if pick.any():
        g = _gathered(before, v, seen, pick, f.row0)
        mine = share[pick]
        for r in np.unique(mine):
            _write(g.filter(pa.array(mine == r)), part(_share(spec, "gathered", int(r)), f.k))
    _written("compose_local")
    return {"seen": m, "removed": int((~flags_of(v["keep"])).sum()), "gathered": int(pick.sum())}


def _share(spec: StepSpec, stage: str, r: int) -> str:
    """The directory of share ``r``'s files of a stage (one part per input file that has rows in the share)."""
    return os.path.join(spec.work, stage, f"share-{r:06d}")


def _gathered(before: pa.Table, v: pa.Table, seen: np.ndarray, pick: np.ndarray, row0: int) -> pa.Table:
    """``before``'s rows where ``pick`` (whole clusters), with their row in the whole table and, for a row the
    step saw, its verdict (columns "s:<verdict column>"; a row it did not see: not seen, null)."""
    rows = np.flatnonzero(pick)
    at = np.full(before.num_rows, -1, np.int64)
    at[seen] = np.arange(seen.shape[0])
    where = at[rows]
    take = pa.array(np.maximum(where, 0), pa.int64(), mask=where < 0)
    out = before.take(pa.array(rows, pa.int64()))
    out = out.append_column("row", pa.array(row0 + rows, pa.int64())).append_column("s:seen", pa.array(where >= 0))
    for name in v.column_names:
        out = out.append_column("s:" + name, v[name].combine_chunks().take(take))
    return out


def fold(spec: StepSpec, n: int, r: int) -> dict[str, Any]:
    """compose_fold: ``fold_removals`` over share ``r``'s gathered rows of every file (whole groups of linked
    clusters, in row order); each file's folded rows written for its merge task."""
    where = _share(spec, "gathered", r)
    files = [k for k in range(n) if os.path.exists(part(where, k))]
    tables = [pq.read_table(part(where, k)) for k in files]
    # a file the step saw no document of has no verdict column types (its rows moved with their clusters: null)
    g = pa.concat_tables(tables, promote_options="permissive")
    names = [c for c in g.column_names if c != "row" and not c.startswith("s:")]
    d = g.select(names)
    seen = np.flatnonzero(flags_of(g["s:seen"]))
    sv = pa.table({c[2:]: g[c].combine_chunks().take(pa.array(seen, pa.int64()))
                   for c in g.column_names if c.startswith("s:") and c != "s:seen"})
    ids = sv["id"].combine_chunks()
    removed = ~flags_of(sv["keep"])
    m = sv.num_rows
    matched = row_positions(sv["matched_id"], ids)
    values = _values(spec, sv, names, m)
    rep = None
    if spec.table.representative:  # as the step's decisions name it (lexical.program.decision_verdicts)
        rep = row_positions(sv["representative_id"], ids)
        outside = removed & (rep < 0) & flags_of(pc.is_valid(sv["representative_id"]))
        if outside.any():  # an --against index's document: its id and cluster as the step wrote them
            values["representative_id"] = pc.if_else(pa.array(outside), sv["representative_id"], None)
            values["cluster_id"] = pc.if_else(pa.array(outside), sv["v:cluster_id"], None)
    out = fold_removals(d, seen, removed, matched, sv["reason"], representative=rep, kind=spec.kind,
                        values={k: x for k, x in values.items() if k in names},
                        positions=np.asarray(g["row"].to_numpy(), np.int64))
    out = out.append_column("row", g["row"])
    lo = 0
    for k, t in zip(files, tables):  # each file's gathered rows: a contiguous run of rows, in file order
        _write(out.slice(lo, t.num_rows), part(_share(spec, "folded", r), k))
        lo += t.num_rows
    _written("compose_fold")
    return {"rows": out.num_rows, "removed": int(removed.sum())}


def merge(f: FileSpec, spec: StepSpec, shares: int) -> dict[str, Any]:
    """compose_merge: file ``f``'s decisions after the step (its in-place fold, the fold tasks' rows in their
    places); the step's keep flags of the documents it saw (packed bits)."""
    folded = [pq.read_table(part(_share(spec, "folded", r), f.k)) for r in range(shares)
              if os.path.exists(part(_share(spec, "folded", r), f.k))]
    t = put_back(pq.read_table(part(os.path.join(spec.work, "local"), f.k)),
                 pa.concat_tables(folded) if folded else None, f.row0)
    before = pq.read_table(part(spec.before, f.k), columns=["keep"]) if spec.before is not None else None
    keep = flags_of(t["keep"])
    saw = keep if before is None else keep[flags_of(before["keep"])]
    t = t.cast(pipeline_schema(spec.semantic))
    _write(t, part(spec.after, f.k))
    _written("compose_merge")
    return {"keep": np.packbits(saw), "n": int(saw.shape[0])}


def totals(k: int, directory: str, labels: Callable[[pa.Array], pa.Array] | None, tally: Any,
            target: str | None) -> dict[str, Any]:
    """compose_totals: file ``k``'s final decisions: its counts (kept; removed per step and per reason), its
    sources tally (``runtime.sources.Tally``, as a dict), and with ``target`` its part of OUT's decisions dataset
    (the local engine's row groups)."""
    from ..runtime.run import write_tables

    t = pq.read_table(part(directory, k))
    keep = flags_of(t["keep"])
    gone = t.filter(pa.array(~keep))
    tally.add(labels(t["source"]) if labels is not None else t["source"], keep, step=t["step"], reason=t["reason"],
              jaccard=t["jaccard"], cosine=t["cosine"] if "cosine" in t.column_names else None, ids=t["id"],
              matched=t["matched_id"])
    if target is not None:
        write_tables([t], t.schema, part(target, k))
    _written("compose_totals")
    return {"n": t.num_rows, "kept": int(keep.sum()), "by_step": value_counts(gone["step"].drop_null()),
            "by_reason": value_counts(gone["reason"]), "tally": tally.to_dict()}


# ---------------------------------------------------------------------------------------------- the runs

def _map(ray, fn: Callable, args: Sequence[tuple], what: str, names: Sequence[str]) -> list[dict[str, Any]]:
    remote = ray.remote(num_cpus=1, max_retries=3)(fn)
    refs = [remote.remote(*a) for a in args]
    return ray_get(ray, refs, lambda i, exc: f"Ray task {what}[{i}] ({names[i]}) failed after its retries: "
                                             f"{type(exc).__name__}")


def fresh(spec: StepSpec) -> None:
    """No exchange file of an earlier, interrupted composition of the step (its work dir removed): a fold task
    reads the share's files that exist (a file with no row in a share writes none), so they must be this run's; a
    task Ray retries writes the same bytes again."""
    shutil.rmtree(spec.work, ignore_errors=True)


def compose_step(files: Sequence[FileSpec], spec: StepSpec, *, workers: int | None,
                 address: str | None) -> tuple[int, int, list[np.ndarray]]:
    """One step's verdicts folded into the decisions' parts (the module docstring's stages): (documents the step
    saw, removed, and its keep flags of each file's documents it saw, as bool arrays)."""
    n = len(files)
    names = [f.relpath for f in files]
    fresh(spec)
    os.makedirs(spec.after, exist_ok=True)
    with ray_cluster(workers, address) as ray:
        hit = _map(ray, touched, [(f, spec) for f in files], "compose_touched", names)
        gather = any(r["touched"] for r in hit)
        shares = 0
        if gather:
            _map(ray, clusters, [(f, spec, n) for f in files], "compose_clusters", names)
            shares = _map(ray, linked, [(spec, n, semfold.FOLD_ROWS)], "compose_components",
                          ["every file's touched clusters"])[0]["shares"]
        res = _map(ray, local, [(f, spec, n, gather) for f in files], "compose_local", names)
        if shares:
            folded = _map(ray, fold, [(spec, n, r) for r in range(shares)], "compose_fold",
                          [f"share {r}" for r in range(shares)])
            logger.info("step %s: %s removals folded with the %s rows of the clusters they touch, in %d task(s)",
                        spec.name, f"{sum(r['touched'] for r in hit):,}", f"{sum(r['rows'] for r in folded):,}",
                        shares)
        merged = _map(ray, merge, [(f, spec, shares) for f in files], "compose_merge", names)
    keep = [np.unpackbits(r["keep"], count=r["n"]).astype(bool) for r in merged]
    return sum(r["seen"] for r in res), sum(r["removed"] for r in res), keep


def totals_all(n: int, directory: str, labels: Callable[[int], Any] | None, tally: Any, target: str | None, *,
                workers: int | None, address: str | None, names: Sequence[str]) -> list[dict[str, Any]]:
    """``totals`` of every file (``labels(k)``: the source labels function of file k, None: the file names)."""
    with ray_cluster(workers, address) as ray:
        args = [(k, directory, labels(k) if labels is not None else None, tally, target) for k in range(n)]
        return _map(ray, totals, args, "compose_totals", names)
