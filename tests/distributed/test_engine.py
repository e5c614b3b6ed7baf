"""The Ray engine decides as the local one, byte for byte (decisions and deduplicated/), for presets, both
policies, exact-only, keep orders and partition counts; it survives killed workers and resumes a run.
One local Ray cluster of 2 CPUs serves the whole module."""
import json
import os

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import gpu_dedup
from gpu_dedup import RunConfig
from gpu_dedup.testing.evalcorpus import make_corpus

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    src = tmp_path_factory.mktemp("src")
    t = make_corpus(360, seed=31, mean_words=60, template_families=2).select(["id", "text"])
    # skewed shards, one of them JSON Lines: one holds most of the data
    pq.write_table(t.slice(0, 280), src / "a.parquet")
    pq.write_table(t.slice(280, 30), src / "b.parquet")
    pq.write_table(t.slice(0, 0), src / "b0.parquet")  # an empty file: no rows, no tasks' output rows
    with open(src / "c.jsonl", "w") as fh:
        for r in t.slice(310).to_pylist():
            fh.write(json.dumps(r) + "\n")
    return src


def _same_outputs(a, b):
    """The decisions (one decisions.parquet, or the Ray engine's default dataset decisions/ of per-file parts: the
    same table; two files, or two datasets' parts, byte for byte) and every deduplicated/ file equal byte for
    byte."""
    def parts(p):
        return [p / "decisions.parquet"] if (p / "decisions.parquet").exists() else sorted((p / "decisions").iterdir())

    pa_, pb = parts(a), parts(b)
    da, db = (pq.read_table(x[0] if x[0].name == "decisions.parquet" else x[0].parent) for x in (pa_, pb))
    assert db.equals(da) and db.schema.metadata == da.schema.metadata
    if [x.name for x in pa_] == [x.name for x in pb]:
        assert [x.read_bytes() for x in pa_] == [x.read_bytes() for x in pb]
    fa = sorted(p.relative_to(a / "deduplicated") for p in (a / "deduplicated").rglob("*") if p.is_file())
    fb = sorted(p.relative_to(b / "deduplicated") for p in (b / "deduplicated").rglob("*") if p.is_file())
    assert fa == fb and fa
    for rel in fa:
        assert (a / "deduplicated" / rel).read_bytes() == (b / "deduplicated" / rel).read_bytes(), rel
    return da


@pytest.mark.parametrize("preset,overrides,partitions", [
    ("default", {}, 3),
    ("default", {}, 6),  # more key ranges than stages.BANDS_FROM_PIECES: the bands stage's exchange
    ("default", {"cluster__policy": "components", "cluster__keep": "longest"}, 1),
    ("default", {"cluster__near": False}, 2),  # --exact-only
    ("fineweb", {"cluster__keep": "min-id"}, 4),
    ("nemo", {"cluster__policy": "representative", "cluster__verify": True, "cluster__threshold": 0.7}, 2),
])
def test_ray_equals_local(cluster, corpus, tmp_path, preset, overrides, partitions):
    cfg = RunConfig.preset(preset, progress=False, **overrides)
    local = gpu_dedup.deduplicate(str(corpus), cfg)
    res = gpu_dedup.deduplicate(str(corpus), cfg, work_dir=tmp_path / "w", engine="ray", partitions=partitions)
    assert res.decisions.equals(local.decisions)
    assert res.stats["engine"]["name"] == "ray" and res.stats["engine"]["partitions"] == partitions
    assert res.stats["counts"] == local.stats["counts"]
    if overrides.get("cluster__near") is not False:
        assert res.stats["stages"]["lsh"]["candidate_documents"] == local.stats["stages"]["lsh"]["candidate_documents"] > 0


@pytest.mark.parametrize("one_task", [0, 1 << 24])
def test_star_rounds_and_one_components_task_equal_local(cluster, corpus, tmp_path, monkeypatch, one_task):
    """The candidate graph's components by the star rounds (forced: no edge count is small enough) or by one
    task (graph.COMPONENTS_IN_ONE_TASK): the same labels, so the local engine's decisions."""
    from gpu_dedup.distributed import graph

    monkeypatch.setattr(graph, "COMPONENTS_IN_ONE_TASK", one_task)
    cfg = RunConfig(progress=False).replace(cluster__policy="components")
    local = gpu_dedup.deduplicate(str(corpus), cfg)
    res = gpu_dedup.deduplicate(str(corpus), cfg, work_dir=tmp_path / "w", engine="ray", partitions=3)
    assert res.decisions.equals(local.decisions) and local.stats["counts"]["by_reason"]["near_duplicate"] > 0
    comp = res.stats["stages"]["components"]
    assert (comp["star_steps"] > 0) == (one_task == 0)
    assert comp["method"] == ("star rounds" if one_task == 0 else "one task")


