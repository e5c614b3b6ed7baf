"""The Ray engine's tasks, one function per stage, each reading and writing only its partitions (shuffle.py).

    sign       per file: pass 1 (lexical/signatures.py) -> the file's piece + exact rows by hash range
               (a scoped run's piece carries its scope salts in its keys; with a prefilter, its verdict
               and the file's scores part)
    exact      per hash range: exact groups (lexical/exact.py) -> (row, leader) of every duplicate
    bands      per file: band rows (band, key, row) of its exact-group leaders with shingles, by key range
               (more than BANDS_FROM_PIECES ranges; with fewer, each buckets task reads the pieces' band keys)
    buckets    per key range: runs of equal band keys -> star edges (first row of the run, each other row)
    star, components, labels   the candidate graph's connected components (graph.py): every candidate row's
               label, the smallest row of its component (the local engine's label)
    members    per file: each candidate row's id, keep key, band keys and shingle set (pass 2 of its own
               file's rows only), sent to its component's range (label mod P)
    policy     per component range: lexical/decide.py's bucket and policy stages over those components'
               members, exactly as the local engine runs them -> (row, representative, Jaccard) removed
    resolve    per file of leaders: a duplicate's representative is its leader's (decide.decisions_table's
               rule) -> each removed row's assignment, by its file and by its representative's file
    ranks      per file (only with keep_copies > 1; options.py): the removed rows' keep keys -> their
               cluster's file
    sizes      per file of representatives: cluster sizes (and with keep_copies each member's position in
               its cluster's keep order) -> by the member's file
    write      per file: its decisions part (the cluster-size policies, decide.cluster_size_keeps, applied
               to its rows), its sources' tally (runtime/sources.py) and its deduplicated/ file (with a source
               limit: none; options.kept writes it once every source is within the limit)
    index_rows per file (--save-index; options.py): its kept rows in documents.parquet's schema

With ``--against`` the index is the run's file 0 (``options.IndexSource``): its documents are rows 0..I-1, first
in keep order, never removed (the policy pins them), and get no decisions, as in the local engine.

With ``device="cuda"`` the map and reduce tasks (sign, exact, buckets, members, policy) run on
``cluster.DeviceWorker`` actors, one per GPU, which keep their compiled kernels and CuPy memory pool from task to
task; the reduces sort on the device (exact groups, band rows, LSH buckets and the policy).

Every task takes a ``Job`` (the run's config, files, partition count, row offsets: no per-document state)
and one key, returns a small dict and leaves a done marker (``Layout.done``).
"""
from __future__ import annotations

import logging
import os
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import io
from ..decisions import DECISIONS_SCHEMA, FILTERED, REASON_CODES, REASONS
from ..lexical.bandkeys import BandKeys
from ..lexical.decide import Candidates, ExactGroups, Ranked, bucket_stage, policy_stage
from ..lexical.exact import exact_groups
from ..lexical.minhash import permutation_params
from ..lexical.signatures import compute_file, piece_of, scope_salts
from ..lexical.verify import ShingleSets, shingle_sets_pass
from ..runtime.device import array_module, to_device, to_host
from ..runtime.sources import Tally, source_labels
from ..runtime.workdir import band_column
from .graph import unique_pairs, write_edges
from .perfile import same_input
from .options import IndexSource, index_piece, rep_positions, write_kept_file
from .rows import (
    ASSIGN_SCHEMA,
    DUPS_SCHEMA,
    Job,
    piece_keep_order,
    read_piece,
    run_once,
)
from .shuffle import file_of, key_partition
from .summary import file_summary, index_sizes

logger = logging.getLogger(__name__)


def _same_input(job: Job, fi: int, result: dict) -> bool:
    """A stored sign result is reused only for the same input file (workdir's stamp rules)."""
    f = job.files[fi]
    if isinstance(f, IndexSource):
        return result.get("stamp") == f.stamp() and job.layout.exists("pieces", f"f{fi:06d}")
    return same_input(f, result, "its piece was written; recomputing it") and job.layout.exists("pieces", f"f{fi:06d}")


