"""The lexical decisions, after pass 1: named stages over the run's per-document arrays, in data-flow order.

    rank      keep order (first | longest | min-id | max:<column>); an index's documents first
    exact     groups of equal 128-bit hashes: the first in keep order stays (short documents: this path only)
    buckets   LSH buckets of the exact-group leaders with shingles: runs of equal band keys after a sort
    verify    exact shingle sets of the candidates (documents sharing a bucket): pass 2, or pass 1's kept text
    policy    representative (remove only for a kept document at verified J >= theta) or components
    table     one decisions row per document (DECISIONS_SCHEMA)

A scoped run (ClusterConfig.scope_field) changes none of them: pass 1 mixed each scope's salt into the exact
hashes and band keys (signatures.scope_salts), so no exact group or bucket crosses scopes; ``scope_counts``
adds the per-scope counts.

Residency: every stage's arrays stay where the device computed them (NumPy on the CPU, device arrays on a GPU;
keep order is computed on the host and goes to the device once), its stats are Python ints made inside the stage,
and host copies are made in one place, when ``decisions_table`` is built. Host arrays that a stage needs besides
(reading the input again, an index's hashes) carry a ``_host`` suffix. ``decide`` composes the stages.

With an index (``against``) its documents are rows 0..I-1 in front of the input's, first in keep order and pinned
(never removed); the decisions cover the input only.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ..config import RunConfig
from ..constants import GIANT_BUCKET
from ..decisions import DECISIONS_SCHEMA, FILTERED, REASON_CODES, REASONS, keep_rank
from ..errors import ConfigError
from ..runtime.device import array_module, to_device, to_host
from ..runtime.passes import TextCache
from .exact import exact_groups, verify_groups
from .lsh import Buckets, group_buckets, partitions_for
from .policy import components_policy, representative_policy
from .signatures import Documents
from .verify import ShingleSets, candidate_sets

logger = logging.getLogger(__name__)


EXACT_VERIFY_AGAINST = ("exact_verify cannot byte-compare against an index (it stores hashes, not text); "
                        "run without --exact-verify or without --against")


@dataclass
class Decided:
    """decisions: one row per input document (DECISIONS_SCHEMA), in row order; stats: run.json's "stages";
    keep: bool (n,) host, the decisions' keep column."""

    decisions: pa.Table
    stats: dict[str, Any]
    keep: np.ndarray


@dataclass
class Ranked:
    """The run's rows (an index's first): keep order and exact hashes over all N = I + n rows."""

    n_index: int
    rank: Any            # int64 (N,): position in keep order
    exact: Any           # uint64 (N, 2)
    short: Any           # bool (N,): no shingle (fewer units than n)
    keys: Any            # BandKeys over N rows


@dataclass
class ExactGroups:
    """leader: int64 (N,), the row each row is an exact duplicate of (itself when it stays); short: bool (N,)."""

    leader: Any
    short: Any
    stats: dict[str, Any]


@dataclass
class Candidates:
    """The LSH stage: lsh_rows int64 (m,), the rows hashed into buckets (exact-group leaders with shingles,
    sorted); buckets over their local indexes 0..m-1; cand_local int64, the local indexes that share a bucket
    with another row."""

    lsh_rows: Any
    buckets: Buckets
    cand_local: Any
    stats: dict[str, Any]


