"""distributed/stepfold.py: a recipe's composition by per-file tasks and one fold task over the touched clusters
equals ``decisions.fold_removals`` of the whole table (the local engine's), step after step: a filter first, a
dedup whose representatives lie in other files, a filter removing representatives, SemDeDup's chains of matches
across files, a representative outside the run (an --against index's document), an empty file. The stages run
in this process, in the order the tasks run on Ray (their Ray run: tests/distributed/test_programs.py's recipes)."""
from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from gpu_dedup.decisions import base_decisions, flags_of, fold_removals, pipeline_schema, row_positions
from gpu_dedup.distributed import semfold, stepfold
from gpu_dedup.distributed.stepfold import FileSpec, StepSpec
from gpu_dedup.errors import RunError
from gpu_dedup.runtime.program import VerdictTable

FILE_ROWS = (7, 0, 9, 5)  # an empty file among them
RELPATHS = ("a.jsonl", "empty.jsonl", "b.jsonl", "sub/c.jsonl")


def _ids() -> pa.Array:
    return pa.array([f"{r[0]}{i}" for r, n in zip(RELPATHS, FILE_ROWS) for i in range(n)], pa.string())


def _verdicts(whole: pa.Table, rng, kind: str, rep: bool, outside: bool = False) -> pa.Table:
    """Random verdicts of a step over the documents ``whole`` keeps: kind "select" removes some; "dedup" removes
    some for an earlier document (its match; with ``rep`` its representative: the first kept one along the
    chain), sometimes (``outside``) for a document of an index outside the run."""
    seen = np.flatnonzero(flags_of(whole["keep"]))
    ids = whole["id"].take(pa.array(seen, pa.int64()))
    m = seen.shape[0]
    removed = rng.random(m) < 0.45
    removed[0] = False
    matched = np.full(m, -1, np.int64)
    if kind == "dedup":
        for p in np.flatnonzero(removed):
            matched[p] = rng.integers(0, p)  # an earlier document: chains end at a kept one
    root = np.where(removed, matched, np.arange(m))
    for _ in range(m):
        root = np.where(root >= 0, root[np.maximum(root, 0)], -1)
    take = pa.array(np.maximum(matched, 0), pa.int64(), mask=matched < 0)
    cols = {"id": ids, "keep": pa.array(~removed), "reason": pa.array(
        np.where(removed, "near_duplicate" if kind == "dedup" else "gopher", "unique").tolist(), pa.string()),
        "matched_id": ids.take(take), "jaccard": pa.array(np.where(removed, rng.random(m), np.nan), from_pandas=True)}
    rid = ids.take(pa.array(np.maximum(root, 0), pa.int64(), mask=~removed | (root < 0)))
    cluster = pa.nulls(m, pa.int64())
    if outside and removed.any():
        p = int(np.flatnonzero(removed)[0])
        rid = pa.array([("index-9" if i == p else x) for i, x in enumerate(rid.to_pylist())], pa.string())
        cluster = pa.array([(-5 if i == p else None) for i in range(m)], pa.int64())
    if rep:
        cols["representative_id"], cols["cluster_id"] = rid, cluster
    return pa.table(cols)


def _reference(whole: pa.Table, v: pa.Table, kind: str, rep: bool, name: str) -> pa.Table:
    """The local engine's fold of ``v`` (as ``lexical.program.decision_verdicts`` / the semantic step give it)."""
    seen = np.flatnonzero(flags_of(whole["keep"]))
    ids = v["id"].combine_chunks()
    values = {"jaccard": v["jaccard"].combine_chunks(), "step": pa.array([name] * v.num_rows, pa.string())}
    r = None
    if rep:
        r = row_positions(v["representative_id"], ids)
        out = ~flags_of(v["keep"]) & (r < 0) & flags_of(pc.is_valid(v["representative_id"]))
        if out.any():
            values["representative_id"] = pc.if_else(pa.array(out), v["representative_id"], None)
            values["cluster_id"] = pc.if_else(pa.array(out), v["cluster_id"], None)
    return fold_removals(whole, seen, ~flags_of(v["keep"]), row_positions(v["matched_id"], ids), v["reason"],
                         representative=r, kind=kind, values=values)