@run_once("sign", valid=_same_input)
def sign(job: Job, fi: int) -> dict[str, Any]:
    """Pass 1 of file ``fi``: its piece and its exact rows by hash range (module doc)."""
    from ..runtime.workdir import file_identity, input_stamp

    cfg, f = job.cfg, job.files[fi]
    pre: dict[str, Any] = {}
    if isinstance(f, IndexSource):
        piece, report, tm, stamp = index_piece(cfg, f), io.ReadReport().to_dict(), {}, f.stamp()
        if job.prefilter is not None:  # the index's documents passed their own run's filter
            piece = piece.append_column("filter_pass", pa.array(np.ones(piece.num_rows, bool)))
    else:
        before = None if f.fmt == "table" else file_identity(f)
        steps = _score_steps(cfg, job.device, job.prefilter)
        # the file's first run row (its stochastic retention draws by the run's row: driver.COUNT), else 0
        row0 = int(job.row0[fi]) if job.row0 is not None else 0
        part, report, tm = compute_file(f, cfg, job.device, permutation_params(cfg.minhash), steps=steps, row0=row0)
        piece, stamp = piece_of(part, cfg), input_stamp(f, before)
        if cfg.cluster.scope_field is not None:
            piece = _salted(piece, cfg)
        if job.prefilter is not None:
            piece, pre = _prefiltered(job, fi, piece, part, steps[0], row0)
    lay = job.layout
    lay.write(piece, "pieces", f"f{fi:06d}")
    exact = pa.table({"local": pa.array(np.arange(piece.num_rows, dtype=np.int64)),
                      "exact_lo": piece["exact_lo"], "exact_hi": piece["exact_hi"],
                      "short": pc.equal(piece["nshingles"], 0),
                      **{c: piece[c] for c in job.rank_columns()}})
    part = key_partition(piece["exact_lo"].to_numpy(), job.partitions)
    lay.write_split(exact, part, job.partitions, "exact_rows", lambda p: f"f{fi:06d}-p{p:04d}")
    # ids by hash range too, so that the exact task of a range checks them for uniqueness
    lay.write_split(piece.select(["id"]), key_partition(id_hashes(piece["id"]), job.partitions), job.partitions,
                    "ids", lambda p: f"f{fi:06d}-p{p:04d}")
    return {"rows": piece.num_rows, "report": report, "timings": tm, "stamp": stamp,
            "text_bytes": int(pc.sum(piece["text_bytes"]).as_py() or 0), **({"prefilter": pre} if pre else {})}


def _salted(piece: pa.Table, cfg) -> pa.Table:
    """A scoped run's piece with each row's scope salt (signatures.scope_salts: a function of the scope
    value alone) XORed into its exact hashes and band keys, as the local engine mixes them after pass 1:
    every key of the shuffle then carries its scope, so no exact group, bucket or component crosses
    scopes, and no task needs to know the run's other scopes."""
    _codes, _values, salt = scope_salts([piece["scope"].combine_chunks()])
    s = salt[_codes]
    words = [("exact_lo", 0), ("exact_hi", 1)] + [(band_column(b), 0) for b in range(cfg.lsh.bands)]
    for name, w in words:
        mixed = np.asarray(piece[name].to_numpy(), np.uint64) ^ s[:, w]
        piece = piece.set_column(piece.schema.get_field_index(name), name, pa.array(mixed, pa.uint64()))
    return piece


_STEPS: dict[tuple, Any] = {}


def _score_steps(cfg, device: str, prefilter=None) -> tuple:
    """The sign task's pass-1 score steps, as the local engine's (lexical/dedup._score_steps): the prefilter's
    (``job.prefilter``: a fresh step per task, since it keeps its file's scores; its models loaded once per
    worker process) and ``--score``'s (ScoreStep.for_scores: stateless, built once per worker process)."""
    from ..config import keep_column, score_columns

    kc = keep_column(cfg.cluster.keep)
    steps: list = []
    if prefilter is None and kc not in score_columns(cfg.scores):
        return ()
    from ..filters.prefilter import ScoreStep

    if prefilter is not None:
        key = ("prefilter", repr(prefilter), device)
        if key not in _STEPS:
            from ..filters.scorers import Scorers

            _STEPS[key] = Scorers.load(prefilter, device)
        steps.append(ScoreStep(prefilter, device, keep_column=kc, scorers=_STEPS[key]))
    if kc in score_columns(cfg.scores) and not any(s.keep_column == kc for s in steps):
        key = (cfg.scores, kc, device)
        if key not in _STEPS:
            _STEPS[key] = ScoreStep.for_scores(cfg.scores, device, kc)
        steps.append(_STEPS[key])
    return tuple(steps)


def _prefiltered(job: Job, fi: int, piece: pa.Table, part, step, row0: int = 0) -> tuple[pa.Table, dict[str, Any]]:
    """The piece with the prefilter's verdict (column filter_pass) and the file's scores part
    (scores/f<fi>: file rows, ``row0``, the rows the step scored from, taken off; the driver adds the file's offset
    when it writes OUT/scores.parquet)."""
    from ..decisions import value_counts

    passed = np.concatenate(part.filter_pass) if part.filter_pass else np.zeros(0, bool)
    piece = piece.append_column("filter_pass", pa.array(passed, pa.bool_()))
    scores = step.table(piece.num_rows, row0) if piece.num_rows else None  # an empty file has no scored batch
    if scores is not None and row0:
        i = scores.schema.get_field_index("row")
        scores = scores.set_column(i, scores.schema.field(i), pc.subtract(scores["row"], pa.scalar(row0, pa.int64())))
    if scores is not None:
        job.layout.write(scores, "scores", f"f{fi:06d}")
    return piece, {"scored": scores is not None, "describe": step.describe(),
                   "by_reason": value_counts(scores["reason"]) if scores is not None else {}}


