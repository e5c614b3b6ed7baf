"""--annotate: the kept records of deduplicated/ carry dup_cluster_size and dup_cluster_id."""
import gzip
import json
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_dedup import RunConfig, deduplicate

BASE = "the quick brown fox jumps over the lazy dog and runs far away into the deep green forest"


def _rows():
    rows = []
    for i in range(12):
        text = BASE if i % 3 == 0 else (BASE.replace("lazy", "sleepy") if i % 3 == 1 else f"unique text number {i} "
                                        f"with several more words {i * 7}")
        rows.append({"id": f"r{i}", "text": text, "meta": {"n": i, "s": "é\u2028"}})
    return rows


def _expected(decisions):
    d = decisions.to_pylist()
    return {r["id"]: (r["cluster_size"], r["cluster_id"]) for r in d if r["keep"]}


def test_jsonl_lines_get_the_fields_appended_and_stay_byte_identical_otherwise(tmp_path):
    raw_lines = []
    for i, r in enumerate(_rows()):
        sep = (", ", ": ") if i % 2 else (",", ":")
        line = json.dumps(r, separators=sep, ensure_ascii=i % 4 == 0)
        raw_lines.append(line + ("  \r\n" if i == 5 else "\n"))
    raw_lines[-1] = raw_lines[-1].rstrip("\n")  # the last line without its newline
    src = tmp_path / "in.jsonl.gz"
    with gzip.open(src, "wt", encoding="utf-8", newline="") as fh:
        fh.write("".join(raw_lines))
    res = deduplicate(str(src), output_dir=str(tmp_path / "out"), annotate=True)
    want = _expected(res.decisions)
    assert any(size > 1 for size, _ in want.values())
    with gzip.open(tmp_path / "out" / "deduplicated" / "in.jsonl.gz", "rt", encoding="utf-8", newline="") as fh:
        out = re.findall(r"[^\n]*\n|[^\n]+$", fh.read())  # not splitlines: U+2028 is no line break
    by_id = {json.loads(line)["id"]: line for line in raw_lines}
    assert len(out) == len(want)
    for line in out:
        obj = json.loads(line)
        size, cid = want[obj["id"]]
        assert (obj.pop("dup_cluster_size"), obj.pop("dup_cluster_id")) == (size, cid)
        orig = by_id[obj["id"]]
        # the original line up to its closing brace, the members, then the original tail
        brace = len(orig.rstrip(" \t\r\n")) - 1
        assert line == orig[:brace] + f', "dup_cluster_size": {size}, "dup_cluster_id": {cid}' + orig[brace:] \
            or (orig is raw_lines[-1] and line.startswith(orig[:brace]))
        assert obj == json.loads(orig)
    plain = deduplicate(str(src), output_dir=str(tmp_path / "plain"))
    assert plain.decisions.equals(res.decisions)


def test_parquet_and_table_get_int64_columns(tmp_path):
    t = pa.Table.from_pylist(_rows())
    pq.write_table(t, tmp_path / "in.parquet", row_group_size=5, compression="zstd")
    res = deduplicate(str(tmp_path / "in.parquet"), output_dir=str(tmp_path / "out"), annotate=True)
    got = pq.read_table(tmp_path / "out" / "deduplicated" / "in.parquet")
    assert got.schema.names == t.schema.names + ["dup_cluster_size", "dup_cluster_id"]
    assert got.schema.field("dup_cluster_size").type == pa.int64()
    want = _expected(res.decisions)
    assert {r["id"]: (r["dup_cluster_size"], r["dup_cluster_id"]) for r in got.to_pylist()} == want
    assert got.drop_columns(["dup_cluster_size", "dup_cluster_id"]).equals(
        t.filter(pa.array([r["id"] in want for r in t.to_pylist()])))
    res = deduplicate(t, output_dir=str(tmp_path / "tab"), annotate=True)
    got = pq.read_table(tmp_path / "tab" / "deduplicated" / "deduplicated.parquet")
    assert {r["id"]: (r["dup_cluster_size"], r["dup_cluster_id"]) for r in got.to_pylist()} == want


def test_an_existing_field_is_refused_and_annotate_needs_deduplicated(tmp_path):
    t = pa.Table.from_pylist([{**r, "dup_cluster_size": 1} for r in _rows()])
    with pytest.raises(ValueError, match="already has a column 'dup_cluster_size'"):
        deduplicate(t, output_dir=str(tmp_path / "a"), annotate=True)
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({**r, "dup_cluster_id": 0}) + "\n" for r in _rows()))
    with pytest.raises(ValueError, match="already has a field 'dup_cluster_id'"):
        deduplicate(str(src), output_dir=str(tmp_path / "b"), annotate=True)
    with pytest.raises(ValueError, match="which write_deduplicated=False turns off"):
        RunConfig(annotate=True, write_deduplicated=False)


def test_cli_annotate(tmp_path):
    from gpu_dedup.cli import main

    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    assert main(["run", str(src), "-o", str(tmp_path / "o"), "-q", "--annotate"]) == 0
    lines = (tmp_path / "o" / "deduplicated" / "in.jsonl").read_text().splitlines()
    assert all("dup_cluster_size" in json.loads(x) for x in lines)
