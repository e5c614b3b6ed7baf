"""Scoped dedup (ClusterConfig.scope_field, --scope-field): one run equals each scope run alone."""
import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_dedup import RunConfig, deduplicate
from gpu_dedup.io import InputError

COLUMNS = ["id", "keep", "reason", "representative_id", "matched_id", "jaccard", "cluster_size"]


def _corpus(n=120, seed=3):
    """Documents drawn from a few templates (exact copies, near copies, short texts), spread over three
    snapshots so that most clusters cross scopes."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(60)]
    bases = [" ".join(rng.choice(words, 30)) for _ in range(8)]
    rows = []
    for i in range(n):
        kind = rng.integers(0, 4)
        base = bases[rng.integers(0, len(bases))]
        if kind == 0:
            text = base
        elif kind == 1:  # a near copy: one word changed
            t = base.split()
            t[rng.integers(0, len(t))] = "x"
            text = " ".join(t)
        elif kind == 2:
            text = " ".join(rng.choice(words, 30))
        else:
            text = ["short", "tiny text"][int(rng.integers(0, 2))]
        rows.append({"id": f"d{i}", "text": text, "snapshot": ["CC-2024", "CC-2023", 7][int(rng.integers(0, 3))],
                     "q": float(rng.integers(0, 5))})
    return rows


def _write_jsonl(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def _by_id(t: pa.Table) -> dict:
    d = t.select(COLUMNS).to_pylist()
    return {r["id"]: r for r in d}


def _assert_same(got: dict, want: dict) -> None:
    """The same documents with the same decisions (Jaccard exactly equal, or both unmeasured)."""
    assert set(got) == set(want)
    for k in want:
        g, w = dict(got[k]), dict(want[k])
        gj, wj = g.pop("jaccard"), w.pop("jaccard")
        assert g == w, k
        assert (gj is None and wj is None) or gj == wj, k


@pytest.mark.parametrize("overrides", [{}, {"cluster__keep": "max:q"},
                                       {"cluster__policy": "components", "cluster__keep": "longest"}])
def test_scoped_run_equals_each_scope_alone(tmp_path, overrides):
    rows = _corpus()
    src = tmp_path / "in.jsonl"
    _write_jsonl(src, rows)
    scoped = deduplicate(str(src), output_dir=str(tmp_path / "out"), cluster__scope_field="snapshot", **overrides)
    got = _by_id(scoped.decisions)
    want = {}
    scopes = {}
    for value in ("CC-2024", "CC-2023", 7):
        part = [r for r in rows if r["snapshot"] == value]
        scopes[str(value)] = part
        p = tmp_path / f"alone_{value}.jsonl"
        _write_jsonl(p, part)
        alone = deduplicate(str(p), **overrides)
        want.update(_by_id(alone.decisions))
    _assert_same(got, want)
    # the global run does cross scopes: the scope changes decisions on this corpus
    glob = _by_id(deduplicate(str(src), **overrides).decisions)
    assert any(glob[k]["keep"] != want[k]["keep"] for k in want)
    # cluster ids: the same partition of documents as the scope-alone runs
    cid = dict(zip(scoped.decisions["id"].to_pylist(), scoped.decisions["cluster_id"].to_pylist()))
    rep = dict(zip(scoped.decisions["id"].to_pylist(), scoped.decisions["representative_id"].to_pylist()))
    assert all(cid[a] == cid[rep[a]] for a in cid)
    stats = json.loads((tmp_path / "out" / "run.json").read_text())
    sc = stats["stages"]["scope"]
    assert sc["field"] == "snapshot"
    assert set(sc["scopes"]) == set(scopes)
    for value, part in scopes.items():
        kept = sum(want[r["id"]]["keep"] for r in part)
        assert sc["scopes"][value] == {"input": len(part), "kept": kept, "removed": len(part) - kept}
    html = (tmp_path / "out" / "report.html").read_text()
    assert "Scopes" in html and "CC-2023" in html


def test_scope_from_parquet_and_a_table_with_integer_and_dictionary_values(tmp_path):
    rows = _corpus(60, seed=5)
    for r in rows:
        r["snapshot"] = str(r["snapshot"])
    t = pa.Table.from_pylist(rows)
    path = tmp_path / "in.parquet"
    pq.write_table(t, path, row_group_size=17)
    a = deduplicate(str(path), cluster__scope_field="snapshot").decisions
    b = deduplicate(t.set_column(t.schema.get_field_index("snapshot"), "snapshot",
                                 t["snapshot"].dictionary_encode()), cluster__scope_field="snapshot").decisions
    jl = tmp_path / "in.jsonl"
    _write_jsonl(jl, [{**r, "snapshot": int(r["snapshot"]) if r["snapshot"] == "7" else r["snapshot"]}
                      for r in rows])
    c = deduplicate(str(jl), cluster__scope_field="snapshot").decisions
    assert a.select(COLUMNS).equals(b.select(COLUMNS))
    assert a.select(COLUMNS).equals(c.select(COLUMNS))


def test_scope_with_a_work_dir_resumes_and_equals_the_plain_run(tmp_path):
    rows = _corpus(50, seed=9)
    src = tmp_path / "in.jsonl"
    _write_jsonl(src, rows)
    plain = deduplicate(str(src), cluster__scope_field="snapshot").decisions
    wd = tmp_path / "work"
    first = deduplicate(str(src), work_dir=str(wd), memory_budget=1 << 20, cluster__scope_field="snapshot")
    again = deduplicate(str(src), work_dir=str(wd), resume=True, memory_budget=1 << 20,
                        cluster__scope_field="snapshot")
    assert again.stats["work_dir"]["pieces_reused"] == 1
    for r in (first, again):
        assert r.decisions.select(COLUMNS).equals(plain.select(COLUMNS))
    # a resume without the scope does not reuse the scoped pieces
    glob = deduplicate(str(src), work_dir=str(wd), resume=True)
    assert glob.stats["work_dir"]["pieces_reused"] == 0


def test_bad_scope_values_name_the_row(tmp_path):
    src = tmp_path / "in.jsonl"
    _write_jsonl(src, [{"id": "a", "text": "one two", "snapshot": "x"}, {"id": "b", "text": "three", "snapshot": None}])
    with pytest.raises(InputError, match=r"in.jsonl:2: scope field 'snapshot' is null"):
        deduplicate(str(src), cluster__scope_field="snapshot")
    _write_jsonl(src, [{"id": "a", "text": "one two"}])
    with pytest.raises(InputError, match=r"in.jsonl:1: scope field 'snapshot' is missing"):
        deduplicate(str(src), cluster__scope_field="snapshot", on_error="skip")
    t = pa.table({"id": ["a"], "text": ["x y"], "snapshot": [1.5]})
    with pytest.raises(InputError, match="scope values must be strings or integers"):
        deduplicate(t, cluster__scope_field="snapshot")
    t = pa.table({"id": ["a", "b"], "text": ["x y", "z"], "snapshot": ["s", None]})
    with pytest.raises(InputError, match="row 1: scope field 'snapshot' is null"):
        deduplicate(t, cluster__scope_field="snapshot")
    with pytest.raises(ValueError, match="scope_field"):
        RunConfig(cluster=__import__("gpu_dedup.config", fromlist=["ClusterConfig"]).ClusterConfig(scope_field=""))


def test_scope_on_the_device_path_equals_cpu(tmp_path):
    rows = _corpus(40, seed=11)
    src = tmp_path / "in.jsonl"
    _write_jsonl(src, rows)
    cpu = deduplicate(str(src), device="cpu", cluster__scope_field="snapshot").decisions
    gpu = deduplicate(str(src), device="cuda", cluster__scope_field="snapshot").decisions
    assert cpu.select(COLUMNS).equals(gpu.select(COLUMNS))


def test_cli_scope_flags(tmp_path):
    from gpu_dedup.cli import main

    rows = _corpus(30, seed=2)
    src = tmp_path / "in.jsonl"
    _write_jsonl(src, rows)
    out = tmp_path / "o"
    assert main(["run", str(src), "-o", str(out), "-q", "--scope-field", "snapshot"]) == 0
    assert main(["run", str(src), "-o", str(tmp_path / "o2"), "-q", "--scope-field", "s", "--scope", "global"]) != 0
    stats = json.loads((out / "run.json").read_text())
    assert stats["config"]["cluster"]["scope_field"] == "snapshot" and "scope" in stats["stages"]
    # the semantic stage is global: refused with a scope, before anything is written
    with pytest.raises(ValueError, match="--scope-field cannot be combined with --semantic"):
        deduplicate(str(src), output_dir=str(tmp_path / "r"), semantic=True, cluster__scope_field="snapshot")
    assert not os.path.exists(tmp_path / "r")


def _crawls(seed=4):
    """Two crawls of the same templates, each spread over scopes; the second has a scope the first lacks."""
    first = _corpus(90, seed=seed)
    second = [{**r, "id": "n" + r["id"]} for r in _corpus(90, seed=seed + 1)]
    for r in second[::5]:
        r["snapshot"] = "CC-2025"
    return first, second


@pytest.mark.parametrize("engine", ["local", "ray"])
@pytest.mark.parametrize("overrides", [{}, {"cluster__policy": "components", "cluster__keep": "longest"}])
def test_scoped_index_equals_an_index_per_scope(tmp_path, engine, overrides):
    """Seed 001:5-7 incrementally: crawl 1 saved as one scoped index, crawl 2 deduplicated against it, equals
    each scope run alone (its crawl-1 documents saved as that scope's own index, its crawl-2 documents against
    it); and the global incremental run differs on this corpus."""
    if engine == "ray":
        pytest.importorskip("ray")
        overrides = {**overrides, "workers": 2}
    first, second = _crawls()
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _write_jsonl(a, first)
    _write_jsonl(b, second)
    ix = tmp_path / "ix"
    r1 = deduplicate(str(a), output_dir=str(tmp_path / "o1"), save_index=str(ix), engine=engine,
                     cluster__scope_field="snapshot", **overrides)
    manifest = json.loads((ix / "manifest.json").read_text())
    assert manifest["version"] == 2 and manifest["scope"]["field"] == "snapshot"
    kept = {}
    for r, k in zip(first, r1.decisions["keep"].to_pylist()):
        kept[str(r["snapshot"])] = kept.get(str(r["snapshot"]), 0) + k
    assert manifest["scope"]["documents"] == kept and manifest["documents"] == sum(kept.values())
    r2 = deduplicate(str(b), output_dir=str(tmp_path / "o2"), against=str(ix), save_index=str(tmp_path / "ix2"),
                     engine=engine, cluster__scope_field="snapshot", **overrides)
    got = _by_id(r2.decisions)
    assert r2.stats["stages"]["against_index"]["scope"]["field"] == "snapshot"
    m2 = json.loads((tmp_path / "ix2" / "manifest.json").read_text())
    assert m2["generation"] == 2 and sum(m2["scope"]["documents"].values()) == m2["documents"]
    local = {k: v for k, v in overrides.items() if k != "workers"}
    want = {}
    for value in ("CC-2024", "CC-2023", 7, "CC-2025"):
        pa_, pb = tmp_path / f"a_{value}.jsonl", tmp_path / f"b_{value}.jsonl"
        part_a = [r for r in first if r["snapshot"] == value]
        part_b = [r for r in second if r["snapshot"] == value]
        if not part_b:
            continue
        if part_a:
            _write_jsonl(pa_, part_a)
            ixs = tmp_path / f"ix_{value}"
            deduplicate(str(pa_), output_dir=str(tmp_path / f"oa_{value}"), save_index=str(ixs), **local)
        _write_jsonl(pb, part_b)
        alone = deduplicate(str(pb), against=str(ixs) if part_a else None, **local)
        want.update(_by_id(alone.decisions))
    _assert_same(got, want)
    assert any(not w["keep"] and w["representative_id"].startswith("d") for w in want.values())  # the index removes
    glob_ix = tmp_path / "gix"
    deduplicate(str(a), output_dir=str(tmp_path / "g1"), save_index=str(glob_ix), **local)
    glob = _by_id(deduplicate(str(b), against=str(glob_ix), **local).decisions)
    assert any(glob[k]["keep"] != want[k]["keep"] for k in want)


def test_scoped_and_global_indexes_refuse_each_other(tmp_path):
    rows = _corpus(30, seed=2)
    src = tmp_path / "in.jsonl"
    _write_jsonl(src, rows)
    more = tmp_path / "more.jsonl"
    _write_jsonl(more, [{**r, "id": "m" + r["id"]} for r in rows])
    deduplicate(str(src), output_dir=str(tmp_path / "o"), save_index=str(tmp_path / "scoped"),
                cluster__scope_field="snapshot")
    deduplicate(str(src), output_dir=str(tmp_path / "g"), save_index=str(tmp_path / "global"))
    for engine in ("local", "ray"):
        with pytest.raises(ValueError, match="saved by a global run .* pass --scope-field|saved by a global run"):
            deduplicate(str(more), output_dir=str(tmp_path / "r"), engine=engine, against=str(tmp_path / "global"),
                        cluster__scope_field="snapshot")
        with pytest.raises(ValueError, match="saved by a run with --scope-field snapshot"):
            deduplicate(str(more), output_dir=str(tmp_path / "r"), engine=engine, against=str(tmp_path / "scoped"))
        with pytest.raises(ValueError, match="saved with --scope-field snapshot, this run uses --scope-field q"):
            deduplicate(str(more), output_dir=str(tmp_path / "r"), engine=engine, against=str(tmp_path / "scoped"),
                        cluster__scope_field="q")
        assert not os.path.exists(tmp_path / "r")
    # a gpu_dedup that knows only version 1 refuses the scoped index (its keys are salted)
    assert json.loads((tmp_path / "scoped" / "manifest.json").read_text())["version"] == 2
    assert json.loads((tmp_path / "global" / "manifest.json").read_text())["version"] == 1


def test_a_scoped_index_on_the_device_path_equals_cpu(tmp_path):
    first, second = _crawls(seed=8)
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _write_jsonl(a, first[:40])
    _write_jsonl(b, second[:40])
    got = {}
    for device in ("cpu", "cuda"):
        ix = tmp_path / f"ix_{device}"
        deduplicate(str(a), output_dir=str(tmp_path / f"o_{device}"), save_index=str(ix), device=device,
                    cluster__scope_field="snapshot")
        got[device] = deduplicate(str(b), against=str(ix), device=device, cluster__scope_field="snapshot").decisions
        got[device + "_index"] = pq.read_table(ix / "documents.parquet")
    assert got["cpu"].select(COLUMNS).equals(got["cuda"].select(COLUMNS))
    assert got["cpu_index"].equals(got["cuda_index"])