def id_hashes(ids) -> np.ndarray:
    """uint64 (n,): a 64-bit hash of each id's UTF-8 bytes (what splits ids by hash range for their check): the
    first XXH64 of the exact kernel (ops.core.exact_hashes, on the CPU), one call over the ids' Arrow buffers
    (a Python loop over them took 50 ms of a sign task's 400 per 100,000 ids). ``ids``: a string array, no nulls."""
    from ..io.text import arrow_text_buffers
    from ..ops.core import exact_hashes

    data, offsets = arrow_text_buffers(ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids)
    return np.ascontiguousarray(exact_hashes("cpu", data, offsets)[:, 0])




@run_once("exact")
def exact(job: Job, p: int) -> dict[str, Any]:
    """Exact groups of hash range ``p``: the first in keep order leads (lexical/exact.py)."""
    cfg, lay, offs = job.cfg, job.layout, job.offs()
    tables = []
    for fi in range(job.nfiles):
        t = lay.read("exact_rows", [f"f{fi:06d}-p{p:04d}"])
        tables.append(t.append_column("row", pc.add(t["local"], pa.scalar(int(offs[fi]), pa.int64()))))
    t = pa.concat_tables(tables).combine_chunks()  # by file, then local row: in row order
    rows = t["row"].to_numpy()
    h = np.stack([t["exact_lo"].to_numpy(), t["exact_hi"].to_numpy()], axis=1).astype(np.uint64) \
        if t.num_rows else np.zeros((0, 2), np.uint64)
    short = t["short"].to_numpy(zero_copy_only=False).astype(bool)
    xp = array_module(job.device)
    order = piece_keep_order(cfg, t, job.n_index)
    leader_l = to_host(exact_groups(to_device(h, job.device), to_device(order, job.device), xp))
    if not cfg.cluster.exact:
        leader_l = np.where(short, leader_l, np.arange(t.num_rows))
    dup = np.flatnonzero(leader_l != np.arange(t.num_rows))
    leaders = rows[leader_l[dup]]
    dups = pa.table({"row": pa.array(rows[dup]), "leader": pa.array(leaders), "short": pa.array(short[dup])},
                    schema=DUPS_SCHEMA)
    f = job.nfiles
    lay.write_split(dups, file_of(rows[dup], offs), f, "dups_by_row", lambda g: f"p{p:04d}-f{g:06d}")
    lay.write_split(dups, file_of(leaders, offs), f, "dups_by_leader", lambda g: f"p{p:04d}-f{g:06d}")
    ids = lay.read("ids", [f"f{fi:06d}-p{p:04d}" for fi in range(job.nfiles)])["id"]
    unique = len(ids) == 0 or pc.count_distinct(ids, mode="all").as_py() == len(ids)
    return {"duplicate_ids": not unique,
            "groups_with_duplicates": int(np.unique(leaders).shape[0]),
            "removed": int((rows[dup] >= job.n_index).sum()), "short_documents": int(short[rows >= job.n_index].sum())}


_BANDS = pa.schema([("band", pa.int32()), ("key", pa.uint64()), ("row", pa.int64())])

# up to this many key ranges each buckets task reads every file's band keys from the pieces, and no bands stage runs:
# its exchange moves 48 bytes per band row (a key read, 20 bytes written and read), P such tasks 8·P (1 M documents
# on the 2-core VM: 1.1 s of bands tasks, 354 MB of files, docs/scale.md); beyond, the P reads cost more
BANDS_FROM_PIECES = 4


def _lsh_rows(job: Job, fi: int, piece: pa.Table) -> np.ndarray:
    """bool (rows of file ``fi``): the rows that go to LSH, exact-group leaders with shingles (none without near)."""
    lsh = piece["nshingles"].to_numpy() > 0
    dups = job.layout.read("dups_by_row", job.dup_names(fi), DUPS_SCHEMA)
    lsh[dups["row"].to_numpy() - job.offs()[fi]] = False
    if not job.cfg.cluster.near:
        lsh[:] = False
    return lsh