@pytest.mark.parametrize("overrides", [
    {"cluster__keep_copies": 2, "cluster__keep": "longest"},
    {"cluster__remove_clusters_larger_than": 3, "cluster__keep_copies": 3, "cluster__policy": "components",
     "cluster__keep": "min-id"},
])
def test_ray_cluster_size_policies_equal_local(cluster, corpus, tmp_path, overrides):
    """--keep-copies / --remove-clusters-larger-than: the sizes stage ranks each cluster's members, the
    write stage keeps the same duplicates as decide.cluster_size_keeps."""
    cfg = RunConfig(progress=False).replace(**overrides)
    local = gpu_dedup.deduplicate(str(corpus), cfg)
    res = gpu_dedup.deduplicate(str(corpus), cfg, work_dir=tmp_path / "w", engine="ray", partitions=3)
    assert res.decisions.equals(local.decisions)
    assert res.stats["counts"] == local.stats["counts"] and local.stats["counts"]["by_reason"]["kept_copy"] > 0
    if "cluster__remove_clusters_larger_than" in overrides:
        assert local.stats["counts"]["by_reason"]["kept_small_cluster"] > 0


def test_ray_scope_field_and_annotate_equal_local(cluster, tmp_path):
    """--scope-field (the scope's salt in every shuffle key: no task joins across scopes) with --annotate:
    decisions, the annotated deduplicated/ files byte for byte and run.json's per-scope counts equal the
    local engine's; scopes change the decisions (duplicates cross scopes)."""
    import numpy as np

    t = make_corpus(240, seed=11, mean_words=40, template_families=2).select(["id", "text"])
    rng = np.random.default_rng(4)
    t = t.append_column("snap", pa.array(rng.integers(0, 3, t.num_rows) + 2023)) \
        .append_column("q", pa.array(rng.integers(0, 4, t.num_rows).astype(float)))
    src = tmp_path / "src"
    src.mkdir()
    pq.write_table(t.slice(0, 150), src / "a.parquet")  # integer scope values, as decimal strings
    with open(src / "b.jsonl", "w") as fh:
        for r in t.slice(150).to_pylist():
            fh.write(json.dumps(r) + "\n")
    cfg = RunConfig(progress=False).replace(cluster__scope_field="snap", annotate=True, cluster__keep="max:q")
    local = gpu_dedup.deduplicate(str(src), cfg, tmp_path / "local")
    res = gpu_dedup.deduplicate(str(src), cfg, tmp_path / "ray", engine="ray", partitions=3)
    _same_outputs(tmp_path / "local", tmp_path / "ray")
    assert res.stats["counts"] == local.stats["counts"]
    runs = [json.loads((tmp_path / d / "run.json").read_text()) for d in ("local", "ray")]
    assert runs[1]["stages"]["scope"] == runs[0]["stages"]["scope"] and len(runs[0]["stages"]["scope"]["scopes"]) == 3
    unscoped = gpu_dedup.deduplicate(str(src), cfg.replace(cluster__scope_field=None, annotate=False))
    assert local.kept > unscoped.kept
    kept = pq.read_table(tmp_path / "ray" / "deduplicated" / "a.parquet")
    assert {"dup_cluster_size", "dup_cluster_id"} <= set(kept.column_names)


def test_ray_exact_verify_equals_local(cluster, corpus, tmp_path):
    """--exact-verify: every exact group's normalized bytes compared in its leader's file; no collision in
    a real corpus, so the decisions equal the local engine's and the hashes'."""
    cfg = RunConfig(progress=False).replace(cluster__exact_verify=True)
    local = gpu_dedup.deduplicate(str(corpus), cfg)
    res = gpu_dedup.deduplicate(str(corpus), cfg, work_dir=tmp_path / "w", engine="ray", partitions=2)
    assert res.decisions.equals(local.decisions)
    assert res.stats["counts"] == local.stats["counts"] and local.stats["counts"]["by_reason"]["exact_duplicate"] > 0
    want, got = local.stats["stages"]["exact"], res.stats["stages"]["exact"]
    assert {k: got[k] for k in want} == want and want["byte_verified"] and want["hash_collisions"] == 0


def test_exact_verify_tasks_split_a_collision(tmp_path, monkeypatch):
    """The exact_texts / exact_check tasks (run here in-process, where pass 1's hash can be forced to
    collide) keep a member whose bytes differ from its leader's apart, as lexical/exact.verify_groups."""
    import numpy as np

    import gpu_dedup.lexical.signatures as sig
    from gpu_dedup import io
    from gpu_dedup.distributed import options, stages
    from gpu_dedup.distributed.rows import DUPS_SCHEMA, Job

    monkeypatch.setattr(sig, "exact_hashes", lambda norm, device="cpu": np.zeros((len(norm), 2), np.uint64))
    pq.write_table(pa.table({"id": ["a", "b"], "text": ["alpha beta", "gamma delta"]}), tmp_path / "1.parquet")
    pq.write_table(pa.table({"id": ["c"], "text": ["ALPHA  beta"]}), tmp_path / "2.parquet")
    files = io.source_files(str(tmp_path / "*.parquet"))
    cfg = RunConfig(progress=False, batch_bytes=1 << 20).replace(cluster__exact_verify=True)
    job = Job(cfg, "cpu", files, str(tmp_path / "w"), 2)
    job.offsets = [0] + np.cumsum([stages.sign(job, fi)["rows"] for fi in range(2)]).tolist()
    for p in range(2):
        stages.exact(job, p)
    for fi in range(2):
        options.exact_texts(job, fi)
    checked = [options.exact_check(job, fi) for fi in range(2)]
    assert sum(c["hash_collisions"] for c in checked) == 1 and sum(c["removed"] for c in checked) == 1
    dups = job.layout.read("dups_by_row", job.dup_names(1), DUPS_SCHEMA)  # "c" (row 2) duplicates "a" (row 0)
    assert dups["row"].to_pylist() == [2] and dups["leader"].to_pylist() == [0]
    assert job.layout.read("dups_by_row", job.dup_names(0), DUPS_SCHEMA).num_rows == 0  # "b" kept apart