def _by_tasks(tmp, before: str | None, whole: pa.Table, v: pa.Table, kind: str, rep: bool, name: str,
              step: int, fold_rows: int = semfold.FOLD_ROWS) -> tuple[str, pa.Table, dict]:
    """The composition's stages over ``v`` split per file (as a step's dataset of per-file parts), the fold dealt
    in shares of about ``fold_rows`` gathered rows."""
    seen_per_file, row0 = [], 0
    keep = flags_of(whole["keep"])
    for n in FILE_ROWS:
        seen_per_file.append(int(keep[row0:row0 + n].sum()))
        row0 += n
    table = os.path.join(tmp, f"step{step}", "verdicts")
    os.makedirs(table, exist_ok=True)
    first = 0
    files, row0 = [], 0
    j = 0
    for k, (rel, n, s) in enumerate(zip(RELPATHS, FILE_ROWS, seen_per_file)):
        if s:  # a view holds no file left without a document (its files of the steps before: absent)
            pq.write_table(v.slice(first, s), os.path.join(table, f"part-{j:06d}.parquet"))
            files.append(FileSpec(k, rel, row0, j, first, s))
            j += 1
        else:
            files.append(FileSpec(k, rel, row0, -1, 0, 0))
        first += s
        row0 += n
    cols = [("id", "id"), ("keep", "keep"), ("reason", "reason"), ("matched_id", "matched_id")]
    if rep:
        cols.append(("representative_id", "representative_id"))
    vt = VerdictTable(os.path.dirname(table), "verdicts", tuple(cols), (("jaccard", "jaccard"),), representative=rep)
    after = os.path.join(tmp, f"after{step}")
    spec = StepSpec(before, after, os.path.join(tmp, f"work{step}"), name, kind, vt, False)
    n = len(files)
    stepfold.fresh(spec)  # as compose_step begins
    hit = [stepfold.touched(f, spec) for f in files]
    gather = any(h["touched"] for h in hit)
    shares = {"shares": 0}
    if gather:
        for f in files:
            stepfold.clusters(f, spec, n)
        shares = stepfold.linked(spec, n, fold_rows)
    res = [stepfold.local(f, spec, n, gather) for f in files]
    folded = [stepfold.fold(spec, n, r) for r in range(shares["shares"])]
    merged = [stepfold.merge(f, spec, shares["shares"]) for f in files]
    got = pa.concat_tables([pq.read_table(stepfold.part(after, k)) for k in range(n)])
    saw = np.concatenate([np.unpackbits(r["keep"], count=r["n"]).astype(bool) for r in merged])
    return after, got, {"removed": sum(r["removed"] for r in res), "gathered": sum(r["rows"] for r in folded),
                        "saw": saw, "shares": shares["shares"], "groups": shares.get("groups", 0)}


@pytest.mark.parametrize("fold_rows", [semfold.FOLD_ROWS, 2])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_composition_by_tasks_equals_the_whole_table_fold(tmp_path, seed, fold_rows):
    """One fold task, or (``fold_rows`` 2) the touched clusters' groups dealt over as many fold tasks as there are
    groups: the same decisions."""
    rng = np.random.default_rng(seed)
    ids = _ids()
    sources = pa.array(np.repeat(RELPATHS, FILE_ROWS).tolist(), pa.string())
    whole = base_decisions(ids, sources, False)
    before, spread = None, 0
    steps = [("filter", "select", False, False), ("dedup", "dedup", True, seed % 2 == 1),
             ("filter2", "select", False, False), ("semantic", "dedup", False, False)]
    for s, (name, kind, rep, outside) in enumerate(steps):
        v = _verdicts(whole, rng, kind, rep, outside)
        want = _reference(whole, v, kind, rep, name).cast(pipeline_schema(False))
        before, got, info = _by_tasks(str(tmp_path), before, whole, v, kind, rep, name, s, fold_rows)
        assert got.equals(want), (name, [c for c in want.column_names if not got[c].equals(want[c])])
        if info["gathered"]:
            assert 1 <= info["shares"] <= info["groups"]
            spread = max(spread, info["shares"])
        assert info["removed"] == int((~flags_of(v["keep"])).sum()) > 0
        assert np.array_equal(info["saw"], flags_of(v["keep"]))  # the step's keep flags of what it saw
        if kind == "select" and s == 0:
            assert info["gathered"] == 0  # a filter before any dedup folds every removal where it lies
        if kind == "dedup":
            assert 0 < info["gathered"] < whole.num_rows  # the touched clusters only
        whole = want
    assert whole["step"].null_count < whole.num_rows
    assert spread == 1 if fold_rows > whole.num_rows else spread > 1  # one fold task, or several