@run_once("bands")
def bands(job: Job, fi: int) -> dict[str, Any]:
    """Band rows of file ``fi``'s exact-group leaders with shingles, by key range (more than BANDS_FROM_PIECES)."""
    nb, offs = job.cfg.lsh.bands, job.offs()
    piece = read_piece(job, fi, ["nshingles"] + [band_column(b) for b in range(nb)])
    local = np.flatnonzero(_lsh_rows(job, fi, piece))
    keys = np.concatenate([piece[band_column(b)].to_numpy()[local] for b in range(nb)]).astype(np.uint64) \
        if piece.num_rows else np.zeros(0, np.uint64)
    band = np.repeat(np.arange(nb, dtype=np.int32), local.shape[0])
    row = np.tile(local + offs[fi], nb)
    # band by band (buckets reads each band's share), the keys of a band in any order
    t = pa.table({"band": pa.array(band), "key": pa.array(keys), "row": pa.array(row)}, schema=_BANDS)
    job.layout.write_split(t, key_partition(keys, job.partitions), job.partitions, "band_rows",
                           lambda p: f"f{fi:06d}-p{p:04d}")
    return {"lsh_rows": int(local.shape[0])}


def _band_sources(job: Job, p: int) -> list:
    """Per file, ``band -> (keys, rows)``: its LSH rows whose band key lies in key range ``p`` (global rows),
    from the bands stage's files, or with at most BANDS_FROM_PIECES ranges from the piece itself."""
    lay, nb, offs = job.layout, job.cfg.lsh.bands, job.offs()
    sources = []
    for fi in range(job.nfiles):
        if job.partitions <= BANDS_FROM_PIECES:  # memory-mapped, zero-copy: one band column at a time
            piece = read_piece(job, fi, ["nshingles"] + [band_column(b) for b in range(nb)])
            lsh = _lsh_rows(job, fi, piece)

            def of(b, piece=piece, lsh=lsh, row0=offs[fi]):
                keys = piece[band_column(b)].to_numpy()
                local = np.flatnonzero(lsh & (key_partition(keys, job.partitions) == p) if job.partitions > 1 else lsh)
                return keys[local], local + row0
            sources.append(of)
            continue
        t = lay.read_one("band_rows", f"f{fi:06d}-p{p:04d}")
        band, key, row = (t[c].to_numpy() for c in ("band", "key", "row")) if t.num_rows else \
            (np.zeros(0, np.int32), np.zeros(0, np.uint64), np.zeros(0, np.int64))
        if band.shape[0] > 1 and (band[1:] < band[:-1]).any():  # not by band: stably so (any key order is fine)
            by = np.argsort(band, kind="stable")
            band, key, row = band[by], key[by], row[by]
        bounds = np.searchsorted(band, np.arange(nb + 1))
        sources.append(lambda b, bd=bounds, k=key, r=row: (k[bd[b]:bd[b + 1]], r[bd[b]:bd[b + 1]]))
    return sources


@run_once("buckets")
def buckets(job: Job, p: int) -> dict[str, Any]:
    """Buckets of key range ``p`` (runs of >= 2 equal (band, key)) -> star edges to each run's first row. One band
    at a time, as lsh.group_buckets: the task's transient memory is one band's share of the range, reused, not
    fresh arrays the size of the range (their first touches cost more than the sort: 3.0 s vs 0.7 s per task of
    10 M band rows, docs/scale.md)."""
    nb = job.cfg.lsh.bands
    sources = _band_sources(job, p)
    firsts, others = [], []
    per_band = np.zeros(nb, np.int64)
    entries, largest = 0, 0
    for b in range(nb):
        got = [of(b) for of in sources]
        key = np.concatenate([k for k, _ in got]) if got else np.zeros(0, np.uint64)
        row = np.concatenate([r for _, r in got]) if got else np.zeros(0, np.int64)
        c = key.shape[0]
        if c < 2:
            continue
        # any order of equal keys (each bucket's first row is found by its minimum below): numpy's SIMD sort of
        # uint64 (as lsh.group_buckets), CuPy's with device="cuda"
        order = np.argsort(key) if job.device != "cuda" else \
            to_host(array_module(job.device).argsort(to_device(key, job.device)))
        key, row = key[order], row[order]
        start = np.ones(c, bool)
        start[1:] = key[1:] != key[:-1]
        run = np.cumsum(start) - 1
        sizes = np.bincount(run)
        big = sizes >= 2
        first = np.minimum.reduceat(row, np.flatnonzero(start))  # each bucket's smallest row
        member = (row != first[run]) & big[run]
        firsts.append(first[run[member]])
        others.append(row[member])
        per_band[b] = int(big.sum())
        entries += int(sizes[big].sum())
        largest = max(largest, int(sizes[big].max()) if per_band[b] else 0)
    a, b_ = unique_pairs(np.concatenate(firsts) if firsts else np.zeros(0, np.int64),
                         np.concatenate(others) if others else np.zeros(0, np.int64))
    write_edges(job, a, b_, "edges_0", f"p{p:04d}")
    # the local engine's LSH counts (decide.bucket_stage: buckets are runs of >= 2), summed by the driver
    return {"buckets": int(per_band.sum()), "bucket_entries": entries, "largest_bucket": largest,
            "edges": int(a.shape[0]), "buckets_per_band": [int(k) for k in per_band]}