def test_ray_prefilter_equals_local(cluster, corpus, tmp_path):
    """The filter flags on run (a prefilter): each sign task scores and decides its file's batches; its
    rejects rank after every kept document and are removed as filtered. Decisions, deduplicated/,
    scores.parquet and run.json's prefilter equal the local engine's; a filtered copy keeps none apart."""
    from gpu_dedup.filters.config import FilterConfig

    pre = FilterConfig(rules="gopher", device="cpu", audit=0, write_filtered=False)
    cfg = RunConfig(progress=False).replace(cluster__keep="max:gopher_word_count")
    local = gpu_dedup.deduplicate(str(corpus), cfg, tmp_path / "local", prefilter=pre)
    res = gpu_dedup.deduplicate(str(corpus), cfg, tmp_path / "ray", prefilter=pre, engine="ray", partitions=2)
    d = _same_outputs(tmp_path / "local", tmp_path / "ray")
    assert res.stats["counts"] == local.stats["counts"]
    by = local.stats["counts"]["by_reason"]
    assert by["filtered"] > 0 and by["exact_duplicate"] + by["near_duplicate"] > 0
    sa, sb = pq.read_table(tmp_path / "local" / "scores.parquet"), pq.read_table(tmp_path / "ray" / "scores")
    assert sb.equals(sa) and sa.num_rows == d.num_rows
    ra, rb = (json.loads((tmp_path / x / "run.json").read_text()) for x in ("local", "ray"))
    assert rb["prefilter"] == ra["prefilter"] and rb["parquet_text_reader"] == ra["parquet_text_reader"]
    unfiltered = gpu_dedup.deduplicate(str(corpus), cfg.replace(cluster__keep="first"))
    assert not d["keep"].equals(unfiltered.decisions["keep"])


def test_span_stages_left_no_document(cluster, corpus, tmp_path, capsys):
    """`run --paragraph-dedup --substring-dedup` whose filter flags remove every document: the span stages do not
    run and the command says so, on both engines (was an AttributeError traceback after the outputs were
    written); every input id is in the decisions once, removed as filtered, the same table on both."""
    from gpu_dedup.cli import main

    args = ["run", str(corpus), "-q", "--paragraph-dedup", "--substring-dedup", "--rules", "gopher",
            "--rule-threshold", "gopher_word_count=100000:200000"]
    for engine in ("local", "ray"):
        assert main([*args, "-o", str(tmp_path / engine), "--engine", engine]) == 0
        out = capsys.readouterr().out
        assert "paragraph dedup: not run, no document was left to it" in out
        assert "substring dedup: not run, no document was left to it" in out
    da = pq.read_table(tmp_path / "local" / "decisions.parquet")
    assert pq.read_table(tmp_path / "ray" / "decisions").equals(da)
    assert da.num_rows == 360 and pc.count_distinct(da["id"]).as_py() == 360 and not any(da["keep"].to_pylist())


def test_ray_in_memory_table_keep_by_column(cluster, tmp_path):
    """An in-memory table (one file of the run) with keep=max:<column>: ties and NaNs as the local engine."""
    import numpy as np

    t = make_corpus(240, seed=7, mean_words=50, template_families=2).select(["id", "text"])
    q = np.round(np.random.default_rng(3).random(t.num_rows), 1)
    q[::7] = np.nan
    t = t.append_column("quality", pa.array(q))
    cfg = RunConfig(progress=False).replace(cluster__keep="max:quality")
    local = gpu_dedup.deduplicate(t, cfg)
    res = gpu_dedup.deduplicate(t, cfg, work_dir=tmp_path / "w", engine="ray", partitions=3)
    assert res.decisions.equals(local.decisions) and local.removed > 0


