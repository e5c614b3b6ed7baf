"""Work directory: the per-document results of pass 1 persisted per input file, so that a killed run
resumes where it stopped and produces the same decisions.

Layout: ``WORK/pieces/<file number>.parquet`` (ids, text bytes, words, exact hashes, shingle counts,
band keys, keep values of one input file) and ``WORK/manifest.json``. A piece is written to a temporary
name and renamed, then recorded in the manifest (also written atomically) with its SHA-256, the input
file's stamp (below), the read report of that file, and the contract fingerprint. On resume a piece
is reused only if all of these still match; anything missing, truncated, corrupt or stale is
recomputed, never trusted, and the log says why.

The input's stamp proves it is the file the piece was computed from:
  - its path and size, and ``content``: the XXH3-128 of the whole file (the name of the hash is part of
    the value), computed after pass 1 read it, recorded only
    when the file's (device, inode, size, mtime, ctime) did not change from before pass 1 read it to after
    the hash (else the piece is stored but never reused);
  - its (device, inode, mtime, ctime) in nanoseconds. On resume a file whose size differs is changed; one
    whose device, inode, mtime and ctime all equal the recorded ones is unchanged without being read (the
    kernel sets ctime on every write, rename onto it and utime, and nothing can set it back, so a rewrite
    with the size and the mtime restored still changes it); any other file is hashed whole again and is
    unchanged only if ``content`` is equal (a touched or copied file is reused, a rewritten one is not).
  - in-memory tables: the row count and the XXH3-128 of the table's Arrow buffers; remote (fsspec) inputs:
    the size and what the file system's info() reports that changes with every rewrite (ETag, generation,
    mtime, ...), or, when it reports none of these, the XXH3-128 of the whole object.
"""
from __future__ import annotations

import logging
import os
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..constants import WORKDIR_FORMAT
from ..io import file_sha256, write_json_atomic, write_parquet_atomic
from .outputs import ManifestError, read_manifest, require_keys

logger = logging.getLogger(__name__)

MANIFEST = "manifest.json"
FORMAT = WORKDIR_FORMAT
VERSION = 3  # 2: one column per band (band_000, ...), so a band can be read alone; 3: content fingerprints
_KEYS = ("format", "version", "contract_fingerprint", "pieces")
_IDENTITY = ("dev", "ino", "size", "mtime_ns", "ctime_ns")



def _hasher() -> tuple[str, Any]:
    import xxhash

    return "xxh3_128", xxhash.xxh3_128()


def content_hash(path: str) -> str:
    """"<hash name>:<hex digest>" of the whole file (module docstring)."""
    with open(path, "rb") as fh:
        return _stream_hash(fh)


def _stream_hash(fh) -> str:
    name, h = _hasher()
    for block in iter(lambda: fh.read(1 << 23), b""):
        h.update(block)
    return f"{name}:{h.hexdigest()}"


def table_hash(table: pa.Table) -> str:
    name, h = _hasher()
    h.update(str(table.schema).encode())
    for col in table.columns:
        for chunk in col.chunks:
            h.update(f"{chunk.offset}:{len(chunk)}".encode())
            for buf in chunk.buffers():
                h.update(b"-" if buf is None else memoryview(buf))
    return f"{name}:{h.hexdigest()}"


# what an fsspec file system's info() reports that changes with every rewrite of an object (lower case, no "_")
_REMOTE_KEYS = {"etag", "md5hash", "crc32c", "generation", "versionid", "mtime", "lastmodified", "updated",
                "created", "sha", "oid", "blobid"}


def _remote(f) -> bool:
    return getattr(f, "fs", None) is not None


def file_identity(f) -> dict[str, Any]:
    """Local: (dev, ino, size, mtime_ns, ctime_ns); remote (fsspec): size and the info() entries that change
    with every rewrite (ETag, generation, mtime, ...)."""
    if _remote(f):
        from ..io.remote import fs_path

        info = f.fs.info(fs_path(f))
        return {"size": int(info.get("size") or 0),
                "remote": {k: str(v) for k, v in sorted(info.items()) if k.lower().replace("_", "") in _REMOTE_KEYS}}
    st = os.stat(f.path)
    return {"dev": st.st_dev, "ino": st.st_ino, "size": st.st_size, "mtime_ns": st.st_mtime_ns,
            "ctime_ns": st.st_ctime_ns}