@run_once("members")
def members(job: Job, fi: int) -> dict[str, Any]:
    """File ``fi``'s candidate rows with what the policy needs (module doc), by component range."""
    cfg, lay, offs = job.cfg, job.layout, job.offs()
    lab = lay.read_one("labels", f"f{fi:06d}")
    rows = lab["row"].to_numpy()
    local = rows - offs[fi]
    cols = ["id"] + [c for c in job.rank_columns() if c != "id"] + [band_column(b) for b in range(cfg.lsh.bands)]
    t = read_piece(job, fi, cols).take(pa.array(local, pa.int64()))
    t = t.append_column("row", pa.array(rows)).append_column("label", lab["label"])
    reread = 0
    if cfg.cluster.verify and rows.shape[0]:
        src = job.files[fi]
        if isinstance(src, IndexSource):
            from ..lexical.index import Index

            sets = Index(src.path, src.manifest, None, None, None, None).shingle_sets(local)
        else:
            sets, reread = shingle_sets_pass(cfg, job.device, [src], local, np.arange(local.shape[0]))
        sizes = np.asarray(to_host(sets.sizes), np.int64)
        starts = np.repeat(np.asarray(to_host(sets.offsets), np.int64), sizes)
        within = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        values = np.asarray(to_host(sets.hashes))[starts + within]
        list_off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32 if sizes.sum() < 2**31 else np.int64)
        arr = (pa.ListArray if list_off.dtype == np.int32 else pa.LargeListArray).from_arrays(
            pa.array(list_off), pa.array(values, pa.uint64()))
        t = t.append_column("shingles", arr)
    part = np.asarray(lab["label"].to_numpy(), np.int64) % job.partitions
    lay.write_split(t, part, job.partitions, "members", lambda p: f"f{fi:06d}-p{p:04d}")
    return {"candidates": int(rows.shape[0]), "text_bytes_read": int(reread)}


_NEAR = pa.schema([("row", pa.int64()), ("rep", pa.int64()), ("jaccard", pa.float64()), ("rep_id", pa.string())])


@run_once("policy")
def policy(job: Job, p: int) -> dict[str, Any]:
    """The local engine's bucket and policy stages over the members of the components in range ``p``."""
    cfg, lay, offs = job.cfg, job.layout, job.offs()
    names = [f"f{fi:06d}-p{p:04d}" for fi in range(job.nfiles)]
    tables = [t for t in (lay.read("members", [n]) for n in names) if t.num_rows]
    if not tables:
        near = _NEAR.empty_table()
        stats: dict[str, Any] = {"removed": 0}
    else:
        t = pa.concat_tables(tables).combine_chunks()  # by file then row: in row order
        m = t.num_rows
        rank = piece_keep_order(cfg, t, job.n_index)
        keys = np.stack([t[band_column(b)].to_numpy() for b in range(cfg.lsh.bands)], axis=1).astype(np.uint64)
        # the index's rows come first (sorted by row): the policy pins them as the local engine does
        pinned = int(np.searchsorted(t["row"].to_numpy(), job.n_index))
        dev = job.device
        ranked = Ranked(pinned, to_device(rank, dev), None, None,
                        BandKeys(cfg.lsh.bands, matrix=to_device(keys, dev), device=dev))
        groups = ExactGroups(to_device(np.arange(m, dtype=np.int64), dev), to_device(np.zeros(m, bool), dev), {})
        cands: Candidates = bucket_stage(cfg, dev, ranked, groups)
        sets = None
        if cfg.cluster.verify:
            lst = t["shingles"].combine_chunks()
            off = np.asarray(lst.offsets.to_numpy(), np.int64)
            off = off - off[0]  # a slice's offsets point into its parent's values; flatten() is the slice's
            sets = ShingleSets(*(to_device(a, dev) for a in (np.asarray(lst.flatten().to_numpy(), np.uint64),
                                                             off[:-1].copy(), np.diff(off))))
        rep_local, jac_local, stats = policy_stage(cfg, dev, ranked, cands, sets)
        rep_local, jac_local = to_host(rep_local), to_host(jac_local)
        removed = np.flatnonzero(rep_local >= 0)
        rows = t["row"].to_numpy()
        near = pa.table({"row": pa.array(rows[removed]), "rep": pa.array(rows[rep_local[removed]]),
                         "jaccard": pa.array(jac_local[removed], pa.float64()),
                         "rep_id": t["id"].take(pa.array(rep_local[removed]))}, schema=_NEAR)
        stats = {k: v for k, v in stats.items() if isinstance(v, (int, float))}
        stats["bucket_stats"] = {"documents": m, "candidate_components": stats.get("candidate_components", 0)}
    lay.write_split(near, file_of(near["row"].to_numpy(), offs), job.nfiles, "near", lambda g: f"p{p:04d}-f{g:06d}")
    return stats