def decide(cfg: RunConfig, device: str, files, docs: Documents, timings: dict[str, float], index=None,
           cache: TextCache | None = None) -> Decided:
    """The stages of the module doc, timed into ``timings`` (exact, buckets, shingle_sets, policy, decisions)."""
    t = time.perf_counter()
    if index is not None:
        index.check_new_ids(docs.ids, files, docs.file_rows, id_field=cfg.id_field, text_field=cfg.text_field,
                            on_error=cfg.on_error)
    ranked = rank_rows(cfg, device, docs, index)
    groups = exact_stage(cfg, device, files, ranked, index)
    timings["exact"] = time.perf_counter() - t

    t = time.perf_counter()
    cands = bucket_stage(cfg, device, ranked, groups)
    timings["buckets"] = time.perf_counter() - t
    stages: dict[str, Any] = {"exact": groups.stats, "lsh": cands.stats}
    if index is not None:
        stages["against_index"] = {"path": index.path, "documents": ranked.n_index,
                                   "generation": index.manifest["generation"],
                                   **({"scope": index.manifest["scope"]} if "scope" in index.manifest else {})}

    sets = None
    n = len(docs)
    from_cache = cache is not None and cache.complete and cache.rows == n
    # a cache that holds a prefix of the run serves the candidates in it; the files after it are re-read
    prefix = cache is not None and not from_cache and 0 < cache.rows <= n
    if cfg.cluster.verify and int(cands.cand_local.shape[0]):
        t = time.perf_counter()
        sets, reread = candidate_sets(cfg, device, files, cands.lsh_rows, cands.cand_local, index,
                                      cache if from_cache or prefix else None, docs.file_rows)
        timings["shingle_sets"] = time.perf_counter() - t
        text = ("kept from pass 1" if from_cache else f"rows < {cache.rows} kept from pass 1, the files after them "
                "re-read from the input" if prefix else "re-read from the input")
        stages["verify"] = {"documents": int(cands.cand_local.shape[0]), "shingle_hashes": int(sets.hashes.shape[0]),
                            "text": text, "text_bytes_read": reread}
    if cache is not None:
        stages["text_cache"] = cache.stats(bool((from_cache or prefix) and sets is not None))

    t = time.perf_counter()
    rep_local, jac_local, stages["policy"] = policy_stage(cfg, device, ranked, cands, sets)
    timings["policy"] = time.perf_counter() - t

    t = time.perf_counter()
    ids, file_index = docs.ids, docs.file_index
    if index is not None:
        ids = pa.concat_arrays([index.ids, ids])
        file_index = np.concatenate([np.zeros(ranked.n_index, np.int32), file_index])
    failed = None
    if docs.filter_pass is not None:
        failed = np.concatenate([np.zeros(ranked.n_index, bool), ~docs.filter_pass])
    decisions, stages["clusters"], keep = decisions_table(files, ids, file_index, *map(to_host, (
        groups.leader, groups.short, cands.lsh_rows, rep_local, jac_local)), ranked.n_index, failed,
        rank=to_host(ranked.rank), cluster=cfg.cluster)
    if docs.scope_codes is not None:
        stages["scope"] = scope_counts(cfg.cluster.scope_field, docs.scope_codes, docs.scope_values, keep)
    timings["decisions"] = time.perf_counter() - t
    return Decided(decisions, stages, keep)


def scope_counts(field: str, codes: np.ndarray, values: list[str], keep: np.ndarray) -> dict[str, Any]:
    """run.json's ``stages.scope`` of a scoped run: the field, and per scope value (in order of first
    appearance) its input, kept and removed documents."""
    n = len(values)
    docs = np.bincount(codes, minlength=n)
    kept = np.bincount(codes, weights=keep, minlength=n).astype(np.int64)
    return {"field": field, "scopes": {v: {"input": int(d), "kept": int(k), "removed": int(d - k)}
                                       for v, d, k in zip(values, docs, kept)}}


def rank_rows(cfg: RunConfig, device: str, docs: Documents, index=None) -> Ranked:
    """Keep order over the run's rows, with an index's documents in front (first in keep order)."""
    xp = array_module(device)
    n = len(docs)
    n_index = len(index) if index is not None else 0
    rank_host = keep_rank(cfg.cluster.keep, n=n, text_bytes=docs.text_bytes, ids=docs.ids, values=docs.keep_values)
    if docs.filter_pass is not None:
        # the prefilter's rejects come after every document it keeps, so none of them can be the document
        # that removes a kept one (gpu_dedup/filters/prefilter.py)
        order = np.lexsort((rank_host, ~docs.filter_pass))
        rank_host = np.empty(n, np.int64)
        rank_host[order] = np.arange(n, dtype=np.int64)
    exact, short, keys = docs.exact, docs.nshingles == 0, docs.keys
    if index is not None:
        rank_host = np.concatenate([np.arange(n_index, dtype=np.int64), rank_host + n_index])
        exact = xp.concatenate([to_device(index.exact, device), exact])
        short = xp.concatenate([to_device(index.short, device), short])
        keys = keys.with_prefix(index.band_keys)
    return Ranked(n_index, to_device(rank_host, device), exact, short, keys)


