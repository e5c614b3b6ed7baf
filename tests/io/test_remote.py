"""Remote and hub inputs (gpu_dedup.io.remote): URLs listed and read through fsspec, a datasets.Dataset as the
source. Nothing here touches the network: fsspec's in-process memory:// file system and a local folder through
file:// stand in for object stores."""
from __future__ import annotations

import gzip
import io as pyio
import json
import logging
import os
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

import gpu_dedup
from gpu_dedup import RunConfig, io
from gpu_dedup.io import InputError, iter_batches, resolve_inputs, write_kept

fsspec = pytest.importorskip("fsspec")

WORDS = ("data model train token corpus web page text near copy policy keep remove index shard batch kernel "
         "device memory sort hash band bucket row column value file line error report cluster graph").split()


@pytest.fixture
def mem():
    """A fresh folder on fsspec's memory file system: (fs, its URL); removed afterwards."""
    fs = fsspec.filesystem("memory")
    root = f"/gd-{uuid.uuid4().hex[:10]}"
    yield fs, f"memory://{root}"
    if fs.exists(root):
        fs.rm(root, recursive=True)


def _corpus(n: int = 240, seed: int = 0) -> list[dict]:
    """Originals, exact copies (case/space changes), light edits, short texts; unique ids."""
    rng = np.random.default_rng(seed)
    texts: list[str] = []
    for _ in range(n):
        kind = rng.integers(0, 4) if texts else 0
        if kind == 0:
            t = " ".join(rng.choice(WORDS, rng.integers(30, 70)))
        elif kind == 1:
            t = texts[rng.integers(0, len(texts))].upper().replace(" ", "  ")
        elif kind == 2:
            t = texts[rng.integers(0, len(texts))] + " extra"
        else:
            t = " ".join(rng.choice(WORDS, rng.integers(0, 4)))
        texts.append(t)
    return [{"id": f"doc{i:04d}", "text": t, "score": float(i % 7)} for i, t in enumerate(texts)]


def _jsonl(records) -> bytes:
    return b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in records)


def _parquet(records, row_group_size: int = 25) -> bytes:
    buf = pyio.BytesIO()
    pq.write_table(pa.Table.from_pylist(records), buf, row_group_size=row_group_size)
    return buf.getvalue()


def _layout(records) -> dict[str, bytes]:
    """The corpus as a tree of files of every supported kind."""
    q = len(records) // 4
    return {
        "a.jsonl": _jsonl(records[:q]),
        "sub/b.jsonl.gz": gzip.compress(_jsonl(records[q:2 * q])),
        "sub/c.jsonl.zst": zstandard.ZstdCompressor().compress(_jsonl(records[2 * q:3 * q])),
        "sub/deeper/d.parquet": _parquet(records[3 * q:]),
    }


def _put_memory(fs, url: str, files: dict[str, bytes]) -> None:
    root = fs._strip_protocol(url)
    for rel, data in files.items():
        fs.pipe(f"{root}/{rel}", data)