@run_once("resolve")
def resolve(job: Job, g: int) -> dict[str, Any]:
    """Assignments of the removed rows whose leader (exact) or self (near) lies in file ``g``."""
    lay, offs, f, parts = job.layout, job.offs(), job.nfiles, job.partitions
    near = lay.read("near", [f"p{p:04d}-f{g:06d}" for p in range(parts)], _NEAR)
    dups = lay.read("dups_by_leader", job.dup_names(g), DUPS_SCHEMA)
    ids = read_piece(job, g, ["id"])["id"].combine_chunks()
    n = len(ids)
    # per row of file g: its near representative (-1: kept), Jaccard and representative id
    rep = np.full(n, -1, np.int64)
    jac = np.full(n, np.nan)
    nl = near["row"].to_numpy() - offs[g]
    rep[nl] = near["rep"].to_numpy()
    jac[nl] = near["jaccard"].to_numpy()
    # representative ids: the near one's where removed, the row's own where kept
    rid_src = pa.chunked_array([ids, near["rep_id"]]).combine_chunks()
    rid_idx = np.arange(n, dtype=np.int64)
    rid_idx[nl] = n + np.arange(nl.shape[0])
    ld = dups["leader"].to_numpy() - offs[g]
    short = dups["short"].to_numpy(zero_copy_only=False).astype(bool)
    kept_leader = rep[ld] < 0
    d_rep = np.where(kept_leader, dups["leader"].to_numpy(), rep[ld])
    d_jac = np.where(kept_leader, 1.0, jac[ld])
    d_jac[short] = np.nan
    d_reason = np.where(short, REASONS.index("short_exact_duplicate"), REASONS.index("exact_duplicate"))
    asg = pa.table({
        "row": pa.array(np.concatenate([near["row"].to_numpy(), dups["row"].to_numpy()])),
        "rep": pa.array(np.concatenate([near["rep"].to_numpy(), d_rep])),
        "reason": pa.array(np.concatenate([np.full(near.num_rows, REASONS.index("near_duplicate")), d_reason]),
                           pa.int8()),
        "jaccard": pa.array(np.concatenate([near["jaccard"].to_numpy(), d_jac]), pa.float64()),
        "rep_id": pa.concat_arrays([near["rep_id"].combine_chunks(), rid_src.take(pa.array(rid_idx[ld]))]),
        "matched_id": pa.concat_arrays([near["rep_id"].combine_chunks(), ids.take(pa.array(ld, pa.int64()))]),
    }, schema=ASSIGN_SCHEMA)
    lay.write_split(asg, file_of(asg["row"].to_numpy(), offs), f, "assign", lambda h: f"g{g:06d}-f{h:06d}")
    lay.write_split(asg.select(["row", "rep"]), file_of(asg["rep"].to_numpy(), offs), f, "assign_by_rep",
                    lambda h: f"g{g:06d}-f{h:06d}")
    return {"removed": asg.num_rows}


def _scope_counts(scope: pa.Array, keep: np.ndarray) -> list[list]:
    """[[scope value, input, kept], ...] of one file's rows, in order of first appearance."""
    enc = scope.dictionary_encode()
    codes = np.asarray(enc.indices.to_numpy(zero_copy_only=False), np.int64)
    k = len(enc.dictionary)
    docs = np.bincount(codes, minlength=k)
    kept = np.bincount(codes, weights=keep, minlength=k).astype(np.int64)
    return [[v, int(d), int(c)] for v, d, c in zip(enc.dictionary.to_pylist(), docs, kept)]


_SIZES = pa.schema([("row", pa.int64()), ("size", pa.int64()), ("position", pa.int64())])


