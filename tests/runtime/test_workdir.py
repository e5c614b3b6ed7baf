"""Work directory and resume: kill -9 at stage boundaries and mid-stage, rerun with --resume, same
decisions; a corrupt piece is detected and recomputed."""
import json
import signal
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_dedup.testing.evalcorpus import make_corpus


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    src = tmp_path_factory.mktemp("src")
    t = make_corpus(900, seed=21, mean_words=80, template_families=2)
    for k in range(3):
        pq.write_table(t.slice(k * 300, 300), src / f"part-{k}.parquet")
    return src


def _run(src, out, *extra, fault=None):
    """The CLI in a subprocess; ``fault`` ("<checkpoint>:<k>") kills it with SIGKILL there (testing.faults)."""
    args = ["run", str(src), "-o", str(out), "-q", "--batch-mb", "0.05", *extra]
    if fault:
        cmd = [sys.executable, "-c", "from gpu_dedup.testing.faults import run_cli_killed_at; run_cli_killed_at()",
               fault, *args]
    else:
        cmd = [sys.executable, "-m", "gpu_dedup.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True)


@pytest.fixture(scope="module")
def reference(shards, tmp_path_factory):
    out = tmp_path_factory.mktemp("ref")
    r = _run(shards, out)
    assert r.returncode == 0, r.stderr
    return pq.read_table(out / "decisions.parquet")


@pytest.mark.parametrize("fault", ["piece:1", "piece:2", "batch:5", "decisions:1"])
def test_kill_then_resume_gives_identical_decisions(shards, reference, tmp_path, fault):
    out = tmp_path / "out"
    killed = _run(shards, out, "--work-dir", str(tmp_path / "w"), fault=fault)
    assert killed.returncode == -signal.SIGKILL
    assert not (out / "decisions.parquet").exists()
    manifest = tmp_path / "w" / "manifest.json"
    stored = len(json.loads(manifest.read_text())["pieces"]) if manifest.exists() else 0
    done = _run(shards, out, "--work-dir", str(tmp_path / "w"), "--resume")
    assert done.returncode == 0, done.stderr
    assert pq.read_table(out / "decisions.parquet").equals(reference)
    run = json.loads((out / "run.json").read_text())
    expected = {"piece:1": 1, "piece:2": 2, "decisions:1": 3}.get(fault)
    if expected is not None:
        assert stored == expected
    else:  # killed inside a file's pass 1 (the 5th batch lies in the second file)
        assert 0 < stored < 3
    assert run["work_dir"]["pieces_reused"] == stored
    assert run["work_dir"]["pieces_computed"] == 3 - stored


def test_truncated_piece_is_recomputed(shards, reference, tmp_path):
    w = tmp_path / "w"
    assert _run(shards, tmp_path / "o1", "--work-dir", str(w)).returncode == 0
    piece = w / "pieces" / "000001.parquet"
    piece.write_bytes(piece.read_bytes()[:-100])
    r = _run(shards, tmp_path / "o2", "--work-dir", str(w), "--resume")
    assert r.returncode == 0, r.stderr
    assert "checksum" in r.stderr
    assert pq.read_table(tmp_path / "o2" / "decisions.parquet").equals(reference)
    run = json.loads((tmp_path / "o2" / "run.json").read_text())
    assert run["work_dir"] == {"path": str(w), "pieces_reused": 2, "pieces_computed": 1}
    # reused pieces hold no text: verification re-reads the input
    assert run["stages"]["text_cache"]["not_used_because"] == "pass 1 reused work-dir pieces"


def test_changed_contract_recomputes_everything(shards, tmp_path):
    w = tmp_path / "w"
    assert _run(shards, tmp_path / "o1", "--work-dir", str(w)).returncode == 0
    r = _run(shards, tmp_path / "o2", "--work-dir", str(w), "--resume", "--seed", "7")
    assert r.returncode == 0
    run = json.loads((tmp_path / "o2" / "run.json").read_text())
    assert run["work_dir"]["pieces_reused"] == 0


def test_memory_budget_partitions_give_identical_decisions(shards, reference, tmp_path):
    r = _run(shards, tmp_path / "o", "--work-dir", str(tmp_path / "w"), "--memory-budget", "1M")
    assert r.returncode == 0, r.stderr
    assert pq.read_table(tmp_path / "o" / "decisions.parquet").equals(reference)
    lsh = json.loads((tmp_path / "o" / "run.json").read_text())["stages"]["lsh"]
    assert lsh["band_keys_on_disk"] and lsh["key_range_partitions"] == 1  # 900 docs fit in 1 MiB


def test_key_range_partitions_do_not_change_buckets():
    import numpy as np

    from gpu_dedup.lexical.bandkeys import BandKeys
    from gpu_dedup.lexical.lsh import group_buckets, partitions_for

    rng = np.random.default_rng(0)
    keys = rng.integers(0, 50, (5000, 6)).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    rows = np.sort(rng.choice(5000, 4000, replace=False)).astype(np.int64)
    one = group_buckets(keys, rows, 1)
    for p in (2, 8, 64):
        many = group_buckets(BandKeys(6, matrix=keys), rows, p)
        for name in ("entry_doc", "entry_bucket", "doc_offsets", "bucket_band", "bucket_size"):
            assert np.array_equal(getattr(one, name), getattr(many, name)), (p, name)
    assert partitions_for(4000, None) == 1 and partitions_for(4000, 64 * 1000) == 4


def test_budget_with_index_and_engine(shards, tmp_path):
    from gpu_dedup.cli import parse_size

    assert parse_size("2G") == 2 << 30 and parse_size("500M") == 500 << 20 and parse_size("1.5kb") == 1536
    with pytest.raises(ValueError, match="2G"):
        parse_size("lots")
    r = _run(shards, tmp_path / "o", "--work-dir", str(tmp_path / "w"), "--memory-budget", "1M",
             "--save-index", str(tmp_path / "idx"))
    assert r.returncode == 0, r.stderr
    # the same texts under ids of their own (an indexed id cannot name a new document) are all removed
    again = tmp_path / "again"
    again.mkdir()
    for p in sorted(shards.iterdir()):
        t = pq.read_table(p)
        pq.write_table(t.set_column(t.schema.get_field_index("id"), "id",
                                    pa.array([f"again-{v}" for v in t["id"].to_pylist()])), again / p.name)
    r2 = _run(again, tmp_path / "o2", "--memory-budget", "1M", "--work-dir", str(tmp_path / "w2"),
              "--against", str(tmp_path / "idx"))
    assert r2.returncode == 0, r2.stderr
    assert not any(pq.read_table(tmp_path / "o2" / "decisions.parquet")["keep"].to_pylist())


def test_pipeline_with_many_key_ranges_on_disk_keys(shards, reference, tmp_path, monkeypatch):
    import gpu_dedup
    import gpu_dedup.lexical.decide as lsh  # the bucket stage picks the partitions
    from gpu_dedup import RunConfig

    monkeypatch.setattr(lsh, "partitions_for", lambda m, budget: 16)
    cfg = RunConfig(progress=False, memory_budget=1 << 20, batch_bytes=int(0.05 * 2**20))
    res = gpu_dedup.deduplicate(str(shards), cfg, tmp_path / "o", work_dir=tmp_path / "w")
    assert res.stats["stages"]["lsh"]["key_range_partitions"] == 16
    assert res.stats["stages"]["lsh"]["band_keys_on_disk"]
    assert res.decisions.equals(reference)