def _put_local(base, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        p = os.path.join(base, *rel.split("/"))
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as fh:
            fh.write(data)


def _read(files, **kw):
    args = dict(id_field="id", text_field="text", batch_bytes=1 << 20, on_error="raise")
    args.update(kw)
    batches = list(iter_batches(files, **args))
    return [i for b in batches for i in b.ids.to_pylist()], [t for b in batches for t in b.text.to_pylist()]


# ------------------------------------------------------------------------------------------- discovery

def test_memory_and_file_urls_list_like_a_local_folder(mem, tmp_path):
    fs, url = mem
    layout = _layout(_corpus(40))
    _put_memory(fs, url, layout)
    _put_local(tmp_path / "data", layout)
    local = resolve_inputs([tmp_path / "data"])
    for source in (url, url + "/", "file://" + str(tmp_path / "data")):
        files = resolve_inputs([source])
        assert [f.relpath for f in files] == [f.relpath for f in local]
        assert [(f.fmt, f.compression) for f in files] == [(f.fmt, f.compression) for f in local]
        assert all(io.is_url(f.path) and f.fs is not None for f in files)
    # globs list through fsspec too; ** descends, * does not
    assert [f.relpath for f in resolve_inputs([url + "/**/*.jsonl*"])] == ["a.jsonl", "sub/b.jsonl.gz",
                                                                           "sub/c.jsonl.zst"]
    assert [f.relpath for f in resolve_inputs([url + "/sub/*"])] == ["b.jsonl.gz", "c.jsonl.zst",
                                                                     "deeper/d.parquet"]
    one = resolve_inputs([url + "/sub/deeper/d.parquet"])
    assert [(f.relpath, f.path) for f in one] == [("d.parquet", fs.unstrip_protocol(
        fs._strip_protocol(url) + "/sub/deeper/d.parquet"))]
    # a remote and a local input together keep distinct names
    mixed = resolve_inputs([url + "/a.jsonl", tmp_path / "data" / "a.jsonl"])
    assert len({f.relpath for f in mixed}) == 2 and any(f.relpath.startswith("memory/") for f in mixed)


def test_missing_and_unsupported_remote_inputs(mem, monkeypatch):
    fs, url = mem
    with pytest.raises(FileNotFoundError, match="does not exist"):
        resolve_inputs([url + "/nothing.jsonl"])
    with pytest.raises(FileNotFoundError, match="matched nothing"):
        resolve_inputs([url + "/*.jsonl"])
    fs.pipe(fs._strip_protocol(url) + "/notes.txt", b"x")
    with pytest.raises(ValueError, match="unsupported extension"):
        resolve_inputs([url + "/notes.txt"])
    with pytest.raises(ValueError, match="no supported files"):
        resolve_inputs([url])
    with pytest.raises(ValueError, match=r"unsupported input URL scheme 'nosuchproto://'.*extra 's3'"):
        resolve_inputs(["nosuchproto://bucket/x.jsonl"])


def test_missing_store_package_names_the_extra(monkeypatch):
    """A protocol fsspec knows whose package is not installed: the error names the extra to install."""
    def no_package(url, **kw):
        raise ImportError("Install s3fs to access S3")

    monkeypatch.setattr(fsspec.core, "url_to_fs", no_package)
    with pytest.raises(ImportError, match=r'needs s3fs: pip install "gpu-dedup\[s3\]"'):
        resolve_inputs(["s3://bucket/crawl/"])
    for url, extra in (("gs://b/x.parquet", "gcs"), ("hf://datasets/org/name/x.parquet", "hf")):
        with pytest.raises(ImportError, match=rf"gpu-dedup\[{extra}\]"):
            resolve_inputs([url])


def test_remote_walk_skips_gpu_dedup_outputs(mem, caplog):
    fs, url = mem
    root = fs._strip_protocol(url)
    fs.pipe(f"{root}/a.jsonl", b'{"text": "x"}\n')
    fs.pipe(f"{root}/out/decisions.parquet", b"")
    fs.pipe(f"{root}/out/run.json", b"{}")
    fs.pipe(f"{root}/out/deduplicated/a.jsonl", b'{"text": "x"}\n')
    fs.pipe(f"{root}/idx/manifest.json", json.dumps({"format": "gpu_dedup-index", "version": 1}).encode())
    fs.pipe(f"{root}/idx/documents.jsonl", b'{"text": "x"}\n')
    with caplog.at_level(logging.INFO, logger="gpu_dedup.io"):
        assert [f.relpath for f in resolve_inputs([url])] == ["a.jsonl"]
        assert [f.relpath for f in resolve_inputs([url + "/**/*.jsonl"])] == ["a.jsonl"]
    assert "out, which holds a gpu-dedup run" in caplog.text and "idx, which holds a gpu-dedup index" in caplog.text
    # named explicitly, it is read
    assert [f.relpath for f in resolve_inputs([url + "/out/deduplicated"])] == ["a.jsonl"]
    with pytest.raises(ValueError, match="holds a gpu-dedup run.*deduplicated"):
        resolve_inputs([url + "/out"])


# ------------------------------------------------------------------------------------------- reading

@pytest.mark.parametrize("threads", [1, 2])
def test_remote_batches_equal_local_batches(mem, tmp_path, threads):
    fs, url = mem
    layout = _layout(_corpus(200))
    _put_memory(fs, url, layout)
    _put_local(tmp_path, layout)
    local = _read(resolve_inputs([tmp_path]), batch_bytes=4096, read_threads=threads)
    for source in (url, "file://" + str(tmp_path)):
        assert _read(resolve_inputs([source]), batch_bytes=4096, read_threads=threads) == local


def test_remote_errors_name_the_file_and_line(mem):
    fs, url = mem
    root = fs._strip_protocol(url)
    fs.pipe(f"{root}/m.jsonl", b'{"id": "1", "text": "a"}\n{"id": "2", "text": "b"\n')
    with pytest.raises(InputError, match="m.jsonl:2: malformed JSON"):
        _read(resolve_inputs([url + "/m.jsonl"]))
    fs.pipe(f"{root}/bad.parquet", b"not parquet")
    with pytest.raises(InputError, match="bad.parquet: not a readable Parquet file"):
        _read(resolve_inputs([url + "/bad.parquet"]))
    fs.pipe(f"{root}/t.jsonl.gz", gzip.compress(b'{"id": "1", "body": "a"}\n'))
    with pytest.raises(InputError, match=r"t.jsonl.gz:1: missing text field 'text'.*'body'.*--text-field"):
        _read(resolve_inputs([url + "/t.jsonl.gz"]))


def test_remote_parquet_reads_row_groups_through_the_pyarrow_wrapper(mem, monkeypatch):
    fs, url = mem
    fs.pipe(fs._strip_protocol(url) + "/p.parquet", _parquet(_corpus(60), row_group_size=7))
    files = resolve_inputs([url + "/p.parquet"])
    from pyarrow.fs import PyFileSystem

    opened = []
    real = pq.ParquetFile

    def spy(source, *a, **kw):
        opened.append(kw.get("filesystem"))
        return real(source, *a, **kw)

    monkeypatch.setattr(pq, "ParquetFile", spy)
    ids, _ = _read(files, read_threads=2, batch_bytes=512)
    assert ids == [f"doc{i:04d}" for i in range(60)]
    assert opened and all(isinstance(f, PyFileSystem) for f in opened)
    with io.open_parquet(files[0]) as pf:
        assert pf.metadata.num_rows == 60 and pf.metadata.num_row_groups == 9
    assert io.file_size(files[0]) == len(fs.cat_file(fs._strip_protocol(files[0].path)))


def test_duplicate_ids_of_remote_inputs_name_both_positions(mem):
    fs, url = mem
    root = fs._strip_protocol(url)
    fs.pipe(f"{root}/a.jsonl", b'{"id": "x", "text": "1"}\n{"id": "y", "text": "2"}\n')
    fs.pipe(f"{root}/b.parquet", _parquet([{"id": "z", "text": "3"}, {"id": "x", "text": "4"}]))
    files = resolve_inputs([url])
    batches = list(iter_batches(files, id_field="id", text_field="text", batch_bytes=1 << 20, on_error="raise"))
    with pytest.raises(InputError, match=r"'x' \(2 times: a.jsonl:1, b.parquet row 1\)"):
        io.check_unique_ids([b.ids for b in batches], files, [2, 2], id_field="id", text_field="text",
                            on_error="raise")


# ------------------------------------------------------------------------------------------- pipeline

def test_pipeline_on_memory_corpus_equals_local_run(mem, tmp_path):
    """End to end: the same corpus on memory://, through file:// and on local disk gives the same decisions."""
    fs, url = mem
    layout = _layout(_corpus(240, seed=3))
    _put_memory(fs, url, layout)
    _put_local(tmp_path / "data", layout)
    cfg = RunConfig.preset("default", progress=False, write_deduplicated=False)
    local = gpu_dedup.deduplicate(str(tmp_path / "data"), cfg).decisions
    assert 0 < int(np.sum(local["keep"].to_numpy(zero_copy_only=False))) < local.num_rows  # something removed
    for source in (url, "file://" + str(tmp_path / "data")):
        remote = gpu_dedup.deduplicate(source, cfg).decisions
        assert remote.equals(local)
    # no text cache: verification reads the candidates' text from memory:// again
    again = gpu_dedup.deduplicate(url, cfg.replace(cache_bytes=0)).decisions
    assert again.equals(local)


def test_a_run_over_a_remote_corpus_writes_its_outputs_locally(mem, tmp_path):
    """-o with remote inputs: deduplicated/ holds the kept records of every file (Parquet with its own codec)
    at the inputs' relative layout, byte for byte what the same run over a local copy writes; the report too."""
    fs, url = mem
    layout = _layout(_corpus(240, seed=4))
    _put_memory(fs, url, layout)
    _put_local(tmp_path / "data", layout)
    local = gpu_dedup.deduplicate(str(tmp_path / "data"), output_dir=tmp_path / "local")
    remote = gpu_dedup.deduplicate(url, output_dir=tmp_path / "remote")
    assert remote.decisions.equals(local.decisions)
    for rel in layout:
        a, b = tmp_path / "local" / "deduplicated" / rel, tmp_path / "remote" / "deduplicated" / rel
        if rel.endswith(".parquet"):
            assert pq.read_table(b).equals(pq.read_table(a))
            assert pq.ParquetFile(b).metadata.row_group(0).column(0).compression == \
                pq.ParquetFile(a).metadata.row_group(0).column(0).compression
        else:
            assert b.read_bytes() == a.read_bytes(), rel
    assert (tmp_path / "remote" / "report.html").exists()
    read = [r.stats["bytes_read"]["deduplicated_input_files"] for r in (remote, local)]
    assert read[0] == read[1] > 0


def test_write_kept_of_remote_jsonl_inputs_lands_locally_with_the_same_layout(mem, tmp_path):
    """Outputs are never written back to the remote store: the kept records of a remote input go under the
    local output folder, at their relative path, byte for byte as for a local input."""
    fs, url = mem
    records = _corpus(40)
    layout = {"a.jsonl": _jsonl(records[:20]), "sub/b.jsonl.gz": gzip.compress(_jsonl(records[20:]))}
    _put_memory(fs, url, layout)
    _put_local(tmp_path / "data", layout)
    keep = np.arange(40) % 3 != 0
    args = dict(id_field="id", text_field="text", on_error="raise")
    write_kept(resolve_inputs([url]), keep, tmp_path / "out_remote", **args)
    write_kept(resolve_inputs([tmp_path / "data"]), keep, tmp_path / "out_local", **args)
    for rel in ("a.jsonl", "sub/b.jsonl.gz"):
        got = (tmp_path / "out_remote" / rel).read_bytes()
        assert got == (tmp_path / "out_local" / rel).read_bytes()
    kept_a = [json.loads(line)["id"] for line in (tmp_path / "out_remote" / "a.jsonl").read_text().splitlines()]
    assert kept_a == [r["id"] for r, k in zip(records[:20], keep[:20]) if k]
    assert not fs.exists(fs._strip_protocol(url) + "/out_remote")  # nothing written to the remote side


# ------------------------------------------------------------------------------------------- datasets

def test_datasets_dataset_source_equals_its_table():
    datasets = pytest.importorskip("datasets")
    records = _corpus(120, seed=5)
    table = pa.Table.from_pylist(records)
    ds = datasets.Dataset.from_list(records)
    cfg = RunConfig.preset("default", progress=False)
    want = gpu_dedup.deduplicate(table, cfg).decisions
    assert gpu_dedup.deduplicate(ds, cfg).decisions.equals(want)
    # with an indices mapping (select / shuffle): the rows in the dataset's order
    sel = ds.select(list(range(119, -1, -1)))
    got = io.dataset_table(sel)
    assert got["id"].to_pylist() == [r["id"] for r in reversed(records)]
    assert io.source_files(sel)[0].table["id"].to_pylist() == got["id"].to_pylist()
    with pytest.raises(TypeError, match="pass one split"):
        io.source_files(datasets.DatasetDict({"train": ds}))