@run_once("sizes")
def sizes(job: Job, h: int) -> dict[str, Any]:
    """Cluster sizes of the representatives in file ``h`` -> every member's size (and with keep_copies its
    position in the cluster's keep order), by the member's file."""
    lay, offs = job.layout, job.offs()
    t = lay.read("assign_by_rep", [f"g{g:06d}-f{h:06d}" for g in range(job.nfiles)],
                 pa.schema([("row", pa.int64()), ("rep", pa.int64())]))
    rep = t["rep"].to_numpy()
    local = rep - offs[h]
    n = int(offs[h + 1] - offs[h])
    count = np.bincount(local, minlength=n) + 1 if rep.shape[0] else np.ones(n, np.int64)
    reps = np.unique(local)
    rows = np.concatenate([t["row"].to_numpy(), reps + offs[h]])
    size = np.concatenate([count[local], count[reps]]).astype(np.int64)
    position = np.zeros(rows.shape[0], np.int64)
    if job.cfg.cluster.keep_copies > 1 and rows.shape[0]:
        prow, ppos = rep_positions(job, h, reps)
        srt = np.argsort(prow)
        position = ppos[srt[np.searchsorted(prow[srt], rows)]]  # every row of ``rows`` is in ``prow``, once
    out = pa.table({"row": pa.array(rows, pa.int64()), "size": pa.array(size), "position": pa.array(position)},
                   schema=_SIZES)
    lay.write_split(out, file_of(rows, offs), job.nfiles, "sizes", lambda g: f"h{h:06d}-f{g:06d}")
    return {"clusters": int(reps.shape[0]), "largest": int(count.max()) if reps.shape[0] else 0,
            **({"index_sizes": index_sizes(count[reps])} if h < job.first else {})}  # the report's index clusters


def _wrote(job: Job, fi: int, result: dict, out: str | None, *_) -> bool:
    """A stored write result is reused only for the same OUT (an absolute path), its deduplicated/ file
    still there: a run resumed into another -o (or an OUT emptied since) writes its own."""
    if result.get("out") != out or "sources" not in result:
        return False
    if out is None or not result["deduplicated"]["files"]:
        return True
    return os.path.exists(io.output_path(os.path.join(out, "deduplicated"), job.files[fi]))


@run_once("write", valid=_wrote)
def write(job: Job, fi: int, out: str | None, source_field: str | None = None,
          thresholds: dict | None = None, table: str = "decisions") -> dict[str, Any]:
    """File ``fi``'s decisions part (DECISIONS_SCHEMA, as decide.decisions_table; into the work dir's ``table``:
    "lexical" when a semantic stage folds its removals in next, driver.SEMANTIC), its sources' tally (by
    ``source_field``, read again from the file, or by the file; ``sources.Tally`` with ``thresholds``) and its
    deduplicated/ file (``out``: OUT as an absolute path, or None: none)."""
    cfg, lay, offs = job.cfg, job.layout, job.offs()
    piece = read_piece(job, fi, ["id", "text_bytes", "words"])
    n, row0 = piece.num_rows, int(offs[fi])
    asg = lay.read("assign", [f"g{g:06d}-f{fi:06d}" for g in range(job.nfiles)], ASSIGN_SCHEMA)
    sz = lay.read("sizes", [f"h{h:06d}-f{fi:06d}" for h in range(job.nfiles)], _SIZES)
    ids = piece["id"].combine_chunks()
    keep = np.ones(n, bool)
    reason = np.zeros(n, np.int8)
    cluster = np.arange(row0, row0 + n, dtype=np.int64) - job.n_index
    jac = np.full(n, np.nan)
    size = np.ones(n, np.int64)
    position = np.zeros(n, np.int64)
    size[sz["row"].to_numpy() - row0] = sz["size"].to_numpy()
    position[sz["row"].to_numpy() - row0] = sz["position"].to_numpy()
    reason[size > 1] = REASONS.index("representative")
    al = asg["row"].to_numpy() - row0
    keep[al] = False
    reason[al] = asg["reason"].to_numpy()
    cl = cfg.cluster
    if cl.remove_clusters_larger_than is not None or cl.keep_copies > 1:
        # decide.cluster_size_keeps on this file's rows: the same masks, from sizes and positions
        removed = ~keep
        small = removed & (size <= cl.remove_clusters_larger_than) if cl.remove_clusters_larger_than is not None \
            else np.zeros(n, bool)
        copy = removed & (position < cl.keep_copies) & ~small if cl.keep_copies > 1 else np.zeros(n, bool)
        reason[small] = REASON_CODES.index("kept_small_cluster")
        reason[copy] = REASON_CODES.index("kept_copy")
        keep = keep | small | copy
    rep = asg["rep"].to_numpy()
    cluster[al] = np.where(rep < job.n_index, -1 - rep, rep - job.n_index)  # decide.decisions_table's ids
    jac[al] = asg["jaccard"].to_numpy()
    # ids: the row's own (kept) or its assignment's, as one take over [ids, assigned ids]
    src = np.arange(n, dtype=np.int64)
    src[al] = n + np.arange(al.shape[0])
    msrc = np.full(n, -1, np.int64)
    msrc[al] = np.arange(al.shape[0])
    failed = None
    if job.prefilter is not None:  # decide.decisions_table: the prefilter's rejects, whatever their duplicates
        failed = ~np.asarray(read_piece(job, fi, ["filter_pass"])["filter_pass"].to_numpy(zero_copy_only=False), bool)
        keep &= ~failed
        reason[failed] = REASON_CODES.index(FILTERED)
        msrc[failed] = -1
        jac[failed] = np.nan
    rep_ids = pa.concat_arrays([ids, asg["rep_id"].combine_chunks()]).take(pa.array(src, pa.int64(), mask=failed))
    matched = asg["matched_id"].combine_chunks().take(pa.array(msrc, pa.int64(), mask=msrc < 0))
    f = job.files[fi]
    decisions = pa.table({
        "id": ids, "keep": pa.array(keep),
        "reason": pa.DictionaryArray.from_arrays(pa.array(reason), pa.array(REASON_CODES)).cast(pa.string()),
        "cluster_id": pa.array(cluster, pa.int64()), "representative_id": rep_ids, "matched_id": matched,
        "jaccard": pa.array(jac, pa.float64(), from_pandas=True), "cluster_size": pa.array(size, pa.int64()),
        "source": pa.array([f.relpath] * n, pa.string()),
    }, schema=DECISIONS_SCHEMA)
    lay.write(decisions, table, f"f{fi:06d}")
    return _written(job, fi, decisions, piece, out, source_field, thresholds)


