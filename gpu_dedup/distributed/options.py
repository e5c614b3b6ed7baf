"""The Ray engine's tasks for the optional features (stages.py has the others; rows.py the Job they take):

    IndexSource  the --against index as file 0 of a run (its piece: index_piece)
    ranks        per file (keep_copies > 1): the removed rows' keep keys -> their cluster's file, where the
                 sizes task ranks each cluster's members (rep_positions)
    index_rows   per file (--save-index): its kept rows in documents.parquet's schema
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ..config import RunConfig
from .shuffle import file_of
from ..workdir import band_column
from .rows import ASSIGN_SCHEMA, Job, keep_columns, piece_keep_order, read_piece, run_once


@dataclass
class IndexSource:
    """The ``--against`` index as file 0 of a Ray run (its path and manifest; the rows are read by tasks)."""

    path: str
    manifest: dict
    relpath: str = "<index>"
    fmt: str = "index"

    def stamp(self) -> dict:
        m = self.manifest
        return {"index": os.path.abspath(self.path), "generation": m["generation"], "documents": m["documents"],
                "created": m.get("created"), "contract_fingerprint": m.get("contract_fingerprint")}


def index_piece(cfg: RunConfig, src: IndexSource) -> pa.Table:
    """The index's documents as a piece (the input pieces' schema; lengths and keep values 0: the index's
    rows rank first by position, piece_keep_order)."""
    import pyarrow.parquet as pq

    from ..config import keep_column
    from ..workdir import piece_table

    t = pq.read_table(os.path.join(src.path, "documents.parquet"), columns=["id", "exact_lo", "exact_hi", "short",
                                                                             "band_keys"])
    n = t.num_rows
    keys = np.asarray(t["band_keys"].combine_chunks().flatten().to_numpy(zero_copy_only=False), np.uint64) \
        .reshape(n, cfg.lsh.bands)
    exact = np.stack([t["exact_lo"].to_numpy(), t["exact_hi"].to_numpy()], axis=1).astype(np.uint64) \
        if n else np.zeros((0, 2), np.uint64)
    short = np.asarray(t["short"].to_numpy(zero_copy_only=False), bool)
    zeros = np.zeros(n, np.int64)
    return piece_table(t["id"].combine_chunks(), zeros, zeros, exact, (~short).astype(np.int64), keys,
                       np.zeros(n) if keep_column(cfg.cluster.keep) else None)


@run_once("ranks")
def ranks(job: Job, h: int) -> dict[str, Any]:
    """The removed rows of file ``h`` with their representative and keep keys, by the representative's file
    (the sizes task ranks each cluster's members: keep_copies)."""
    lay, offs = job.layout, job.offs()
    asg = lay.read("assign", [f"g{g:06d}-f{h:06d}" for g in range(job.nfiles)], ASSIGN_SCHEMA)
    rows, cols = asg["row"].to_numpy(), keep_columns(job.cfg)
    keys = read_piece(job, h, cols).take(pa.array(rows - offs[h], pa.int64())) if cols else None
    t = pa.table({"row": asg["row"], "rep": asg["rep"], **{c: keys[c] for c in cols}})
    lay.write_split(t, file_of(asg["rep"].to_numpy(), offs), job.nfiles, "ranks", lambda g: f"h{h:06d}-f{g:06d}")
    return {"rows": t.num_rows}


def rep_positions(job: Job, h: int, reps_local: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows, position in their cluster's keep order) of the clusters whose representatives are file
    ``h``'s rows ``reps_local``: the members from the ranks task, the representatives' own keys from the
    piece; positions as decide.cluster_size_keeps (the representative is its cluster's first)."""
    lay, offs, cols = job.layout, job.offs(), keep_columns(job.cfg)
    mem = lay.read("ranks", [f"h{g:06d}-f{h:06d}" for g in range(job.nfiles)])
    reps = read_piece(job, h, cols).take(pa.array(reps_local, pa.int64())) if cols else None
    rows = np.concatenate([mem["row"].to_numpy(), reps_local + offs[h]]) if mem.num_rows else reps_local + offs[h]
    cluster = np.concatenate([mem["rep"].to_numpy(), reps_local + offs[h]]) if mem.num_rows else rows
    t = pa.table({"row": pa.array(rows, pa.int64()),
                  **{c: pa.concat_arrays([mem[c].combine_chunks(), reps[c].combine_chunks()]) if mem.num_rows
                     else reps[c].combine_chunks() for c in cols}})
    by_row = np.argsort(rows, kind="stable")
    rank = np.empty(rows.shape[0], np.int64)
    rank[by_row] = piece_keep_order(job.cfg, t.take(pa.array(by_row)), job.n_index)  # rows in row order
    order = np.lexsort((rank, cluster))
    grouped = cluster[order]
    idx = np.arange(order.shape[0], dtype=np.int64)
    starts = np.where(np.r_[True, grouped[1:] != grouped[:-1]], idx, 0) if idx.shape[0] else idx
    position = np.empty_like(idx)
    position[order] = idx - np.maximum.accumulate(starts) if idx.shape[0] else idx
    return rows, position


@run_once("index_rows")
def index_rows(job: Job, fi: int) -> dict[str, Any]:
    """File ``fi``'s kept rows in documents.parquet's schema (index.kept_rows: shingle sets read again)."""
    from ..index import DOCUMENTS_SCHEMA, documents_table, kept_rows

    cfg, lay = job.cfg, job.layout
    keep = np.asarray(lay.read_one("decisions", f"f{fi:06d}", ["keep"])["keep"]
                      .to_numpy(zero_copy_only=False), bool)
    kept = np.flatnonzero(keep)
    bands = [band_column(b) for b in range(cfg.lsh.bands)]
    piece = read_piece(job, fi, ["id", "exact_lo", "exact_hi", "nshingles"] + bands)
    n = piece.num_rows
    exact = np.stack([piece["exact_lo"].to_numpy(), piece["exact_hi"].to_numpy()], axis=1).astype(np.uint64) \
        if n else np.zeros((0, 2), np.uint64)
    band = np.stack([piece[band_column(b)].to_numpy()[kept] for b in range(cfg.lsh.bands)], axis=1) \
        .astype(np.uint64) if n else np.zeros((0, cfg.lsh.bands), np.uint64)
    tables = [documents_table(*part) for part in kept_rows(cfg, [job.files[fi]], kept, piece["id"].combine_chunks(),
                                                          exact, piece["nshingles"].to_numpy() == 0, band)]
    lay.write(pa.concat_tables(tables) if tables else DOCUMENTS_SCHEMA.empty_table(), "index_rows", f"f{fi:06d}")
    return {"rows": int(kept.shape[0])}
