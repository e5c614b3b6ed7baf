"""The composition rule (``decisions.fold_removals``): a later step's removals folded into earlier decisions, checked
against a brute-force reference (chains followed one link at a time, clusters counted by hand) on random decisions
tables and random later steps, and the invariants every composed run must hold."""
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from gpu_dedup.decisions import DECISIONS_SCHEMA, fold_removals
from gpu_dedup.errors import RunError


def _lexical(rng: np.random.Generator, n: int) -> pa.Table:
    """A decisions table as the lexical stages make it: random clusters, each led by its first member (kept), the
    others removed as duplicates of it; some rows filtered (no representative), some kept copies."""
    leader = np.arange(n)
    for r in range(1, n):
        if rng.random() < 0.5:
            leader[r] = leader[rng.integers(0, r)]
    sizes = np.bincount(leader, minlength=n)
    filtered = (rng.random(n) < 0.2) & (sizes == 1)  # a filter's rejects represent nobody
    copy = (leader != np.arange(n)) & (rng.random(n) < 0.15)  # a cluster-size policy's kept copies
    keep = ((leader == np.arange(n)) | copy) & ~filtered
    reason = np.where(leader == np.arange(n), np.where(sizes[leader] > 1, "representative", "unique"),
                      np.where(copy, "kept_copy", "near_duplicate"))
    reason = np.where(filtered, "filtered", reason)
    ids = pa.array([f"d{i}" for i in range(n)])
    return pa.table({
        "id": ids, "keep": pa.array(keep), "reason": pa.array(reason.tolist(), pa.string()),
        "cluster_id": pa.array(leader, pa.int64()),
        "representative_id": ids.take(pa.array(leader, mask=filtered)),
        "matched_id": ids.take(pa.array(leader, mask=(leader == np.arange(n)) | filtered)),
        "jaccard": pa.array(np.where(leader == np.arange(n), np.nan, 0.9), from_pandas=True),
        "cluster_size": pa.array(sizes[leader], pa.int64()),
        "source": pa.array(["f"] * n)}, schema=DECISIONS_SCHEMA)


def _later_step(rng: np.random.Generator, keep: np.ndarray):
    """A step over the kept rows: each removal matches an earlier row of its input (kept or removed by it: chains)."""
    rows = np.flatnonzero(keep)
    m = rows.shape[0]
    removed = np.zeros(m, bool)
    matched = np.full(m, -1, np.int64)
    for j in range(1, m):
        if rng.random() < 0.4:
            removed[j] = True
            matched[j] = rng.integers(0, j)
    return rows, removed, matched


def _reference(table: pa.Table, rows, removed, matched) -> dict[str, list]:
    """One row at a time: follow each removal's chain to a row the step keeps; move every row represented by a
    newly removed one to that row; count clusters."""
    d = table.to_pylist()
    pos = {r["id"]: i for i, r in enumerate(d)}
    local = {int(r): j for j, r in enumerate(rows)}

    def end(row: int) -> int:
        j = local[row]
        while removed[j]:
            j = int(matched[j])
        return int(rows[j])

    final = {}
    for j, r in enumerate(rows):
        final[int(r)] = end(int(r))
    out = [dict(r) for r in d]
    for i, r in enumerate(d):
        if i in local and removed[local[i]]:
            out[i].update(keep=False, reason="semantic_duplicate", matched_id=d[int(rows[matched[local[i]]])]["id"])
            out[i]["representative_id"] = d[final[i]]["id"]
        elif r["representative_id"] is not None and final.get(pos[r["representative_id"]], pos[r["representative_id"]]) \
                != pos[r["representative_id"]]:
            out[i]["representative_id"] = d[final[pos[r["representative_id"]]]]["id"]
    def cluster(i: int) -> int:  # a moved row joins its representative's final cluster (which may have moved too)
        r = out[i]
        if r["representative_id"] is None or r["representative_id"] == d[i]["representative_id"]:
            return d[i]["cluster_id"]
        return cluster(pos[r["representative_id"]])

    clusters = [cluster(i) for i in range(len(out))]
    for r, c in zip(out, clusters):
        r["cluster_id"] = c
    return _recount(out, table)


