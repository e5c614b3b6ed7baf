"""The dask engine gives the same decisions as the local one, for any worker count and shard layout."""
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import gpu_dedup
from gpu_dedup import RunConfig
from gpu_dedup.testing.evalcorpus import make_corpus

pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    src = tmp_path_factory.mktemp("src")
    t = make_corpus(800, seed=31, mean_words=70, template_families=2).select(["id", "text"])
    # skewed shards: one holds 90% of the data
    pq.write_table(t.slice(0, 720), src / "a.parquet")
    pq.write_table(t.slice(720, 40), src / "b.parquet")
    pq.write_table(t.slice(760), src / "c.parquet")
    return src, t


def test_dask_two_workers_equals_local(corpus, tmp_path):
    src, table = corpus
    cfg = RunConfig(progress=False)
    local = gpu_dedup.deduplicate(str(src), cfg).decisions
    dask = gpu_dedup.deduplicate(str(src), cfg, tmp_path / "o", engine="dask", workers=2,
                                 work_dir=tmp_path / "w")
    assert dask.decisions.equals(local)
    run = json.loads((tmp_path / "o" / "run.json").read_text())
    assert run["engine"]["name"] == "dask" and run["work_dir"]["pieces_computed"] == 3
    # the workers' normalized text stays with them: verification re-reads the input
    assert run["stages"]["text_cache"]["not_used_because"] == "pass 1 ran on dask workers"
    # the same rows as one in-memory table, in one batch or many
    single = gpu_dedup.deduplicate(table, cfg.replace(batch_bytes=4096)).decisions
    assert single.drop(["source"]).equals(local.drop(["source"]))


def test_engine_argument_errors():
    t = pa.table({"id": ["a"], "text": ["x"]})
    with pytest.raises(ValueError, match="engine"):
        gpu_dedup.deduplicate(t, RunConfig(progress=False), engine="spark")
    with pytest.raises(ValueError, match="dask"):
        gpu_dedup.deduplicate(t, RunConfig(progress=False), workers=2)