def _content(f) -> str:
    if _remote(f):
        from ..io.remote import fs_path

        with f.fs.open(fs_path(f), "rb") as fh:
            return _stream_hash(fh)
    return content_hash(f.path)


def what_changed(recorded: dict[str, Any], f, identity: dict[str, Any] | None) -> str | None:
    """Why input ``f`` is not the file its piece was computed from (recorded stamp), or None."""
    if f.fmt == "table":
        if recorded.get("path") != "<table>" or recorded.get("rows") != f.table.num_rows:
            return "another table (row count)"
        return None if recorded.get("content") == table_hash(f.table) else "another table (content)"
    if recorded.get("path") != f.path:
        return f"recorded for path {recorded.get('path')!r}"
    if recorded.get("changed_during_read"):
        return "it changed while its piece was computed"
    if identity is None:
        return "it cannot be read"
    if recorded.get("size") != identity["size"]:
        return f"size {recorded.get('size')} -> {identity['size']} bytes"
    if identity.get("remote"):  # an object store's own version stamp (ETag, generation, ...)
        return None if recorded.get("remote") == identity["remote"] else "its ETag / version / mtime changed"
    if not recorded.get("content"):
        return "no content fingerprint was recorded for it"
    if not _remote(f) and all(recorded.get(k) == identity[k] for k in _IDENTITY):
        return None  # nothing wrote to it or replaced it since (ctime cannot be set back)
    if _content(f) == recorded["content"]:
        return None  # touched or copied, same bytes
    mtime = "restored" if recorded.get("mtime_ns") == identity.get("mtime_ns") else "changed"
    return f"its content differs (same size, mtime {mtime}; {recorded['content'].split(':')[0]} of the whole file)"


def input_stamp(f, before: dict[str, Any] | None) -> dict[str, Any]:
    """The stamp of input ``f`` (module docstring); ``before``: its identity before pass 1 read it."""
    if f.fmt == "table":
        return {"path": "<table>", "rows": f.table.num_rows, "content": table_hash(f.table)}
    before = before or file_identity(f)
    content = None if before.get("remote") else _content(f)
    if file_identity(f) != before:
        logger.warning("input %s changed while pass 1 read it; its piece will not be reused", f.relpath)
        return {"path": f.path, "size": before["size"], "content": None, "changed_during_read": True}
    return {"path": f.path, **before, "content": content}


class WorkDir:
    def __init__(self, path: str, fingerprint: str, resume: bool):
        self.path = path
        self.fingerprint = fingerprint
        self.entries: dict[str, dict[str, Any]] = {}
        self._before: dict[int, dict[str, Any] | None] = {}
        manifest = os.path.join(path, MANIFEST)
        if os.path.exists(manifest):  # never written over unless it is a work dir's
            data = read_manifest(manifest, FORMAT, "work directory")
            if data.get("version") == VERSION:
                require_keys(data, _KEYS, manifest, "work directory")
                if not isinstance(data["pieces"], dict):
                    raise ManifestError(f"work directory manifest {manifest!r}: \"pieces\" is not an object")
            if resume and data.get("version") == VERSION and data["contract_fingerprint"] == fingerprint:
                self.entries = data["pieces"]
            elif resume:
                logger.warning("work dir %s was made under another contract or version; recomputing everything",
                               path)
        os.makedirs(os.path.join(path, "pieces"), exist_ok=True)
        self.reused = 0
        self.recomputed = 0

    def _piece_path(self, i: int) -> str:
        return os.path.join(self.path, "pieces", f"{i:06d}.parquet")

    def load(self, i: int, f) -> tuple[pa.Table, dict] | None:
        """The stored piece of input file ``i`` and its read report, or None when it must be computed (called
        for every file before pass 1 reads any)."""
        try:
            self._before[i] = None if f.fmt == "table" else file_identity(f)
        except OSError:
            self._before[i] = None
        e = self.entries.get(str(i))
        path = self._piece_path(i)
        if e is None or not os.path.exists(path):
            return None
        why = what_changed(e.get("input", {}), f, self._before[i])
        if why is not None:
            logger.warning("input %s changed since its piece was written (%s); recomputing its piece",
                           f.relpath, why)
            return None
        if file_sha256(path) != e.get("sha256"):
            logger.warning("piece %s fails its checksum (truncated or corrupt); recomputing it", path)
            return None
        try:
            table = pq.read_table(path)
        except Exception as exc:  # noqa: BLE001 - any unreadable piece is recomputed
            logger.warning("piece %s is unreadable (%s); recomputing it", path, exc)
            return None
        self.reused += 1
        return table, e["report"]

    def band(self, i: int, b: int) -> np.ndarray:
        """Band b's keys of input file i's piece (uint64, read from disk: one column only)."""
        return pq.read_table(self._piece_path(i), columns=[band_column(b)]).column(0).to_numpy().astype(np.uint64)

    def store(self, i: int, f, table: pa.Table, report: dict) -> None:
        path = self._piece_path(i)
        write_parquet_atomic(table, path)
        self.entries[str(i)] = {"input": input_stamp(f, self._before.get(i)), "rows": table.num_rows,
                                "sha256": file_sha256(path), "report": report}
        write_json_atomic({"format": FORMAT, "version": VERSION, "contract_fingerprint": self.fingerprint,
                           "pieces": self.entries}, os.path.join(self.path, MANIFEST))
        self.recomputed += 1
        checkpoint("piece")


