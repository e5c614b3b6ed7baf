"""Tests for gpu_dedup.io.check and the damaged-file rule of the readers (issue 36 items 2 and 14): a file whose
stored data fails to decode (flipped bytes, a truncated stream, a Parquet row group that does not decode) is a
file-level error naming the file, or with on_error='skip' is skipped whole in every pass; no record of it
reaches any output. Also: a file that changes between passes, the summary lines, an input without a document."""
from __future__ import annotations

import gzip
import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xxhash
import zstandard

import gpu_dedup
from gpu_dedup import RunConfig
from gpu_dedup.errors import DataError
from gpu_dedup.io import (
    InputError,
    ReadReport,
    check_parquet,
    check_stream,
    iter_batches,
    read_summary,
    resolve_inputs,
    write_kept,
)
from gpu_dedup.io import batch as io_batch
from gpu_dedup.io import check as io_check

_VOCAB = np.array(["".join(chr(97 + c) for c in np.random.default_rng(k).integers(0, 26, 2 + k % 9))
                   for k in range(5000)])


def _records(tag: str, n: int, seed: int) -> list[dict]:
    """n records of ~3 KB of word-like text (as poorly compressible as web text): ids tag0.., distinct texts."""
    rng = np.random.default_rng(seed)
    return [{"id": f"{tag}{i}", "text": f"{tag} {i} " + " ".join(_VOCAB[rng.integers(0, len(_VOCAB), 500)])}
            for i in range(n)]


def _jsonl(records) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def _put(path, data: bytes, checksum: bool = False) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if str(path).endswith(".gz"):
        data = gzip.compress(data)
    elif str(path).endswith(".zst"):
        data = zstandard.ZstdCompressor(write_checksum=checksum).compress(data)
    with open(path, "wb") as fh:
        fh.write(data)
    return str(path)


