"""The run skeleton (gpu_dedup/runtime/run.py): every program's run statistics start with the same header keys (each
program run on a tiny input), the report can never fail a run, the per-document table is written atomically
and only when it matches its declared schema, and the dedup and filter results share one surface."""
import json
import logging
import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_dedup.runtime import run as R
from gpu_dedup.decisions import (DECISIONS_SCHEMA, FILTER_REASONS, decisions_schema, filter_reasons, reason_array,
                                 reason_counts, scores_schema, value_counts)

TEXTS = ["the quick brown fox jumps over the lazy dog near the river bank today",
         "the quick brown fox jumps over the lazy dog near the river bank today",
         "an entirely different sentence about gardens, tomatoes and the spring rain",
         "", "short"]


def _table():
    return pa.table({"id": [f"d{i}" for i in range(len(TEXTS))], "text": TEXTS})


def _header_of(stats):
    return tuple(k for k in stats if k in R.HEADER_KEYS)


@pytest.fixture(scope="module")
def program_stats(tmp_path_factory):
    """program -> the statistics file it wrote, each program run once on the same five documents."""
    import gpu_dedup
    from gpu_dedup.filters.config import FilterConfig
    from gpu_dedup.filters.stage import filter_corpus
    from gpu_dedup.paragraph.dedup import paragraph_dedup
    from gpu_dedup.screen.screening import ScreenConfig, screen
    from gpu_dedup.semantic import SemanticConfig, semantic_dedup
    from gpu_dedup.substring import SubstringConfig

    d = tmp_path_factory.mktemp("programs")
    t = _table()
    bench = d / "bench.txt"
    bench.write_text("an entirely different sentence about gardens\n")
    gpu_dedup.deduplicate(t, output_dir=str(d / "dedup"), device="cpu")
    filter_corpus(t, FilterConfig(rules="gopher", device="cpu", audit=0), str(d / "filter"))
    paragraph_dedup(t, None, str(d / "paragraph"))
    screen(t, [str(bench)], ScreenConfig(ngram=3, min_ngram=3), str(d / "screen"))
    gpu_dedup.substring_dedup(t, SubstringConfig(min_tokens=4), str(d / "substring"))
    emb = np.random.default_rng(0).normal(size=(len(TEXTS), 8)).astype(np.float32)
    semantic_dedup(t, SemanticConfig(eps=0.01, n_clusters=1), str(d / "semantic"), embeddings=emb)
    files = {"deduplicate": "dedup/run.json", "filter": "filter/run.json",
             "paragraph_dedup": "paragraph/paragraph_dedup.json", "screen": "screen/screen.json",
             "substring_dedup": "substring/substring_dedup.json", "semantic": "semantic/semantic.json"}
    return {p: json.loads((d / f).read_text()) for p, f in files.items()}


def test_every_program_writes_the_same_header(program_stats):
    assert set(program_stats) == {"deduplicate", "filter", "paragraph_dedup", "screen", "substring_dedup",
                                  "semantic"}
    for program, stats in program_stats.items():
        assert tuple(stats)[:len(R.HEADER_KEYS)] == R.HEADER_KEYS, program  # first, in this order
        assert stats["program"] == program
        assert stats["device"] == "cpu" and stats["array_backend"] == "numpy" and stats["threads"] >= 1
        assert stats["created"].endswith("+00:00") and stats["versions"]["python"]
        assert stats["read"]["rows"] == len(TEXTS), program
        assert "total" in stats["timings_s"], program
        assert isinstance(stats["config"], dict) and stats["config"], program
    assert program_stats["deduplicate"]["counts"]["input"] == len(TEXTS)
    assert program_stats["filter"]["counts"]["input"] == len(TEXTS)
    assert program_stats["screen"]["counts"] == program_stats["screen"]["totals"]
    assert "torch" in program_stats["semantic"]["versions"] or len(program_stats["semantic"]["versions"]) >= 4


def test_the_reports_time_is_in_run_json(program_stats):
    for program in ("deduplicate", "filter", "substring_dedup"):  # the programs that write a report
        t = program_stats[program]["timings_s"]
        assert t["report"] >= 0 and t["total"] >= t["report"], program