def exact_stage(cfg: RunConfig, device: str, files, ranked: Ranked, index=None) -> ExactGroups:
    """Exact groups (the first in keep order leads); with exact_verify, byte-compared (a second read)."""
    xp = array_module(device)
    total = int(ranked.rank.shape[0])
    n_index = ranked.n_index
    rows = xp.arange(total, dtype=xp.int64)
    leader = exact_groups(ranked.exact, ranked.rank, xp)
    if not cfg.cluster.exact:
        leader = xp.where(ranked.short, leader, rows)  # short: exact path only
    collisions = None
    if cfg.cluster.exact_verify:
        if index is not None:
            raise ConfigError(EXACT_VERIFY_AGAINST)
        leader_host, collisions = verify_groups(files, cfg, to_host(leader))  # reads the input: on the host
        leader = to_device(leader_host, device)
    stats = {"groups_with_duplicates": int(xp.unique(leader[leader != rows]).shape[0]),
             "removed": int((leader[n_index:] != rows[n_index:]).sum()),
             "short_documents": int(ranked.short[n_index:].sum()),
             "byte_verified": cfg.cluster.exact_verify, "hash_collisions": collisions}
    return ExactGroups(leader, ranked.short, stats)


def bucket_stage(cfg: RunConfig, device: str, ranked: Ranked, groups: ExactGroups) -> Candidates:
    """LSH buckets of the exact-group leaders that have shingles (all of them with near=True)."""
    xp = array_module(device)
    rows = xp.arange(groups.leader.shape[0], dtype=xp.int64)
    lsh_rows = (xp.flatnonzero((groups.leader == rows) & ~groups.short).astype(xp.int64) if cfg.cluster.near
                else xp.zeros(0, xp.int64))
    m = int(lsh_rows.shape[0])
    partitions = partitions_for(m, cfg.memory_budget)
    buckets = group_buckets(ranked.keys, lsh_rows, partitions)
    cand_local = xp.flatnonzero(xp.diff(buckets.doc_offsets) > 0).astype(xp.int64)
    largest = int(buckets.bucket_size.max()) if buckets.n_buckets else 0
    stats = {"documents": m, "buckets": buckets.n_buckets,
             "bucket_entries": int(buckets.entry_doc.shape[0]),
             "candidate_documents": int(cand_local.shape[0]),
             "largest_bucket": largest, "key_range_partitions": partitions,
             "band_keys_on_disk": ranked.keys.on_disk,
             "buckets_per_band": np.bincount(to_host(buckets.bucket_band), minlength=cfg.lsh.bands).tolist()}
    if largest >= GIANT_BUCKET:
        logger.warning("giant LSH bucket of %d documents (templated text?); work stays linear but check the "
                       "largest clusters", largest)
    return Candidates(lsh_rows, buckets, cand_local, stats)


def policy_stage(cfg: RunConfig, device: str, ranked: Ranked, cands: Candidates,
                 sets: ShingleSets | None) -> tuple[Any, Any, dict[str, Any]]:
    """The removal policy over the bucketed rows: (rep_local int64 (m,), the local index of the row each one is
    removed for, -1 when kept; jac_local float64 (m,), its Jaccard; stats)."""
    xp = array_module(device)
    m = int(cands.lsh_rows.shape[0])
    if m == 0:
        return xp.zeros(0, xp.int64), xp.zeros(0), {"removed": 0}
    lrank = ranked.rank[cands.lsh_rows]
    if cfg.cluster.policy == "representative":
        res = representative_policy(cands.buckets, sets if sets is not None else ShingleSets.empty(m, xp), lrank,
                                    cfg.cluster.threshold, cfg.cluster.max_representatives_per_bucket, device,
                                    pinned=cands.lsh_rows < ranked.n_index)
    else:
        res = components_policy(cands.buckets, lrank, cfg.cluster.threshold, sets, device)
    return res.rep, res.jaccard, res.stats


def cluster_size_keeps(kept_rep: np.ndarray, rank: np.ndarray, cluster_size: np.ndarray, removed: np.ndarray,
                       larger_than: int | None, copies: int) -> tuple[np.ndarray, np.ndarray]:
    """The duplicates a cluster-size policy keeps (ClusterConfig.remove_clusters_larger_than / keep_copies).

    kept_rep int64 (N,): each row's cluster (its kept representative's row); rank int64 (N,): keep order;
    cluster_size int64 (N,); removed bool (N,): removed by the dedup policy. Returns bool (N,) masks
    (small, copy): removed rows of clusters of at most ``larger_than`` documents, and removed rows among the
    first ``copies`` members of their cluster in keep order (the representative is its cluster's first: it
    precedes everything removed for it). Host NumPy, O(N log N) only when ``copies > 1``."""
    small = removed & (cluster_size <= larger_than) if larger_than is not None else np.zeros_like(removed)
    copy = np.zeros_like(removed)
    if copies > 1:
        order = np.lexsort((rank, kept_rep))  # by cluster, then keep order inside it
        grouped = kept_rep[order]
        idx = np.arange(order.shape[0], dtype=np.int64)
        starts = np.where(np.r_[True, grouped[1:] != grouped[:-1]], idx, 0)
        position = np.empty_like(idx)
        position[order] = idx - np.maximum.accumulate(starts)
        copy = removed & (position < copies) & ~small
    return small, copy


