"""A Ray run's report.html from per-task aggregates (run.json's report, report/shown.json): the same summary as the
local run's decisions give (reasons, cluster sizes, the near duplicates' Jaccard histogram, the largest clusters
with their members, ids and texts), with --keep-copies and --against; neither the command line nor the report reads
the decisions table."""
import json

import numpy as np
import pyarrow.parquet as pq
import pytest

import gpu_dedup
from gpu_dedup import RunConfig
from gpu_dedup.cli import main
from gpu_dedup.testing.evalcorpus import make_corpus

pytest.importorskip("ray")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    src = tmp_path_factory.mktemp("src")
    t = make_corpus(300, seed=5, mean_words=40, template_families=3).select(["id", "text"])
    pq.write_table(t.slice(0, 200), src / "a.parquet")
    pq.write_table(t.slice(200, 0), src / "b.parquet")  # an empty file
    pq.write_table(t.slice(200), src / "c.parquet")
    return src


def _same_summary(local, ray):
    from gpu_dedup.report.inputs import load_summary

    (_, a), (sb, b) = load_summary(str(local), 10), load_summary(str(ray), 10)
    assert b.table is None and sb["report"]  # the Ray run's from its aggregates
    assert a.reasons == b.reasons and a.n == b.n and a.index_removed == b.index_removed
    assert np.array_equal(a.cluster_sizes, b.cluster_sizes) and np.array_equal(a.cluster_counts, b.cluster_counts)
    assert np.array_equal(a.near.counts, b.near.counts) and a.near.missing == b.near.missing
    assert a.views == b.views and a.views and any(v.members for v in a.views)
    assert {r: a.rows[r] for r in b.rows} == b.rows and set(b.rows) == {r for v in a.views for r in (v.rep, *v.members)}
    return b


@pytest.mark.parametrize("flags", [[], ["--keep-copies", "2", "--policy", "components"]])
def test_ray_report_from_aggregates_equals_local(cluster, corpus, tmp_path, monkeypatch, flags):
    base = ["run", str(corpus), "-q", *flags]
    assert main(base + ["-o", str(tmp_path / "local")]) == 0

    def no_table(*a, **k):  # a Ray run's report and pipeline never read the decisions whole
        raise AssertionError("the decisions table was read")

    monkeypatch.setattr("gpu_dedup.report.inputs.load_run", no_table)
    monkeypatch.setattr("gpu_dedup.lexical.program.decision_verdicts", no_table)
    assert main(base + ["-o", str(tmp_path / "ray"), "--engine", "ray", "--partitions", "2"]) == 0
    monkeypatch.undo()
    b = _same_summary(tmp_path / "local", tmp_path / "ray")
    texts = {int(k): v["text"] for k, v in json.loads((tmp_path / "ray" / "report" / "shown.json").read_text()).items()}
    assert all(texts[r] for r in b.rows) and b.texts == texts  # the tasks read the shown rows' texts
    html = (tmp_path / "ray" / "report.html").read_text()
    first = b.views[0]
    assert f"Cluster of {first.size:,} documents" in html and b.rows[first.rep]["id"] in html


def test_ray_report_against_an_index(cluster, corpus, tmp_path):
    """--against: rows removed for an index's document and the index's clusters, counted as locally."""
    import pyarrow as pa

    cfg = RunConfig(progress=False)
    first = pq.read_table(corpus / "a.parquet").slice(0, 120)
    first = first.set_column(0, "id", pa.array([f"ix-{i}" for i in first["id"].to_pylist()]))
    gpu_dedup.deduplicate(first, cfg, tmp_path / "first", save_index=tmp_path / "ix")
    gpu_dedup.deduplicate(str(corpus), cfg, tmp_path / "local", against=tmp_path / "ix")
    gpu_dedup.deduplicate(str(corpus), cfg, tmp_path / "ray", against=tmp_path / "ix", engine="ray", partitions=2)
    b = _same_summary(tmp_path / "local", tmp_path / "ray")
    assert b.index_removed > 0
