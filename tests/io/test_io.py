"""Tests for gpu_dedup.io: input discovery, batch reading rules, error reporting and atomic writing."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import zstandard

from gpu_dedup.io import (
    InputError,
    ReadReport,
    atomic_path,
    check_unique_ids,
    iter_batches,
    make_spec,
    resolve_inputs,
    table_input,
    write_json_atomic,
    write_kept,
    write_parquet_atomic,
)
from gpu_dedup.io import batch as io_batch
from gpu_dedup.io import write as io_write
from gpu_dedup.io.jsonl import JsonlReader
from gpu_dedup.io.parquet import ParquetPool

RECORDS = [
    {"id": "a1", "text": "Hello world", "meta": {"lang": "en"}},
    {"id": "a2", "text": "Grüße, 世界 😀", "meta": {"lang": "de"}},
    {"id": "a3", "text": "", "meta": None},
    {"id": "a4", "text": "line\nbreak \"quoted\" \\ back", "score": 1.5},
    {"id": "a5", "text": "x" * 300},
]


def _jsonl_bytes(records) -> bytes:
    return b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in records)


def _write(path, data: bytes) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if str(path).endswith(".gz"):
        data = gzip.compress(data)
    elif str(path).endswith(".zst"):
        data = zstandard.ZstdCompressor().compress(data)
    with open(path, "wb") as fh:
        fh.write(data)
    return str(path)


def _read(files, **kw):
    args = dict(id_field="id", text_field="text", batch_bytes=1 << 20, on_error="raise")
    args.update(kw)
    return list(iter_batches(files, **args))


def _rows(batches):
    """(ids, texts) over all batches as Python lists."""
    ids = [i for b in batches for i in b.ids.to_pylist()]
    texts = [t for b in batches for t in b.text.to_pylist()]
    return ids, texts


# ------------------------------------------------------------------------------------------- resolve

def test_resolve_files_dirs_globs_sorted(tmp_path):
    _write(tmp_path / "d" / "b.jsonl", b"")
    _write(tmp_path / "d" / "sub" / "a.jsonl.gz", b"")
    _write(tmp_path / "d" / "sub" / "c.parquet", b"")
    _write(tmp_path / "d" / "notes.txt", b"")
    _write(tmp_path / "d" / ".hidden.jsonl", b"")
    _write(tmp_path / "e" / "z.json.zst", b"")
    files = resolve_inputs([tmp_path / "d", str(tmp_path / "e" / "*.zst"), str(tmp_path / "d" / "b.jsonl")])
    assert [f.relpath for f in files] == ["d/b.jsonl", "d/sub/a.jsonl.gz", "d/sub/c.parquet", "e/z.json.zst"]
    assert [(f.fmt, f.compression) for f in files] == [("jsonl", None), ("jsonl", "gzip"), ("parquet", None),
                                                       ("jsonl", "zstd")]
    assert all(os.path.isabs(f.path) for f in files)
    assert [f.path for f in files] == sorted(f.path for f in files)
    # recursive glob; a single file's relpath is its basename
    assert [f.relpath for f in resolve_inputs([str(tmp_path / "**" / "*.parquet")])] == ["c.parquet"]
    assert resolve_inputs([tmp_path / "d" / "b.jsonl"])[0].relpath == "b.jsonl"


def test_resolve_errors_name_the_argument(tmp_path):
    _write(tmp_path / "notes.txt", b"")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="nope"):
        resolve_inputs([str(tmp_path / "nope*.jsonl")])
    with pytest.raises(FileNotFoundError, match="missing.jsonl"):
        resolve_inputs([str(tmp_path / "missing.jsonl")])
    with pytest.raises(ValueError, match="notes.txt.*unsupported"):
        resolve_inputs([str(tmp_path / "notes.txt")])
    with pytest.raises(ValueError, match="empty.*no supported files"):
        resolve_inputs([str(tmp_path / "empty")])


# ------------------------------------------------------------------------------------------- formats

def test_jsonl_gz_zst_parquet_give_identical_batches(tmp_path):
    data = _jsonl_bytes(RECORDS)
    paths = [_write(tmp_path / "r.jsonl", data), _write(tmp_path / "r.jsonl.gz", data),
             _write(tmp_path / "r.jsonl.zst", data)]
    pq.write_table(pa.table({"id": [r["id"] for r in RECORDS], "text": [r["text"] for r in RECORDS]}),
                   tmp_path / "r.parquet")
    paths.append(str(tmp_path / "r.parquet"))
    expected = ([r["id"] for r in RECORDS], [r["text"] for r in RECORDS])
    for p in paths:
        batches = _read(resolve_inputs([p]))
        assert _rows(batches) == expected, p
        assert all(b.text.type == pa.large_string() and b.ids.type == pa.string() for b in batches)
        assert batches[0].row_start == 0 and batches[0].keep_values is None


def test_fast_path_matches_line_parser(tmp_path, monkeypatch):
    """The pyarrow block parser must give exactly what the Python reference parser gives."""
    recs = RECORDS + [{"id": 7, "text": "tab\\t esc \u2028 \u0000 nul", "x": [1, {"y": None}]},
                      {"text": "z", "id": -3, "other": "\\ud83d\\ude00"}]
    data = _jsonl_bytes(recs).replace(b"\n", b"\r\n", 2) + b"\n  \n"
    files = resolve_inputs([_write(tmp_path / "f.jsonl", data)])
    calls = {"fast": 0}
    real_fast = JsonlReader._fast

    def counting_fast(self, *a):
        result = real_fast(self, *a)
        calls["fast"] += result is not None
        return result

    monkeypatch.setattr(JsonlReader, "_fast", counting_fast)
    fast = _read(files, batch_bytes=64)
    assert calls["fast"] > 0
    monkeypatch.setattr(JsonlReader, "_fast", lambda self, *a: None)
    slow = _read(files, batch_bytes=64)
    assert _rows(fast) == _rows(slow)
    assert [(b.row_start, len(b)) for b in fast] == [(b.row_start, len(b)) for b in slow]
    assert _rows(fast)[0][-2:] == ["7", "-3"]


def test_small_batches_are_bounded_contiguous_and_dense(tmp_path):
    texts1 = [f"doc {i} " + "y" * (i % 7) for i in range(23)]
    texts2 = [f"other {i}" for i in range(11)]
    _write(tmp_path / "a.jsonl", _jsonl_bytes({"text": t} for t in texts1))
    _write(tmp_path / "b.jsonl", b"\n" + _jsonl_bytes({"text": t} for t in texts2))
    files = resolve_inputs([tmp_path])
    batches = _read(files, id_field=None, batch_bytes=24)
    assert len(batches) > 10
    nxt = 0
    for b in batches:
        nbytes = sum(len(t.encode()) for t in b.text.to_pylist())
        assert nbytes <= 24 or len(b) == 1
        assert b.text.offset == 0 and b.text.buffers()[2].size == nbytes  # compact, not a view of a block
        assert b.row_start == nxt  # dense across files
        nxt += len(b)
    assert nxt == 34
    assert [b.file_index for b in batches] == sorted(b.file_index for b in batches)
    assert _rows([b for b in batches if b.file_index == 0])[1] == texts1
    assert _rows([b for b in batches if b.file_index == 1])[1] == texts2


# ------------------------------------------------------------------------------------------- ids

def test_missing_id_field_gives_relpath_row_ids(tmp_path):
    _write(tmp_path / "s" / "a.jsonl", b'{"text": "p"}\n\n{"text": "q"}\n')
    pq.write_table(pa.table({"text": ["r", "s"]}), tmp_path / "s" / "b.parquet")
    ids, texts = _rows(_read(resolve_inputs([tmp_path / "s"]), id_field="id"))
    assert ids == ["a.jsonl:0", "a.jsonl:1", "b.parquet:0", "b.parquet:1"]
    assert texts == ["p", "q", "r", "s"]
    ids, _ = _rows(_read(resolve_inputs([tmp_path / "s"]), id_field=None))
    assert ids == ["a.jsonl:0", "a.jsonl:1", "b.parquet:0", "b.parquet:1"]


def test_nested_id_key_is_not_the_id_and_keeps_fast_path(tmp_path, monkeypatch):
    _write(tmp_path / "n.jsonl", b'{"meta": {"id": 5, "q": null}, "text": "a"}\n{"meta": {"id": 6}, "text": "b"}\n')
    slow_calls = []
    real_slow = JsonlReader._slow
    monkeypatch.setattr(JsonlReader, "_slow", lambda self, *a: slow_calls.append(1) or real_slow(self, *a))
    assert _rows(_read(resolve_inputs([tmp_path / "n.jsonl"]))) == (["n.jsonl:0", "n.jsonl:1"], ["a", "b"])
    assert slow_calls == []


def test_skipped_lines_do_not_consume_row_numbers(tmp_path):
    _write(tmp_path / "a.jsonl", b'{"text": "p"}\n{bad\n{"text": "q"}\n')
    rep = ReadReport()
    ids, _ = _rows(_read(resolve_inputs([tmp_path / "a.jsonl"]), on_error="skip", report=rep))
    assert ids == ["a.jsonl:0", "a.jsonl:1"]


def test_int_ids_become_strings(tmp_path):
    _write(tmp_path / "a.jsonl", b'{"id": 12, "text": "a"}\n{"id": "x", "text": "b"}\n{"id": -5, "text": "c"}\n')
    pq.write_table(pa.table({"id": pa.array([3, 40], pa.int64()), "text": ["d", "e"]}), tmp_path / "b.parquet")
    ids, _ = _rows(_read(resolve_inputs([tmp_path])))
    assert ids == ["12", "x", "-5", "3", "40"]


@pytest.mark.parametrize("value,kind", [("1.5", "number"), ("true", "boolean"), ("null", "null"),
                                        ('[1]', "array")])
def test_bad_id_values_are_errors(tmp_path, value, kind):
    _write(tmp_path / "a.jsonl", b'{"id": "ok", "text": "a"}\n{"id": %s, "text": "b"}\n' % value.encode())
    with pytest.raises(InputError, match=f"a.jsonl:2: id field 'id' is .*{kind}"):
        _read(resolve_inputs([tmp_path / "a.jsonl"]))


def test_all_null_ids_are_errors_not_missing(tmp_path):
    _write(tmp_path / "a.jsonl", b'{"id": null, "text": "a"}\n{"id": null, "text": "b"}\n')
    with pytest.raises(InputError, match="a.jsonl:1: id field 'id' is null"):
        _read(resolve_inputs([tmp_path / "a.jsonl"]))
    pq.write_table(pa.table({"id": ["x", None], "text": ["a", "b"]}), tmp_path / "n.parquet")
    with pytest.raises(InputError, match="n.parquet row 1: id field 'id' is null"):
        _read(resolve_inputs([tmp_path / "n.parquet"]))
    pq.write_table(pa.table({"id": [1.5], "text": ["a"]}), tmp_path / "f.parquet")
    with pytest.raises(InputError, match="f.parquet: id field 'id' has type double"):
        _read(resolve_inputs([tmp_path / "f.parquet"]))


@pytest.mark.parametrize("batch_bytes", [1 << 20, 16])  # 16: every line is its own block
def test_empty_string_ids_are_refused_like_nulls(tmp_path, batch_bytes):
    _write(tmp_path / "a.jsonl", b'{"id": "x", "text": "a"}\n{"id": "", "text": "b"}\n{"id": "y", "text": "c"}\n')
    with pytest.raises(InputError, match="a.jsonl:2: id field 'id' is an empty string"):
        _read(resolve_inputs([tmp_path / "a.jsonl"]), batch_bytes=batch_bytes)
    rep = ReadReport()
    batches = _read(resolve_inputs([tmp_path / "a.jsonl"]), on_error="skip", report=rep, batch_bytes=batch_bytes)
    assert _rows(batches) == (["x", "y"], ["a", "c"])
    assert [(s["line"], "empty string" in s["reason"]) for s in rep.skipped] == [(2, True)]
    for name, ids in (("s.parquet", pa.array(["x", ""])), ("b.parquet", pa.array([b"x", b""], pa.binary())),
                      ("d.parquet", pa.array(["x", ""]).dictionary_encode())):
        pq.write_table(pa.table({"id": ids, "text": ["a", "b"]}), tmp_path / name)
        with pytest.raises(InputError, match=f"{name} row 1: id field 'id' is an empty string"):
            _read(resolve_inputs([tmp_path / name]), batch_bytes=batch_bytes)
    # whitespace is an id (a user can look it up); only the empty string is refused
    _write(tmp_path / "w.jsonl", b'{"id": " ", "text": "a"}\n')
    assert _rows(_read(resolve_inputs([tmp_path / "w.jsonl"]), batch_bytes=batch_bytes))[0] == [" "]


@pytest.mark.parametrize("batch_bytes", [1 << 20, 16])  # 16: every line is its own block
def test_mixed_id_presence_names_first_line_without_it(tmp_path, batch_bytes):
    _write(tmp_path / "a.jsonl", b'{"id": "1", "text": "a"}\n\n{"text": "b"}\n')
    with pytest.raises(InputError, match="a.jsonl:3: id field 'id' is missing.*line 1"):
        _read(resolve_inputs([tmp_path / "a.jsonl"]), batch_bytes=batch_bytes)
    _write(tmp_path / "b.jsonl", b'\n{"text": "a"}\n{"id": "1", "text": "b"}\n')
    with pytest.raises(InputError, match="b.jsonl:3: id field 'id' is present.*line 2"):
        _read(resolve_inputs([tmp_path / "b.jsonl"]), batch_bytes=batch_bytes)


def test_duplicate_ids_error_lists_ids_and_counts():
    ids = pa.chunked_array([pa.array(["a", "b", "c"]), pa.array(["b", "d", "b", "c"])])
    with pytest.raises(InputError, match=r"'b' \(3 times: rows 1, 3, 5\); 'c' \(2 times: rows 2, 6\).*--id-field"):
        check_unique_ids(ids)
    check_unique_ids([pa.array(["a", "b"]), pa.array(["c"])])  # unique: no error
    check_unique_ids(pa.chunked_array([], pa.string()))


# ------------------------------------------------------------------------------------------- errors

def test_malformed_line_names_file_and_line(tmp_path):
    _write(tmp_path / "dir" / "m.jsonl", b'{"id": "1", "text": "a"}\n   \n{"id": "2", "text": "b"\n')
    _write(tmp_path / "first.jsonl", b'{"id": "0", "text": "z"}\n')  # root becomes tmp_path
    with pytest.raises(InputError, match=r"dir/m.jsonl:3: malformed JSON"):
        _read(resolve_inputs([tmp_path]))


def test_two_objects_on_one_line_is_malformed(tmp_path):
    # pyarrow alone would read this as two rows; the line count check must catch it
    _write(tmp_path / "two.jsonl", b'{"text": "a"}\n{"text": "b"} {"text": "c"}\n{"text": "d"}\n')
    with pytest.raises(InputError, match="two.jsonl:2: malformed JSON"):
        _read(resolve_inputs([tmp_path / "two.jsonl"]), id_field=None)


def test_skip_mode_records_and_continues(tmp_path):
    lines = [b'{"id": "1", "text": "a"}', b'[1, 2]', b'{"id": "2"}', b'{"id": "3", "text": null}',
             b'{"id": "4", "text": 5}', b'{"id": "5", "text": "b"} {"id": "6", "text": "c"}',
             b'{"id": "7", "text": "d"}']
    _write(tmp_path / "k.jsonl", b"\n".join(lines) + b"\n")
    rep = ReadReport()
    batches = _read(resolve_inputs([tmp_path / "k.jsonl"]), on_error="skip", report=rep)
    assert _rows(batches) == (["1", "7"], ["a", "d"])
    assert [(s["file"], s["line"], s["row"]) for s in rep.skipped] == [("k.jsonl", n, None) for n in (2, 3, 4, 5, 6)]
    reasons = [s["reason"] for s in rep.skipped]
    assert "not a JSON object" in reasons[0] and "missing text field" in reasons[1]
    assert "is null" in reasons[2] and "JSON number" in reasons[3] and "malformed" in reasons[4]
    assert rep.rows == 2 and rep.files == 1 and rep.to_dict()["skipped"] == rep.skipped
    assert json.loads(json.dumps(rep.to_dict()))["skipped"] == rep.skipped  # plain Python values


def test_null_text_and_number_text_errors(tmp_path):
    _write(tmp_path / "n.jsonl", b'{"id": "1", "text": "a"}\n{"id": "2", "text": null}\n')
    with pytest.raises(InputError, match="n.jsonl:2: text field 'text' is null"):
        _read(resolve_inputs([tmp_path / "n.jsonl"]))
    _write(tmp_path / "t.jsonl", b'{"id": "1", "text": 42}\n')
    with pytest.raises(InputError, match=r"t.jsonl:1: text field 'text' is a JSON number \(42\), not a string"):
        _read(resolve_inputs([tmp_path / "t.jsonl"]))
    pq.write_table(pa.table({"id": ["1", "2"], "text": ["a", None]}), tmp_path / "p.parquet")
    with pytest.raises(InputError, match="p.parquet row 1: text field 'text' is null"):
        _read(resolve_inputs([tmp_path / "p.parquet"]))
    pq.write_table(pa.table({"text": [1, 2]}), tmp_path / "q.parquet")
    with pytest.raises(InputError, match="q.parquet: text field 'text' has type int64"):
        _read(resolve_inputs([tmp_path / "q.parquet"]))


def test_invalid_parquet_names_file(tmp_path):
    _write(tmp_path / "bad.parquet", b"this is not parquet")
    _write(tmp_path / "ok.jsonl", b'{"text": "fine"}\n')
    files = resolve_inputs([tmp_path])
    with pytest.raises(InputError, match="bad.parquet: not a readable Parquet file"):
        _read(files)
    rep = ReadReport()
    assert _rows(_read(files, on_error="skip", report=rep))[1] == ["fine"]
    assert rep.skipped[0]["file"] == "bad.parquet" and rep.files == 2 and rep.empty_files == []


@pytest.mark.parametrize("name", ["t.jsonl.zst", "t.jsonl.gz"])
def test_truncated_compressed_file(tmp_path, name):
    """Issue 36 item 2: a truncated stream is a file-level problem; with on_error='skip' no line of the file is
    used (it used to keep the lines before the cut), whatever the block size."""
    rng = np.random.default_rng(0)
    data = _jsonl_bytes({"text": rng.bytes(int(n)).hex()} for n in rng.integers(10, 2000, 2500))
    path = _write(tmp_path / name, data)
    with open(path, "r+b") as fh:  # keep the first 60 % of the compressed bytes
        fh.truncate(os.path.getsize(path) * 6 // 10)
    codec = "zstd" if name.endswith(".zst") else "gzip"
    with pytest.raises(InputError, match=f"^{name}: truncated {codec} stream .* decompressed bytes"):
        _read(resolve_inputs([path]), id_field=None)
    for batch_bytes in (1024, 300_000, 64 << 20):
        rep = ReadReport()
        files = resolve_inputs([path])
        assert _read(files, id_field=None, on_error="skip", batch_bytes=batch_bytes, report=rep) == []
        [entry] = rep.skipped
        assert entry["level"] == "file" and entry["what"] == f"truncated {codec} stream"
        assert entry["bytes"] == os.path.getsize(path) and 0 < entry["records"] < 2500
        assert rep.rows == 0 and rep.empty_files == [] and rep.files == 1
    res = write_kept(files, np.ones(0, bool), tmp_path / "out", id_field=None, text_field="text", on_error="skip")
    assert res["rows_written"] == 0 and not os.path.exists(tmp_path / "out" / name)


# ------------------------------------------------------------------------------------------- UTF-8

BAD_VALUES = [b"ok \xff end", b"cut \xe2\x82", b"surrogate \xed\xa0\x80 x", b"overlong \xc0\xaf", b"\xfe\xfe"]


def test_invalid_utf8_replaced_like_python_and_counted(tmp_path):
    lines = [b'{"id": "good", "text": "fine \xc3\xa9"}'] + [
        b'{"id": "b%d", "text": "' % i + v + b'"}' for i, v in enumerate(BAD_VALUES)]
    _write(tmp_path / "u.jsonl", b"\n".join(lines) + b"\n")
    rep = ReadReport()
    _, texts = _rows(_read(resolve_inputs([tmp_path / "u.jsonl"]), report=rep))
    assert texts == ["fine é"] + [v.decode("utf-8", "replace") for v in BAD_VALUES]
    assert rep.invalid_utf8_rows == len(BAD_VALUES)
    # Parquet / tables: binary text column with the same bytes
    pq.write_table(pa.table({"text": pa.array([b"fine"] + BAD_VALUES, pa.binary())}), tmp_path / "u.parquet")
    rep = ReadReport()
    _, texts = _rows(_read(resolve_inputs([tmp_path / "u.parquet"]), report=rep))
    assert texts == ["fine"] + [v.decode("utf-8", "replace") for v in BAD_VALUES]
    assert rep.invalid_utf8_rows == len(BAD_VALUES)


def test_lone_surrogate_escape_is_replaced(tmp_path):
    _write(tmp_path / "s.jsonl", b'{"text": "a\\ud800b"}\n{"text": "\\ud83d\\ude00"}\n')
    rep = ReadReport()
    _, texts = _rows(_read(resolve_inputs([tmp_path / "s.jsonl"]), report=rep))
    assert texts == ["a\ufffdb", "\U0001F600"] and rep.invalid_utf8_rows == 1


# ------------------------------------------------------------------------------------------- empty / keep

def test_empty_files_yield_nothing_and_are_listed(tmp_path):
    _write(tmp_path / "e1.jsonl", b"")
    _write(tmp_path / "e2.jsonl", b"\n  \n\t\r\n")
    _write(tmp_path / "e3.jsonl.gz", b"")
    pq.write_table(pa.table({"id": pa.array([], pa.string()), "text": pa.array([], pa.string())}),
                   tmp_path / "e4.parquet")
    _write(tmp_path / "full.jsonl", b'{"id": "1", "text": "a"}\n')
    rep = ReadReport()
    batches = _read(resolve_inputs([tmp_path]), report=rep)
    assert [(b.file_index, b.row_start) for b in batches] == [(4, 0)]
    assert rep.empty_files == ["e1.jsonl", "e2.jsonl", "e3.jsonl.gz", "e4.parquet"] and rep.files == 5


def test_keep_column_values_and_errors(tmp_path):
    _write(tmp_path / "k.jsonl", b'{"text": "a", "q": 2}\n{"text": "b", "q": null}\n{"text": "c"}\n'
                                 b'{"text": "d", "q": true}\n{"text": "e", "q": 0.25}\n')
    b = _read(resolve_inputs([tmp_path / "k.jsonl"]), keep_column="q")
    np.testing.assert_array_equal(np.concatenate([x.keep_values for x in b]), [2.0, np.nan, np.nan, 1.0, 0.25])
    assert b[0].keep_values.dtype == np.float64
    pq.write_table(pa.table({"text": ["a", "b"], "q": pa.array([3, None], pa.int32())}), tmp_path / "k.parquet")
    b = _read(resolve_inputs([tmp_path / "k.parquet"]), keep_column="q")
    np.testing.assert_array_equal(b[0].keep_values, [3.0, np.nan])
    with pytest.raises(InputError, match="k.parquet.*keep column 'nope'"):
        _read(resolve_inputs([tmp_path / "k.parquet"]), keep_column="nope")
    with pytest.raises(InputError, match="k.jsonl.*keep column 'nope'"):
        _read(resolve_inputs([tmp_path / "k.jsonl"]), keep_column="nope")
    _write(tmp_path / "s.jsonl", b'{"text": "a", "q": "high"}\n')
    # a string is read as an ISO 8601 date (--keep max:<date column>); one that is none is an error, even in skip mode
    with pytest.raises(InputError, match="s.jsonl:1: keep column 'q': value 'high' is neither a number nor an ISO"):
        _read(resolve_inputs([tmp_path / "s.jsonl"]), keep_column="q", on_error="skip")


def test_keep_column_errors_name_the_setting_that_chose_the_policy(tmp_path):
    """A semantic stage's keep column (--semantic-keep max:COL) was said as "choose another keep policy", which
    the command line read as the dedup's --keep: the reader names the setting it is given (keep_name)."""
    _write(tmp_path / "k.jsonl", b'{"text": "a", "q": 2}\n{"text": "b", "q": "high"}\n')
    pq.write_table(pa.table({"text": ["a", "b"], "q": ["1", "high"]}), tmp_path / "k.parquet")
    for name, column in (("k.jsonl", "nope"), ("k.jsonl", "q"), ("k.parquet", "nope"), ("k.parquet", "q")):
        with pytest.raises(InputError, match=r"choose another keep policy \(SemanticConfig\.keep\)"):
            _read(resolve_inputs([tmp_path / name]), keep_column=column, keep_name="SemanticConfig.keep")
        with pytest.raises(InputError, match=r"keep policy$"):  # no setting given: said as before
            _read(resolve_inputs([tmp_path / name]), keep_column=column)