def decisions_table(files, ids, file_index, leader, short, lsh_rows, rep_local, jac_local, n_index=0, failed=None,
                    *, rank=None, cluster=None):
    """Merge exact groups and near-duplicate representatives into one row per document (host arrays).
    Rows before ``n_index`` are indexed documents: they give representatives but get no row. ``failed``
    (bool (n,)): documents the prefilter rejected: removed as ``filtered``, with no representative.
    ``cluster`` (ClusterConfig) with ``rank`` (int64 (n,), keep order): its cluster-size policy
    (``cluster_size_keeps``) keeps some duplicates; their other columns stay a removed duplicate's."""
    n = len(ids)
    rows = np.arange(n, dtype=np.int64)
    kept_rep = rows.copy()
    jac = np.full(n, np.nan)
    near = np.zeros(n, bool)
    removed_local = np.flatnonzero(rep_local >= 0)
    kept_rep[lsh_rows[removed_local]] = lsh_rows[rep_local[removed_local]]
    jac[lsh_rows[removed_local]] = jac_local[removed_local]
    near[lsh_rows[removed_local]] = True
    dup = leader != rows
    # an exact duplicate has its leader's shingle set, so its representative and Jaccard are the leader's
    kept_rep[dup] = kept_rep[leader[dup]]
    leader_kept = kept_rep[leader] == leader
    jac[dup] = np.where(leader_kept[dup], 1.0, jac[leader[dup]])
    jac[dup & short] = np.nan
    matched = np.where(dup, leader, np.where(near, kept_rep, -1))
    keep = kept_rep == rows
    sizes = np.bincount(kept_rep, minlength=n)
    cluster_size = sizes[kept_rep]
    # reasons as codes into REASONS (no Python string per document), later decoded by Arrow
    reason = np.zeros(n, np.int8)  # "unique"
    reason[keep & (cluster_size > 1)] = REASONS.index("representative")
    reason[dup] = REASONS.index("exact_duplicate")
    reason[dup & short] = REASONS.index("short_exact_duplicate")
    reason[near] = REASONS.index("near_duplicate")
    if cluster is not None and (cluster.remove_clusters_larger_than is not None or cluster.keep_copies > 1):
        small, copy = cluster_size_keeps(kept_rep, rank, cluster_size, ~keep, cluster.remove_clusters_larger_than,
                                         cluster.keep_copies)
        reason[small] = REASON_CODES.index("kept_small_cluster")
        reason[copy] = REASON_CODES.index("kept_copy")
        keep = keep | small | copy
    rep_mask = None
    if failed is not None:
        keep = keep & ~failed
        reason[failed] = REASON_CODES.index(FILTERED)
        matched[failed] = -1
        jac[failed] = np.nan
        rep_mask = failed[n_index:]
    relpaths = pa.array([f.relpath for f in files] or [""], pa.string())
    cluster_id = np.where(kept_rep < n_index, -1 - kept_rep, kept_rep - n_index)
    new = slice(n_index, n)
    decisions = pa.table({
        "id": ids[new],
        "keep": pa.array(keep[new]),
        "reason": pa.DictionaryArray.from_arrays(pa.array(reason[new]), pa.array(REASON_CODES)).cast(pa.string()),
        "cluster_id": pa.array(cluster_id[new], pa.int64()),
        "representative_id": ids.take(pa.array(kept_rep[new], pa.int64(), mask=rep_mask)),
        "matched_id": ids.take(pa.array(matched[new], pa.int64(), mask=matched[new] < 0)),
        "jaccard": pa.array(jac[new], pa.float64(), from_pandas=True),
        "cluster_size": pa.array(cluster_size[new], pa.int64()),
        "source": relpaths.take(pa.array(file_index[new], pa.int32())),
    }, schema=DECISIONS_SCHEMA)
    sizes_new = sizes[np.unique(kept_rep[new])] if n > n_index else np.zeros(0, np.int64)
    clusters = {"with_duplicates": int((sizes_new > 1).sum()), "largest": int(sizes_new.max()) if sizes_new.size else 0}
    return decisions, clusters, keep[new]
