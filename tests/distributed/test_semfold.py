"""The Ray engine's fold of the semantic removals (distributed/semfold.py) against the local engine's
``semantic.merge_decisions`` over the whole table: random lexical decisions (representatives anywhere in their
cluster, kept copies, a filter's rejects, clusters led by an --against index's document), split into files (some
empty), random semantic steps (chains of matches in any order); the stages' functions run file by file as the
tasks run them, and the concatenated parts must equal the whole-table fold, row for row."""
import itertools

import numpy as np
import pyarrow as pa
import pytest

from gpu_dedup.decisions import DECISIONS_SCHEMA
from gpu_dedup.distributed.semfold import (
    fold_gathered,
    fold_shares,
    gathered,
    merged_part,
    touched_links,
    touched_rows,
)
from gpu_dedup.errors import DataError
from gpu_dedup.semantic.config import SEMANTIC_SCHEMA
from gpu_dedup.semantic.select import merge_decisions


def _lexical(rng: np.random.Generator, n: int) -> pa.Table:
    """Lexical decisions as the engines write them: a cluster's id is its representative's row, every member names
    it; some clusters are led by an index's document (negative id, its representative outside the table)."""
    leader = np.arange(n)
    for r in range(1, n):
        if rng.random() < 0.5:
            leader[r] = leader[rng.integers(0, r)]
    for c in np.unique(leader):  # the representative is any member (a keep policy's choice)
        members = np.flatnonzero(leader == c)
        leader[members] = rng.choice(members)
    index = np.full(n, -1)
    for k, c in enumerate(np.unique(leader)):
        if rng.random() < 0.1:
            index[leader == c] = k
    sizes = np.bincount(leader, minlength=n)
    lead = (leader == np.arange(n)) & (index < 0)
    filtered = (rng.random(n) < 0.15) & (sizes[leader] == 1) & (index < 0)
    copy = ~lead & (rng.random(n) < 0.15)
    keep = (lead | copy) & ~filtered
    size = np.where(index >= 0, sizes[leader] + 1, sizes[leader])
    reason = np.where(lead, np.where(size > 1, "representative", "unique"), np.where(copy, "kept_copy",
                                                                                        "near_duplicate"))
    reason = np.where(filtered, "filtered", reason)
    ids = [f"d{i}" for i in range(n)]
    rep = [None if filtered[i] else (f"idx{index[i]}" if index[i] >= 0 else ids[leader[i]]) for i in range(n)]
    cluster = np.where(index >= 0, -1 - index, leader)
    return pa.table({
        "id": ids, "keep": pa.array(keep), "reason": pa.array(reason.tolist(), pa.string()),
        "cluster_id": pa.array(cluster, pa.int64()), "representative_id": pa.array(rep, pa.string()),
        "matched_id": pa.array([None if lead[i] or filtered[i] else rep[i] for i in range(n)], pa.string()),
        "jaccard": pa.array(np.where(lead, np.nan, 0.9), from_pandas=True),
        "cluster_size": pa.array(size, pa.int64()), "source": pa.array(["f"] * n)}, schema=DECISIONS_SCHEMA)


def _semantic(rng: np.random.Generator, ids: list[str]) -> pa.Table:
    """A semantic step's decisions of ``ids``: in a random keep order, each removal matches a document before it
    in that order (kept, or removed too: chains)."""
    m = len(ids)
    order = rng.permutation(m)
    removed = np.zeros(m, bool)
    matched: list = [None] * m
    for k in range(1, m):
        if rng.random() < 0.4:
            j = order[k]
            removed[j] = True
            matched[j] = ids[order[rng.integers(0, k)]]
    return pa.table({
        "id": pa.array(ids, pa.string()), "keep": pa.array(~removed),
        "reason": pa.array(np.where(removed, "semantic_duplicate", "unique").tolist(), pa.string()),
        "matched_id": pa.array(matched, pa.string()),
        "cosine": pa.array(rng.random(m), pa.float64(), mask=rng.random(m) < 0.2),
        "nearest_id": pa.array(matched, pa.string()), "semantic_cluster": pa.array(rng.integers(0, 4, m)),
        "centroid_cosine": pa.array(rng.random(m), pa.float32())}, schema=SEMANTIC_SCHEMA)