# ------------------------------------------------------------------------------------------- tables

def test_table_and_dataframe_inputs(tmp_path):
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"text": ["u", "v", "w"], "n": [1, 2, 3]}, index=[10, 11, 12])
    files = table_input(df)
    assert files[0].fmt == "table" and files[0].relpath == "<table>"
    ids, texts = _rows(_read(files))
    assert ids == ["<table>:0", "<table>:1", "<table>:2"] and texts == ["u", "v", "w"]
    tfiles = table_input(pa.table({"id": [5, 6], "text": ["p", "q"]}))
    assert _rows(_read(tfiles)) == (["5", "6"], ["p", "q"])
    res = write_kept(files, np.array([True, False, True]), tmp_path / "out", id_field="id", text_field="text",
                     on_error="raise")
    assert res == {"files": 1, "rows_written": 2}
    out = pq.read_table(tmp_path / "out" / "deduplicated.parquet")
    assert out.to_pydict() == {"text": ["u", "w"], "n": [1, 3]}
    with pytest.raises(TypeError, match="list"):
        table_input([1, 2])


# ------------------------------------------------------------------------------------------- write_kept

def _mixed_jsonl() -> bytes:
    return (b'{"id": "1", "text": "a", "extra": {"k": [1, 2]}, "z": 1.50}\n'
            b'\n'
            b'{"id": "2", "text": "b"}\r\n'
            b'{"id": "3", "text": "c", "extra": "keep me"}\n'
            b'{"id": "4" BROKEN\n'
            b'{"text": "d",     "id": "5"}')  # no final newline


