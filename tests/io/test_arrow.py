"""Parquet / table inputs (io/arrow.py): a file skipped for its schema is counted as a whole file."""
import json
import logging

import pyarrow as pa
import pyarrow.parquet as pq

from gpu_dedup.cli import main
from gpu_dedup.io import ReadReport, iter_batches, read_summary, resolve_inputs


def test_a_parquet_file_without_the_text_column_is_skipped_whole_and_its_rows_counted(tmp_path, caplog):
    d = tmp_path / "in"
    d.mkdir()
    pq.write_table(pa.table({"id": ["a", "b"], "body": ["x", "y"]}), d / "notext.parquet")
    (d / "ok.jsonl").write_text(json.dumps({"id": "c", "text": "three words here"}) + "\n")
    report = ReadReport()
    with caplog.at_level(logging.WARNING, logger="gpu_dedup.io"):
        rows = sum(len(b.ids) for b in iter_batches(resolve_inputs([str(d)]), id_field="id", text_field="text",
                                                     batch_bytes=1 << 20, on_error="skip", report=report))
    assert rows == 1
    [entry] = report.skipped
    assert entry["file"] == "notext.parquet" and entry["level"] == "file" and entry["records"] == 2
    assert entry["not_used"] == "2 rows" and entry["what"] == "missing text field 'text'"
    assert "notext.parquet: skipped the whole file: missing text field 'text'" in caplog.text
    assert "bad row(s)" not in caplog.text  # it said "skipped 1 bad row(s)" for the file's 2 rows
    assert read_summary(report.to_dict())[0].startswith("skipped 1 file (notext.parquet: missing text field "
                                                        "'text', 2 rows not used)")


def test_filter_run_json_counts_the_rows_of_a_skipped_file(tmp_path, caplog):
    d = tmp_path / "in"
    d.mkdir()
    pq.write_table(pa.table({"id": ["a", "b"], "body": ["x", "y"]}), d / "notext.parquet")
    (d / "ok.jsonl").write_text(json.dumps({"id": "c", "text": "three words here"}) + "\n")
    with caplog.at_level(logging.WARNING, logger="gpu_dedup.io"):
        assert main(["filter", str(d), "-o", str(tmp_path / "o"), "--rules", "gopher", "--on-error", "skip",
                     "-q"]) == 0
    said = [m for m in caplog.messages if "skipped the whole file" in m]
    assert len(said) == 1, said  # once, though the kept records' writing reads the input again
    read = json.loads((tmp_path / "o" / "run.json").read_text())["read"]
    assert read["rows"] == 1 and read["skipped"][0]["records"] == 2 and read["skipped"][0]["level"] == "file"
