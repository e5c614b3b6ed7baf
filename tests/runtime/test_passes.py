"""runtime/passes.py's progress (issue 37 item 10): documents/s and an ETA while a pass runs, its total read from
Parquet metadata or estimated from the JSON Lines files already read; the Ray driver's bars per stage."""
import json
import os
import re
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_dedup import deduplicate, io
from gpu_dedup.runtime.passes import Expected, progress

@pytest.fixture(autouse=True)
def every_update_drawn(monkeypatch):
    """Every update drawn, as in a pass slower than tqdm's 0.1 s between draws."""
    import tqdm.std

    init = tqdm.std.tqdm.__init__

    def eager(self, *a, **k):
        k.setdefault("mininterval", 0)
        init(self, *a, **k)

    monkeypatch.setattr(tqdm.std.tqdm, "__init__", eager)


ETA = re.compile(r"(\d+(\.\d+)?k?)/(\d+(\.\d+)?k?) \[\d\d:\d\d<\d\d:\d\d")  # tqdm: n/total [elapsed<remaining


def _jsonl(path, n, width=30):
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"{os.path.basename(path)}-{i}", "text": "w " * width + str(i)}) + "\n")
    return str(path)


def test_expected_reads_parquet_counts_and_estimates_json_lines(tmp_path):
    pq.write_table(pa.table({"id": [f"p{i}" for i in range(37)], "text": ["x"] * 37}), tmp_path / "a.parquet",
                   row_group_size=10)
    a = _jsonl(tmp_path / "b.jsonl", 50)
    b = _jsonl(tmp_path / "c.jsonl", 150)
    files = io.resolve_inputs([str(tmp_path / "a.parquet"), a, b])
    e = Expected(files)
    assert e.total() is None  # no JSON Lines file read yet: nothing to estimate from
    e.finished(1, 50)
    per_byte = 50 / os.path.getsize(a)
    assert e.total() == 37 + 50 + round(per_byte * os.path.getsize(b))
    e.finished(2, 150)
    assert e.total() == 37 + 50 + 150
    table = io.source_files(pa.table({"id": ["x", "y"], "text": ["a", "b"]}))
    assert Expected(table).total() == 2


def test_a_bar_gets_its_total_as_files_finish(tmp_path, capsys):
    files = io.resolve_inputs([_jsonl(tmp_path / f"f{i}.jsonl", 40) for i in range(3)])
    with progress(SimpleNamespace(progress=True), "pass", files=files) as bar:
        assert bar.bar.total is None
        bar.update(25, 0)
        bar.update(15, 0)
        bar.update(10, 1)  # file 0 read in full: 40 documents, the same size as the others
        assert bar.bar.total == 120
        bar.update(30, 1)
        bar.update(40, 2)
    err = capsys.readouterr().err
    assert "doc/s" in err and ETA.search(err)


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_the_dedup_pass_shows_an_eta(tmp_path, capsys, fmt):
    d = tmp_path / "in"
    d.mkdir()
    for i in range(3):
        p = _jsonl(d / f"f{i}.jsonl", 30)
        if fmt == "parquet":
            pq.write_table(pa.Table.from_pylist([json.loads(x) for x in open(p)]), d / f"f{i}.parquet")
            os.remove(p)
    deduplicate(str(d), progress=True, batch_bytes=1024)
    err = capsys.readouterr().err
    found = [m for m in ETA.finditer(err)]
    assert "read+minhash" in err and found
    assert any(float(m.group(3)) == 90 for m in found)  # the whole pass's 90 documents


def test_the_ray_driver_draws_a_bar_per_stage(tmp_path, capsys):
    pytest.importorskip("ray")
    d = tmp_path / "in"
    d.mkdir()
    for i in range(2):
        _jsonl(d / f"f{i}.jsonl", 20)
    deduplicate(str(d), output_dir=str(tmp_path / "o"), engine="ray", workers=2, progress=True)
    err = capsys.readouterr().err
    assert "ray sign" in err and "ray write" in err and "ray buckets" in err and "task/s" in err
    assert ETA.search(err)