@pytest.mark.parametrize("name", ["m.jsonl", "m.jsonl.gz", "m.jsonl.zst"])
def test_write_kept_jsonl_is_byte_identical(tmp_path, name):
    src = _write(tmp_path / "in" / "sub" / name, _mixed_jsonl())
    files = resolve_inputs([tmp_path / "in"])
    rep = ReadReport()
    ids, _ = _rows(_read(files, on_error="skip", report=rep))
    assert ids == ["1", "2", "3", "5"] and len(rep.skipped) == 1
    res = write_kept(files, np.array([True, False, True, True]), tmp_path / "out", id_field="id",
                     text_field="text", on_error="skip")
    assert res == {"files": 1, "rows_written": 3}
    out = tmp_path / "out" / name  # a single input's relpath is its basename
    raw = out.read_bytes()
    if name.endswith(".gz"):
        raw = gzip.decompress(raw)
    elif name.endswith(".zst"):
        raw = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
    assert raw == (b'{"id": "1", "text": "a", "extra": {"k": [1, 2]}, "z": 1.50}\n'
                   b'{"id": "3", "text": "c", "extra": "keep me"}\n'
                   b'{"text": "d",     "id": "5"}')
    assert os.listdir(out.parent) == [name]  # no temp files left
    assert open(src, "rb").read() != raw  # input untouched, output differs


def test_write_kept_parquet_preserves_schema(tmp_path):
    schema = pa.schema([("id", pa.string()), ("text", pa.large_string()), ("w", pa.float32()),
                        ("tags", pa.list_(pa.string()))], metadata={b"origin": b"test"})
    t = pa.table({"id": ["a", "b", "c", "d"], "text": ["t1", None, "t3", "t4"], "w": [1.0, 2.0, 3.0, 4.0],
                  "tags": [["x"], [], None, ["y", "z"]]}, schema=schema)
    (tmp_path / "in").mkdir()
    pq.write_table(t, tmp_path / "in" / "p.parquet", compression="zstd", row_group_size=2)
    files = resolve_inputs([tmp_path / "in"])
    res = write_kept(files, np.array([False, True, True]), tmp_path / "out", id_field="id", text_field="text",
                     on_error="skip")  # the null-text row 1 is not a row: keep[] covers a, c, d
    assert res == {"files": 1, "rows_written": 2}
    out = pq.ParquetFile(tmp_path / "out" / "p.parquet")
    original = pq.ParquetFile(tmp_path / "in" / "p.parquet").schema_arrow
    assert out.schema_arrow.equals(original, check_metadata=True)
    assert out.schema_arrow.metadata[b"origin"] == b"test" and out.schema_arrow.field("w").type == pa.float32()
    assert out.metadata.row_group(0).column(0).compression == "ZSTD"
    assert out.read().to_pydict() == {"id": ["c", "d"], "text": ["t3", "t4"], "w": [3.0, 4.0],
                                      "tags": [None, ["y", "z"]]}


@pytest.mark.parametrize("threads", [1, 2])
def test_write_kept_picks_up_the_texts_asked_for(tmp_path, threads):
    """texts_of: the texts of those rows (kept or not) as iter_batches gives them, numbered as the run numbers
    them across files (a skipped line and a null-text Parquet row are not rows); the write is unchanged."""
    _write(tmp_path / "in" / "a.jsonl", _mixed_jsonl())  # rows 0-3: ids 1, 2, 3, 5 (one line skipped)
    t = pa.table({"id": ["p0", "p1", "p2", "p3", "p4"], "text": ["x0", None, "x2", "x\u00e93", "x4"]})
    pq.write_table(t, tmp_path / "in" / "b.parquet", row_group_size=2)  # rows 4-7: p0, p2, p3, p4
    files = resolve_inputs([tmp_path / "in"])
    ids, texts = _rows(_read(files, on_error="skip"))
    keep = np.array([True, False, True, True, False, True, False, True])
    want = np.array([7, 1, 4, 6], np.int64)  # any order; removed rows too
    res = write_kept(files, keep, tmp_path / "out", id_field="id", text_field="text", on_error="skip",
                     read_threads=threads, texts_of=want)
    assert res["texts"] == {r: texts[r] for r in want.tolist()}
    assert res["texts"][6] == "x\u00e93" and ids[6] == "p3"
    plain = write_kept(files, keep, tmp_path / "out2", id_field="id", text_field="text", on_error="skip",
                       read_threads=threads)
    assert plain == {k: v for k, v in res.items() if k != "texts"}
    for name in ("a.jsonl", "b.parquet"):
        assert (tmp_path / "out" / name).read_bytes() == (tmp_path / "out2" / name).read_bytes()


def test_leading_bom_is_ignored(tmp_path):
    _write(tmp_path / "in" / "b.jsonl", b'\xef\xbb\xbf{"text": "a"}\n{"text": "b"}\n')
    files = resolve_inputs([tmp_path / "in"])
    assert _rows(_read(files, id_field=None))[1] == ["a", "b"]
    write_kept(files, np.array([True, True]), tmp_path / "out", id_field=None, text_field="text", on_error="raise")
    assert (tmp_path / "out" / "b.jsonl").read_bytes() == b'{"text": "a"}\n{"text": "b"}\n'


def test_write_kept_all_removed_and_empty_files_still_written(tmp_path):
    _write(tmp_path / "in" / "a.jsonl.gz", b'{"text": "a"}\n')
    _write(tmp_path / "in" / "e.jsonl", b"")
    pq.write_table(pa.table({"text": pa.array([], pa.string())}), tmp_path / "in" / "e.parquet")
    files = resolve_inputs([tmp_path / "in"])
    res = write_kept(files, np.array([False]), tmp_path / "out", id_field=None, text_field="text", on_error="raise")
    assert res == {"files": 3, "rows_written": 0}
    assert gzip.decompress((tmp_path / "out" / "a.jsonl.gz").read_bytes()) == b""
    assert (tmp_path / "out" / "e.jsonl").read_bytes() == b""
    assert pq.read_table(tmp_path / "out" / "e.parquet").num_rows == 0