def test_a_failing_report_never_fails_the_run(tmp_path, caplog):
    stats = {"counts": {}, "timings_s": {"total": 1.0}}

    def broken():
        raise RuntimeError("matplotlib exploded")

    with caplog.at_level(logging.WARNING, logger="gpu_dedup.runtime.run"):
        R.finish(str(tmp_path), stats, report=broken, what="filter")
    assert "filter report not written (matplotlib exploded)" in caplog.text
    assert f"gpu-dedup report {tmp_path}" in caplog.text
    written = json.loads((tmp_path / "run.json").read_text())
    assert written["timings_s"]["report"] >= 0 and written["timings_s"]["total"] >= 1.0


def test_a_failing_report_inside_a_real_run(tmp_path, monkeypatch, caplog):
    import gpu_dedup
    import gpu_dedup.report as report

    def broken(*a, **k):
        raise OSError("disk full while drawing")

    monkeypatch.setattr(report, "write_report", broken)
    with caplog.at_level(logging.WARNING, logger="gpu_dedup.runtime.run"):
        res = gpu_dedup.deduplicate(_table(), output_dir=str(tmp_path / "out"), device="cpu")
    assert res.kept == 4 and (tmp_path / "out" / "decisions.parquet").exists()
    assert "disk full while drawing" in caplog.text and not (tmp_path / "out" / "report.html").exists()
    manifest = json.loads((tmp_path / "out" / ".gpu-dedup-outputs.json").read_text())
    assert manifest["state"] == "complete"


def test_write_table_checks_the_declared_schema_and_writes_atomically(tmp_path):
    good = DECISIONS_SCHEMA.empty_table()
    path = tmp_path / "decisions.parquet"
    R.write_table(good, DECISIONS_SCHEMA, path)
    assert pq.read_schema(path).equals(DECISIONS_SCHEMA)
    assert os.listdir(tmp_path) == ["decisions.parquet"]  # no temporary left
    bad = good.set_column(2, "reason", pa.array([], pa.large_string()))
    with pytest.raises(RuntimeError, match=r"other\.parquet: column 2 is reason: large_string, but its "
                                           r"declared schema says reason: string"):
        R.write_table(bad, DECISIONS_SCHEMA, tmp_path / "other.parquet")
    with pytest.raises(RuntimeError, match="column 9 is nothing, but its declared schema says cosine"):
        R.write_table(good, decisions_schema(semantic=True), tmp_path / "other.parquet")
    assert not (tmp_path / "other.parquet").exists() and os.listdir(tmp_path) == ["decisions.parquet"]