def test_killed_workers_and_resume(cluster, corpus, tmp_path):
    """kill -9 of a worker in pass 1 (sign) and in a reduce: Ray retries the tasks over their idempotent
    writes; a resumed run reuses every finished task. Outputs equal the local run's, deduplicated/ byte for byte."""
    cfg = RunConfig(progress=False)
    gpu_dedup.deduplicate(str(corpus), cfg, tmp_path / "local")
    for stage in ("sign", "exact"):
        (cluster / f"ray-{stage}").touch()
    gpu_dedup.deduplicate(str(corpus), cfg, tmp_path / "ray", engine="ray", partitions=2, resume=True)
    assert sorted(p.name for p in cluster.iterdir()) == ["ray-exact.fired", "ray-sign.fired"]
    _same_outputs(tmp_path / "local", tmp_path / "ray")
    # a run killed after some tasks: drop the markers of the later stages, resume reuses the others
    done = tmp_path / "ray" / "work" / "ray" / "done"
    for stage in ("policy", "resolve", "sizes", "write"):
        for p in (done / stage).iterdir():
            p.unlink()
    from gpu_dedup.cli import main

    assert main(["run", str(corpus), "-o", str(tmp_path / "ray"), "-q", "--engine", "ray", "--partitions", "2",
                 "--resume"]) == 0
    run = json.loads((tmp_path / "ray" / "run.json").read_text())
    assert run["work_dir"]["pieces_reused"] == 4 and run["engine"]["name"] == "ray"
    _same_outputs(tmp_path / "local", tmp_path / "ray")
    # resumed under another policy setting: pass 1 is reused, no later task of the earlier config is
    cfg9 = cfg.replace(cluster__threshold=0.9)
    res = gpu_dedup.deduplicate(str(corpus), cfg9, tmp_path / "ray", engine="ray", partitions=2, resume=True)
    assert res.decisions.equals(gpu_dedup.deduplicate(str(corpus), cfg9).decisions)
    assert res.stats["work_dir"]["pieces_reused"] == 4


def test_ray_refuses_what_it_does_not_distribute(cluster, corpus, tmp_path, capsys):
    cfg = RunConfig(progress=False)
    from gpu_dedup.filters.config import FilterConfig

    with pytest.raises(ValueError, match="DSIR cannot run inside dedup's pass 1"):
        gpu_dedup.deduplicate(str(corpus), cfg, tmp_path / "o", engine="ray", prefilter=FilterConfig(
            dsir_target=(str(corpus / "c.jsonl"),), select=0.5, audit=0))
    assert not (tmp_path / "o").exists()  # refused before anything is written
    with pytest.raises(ValueError, match="shared work directory"):
        gpu_dedup.deduplicate(str(corpus), cfg, engine="ray")
    with pytest.raises(ConnectionError, match="--address 127.0.0.1:1: no Ray cluster reachable"):
        gpu_dedup.deduplicate(str(corpus), cfg, tmp_path / "o", engine="ray", address="127.0.0.1:1")
    # a repeated id: the local engine's error, word for word
    dup = tmp_path / "dup"
    dup.mkdir()
    pq.write_table(pa.table({"id": ["a", "b"], "text": ["one two three four five six", "x y z w v u"]}),
                   dup / "1.parquet")
    pq.write_table(pa.table({"id": ["c", "a"], "text": ["seven eight nine ten eleven", "q r s t u v"]}),
                   dup / "2.parquet")
    with pytest.raises(Exception) as local_err:
        gpu_dedup.deduplicate(str(dup), cfg)
    with pytest.raises(type(local_err.value)) as ray_err:
        gpu_dedup.deduplicate(str(dup), cfg, work_dir=tmp_path / "dw", engine="ray", partitions=2)
    assert str(ray_err.value) == str(local_err.value) and "'a' (2 times" in str(ray_err.value)


def test_engine_argument_errors():
    t = pa.table({"id": ["a"], "text": ["x"]})
    with pytest.raises(ValueError, match="engine"):
        gpu_dedup.deduplicate(t, RunConfig(progress=False), engine="spark")
    with pytest.raises(ValueError, match=r"^workers=2 needs engine='ray'"):
        gpu_dedup.deduplicate(t, RunConfig(progress=False), workers=2)
    with pytest.raises(ValueError, match="replaced by Ray.*engine='ray'"):
        gpu_dedup.deduplicate(t, RunConfig(progress=False), engine="dask")


def _index_equal(a, b):
    """Two saved indexes hold the same rows and the same manifest (but its creation time and paths)."""
    ta, tb = pq.read_table(a / "documents.parquet"), pq.read_table(b / "documents.parquet")
    assert tb.equals(ta) and ta.num_rows
    ma, mb = (json.loads((p / "manifest.json").read_text()) for p in (a, b))
    for m in (ma, mb):
        m.pop("created")
        if m["parent"]:
            m["parent"].pop("path")
    assert ma == mb
    return ma