def test_write_kept_checks_keep_length_and_refuses_inputs(tmp_path):
    _write(tmp_path / "a.jsonl", b'{"text": "a"}\n{"text": "b"}\n')
    files = resolve_inputs([tmp_path / "a.jsonl"])
    for bad in (np.array([True]), np.array([True, True, True])):
        with pytest.raises(ValueError, match="keep has"):
            write_kept(files, bad, tmp_path / "out", id_field=None, text_field="text", on_error="raise")
        assert not (tmp_path / "out" / "a.jsonl").exists()  # nothing published on mismatch
    with pytest.raises(ValueError, match="overwrite an input"):
        write_kept(files, np.array([True, True]), tmp_path, id_field=None, text_field="text", on_error="raise")


# ------------------------------------------------------------------------------------------- atomic

def test_atomic_path_removes_temp_on_error_and_renames_on_success(tmp_path):
    target = tmp_path / "sub" / "x.json"
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            with open(tmp, "w") as fh:
                fh.write("partial")
            raise RuntimeError("boom")
    assert os.listdir(tmp_path / "sub") == []
    with atomic_path(target) as tmp:
        assert os.path.dirname(tmp) == str(tmp_path / "sub") and tmp != str(target)
        with open(tmp, "w") as fh:
            fh.write("done")
    assert target.read_text() == "done" and os.listdir(tmp_path / "sub") == ["x.json"]


def test_write_json_and_parquet_atomic(tmp_path):
    write_json_atomic({"b": float("nan"), "a": [1.5, np.float64("inf")], "n": np.int64(3)}, tmp_path / "r.json")
    text = (tmp_path / "r.json").read_text()
    assert json.loads(text) == {"b": None, "a": [1.5, None], "n": 3}
    assert text.index('"b"') < text.index('"a"') and "\n  " in text
    write_parquet_atomic(pa.table({"v": [1, 2]}), tmp_path / "t.parquet")
    assert pq.read_table(tmp_path / "t.parquet").column("v").to_pylist() == [1, 2]
    assert sorted(os.listdir(tmp_path)) == ["r.json", "t.parquet"]


# ------------------------------------------------------------------------------------------- large