def _recount(out: list[dict], table: pa.Table) -> dict[str, list]:
    """Cluster sizes counted by hand; a kept document of a cluster of several is its representative."""
    count: dict[int, int] = {}
    for r in out:
        count[r["cluster_id"]] = count.get(r["cluster_id"], 0) + 1
    for r in out:
        r["cluster_size"] = count[r["cluster_id"]]
        if r["keep"] and r["reason"] == "unique" and r["cluster_size"] > 1:
            r["reason"] = "representative"
        if r["keep"] and r["reason"] == "representative" and r["cluster_size"] == 1:
            r["reason"] = "unique"
    return {k: [r[k] for r in out] for k in table.column_names}


@pytest.mark.parametrize("seed", range(30))
def test_fold_equals_the_reference_and_holds_the_invariants(seed):
    rng = np.random.default_rng(seed)
    table = _lexical(rng, int(rng.integers(1, 60)))
    keep_before = np.asarray(table["keep"].to_numpy(zero_copy_only=False), bool)
    rows, removed, matched = _later_step(rng, keep_before)
    got = fold_removals(table, rows, removed, matched, "semantic_duplicate")
    assert got.schema == table.schema
    assert got.to_pydict() == _reference(table, rows, removed, matched)
    keep = np.asarray(got["keep"].to_numpy(zero_copy_only=False), bool)
    ids = got["id"].to_pylist()
    kept = {i for i, k in zip(ids, keep) if k}
    assert not (keep & ~keep_before).any(), "a later step never resurrects a removed document"
    for r in got.to_pylist():
        if r["representative_id"] is not None:
            assert r["representative_id"] in kept, f"{r['id']} names {r['representative_id']}, which is not kept"
    # every duplicate group (by representative, before) keeps a copy: its members' representatives are kept
    groups: dict[str, list[str]] = {}
    for r in table.to_pylist():
        if r["representative_id"] is not None:
            groups.setdefault(r["representative_id"], []).append(r["id"])
    final = dict(zip(ids, got["representative_id"].to_pylist()))
    for members in groups.values():
        assert any(final[m] in kept for m in members)


def test_fold_of_nothing_is_the_same_table_and_bad_steps_are_refused():
    table = _lexical(np.random.default_rng(1), 20)
    keep = np.asarray(table["keep"].to_numpy(zero_copy_only=False), bool)
    rows = np.flatnonzero(keep)
    assert fold_removals(table, rows, np.zeros(rows.shape[0], bool), np.full(rows.shape[0], -1), "x") is table
    with pytest.raises(RunError, match="only kept documents"):
        fold_removals(table, np.arange(20), np.zeros(20, bool), np.full(20, -1), "x")
    removed = np.zeros(rows.shape[0], bool)
    removed[:2] = True
    with pytest.raises(RunError, match="cycle"):  # two removals matching each other
        fold_removals(table, rows, removed, np.array([1, 0] + [-1] * (rows.shape[0] - 2)), "x")


def _reference_select(table: pa.Table, rows, removed, reasons) -> dict[str, list]:
    """A select step (a filter) removes some kept rows with no representative: the documents represented by one of
    them move to the first copy of theirs that stays, else share its verdict (its reason, matched to it)."""
    d = table.to_pylist()
    pos = {r["id"]: i for i, r in enumerate(d)}
    out = [dict(r) for r in d]
    gone = {int(rows[j]): reasons[j] for j in range(len(rows)) if removed[j]}
    for i in gone:
        out[i].update(keep=False, reason=gone[i], representative_id=None, matched_id=None, cluster_id=i)
    for r_row, verdict in gone.items():
        members = [i for i, r in enumerate(d) if r["representative_id"] == d[r_row]["id"] and i not in gone]
        stays = [i for i in members if out[i]["keep"]]
        for i in members:
            if stays:
                out[i]["representative_id"] = d[stays[0]]["id"]
                out[i]["cluster_id"] = stays[0]
            elif not out[i]["keep"]:
                out[i].update(reason=verdict, representative_id=None, matched_id=d[r_row]["id"], cluster_id=i)
    assert all(pos[r["id"]] == i for i, r in enumerate(out))
    return _recount(out, table)