@pytest.mark.parametrize("overrides", [
    {"cluster__keep": "longest"},  # representative policy, verified: the index's shingle sets are read
    {"cluster__policy": "components", "cluster__verify": False, "cluster__keep": "min-id"},
])
def test_ray_against_and_save_index_equal_local(cluster, tmp_path, overrides, monkeypatch):
    """--save-index, then --against that index with --save-index of the next generation: the Ray engine's
    decisions and both indexes equal the local engine's; an id already in the index is refused alike."""
    t = make_corpus(300, seed=5, mean_words=50, template_families=2).select(["id", "text"])
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    new.mkdir()
    pq.write_table(t.slice(0, 160), old / "a.parquet")
    # the new documents overlap the indexed ones (exact and near duplicates of them) under ids of their own
    t2 = t.slice(110)
    t2 = t2.set_column(0, "id", pa.array([f"new-{i}" for i in t2["id"].to_pylist()]))
    pq.write_table(t2.slice(0, 120), new / "b.parquet")
    pq.write_table(t2.slice(120), new / "c.parquet")
    cfg = RunConfig(progress=False).replace(**overrides)
    kw = {"engine": "ray", "partitions": 3}
    loc = {"save_index": tmp_path / "i1l"}
    gpu_dedup.deduplicate(str(old), cfg, **loc)
    gpu_dedup.deduplicate(str(old), cfg, work_dir=tmp_path / "w1", save_index=tmp_path / "i1r", **kw)
    assert _index_equal(tmp_path / "i1l", tmp_path / "i1r")["generation"] == 1
    local = gpu_dedup.deduplicate(str(new), cfg, against=tmp_path / "i1l", save_index=tmp_path / "i2l")
    from gpu_dedup.lexical import index as index_module

    with monkeypatch.context() as m:  # the driver reads the index's manifest only: its tasks read the rows
        m.setattr(index_module, "load_index", lambda *a: pytest.fail("the Ray driver loaded the index"))
        res = gpu_dedup.deduplicate(str(new), cfg, work_dir=tmp_path / "w2", against=tmp_path / "i1l",
                                    save_index=tmp_path / "i2r", **kw)
    assert res.decisions.equals(local.decisions)
    assert pc.sum(pc.less(res.decisions["cluster_id"], 0)).as_py() > 0  # removed in favour of indexed documents
    assert res.stats["counts"] == local.stats["counts"]
    assert res.stats["stages"]["against_index"]["documents"] == local.stats["stages"]["against_index"]["documents"]
    assert _index_equal(tmp_path / "i2l", tmp_path / "i2r")["generation"] == 2
    # an id of the input that is an indexed document's: the local engine's error, word for word
    pq.write_table(t.slice(0, 3), new / "d.parquet")
    with pytest.raises(Exception) as local_err:
        gpu_dedup.deduplicate(str(new), cfg, against=tmp_path / "i1l")
    with pytest.raises(type(local_err.value)) as ray_err:
        gpu_dedup.deduplicate(str(new), cfg, work_dir=tmp_path / "w3", against=tmp_path / "i1l", **kw)
    assert str(ray_err.value) == str(local_err.value) and "already ids of indexed documents" in str(ray_err.value)


def test_ray_device_workers_equal_cpu(cluster, tmp_path):
    """--device cuda on Ray: map and reduce tasks on one DeviceWorker actor (num_gpus=1, the test cluster's
    fake GPU) under the CUDA simulator and the strict backend, the reduces sorting on the device; decisions
    and deduplicated/ equal the local engine's on the CPU."""
    from gpu_dedup.runtime.device import simulator, strict_device

    if not (simulator() and strict_device()):
        pytest.skip("needs NUMBA_ENABLE_CUDASIM=1 GPU_DEDUP_STRICT_DEVICE=1 (conftest's default)")
    t = make_corpus(16, seed=5, mean_words=20, template_families=1, family_size=6, near_dup_frac=0.3)
    src = tmp_path / "src"  # tiny: the simulator runs each GPU thread in Python
    src.mkdir()
    for k in range(2):
        pq.write_table(t.select(["id", "text"]).slice(k * 8, 8), src / f"part-{k}.parquet")
    cfg = RunConfig(progress=False).replace(minhash__num_perm=32, lsh__bands=8, lsh__rows=4)
    cpu = gpu_dedup.deduplicate(str(src), cfg.replace(device="cpu"), tmp_path / "cpu")
    res = gpu_dedup.deduplicate(str(src), cfg.replace(device="cuda"), tmp_path / "gpu", engine="ray", partitions=2)
    _same_outputs(tmp_path / "cpu", tmp_path / "gpu")
    assert cpu.removed > 0 and res.stats["array_backend"] == "strict"
    eng = res.stats["engine"]
    assert eng["device_workers"] == 1 and eng["device_worker_processes"] == 1  # one process kept every task
    assert eng["device_array_backends"] == ["strict"]  # the workers ran the device code, not NumPy