def _damage(path, how: str) -> None:
    """"flip": 64 bytes in the middle of the file inverted; "truncate": the first 60 % of it kept."""
    with open(path, "rb") as fh:
        raw = bytearray(fh.read())
    if how == "flip":
        mid = len(raw) // 2
        raw[mid:mid + 64] = bytes(b ^ 0xFF for b in raw[mid:mid + 64])
    else:
        raw = raw[:len(raw) * 6 // 10]
    with open(path, "wb") as fh:
        fh.write(raw)


# (file name, damage, what the error / the skip entry calls it); ~3 MB decompressed: more than the reader's
# 1 MiB windows, so the old reader used lines decoded before the codec noticed
CASES = [("part-1.jsonl.gz", "flip", "corrupt gzip stream"), ("part-1.jsonl.gz", "truncate", "truncated gzip stream"),
         ("part-1.jsonl.zst", "flip", "corrupt zstd stream"), ("part-1.jsonl.zst", "truncate", "truncated zstd stream")]
IDS = [c[0].split(".", 1)[1] + "-" + c[1] for c in CASES]


def _corpus(tmp_path, name: str, how: str) -> tuple[str, list[dict]]:
    """in/a.jsonl (intact, 40 records), in/<name> (1,031 records, damaged), in/z.jsonl.gz (intact, 30); returns
    the directory and the intact records in input order."""
    d = tmp_path / "in"
    a, z = _records("a", 40, 1), _records("z", 30, 2)
    _put(d / "a.jsonl", _jsonl(a))
    _damage(_put(d / name, _jsonl(_records("p", 1031, 3))), how)
    _put(d / "z.jsonl.gz", _jsonl(z))
    return str(d), a + z


def _read(files, **kw):
    args = {"id_field": "id", "text_field": "text", "batch_bytes": 1 << 20, "on_error": "raise"}
    args.update(kw)
    return list(iter_batches(files, **args))


@pytest.mark.parametrize("name,how,what", CASES, ids=IDS)
def test_damaged_stream_is_a_file_error_naming_the_file(tmp_path, name, how, what):
    d, _ = _corpus(tmp_path, name, how)
    with pytest.raises(InputError) as err:
        _read(resolve_inputs([d]))
    msg = str(err.value)
    # the stream, not a line of garbage that still parsed ("part-1.jsonl.gz:769: malformed JSON")
    assert msg.startswith(f"{name}: {what} (") and "malformed JSON" not in msg
    assert " decompressed bytes (" in msg and "lines); the file is damaged" in msg
    assert "--on-error skip (Python: on_error='skip')" in msg


@pytest.mark.parametrize("name,how,what", CASES, ids=IDS)
def test_damaged_stream_is_skipped_whole(tmp_path, name, how, what):
    d, intact = _corpus(tmp_path, name, how)
    size = os.path.getsize(os.path.join(d, name))
    seen = []
    for batch_bytes, ahead in ((4096, None), (1 << 20, 0), (64 << 20, None), (1 << 20, 1 << 30)):
        rep = ReadReport()
        files = resolve_inputs([d])  # a new run each time: nothing known about the files
        batches = _read(files, on_error="skip", batch_bytes=batch_bytes, read_ahead_bytes=ahead, report=rep)
        ids = [i for b in batches for i in b.ids.to_pylist()]
        assert ids == [r["id"] for r in intact]  # not one record of the damaged file
        assert {b.file_index for b in batches} == {0, 2} and rep.rows == len(intact)
        [entry] = rep.skipped
        assert entry["file"] == name and entry["level"] == "file" and entry["what"] == what
        assert entry["bytes"] == size and entry["unit"] == "lines" and 0 < entry["records"] <= 1031
        seen.append(entry)
    assert all(e == seen[0] for e in seen)  # what is said does not depend on how the file was read


def test_an_intact_file_is_read_whole_and_checked_only_when_it_does_not_fit(tmp_path, monkeypatch):
    """on_error='skip': the first read of a compressed file holds its chunks until it has decoded the whole
    file; only a file that holds more than read_ahead_bytes is checked (decoded once more: at once on a thread
    when it is that large as stored, else when the hold is full). The rows are those of a read that checks
    nothing, and a later pass of the run checks nothing."""
    path = _put(tmp_path / "ok" / "big.jsonl.gz", _jsonl(_records("b", 600, 9)))
    stored = os.path.getsize(path)
    expected = [b.ids.to_pylist() for b in _read(resolve_inputs([path]), batch_bytes=200_000)]
    calls = []
    real = io_check.check_stream
    real_init = io_batch.Checker.__init__

    def counted(f, stop=None, precise=False):
        calls.append("check")
        return real(f, stop, precise)

    def init(self, fn):
        calls.append("thread")
        real_init(self, fn)

    monkeypatch.setattr(io_batch.Checker, "__init__", init)
    monkeypatch.setattr("gpu_dedup.io.jsonl.check_stream", counted)
    # a hold larger than the whole file; one that twice the stored size fits (checked when full); one it does not
    for ahead, checks in ((1 << 30, []), (2 * stored + 1, ["check"]), (stored, ["thread", "check"]),
                          (0, ["thread", "check"])):
        calls.clear()
        files = resolve_inputs([path])
        got = [b.ids.to_pylist() for b in _read(files, on_error="skip", batch_bytes=200_000, read_ahead_bytes=ahead)]
        assert got == expected and files[0].state.intact
        assert calls == checks, ahead
        calls.clear()
        _read(files, on_error="skip", batch_bytes=200_000, read_ahead_bytes=ahead)  # a later pass
        assert calls == []


@pytest.mark.parametrize("name,how,what", [CASES[0], CASES[3]], ids=[IDS[0], IDS[3]])
def test_deduplicate_keeps_no_record_of_a_damaged_file(tmp_path, name, how, what):
    """The issue's run: decisions and deduplicated/ hold exactly the intact files' records (the old reader kept
    163 garbage records of a gzip with 64 flipped bytes); with on_error='raise' nothing is written."""
    d, intact = _corpus(tmp_path, name, how)
    cfg = RunConfig.preset("default", on_error="skip", progress=False)
    res = gpu_dedup.deduplicate(d, cfg, output_dir=tmp_path / "out")
    decisions = pq.read_table(tmp_path / "out" / "decisions.parquet")
    assert decisions["id"].to_pylist() == [r["id"] for r in intact]
    out = tmp_path / "out" / "deduplicated"
    assert sorted(os.listdir(out)) == ["a.jsonl", "z.jsonl.gz"]  # none for the damaged file
    with open(out / "a.jsonl", "rb") as fh:
        assert fh.read() == _jsonl(intact[:40])  # every record distinct: all kept, byte for byte
    assert gzip.decompress((out / "z.jsonl.gz").read_bytes()) == _jsonl(intact[40:])
    [entry] = res.stats["read"]["skipped"]
    assert entry["file"] == name and entry["what"] == what
    with open(tmp_path / "out" / "run.json") as fh:
        assert json.load(fh)["read"]["skipped"] == [entry]
    with pytest.raises(InputError, match=f"^{name}: {what} "):
        gpu_dedup.deduplicate(d, cfg.replace(on_error="raise"), output_dir=tmp_path / "out2")
    assert not os.path.exists(tmp_path / "out2" / "decisions.parquet")


def test_paragraph_writer_skips_a_damaged_file_like_its_pass_1(tmp_path):
    """The cut writers (paragraph_deduplicated/, substring, filters' cut output) re-read the inputs: a file
    skipped whole in pass 1 is skipped there too, and gets no output."""
    from gpu_dedup.paragraph.dedup import ParagraphConfig, paragraph_dedup

    d, intact = _corpus(tmp_path, "part-1.jsonl.gz", "flip")
    res = paragraph_dedup(d, ParagraphConfig(on_error="skip"), tmp_path / "out")
    out = tmp_path / "out" / "paragraph_deduplicated"
    assert sorted(os.listdir(out)) == ["a.jsonl", "z.jsonl.gz"]
    assert res.stats["written"]["rows_written"] == len(intact)


def test_the_cli_names_the_damaged_file_and_what_was_not_used(tmp_path, capsys):
    from gpu_dedup.cli import main

    d, _ = _corpus(tmp_path, "part-1.jsonl.gz", "truncate")
    size = os.path.getsize(os.path.join(d, "part-1.jsonl.gz"))
    assert main(["run", d, "-o", str(tmp_path / "out"), "-q"]) != 0
    err = capsys.readouterr().err
    assert "part-1.jsonl.gz: truncated gzip stream (" in err and "bad records" not in err
    assert main(["run", d, "-o", str(tmp_path / "out2"), "--on-error", "skip", "-q"]) == 0
    out = capsys.readouterr().out
    [line] = [x for x in out.splitlines() if x.startswith("skipped")]
    entry = json.load(open(tmp_path / "out2" / "run.json"))["read"]["skipped"][0]
    assert line == (f"skipped 1 file (part-1.jsonl.gz: truncated gzip stream, {entry['records']:,} lines / "
                    f"{size:,} bytes not used); listed in run.json under read.skipped")


# --------------------------------------------------------------------------------------- Parquet


def _parquet_corrupt(path, rows=400, group=100, bad=2) -> str:
    """A Parquet file of ``rows`` rows in row groups of ``group``, the page header of row group ``bad``'s text
    overwritten with garbage."""
    t = pa.table({"id": [f"r{i}" for i in range(rows)], "text": [f"text of row {i} " * 20 for i in range(rows)]})
    pq.write_table(t, path, row_group_size=group)
    md = pq.ParquetFile(path).metadata
    col = md.row_group(bad).column(1)
    with open(path, "r+b") as fh:
        fh.seek(col.data_page_offset)
        fh.write(b"\xde\xad\xbe\xef" * 16)
    return str(path)


def test_check_parquet_finds_the_row_group_that_does_not_decode(tmp_path):
    path = _parquet_corrupt(tmp_path / "c.parquet")
    [f] = resolve_inputs([path])
    failure = check_parquet(f)
    assert (failure.what, failure.group, failure.row, failure.records) == ("Parquet data that does not decode", 2,
                                                                          200, 400)
    assert failure.stored == os.path.getsize(path)
    pq.write_table(pa.table({"text": ["a", "b"]}), tmp_path / "ok.parquet")
    assert check_parquet(resolve_inputs([tmp_path / "ok.parquet"])[0]) is None
    with open(tmp_path / "not.parquet", "wb") as fh:
        fh.write(b"not parquet at all")
    assert check_parquet(resolve_inputs([tmp_path / "not.parquet"])[0]).what == "not a readable Parquet file"


def test_a_damaged_parquet_column_the_first_pass_does_not_read_stops_the_writer(tmp_path):
    """Pass 1 reads the text and id columns only (and checks only those); the writer copies every column. A
    row group whose other column does not decode is found by the writer, after pass 1 used the file's rows:
    an error in skip mode too (skipping it then would leave decisions without output), nothing written."""
    t = pa.table({"id": [f"r{i}" for i in range(300)], "text": [f"row {i} text words" for i in range(300)],
                  "meta": [f"meta {i} " * 30 for i in range(300)]})
    d = tmp_path / "in"
    os.makedirs(d)
    path = d / "m.parquet"
    pq.write_table(t, path, row_group_size=100)
    md = pq.ParquetFile(path).metadata
    with open(path, "r+b") as fh:
        fh.seek(md.row_group(1).column(2).data_page_offset)
        fh.write(b"\xde\xad\xbe\xef" * 16)
    pq.write_table(pa.table({"id": ["g"], "text": ["good"]}), d / "g.parquet")
    files = resolve_inputs([d])
    assert [len(b) for b in _read(files, on_error="skip")] == [1, 300]
    with pytest.raises(InputError, match=r"^m.parquet: Parquet data that does not decode .* in row group 1 \(from "
                                         r"row 100\), found after rows of it were used \(this pass reads columns "
                                         r"the first one did not\): the file cannot be skipped now"):
        write_kept(files, np.ones(301, bool), tmp_path / "out", id_field="id", text_field="text", on_error="skip")
    assert not os.path.exists(tmp_path / "out" / "m.parquet") and not os.path.exists(tmp_path / "out" / "g.parquet")


# --------------------------------------------------------------------------------------- check_stream


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz", ".jsonl.zst"])
def test_check_stream_digest_and_lines_match_an_independent_decode(tmp_path, suffix):
    data = _jsonl(_records("s", 300, 5)) + b'{"text": "no final newline"}'
    [f] = resolve_inputs([_put(tmp_path / f"s{suffix}", data, checksum=True)])
    got = check_stream(f, precise=True)
    assert got.failure is None and got.lines == 301
    assert got.digest == (len(data), xxhash.xxh3_64(data).intdigest()) == check_stream(f).digest


@pytest.mark.parametrize("name,how,what", CASES, ids=IDS)
def test_check_stream_says_where_the_stream_fails(tmp_path, name, how, what):
    path = _put(tmp_path / name, _jsonl(_records("p", 1031, 3)))
    _damage(path, how)
    [f] = resolve_inputs([path])
    failure = check_stream(f).failure
    with open(path, "rb") as fh:
        raw = fh.read()
    if name.endswith(".gz"):  # Python's decoder decodes at least as far before it fails
        d = zlib_decoder()
        decoded = _decode_until_error(lambda b: d.decompress(b), raw)
    else:
        d = zstandard.ZstdDecompressor().decompressobj()
        decoded = _decode_until_error(lambda b: d.decompress(b), raw)
    assert failure.what == what and failure.stored == len(raw)
    assert 0 <= failure.offset <= len(decoded) + (1 << 17) and failure.lines == failure.records
    assert failure.offset > 0 or how == "flip"


def zlib_decoder():
    import zlib

    return zlib.decompressobj(31)


def _decode_until_error(step, raw: bytes, piece: int = 4096) -> bytes:
    out = []
    for i in range(0, len(raw), piece):
        try:
            out.append(step(raw[i:i + piece]))
        except Exception:  # noqa: BLE001 - the codec's own error ends the decode
            break
    return b"".join(out)


# --------------------------------------------------------------------------------------- passes


def test_a_file_that_changes_between_passes_is_an_error(tmp_path):
    """Every pass of a run reads the same InputFiles: decoded bytes (JSON Lines) or a footer (Parquet) that
    differ from the first pass's, or data that now fails after a pass decoded it whole, stop the run."""
    recs = _records("c", 20, 6)
    plain = _put(tmp_path / "in" / "c.jsonl", _jsonl(recs))
    files = resolve_inputs([plain])
    _read(files)
    changed = [dict(r, text=r["text"].upper()) for r in recs]  # same lines, other bytes
    _put(plain, _jsonl(changed))
    with pytest.raises(DataError, match="^c.jsonl: its decompressed bytes differ .* changed while the run read"):
        write_kept(files, np.ones(20, bool), tmp_path / "o1", id_field="id", text_field="text", on_error="raise")
    assert not os.path.exists(tmp_path / "o1" / "c.jsonl")

    gz = _put(tmp_path / "in2" / "g.jsonl.gz", _jsonl(_records("g", 1031, 3)))
    files = resolve_inputs([gz])
    _read(files, on_error="skip")
    _damage(gz, "flip")
    with pytest.raises(DataError, match=r"^g.jsonl.gz: corrupt gzip stream .* but an earlier pass of this run "
                                        r"decoded it whole"):
        write_kept(files, np.ones(1031, bool), tmp_path / "o2", id_field="id", text_field="text", on_error="skip")

    pqp = tmp_path / "in3" / "p.parquet"
    os.makedirs(pqp.parent)
    pq.write_table(pa.table({"id": ["x", "y"], "text": ["one", "two"]}), pqp)
    files = resolve_inputs([pqp])
    _read(files)
    pq.write_table(pa.table({"id": ["x", "y"], "text": ["uno", "dos"]}), pqp)
    with pytest.raises(DataError, match="^p.parquet: its Parquet footer differs"):
        _read(files)


def test_a_failed_file_is_not_read_again_by_later_passes(tmp_path, monkeypatch):
    d, intact = _corpus(tmp_path, "part-1.jsonl.zst", "flip")
    files = resolve_inputs([d])
    rows = sum(len(b) for b in _read(files, on_error="skip"))
    opened = []
    real = io_check.open_stream

    def spy(f):
        opened.append(f.relpath)
        return real(f)

    monkeypatch.setattr("gpu_dedup.io.jsonl.open_stream", spy)
    res = write_kept(files, np.ones(rows, bool), tmp_path / "out", id_field="id", text_field="text", on_error="skip")
    assert res == {"files": 2, "rows_written": len(intact)}
    assert set(opened) == {"a.jsonl", "z.jsonl.gz"}  # counted, then written; never the failed one


# --------------------------------------------------------------------------------------- summaries


def test_read_summary_lines():
    entry = io_check.StreamFailure("corrupt gzip stream", "incorrect data check", stored=412_331, offset=400_000,
                                   lines=1031, records=1031).entry("part-1.jsonl.gz")
    rows = [{"file": "a.jsonl", "line": 3, "row": None, "reason": "malformed JSON"}] * 3
    read = {"files": 3, "rows": 10, "skipped": [*rows, entry], "empty_files": []}
    assert read_summary(read) == ["skipped 3 bad records and 1 file (part-1.jsonl.gz: corrupt gzip stream, 1,031 "
                                  "lines / 412,331 bytes not used); listed in run.json under read.skipped"]
    assert read_summary({"files": 1, "rows": 5, "skipped": [], "empty_files": []}) == []
    assert read_summary({"files": 2, "rows": 0, "skipped": [], "empty_files": ["a.jsonl", "b.jsonl"]}) == [
        "warning: the input holds no documents (2 file(s) without a single document: a.jsonl, b.jsonl); check "
        "the input paths, the file contents and --text-field"]


def test_an_input_without_a_document_is_a_warning_naming_its_files(tmp_path, caplog, capsys):
    """Issue 36 item 13/14: '0 documents' with no word; now a warning naming the inputs, in the log and on the
    CLI's summary."""
    from gpu_dedup.cli import main

    _put(tmp_path / "in" / "a.jsonl", b"")
    _put(tmp_path / "in" / "b.jsonl.gz", b"\n\n")
    cfg = RunConfig.preset("default", progress=False)
    with caplog.at_level("WARNING", logger="gpu_dedup.io"):
        res = gpu_dedup.deduplicate(str(tmp_path / "in"), cfg, output_dir=tmp_path / "out")
    assert res.stats["read"]["rows"] == 0
    said = [r.getMessage() for r in caplog.records if "no documents" in r.getMessage()]
    assert said == ["the input holds no documents (2 file(s) without a single document: a.jsonl, b.jsonl.gz); "
                    "check the input paths, the file contents and --text-field"]
    assert main(["run", str(tmp_path / "in"), "-o", str(tmp_path / "out2"), "-q"]) == 0
    assert ("warning: the input holds no documents (2 file(s) without a single document: a.jsonl, b.jsonl.gz)"
            in capsys.readouterr().out)
    caplog.clear()
    with caplog.at_level("WARNING", logger="gpu_dedup.io"):
        gpu_dedup.deduplicate(pa.table({"id": pa.array([], pa.string()), "text": pa.array([], pa.string())}), cfg)
    assert [r.getMessage() for r in caplog.records if "no documents" in r.getMessage()] == [
        "the input holds no documents: the table has no rows"]


def test_files_without_the_id_field_are_named_once(tmp_path, caplog):
    """Three files, two without the id field: one warning with the fix (the first such file), one line naming
    both; not one per file, and nothing more from the later passes."""
    _put(tmp_path / "in" / "a.jsonl", _jsonl([{"text": "alpha beta"}, {"text": "gamma delta"}]))
    _put(tmp_path / "in" / "b.jsonl", _jsonl([{"id": "b0", "text": "epsilon zeta"}]))
    _put(tmp_path / "in" / "c.jsonl.gz", _jsonl([{"text": "eta theta"}]))
    io_batch._GENERATED_IDS_SAID.clear()
    with caplog.at_level("WARNING", logger="gpu_dedup.io"):
        res = gpu_dedup.deduplicate(str(tmp_path / "in"), RunConfig.preset("default", progress=False),
                                    output_dir=tmp_path / "out")
    said = [r.getMessage() for r in caplog.records if "id field" in r.getMessage()]
    assert len(said) == 2 and said[0].startswith("a.jsonl has no id field 'id' (fields: 'text')")
    assert said[1] == ("id field 'id' is missing from 2 of the 3 input files (a.jsonl, c.jsonl.gz): their ids were "
                       "generated '<relpath>:<row>' (see the first file's warning for the fix)")
    assert res.stats["read"]["generated_ids"] == ["a.jsonl", "c.jsonl.gz"]
