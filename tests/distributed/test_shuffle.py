"""The shuffle's work-dir layout on a local path and on an fsspec URL: the same files, markers and reads
either way; a URL's files go through its fsspec file system (a non-local one here: fsspec's ``dir::``
wrapper, which roots its paths elsewhere, so a file written with a local path would land in the wrong
place); a write that fails midway leaves neither a final file nor a temporary one."""

import numpy as np
import pyarrow as pa
import pytest

from gpu_dedup.distributed import cluster
from gpu_dedup.distributed.shuffle import Layout, key_partition

pytest.importorskip("fsspec")


def _works(tmp_path):
    """(work dir, where its ray/ folder lies on disk) for a local path, a file:// URL and a dir:: URL."""
    d = tmp_path / "dirfs"
    return [(str(tmp_path / "local"), tmp_path / "local" / "ray"),
            ("file://" + str(tmp_path / "url"), tmp_path / "url" / "ray"),
            # fsspec's DirFileSystem roots the path it is given under its own root: a different file system
            ("dir::file://" + str(d), d / str(d).lstrip("/") / "ray")]


def test_layout_same_on_local_paths_and_urls(tmp_path):
    t = pa.table({"k": pa.array(np.arange(10, dtype=np.uint64) << np.uint64(60)), "v": pa.array(range(10))})
    for work, on_disk in _works(tmp_path):
        lay = Layout(work)
        assert (lay.fs is None) == (not work.startswith(("file:", "dir:")))
        lay.clear()
        lay.write_split(t, key_partition(t["k"].to_numpy(), 3), 3, "rows", lambda p: f"f000000-p{p:04d}")
        back = lay.read("rows", [f"f000000-p{p:04d}" for p in range(3)])
        assert back.equals(t) and lay.exists("rows", "f000000-p0002") and not lay.exists("rows", "nope")
        assert lay.read_one("rows", "f000000-p0000", ["v"]).column_names == ["v"]
        assert lay.done("sign", "0", "run-a") is None
        assert lay.finish("sign", "0", "run-a", {"rows": np.int64(7), "x": [1.5]}) == {"rows": 7, "x": [1.5]}
        assert lay.done("sign", "0", "run-a") == {"rows": 7, "x": [1.5]} and lay.done("sign", "0", "run-b") is None
        files = sorted(str(p.relative_to(on_disk)) for p in on_disk.rglob("*") if p.is_file())
        assert files == ["done/sign/0.json"] + [f"rows/f000000-p{p:04d}.arrow" for p in range(3)], work
        # the file on disk is the partition's rows (Arrow IPC), readable without fsspec
        assert pa.ipc.open_file(pa.memory_map(str(on_disk / "rows" / "f000000-p0001.arrow"))).read_all().equals(
            back.filter(pa.array(key_partition(t["k"].to_numpy(), 3) == 1)))
        lay.clear()
        assert list(on_disk.iterdir()) == []


def test_failed_write_leaves_nothing_that_looks_finished(tmp_path, monkeypatch):
    """A task killed while writing (here: the IPC writer raising midway) leaves no file under the final
    name, and no temporary file behind: a retried task starts clean."""
    import gpu_dedup.distributed.shuffle as shuffle

    for work, on_disk in _works(tmp_path):
        lay = Layout(work)
        lay.clear()

        def broken(table, sink):
            sink.write(b"ARROW1 half a file")
            raise OSError("disk gone")

        monkeypatch.setattr(shuffle, "_write_ipc", broken)
        with pytest.raises(OSError, match="disk gone"):
            lay.write(pa.table({"a": [1]}), "pieces", "f000000")
        monkeypatch.undo()
        assert not lay.exists("pieces", "f000000")
        assert [p for p in on_disk.rglob("*") if p.is_file()] == []


def test_probe_reads_the_token_through_the_work_dirs_file_system(tmp_path):
    for work, _ in _works(tmp_path):
        lay = Layout(work)
        lay.write_text("probe-x.txt", "token-1")
        assert cluster._probe(work, "probe-x.txt", "token-1")["sees_work_dir"]
        got = cluster._probe(work, "probe-x.txt", "token-2")
        assert not got["sees_work_dir"] and "another value" in got["why"]
        lay.remove("probe-x.txt")
        got = cluster._probe(work, "probe-x.txt", "token-1")
        assert not got["sees_work_dir"] and "FileNotFoundError" in got["why"]


def test_run_key_holds_the_exchange_format(monkeypatch):
    """A marker written under another exchange format (Parquet before Arrow IPC) carries another run key: a
    --resume over such a work dir recomputes instead of reading files that are not there."""
    import gpu_dedup.distributed.shuffle as shuffle

    key = shuffle.run_key(["fingerprint", 3])
    monkeypatch.setattr(shuffle, "EXCHANGE", "parquet")
    assert shuffle.run_key(["fingerprint", 3]) != key


def test_a_tasks_files_are_made_durable_by_one_sync_before_its_marker(tmp_path, monkeypatch):
    """On a local path a task's exchange files are written without an fsync each (two journal commits apiece:
    ~1,200 of them in a 1 M-document run); Layout.finish syncs the work dir's file system once, before the marker
    exists (a marker is never on disk before its files), and the marker reads back."""
    import os

    from gpu_dedup.distributed import shuffle

    lay = Layout(str(tmp_path))
    fsyncs, syncs = [], []
    real_fsync, real_sync = os.fsync, shuffle.sync_fs
    monkeypatch.setattr(os, "fsync", lambda fd: fsyncs.append(fd) or real_fsync(fd))
    monkeypatch.setattr(shuffle, "sync_fs", lambda p: syncs.append((p, os.path.exists(lay.marker("s", "0"))))
                        or real_sync(p))
    for p in range(3):
        lay.write(pa.table({"x": [p]}), "s", f"f{p}")
    lay.finish("s", "0", "key", {"rows": 3})
    assert fsyncs == [] and syncs == [(lay.root, False)]
    assert lay.done("s", "0", "key") == {"rows": 3} and lay.read("s", ["f0", "f2"])["x"].to_pylist() == [0, 2]