def test_filter_on_ray_equals_local(cluster, corpus, tmp_path, monkeypatch):
    """filter --engine ray: one scoring task per file; scores.parquet and filtered/ byte for byte the local
    run's, with the Gopher rules and DSIR (raw feature counts summed from the tasks)."""
    from gpu_dedup.cli import main

    # report.html (matplotlib, slow, tested in test_filter.py) is made from these same outputs
    monkeypatch.setattr("gpu_dedup.filters.report.write_filter_report", lambda out: None)

    target = tmp_path / "target.jsonl"
    target.write_text("".join(json.dumps({"text": r["text"]}) + "\n"
                              for r in make_corpus(40, seed=2, mean_words=40, template_families=0).to_pylist()))
    args = ["filter", str(corpus), "--rules", "gopher", "--dsir-target", str(target), "--select", "0.5", "-q"]
    assert main(args + ["-o", str(tmp_path / "local")]) == 0
    assert main(args + ["-o", str(tmp_path / "ray"), "--engine", "ray", "--table-layout", "file"]) == 0
    a, b = tmp_path / "local", tmp_path / "ray"
    assert (a / "scores.parquet").read_bytes() == (b / "scores.parquet").read_bytes()
    fa = sorted(p.relative_to(a / "filtered") for p in (a / "filtered").rglob("*") if p.is_file())
    assert fa and fa == sorted(p.relative_to(b / "filtered") for p in (b / "filtered").rglob("*") if p.is_file())
    for rel in fa:
        assert (a / "filtered" / rel).read_bytes() == (b / "filtered" / rel).read_bytes(), rel
    scores = pq.read_table(a / "scores.parquet")
    assert 0 < pc.sum(scores["keep"]).as_py() < scores.num_rows
    run = json.loads((b / "run.json").read_text())
    assert {k: run["engine"][k] for k in ("name", "workers", "address", "tasks")} == \
        {"name": "ray", "workers": None, "address": None, "tasks": 4}
    assert main(["filter", str(corpus), "-o", str(tmp_path / "x"), "--rules", "gopher", "--workers", "2"]) != 0


def test_filter_paragraph_cuts_on_ray_equal_local(cluster, tmp_path, monkeypatch):
    """filter --engine ray --unit paragraph --paragraph-action remove: the paragraph scores travel back from
    the scoring tasks; scores.parquet, paragraphs.parquet, removed_paragraphs.parquet and filtered/ are the
    local run's, byte for byte, and some paragraphs were cut."""
    from gpu_dedup.cli import main

    monkeypatch.setattr("gpu_dedup.filters.report.write_filter_report", lambda out: None)
    texts = make_corpus(60, seed=7, mean_words=30, template_families=0)["text"].to_pylist()
    src = tmp_path / "in"
    src.mkdir()
    junk = "qqqq zxzx wvwv kjkj " * 6
    for k in range(2):  # two files: two scoring tasks
        with open(src / f"p{k}.jsonl", "w") as fh:
            for i in range(k * 20, k * 20 + 20):
                paras = [texts[i], junk] if i % 3 == 0 else [texts[i], texts[i + 20]]
                fh.write(json.dumps({"id": f"d{i}", "text": "\n\n".join(paras)}) + "\n")
    ref = tmp_path / "ref.jsonl"
    ref.write_text("".join(json.dumps({"text": t}) + "\n" for t in
                           make_corpus(300, seed=8, mean_words=30, template_families=0)["text"].to_pylist()))
    arpa = tmp_path / "m.arpa"
    assert main(["train-lm", str(ref), "-o", str(arpa), "--order", "2", "--device", "cpu", "-q"]) == 0
    args = ["filter", str(src), "--perplexity", f"{arpa}:3000", "--unit", "paragraph", "--paragraph-action",
            "remove", "--min-paragraph-tokens", "5", "--audit", "0", "-q"]
    assert main(args + ["-o", str(tmp_path / "local")]) == 0
    assert main(args + ["-o", str(tmp_path / "ray"), "--engine", "ray"]) == 0
    a, b = tmp_path / "local", tmp_path / "ray"
    assert pq.read_table(b / "scores").equals(pq.read_table(a / "scores.parquet"))  # the Ray engine's dataset
    for name in ("paragraphs.parquet", "removed_paragraphs.parquet"):
        assert pq.read_table(b / name).equals(pq.read_table(a / name)), name
    assert pq.read_table(a / "removed_paragraphs.parquet").num_rows > 0
    for k in range(2):
        assert (a / "filtered" / f"p{k}.jsonl").read_bytes() == (b / "filtered" / f"p{k}.jsonl").read_bytes()


def test_ray_score_keep_equals_local(cluster, corpus, tmp_path):
    """--score hq=MODEL --keep max:hq_score: the sign tasks score each batch (a fastText model on a path
    every worker reads), the keep order and so the decisions equal the local engine's."""
    fasttext = pytest.importorskip("fasttext")
    import numpy as np

    rng = np.random.default_rng(1)
    words = make_corpus(60, seed=3, mean_words=30, template_families=0)["text"].to_pylist()
    train = tmp_path / "train.txt"
    train.write_text("".join(f"__label__{'hq' if i % 2 else 'lq'} {' '.join(rng.permutation(t.split())[:12])}\n"
                             for i, t in enumerate(words)))
    model = tmp_path / "hq.bin"
    fasttext.train_supervised(str(train), epoch=2, dim=4, bucket=2000, thread=1, seed=1, verbose=0) \
        .save_model(str(model))
    cfg = RunConfig(progress=False).replace(scores=(f"hq={model}",), cluster__keep="max:hq_score")
    local = gpu_dedup.deduplicate(str(corpus), cfg)
    res = gpu_dedup.deduplicate(str(corpus), cfg, work_dir=tmp_path / "w", engine="ray", partitions=2)
    assert res.decisions.equals(local.decisions) and local.removed > 0
    first = gpu_dedup.deduplicate(str(corpus), RunConfig(progress=False))
    assert not first.decisions["keep"].equals(local.decisions["keep"])  # the score changed which copy stays


