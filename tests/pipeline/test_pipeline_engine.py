"""The recipe engine (pipeline/engine.py): run.json's read counts what --on-error skip left out of the input."""
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_dedup.cli import main

WORDS = "the of and to in is was for on that with by as at from his her an which were are this be".split()


def _doc(i):
    return " ".join(WORDS[(i * 7 + k * 3) % len(WORDS)] + f"w{(i * 31 + k) % 97}" for k in range(60)) + "."


@pytest.mark.parametrize("steps", ["  - filter:\n      rules: gopher\n",
                                   "  - filter:\n      rules: gopher\n  - dedup:\n      threshold: 0.8\n"])
def test_run_json_read_names_the_skipped_records_and_files(tmp_path, steps):
    d = tmp_path / "in"
    d.mkdir()
    rows = [json.dumps({"id": f"a{i}", "text": _doc(i)}) for i in range(4)]
    (d / "a.jsonl").write_text("\n".join(rows[:2] + ["not json {"] + rows[2:]) + "\n")
    pq.write_table(pa.table({"id": ["p", "q"], "body": ["x", "y"]}), d / "notext.parquet")
    recipe = tmp_path / "r.yaml"
    recipe.write_text("steps:\n" + steps)
    assert main(["pipeline", str(recipe), str(d), "-o", str(tmp_path / "o"), "--on-error", "skip", "-q"]) == 0
    read = json.loads((tmp_path / "o" / "run.json").read_text())["read"]
    assert read["rows"] == 4  # it held the rows alone: the skipped line and file were in steps/01-filter only
    assert [(s["file"], s["line"]) for s in read["skipped"]] == [("a.jsonl", 3), ("notext.parquet", None)]
