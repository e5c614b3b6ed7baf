"""Paragraph, substring and semantic dedup and a whole recipe on the Ray engine write the local engine's outputs byte
for byte (inputs with repeated spans, null texts, an empty file, duplicate ids, nested folders, both formats); a
Bloom paragraph run on Ray decides exactly; killed workers and --resume are survived. One local Ray cluster of 2
CPUs serves the whole module (slow on a 2-core machine: run single tests with -k)."""
import json
import logging
import os
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from gpu_dedup import RunConfig
from gpu_dedup.decisions import read_table
from gpu_dedup.distributed.paragraph import paragraph_dedup_ray
from gpu_dedup.distributed.semantic import semantic_dedup_ray
from gpu_dedup.distributed.substring import substring_dedup_ray
from gpu_dedup.paragraph.bloom import BloomConfig
from gpu_dedup.paragraph.dedup import ParagraphConfig, paragraph_dedup
from gpu_dedup.runtime.program import Env
from gpu_dedup.substring.config import SubstringConfig
from gpu_dedup.testing.evalcorpus import make_corpus

RAY = Env(engine="ray")

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    faults = tmp_path_factory.mktemp("faults")
    os.environ["GPU_DEDUP_RAY_FAULTS"] = str(faults)  # inherited by the workers (gpu_dedup.testing.faults)
    os.environ.setdefault("RAY_agent_register_timeout_ms", "180000")  # a loaded 2-core machine
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"worker_process_setup_hook": "gpu_dedup.testing.faults.ray_worker_faults"})
    yield faults
    ray.shutdown()
    os.environ.pop("GPU_DEDUP_RAY_FAULTS", None)