def test_ray_fsspec_work_dir_equals_local(cluster, corpus, tmp_path):
    """--work-dir as an fsspec URL: every task's files, markers and the probe go through fsspec (fsspec's
    dir:: wrapper roots them elsewhere than a local path would), decisions and deduplicated/ equal the local
    engine's, and a resumed run reuses every task from the URL's markers (test_shuffle.py: file:// URLs)."""
    cfg = RunConfig(progress=False)
    gpu_dedup.deduplicate(str(corpus), cfg, tmp_path / "local")
    d = tmp_path / "dirfs"
    url = "dir::file://" + str(d)
    res = gpu_dedup.deduplicate(str(corpus), cfg, tmp_path / "ray", work_dir=url, engine="ray", partitions=2)
    _same_outputs(tmp_path / "local", tmp_path / "ray")
    root = d / str(d).lstrip("/") / "ray"  # where DirFileSystem put them; a local write would be d/ray
    assert sorted(p.name for p in (root / "done" / "write").iterdir()) == [f"{k}.json" for k in range(4)]
    assert not (d / "ray").exists() and not list(root.rglob(".*.tmp")) and not list(root.glob("probe-*"))
    assert res.stats["work_dir"]["path"] == url
    again = gpu_dedup.deduplicate(str(corpus), cfg, tmp_path / "ray", work_dir=url, engine="ray", partitions=2,
                                  resume=True)
    assert again.stats["work_dir"]["pieces_reused"] == 4 and again.decisions.equals(res.decisions)
    with pytest.raises(ValueError, match="is a URL: the local engine"):
        gpu_dedup.deduplicate(str(corpus), cfg, tmp_path / "o", work_dir="file://" + str(tmp_path / "fw"))
    with pytest.raises(ValueError, match="is a URL: pass output_dir"):
        gpu_dedup.deduplicate(str(corpus), cfg, work_dir=url, engine="ray")


def test_ray_decisions_file_equals_local_in_row_groups(cluster, corpus, tmp_path, monkeypatch):
    """decisions.parquet byte for byte the local engine's when its row groups cross the Ray engine's per-file
    parts (run.write_tables), and run.json's LSH counts, the per-band ones of the report's band-load plot
    included, equal the local engine's."""
    import math

    import gpu_dedup.runtime.run

    monkeypatch.setattr(gpu_dedup.runtime.run, "ROW_GROUP_ROWS", 64)  # 360 rows in 4 parts of 280, 30, 0, 50
    cfg = RunConfig(progress=False)
    local = gpu_dedup.deduplicate(str(corpus), cfg, tmp_path / "local")
    res = gpu_dedup.deduplicate(str(corpus), cfg, tmp_path / "ray", engine="ray", partitions=3, table_layout="file")
    _same_outputs(tmp_path / "local", tmp_path / "ray")
    assert pq.ParquetFile(tmp_path / "ray" / "decisions.parquet").metadata.num_row_groups == math.ceil(360 / 64)
    # the Ray engine's default: decisions/ of one part per input file (the empty one too), written by the tasks
    parts = gpu_dedup.deduplicate(str(corpus), cfg, tmp_path / "parts", engine="ray", partitions=3)
    assert sorted(p.name for p in (tmp_path / "parts" / "decisions").iterdir()) == \
        [f"part-{k:06d}.parquet" for k in range(4)] and not (tmp_path / "parts" / "decisions.parquet").exists()
    _same_outputs(tmp_path / "local", tmp_path / "parts")
    assert parts.decisions.equals(local.decisions) and parts.stats["decisions"]["layout"] == "dataset"
    # a run that fails after its tasks wrote their parts removes them (journaled before the tasks wrote them)
    from gpu_dedup.runtime.workdir import CHECKPOINT_HOOKS

    seen = []

    def fail(point):
        if point == "decisions":
            seen.extend(sorted(os.listdir(tmp_path / "failed" / "decisions")))
            raise RuntimeError("injected failure")

    CHECKPOINT_HOOKS.append(fail)
    try:
        with pytest.raises(RuntimeError, match="injected"):
            gpu_dedup.deduplicate(str(corpus), cfg, tmp_path / "failed", engine="ray", partitions=3, resume=True,
                                  work_dir=tmp_path / "parts" / "work")
    finally:
        CHECKPOINT_HOOKS.remove(fail)
    assert seen == [f"part-{k:06d}.parquet" for k in range(4)]
    assert not (tmp_path / "failed" / "decisions").exists() and not (tmp_path / "failed" / "deduplicated").exists()
    want, got = local.stats["stages"]["lsh"], res.stats["stages"]["lsh"]
    keys = ("buckets", "bucket_entries", "largest_bucket", "candidate_documents", "buckets_per_band")
    assert {k: got[k] for k in keys} == {k: want[k] for k in keys}
    assert len(want["buckets_per_band"]) == cfg.lsh.bands and sum(want["buckets_per_band"]) == want["buckets"] > 0
    assert (tmp_path / "ray" / "report" / "band_load.svg").exists()


