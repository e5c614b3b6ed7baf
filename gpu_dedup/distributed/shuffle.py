"""The storage-backed shuffle of the Ray engine: partition functions, the work-dir layout of every stage's
files, and the done markers that make each task idempotent and resumable.

Two kinds of partitions: *key ranges* (P of them: ``key_ranges``, from --partitions or the cluster's CPUs, capped by
the input's size) split 64-bit keys (exact hashes, band keys) by their top
bits, so a range's rows from every file meet in one reduce task; *files* (F of them) split rows by the input
file that holds them (a row is ``offsets[file] + local row``), so results come home to the task that owns
the file. Files are Arrow IPC (uncompressed: the exchange is hashes, row numbers and keys, read back at memory
speed, memory-mapped). Every task writes all of its output files (empty ones too) atomically, then its marker
``WORK/ray/done/<stage>/<key>.json`` holding its small return value and the run key (the digest of every
map task's marker): a marker with the current run key means the task's outputs are complete and it is
not run again; a retried or resumed task rewrites the same bytes. On a local path the files are made
durable together, by one ``syncfs`` of the work dir's file system before the marker is written (``sync_fs``),
not by an fsync of each file and directory (two journal commits apiece: ~2 s of a 1 M-document run's ~1,200
fsyncs, docs/scale.md): a marker is never on disk before its files, and a marker lost in a crash
only makes its task run again.

The work dir is a path every node mounts at the same place, or an fsspec URL (``s3://bucket/work``,
``gs://``, ``file://``; io/remote.py, the layer the inputs are read through): then every read, write,
marker and listing goes through that file system, and a file is
written under a unique temporary name and moved onto its final one, so a task killed mid-write never leaves
a partial file under a name that looks finished (a move on an object store is a copy of the whole object,
then a delete). Local paths are read and written exactly as before.
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import logging
import math
import os
import posixpath
import shutil
import uuid
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from ..errors import ConfigError, RunError
from ..io import atomic_path, write_json_atomic
from ..io.remote import is_url, url_filesystem

logger = logging.getLogger(__name__)

EXCHANGE = "arrow-ipc-2"  # the exchange files' format (Layout.write) and the ids' hash: part of every run key
DEFAULT_PARTITIONS = 64  # the default's ceiling (one key range per CPU), and the floor of the size cap
# a key range costs one file per input file in every shuffle stage: below a few MiB of input per range the
# files' fixed costs outweigh the parallelism (100,000 ranges on 300 documents wrote millions of files)
PARTITION_BYTES = 8 << 20


def check_partitions(partitions: Any) -> None:
    """``partitions`` None or a whole number >= 1 (the CLI's types say the same)."""
    if partitions is not None and (isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1):
        raise ConfigError(f"partitions={partitions!r} is no number of key ranges: pass a whole number >= 1 (CLI "
                          f"--partitions), or leave it out for the cluster's CPUs (at most {DEFAULT_PARTITIONS})")


def key_ranges(requested: int | None, cpus: int, files) -> int:
    """The shuffle's key ranges: ``requested``, or the cluster's CPUs (at most DEFAULT_PARTITIONS); more than
    the input's size can fill (one per PARTITION_BYTES of input as stored, at least DEFAULT_PARTITIONS) are
    cut to that, with a warning."""
    check_partitions(requested)
    if requested is None:
        return max(1, min(DEFAULT_PARTITIONS, cpus))
    size = sum(_stored_bytes(f) for f in files)
    cap = max(DEFAULT_PARTITIONS, math.ceil(size / PARTITION_BYTES))
    if requested > cap:
        logger.warning("--partitions %d: more key ranges than %s of input can fill (up to %d on any input, "
                       "beyond that one per %d MiB: each range writes a file per input file in every shuffle "
                       "stage); using %d", requested, _size(size), DEFAULT_PARTITIONS, PARTITION_BYTES >> 20, cap)
        return cap
    return requested


def _stored_bytes(f) -> int:
    if f.fmt == "index":  # an --against index (options.IndexSource): its rows are no input to split
        return 0
    if f.fmt == "table":
        return int(f.table.nbytes) if f.table is not None else 0
    from ..io import file_size

    try:
        return file_size(f)
    except OSError:  # read later, where its error names it
        return 0


def _size(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB" if n >= 1 << 20 else f"{n:,} bytes"


def key_partition(keys: np.ndarray, parts: int) -> np.ndarray:
    """int64 partition (0..parts-1) of uint64 keys by key range: the top 32 bits scaled to ``parts``."""
    keys = np.asarray(keys, np.uint64)
    return ((keys >> np.uint64(32)) * np.uint64(parts) >> np.uint64(32)).astype(np.int64)


def file_of(rows: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """int64 file index of global rows, given ``offsets`` int64 (F+1,) (the prefix sum of file rows)."""
    return np.searchsorted(offsets, np.asarray(rows, np.int64), side="right").astype(np.int64) - 1


def split(table: pa.Table, part: np.ndarray, parts: int) -> list[pa.Table]:
    """``table``'s rows by ``part`` (int64, one per row) into ``parts`` tables, row order kept."""
    if table.num_rows == 0:
        return [table] * parts
    order = np.argsort(part, kind="stable")
    bounds = np.searchsorted(part[order], np.arange(parts + 1))
    sorted_t = table.take(pa.array(order))
    return [sorted_t.slice(int(bounds[p]), int(bounds[p + 1] - bounds[p])) for p in range(parts)]


class Layout:
    """Paths of the Ray engine's files under WORK/ray (module doc); ``work`` a local path or an fsspec URL."""

    def __init__(self, work: str):
        self.work = work
        if is_url(work):
            self.fs, base = url_filesystem(work)  # fsspec caches the instance: one per URL and process
            self.root = posixpath.join(base.rstrip("/") or "/", "ray")
            self._join = posixpath.join
        else:
            self.fs = None
            self.root = os.path.join(work, "ray")
            self._join = os.path.join

    def path(self, stage: str, name: str) -> str:
        return self._join(self.root, stage, f"{name}.arrow")

    def marker(self, stage: str, key: str) -> str:
        return self._join(self.root, "done", stage, f"{key}.json")

    def exists(self, stage: str, name: str) -> bool:
        path = self.path(stage, name)
        return os.path.exists(path) if self.fs is None else bool(self.fs.exists(path))

    def _atomic(self, path: str, write: Callable[[str], None]) -> None:
        """``write(tmp)`` under a unique temporary name beside ``path``, then move it onto ``path``."""
        fs = self.fs
        directory, name = posixpath.split(path)
        fs.makedirs(directory, exist_ok=True)
        tmp = posixpath.join(directory, f".{name}.{uuid.uuid4().hex[:12]}.tmp")
        try:
            write(tmp)
            fs.mv(tmp, path)
        except BaseException:
            try:
                if fs.exists(tmp):
                    fs.rm(tmp)
            except OSError:  # the first error is the one to report
                pass
            raise

    def write(self, table: pa.Table, stage: str, name: str) -> None:
        """``table`` as the file ``name`` of ``stage`` (Arrow IPC, uncompressed: written and read back at memory
        speed; the exchange holds hashes, row numbers and keys, which compress little), atomically."""
        path = self.path(stage, name)
        if self.fs is not None:
            def put(tmp: str) -> None:
                with self.fs.open(tmp, "wb") as fh:
                    _write_ipc(table, fh)
            self._atomic(path, put)
            return
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with atomic_path(path, durable=False) as tmp, pa.OSFile(tmp, "wb") as fh:  # durable at finish()
            _write_ipc(table, fh)

    def write_split(self, table: pa.Table, part: np.ndarray, parts: int, stage: str, name: Callable[[int], str]):
        for p, t in enumerate(split(table, part, parts)):
            self.write(t, stage, name(p))

    def read_one(self, stage: str, name: str, columns: list[str] | None = None) -> pa.Table:
        """One file of ``stage`` as written (its chunks kept): ``columns`` of it (None: all)."""
        path = self.path(stage, name)
        if self.fs is None:
            with pa.memory_map(path) as src:  # the table's buffers keep the map alive
                t = pa.ipc.open_file(src).read_all()
        else:
            with self.fs.open(path, "rb") as fh:
                t = pa.ipc.open_file(pa.py_buffer(fh.read())).read_all()
        return t.select(columns) if columns is not None else t

    def read(self, stage: str, names: list[str], schema: pa.Schema | None = None) -> pa.Table:
        tables = [self.read_one(stage, n) for n in names]
        if not tables:
            return schema.empty_table()
        return pa.concat_tables(tables).combine_chunks()

    def done(self, stage: str, key: str, run_key: str) -> Any:
        """The stored result of task (stage, key) when its marker carries ``run_key``, else None."""
        path = self.marker(stage, key)
        try:
            with (open(path) if self.fs is None else self.fs.open(path, "r")) as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            return None
        return data["result"] if data.get("run_key") == run_key else None

    def finish(self, stage: str, key: str, run_key: str, result: Any) -> Any:
        path = self.marker(stage, key)
        if self.fs is not None:
            text = json.dumps({"run_key": run_key, "result": result}, indent=2, default=_plain)
            self._atomic(path, lambda tmp: self.fs.pipe_file(tmp, text.encode()))
            return result
        os.makedirs(os.path.dirname(path), exist_ok=True)
        sync_fs(self.root)  # the task's files on disk before its marker (which itself needs no fsync)
        write_json_atomic({"run_key": run_key, "result": result}, path, durable=False)
        return result

    def write_text(self, name: str, text: str) -> str:
        """WORK/ray/``name`` holding ``text`` (the probe's token); returns its path."""
        path = self._join(self.root, name)
        if self.fs is not None:
            self._atomic(path, lambda tmp: self.fs.pipe_file(tmp, text.encode()))
            return path
        os.makedirs(self.root, exist_ok=True)
        with open(path, "w") as fh:
            fh.write(text)
        return path

    def read_text(self, name: str) -> str:
        path = self._join(self.root, name)
        if self.fs is None:
            with open(path) as fh:
                return fh.read()
        return self.fs.cat_file(path).decode()

    def remove(self, name: str) -> None:
        path = self._join(self.root, name)
        if self.fs is None:
            os.unlink(path)
        else:
            self.fs.rm(path)

    def clear(self) -> None:
        """Remove WORK/ray (a fresh run trusts nothing of an earlier one), then create it again."""
        if self.fs is None:
            if os.path.isdir(self.root):
                shutil.rmtree(self.root)
            os.makedirs(self.root, exist_ok=True)
            return
        if self.fs.exists(self.root):
            self.fs.rm(self.root, recursive=True)
        self.fs.makedirs(self.root, exist_ok=True)

    def makedirs(self) -> None:
        if self.fs is None:
            os.makedirs(self.root, exist_ok=True)
        else:
            self.fs.makedirs(self.root, exist_ok=True)



class WorkFiles:
    """What every engine job derives from its ``work`` dir and its input ``files`` (rows.Job, perfile.FileJob,
    tasks.ProgramJob): the work dir's ``layout``, the file count, the files' row ``offsets`` as an array."""

    work: str
    files: list
    offsets: list[int] | None

    @property
    def layout(self) -> Layout:
        return Layout(self.work)

    @property
    def nfiles(self) -> int:
        return len(self.files)

    def offs(self) -> np.ndarray:
        return np.asarray(self.offsets, np.int64)

    @staticmethod
    def prepare(work: str, resume: bool) -> Layout:
        """The work dir's layout, made: kept with ``resume`` (its finished tasks are reused), else cleared (a
        fresh run trusts nothing of an earlier one)."""
        lay = Layout(work)
        if resume:
            lay.makedirs()
        else:
            lay.clear()
        return lay


def sync_fs(path: str) -> None:
    """Flush every write of the file system holding ``path`` to disk: Linux's ``syncfs`` (one journal commit
    for all the files a task wrote), ``os.sync`` where there is none."""
    syncfs = getattr(_libc(), "syncfs", None)
    if syncfs is None:
        os.sync()
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        if syncfs(fd) != 0:
            raise RunError(f"the work dir {path!r} could not be flushed to disk ({os.strerror(ctypes.get_errno())}): "
                           "check that its file system is writable and not full (--work-dir)")
    finally:
        os.close(fd)


_LIBC: list = []


def _libc():
    if not _LIBC:
        try:
            _LIBC.append(ctypes.CDLL(None, use_errno=True))
        except OSError:  # no C library to load (not a POSIX system): os.sync
            _LIBC.append(None)
    return _LIBC[0]


def _write_ipc(table: pa.Table, sink) -> None:
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def _plain(obj: Any) -> Any:
    """JSON of a task result's numpy values (a marker on an fsspec work dir)."""
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return str(obj)  # as run_key's digest: every result value is a number, a string or a list of them


def run_key(parts: list[Any]) -> str:
    """A digest of JSON-able values (the map markers, the config fingerprint) and of EXCHANGE: the markers of
    a work dir written in another exchange format (Parquet before) are never trusted on --resume."""
    return hashlib.sha256(json.dumps([EXCHANGE, parts], sort_keys=True, default=str).encode()).hexdigest()[:32]


def mix64(x: np.ndarray, seed: int) -> np.ndarray:
    """A 64-bit mixing hash (splitmix64 finaliser) of int64/uint64 values, for order-free set fingerprints."""
    z = np.asarray(x, np.uint64) + np.uint64(seed)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))
