"""A pipeline step's finished record, what ``resume`` reuses: the fingerprint of its settings and of every step
before it (seeded by the input files' identities), and its verdicts.

    json_values         a step's settings as JSON values
    input_fingerprint   the seed: each input file's relpath, size and mtime (a table: its content)
    fingerprint         a step's settings and every earlier step's, as one hash
    save_verdicts       a finished step's verdicts.parquet, then its step.json (written last)
    load_verdicts       the record of a finished step whose fingerprint matches
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .. import io
from .._version import __version__
from ..runtime.program import Env, Verdicts

STEP_FILE = "step.json"         # a finished step's record (its fingerprint); written last in its directory
VERDICTS_FILE = "verdicts.parquet"


def json_values(x: Any) -> Any:
    """A step's settings as JSON values (dataclasses as mappings; anything else by its repr)."""
    if dataclasses.is_dataclass(x):
        return {f.name: json_values(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, (list, tuple)):
        return [json_values(v) for v in x]
    if isinstance(x, dict):
        return {str(k): json_values(v) for k, v in x.items()}
    return x if isinstance(x, (str, int, float, bool, type(None))) else repr(x)


def input_fingerprint(source: Any) -> str:
    """The seed of the steps' fingerprints: each input file's relpath, size and mtime (a table: its content), so
    that ``resume`` runs again a step recorded over other inputs (more or fewer files, a file rewritten since)."""
    from ..runtime.workdir import file_identity, table_hash

    stamps = [[f.relpath, table_hash(f.table)] if f.fmt == "table" else
              [f.relpath, {k: v for k, v in file_identity(f).items() if k in ("size", "mtime_ns", "remote")}]
              for f in io.source_files(source)]
    return hashlib.sha256(json.dumps(stamps, sort_keys=True, default=repr).encode()).hexdigest()


def fingerprint(step: Any, env: Env, before: str) -> str:
    """A step's settings and every earlier step's, as one hash: what ``resume`` compares."""
    body = json.dumps({"before": before, "step": step.name, "settings": json_values(step),
                       "reading": json_values(env.reading), "device": env.device, "version": __version__},
                      sort_keys=True, default=repr)
    return hashlib.sha256(body.encode()).hexdigest()


def save_verdicts(d: str, v: Verdicts, kept: str | None, fingerprint: str, seen_rows: np.ndarray) -> None:
    """A finished step's record: its verdicts (verdicts.parquet), then step.json (written last)."""
    cols = {"id": v.ids, "source": v.sources, "keep": pa.array(v.keep), "reason": v.reason,
            "matched": pa.array(v.matched, pa.int64()), "row": pa.array(seen_rows, pa.int64())}
    if v.representative is not None:
        cols["representative"] = pa.array(v.representative, pa.int64())
    for k, val in v.values.items():
        cols["value:" + k] = val
    io.write_parquet_atomic(pa.table(cols), os.path.join(d, VERDICTS_FILE))
    io.write_json_atomic({"fingerprint": fingerprint, "kept": kept, "gpu_dedup_version": __version__},
                         os.path.join(d, STEP_FILE))


def load_verdicts(d: str, fingerprint: str) -> tuple[Verdicts, str | None] | None:
    """The record of a finished step whose fingerprint matches (None: none, or another step's)."""
    path = os.path.join(d, STEP_FILE)
    if not os.path.isfile(path) or not os.path.isfile(os.path.join(d, VERDICTS_FILE)):
        return None
    with open(path, encoding="utf-8") as fh:
        rec = json.load(fh)
    if rec.get("fingerprint") != fingerprint or (rec.get("kept") and not os.path.isdir(rec["kept"])):
        return None
    t = pq.read_table(os.path.join(d, VERDICTS_FILE))
    values = {k[len("value:"):]: t[k].combine_chunks() for k in t.column_names if k.startswith("value:")}
    rep = np.asarray(t["representative"].to_numpy(), np.int64) if "representative" in t.column_names else None
    v = Verdicts(t["id"].combine_chunks(), t["source"].combine_chunks(),
                 np.asarray(t["keep"].to_numpy(zero_copy_only=False), bool), t["reason"].combine_chunks(),
                 np.asarray(t["matched"].to_numpy(), np.int64), rep, values)
    return v, rec.get("kept")