def test_single_50mb_document_reads_in_one_batch(tmp_path):
    size = 50 * 2**20
    body = b'{"id": "big", "text": "' + b"ab\xc3\xa9 " * (size // 5) + b'"}\n{"id": "small", "text": "s"}\n'
    _write(tmp_path / "big.jsonl", body)
    start = time.perf_counter()
    batches = _read(resolve_inputs([tmp_path / "big.jsonl"]), batch_bytes=1 << 20)
    elapsed = time.perf_counter() - start
    assert [len(b) for b in batches] == [1, 1]
    assert batches[0].ids.to_pylist() == ["big"]
    assert pc.binary_length(batches[0].text).to_pylist() == [size // 5 * 5]
    assert batches[1].text.to_pylist() == ["s"]
    assert elapsed < 10, elapsed


# ------------------------------------------------------------------------------------------- parallel Parquet

def _parquet_groups(path, table: pa.Table, sizes) -> str:
    """Write ``table`` as row groups of exactly ``sizes`` rows (in order)."""
    assert sum(sizes) == table.num_rows
    with pq.ParquetWriter(path, table.schema, compression="snappy") as w:
        start = 0
        for n in sizes:
            w.write_table(table.slice(start, n), row_group_size=max(1, n))
            start += n
    return str(path)


def _mixed_corpus(tmp_path):
    """Several Parquet files: many row groups of varied sizes, one row group, empty, invalid UTF-8 and
    null text / ids (binary columns), integer ids, no id column, a JSON Lines file between them."""
    rng = np.random.default_rng(11)
    words = ["alpha", "Grüße", "世界", "😀", "x" * 40, "line\nbreak", ""]

    def texts(n):
        return [" ".join(rng.choice(words, int(k))) for k in rng.integers(0, 60, n)]

    d = tmp_path / "mixed"
    d.mkdir()
    sizes = [int(x) for x in rng.integers(1, 90, 25)]
    n = sum(sizes)
    t = pa.table({"id": [f"m{i}" for i in range(n)], "text": texts(n), "q": pa.array(rng.random(n))})
    _parquet_groups(d / "a_many.parquet", t, sizes)
    _parquet_groups(d / "b_one.parquet", pa.table({"id": pa.array(range(500, 530), pa.int64()),
                                                  "text": texts(30), "q": pa.array(np.arange(30.0))}), [30])
    pq.write_table(pa.table({"id": pa.array([], pa.string()), "text": pa.array([], pa.string()),
                             "q": pa.array([], pa.float64())}), d / "c_empty.parquet")
    bad = [t.encode() for t in texts(120)]
    ids = [f"u{i}" for i in range(120)]
    for i in (3, 40, 41, 77, 119):
        bad[i] = bad[i] + BAD_VALUES[i % len(BAD_VALUES)]
    for i in (5, 60, 61, 100):
        bad[i] = None
    for i in (9, 62, 101):
        ids[i] = None
    ids[40] = b"id \xff".decode("latin-1")  # a valid (re-encoded) id; the row's text is invalid
    _parquet_groups(d / "d_dirty.parquet", pa.table({"id": ids, "text": pa.array(bad, pa.binary()),
                                                    "q": pa.array(rng.random(120))}), [7, 50, 1, 33, 29])
    _write(d / "e_lines.jsonl", _jsonl_bytes({"id": f"j{i}", "text": x, "q": i} for i, x in enumerate(texts(40))))
    _parquet_groups(d / "f_noid.parquet", pa.table({"text": texts(200), "q": pa.array(rng.random(200))}),
                    [64, 64, 64, 8])
    return resolve_inputs([d])


def _read_all(files, **kw):
    rep = ReadReport()
    args = {"id_field": "id", "text_field": "text", "batch_bytes": 1 << 20, "on_error": "skip", "keep_column": "q",
            "report": rep}
    args.update(kw)
    out = [(b.file_index, b.row_start, b.ids.to_pylist(), b.text.to_pylist(),
            None if b.keep_values is None else b.keep_values.tolist()) for b in iter_batches(files, **args)]
    return out, rep.to_dict()


def _sequential_reference(files, *, batch_bytes, id_field="id", text_field="text", keep="q"):
    """What the reader gave before it decoded in parallel: per file, record batches of ``rows_per_batch``
    rows (about batch_bytes of the columns read) from ``ParquetFile.iter_batches``, null text / id rows
    dropped, invalid UTF-8 replaced, cut at batch_bytes of text. JSON Lines files come from the reader."""
    out, row = [], 0
    for fi, f in enumerate(files):
        if f.fmt != "parquet":
            for b in iter_batches([f], id_field=id_field, text_field=text_field, batch_bytes=batch_bytes,
                                  on_error="skip", keep_column=keep):
                out.append((fi, row, b.ids.to_pylist(), b.text.to_pylist(), b.keep_values.tolist()))
                row += len(b)
            continue
        pf = pq.ParquetFile(f.path)
        cols = [c for c in (text_field, id_field, keep) if c in pf.schema_arrow.names]
        md = pf.metadata
        size = sum(md.row_group(g).column(c).total_uncompressed_size for g in range(md.num_row_groups)
                   for c in range(md.num_columns) if md.row_group(g).column(c).path_in_schema in cols)
        rows_per_batch = int(max(1, min(1 << 20, batch_bytes // max(1, size // max(1, md.num_rows)))))
        physical = 0
        for rb in pf.iter_batches(batch_size=rows_per_batch, columns=cols):
            d = rb.to_pydict()
            ids, texts, keeps = [], [], []
            for i in range(rb.num_rows):
                t, x = d[text_field][i], d[id_field][i] if id_field in d else f"{f.relpath}:{physical + i}"
                if t is None or x is None:
                    continue
                texts.append(t.decode("utf-8", "replace") if isinstance(t, bytes) else t)
                ids.append(str(x))
                keeps.append(d[keep][i])
            if id_field not in d:  # generated ids count accepted rows only
                first = sum(len(b[2]) for b in out if b[0] == fi)
                ids = [f"{f.relpath}:{first + i}" for i in range(len(ids))]
            physical += rb.num_rows
            cum = np.cumsum([len(t.encode()) for t in texts]).tolist()
            start = 0
            while start < len(texts):
                base = cum[start - 1] if start else 0
                end = max(int(np.searchsorted(cum, base + batch_bytes, side="right")), start + 1)
                out.append((fi, row, ids[start:end], texts[start:end], keeps[start:end]))
                row += end - start
                start = end
    return out


@pytest.mark.parametrize("batch_bytes", [200, 3000, 1 << 30])  # below one row group .. above a whole file
def test_parallel_parquet_equals_sequential_reference(tmp_path, batch_bytes):
    files = _mixed_corpus(tmp_path)
    seq, seq_rep = _read_all(files, batch_bytes=batch_bytes, read_threads=1)
    assert seq_rep["skipped"] and seq_rep["invalid_utf8_rows"] == 5 and seq_rep["empty_files"] == ["c_empty.parquet"]
    assert [(s["file"], s["row"]) for s in seq_rep["skipped"]] == [
        ("d_dirty.parquet", r) for r in (5, 9, 60, 61, 62, 100, 101)]
    assert seq == _sequential_reference(files, batch_bytes=batch_bytes)
    for threads, ahead in ((2, None), (4, 0), (3, 500), (8, 1 << 40)):
        assert _read_all(files, batch_bytes=batch_bytes, read_threads=threads, read_ahead_bytes=ahead) == \
            (seq, seq_rep), (threads, ahead)


def _slow_groups(monkeypatch, delay=0.3, slow=lambda plan, j: j == 0):
    """Make the workers finish out of order: the row groups ``slow`` picks (default: the first of every
    file) decode last."""
    real = ParquetPool._work

    def work(self, plan, j):
        if slow(plan, j):
            time.sleep(delay)
        return real(self, plan, j)

    monkeypatch.setattr(ParquetPool, "_work", work)


def test_parallel_parquet_raises_the_first_error_in_file_order(tmp_path, monkeypatch):
    files = _mixed_corpus(tmp_path)
    with pytest.raises(InputError) as seq:
        _read_all(files, on_error="raise", read_threads=1)
    assert str(seq.value).startswith("d_dirty.parquet row 5: text field 'text' is null")
    _slow_groups(monkeypatch)
    for threads in (2, 6):
        with pytest.raises(InputError) as par:
            _read_all(files, on_error="raise", read_threads=threads, batch_bytes=300)
        assert str(par.value) == str(seq.value)
    # a later file's error, found first by the workers, must not replace an earlier file's
    t = pa.table({"id": [f"r{i}" for i in range(300)], "text": [f"t{i}" for i in range(300)]})
    _parquet_groups(tmp_path / "late.parquet", t.set_column(1, "text", pa.array(
        [f"t{i}" if i != 290 else None for i in range(300)])), [100, 100, 100])
    _parquet_groups(tmp_path / "next.parquet", t.set_column(0, "id", pa.array(
        [None] + [f"s{i}" for i in range(299)])), [300])
    two = resolve_inputs([tmp_path / "late.parquet", tmp_path / "next.parquet"])
    _slow_groups(monkeypatch, 0.1, lambda plan, j: plan.reader.f.relpath == "late.parquet")
    for threads in (1, 4):
        with pytest.raises(InputError, match="^late.parquet row 290: text field 'text' is null"):
            _read_all(two, on_error="raise", keep_column=None, batch_bytes=500, read_threads=threads)


def _corrupt_group(path, g):
    """Overwrite the header of row group g's first text data page with garbage (garbage inside the
    compressed data would only make invalid UTF-8: Parquet pages carry no checksum by default)."""
    md = pq.ParquetFile(path).metadata
    col = md.row_group(g).column(md.schema.to_arrow_schema().get_field_index("text"))
    with open(path, "r+b") as fh:
        fh.seek(col.data_page_offset)
        fh.write(b"\xde\xad\xbe\xef" * 16)


def test_parallel_parquet_unreadable_row_group(tmp_path, monkeypatch):
    """A row group that does not decode fails the whole file, however the pool cuts and schedules it: an
    error naming the row group, or (skip) no row of the file, and no output for it."""
    rng = np.random.default_rng(3)
    t = pa.table({"id": [f"r{i}" for i in range(400)], "text": [rng.bytes(200).hex() for _ in range(400)]})
    path = _parquet_groups(tmp_path / "c.parquet", t, [100] * 4)
    _corrupt_group(path, 2)
    files = resolve_inputs([path])
    with pytest.raises(InputError, match=r"^c.parquet: Parquet data that does not decode \(.*\) in row group 2 "
                                         r"\(from row 200\); the file is damaged"):
        _read_all(files, on_error="raise", keep_column=None, read_threads=1)
    _slow_groups(monkeypatch, delay=0.1)
    for batch_bytes in (5000, 1 << 20):
        for threads in (1, 2, 5):
            files = resolve_inputs([path])
            batches, rep = _read_all(files, keep_column=None, batch_bytes=batch_bytes, read_threads=threads)
            assert batches == [] and rep["rows"] == 0
            [entry] = rep["skipped"]
            assert entry["level"] == "file" and entry["records"] == 400 and entry["unit"] == "rows"
    # write_kept re-reads with the same (parallel) reader: nothing of the file
    res = write_kept(files, np.ones(0, bool), tmp_path / "out", id_field="id", text_field="text", on_error="skip")
    assert res == {"files": 0, "rows_written": 0} and os.listdir(tmp_path / "out") == []


def test_parallel_parquet_read_ahead_is_bounded(tmp_path, monkeypatch):
    t = pa.table({"id": [f"r{i}" for i in range(2000)], "text": ["x" * (50 + i % 50) for i in range(2000)]})
    paths = [_parquet_groups(tmp_path / f"p{k}.parquet", t, [50] * 40) for k in range(3)]
    files = resolve_inputs(paths)
    group_bytes = max(pq.ParquetFile(paths[0]).metadata.row_group(g).total_byte_size for g in range(40))
    pools = []
    real_init = ParquetPool.__init__

    def init(self, *a, **kw):
        real_init(self, *a, **kw)
        pools.append(self)

    monkeypatch.setattr(ParquetPool, "__init__", init)
    expected = _read_all(files, keep_column=None, batch_bytes=4000, read_threads=1)
    assert pools[-1].peak <= group_bytes * 2  # sequential: only the row groups of the batch being read
    for ahead in (0, 3 * group_bytes, 12 * group_bytes):
        assert _read_all(files, keep_column=None, batch_bytes=4000, read_threads=3, read_ahead_bytes=ahead) == expected
        pool = pools[-1]
        assert pool.in_flight == 0 and pool.closed
        assert pool.peak <= max(ahead, 2 * group_bytes)  # a batch spans at most 2 row groups here
        if ahead:
            assert pool.peak > ahead - group_bytes  # it did read ahead, up to the bound
    # an abandoned read stops the pool at once (nothing more is decoded after close)
    it = iter_batches(files, id_field="id", text_field="text", batch_bytes=4000, on_error="raise", read_threads=2,
                      read_ahead_bytes=4 * group_bytes)
    next(it)
    it.close()
    assert pools[-1].closed and pools[-1].in_flight == 0 and pools[-1].plans == {}


def test_parallel_parquet_write_kept_and_knobs(tmp_path):
    files = _mixed_corpus(tmp_path)
    batches = _read_all(files)[0]
    ids = [x for b in batches for x in b[2]]
    keep = np.arange(len(ids)) % 3 != 0
    res = write_kept(files, keep, tmp_path / "out", id_field="id", text_field="text", on_error="skip")
    assert res == {"files": len(files), "rows_written": int(keep.sum())}
    kept = {x for x, k in zip(ids, keep) if k}
    for fi, name in ((0, "a_many"), (1, "b_one"), (3, "d_dirty")):
        file_ids = [x for b in batches if b[0] == fi for x in b[2]]
        out = pq.read_table(tmp_path / "out" / f"{name}.parquet").column("id").to_pylist()
        assert [str(x) for x in out] == [x for x in file_ids if x in kept], name
    with pytest.raises(ValueError, match="read_threads must be a positive int"):
        _read_all(files, read_threads=0)
    with pytest.raises(ValueError, match="read_ahead_bytes must be an int >= 0"):
        _read_all(files, read_ahead_bytes=-1)


def test_parallel_parquet_decodes_row_groups_concurrently(tmp_path, monkeypatch):
    t = pa.table({"id": [f"r{i}" for i in range(600)], "text": [f"text {i}" for i in range(600)]})
    files = resolve_inputs([_parquet_groups(tmp_path / "c.parquet", t, [100] * 6)])
    barrier, broken = threading.Barrier(3, timeout=20), []
    real = ParquetPool._work

    def work(self, plan, j):
        if j < 3:  # the first three row groups must be decoding at the same time
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                broken.append(j)
        return real(self, plan, j)

    monkeypatch.setattr(ParquetPool, "_work", work)
    assert _rows(_read(files, batch_bytes=64, read_threads=3)) == (t["id"].to_pylist(), t["text"].to_pylist())
    assert broken == []


# ------------------------------------------------------------------------------------------- parallel write_kept

def _shard_corpus(tmp_path, n=14):
    """``n`` small shards in a tree: JSON Lines (plain / gz / zst; malformed, non-object, null-text,
    id-less and blank lines, CRLF, a BOM, no final newline) and Parquet (row groups of varied sizes, null
    text / ids, snappy / zstd, one without ids), plus an empty JSON Lines file, an empty Parquet file, a
    file that is not Parquet and one whose third row group cannot be decoded."""
    rng = np.random.default_rng(7)
    d = tmp_path / "shards"

    def words(k):
        return " ".join(f"w{x}" for x in rng.integers(0, 400, int(k)))

    for s in range(n):
        kind = s % 4
        if kind < 3:
            lines = []
            for i in range(int(rng.integers(40, 90))):
                r = rng.random() if i else 1.0  # the first row has an id: the file's rows must all have one
                if r < 0.04:
                    lines.append(b'{"id": "broken ' + str(i).encode())
                elif r < 0.08:
                    lines.append(b" \t\r" if i % 2 else b"")
                elif r < 0.10:
                    lines.append(b'{"id": "n%d", "text": null}' % i)
                elif r < 0.12:
                    lines.append(b"[1, 2]")
                elif r < 0.14:
                    lines.append(json.dumps({"text": words(5)}).encode())  # no id in a file with ids
                else:
                    lines.append(json.dumps({"id": f"s{s}-{i}", "text": words(rng.integers(3, 60)),
                                             "extra": {"k": int(i)}}, ensure_ascii=False).encode())
            data = b"".join(x + (b"\r\n" if i % 5 == 0 else b"\n") for i, x in enumerate(lines))
            if s == 1:
                data = b"\xef\xbb\xbf" + data
            if s == 2:
                data = data.rstrip(b"\r\n")
            _write(d / f"g{s % 3}" / f"s{s:02d}.{('jsonl', 'jsonl.gz', 'jsonl.zst')[kind]}", data)
        else:
            m = int(rng.integers(30, 120))
            texts = [words(rng.integers(3, 60)) if rng.random() > 0.08 else None for _ in range(m)]
            ids = [f"p{s}-{i}" if rng.random() > 0.05 else None for i in range(m)]
            cols = {"id": ids, "text": texts, "w": pa.array(rng.random(m))} if s != 7 else {"text": texts}
            sizes = []
            while sum(sizes) < m:
                sizes.append(min(int(rng.integers(5, 25)), m - sum(sizes)))
            os.makedirs(d / "pq", exist_ok=True)
            path = d / "pq" / f"s{s:02d}.parquet"
            with pq.ParquetWriter(path, pa.table(cols).schema, compression="zstd" if s % 8 else "snappy") as w:
                start = 0
                for k in sizes:
                    w.write_table(pa.table(cols).slice(start, k), row_group_size=k)
                    start += k
    _write(d / "z" / "empty.jsonl", b"")
    pq.write_table(pa.table({"id": pa.array([], pa.string()), "text": pa.array([], pa.string())}),
                   d / "z" / "empty.parquet")
    _write(d / "z" / "not.parquet", b"this is not parquet")
    t = pa.table({"id": [f"c{i}" for i in range(80)], "text": [words(20) for _ in range(80)]})
    _corrupt_group(_parquet_groups(d / "z" / "corrupt.parquet", t, [20] * 4), 2)
    return resolve_inputs([d])


def _tree(root) -> dict:
    """relpath -> bytes of every file under ``root`` (hidden temporary files included)."""
    out = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            p = os.path.join(dirpath, name)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = fh.read()
    return out


def _file_rows(files, on_error="skip", **kw):
    """Rows per file as iter_batches numbers them, in batches of write_kept's chunk size (a row group that
    cannot be decoded ends its file at the record batch holding it, whose size depends on the batch size)."""
    rows = [0] * len(files)
    for b in iter_batches(files, id_field="id", text_field="text", batch_bytes=io_write._WRITE_CHUNK, on_error=on_error,
                          **kw):
        rows[b.file_index] += len(b)
    return rows


def _kept_texts(out_dir, f) -> list:
    p = os.path.join(out_dir, *f.relpath.split("/"))
    if f.fmt == "parquet":
        return pq.read_table(p).column("text").to_pylist()
    with open(p, "rb") as fh:
        raw = fh.read()
    if f.compression == "gzip":
        raw = gzip.decompress(raw)
    elif f.compression == "zstd":
        raw = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
    return [json.loads(x)["text"] for x in raw.splitlines() if x.strip()]


def test_write_kept_parallel_equals_sequential(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(io_write, "_WRITE_CHUNK", 1024)  # many chunks per file
    files = _shard_corpus(tmp_path)
    rep = ReadReport()
    batches = list(iter_batches(files, id_field="id", text_field="text", batch_bytes=1024, on_error="skip",
                                report=rep))
    assert len(rep.skipped) > 30 and rep.empty_files == ["z/empty.jsonl", "z/empty.parquet"]
    file_rows = _file_rows(files)
    assert [io_write._count_rows(f, make_spec("id", "text", "skip", None)) for f in files] == file_rows
    keep = np.random.default_rng(1).random(sum(file_rows)) < 0.6
    kw = {"id_field": "id", "text_field": "text", "on_error": "skip"}
    caplog.clear()
    io_batch._GENERATED_IDS_SAID.clear()  # said once per process: the read above said it
    files = resolve_inputs([tmp_path / "shards"])  # and once per run: the write is a new one
    with caplog.at_level("INFO", logger="gpu_dedup.io"):
        ref = write_kept(files, keep, tmp_path / "t1", read_threads=1, **kw)
    messages = [r.getMessage() for r in caplog.records]
    assert [m for m in messages if "could not be read" in m] == [
        "z/corrupt.parquet could not be read; no output written for it",
        "z/not.parquet could not be read; no output written for it"]
    # the counting pass (file_rows not given) is quiet: the reader's messages come once, from the write
    assert [m.split(" (fields")[0] for m in messages if "has no id field" in m] == [
        "pq/s07.parquet has no id field 'id'"]
    assert ref == {"files": len(files) - 2, "rows_written": int(keep.sum())}
    expected = _tree(tmp_path / "t1")
    assert sorted(expected) == sorted(f.relpath for f in files if f.relpath not in ("z/not.parquet",
                                                                                    "z/corrupt.parquet"))
    # independently of write_kept: each output holds the kept rows of its input, in order
    for fi, f in enumerate(files):
        if f.relpath in ("z/not.parquet", "z/corrupt.parquet"):
            continue
        texts = [t for b in batches if b.file_index == fi for t, k in
                 zip(b.text.to_pylist(), keep[b.row_start:b.row_start + len(b)]) if k]
        assert _kept_texts(tmp_path / "t1", f) == texts, f.relpath
    for threads, given in ((2, None), (3, file_rows), (5, None), (32, file_rows)):
        caplog.clear()
        io_batch._GENERATED_IDS_SAID.clear()
        files = resolve_inputs([tmp_path / "shards"])
        with caplog.at_level("INFO", logger="gpu_dedup.io"):
            res = write_kept(files, keep, tmp_path / f"t{threads}", read_threads=threads, file_rows=given, **kw)
        assert res == ref
        assert _tree(tmp_path / f"t{threads}") == expected, threads  # byte-identical, Parquet too
        assert sorted(r.getMessage() for r in caplog.records if "could not be read" in r.getMessage()
                      or "has no id field" in r.getMessage()) == sorted(
            m for m in messages if "could not be read" in m or "has no id field" in m)


def test_write_kept_counts_rows_like_the_reader(tmp_path, monkeypatch):
    """on_error='raise': the cheap counts (Parquet metadata, non-blank lines) equal the reader's rows."""
    body = b'{"id": "1", "text": "a"}\r\n  \n\t\r\n{"id": "2", "text": "b"}\n\n{"id": "3", "text": "c"}'
    _write(tmp_path / "c" / "bom.jsonl", b"\xef\xbb\xbf" + body)
    _write(tmp_path / "c" / "x.jsonl.gz", body + b"\n" + b" \n" * 3)
    _write(tmp_path / "c" / "y.jsonl.zst", b"\xef\xbb\xbf\n" + body)
    _write(tmp_path / "c" / "blank.jsonl", b"\xef\xbb\xbf  \n\r\n")
    t = pa.table({"id": [str(i) for i in range(50)], "text": [f"t{i}" for i in range(50)]})
    _parquet_groups(tmp_path / "c" / "p.parquet", t, [10, 0, 25, 15])
    files = resolve_inputs([tmp_path / "c"])
    rows = _file_rows(files, on_error="raise")
    assert rows == [0, 3, 50, 3, 3]
    monkeypatch.setattr(io_write, "open_readers", None)  # the cheap count reads nothing through the reader
    assert [io_write._count_rows(f, make_spec("id", "text", "raise", None)) for f in files] == rows


def test_write_kept_files_in_flight_are_bounded(tmp_path, monkeypatch):
    files = _shard_corpus(tmp_path)
    keep = np.ones(sum(_file_rows(files)), bool)
    real = io_write._write_file
    lock, state = threading.Lock(), {"now": 0, "max": 0, "threads": set()}

    def write_file(*a, **kw):
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
            state["threads"].add(threading.current_thread().name)
        try:
            time.sleep(0.02)  # long enough for the other workers to start theirs
            return real(*a, **kw)
        finally:
            with lock:
                state["now"] -= 1

    monkeypatch.setattr(io_write, "_write_file", write_file)
    kw = {"id_field": "id", "text_field": "text", "on_error": "skip"}
    write_kept(files, keep, tmp_path / "one", read_threads=1, **kw)
    assert state["max"] == 1 and state["threads"] == {threading.current_thread().name}  # no thread started
    state["threads"].clear()
    write_kept(files, keep, tmp_path / "three", read_threads=3, **kw)
    assert state["max"] == 3 and len(state["threads"]) == 3
    assert all(name.startswith("gpu_dedup-write") for name in state["threads"])
    assert _tree(tmp_path / "three") == _tree(tmp_path / "one")


def test_write_kept_single_parquet_decodes_ahead(tmp_path, monkeypatch):
    """One Parquet file, 3 threads: its row groups are decoded on 3 threads, up to 4 chunks ahead, while it
    is written."""
    monkeypatch.setattr(io_write, "_WRITE_CHUNK", 4000)
    rng = np.random.default_rng(5)
    t = pa.table({"id": [f"r{i}" for i in range(3000)], "text": [rng.bytes(40).hex() for _ in range(3000)],
                  "n": np.arange(3000)})
    files = resolve_inputs([_parquet_groups(tmp_path / "big.parquet", t, [100] * 30)])
    pools, workers = [], set()
    real_init, real_work = ParquetPool.__init__, ParquetPool._work

    def init(self, *a, **kw):
        real_init(self, *a, **kw)
        pools.append(self)

    def work(self, plan, j):
        workers.add(threading.current_thread().name)
        return real_work(self, plan, j)

    monkeypatch.setattr(ParquetPool, "__init__", init)
    monkeypatch.setattr(ParquetPool, "_work", work)
    keep = np.arange(3000) % 7 != 3
    kw = {"id_field": "id", "text_field": "text", "on_error": "raise"}
    assert write_kept(files, keep, tmp_path / "one", read_threads=1, **kw)["rows_written"] == int(keep.sum())
    assert pools[-1].executor is None and workers == {threading.current_thread().name}
    workers.clear()
    write_kept(files, keep, tmp_path / "three", read_threads=3, **kw)
    pool = pools[-1]
    assert pool.executor is not None and pool.ahead == 2 * 2 * 4000 and workers and all(
        w.startswith("gpu_dedup-parquet") for w in workers)
    group = max(pq.ParquetFile(files[0].path).metadata.row_group(g).total_byte_size for g in range(30))
    assert pool.peak <= max(pool.ahead, 2 * group) + group
    assert _tree(tmp_path / "three") == _tree(tmp_path / "one")
    assert pq.read_table(tmp_path / "one" / "big.parquet").equals(t.filter(pa.array(keep)))


def _clean_shards(tmp_path, n=6, lines=300):
    for s in range(n):
        body = b"".join(json.dumps({"id": f"s{s}-{i}", "text": f"text {s} {i} " * 3}).encode() + b"\n"
                        for i in range(lines))
        _write(tmp_path / "in" / f"s{s}.jsonl{'.gz' if s % 2 else ''}", body)
    t = pa.table({"id": [f"p{i}" for i in range(200)], "text": [f"ptext {i}" for i in range(200)]})
    _parquet_groups(tmp_path / "in" / "t.parquet", t, [20] * 10)


def _no_threads_left():
    return not [t for t in threading.enumerate() if t.name.startswith(("gpu_dedup-write", "gpu_dedup-count"))]


@pytest.mark.parametrize("threads", [1, 3, 8])
def test_write_kept_error_mid_file_leaves_nothing(tmp_path, monkeypatch, threads):
    monkeypatch.setattr(io_write, "_WRITE_CHUNK", 512)
    _clean_shards(tmp_path)
    with open(tmp_path / "in" / "s2.jsonl", "ab") as fh:  # 300 good lines (many chunks), then a bad one
        fh.write(b'{"id": "bad", "text": \n')
    _write(tmp_path / "in" / "z_empty.jsonl", b"")  # no chunk: never stops early, so it is written
    failed = threading.Event()
    real_write_file = io_write._write_file

    def write_file(f, *a):
        if f.relpath == "z_empty.jsonl" and threading.current_thread().name.startswith("gpu_dedup-write"):
            assert failed.wait(20)  # finishes after the failure (with 8 threads it started before it)
        try:
            return real_write_file(f, *a)
        except io_write._Aborted:
            raise
        except BaseException:
            failed.set()
            raise

    monkeypatch.setattr(io_write, "_write_file", write_file)
    files = resolve_inputs([tmp_path / "in"])
    keep = np.ones(6 * 300 + 1 + 200, bool)  # the bad line is counted (on_error='raise' counts non-blank lines)
    kw = {"id_field": "id", "text_field": "text", "on_error": "raise", "read_threads": threads}
    with pytest.raises(InputError, match="^s2.jsonl:301: malformed JSON"):
        write_kept(files, keep, tmp_path / "out", **kw)
    assert _tree(tmp_path / "out") == {} and _no_threads_left()
    # a writer failing in the middle of a Parquet file (row counts from the read)
    real = io_write._open_parquet_writer
    calls = []

    def failing_writer(*a):
        writer = real(*a)
        write = writer.write_batch

        def write_batch(batch):
            calls.append(1)
            if len(calls) == 4:
                raise OSError("No space left on device")
            return write(batch)

        writer.write_batch = write_batch
        return writer

    monkeypatch.setattr(io_write, "_open_parquet_writer", failing_writer)
    (tmp_path / "in" / "s2.jsonl").write_bytes(b"".join(
        json.dumps({"id": f"s2-{i}", "text": "x"}).encode() + b"\n" for i in range(300)))
    files = resolve_inputs([tmp_path / "in"])
    rows = _file_rows(files, on_error="raise")
    failed.clear()
    with pytest.raises(OSError, match="No space left"):
        write_kept(files, np.ones(sum(rows), bool), tmp_path / "out", file_rows=rows, **kw)
    assert len(calls) == 4 and _tree(tmp_path / "out") == {} and _no_threads_left()
    monkeypatch.setattr(io_write, "_open_parquet_writer", real)
    res = write_kept(files, np.ones(sum(rows), bool), tmp_path / "out", file_rows=rows, **kw)
    assert res == {"files": 8, "rows_written": 6 * 300 + 200}


def test_write_kept_raises_the_first_error_in_file_order(tmp_path, monkeypatch):
    """A later file failing first (the earlier one is long and fails at its end) does not win."""
    monkeypatch.setattr(io_write, "_WRITE_CHUNK", 512)
    _clean_shards(tmp_path, n=3, lines=2000)
    with open(tmp_path / "in" / "s0.jsonl", "ab") as fh:
        fh.write(b"[]\n")
    (tmp_path / "in" / "s2.jsonl").write_bytes(b'{"text": "no id, then"}\n{"id": "x", "text": "y"}\n')
    files = resolve_inputs([tmp_path / "in"])
    keep = np.ones(2001 + 2000 + 2 + 200, bool)
    failed, s2_failed = [], threading.Event()
    real = io_write._write_file

    def write_file(f, *a):
        if f.relpath == "s0.jsonl" and threading.current_thread().name.startswith("gpu_dedup-write"):
            assert s2_failed.wait(20)  # in parallel, s0 starts only once s2 has failed
        try:
            return real(f, *a)
        except InputError:
            failed.append(f.relpath)
            if f.relpath == "s2.jsonl":
                s2_failed.set()
            raise

    monkeypatch.setattr(io_write, "_write_file", write_file)
    for threads in (1, 4):
        failed.clear()
        with pytest.raises(InputError, match="^s0.jsonl:2001: not a JSON object"):
            write_kept(files, keep, tmp_path / "out", id_field="id", text_field="text", on_error="raise",
                       read_threads=threads)
        assert _tree(tmp_path / "out") == {} and _no_threads_left()
        assert failed == (["s0.jsonl"] if threads == 1 else ["s2.jsonl", "s0.jsonl"])


def test_write_kept_checks_file_rows(tmp_path):
    _clean_shards(tmp_path, n=2, lines=10)
    files = resolve_inputs([tmp_path / "in"])
    rows = _file_rows(files)
    keep = np.ones(sum(rows), bool)
    kw = {"id_field": "id", "text_field": "text", "on_error": "skip"}
    for threads in (1, 2):
        with pytest.raises(ValueError, match=r"keep has 220 entries but the inputs have a different number of rows "
                                             r"\(s0.jsonl: 10, not 11\)"):
            write_kept(files, keep, tmp_path / "out", file_rows=[11, 9, 200], read_threads=threads, **kw)
        with pytest.raises(ValueError, match=r"keep has 220 entries but the inputs have more rows \(s0.jsonl"):
            write_kept(files, keep, tmp_path / "out", file_rows=[9, 11, 200], read_threads=threads, **kw)
        assert _tree(tmp_path / "out") == {}
    with pytest.raises(ValueError, match="keep has 220 entries but the inputs have 221 rows"):
        write_kept(files, keep, tmp_path / "out", file_rows=[11, 10, 200], **kw)
    with pytest.raises(ValueError, match="file_rows must hold one row count >= 0 per input file"):
        write_kept(files, keep, tmp_path / "out", file_rows=[20, 200], **kw)
    with pytest.raises(ValueError, match="read_threads must be a positive int"):
        write_kept(files, keep, tmp_path / "out", read_threads=0, **kw)


def test_write_spans_gathers_many_runs_byte_identically():
    rng = np.random.default_rng(11)
    for trial in range(200):
        n = int(rng.integers(1, 300))
        lengths, gaps = rng.integers(1, 30, n), rng.integers(0, 3, n) * rng.integers(0, 2, n)
        ends = np.cumsum(gaps + lengths)
        starts = ends - lengths
        raw = memoryview(rng.bytes(int(ends[-1]) + 3))[2:].toreadonly()  # a slice, as after a BOM
        keep = rng.random(n) < rng.random()
        sink = pa.BufferOutputStream()
        io_write._write_spans(sink, raw, starts[keep], ends[keep])
        assert sink.getvalue().to_pybytes() == b"".join(bytes(raw[s:e]) for s, e in zip(starts[keep], ends[keep]))


def test_run_with_an_unreadable_row_group_uses_no_row_of_the_file(tmp_path):
    """Pass 1 (small batches) and the deduplicated/ writer (8 MiB chunks) cut the file differently; neither
    uses a row of a file with a row group that does not decode (it used to keep the rows before it)."""
    from gpu_dedup import RunConfig, deduplicate

    rng = np.random.default_rng(4)
    t = pa.table({"id": [f"r{i}" for i in range(400)], "text": [rng.bytes(300).hex() for _ in range(400)]})
    os.makedirs(tmp_path / "in")
    path = _parquet_groups(tmp_path / "in" / "c.parquet", t, [100] * 4)
    _corrupt_group(path, 2)
    pq.write_table(pa.table({"id": ["g0", "g1"], "text": ["fine words here", "other fine words"]}),
                   tmp_path / "in" / "good.parquet")
    res = deduplicate([tmp_path / "in"], RunConfig(batch_bytes=4096, on_error="skip"), tmp_path / "out")
    assert pq.read_table(tmp_path / "out" / "decisions.parquet")["id"].to_pylist() == ["g0", "g1"]
    assert os.listdir(tmp_path / "out" / "deduplicated") == ["good.parquet"]
    [entry] = res.stats["read"]["skipped"]
    assert entry["file"] == "c.parquet" and entry["level"] == "file"


# ------------------------------------------------------------------- issue 14: discovery, ids, text field

def test_markers_match_the_formats_the_package_writes():
    from gpu_dedup.lexical import index
    from gpu_dedup.runtime import workdir
    from gpu_dedup.io import discover

    assert discover.MANIFEST_FORMATS == {workdir.FORMAT: "work dir", index.FORMAT: "index"}
    assert workdir.MANIFEST == "manifest.json"


def test_directory_walk_skips_runs_work_dirs_and_indexes(tmp_path, caplog):
    """A real run whose outputs, work dir and index sit inside its own input folder: a second run over the
    folder reads only the original data, logs what it left out, and decides the same."""
    import gpu_dedup
    from gpu_dedup import RunConfig

    crawl = tmp_path / "crawl"
    recs = [{"id": f"d{i}", "text": ("alpha beta gamma delta epsilon zeta " * 3) + ("" if i % 2 else str(i))}
            for i in range(12)]
    _write(crawl / "a.jsonl", _jsonl_bytes(recs[:6]))
    (crawl / "sub").mkdir()
    pq.write_table(pa.Table.from_pylist(recs[6:]), crawl / "sub" / "b.parquet")
    cfg = RunConfig.preset("default", progress=False)
    first = gpu_dedup.deduplicate(str(crawl), cfg, output_dir=tmp_path / "out", save_index=tmp_path / "idx",
                                  work_dir=tmp_path / "work")
    for name, dest in (("out", "out"), ("idx", "idx"), ("work", "sub/work")):  # as left by a careless user
        shutil.move(tmp_path / name, crawl / dest)
    assert (crawl / "out" / "deduplicated" / "a.jsonl").exists() and (crawl / "idx" / "manifest.json").exists()
    with caplog.at_level("INFO", logger="gpu_dedup.io"):
        files = resolve_inputs([crawl])
    assert [f.relpath for f in files] == ["a.jsonl", "sub/b.parquet"]
    for name, what in (("out", "a gpu-dedup run"), ("idx", "a gpu-dedup index"), ("work", "a gpu-dedup work dir")):
        assert f"{name}, which holds {what}" in caplog.text
    again = gpu_dedup.deduplicate(str(crawl), cfg)
    assert again.decisions.equals(first.decisions)
    # a ** glob skips them too; a directory found by a glob is skipped, not an error
    assert [f.relpath for f in resolve_inputs([str(crawl / "**" / "*.jsonl")])] == ["a.jsonl"]
    assert [f.relpath for f in resolve_inputs([str(crawl / "*")])] == ["a.jsonl", "sub/b.parquet"]
    # named explicitly, a run's files are read: a file, its deduplicated/ folder, a glob naming that folder
    assert resolve_inputs([crawl / "out" / "deduplicated" / "a.jsonl"])[0].relpath == "a.jsonl"
    assert [f.relpath for f in resolve_inputs([crawl / "out" / "deduplicated"])] == ["a.jsonl", "sub/b.parquet"]
    assert len(resolve_inputs([str(crawl / "*" / "deduplicated" / "*.jsonl")])) == 1
    # a directory input that is itself a run / index is an error saying so
    with pytest.raises(ValueError, match=r"holds a gpu-dedup run .*pass '.*deduplicated'"):
        resolve_inputs([crawl / "out"])
    with pytest.raises(ValueError, match="holds a gpu-dedup index"):
        resolve_inputs([crawl / "idx"])


def test_only_complete_markers_skip_a_directory(tmp_path):
    """decisions.parquet alone, run.json alone, or a manifest.json of another format: ordinary data."""
    for sub, names in (("d1", {"decisions.parquet": b"", "x.jsonl": b'{"text": "a"}\n'}),
                       ("d2", {"run.json": b"{}", "x.jsonl": b'{"text": "a"}\n'}),
                       ("d3", {"manifest.json": b'{"format": "something-else"}', "x.jsonl": b'{"text": "a"}\n'}),
                       ("d4", {"manifest.json": b"not json", "x.jsonl": b'{"text": "a"}\n'})):
        for name, data in names.items():
            _write(tmp_path / sub / name, data)
    rels = [f.relpath for f in resolve_inputs([tmp_path])]
    assert rels == ["d1/decisions.parquet", "d1/x.jsonl", "d2/run.json", "d2/x.jsonl", "d3/manifest.json",
                    "d3/x.jsonl", "d4/manifest.json", "d4/x.jsonl"]  # (.json is JSON Lines)


def test_one_rule_leaves_out_every_command_output(tmp_path, caplog):
    """Issue 28 item 3: every program's output directory (one OUTPUT_SIGNATURES line each), a killed owned run
    (only .gpu-dedup-outputs.json yet) and a classifier's model card are left out of a walk and of a ** glob,
    each logged; named explicitly they are read. The signatures name the files the writers write."""
    from gpu_dedup.runtime import outputs
    from gpu_dedup.filters import train
    from gpu_dedup.io import discover

    from gpu_dedup.substring import dedup as substring

    assert discover.OUTPUT_SIGNATURES[-1][0] == (outputs.MANIFEST,)
    assert ("substring_dedup.json",) in [m for m, _ in discover.OUTPUT_SIGNATURES]
    assert "substring_dedup.json" in substring.OUTPUT_FILES  # the marker is what substring_dedup writes
    doc = b'{"id": "x", "text": "not data"}\n'
    crawl = tmp_path / "crawl"
    _write(crawl / "a.jsonl", b'{"id": "a", "text": "data"}\n')
    for i, (markers, _) in enumerate(discover.OUTPUT_SIGNATURES):
        for name in markers:
            _write(crawl / f"out{i}" / name, b"{}")
        _write(crawl / f"out{i}" / "filtered" / "x.jsonl", doc)
        _write(crawl / f"out{i}" / "audit.parquet", b"PAR1")
    card = {"format": train.CARD_FORMAT, "format_version": train.CARD_VERSION, "labels": ["a"]}
    _write(crawl / "models" / "q.bin.json", json.dumps(card, indent=2).encode())
    with caplog.at_level("INFO", logger="gpu_dedup.io"):
        assert [f.relpath for f in resolve_inputs([crawl])] == ["a.jsonl"]
    for i, (_, kind) in enumerate(discover.OUTPUT_SIGNATURES):
        assert f"out{i}, which holds {kind}" in caplog.text
    assert f"q.bin.json, which holds a gpu-dedup file of format {train.CARD_FORMAT!r}" in caplog.text
    assert [f.relpath for f in resolve_inputs([str(crawl / "**" / "*.json*")])] == ["a.jsonl"]
    # named explicitly: read
    assert resolve_inputs([crawl / "models" / "q.bin.json"])[0].relpath == "q.bin.json"
    assert len(resolve_inputs([str(crawl / "models" / "q.bin.json")])) == 1
    with pytest.raises(ValueError, match=r"holds a gpu-dedup filter run .*pass '.*filtered'"):
        resolve_inputs([crawl / "out1"])
    # ordinary JSON whose "format" is not first / not ours: data
    _write(crawl / "b.json", b'{"text": "x", "format": "gpu_dedup-classifier-card"}\n')
    _write(crawl / "c.json", b'{"format": "gpu_dedupx", "text": "x"}\n')
    assert [f.relpath for f in resolve_inputs([crawl])] == ["a.jsonl", "b.json", "c.json"]


def test_a_mistyped_id_field_is_one_warning_naming_the_files(tmp_path, caplog):
    """Issue 28 item 6, issue 36 item 14: --id-field idd on JSON Lines and Parquet: generated ids; one WARNING
    for the whole run (pass 1 and the deduplicated/ writer read each file) with the close field, and one line
    naming every file without it (it used to repeat once per file)."""
    from gpu_dedup.cli import main

    recs = [{"id": f"d{i}", "text": f"alpha beta gamma delta {i}"} for i in range(6)]
    _write(tmp_path / "in" / "a.jsonl", _jsonl_bytes(recs[:3]))
    pq.write_table(pa.Table.from_pylist(recs[3:]), tmp_path / "in" / "b.parquet")
    with caplog.at_level("INFO", logger="gpu_dedup"):
        assert main(["run", str(tmp_path / "in"), "-o", str(tmp_path / "out"), "--id-field", "idd", "-q"]) == 0
    said = [r for r in caplog.records if "has no id field" in r.getMessage()]
    assert [r.getMessage().split(" (")[0] for r in said] == ["a.jsonl has no id field 'idd'"]
    assert all(r.levelname == "WARNING" and "did you mean 'id'?" in r.getMessage() for r in said)
    named = [r.getMessage() for r in caplog.records if "is missing from" in r.getMessage()]
    assert named == ["id field 'idd' is missing from all input files (a.jsonl, b.parquet): their ids were "
                     "generated '<relpath>:<row>' (see the first file's warning for the fix)"]
    ids = pq.read_table(tmp_path / "out" / "decisions.parquet")["id"].to_pylist()
    assert ids[0] == "a.jsonl:0" and ids[3] == "b.parquet:0"


def _ids_of(files, **kw):
    args = dict(id_field="id", text_field="text", batch_bytes=1 << 20, on_error="raise")
    args.update(kw)
    return [b.ids for b in iter_batches(files, **args)]


@pytest.mark.parametrize("with_rows", [False, True])
def test_duplicate_ids_name_file_line_and_row(tmp_path, with_rows):
    _write(tmp_path / "a.jsonl", b'{"id": "p", "text": "1"}\n\n{"id": "x", "text": "2"}\n{"id": "y", "text": "3"}\n')
    _write(tmp_path / "b.jsonl.gz", b'{"id": "q", "text": "1"}\n{"id": "x", "text": "2"}\n')
    pq.write_table(pa.table({"id": ["r", "y", "x"], "text": ["1", "2", "3"]}), tmp_path / "c.parquet")
    files = resolve_inputs([tmp_path])
    ids = _ids_of(files)
    rows = [3, 2, 3] if with_rows else None
    with pytest.raises(InputError) as err:
        check_unique_ids(ids, files, rows, id_field="id", text_field="text", on_error="raise")
    msg = str(err.value)
    # physical lines (the blank line 2 counts), Parquet physical rows
    assert "'x' (3 times: a.jsonl:3, b.jsonl.gz:2, c.parquet row 2)" in msg
    assert "'y' (2 times: a.jsonl:4, c.parquet row 1)" in msg
    assert "invalid UTF-8" not in msg and "--id-field" in msg


def test_duplicate_ids_positions_count_skipped_rows_and_read_only_the_files_concerned(tmp_path, monkeypatch):
    _write(tmp_path / "a.jsonl", b'{"id": "k", "text": "1"}\n')
    _write(tmp_path / "b.jsonl", b'{"id": "u", "text": "1"}\nBROKEN\n{"id": "u", "text": "2"}\n')
    pq.write_table(pa.table({"id": ["v", "w", "v"], "text": ["1", None, "3"]}), tmp_path / "c.parquet")
    files = resolve_inputs([tmp_path])
    rep = ReadReport()
    ids = _ids_of(files, on_error="skip", report=rep)
    assert len(rep.skipped) == 2
    from gpu_dedup.io import ids as io_ids

    opened = []
    real = io_ids.open_readers
    monkeypatch.setattr(io_ids, "open_readers", lambda fs, *a, **k: opened.append(fs[0].relpath) or real(fs, *a, **k))
    with pytest.raises(InputError, match=r"'u' \(2 times: b.jsonl:1, b.jsonl:3\); 'v' \(2 times: c.parquet row 0, "
                                         r"c.parquet row 2\)"):
        check_unique_ids(ids, files, [1, 2, 2], id_field="id", text_field="text", on_error="skip")
    assert opened == ["b.jsonl", "c.parquet"]  # a.jsonl holds no duplicate: not read again


def test_duplicate_ids_from_utf8_replacement_say_so(tmp_path):
    _write(tmp_path / "a.jsonl", b'{"id": "caf\xe9", "text": "1"}\n{"id": "ok", "text": "2"}\n')
    _write(tmp_path / "b.jsonl", b'{"id": "caf\xff", "text": "3"}\n')
    pq.write_table(pa.table({"id": pa.array([b"n\xfe", b"n\xfd"], pa.binary()), "text": ["1", "2"]}),
                   tmp_path / "c.parquet")
    files = resolve_inputs([tmp_path])
    with pytest.raises(InputError) as err:
        check_unique_ids(_ids_of(files), files, id_field="id", text_field="text", on_error="raise")
    msg = str(err.value)
    assert "'caf\ufffd' (2 times: a.jsonl:1, b.jsonl:1)" in msg
    assert "the ids differ in the input (b'caf\\xe9', b'caf\\xff')" in msg
    assert "'n\ufffd' (2 times: c.parquet row 0, c.parquet row 1)" in msg and "b'n\\xfe', b'n\\xfd'" in msg
    assert msg.count("comes from replacing their invalid UTF-8 with U+FFFD") == 2
    # the same replaced id twice in the input is an ordinary duplicate
    _write(tmp_path / "b.jsonl", b'{"id": "caf\xe9", "text": "3"}\n')
    (tmp_path / "c.parquet").unlink()
    files = resolve_inputs([tmp_path])
    with pytest.raises(InputError, match=r"'caf\ufffd' \(2 times: a.jsonl:1, b.jsonl:1\)") as err:
        check_unique_ids(_ids_of(files), files, id_field="id", text_field="text", on_error="raise")
    assert "invalid UTF-8" not in str(err.value)


def test_pipeline_duplicate_ids_name_both_positions(tmp_path):
    import gpu_dedup
    from gpu_dedup import RunConfig

    _write(tmp_path / "a.jsonl", b'{"id": "x", "text": "one two"}\n{"id": "x", "text": "three four"}\n')
    # file:line once the pipeline passes its files to check_unique_ids, the run's rows before
    with pytest.raises(InputError, match=r"'x' \(2 times: (a\.jsonl:1, a\.jsonl:2|rows 0, 1)\)"):
        gpu_dedup.deduplicate(str(tmp_path), RunConfig(progress=False))


@pytest.mark.parametrize("name", ["w.jsonl", "w.parquet", "<table>"])
def test_wrong_text_field_names_field_file_fields_and_the_option(tmp_path, name):
    table = pa.table({"id": ["1", "2"], "body": ["a", "b"], "url": ["u", "v"]})
    if name == "<table>":
        files = table_input(table)
    else:
        if name.endswith(".parquet"):
            pq.write_table(table, tmp_path / name)
        else:
            _write(tmp_path / name, _jsonl_bytes(table.to_pylist()))
        files = resolve_inputs([tmp_path / name])
    with pytest.raises(InputError) as err:
        _read(files, text_field="bodi")
    msg = str(err.value)
    assert msg.startswith(name) and "missing text field 'bodi'" in msg and "'id', 'body', 'url'" in msg
    assert "did you mean 'body'?" in msg and "--text-field body" in msg and "text_field='body'" in msg
    assert "on_error" not in msg and "--on-error" not in msg
    with pytest.raises(InputError) as err:
        _read(files, text_field="zzz")  # nothing close: no guess, still the option to set
    assert "did you mean" not in str(err.value) and "--text-field NAME" in str(err.value)


def test_text_field_missing_from_one_record_is_a_bad_record(tmp_path):
    _write(tmp_path / "r.jsonl", b'{"id": "1", "text": "a"}\n{"id": "2", "Text": "b"}\n')
    with pytest.raises(InputError, match=r"r.jsonl:2: missing text field 'text' \(this record's fields: "
                                         r"\['id', 'Text'\]\); .*--on-error skip \(Python: on_error='skip'\)"):
        _read(resolve_inputs([tmp_path / "r.jsonl"]))
    # the first record lacking it: the field is wrong, case-insensitive match suggested
    _write(tmp_path / "s.jsonl", b'{"id": "1", "Text": "a"}\n')
    with pytest.raises(InputError, match=r"s.jsonl:1: .*did you mean 'Text'\? .*--text-field Text"):
        _read(resolve_inputs([tmp_path / "s.jsonl"]))
