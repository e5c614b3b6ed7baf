"""The Ray engine's tasks for the optional features (stages.py has the others; rows.py the Job they take):

    IndexSource  the --against index as file 0 of a run (its piece: index_piece)
    count        per input file (a prefilter with stochastic retention): its documents as pass 1 reads them, so
                 that each sign task knows its file's first run row, by which the retention draws
    exact_texts  per file (--exact-verify): the normalized text of its rows in exact groups, read again; a
                 member's text goes to its leader's file
    exact_check  per file of leaders (--exact-verify): each member's bytes against its leader's
                 (lexical/exact.verify_groups' rule: a member that differs is its own leader) -> the
                 verified duplicates, which the later stages read (Job.dup_names)
    ranks        per file (keep_copies > 1): the removed rows' keep keys -> their cluster's file, where the
                 sizes task ranks each cluster's members (rep_positions)
    index_rows   per file (--save-index): its kept rows in documents.parquet's schema
    kept         per file (--max-source-removal, once the driver found every source within it): its
                 deduplicated/ file from its decisions part (``write_kept_file``: the write task's own writer)
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import io
from ..config import RunConfig
from .shuffle import file_of
from ..runtime.workdir import band_column
from .rows import ASSIGN_SCHEMA, DUPS_SCHEMA, Job, piece_keep_order, read_piece, run_once

logger = logging.getLogger(__name__)


@dataclass
class IndexSource:
    """The ``--against`` index as file 0 of a Ray run (its path and manifest; the rows are read by tasks)."""

    path: str
    manifest: dict
    relpath: str = "<index>"
    fmt: str = "index"

    def __len__(self) -> int:
        return int(self.manifest["documents"])

    def stamp(self) -> dict:
        m = self.manifest
        return {"index": os.path.abspath(self.path), "generation": m["generation"], "documents": m["documents"],
                "created": m.get("created"), "contract_fingerprint": m.get("contract_fingerprint")}


def index_piece(cfg: RunConfig, src: IndexSource) -> pa.Table:
    """The index's documents as a piece (the input pieces' schema; lengths and keep values 0: the index's
    rows rank first by position, piece_keep_order)."""
    import pyarrow.parquet as pq

    from ..config import keep_column
    from ..runtime.workdir import piece_table

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


_MEMBER_TEXTS = pa.schema([("row", pa.int64()), ("leader", pa.int64()), ("short", pa.bool_()),
                           ("text", pa.large_binary())])
_LEADER_TEXTS = pa.schema([("row", pa.int64()), ("text", pa.large_binary())])


def _normalized_texts(job: Job, fi: int, local: np.ndarray) -> tuple[pa.Array, int]:
    """(the normalized text (large_binary) of file ``fi``'s rows ``local``, sorted file rows, read again
    as pass 1 read them; the raw text bytes read)."""
    from .. import io
    from ..text.normalize import normalize_text

    cfg, parts, read = job.cfg, [], 0
    for sel, text in io.iter_rows([job.files[fi]], local, **{**cfg.reader_options(), "keep_column": None}):
        norm = normalize_text(text, cfg.normalize)
        off = np.asarray(norm.offsets, np.int64)
        parts.append(pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(sel), [
            None, pa.py_buffer(off), pa.py_buffer(np.asarray(norm.data, np.uint8)[:off[-1]])]))
        read += text.nbytes
    return (pa.concat_arrays(parts) if parts else pa.array([], pa.large_binary())), read


def _same_file(job: Job, fi: int, result: dict) -> bool:
    from .perfile import same_input

    return same_input(job.files[fi], result, "its documents were counted; counting them again")


@run_once("count", valid=_same_file)
def count(job: Job, fi: int) -> dict[str, Any]:
    """Input file ``fi``'s documents, read as pass 1 reads it (the keep column and scope field never skip a row:
    not read)."""
    from .perfile import stamp_of

    f = job.files[fi]
    stamp = stamp_of(f)
    opts = {**job.cfg.reader_options(), "keep_column": None, "scope_field": None}
    rows = sum(len(b) for b in io.iter_batches([f], **opts))
    return {"rows": rows, "stamp": stamp()}


@run_once("exact_texts")
def exact_texts(job: Job, g: int) -> dict[str, Any]:
    """The normalized texts of file ``g``'s exact-group leaders (leader_texts) and members (member_texts,
    by their leader's file)."""
    lay, offs = job.layout, job.offs()
    names = [f"p{p:04d}-f{g:06d}" for p in range(job.partitions)]  # the exact tasks' (unverified) groups
    mem = lay.read("dups_by_row", names, DUPS_SCHEMA)
    lead = np.unique(lay.read("dups_by_leader", names, DUPS_SCHEMA)["leader"].to_numpy())
    rows = mem["row"].to_numpy()
    want = np.union1d(lead, rows).astype(np.int64)
    texts, read = _normalized_texts(job, g, want - offs[g])

    def of(r):
        return texts.take(pa.array(np.searchsorted(want, r), pa.int64()))

    lay.write(pa.table({"row": pa.array(lead, pa.int64()), "text": of(lead)}, schema=_LEADER_TEXTS),
              "leader_texts", f"f{g:06d}")
    t = pa.table({"row": mem["row"], "leader": mem["leader"], "short": mem["short"], "text": of(rows)},
                 schema=_MEMBER_TEXTS)
    lay.write_split(t, file_of(mem["leader"].to_numpy(), offs), job.nfiles, "member_texts",
                    lambda h: f"g{g:06d}-f{h:06d}")
    return {"rows_read": int(want.shape[0]), "text_bytes_read": int(read)}


