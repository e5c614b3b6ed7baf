"""screen --engine ray: one task per input file against the broadcast benchmark index; matches.parquet byte for
byte, counts.json and screen.json's counts the local engine's, on inputs with an empty file, duplicate ids and a
document matching several items; a killed worker's task runs again and --resume reuses the finished tasks; the
Screen step of a pipeline on Ray gives the local step's verdicts."""
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_dedup.cli import main

pytest.importorskip("ray")

ITEMS = ["Natalia sold clips to forty eight of her friends in April and then she sold half as many clips in May",
         "Weng earns twelve dollars an hour for babysitting and yesterday she did fifty minutes of babysitting",
         "A robe takes two bolts of blue fiber and half that much white fiber how many bolts in total does it take"]
FILLER = "the quick brown fox jumps over the lazy dog while the cat sleeps on a warm mat near the door"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("screen")
    bench = d / "bench.jsonl"
    bench.write_text("".join(json.dumps({"id": f"q{i}", "question": t}) + "\n" for i, t in enumerate(ITEMS)))
    src = d / "corpus"
    src.mkdir()
    docs = [(f"d{i}", f"{FILLER} {i}") for i in range(30)]
    docs[3] = ("d3", f"intro {ITEMS[0]} outro")
    docs[7] = ("d7", f"{ITEMS[1]} and also {ITEMS[2]}")  # one document, two items
    docs[12] = ("d12", ITEMS[0].upper())  # normalization: the same item
    docs[25] = ("d3", f"again {ITEMS[2]}")  # a duplicate id (screen keeps every row)
    pq.write_table(pa.table({"id": [i for i, _ in docs[:10]], "text": [t for _, t in docs[:10]]}), src / "a.parquet")
    pq.write_table(pa.table({"id": pa.array([], pa.string()), "text": pa.array([], pa.string())}), src / "b.parquet")
    (src / "c.jsonl").write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in docs[10:]))
    return src, bench


def _same(a, b):
    assert (a / "matches.parquet").read_bytes() == (b / "matches.parquet").read_bytes()
    assert json.loads((a / "counts.json").read_text()) == json.loads((b / "counts.json").read_text())
    ja, jb = (json.loads((p / "screen.json").read_text()) for p in (a, b))
    assert ja["totals"] == jb["totals"] and ja["read"]["file_rows"] == jb["read"]["file_rows"]
    return ja, jb


def test_screen_on_ray_equals_local(cluster, inputs, tmp_path):
    src, bench = inputs
    args = ["screen", str(src), "--benchmark", str(bench), "--ngram", "8", "-q"]
    assert main(args + ["-o", str(tmp_path / "local")]) == 0
    assert main(args + ["-o", str(tmp_path / "ray"), "--engine", "ray"]) == 0
    local, ray = _same(tmp_path / "local", tmp_path / "ray")
    assert local["totals"]["documents_flagged"] == 4 and local["totals"]["match_rows"] == 5
    assert ray["engine"]["name"] == "ray" and ray["engine"]["tasks"] == 3 and local.get("engine") is None
    # a worker killed after writing its parts, before its marker: the task runs again, the same bytes
    (cluster / "ray-screen").touch()
    assert main(args + ["-o", str(tmp_path / "killed"), "--engine", "ray"]) == 0
    assert (cluster / "ray-screen.fired").exists()
    _same(tmp_path / "local", tmp_path / "killed")
    # resumed: every task's marker is reused
    assert main(args + ["-o", str(tmp_path / "killed"), "--engine", "ray", "--resume", "--overwrite"]) == 0
    again = json.loads((tmp_path / "killed" / "screen.json").read_text())
    assert again["engine"]["tasks_reused"] == 3
    _same(tmp_path / "local", tmp_path / "killed")


def test_screen_step_on_ray_gives_the_local_verdicts(cluster, inputs, tmp_path):
    """A recipe's screen step on Ray: a flagged document is removed as contaminated, as on the local engine."""
    from gpu_dedup.pipeline.engine import run_pipeline
    from gpu_dedup.runtime.program import Env
    from gpu_dedup.screen.program import Screen
    from gpu_dedup.screen.screening import ScreenConfig

    src, bench = inputs
    step = Screen((str(bench),), ScreenConfig(ngram=8))
    local = run_pipeline([step], str(src), tmp_path / "local")
    ray = run_pipeline([step], str(src), tmp_path / "ray", env=Env(engine="ray", work_dir=str(tmp_path / "w")))
    assert ray.decisions.equals(local.decisions) and int(ray.stats["counts"]["removed"]) == 4
