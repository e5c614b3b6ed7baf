"""Bad and awkward input through the whole pipeline: every case keeps one decisions row per input id."""
import errno
import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import gpu_dedup
from gpu_dedup import RunConfig
from gpu_dedup.testing.evalcorpus import make_corpus


def _table(n, seed):
    return make_corpus(n, seed=seed, mean_words=50, template_families=1).select(["id", "text"])


def test_mixed_schemas_empty_shard_and_column_order(tmp_path):
    src = tmp_path / "in"  # the output directory may not lie under an input directory
    src.mkdir()
    a, b = _table(150, 1), _table(150, 2)
    b = b.set_column(0, "id", pa.array([f"b-{x}" for x in b["id"].to_pylist()]))
    pq.write_table(a.append_column("lang", pa.array(["en"] * a.num_rows)), src / "a.parquet")
    pq.write_table(b.select(["text", "id"]).append_column("score", pa.array(np.arange(b.num_rows, dtype=float))),
                   src / "b.parquet")
    pq.write_table(a.slice(0, 0), src / "c.parquet")  # empty shard
    (src / "d.jsonl").write_text("")                    # empty file
    res = gpu_dedup.deduplicate(str(src), RunConfig(progress=False), output_dir=tmp_path / "out")
    d = res.decisions
    assert d.num_rows == 300 and len(set(d["id"].to_pylist())) == 300
    assert sorted(res.stats["read"]["empty_files"]) == ["c.parquet", "d.jsonl"]
    kept_b = pq.read_table(tmp_path / "out" / "deduplicated" / "b.parquet")
    assert kept_b.column_names == ["text", "id", "score"]  # the shard's own schema and column order


def test_invalid_parquet_shard_raises_or_is_skipped_and_recorded(tmp_path):
    pq.write_table(_table(100, 3), tmp_path / "good.parquet")
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 this is not parquet at all")
    with pytest.raises(ValueError, match="bad.parquet"):
        gpu_dedup.deduplicate(str(tmp_path), RunConfig(progress=False))
    res = gpu_dedup.deduplicate(str(tmp_path), RunConfig(progress=False, on_error="skip"))
    assert res.decisions.num_rows == 100
    assert any("bad.parquet" in s["file"] for s in res.stats["read"]["skipped"])


def test_disk_full_while_writing_leaves_nothing_complete_and_resume_finishes(tmp_path, monkeypatch):
    from gpu_dedup.lexical import dedup

    src = tmp_path / "src"
    src.mkdir()
    pq.write_table(_table(200, 4), src / "part.parquet")
    out = tmp_path / "out"
    real = dedup.write_tables

    def full(tables, schema, path):
        if os.path.basename(path) == "decisions.parquet":
            raise OSError(errno.ENOSPC, "No space left on device", path)
        return real(tables, schema, path)

    monkeypatch.setattr(dedup, "write_tables", full)
    with pytest.raises(OSError, match="No space"):
        gpu_dedup.deduplicate(str(src), RunConfig(progress=False), output_dir=out, work_dir=tmp_path / "w")
    assert not (out / "decisions.parquet").exists() and not (out / "run.json").exists()
    assert not [f for f in os.listdir(out) if f.startswith(".") or f.endswith(".tmp")]
    monkeypatch.setattr(dedup, "write_tables", real)
    res = gpu_dedup.deduplicate(str(src), RunConfig(progress=False), output_dir=out, work_dir=tmp_path / "w",
                                resume=True)
    assert (out / "decisions.parquet").exists() and res.stats["work_dir"]["pieces_reused"] == 1
    assert json.loads((out / "run.json").read_text())["counts"]["input"] == 200


def test_many_short_documents_and_a_few_huge_ones():
    rng = np.random.default_rng(5)
    short = [" ".join(rng.choice(["a", "b", "c", "d"], rng.integers(0, 4))) for _ in range(50_000)]
    huge = [" ".join(rng.choice([f"w{i}" for i in range(5000)], 300_000)) for _ in range(3)]
    texts = short + huge + [huge[0]]
    t = pa.table({"id": [f"x{i}" for i in range(len(texts))], "text": texts})
    d = gpu_dedup.deduplicate(t, RunConfig(progress=False)).decisions
    assert d.num_rows == len(texts)
    reasons = d["reason"].to_pylist()
    assert reasons[-1] == "exact_duplicate"
    # 1 + 4 + 16 + 64 distinct short texts at most: everything else is a short exact duplicate
    assert sum(d["keep"].to_pylist()[:50_000]) <= 85
