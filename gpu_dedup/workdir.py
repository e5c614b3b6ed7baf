"""Work directory: the per-document results of pass 1 persisted per input file, so that a killed run
resumes where it stopped and produces the same decisions.

Layout: ``WORK/pieces/<file number>.parquet`` (ids, text bytes, words, exact hashes, shingle counts,
band keys, keep values of one input file) and ``WORK/manifest.json``. A piece is written to a temporary
name and renamed, then recorded in the manifest (also written atomically) with its SHA-256, the input
file's size and mtime, the read report of that file, and the contract fingerprint. On resume a piece
is reused only if all of these still match; anything missing, truncated, corrupt or stale is
recomputed, never trusted.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .io import write_json_atomic, write_parquet_atomic

logger = logging.getLogger(__name__)

MANIFEST = "manifest.json"
FORMAT = "gpu_dedup-workdir"
VERSION = 2  # 2: one column per band (band_000, ...), so a band can be read alone


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def _input_stamp(f) -> dict[str, Any]:
    if f.fmt == "table":
        return {"path": "<table>", "rows": f.table.num_rows}
    st = os.stat(f.path)
    return {"path": f.path, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


class WorkDir:
    def __init__(self, path: str, fingerprint: str, resume: bool):
        self.path = path
        self.fingerprint = fingerprint
        os.makedirs(os.path.join(path, "pieces"), exist_ok=True)
        self.entries: dict[str, dict[str, Any]] = {}
        manifest = os.path.join(path, MANIFEST)
        if resume and os.path.exists(manifest):
            with open(manifest) as fh:
                data = json.load(fh)
            if data.get("format") == FORMAT and data.get("version") == VERSION \
                    and data.get("contract_fingerprint") == fingerprint:
                self.entries = data["pieces"]
            else:
                logger.warning("work dir %s was made under another contract or version; recomputing everything",
                               path)
        self.reused = 0
        self.recomputed = 0

    def _piece_path(self, i: int) -> str:
        return os.path.join(self.path, "pieces", f"{i:06d}.parquet")

    def load(self, i: int, f) -> tuple[pa.Table, dict] | None:
        """The stored piece of input file ``i`` and its read report, or None when it must be computed."""
        e = self.entries.get(str(i))
        path = self._piece_path(i)
        if e is None or not os.path.exists(path):
            return None
        if e["input"] != _input_stamp(f):
            logger.warning("input %s changed since its piece was written; recomputing it", f.relpath)
            return None
        if _sha256(path) != e["sha256"]:
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
        self.entries[str(i)] = {"input": _input_stamp(f), "rows": table.num_rows, "sha256": _sha256(path),
                                "report": report}
        write_json_atomic({"format": FORMAT, "version": VERSION, "contract_fingerprint": self.fingerprint,
                           "pieces": self.entries}, os.path.join(self.path, MANIFEST))
        self.recomputed += 1
        checkpoint("piece")


def piece_table(ids: pa.Array, text_bytes: np.ndarray, words: np.ndarray, exact: np.ndarray,
                nshingles: np.ndarray, keys: np.ndarray, keep_values: np.ndarray | None) -> pa.Table:
    n, bands = keys.shape
    cols = {"id": ids.cast(pa.string()), "text_bytes": pa.array(text_bytes, pa.int64()),
            "words": pa.array(words, pa.int64()), "exact_lo": pa.array(exact[:, 0], pa.uint64()),
            "exact_hi": pa.array(exact[:, 1], pa.uint64()), "nshingles": pa.array(nshingles, pa.int64())}
    for b in range(bands):
        cols[band_column(b)] = pa.array(np.ascontiguousarray(keys[:, b]), pa.uint64())
    if keep_values is not None:
        cols["keep_value"] = pa.array(keep_values, pa.float64())
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
            "keep_values": t["keep_value"].to_numpy() if "keep_value" in t.column_names else None}


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