@run_once("exact_check")
def exact_check(job: Job, h: int) -> dict[str, Any]:
    """Byte-compare each member whose leader is in file ``h`` with its leader; the verified duplicates
    (dups_by_row / dups_by_leader ``v<h>-f<g>``) and the exact stats (lexical/decide.exact_stage's)."""
    import pyarrow.compute as pc

    lay, offs = job.layout, job.offs()
    mem = lay.read("member_texts", [f"g{g:06d}-f{h:06d}" for g in range(job.nfiles)], _MEMBER_TEXTS)
    lead = lay.read_one("leader_texts", f"f{h:06d}")
    at = np.searchsorted(lead["row"].to_numpy(), mem["leader"].to_numpy())
    same = np.asarray(pc.equal(mem["text"], lead["text"].take(pa.array(at, pa.int64()))).to_numpy(
        zero_copy_only=False), bool) if mem.num_rows else np.zeros(0, bool)
    for row, leader in zip(mem["row"].to_numpy()[~same].tolist(), mem["leader"].to_numpy()[~same].tolist()):
        logger.warning("exact-hash collision: row %d differs from its group's first row %d; kept apart", row, leader)
    dups = mem.select(["row", "leader", "short"]).filter(pa.array(same)).cast(DUPS_SCHEMA)
    rows, leaders = dups["row"].to_numpy(), dups["leader"].to_numpy()
    f = job.nfiles
    lay.write_split(dups, file_of(rows, offs), f, "dups_by_row", lambda g: f"v{h:06d}-f{g:06d}")
    lay.write_split(dups, file_of(leaders, offs), f, "dups_by_leader", lambda g: f"v{h:06d}-f{g:06d}")
    return {"hash_collisions": int((~same).sum()), "groups_with_duplicates": int(np.unique(leaders).shape[0]),
            "removed": int((rows >= job.n_index).sum())}


@run_once("ranks")
def ranks(job: Job, h: int) -> dict[str, Any]:
    """The removed rows of file ``h`` with their representative and keep keys, by the representative's file
    (the sizes task ranks each cluster's members: keep_copies)."""
    lay, offs = job.layout, job.offs()
    asg = lay.read("assign", [f"g{g:06d}-f{h:06d}" for g in range(job.nfiles)], ASSIGN_SCHEMA)
    rows, cols = asg["row"].to_numpy(), job.rank_columns()
    keys = read_piece(job, h, cols).take(pa.array(rows - offs[h], pa.int64())) if cols else None
    t = pa.table({"row": asg["row"], "rep": asg["rep"], **{c: keys[c] for c in cols}})
    lay.write_split(t, file_of(asg["rep"].to_numpy(), offs), job.nfiles, "ranks", lambda g: f"h{h:06d}-f{g:06d}")
    return {"rows": t.num_rows}


def rep_positions(job: Job, h: int, reps_local: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rows, position in their cluster's keep order) of the clusters whose representatives are file
    ``h``'s rows ``reps_local``: the members from the ranks task, the representatives' own keys from the
    piece; positions as decide.cluster_size_keeps (the representative is its cluster's first)."""
    lay, offs, cols = job.layout, job.offs(), job.rank_columns()
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
    from ..lexical.index import DOCUMENTS_SCHEMA, documents_table, kept_rows

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
    scopes = []
    if cfg.cluster.scope_field is not None:  # the kept rows per scope value (the index manifest's counts)
        counts = pc.value_counts(read_piece(job, fi, ["scope"])["scope"].combine_chunks().filter(pa.array(keep)))
        scopes = [[c["values"], int(c["counts"])] for c in counts.to_pylist()]
    return {"rows": int(kept.shape[0]), "scopes": scopes}


def write_kept_file(job: Job, f, keep: np.ndarray, size: np.ndarray, cluster: np.ndarray, out: str) -> dict[str, int]:
    """File ``f``'s kept records into OUT/deduplicated/ (with --annotate, their cluster's size and id)."""
    cfg = job.cfg
    annotate = {"dup_cluster_size": size, "dup_cluster_id": cluster} if cfg.annotate else None
    return io.write_kept([f], keep, os.path.join(out, "deduplicated"), id_field=cfg.id_field, text_field=cfg.text_field,
                         on_error=cfg.on_error, file_rows=[len(keep)], read_threads=1, annotate=annotate)


def _kept_there(job: Job, fi: int, result: dict, out: str) -> bool:
    return result.get("out") == out and (not result["deduplicated"]["files"] or os.path.exists(
        io.output_path(os.path.join(out, "deduplicated"), job.files[fi])))


@run_once("kept", valid=_kept_there)
def kept(job: Job, fi: int, out: str) -> dict[str, Any]:
    """File ``fi``'s deduplicated/ file from its decisions part (a run with a source limit, once the driver
    found every source within it)."""
    d = job.layout.read_one("decisions", f"f{fi:06d}", ["keep", "cluster_size", "cluster_id"])
    keep = np.asarray(d["keep"].to_numpy(zero_copy_only=False), bool)
    return {"out": out, "deduplicated": write_kept_file(job, job.files[fi], keep, d["cluster_size"].to_numpy(),
                                                        d["cluster_id"].to_numpy(), out)}