@pytest.mark.parametrize("seed", range(30))
def test_a_select_step_folds_as_the_reference_says(seed):
    """A filter after dedup: a removed representative's duplicates move to a copy that stays, else share its
    verdict; every removed row names a kept representative or none (a verdict)."""
    rng = np.random.default_rng(100 + seed)
    table = _lexical(rng, int(rng.integers(1, 60)))
    keep_before = np.asarray(table["keep"].to_numpy(zero_copy_only=False), bool)
    rows = np.flatnonzero(keep_before)
    removed = rng.random(rows.shape[0]) < 0.4
    reasons = [f"rule{int(x)}" for x in rng.integers(0, 3, rows.shape[0])]
    got = fold_removals(table, rows, removed, np.full(rows.shape[0], -1), reasons, kind="select")
    assert got.to_pydict() == _reference_select(table, rows, removed, reasons)
    kept = {r["id"] for r in got.to_pylist() if r["keep"]}
    for r in got.to_pylist():
        assert r["representative_id"] is None or r["representative_id"] in kept
        if not r["keep"] and r["representative_id"] is None:
            assert r["reason"].startswith("rule") or r["reason"] == "filtered"


def test_values_and_per_row_reasons_fold_into_their_columns():
    table = _lexical(np.random.default_rng(3), 30)
    keep = np.asarray(table["keep"].to_numpy(zero_copy_only=False), bool)
    rows = np.flatnonzero(keep)
    removed = np.zeros(rows.shape[0], bool)
    removed[-1] = True
    jac = np.full(rows.shape[0], np.nan)
    jac[-1] = 0.875
    got = fold_removals(table, rows, removed, np.zeros(rows.shape[0], np.int64), ["exact"] * rows.shape[0],
                        representative=np.zeros(rows.shape[0], np.int64), values={"jaccard": jac})
    last = int(rows[-1])
    assert got["jaccard"][last].as_py() == 0.875 and got["reason"][last].as_py() == "exact"
    assert got["representative_id"][last].as_py() == table["id"][int(rows[0])].as_py()
    with pytest.raises(RunError, match="no column 'step'"):
        fold_removals(table, rows, removed, np.zeros(rows.shape[0], np.int64), "x", values={"step": ["s"] * len(rows)})


def test_a_representative_outside_the_table_stands():
    """A duplicate of an --against index's document names it (its representative is outside the decisions table):
    a later step's removals elsewhere left it without one (`run --against IX --semantic` lost the index's
    representatives of every index duplicate as soon as one semantic duplicate was removed)."""
    ids = pa.array(["b0", "c1", "c2"])
    table = pa.table({
        "id": ids, "keep": [False, True, True], "reason": ["exact_duplicate", "unique", "unique"],
        "cluster_id": pa.array([-1, 1, 2], pa.int64()), "representative_id": ["a0", "c1", "c2"],
        "matched_id": ["a0", None, None], "jaccard": pa.array([1.0, None, None], pa.float64()),
        "cluster_size": pa.array([2, 1, 1], pa.int64()), "source": ["f"] * 3}, schema=DECISIONS_SCHEMA)
    got = fold_removals(table, np.array([1, 2]), np.array([True, False]), np.array([1, -1]), "semantic_duplicate")
    assert got["representative_id"].to_pylist() == ["a0", "c2", "c2"]
    assert got["cluster_id"].to_pylist() == [-1, 2, 2] and got["cluster_size"].to_pylist() == [2, 2, 2]
    assert got["reason"].to_pylist() == ["exact_duplicate", "semantic_duplicate", "representative"]