def _written(job: Job, fi: int, decisions: pa.Table, piece: pa.Table, out: str | None, source_field: str | None,
             thresholds: dict | None) -> dict[str, Any]:
    """What file ``fi``'s ``decisions`` give the run (the write and recount tasks' result): its deduplicated/ file
    (``out``: OUT as an absolute path, or None: none), its sources' tally (with the cosine of a semantic
    removal), counts per reason, kept text bytes and words (``piece``'s), clusters and report.html's
    aggregates."""
    cfg, f, n = job.cfg, job.files[fi], decisions.num_rows
    keep = np.asarray(decisions["keep"].to_numpy(zero_copy_only=False), bool)
    size = decisions["cluster_size"].to_numpy()
    reason = np.asarray(pc.index_in(decisions["reason"], pa.array(REASON_CODES)).to_numpy(zero_copy_only=False))
    written = {"files": 0, "rows_written": 0}
    if out is not None and cfg.write_deduplicated:
        written = write_kept_file(job, f, keep, size, decisions["cluster_id"].to_numpy(), out)
    tally = Tally(thresholds)
    tally.add(source_labels([f], source_field, cfg, decisions["source"]), keep, step="dedup",
              reason=decisions["reason"], jaccard=decisions["jaccard"],
              cosine=decisions["cosine"] if "cosine" in decisions.column_names else None, ids=decisions["id"],
              matched=decisions["matched_id"])
    tb, words = piece["text_bytes"].to_numpy(), piece["words"].to_numpy()
    scopes = {}
    if cfg.cluster.scope_field is not None:
        # this file's scopes in order of first appearance: the driver merges them in file order
        scopes = {"scopes": _scope_counts(read_piece(job, fi, ["scope"])["scope"].combine_chunks(), keep)}
    return {**scopes, "sources": tally.to_dict(), "out": out, "rows": n,
            "by_reason": {r: int((reason == i).sum()) for i, r in enumerate(REASON_CODES)},
            "kept": int(keep.sum()), "text_bytes": [int(tb.sum()), int(tb[keep].sum())],
            "words": [int(words.sum()), int(words[keep].sum())], "deduplicated": written,
            "largest_cluster": int(size.max()) if n else 0,
            "clusters_with_duplicates": int((reason == REASON_CODES.index("representative")).sum()),
            "summary": file_summary(decisions, int(job.offsets[fi]) - job.n_index)}  # report.html's aggregates


@run_once("recount")
def recount(job: Job, fi: int, source_field: str | None = None, thresholds: dict | None = None) -> dict[str, Any]:
    """File ``fi``'s ``_written`` of its final decisions part (a semantic stage's removals folded in by the driver,
    driver.SEMANTIC); its deduplicated/ file is the kept stage's (options.kept)."""
    d = job.layout.read_one("decisions", f"f{fi:06d}")
    return _written(job, fi, d, read_piece(job, fi, ["text_bytes", "words"]), None, source_field, thresholds)