def test_ray_resume_into_another_output(cluster, corpus, tmp_path):
    """--resume -o NEW_OUT after a finished run: every task is reused but the writes, which write
    NEW_OUT/deduplicated/; resumed into its own OUT again, deduplicated/ is there too."""
    cfg = RunConfig(progress=False)
    kw = {"work_dir": tmp_path / "w", "engine": "ray", "partitions": 2}
    gpu_dedup.deduplicate(str(corpus), cfg, tmp_path / "a", **kw)
    res = gpu_dedup.deduplicate(str(corpus), cfg, tmp_path / "b", resume=True, **kw)
    assert res.stats["work_dir"]["pieces_reused"] == 4
    _same_outputs(tmp_path / "a", tmp_path / "b")
    gpu_dedup.deduplicate(str(corpus), cfg, tmp_path / "a", resume=True, **kw)
    _same_outputs(tmp_path / "b", tmp_path / "a")


@pytest.mark.parametrize("line,what", [('{"id": "x", "text": nul', "malformed JSON"),
                                       ('{"id": "x", "text": null}', "is null")])
def test_ray_task_errors_are_the_local_engines(cluster, tmp_path, capsys, line, what):
    """A bad record read inside a Ray task raises the local engine's error (its class and message, naming
    the file and line), and the command line prints it as one line."""
    src = tmp_path / "src"
    src.mkdir()
    pq.write_table(pa.table({"id": ["a", "b"], "text": ["one two three four five", "six seven eight"]}),
                   src / "a.parquet")
    (src / "b.jsonl").write_text('{"id": "c", "text": "nine ten"}\n{"id": "d", "text": "eleven twelve"}\n'
                                 + line + "\n")
    cfg = RunConfig(progress=False)
    with pytest.raises(Exception) as local_err:
        gpu_dedup.deduplicate(str(src), cfg)
    with pytest.raises(Exception) as ray_err:
        gpu_dedup.deduplicate(str(src), cfg, work_dir=tmp_path / "w", engine="ray", partitions=2)
    assert type(ray_err.value) is type(local_err.value)
    assert str(ray_err.value) == str(local_err.value) and str(local_err.value).startswith("b.jsonl:3: ")
    assert what in str(ray_err.value)
    from gpu_dedup.cli import main

    capsys.readouterr()
    assert main(["run", str(src), "-o", str(tmp_path / "o"), "-q", "--engine", "ray", "--partitions", "2"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("gpu-dedup: error: b.jsonl:3: ") and err.count("\n") == 1, err


def test_url_work_dirs_leave_no_folder_here(cluster, corpus, tmp_path, monkeypatch, capsys):
    """A URL work dir is no local path: a Ray run over file://, an unknown scheme and the local engine's
    refusal leave nothing in the working directory (the errors name --work-dir)."""
    from gpu_dedup.cli import main

    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    run = ["run", str(corpus), "-q", "--engine", "ray", "--partitions", "2", "--work-dir"]
    assert main(run + ["file://" + str(tmp_path / "fw"), "-o", str(tmp_path / "o1")]) == 0
    assert (tmp_path / "fw" / "ray" / "done" / "write").is_dir() and (tmp_path / "o1" / "deduplicated").is_dir()
    assert main(run + ["nosuch://x/y", "-o", str(tmp_path / "o2")]) == 1
    assert "--work-dir 'nosuch://x/y': unsupported" in capsys.readouterr().err
    assert main(["run", str(corpus), "-q", "-o", str(tmp_path / "o3"), "--work-dir", "file://" + str(tmp_path / "lw")]) == 1
    assert "is a URL: the local engine" in capsys.readouterr().err
    assert os.listdir(here) == [] and not (tmp_path / "lw").exists()


def test_ray_partitions_beyond_the_data_are_capped(cluster, tmp_path, caplog):
    """--partitions far beyond what the input can fill (100,000 on 30 documents) is cut to the cap, with a
    warning, and decides as the local engine."""
    src = tmp_path / "src"
    src.mkdir()
    t = make_corpus(30, seed=3, mean_words=30, template_families=1).select(["id", "text"])
    pq.write_table(t, src / "a.parquet")
    cfg = RunConfig(progress=False)
    from gpu_dedup.distributed.shuffle import DEFAULT_PARTITIONS

    with caplog.at_level("WARNING", logger="gpu_dedup.distributed"):
        res = gpu_dedup.deduplicate(str(src), cfg, work_dir=tmp_path / "w", engine="ray", partitions=100_000)
    assert res.stats["engine"]["partitions"] == DEFAULT_PARTITIONS
    assert "--partitions 100000: more key ranges than" in caplog.text
    assert res.decisions.equals(gpu_dedup.deduplicate(str(src), cfg).decisions)