def piece_table(ids: pa.Array, text_bytes: np.ndarray, words: np.ndarray, exact: np.ndarray,
                nshingles: np.ndarray, keys: np.ndarray, keep_values: np.ndarray | None,
                scope: pa.Array | None = None) -> pa.Table:
    n, bands = keys.shape
    cols = {"id": ids.cast(pa.string()), "text_bytes": pa.array(text_bytes, pa.int64()),
            "words": pa.array(words, pa.int64()), "exact_lo": pa.array(exact[:, 0], pa.uint64()),
            "exact_hi": pa.array(exact[:, 1], pa.uint64()), "nshingles": pa.array(nshingles, pa.int64())}
    for b in range(bands):
        cols[band_column(b)] = pa.array(np.ascontiguousarray(keys[:, b]), pa.uint64())
    if keep_values is not None:
        cols["keep_value"] = pa.array(keep_values, pa.float64())
    if scope is not None:  # a scoped run's scope values (the hashes and keys are stored unmixed)
        cols["scope"] = scope.cast(pa.string())
    return pa.table(cols)


def unpack_piece(t: pa.Table, bands: int) -> dict[str, Any]:
    n = t.num_rows
    keys = np.stack([t[band_column(b)].to_numpy() for b in range(bands)], axis=1).astype(np.uint64) if n else \
        np.zeros((0, bands), np.uint64)
    return {"ids": t["id"].combine_chunks(), "text_bytes": t["text_bytes"].to_numpy(),
            "words": t["words"].to_numpy(),
            "exact": np.stack([t["exact_lo"].to_numpy(), t["exact_hi"].to_numpy()], axis=1).astype(np.uint64)
            if n else np.zeros((0, 2), np.uint64),
            "nshingles": t["nshingles"].to_numpy(), "keys": keys,
            "keep_values": t["keep_value"].to_numpy() if "keep_value" in t.column_names else None,
            "scope": t["scope"].combine_chunks() if "scope" in t.column_names else None}


def band_column(b: int) -> str:
    return f"band_{b:03d}"


# Called with the name of every checkpoint a run passes: "piece" (after a work-dir piece is stored), "batch"
# (inside a file's pass 1) and "decisions" (before the decisions file is written). Empty in production; the
# resume tests install a hook that kills the process there (gpu_dedup.testing.faults).
CHECKPOINT_HOOKS: list[Callable[[str], None]] = []


def checkpoint(name: str) -> None:
    """Tell the installed hooks (CHECKPOINT_HOOKS) that the run reached checkpoint ``name``."""
    for hook in CHECKPOINT_HOOKS:
        hook(name)