def test_flags_of_equals_arrows_conversion_without_pandas(tmp_path):
    """``flags_of``: a keep column as numpy bools, equal to pyarrow's ``to_numpy`` on chunked, sliced and empty
    columns, nulls refused, and pandas not imported (pyarrow's conversion imports it: a Ray driver's 35 MiB)."""
    import subprocess
    import sys

    from gpu_dedup.decisions import flags_of
    from gpu_dedup.errors import DataError

    rng = np.random.default_rng(3)
    a = pa.array(rng.random(1000) < 0.3)
    chunked = pa.chunked_array([a.slice(0, 7), a.slice(7, 500), a.slice(507)])
    for col in (a, a.slice(13, 400), chunked, chunked.slice(5, 600), pa.array([], pa.bool_())):
        assert np.array_equal(flags_of(col), np.asarray(col.to_numpy(zero_copy_only=False), bool))
    with pytest.raises(DataError, match="1 nulls"):
        flags_of(pa.array([True, None]))
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"keep": [True, False, True]}), tmp_path / "k.parquet", row_group_size=2)
    # a column read from Parquet, as a driver reads one (an array built in the process imports pandas itself)
    code = ("import sys, pyarrow.parquet as pq\nfrom gpu_dedup.decisions import flags_of\n"
            f"x = flags_of(pq.ParquetFile({str(tmp_path / 'k.parquet')!r}).read()['keep'])\n"
            "print(x.tolist(), 'pandas' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[True, False, True] False"


def test_codes_of_equals_arrows_conversion_with_nulls_replaced():
    """``codes_of``: a dictionary's indices as int64 numpy codes, its nulls the given code, equal to pyarrow's
    ``fill_null`` then ``to_numpy`` (both import pandas) on sliced, narrow and empty indices."""
    from gpu_dedup.decisions import codes_of

    rng = np.random.default_rng(4)
    v = rng.integers(0, 5, 1000)
    idx = pa.array(v, pa.int32(), mask=rng.random(1000) < 0.1)
    for arr in (idx, idx.slice(17, 300), idx.cast(pa.int8()), pa.array(v, pa.int32()), pa.array([], pa.int32())):
        want = np.asarray(pc.fill_null(arr, 9).to_numpy(zero_copy_only=False), np.int64)
        got = codes_of(arr, 9)
        assert got.dtype == np.int64 and np.array_equal(got, want)
    enc = pc.dictionary_encode(pa.array(["x", None, "y", "x"]))
    assert codes_of(enc.indices, 2).tolist() == [0, 2, 1, 0]


def test_an_index_representative_leaves_the_steps_own_representatives_alone():
    """A dedup step of a recipe run --against an index: one removal's representative is the index's document (its
    id and cluster come as values, null for the other rows), another's is in the run. The latter names its own
    representative and joins its cluster (was: both columns null: a removed row naming no kept document)."""
    ids = pa.array(["a", "b", "c", "d"])
    table = pa.table({
        "id": ids, "keep": [True] * 4, "reason": ["unique"] * 4, "cluster_id": pa.array([0, 1, 2, 3], pa.int64()),
        "representative_id": ids, "matched_id": pa.nulls(4, pa.string()), "jaccard": pa.nulls(4, pa.float64()),
        "cluster_size": pa.array([1] * 4, pa.int64()), "source": ["f"] * 4}, schema=DECISIONS_SCHEMA)
    rows = np.arange(4)
    removed = np.array([False, True, False, True])
    rep = np.array([0, 0, 2, -1])  # b -> a (in the run); d -> an index's document
    values = {"representative_id": pa.array([None, None, None, "ix-7"], pa.string()),
              "cluster_id": pa.array([None, None, None, -3], pa.int64())}
    got = fold_removals(table, rows, removed, np.array([-1, 0, -1, -1]), "near_duplicate", representative=rep,
                        values=values)
    assert got["representative_id"].to_pylist() == ["a", "a", "c", "ix-7"]
    assert got["cluster_id"].to_pylist() == [0, 0, 2, -3]
    assert got["cluster_size"].to_pylist()[:2] == [2, 2]