def test_write_table_leaves_nothing_when_writing_fails(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    def fail(self, table, **kw):  # the row group half written, then the disk is full
        raise OSError("no space left on device")

    monkeypatch.setattr(pq.ParquetWriter, "write_table", fail)
    with pytest.raises(OSError, match="no space"):
        one = pa.table({f.name: pa.nulls(1, f.type) for f in DECISIONS_SCHEMA}, schema=DECISIONS_SCHEMA)
        R.write_table(one, DECISIONS_SCHEMA, tmp_path / "decisions.parquet")
    assert os.listdir(tmp_path) == []


def test_write_tables_bytes_follow_the_rows_alone(tmp_path, monkeypatch):
    """write_tables: the same rows, whole, in parts of any sizes (empty ones too) or chunked any way, give the
    same file, byte for byte, in row groups of ROW_GROUP_ROWS rows (the Ray engine's per-file parts and the
    local engine's table); a table off its declared schema is refused and leaves nothing."""
    monkeypatch.setattr(R, "ROW_GROUP_ROWS", 7)
    rng = np.random.default_rng(0)
    n = 30
    t = pa.table({"id": [f"doc-{i}" for i in range(n)], "keep": pa.array(rng.random(n) < 0.5),
                  "jaccard": pa.array(rng.random(n), mask=rng.random(n) < 0.3)})
    schema = t.schema
    ways = {"whole": [t], "parts": [t.slice(0, 3), t.slice(3, 0), t.slice(3, 11), t.slice(14, 9), t.slice(23)],
            "chunked": [pa.concat_tables([t.slice(0, 5), t.slice(5, 20), t.slice(25)])],
            "meta": [t.replace_schema_metadata({b"pandas": b"{}"})]}
    out = {}
    for name, parts in ways.items():
        R.write_tables(iter(parts), schema, tmp_path / f"{name}.parquet")
        out[name] = (tmp_path / f"{name}.parquet").read_bytes()
    assert len(set(out.values())) == 1
    f = pq.ParquetFile(tmp_path / "whole.parquet")
    assert [f.metadata.row_group(i).num_rows for i in range(f.metadata.num_row_groups)] == [7, 7, 7, 7, 2]
    assert f.read().equals(t)
    R.write_tables([], schema, tmp_path / "empty.parquet")
    assert pq.read_table(tmp_path / "empty.parquet").schema.equals(schema) and pq.read_table(tmp_path / "empty.parquet").num_rows == 0
    with pytest.raises(RuntimeError, match="bad.parquet: column 1 is keep: int64"):
        R.write_tables([t, t.set_column(1, "keep", pa.array(range(n)))], schema, tmp_path / "bad.parquet")
    assert not (tmp_path / "bad.parquet").exists()


def test_write_tables_gives_arrows_unused_memory_back_after_each_row_group(tmp_path, monkeypatch):
    """A driver streaming a table's parts into one file holds one row group: each group written, Arrow's pool
    gives its unused memory back (mimalloc kept the freed groups: writing a Ray recipe's decisions.parquet from
    its parts, the driver's peak rose 74 MiB from 100 k to 1 M documents; 20 MiB with the release)."""
    import gpu_dedup.io.arrow as arrow

    released: list[int] = []
    monkeypatch.setattr(arrow, "release_pool", lambda: released.append(1))
    monkeypatch.setattr(R, "ROW_GROUP_ROWS", 7)
    t = pa.table({"id": [f"doc-{i}" for i in range(30)]})
    R.write_tables([t.slice(0, 12), t.slice(12)], t.schema, tmp_path / "t.parquet")
    assert len(released) == pq.ParquetFile(tmp_path / "t.parquet").metadata.num_row_groups == 5


def test_steps_time_named_steps():
    steps = R.Steps()
    for _ in range(2):
        with steps("read"):
            pass
    with pytest.raises(KeyError):
        with steps("boom"):
            raise KeyError("x")
    assert set(steps.timings) == {"read", "boom"} and steps.timings["read"] >= 0
    assert steps.total() == steps.timings["total"] >= steps.timings["read"]


def test_steps_put_compiling_in_its_own_entry():
    """Issue 28 item 8: a kernel compiled inside a step (a fresh Numba function here, so a real compile) is
    timed as ``compile``, not as the step; the two add up to the block's wall time."""
    import time

    from numba import njit

    @njit(cache=False)
    def fresh(x):  # compiled on its first call, inside the step
        return x * 3 + 1

    steps = R.Steps()
    t = time.perf_counter()
    with steps("score"):
        assert fresh(2) == 7
    wall = time.perf_counter() - t
    with steps("write"):
        assert fresh(3) == 10  # compiled already: nothing more to compile
    tm = steps.timings
    assert tm["compile"] > 0.01 and tm["score"] >= 0, tm
    assert tm["compile"] + tm["score"] == pytest.approx(wall, abs=0.01)
    assert tm["write"] < 0.01 and set(tm) == {"score", "write", "compile"}
    assert R.seconds_line({"total": 12.3, "compile": 9.81}) == "12.30 s (9.81 s of it compiling kernels, first run only)"
    assert R.seconds_line({"total": 2.5}) == "2.50 s"


def test_versions_and_created():
    import numba

    v = R.versions()
    assert list(v) == ["python", "numpy", "numba", "pyarrow"] and v["numba"] == numba.__version__
    assert R.versions("no-such-distribution-xyz") == v  # not installed: not listed
    assert list(R.versions("pytest"))[-1] == "pytest"
    assert R.versions(modules=("_pytest",))["pytest"] == R.versions("pytest")["pytest"]  # an import name
    assert R.created().endswith("+00:00") and "T" in R.created()


def test_owned_refuses_an_output_inside_the_input(tmp_path):
    (tmp_path / "in").mkdir()
    with pytest.raises(ValueError, match="output_dir .* lies inside the input"):
        with R.owned(str(tmp_path / "in" / "out"), roots=[str(tmp_path / "in")], command="x", overwrite=True):
            pass


def test_scores_schema_and_reason_codes():
    s = scores_schema(["id", "row", "empty", "hq_score", "domain", "lid_prob", "keep", "reason"])
    assert s.names == ["id", "row", "lid_prob", "domain", "hq_score", "keep", "reason"]
    assert [str(t) for t in s.types] == ["string", "int64", "double", "string", "double", "bool", "string"]
    vocab = filter_reasons(["gopher_word_count"], ["hq_score"])
    assert vocab[:len(FILTER_REASONS)] == FILTER_REASONS and vocab[-2:] == ("gopher_word_count", "hq_score")
    codes = np.array([vocab.index(r) for r in ["hq_score", "kept", "hq_score", "empty"]], np.int8)
    arr = reason_array(codes, vocab)
    assert arr.cast(pa.string()).to_pylist() == ["hq_score", "kept", "hq_score", "empty"]
    assert value_counts(arr) == {"hq_score": 2, "kept": 1, "empty": 1}  # first appearance order
    assert list(value_counts(arr)) == ["hq_score", "kept", "empty"]
    assert value_counts(arr.cast(pa.string())) == value_counts(arr) and value_counts(pa.array([], pa.string())) == {}
    assert reason_counts(pa.array(["near_duplicate", "unique"]))["exact_duplicate"] == 0
    with pytest.raises(ValueError, match="at most 127"):
        filter_reasons([f"gopher_{i}" for i in range(130)])


def test_filter_result_shares_the_dedup_surface():
    import gpu_dedup
    from gpu_dedup.filters.config import FilterConfig
    from gpu_dedup.filters.stage import FilterResult, filter_corpus

    t = _table()
    res = filter_corpus(t, FilterConfig(rules="gopher", device="cpu", audit=0))
    ded = gpu_dedup.deduplicate(t, device="cpu")
    for r in (res, ded):
        assert isinstance(r, R.RunResult)
        assert r.keep_mask.dtype == bool and r.keep_mask.shape == (len(TEXTS),)
        assert r.kept + r.removed == len(TEXTS) and r.kept == int(r.keep_mask.sum())
        assert r.filter(t).num_rows == r.kept
        df = t.to_pandas()
        assert list(r.filter(df)["id"]) == [i for i, k in zip(t["id"].to_pylist(), r.keep_mask) if k]
        assert isinstance(r.to_pandas(), pd.DataFrame) and len(r.to_pandas()) == len(TEXTS)
        assert r.summary().startswith(f"{len(TEXTS)} documents: {r.kept} kept, {r.removed} removed")
        with pytest.raises(ValueError, match="the data has 2 rows"):
            r.filter(t.slice(0, 2))
        with pytest.raises(TypeError, match="pyarrow Table or a pandas DataFrame"):
            r.filter(list(range(len(TEXTS))))
    assert isinstance(res, FilterResult) and np.array_equal(res.keep, res.keep_mask)
    by = res.stats["counts"]["by_reason"]
    assert "(" in res.summary() and all(f"{k} {v}" in res.summary() for k, v in by.items())
    assert res.scores.schema.equals(scores_schema(res.scores.column_names))


def test_semantic_result_shares_the_surface():
    from gpu_dedup.semantic import SemanticConfig, semantic_dedup

    t = _table()
    emb = np.ones((len(TEXTS), 4), np.float32)  # all the same: every document after the first is a duplicate
    res = semantic_dedup(t, SemanticConfig(eps=0.01, n_clusters=1), None, embeddings=emb)
    assert isinstance(res, R.RunResult) and res.kept == 1 and res.removed == len(TEXTS) - 1
    assert res.filter(t)["id"].to_pylist() == ["d0"] and res.keep_mask.tolist() == [True] + [False] * 4
    assert "semantic duplicates" in res.summary() and len(res.to_pandas()) == len(TEXTS)