def test_a_view_that_changed_is_refused(tmp_path):
    """A step's part holding other documents than the ones the steps before it kept: a clear error."""
    rng = np.random.default_rng(0)
    whole = base_decisions(_ids(), pa.array(np.repeat(RELPATHS, FILE_ROWS).tolist(), pa.string()), False)
    v = _verdicts(whole, rng, "select", False)
    before, whole, _ = _by_tasks(str(tmp_path), None, whole, v, "select", False, "filter", 0)
    v = _verdicts(whole, rng, "dedup", True)
    v = v.set_column(0, "id", pc.binary_join_element_wise(v["id"], "x", ""))
    with pytest.raises(RunError, match="its view changed while the pipeline ran"):
        _by_tasks(str(tmp_path), before, whole, v, "dedup", True, "dedup", 1)


def test_a_file_the_step_saw_nothing_of_still_moves_with_its_clusters(tmp_path):
    """A file whose every document an earlier dedup step removed (for documents of another file) is absent from
    the next step's view; when that step removes their representatives, its rows are gathered all the same, with
    no verdict, and move as the whole table's fold moves them."""
    rng = np.random.default_rng(5)
    ids = _ids()
    whole = base_decisions(ids, pa.array(np.repeat(RELPATHS, FILE_ROWS).tolist(), pa.string()), False)
    m = whole.num_rows
    c0 = int(np.sum(FILE_ROWS[:3]))  # sub/c.jsonl's first row
    removed = np.zeros(m, bool)
    removed[c0:] = True  # every document of sub/c.jsonl, each for a document of a.jsonl
    rep = np.where(removed, np.arange(m) % 3, -1)
    v = pa.table({"id": ids, "keep": pa.array(~removed), "reason": pa.array(
        np.where(removed, "near_duplicate", "unique").tolist()), "matched_id": ids.take(pa.array(np.maximum(rep, 0),
                                                                                                mask=rep < 0)),
        "jaccard": pa.array(np.where(removed, 0.9, np.nan), from_pandas=True),
        "representative_id": ids.take(pa.array(np.maximum(rep, 0), mask=rep < 0)),
        "cluster_id": pa.nulls(m, pa.int64())})
    want = _reference(whole, v, "dedup", True, "dedup").cast(pipeline_schema(False))
    before, got, _ = _by_tasks(str(tmp_path), None, whole, v, "dedup", True, "dedup", 0)
    assert got.equals(want)
    whole = want
    seen = np.flatnonzero(flags_of(whole["keep"]))
    v = _verdicts(whole, rng, "select", False)
    gone = np.isin(seen, [0, 1, 2])  # the representatives of sub/c.jsonl's documents fail the filter
    v = v.set_column(1, "keep", pa.array(~gone)).set_column(2, "reason", pa.array(
        np.where(gone, "gopher", "unique").tolist()))
    want = _reference(whole, v, "select", False, "filter").cast(pipeline_schema(False))
    _, got, info = _by_tasks(str(tmp_path), before, whole, v, "select", False, "filter", 1)
    assert got.equals(want) and info["gathered"] >= 5 + 3
    assert set(got.slice(c0)["step"].to_pylist()) == {"filter"}  # they share the removed representatives' verdict


def test_an_interrupted_compositions_files_are_not_read(tmp_path, monkeypatch):
    """A share's file left by an earlier composition of the step that did not finish (here: rows for the empty
    file, which writes none) is not read: the step's exchange files are removed as its composition begins."""
    import shutil

    rng = np.random.default_rng(7)
    whole = base_decisions(_ids(), pa.array(np.repeat(RELPATHS, FILE_ROWS).tolist(), pa.string()), False)
    v = _verdicts(whole, rng, "dedup", True)
    want = _reference(whole, v, "dedup", True, "dedup").cast(pipeline_schema(False))
    before, got, _ = _by_tasks(str(tmp_path / "a"), None, whole, v, "dedup", True, "dedup", 0)
    assert got.equals(want)
    stale = tmp_path / "b" / "work0" / "gathered" / "share-000000"
    stale.mkdir(parents=True)
    shutil.copy(os.path.join(tmp_path, "a", "work0", "gathered", "share-000000", "part-000000.parquet"),
                stale / "part-000001.parquet")  # the empty file's part: this run writes none
    assert _by_tasks(str(tmp_path / "b"), None, whole, v, "dedup", True, "dedup", 0)[1].equals(want)
    monkeypatch.setattr(stepfold, "fresh", lambda spec: None)  # without the clean start the stale rows come back
    stale.mkdir(parents=True, exist_ok=True)
    shutil.copy(os.path.join(tmp_path, "a", "work0", "gathered", "share-000000", "part-000000.parquet"),
                stale / "part-000001.parquet")
    with pytest.raises(Exception):
        assert _by_tasks(str(tmp_path / "b"), None, whole, v, "dedup", True, "dedup", 0)[1].equals(want)