WORDS = ["fox", "dog", "quick", "brown", "lazy", "jumps", "over", "the", "river", "stone", "cloud", "green"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Repeated paragraphs and spans (a few template families), a null text, an id used twice, an empty file, a
    file in a sub-folder, JSON Lines and Parquet (several row groups), a numeric column with NaNs and ties."""
    src = tmp_path_factory.mktemp("src")
    t = make_corpus(220, seed=13, mean_words=45, template_families=3).select(["id", "text"])
    rng = np.random.default_rng(2)
    paras = [" ".join(rng.choice(WORDS, 9)) + f" paragraph {i}." for i in range(6)]
    texts = [x + "\n" + "\n".join(rng.choice(paras, int(rng.integers(0, 3)))) for x in t["text"].to_pylist()]
    texts[9] = None
    ids = t["id"].to_pylist()
    ids[12] = ids[4]  # a duplicate id: paragraph and substring dedup do not require unique ids
    q = rng.integers(0, 3, t.num_rows).astype(float)  # ties
    q[::6] = np.nan
    t = pa.table({"id": ids, "text": texts, "q": q})
    pq.write_table(t.slice(0, 120), src / "a.parquet", row_group_size=50)
    (src / "sub").mkdir()
    pq.write_table(t.slice(0, 0), src / "sub" / "empty.parquet")
    with open(src / "sub" / "c.jsonl", "w") as fh:
        for r in t.slice(120).to_pylist():
            fh.write(json.dumps(r) + "\n")
    return src


def _files(d):
    return sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.is_file())


# the tables a Ray run writes as datasets of per-file parts by default (distributed/outputs.py)
DATASETS = ("decisions", "scores", "semantic_decisions", "removed_spans", "paragraph_docs", "substring_spans",
            "substring_docs")


def same_bytes(a, b, names):
    """Each of ``names`` (files, or folders compared file by file) equal byte for byte in ``a`` and ``b``."""
    for name in names:
        pa_, pb = a / name, b / name
        if pa_.is_dir():
            fa, fb = _files(pa_), _files(pb)
            assert fa == fb and fa, name
            for rel in fa:
                assert (pa_ / rel).read_bytes() == (pb / rel).read_bytes(), f"{name}/{rel}"
        elif not pb.exists() and pb.with_suffix("").is_dir() and pb.stem in DATASETS:
            # the Ray engine's per-document table as a dataset of per-file parts (its default layout): the same
            # rows, order, values and schema as the local engine's one file
            ta, tb = pq.read_table(pa_), pq.read_table(pb.with_suffix(""))
            assert tb.equals(ta) and tb.schema.metadata == ta.schema.metadata, name
        else:
            assert pa_.read_bytes() == pb.read_bytes(), name


PARAGRAPH_OUT = ("removed_spans.parquet", "paragraph_docs.parquet", "paragraph_deduplicated")


def same_tables(local, ray, tables, layout, nfiles=3):
    """The span tables of a Ray run over ``corpus`` in ``layout`` against the local run's files: with "dataset"
    (the default) OUT/<table>/ holds one part per input file (its empty one's too: no row, no row group), in
    the local engine's row groups, whose tables concatenated in input-file order equal the local file (values,
    schema and its metadata), and no one-file table; with "file" the local file byte for byte, and no folder."""
    from gpu_dedup.runtime.run import ROW_GROUP_ROWS

    for t in tables:
        one = local / f"{t}.parquet"
        if layout == "file":
            assert (ray / f"{t}.parquet").read_bytes() == one.read_bytes() and not (ray / t).exists(), t
            continue
        parts = sorted((ray / t).iterdir())
        assert [p.name for p in parts] == [f"part-{k:06d}.parquet" for k in range(nfiles)], t
        assert not (ray / f"{t}.parquet").exists(), t
        got = [pq.read_table(p) for p in parts]
        assert [pq.ParquetFile(p).metadata.num_row_groups for p in parts] == \
            [-(-g.num_rows // ROW_GROUP_ROWS) for g in got], t
        want = pq.read_table(one)
        both = pa.concat_tables(got)
        assert both.equals(want) and both.schema.metadata == want.schema.metadata, t
        assert got[2].num_rows == 0, t  # sub/empty.parquet, the third input file: its part holds no row


@pytest.mark.parametrize("kw, layout", [
    (dict(action="keep-first"), "dataset"),
    (dict(action="remove-all", split="sentence"), "dataset"),
    (dict(action="keep-first", split="span3", min_paragraph_bytes=8), "file"),
])
def test_paragraph_on_ray_equals_local_exact(cluster, corpus, tmp_path, caplog, kw, layout):
    """Every key range decided exactly: the Bloom mode on Ray equals the local exact mode, and says so in a log
    line and paragraph_dedup.json. Its tables: per-file parts the cut tasks write (the dataset layout, Ray's
    default), or with --table-layout file the local engine's files byte for byte."""
    local = paragraph_dedup(str(corpus), ParagraphConfig(on_error="skip", bloom=BloomConfig(mode="exact"), **kw),
                            tmp_path / "local")
    env = RAY if layout == "dataset" else Env(engine="ray", table_layout="file")
    with caplog.at_level(logging.INFO, logger="gpu_dedup"):
        res = paragraph_dedup_ray(str(corpus), ParagraphConfig(on_error="skip", **kw), tmp_path / "ray", env,
                                  partitions=3)
    same_tables(tmp_path / "local", tmp_path / "ray", ("removed_spans", "paragraph_docs"), layout)
    same_bytes(tmp_path / "local", tmp_path / "ray", PARAGRAPH_OUT)
    assert res.stats["tables"]["paragraph_docs"]["layout"] == layout
    assert res.stats["counts"] == local.stats["counts"] and local.stats["counts"]["units_removed"] > 0
    assert res.stats["read"]["skipped"] == local.stats["read"]["skipped"] and local.stats["read"]["skipped"]
    assert res.stats["seen_set"]["mode"] == "exact" and res.stats["seen_set"]["mode_asked"] == "bloom"
    assert res.stats["engine"]["name"] == "ray" and res.stats["engine"]["partitions"] == 3
    assert "decides every key range exactly" in caplog.text


def test_paragraph_bloom_on_ray_has_no_false_positive(cluster, tmp_path):
    """A Bloom filter far over its design count removes new paragraphs locally (false positives); on Ray the same
    settings remove exactly what the exact mode removes."""
    texts = [f"unique paragraph number {i} with enough bytes to count\nshared boilerplate line that repeats"
             for i in range(300)]
    src = pa.table({"id": [f"d{i}" for i in range(300)], "text": texts})
    tiny = BloomConfig(expected_items=4, fp_rate=0.2)  # saturated after the first batch
    bloom = paragraph_dedup(src, ParagraphConfig(bloom=tiny, batch_bytes=2000), tmp_path / "bloom")
    exact = paragraph_dedup(src, ParagraphConfig(bloom=BloomConfig(mode="exact"), batch_bytes=2000),
                            tmp_path / "exact")
    ray_run = paragraph_dedup_ray(src, ParagraphConfig(bloom=tiny, fp_sample=0.5, batch_bytes=2000),
                                  tmp_path / "ray", RAY)
    assert bloom.stats["counts"]["units_removed"] > exact.stats["counts"]["units_removed"] == 299
    same_bytes(tmp_path / "exact", tmp_path / "ray", PARAGRAPH_OUT)
    assert ray_run.stats["fp_audit"]["false_removals"] == 0 and not ray_run.stats["fp_audit"]["measured"]


SUBSTRING_OUT = ("substring_spans.parquet", "substring_docs.parquet", "substring_deduplicated")


@pytest.mark.parametrize("kw, layout", [
    (dict(min_tokens=12), "dataset"),                                   # one chunk: one suffix-array task
    (dict(min_tokens=10, chunk_tokens=2500, keep="max:q"), "file"),     # chunk pairs, ties and NaN in the keep column
    (dict(min_tokens=8, chunk_tokens=1500, keep="longest", batch_bytes=4000), "dataset"),
    (dict(min_tokens=8, memory_budget=1 << 20, keep="min-id"), "dataset"),  # the budget chooses the chunks
])
def test_substring_on_ray_equals_local(cluster, corpus, tmp_path, kw, layout):
    """The local engine's cuts; the tables as per-file parts the cut tasks write (Ray's default) or with
    --table-layout file the local engine's files byte for byte."""
    cfg = SubstringConfig(on_error="skip", **kw)
    from gpu_dedup.substring.dedup import substring_dedup

    local = substring_dedup(str(corpus), cfg, tmp_path / "local")
    env = RAY if layout == "dataset" else Env(engine="ray", table_layout="file")
    res = substring_dedup_ray(str(corpus), cfg, tmp_path / "ray", env)
    same_tables(tmp_path / "local", tmp_path / "ray", ("substring_spans", "substring_docs"), layout)
    same_bytes(tmp_path / "local", tmp_path / "ray", SUBSTRING_OUT)
    assert res.stats["tables"]["substring_spans"]["layout"] == layout
    assert res.stats["counts"] == local.stats["counts"] and local.stats["counts"]["spans_cut"] > 0
    assert res.stats["seams"] == local.stats["seams"]
    for k in ("chunks", "suffix_arrays", "positions", "largest_array", "positions_in_repeats"):
        assert res.stats["suffix_arrays"][k] == local.stats["suffix_arrays"][k], k
    assert res.stats["engine"]["tasks"] == 2 * 3 + 1 + res.stats["suffix_arrays"]["suffix_arrays"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    pytest.importorskip("sentence_transformers")
    from gpu_dedup.testing.models import build_random_model

    return build_random_model(tmp_path_factory.mktemp("tiny") / "model", words=WORDS, max_seq_length=48)


@pytest.fixture(scope="module")
def unique_corpus(corpus, tmp_path_factory):
    """The corpus with distinct ids and no null text (what semantic and lexical dedup require), exact copies
    added."""
    src = tmp_path_factory.mktemp("usrc")
    a = pq.read_table(corpus / "a.parquet")
    a = a.set_column(0, "id", pa.array([f"a{i}" for i in range(a.num_rows)])).filter(pa.array(
        [x is not None for x in a["text"].to_pylist()]))
    pq.write_table(pa.concat_tables([a, a.slice(0, 20).set_column(0, "id", pa.array([f"x{i}" for i in range(20)]))]),
                   src / "a.parquet", row_group_size=40)
    (src / "sub").mkdir()
    shutil.copy(corpus / "sub" / "empty.parquet", src / "sub" / "empty.parquet")
    shutil.copy(corpus / "sub" / "c.jsonl", src / "sub" / "c.jsonl")
    return src


@pytest.mark.parametrize("kw", [
    dict(keep="hard", n_clusters=4),
    dict(keep="random", n_clusters=3, sample_fraction=0.5),    # k-means fitted on the seeded sample in one task
    dict(keep="max:q", n_clusters=1, chain="kept"),             # ties and NaN in the keep column
    dict(keep="easy", n_clusters=5, kmeans_backend="torch"),
])
def test_semantic_on_ray_equals_local(cluster, unique_corpus, model, tmp_path, kw):
    from gpu_dedup.semantic import SemanticConfig, semantic_dedup

    cfg = SemanticConfig(model=model, eps=0.05, **kw)
    run = RunConfig(batch_bytes=3000)  # several read batches per file: the forward passes are the local ones
    local = semantic_dedup(str(unique_corpus), cfg, tmp_path / "local", run=run)
    res = semantic_dedup_ray(str(unique_corpus), cfg, tmp_path / "ray", RAY, run, partitions=3)
    same_bytes(tmp_path / "local", tmp_path / "ray", ["semantic_decisions.parquet", "semantic/centroids.npy"])
    assert 0 < local.stats["counts"]["removed"] < local.stats["counts"]["input"]
    for k in ("counts", "eps_sweep", "clusters", "long_text", "threshold", "pairwise_backend"):
        assert res.stats[k] == local.stats[k], k
    assert np.array_equal(res.embeddings, local.embeddings) and res.decisions.equals(local.decisions)


def test_semantic_on_ray_duplicate_ids_raise_the_local_error(cluster, corpus, model, tmp_path):
    from gpu_dedup.semantic import SemanticConfig, semantic_dedup

    cfg = SemanticConfig(model=model)
    run = RunConfig(on_error="skip")
    with pytest.raises(Exception) as local_err:
        semantic_dedup(str(corpus), cfg, run=run)
    with pytest.raises(type(local_err.value)) as ray_err:
        semantic_dedup_ray(str(corpus), cfg, tmp_path / "ray", RAY, run)
    assert str(ray_err.value) == str(local_err.value) and "2 times" in str(ray_err.value)


def _recipe_steps(model):
    from gpu_dedup.lexical.program import Dedup
    from gpu_dedup.paragraph.program import Paragraph
    from gpu_dedup.semantic import SemanticConfig
    from gpu_dedup.semantic.program import Semantic
    from gpu_dedup.substring.program import Substring

    return [Paragraph(ParagraphConfig(min_paragraph_bytes=20)), Dedup(RunConfig(progress=False)),
            Substring(SubstringConfig(min_tokens=10, chunk_tokens=3000)),
            Semantic(SemanticConfig(model=model, eps=0.02, n_clusters=3))]


def _outputs(d):
    """A pipeline OUT's files that must match: decisions, final records and every step's tables and records (a
    Ray step's decisions/ or scores/ dataset named as the one file it stands for)."""
    names = set()
    for f in _files(d):
        if f.endswith("/verdicts.parquet"):  # the local engine's resume record of a step (a Ray recipe's: its
            continue                           # parts of the decisions, in the step's work/)
        if f.endswith((".parquet", ".jsonl")) and "/work/" not in f and not f.startswith("work/"):
            head, _, tail = f.rpartition("/")
            table = head.rpartition("/")[2]
            if table in DATASETS and tail.startswith("part-"):
                f = f"{head}.parquet"
            names.add(f)
    return sorted(names)


def test_recipe_on_ray_equals_local_and_resumes(cluster, unique_corpus, model, tmp_path):
    """A whole recipe (paragraph before dedup, substring, semantic; the span steps run again over the survivors)
    on Ray: every table and record of OUT equals the local engine's. Resumed after a kill, the finished steps are
    reused and the interrupted one reuses its finished tasks."""
    from gpu_dedup import Pipeline

    local = Pipeline(_recipe_steps(model), device="cpu").run(str(unique_corpus), tmp_path / "local")
    res = Pipeline(_recipe_steps(model), device="cpu").run(str(unique_corpus), tmp_path / "ray", engine="ray",
                                                           resume=True)
    assert local.summary() == res.summary() and local.stats["counts"]["by_step"]["semantic"] > 0
    names = _outputs(tmp_path / "local")
    assert names == _outputs(tmp_path / "ray") and "decisions.parquet" in names
    same_bytes(tmp_path / "local", tmp_path / "ray", names)
    assert [(r.name, r.phase) for r in res.steps] == [(r.name, r.phase) for r in local.steps]
    # killed in the semantic step: its record and its later tasks' markers gone; steps 1-3 are reused whole
    sem = tmp_path / "ray" / "steps" / "04-semantic"
    (sem / "step.json").unlink()
    done = sem / "work" / "semantic" / "ray" / "done"
    for stage in ("semantic_pairs", "semantic_write"):
        shutil.rmtree(done / stage)
    again = Pipeline(_recipe_steps(model), device="cpu").run(str(unique_corpus), tmp_path / "ray", engine="ray",
                                                             resume=True)
    assert [r.reused for r in again.steps[:3]] == [True, True, True] and not again.steps[3].reused
    engine = json.loads((sem / "semantic.json").read_text())["engine"]
    assert engine["tasks_reused"] > 0 and engine["tasks_reused"] < engine["tasks"]
    same_bytes(tmp_path / "local", tmp_path / "ray", names)


def test_recipe_on_ray_composes_in_tasks(cluster, unique_corpus, tmp_path, monkeypatch, caplog):
    """A recipe on Ray composes its decisions by tasks (distributed/stepfold.py): the driver builds no table per
    document (no base decisions, no fold, no step's verdicts) and holds one keep flag a document; OUT's
    decisions (the dataset of per-file parts by default, one file with --table-layout file; there the fold dealt
    over several tasks) and run.json's counts and sources equal the local engine's."""
    from gpu_dedup.distributed import semfold
    import gpu_dedup.filters.program as filter_program
    import gpu_dedup.lexical.program as lexical_program
    import gpu_dedup.pipeline.engine as engine
    from gpu_dedup import Pipeline
    from gpu_dedup.filters.config import FilterConfig
    from gpu_dedup.filters.program import Filter
    from gpu_dedup.lexical.program import Dedup
    from gpu_dedup.paragraph.program import Paragraph

    def steps():
        return [Filter(FilterConfig(rules="gopher")), Dedup(RunConfig(progress=False)),
                Paragraph(ParagraphConfig(min_paragraph_bytes=20))]

    local = Pipeline(steps(), device="cpu").run(str(unique_corpus), tmp_path / "local")

    def built(*_a, **_k):
        raise AssertionError("the driver built a table per document")

    for mod, name in ((engine, "fold_removals"), (engine, "base_decisions"), (lexical_program, "decision_verdicts"),
                      (filter_program, "file_sources")):
        monkeypatch.setattr(mod, name, built)
    stages = ("compose_touched", "compose_components", "compose_local", "compose_fold", "compose_merge",
              "compose_totals")
    for stage in stages:  # a worker killed in each stage (dataset layout): Ray runs its task again
        (cluster / f"ray-{stage}").touch()
    for layout in ("dataset", "file"):
        out = tmp_path / layout
        if layout == "file":  # every group of linked clusters a fold task of its own
            monkeypatch.setattr(semfold, "FOLD_ROWS", 1)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="gpu_dedup.distributed.stepfold"):
            res = Pipeline(steps(), device="cpu").run(str(unique_corpus), out, engine="ray", table_layout=layout)
        tasks = [int(r.getMessage().split(" in ")[-1].split()[0]) for r in caplog.records if "folded with" in
                 r.getMessage()]
        assert tasks and (max(tasks) > 1) == (layout == "file"), tasks
        if layout == "dataset":
            assert sorted(p.name for p in cluster.iterdir()) == sorted(f"ray-{s}.fired" for s in stages)
            for p in cluster.iterdir():
                p.unlink()
        assert (out / "decisions").is_dir() == (layout == "dataset") and \
            (out / "decisions.parquet").is_file() == (layout == "file")
        assert read_table(out, "decisions").equals(local.decisions)
        assert (out / "report.html").is_file()  # drawn from the decisions in either layout, batch by batch
        for key in ("counts", "sources"):
            assert res.stats[key] == local.stats[key], key
        assert res.stats["counts"]["by_step"]["filter"] > 0
    same_bytes(tmp_path / "local", tmp_path / "file", ["decisions.parquet", "deduplicated"])


@pytest.mark.parametrize("program, stages", [
    ("paragraph", ("paragraph_keys", "paragraph_first", "paragraph_cut")),
    ("substring", ("substring_tokens", "substring_pairs", "substring_cut")),
    ("semantic", ("semantic_embed", "semantic_kmeans", "semantic_pairs")),
])
def test_killed_workers_and_resume(cluster, unique_corpus, model, tmp_path, program, stages):
    """kill -9 of a worker in three stages of each program: Ray retries the tasks over their idempotent writes.
    A run killed after some tasks (their later markers dropped) resumes: the finished tasks are reused, the
    outputs equal the local run's byte for byte. A span program's cut task is not reused when its part of OUT's
    dataset is gone, nor by a run asking for the file layout (its rows are in OUT's parts, not the work dir)."""
    from gpu_dedup.paragraph.program import Paragraph
    from gpu_dedup.semantic import SemanticConfig
    from gpu_dedup.semantic.program import Semantic
    from gpu_dedup.substring.program import Substring

    steps = {"paragraph": (Paragraph(ParagraphConfig()), PARAGRAPH_OUT),
             "substring": (Substring(SubstringConfig(min_tokens=10, chunk_tokens=3000)), SUBSTRING_OUT),
             "semantic": (Semantic(SemanticConfig(model=model, n_clusters=3)), ("semantic_decisions.parquet",))}
    step, outputs = steps[program]

    def go(out, engine="local", resume=False, layout=None):
        return step.run(str(unique_corpus), str(out), Env(engine=engine, resume=resume, table_layout=layout)).result

    go(tmp_path / "local")
    for stage in stages:
        (cluster / f"ray-{stage}").touch()
    go(tmp_path / "ray", engine="ray", resume=True)
    assert sorted(p.name for p in cluster.iterdir()) == sorted(f"ray-{s}.fired" for s in stages)
    for p in cluster.iterdir():
        p.unlink()
    same_bytes(tmp_path / "local", tmp_path / "ray", outputs)
    done = tmp_path / "ray" / "work" / program / "ray" / "done"
    shutil.rmtree(done / stages[-1])
    res = go(tmp_path / "ray", engine="ray", resume=True)
    assert 0 < res.stats["engine"]["tasks_reused"] < res.stats["engine"]["tasks"]
    same_bytes(tmp_path / "local", tmp_path / "ray", outputs)
    if program == "semantic":
        return
    spans = outputs[0].removesuffix(".parquet")
    (tmp_path / "ray" / spans / "part-000001.parquet").unlink()  # a part lost, its task's marker kept
    res = go(tmp_path / "ray", engine="ray", resume=True)
    assert 0 < res.stats["engine"]["tasks_reused"] < res.stats["engine"]["tasks"]
    same_bytes(tmp_path / "local", tmp_path / "ray", outputs)
    res = go(tmp_path / "ray", engine="ray", resume=True, layout="file")  # the driver streams the work dir's parts
    assert res.stats["tables"][spans]["layout"] == "file"
    same_bytes(tmp_path / "local", tmp_path / "ray", outputs)


def test_run_with_span_stages_on_ray_equals_local(cluster, unique_corpus, tmp_path):
    """`gpu-dedup run --paragraph-dedup --substring-dedup --engine ray`: dedup, then both span stages, on one
    cluster; OUT's files equal the local run's."""
    from gpu_dedup.cli import main

    args = [str(unique_corpus), "--paragraph-dedup", "--substring-dedup", "--substring-min-tokens", "10", "-q"]
    assert main(["run", *args, "-o", str(tmp_path / "local")]) == 0
    assert main(["run", *args, "-o", str(tmp_path / "ray"), "--engine", "ray", "--workers", "2"]) == 0
    names = [f for f in _outputs(tmp_path / "local")]
    assert {"decisions.parquet", "removed_spans.parquet", "substring_spans.parquet"} <= set(names)
    same_bytes(tmp_path / "local", tmp_path / "ray", names)


def test_pipeline_command_on_ray_equals_local(cluster, unique_corpus, model, tmp_path, capsys):
    """`gpu-dedup pipeline RECIPE ... --engine ray --resume`: a recipe of every program with a Ray path (filter,
    paragraph, dedup, substring, semantic) writes the local engine's tables and records; run again with --resume,
    every step is reused."""
    from gpu_dedup.cli import main

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(f"""device: cpu
steps:
  - filter:
      rules: gopher
  - paragraph:
      min-paragraph-bytes: 20
  - dedup:
      threshold: 0.8
  - substring:
      min-tokens: 10
      chunk-tokens: 3000
  - semantic:
      model: {model}
      eps: 0.02
      clusters: 3
""")
    args = ["pipeline", str(recipe), str(unique_corpus), "-q"]
    assert main([*args, "-o", str(tmp_path / "local")]) == 0
    assert main([*args, "-o", str(tmp_path / "ray"), "--engine", "ray", "--workers", "2", "--resume"]) == 0
    names = _outputs(tmp_path / "local")
    assert names == _outputs(tmp_path / "ray")
    same_bytes(tmp_path / "local", tmp_path / "ray", names)
    run = json.loads((tmp_path / "local" / "run.json").read_text())
    assert all(run["counts"]["by_step"][s] > 0 for s in ("filter", "semantic")), run["counts"]["by_step"]
    capsys.readouterr()
    assert main([*args, "-o", str(tmp_path / "ray"), "--engine", "ray", "--resume"]) == 0
    assert capsys.readouterr().out.count("(reused)") == len(json.loads((tmp_path / "ray" / "run.json").read_text())
                                                            ["steps"])
    same_bytes(tmp_path / "local", tmp_path / "ray", names)
    # --table-layout file: every step's tables one file each, as the local engine's (no dataset folder)
    assert main([*args, "-o", str(tmp_path / "ray_file"), "--engine", "ray", "--workers", "2", "--table-layout",
                 "file"]) == 0
    assert not [f for f in _files(tmp_path / "ray_file") if "/part-" in f and "/work/" not in f]
    assert _outputs(tmp_path / "ray_file") == names
    same_bytes(tmp_path / "local", tmp_path / "ray_file", names)


def test_recipe_on_ray_resumes_a_step_killed_after_its_outputs_and_other_inputs(cluster, unique_corpus, tmp_path):
    """`pipeline --engine ray --resume`: a step killed after writing its outputs, before its record (step.json),
    runs again over its own outputs (was: the filter and substring steps refused them as an earlier run's, asking
    for --overwrite). Resumed over another input (a file fewer, the same names), no step is reused: the decisions
    name exactly the new input's documents (was: the steps recorded over the old input were reused, and a view of
    its rows failed)."""
    from gpu_dedup.cli import main

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("device: cpu\nsteps:\n  - filter:\n      rules: gopher\n  - paragraph:\n"
                      "      min-paragraph-bytes: 20\n  - dedup:\n      threshold: 0.8\n  - substring:\n"
                      "      min-tokens: 10\n")
    out = tmp_path / "out"
    args = ["pipeline", str(recipe), "-o", str(out), "-q", "--engine", "ray"]
    assert main([*args, str(unique_corpus)]) == 0
    first = read_table(out, "decisions")
    steps = sorted((out / "steps").glob("0*"))
    for d in (steps[0], steps[-1]):  # the filter's and the substring's records lost
        assert d.name.split("-", 1)[1].split(".")[0] in ("filter", "substring")
        (d / "step.json").unlink()
    assert main([*args, str(unique_corpus), "--resume"]) == 0
    assert read_table(out, "decisions").equals(first)
    fewer = tmp_path / "fewer"
    shutil.copytree(unique_corpus, fewer)
    (fewer / "sub" / "c.jsonl").unlink()
    assert main([*args, str(fewer), "--resume"]) == 0
    ids = read_table(out, "decisions")["id"].to_pylist()
    assert sorted(ids) == sorted(pq.read_table(fewer / "a.parquet")["id"].to_pylist())


@pytest.fixture(scope="module")
def run_corpus(unique_corpus, tmp_path_factory):
    """The unique corpus with a file holding a null text (a bad record: --on-error skip) between kept ones."""
    src = tmp_path_factory.mktemp("rsrc")
    shutil.copytree(unique_corpus, src, dirs_exist_ok=True)
    rows = [{"id": "n0", "text": "a short note on the river stone", "q": 1.0}, {"id": "n1", "text": None, "q": 2.0},
            {"id": "n2", "text": "green cloud over the lazy dog", "q": 1.0}]
    (src / "sub" / "n.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return src


def _run_equal(local, ray):
    """`gpu-dedup run`'s outputs of both engines: every table byte for byte (decisions with the semantic columns,
    semantic_decisions.parquet, the span stages' tables, every deduplicated/ file), semantic/centroids.npy, run.json's
    counts, sources and semantic stage, and report.html's summary (the Ray run's from its tasks' aggregates)."""
    from gpu_dedup.report.inputs import load_summary

    names = _outputs(local)
    assert names == _outputs(ray) and {"decisions.parquet", "semantic_decisions.parquet"} <= set(names)
    same_bytes(local, ray, names + ["semantic/centroids.npy"])
    ra, rb = (json.loads((d / "run.json").read_text()) for d in (local, ray))
    for k in ("counts", "sources"):
        assert rb[k] == ra[k], k
    assert rb["stages"]["semantic"] == ra["stages"]["semantic"] and rb["engine"]["name"] == "ray"
    (_, a), (sb, b) = load_summary(str(local), 10), load_summary(str(ray), 10)
    assert sb["report"] and b.table is None  # from the aggregates
    assert (a.reasons, a.n, a.semantic, a.index_removed) == (b.reasons, b.n, b.semantic, b.index_removed)
    assert np.array_equal(a.cluster_sizes, b.cluster_sizes) and np.array_equal(a.cluster_counts, b.cluster_counts)
    assert np.array_equal(a.near.counts, b.near.counts) and a.views == b.views and a.views
    assert {r: a.rows[r] for r in b.rows} == b.rows
    return ra


@pytest.mark.parametrize("flags", [
    # keep order with ties and NaN; paragraph dedup before the document stages, substring beside them
    ["--eps", "0.02", "--clusters", "3", "--semantic-keep", "max:q", "--chain", "kept", "--paragraph-dedup",
     "--paragraph-order", "before", "--substring-dedup", "--substring-order", "beside"],
    # semantic beside the exact stage only, long texts as the mean of windows; paragraph beside, substring before;
    # decisions.parquet as one file
    ["--eps", "0.02", "--clusters", "4", "--semantic-order", "beside", "--no-lexical", "--long-text", "mean",
     "--semantic-keep", "random", "--paragraph-dedup", "--paragraph-order", "beside", "--substring-dedup",
     "--substring-order", "before", "--table-layout", "file"],
])
def test_run_semantic_on_ray_equals_local(cluster, run_corpus, model, tmp_path, flags):
    """`gpu-dedup run --semantic --engine ray` (was refused after the cluster started and the first steps ran): the
    semantic stage runs as the dedup run's tasks over the documents the lexical stages kept, its removals folded in
    as the local engine folds them; with the span stages in every order, OUT equals the local run's."""
    from gpu_dedup.cli import main

    args = [str(run_corpus), "--semantic", "--model", str(model), "--on-error", "skip", "--substring-min-tokens", "10",
            "-q", *flags]
    assert main(["run", *args, "-o", str(tmp_path / "local")]) == 0
    assert main(["run", *args, "-o", str(tmp_path / "ray"), "--engine", "ray", "--workers", "2",
                 "--partitions", "3"]) == 0
    run = _run_equal(tmp_path / "local", tmp_path / "ray")
    ray_out, spans = tmp_path / "ray", ("removed_spans", "paragraph_docs", "substring_spans", "substring_docs")
    if "--table-layout" not in flags:  # the Ray engine's dataset: its tasks wrote a part of each per input file
        parts = sorted(p.name for p in (ray_out / "semantic_decisions").iterdir())
        assert parts and parts == sorted(p.name for p in (ray_out / "decisions").iterdir())
        assert all(any((ray_out / t).glob("part-*.parquet")) and not (ray_out / f"{t}.parquet").exists()
                   for t in spans)
    else:  # the flag holds for the span stages' tables too
        assert all((ray_out / f"{t}.parquet").is_file() and not (ray_out / t).exists() for t in spans)
    ids = set(pq.read_table(tmp_path / "local" / "decisions.parquet")["id"].to_pylist())
    assert {"n0", "n2"} <= ids and "n1" not in ids and run["counts"]["input"] == len(ids)  # the null text skipped
    sem = pq.read_table(tmp_path / "local" / "semantic_decisions.parquet")
    assert 0 < pc.sum(sem["keep"]).as_py() < sem.num_rows


def test_run_semantic_against_an_index_on_ray_equals_local(cluster, run_corpus, model, tmp_path, monkeypatch):
    """`run --against IX --semantic`: the semantic removals folded by the fold tasks (semfold.py; here a fold task
    for each group of linked clusters) as the local engine folds them, and the duplicates of the index's documents
    still name them (the local fold named none as soon as one semantic duplicate was removed)."""
    from gpu_dedup.cli import main
    from gpu_dedup.distributed import semfold

    monkeypatch.setattr(semfold, "FOLD_ROWS", 1)
    a = pq.read_table(run_corpus / "a.parquet")
    (tmp_path / "ix_src").mkdir()
    pq.write_table(a.slice(0, 30).set_column(0, "id", pa.array([f"ix{i}" for i in range(30)])),
                   tmp_path / "ix_src" / "ix.parquet")
    assert main(["run", str(tmp_path / "ix_src"), "-o", str(tmp_path / "ix_out"), "--save-index",
                 str(tmp_path / "ix"), "-q"]) == 0
    args = [str(run_corpus), "--against", str(tmp_path / "ix"), "--semantic", "--model", str(model), "--eps", "0.02",
            "--clusters", "3", "--on-error", "skip", "-q"]
    assert main(["run", *args, "-o", str(tmp_path / "local")]) == 0
    assert main(["run", *args, "-o", str(tmp_path / "ray"), "--engine", "ray", "--workers", "2",
                 "--partitions", "3"]) == 0
    _run_equal(tmp_path / "local", tmp_path / "ray")
    fold = json.loads((tmp_path / "ray" / "run.json").read_text())["engine"]["semantic_fold"]
    assert fold["shares"] == fold["groups"] > 1, fold
    d = pq.read_table(tmp_path / "local" / "decisions.parquet")
    reps = [r for r in d["representative_id"].to_pylist() if r is not None and r.startswith("ix")]
    assert len(reps) >= 30 and pc.sum(pc.equal(d["reason"], "semantic_duplicate")).as_py() > 0


def test_run_semantic_on_ray_duplicate_ids_raise_the_local_error(cluster, corpus, model, tmp_path, capsys):
    from gpu_dedup.cli import main

    args = ["run", str(corpus), "--semantic", "--model", str(model), "--on-error", "skip", "-q"]
    assert main([*args, "-o", str(tmp_path / "local")]) == 1
    local = capsys.readouterr().err
    assert main([*args, "-o", str(tmp_path / "ray"), "--engine", "ray", "--workers", "2"]) == 1
    assert capsys.readouterr().err == local and "2 times" in local


def test_run_semantic_on_ray_survives_killed_workers_and_resumes(cluster, run_corpus, model, tmp_path):
    """kill -9 of a worker in the semantic stage's embed, k-means and pairs tasks and in the final decisions' tasks:
    Ray retries them over their idempotent writes. Resumed after its later markers were lost, the run reuses the
    lexical and the finished semantic tasks; resumed with another eps, it reuses the lexical tasks but none whose
    output the eps changes (the final decisions' markers hold the semantic stage's key). Every time OUT equals the
    local run's."""
    from gpu_dedup.cli import main

    args = [str(run_corpus), "--semantic", "--model", str(model), "--clusters", "3", "--on-error", "skip", "-q"]

    def ray_run(eps):
        assert main(["run", *args, "--eps", eps, "-o", str(tmp_path / "ray"), "--engine", "ray", "--workers", "2",
                     "--resume"]) == 0
        return json.loads((tmp_path / "ray" / "run.json").read_text())["engine"]

    assert main(["run", *args, "--eps", "0.02", "-o", str(tmp_path / "local")]) == 0
    stages = ("semantic_embed", "semantic_kmeans", "semantic_pairs", "recount")
    for stage in stages:
        (cluster / f"ray-{stage}").touch()
    ray_run("0.02")
    assert sorted(p.name for p in cluster.iterdir()) == sorted(f"ray-{s}.fired" for s in stages)
    for p in cluster.iterdir():
        p.unlink()
    _run_equal(tmp_path / "local", tmp_path / "ray")
    work = tmp_path / "ray" / "work"
    for done in (work / "semantic" / "ray" / "done" / "semantic_write", work / "ray" / "done" / "recount"):
        shutil.rmtree(done)
    engine = ray_run("0.02")
    assert engine["sign_tasks_reused"] == 4 and 0 < engine["semantic"]["tasks_reused"] < engine["semantic"]["tasks"]
    _run_equal(tmp_path / "local", tmp_path / "ray")
    assert main(["run", *args, "--eps", "0.05", "-o", str(tmp_path / "local"), "--overwrite"]) == 0
    engine = ray_run("0.05")
    assert engine["sign_tasks_reused"] == 4 and engine["semantic"]["tasks_reused"] == 0
    _run_equal(tmp_path / "local", tmp_path / "ray")