def _parts(table: pa.Table, bounds: list[int]) -> list[pa.Table]:
    return [table.slice(a, b - a) for a, b in itertools.pairwise(bounds)]


def _fold_by_files(lexical: pa.Table, sem: pa.Table, bounds: list[int], order: str, fold_rows: int) -> pa.Table:
    """The semfold stages' functions, one file at a time as their tasks run them, the fold in shares of about
    ``fold_rows`` rows, a share at a time."""
    lex = _parts(lexical, bounds)
    keep = np.asarray(lexical["keep"].to_numpy(zero_copy_only=False), bool)
    seen = np.cumsum(np.concatenate([[0], keep if order == "after" else np.ones_like(keep)]))
    sems = [sem.slice(int(seen[a]), int(seen[b] - seen[a])) for a, b in itertools.pairwise(bounds)]
    folded = [None] * len(lex)
    if order == "after":
        links = pa.concat_tables([touched_links(s) for s in sems])
        rows = pa.concat_tables([touched_rows(p.select(["id", "cluster_id", "cluster_size"]), links) for p in lex])
        shares, info = fold_shares(links, rows, fold_rows)
        assert info["shares"] == (min(1, info["groups"]) if fold_rows > len(lexical) else info["groups"])  # 1: a share a group
        g = pa.concat_tables([gathered(p, s, shares, a, f"file {i}")
                              for i, (p, s, a) in enumerate(zip(lex, sems, bounds))])
        share = np.asarray(g["share"].to_numpy(), np.int64)
        outs = [fold_gathered(g.filter(pa.array(share == r))) for r in range(info["shares"])]
        assert sum(r for _, r in outs) == int((~np.asarray(sem["keep"].to_numpy(zero_copy_only=False), bool)).sum())
        out = pa.concat_tables([o for o, _ in outs]) if outs else g.select(["row"])
        at = np.searchsorted(bounds, out["row"].to_numpy(), side="right") - 1
        folded = [out.filter(pa.array(at == f)) for f in range(len(lex))]
    return pa.concat_tables([merged_part(p, fo, s, a, order, f"file {i}")
                             for i, (p, fo, s, a) in enumerate(zip(lex, folded, sems, bounds))])


@pytest.mark.parametrize("fold_rows", [1 << 30, 1])
@pytest.mark.parametrize("seed", range(40))
def test_the_fold_by_files_equals_the_whole_tables(seed, fold_rows):
    """One fold task, or (``fold_rows`` 1) a fold task for each group of linked clusters: the same decisions."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 70))
    lexical = _lexical(rng, n)
    bounds = sorted([0, n, *rng.integers(0, n + 1, int(rng.integers(0, 5))).tolist()])
    for order in ("after", "beside"):
        seen = lexical["id"].filter(lexical["keep"]) if order == "after" else lexical["id"]
        sem = _semantic(rng, seen.to_pylist())
        want = merge_decisions(lexical, sem, order)
        got = _fold_by_files(lexical, sem, bounds, order, fold_rows)
        assert got.schema == want.schema
        assert got.to_pydict() == want.to_pydict(), (seed, order)


def test_a_part_whose_semantic_rows_are_not_its_kept_documents_is_refused():
    rng = np.random.default_rng(0)
    lexical = _lexical(rng, 20)
    sem = _semantic(rng, lexical["id"].filter(lexical["keep"]).to_pylist()[1:])
    with pytest.raises(DataError, match=r"semantic decisions of file a\.jsonl .* must list the documents the lexical"):
        merged_part(lexical, None, sem, 0, "after", "file a.jsonl")
