"""Benchmark files read into items (the screening policy's "Benchmark items", screening.py's module docstring):
records of JSON Lines / JSON array / Parquet files by their configured fields, plain-text files by line or whole;
and the common-phrase list file."""
from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from ..errors import ConfigError, DataError, MissingFileError

logger = logging.getLogger(__name__)

# the id fields of public benchmarks' records, in the order they are looked for (item_id_field=None)
# how to name other fields: the screen command's; train-lm / filter (training.py) take the default fields only
FIELDS_HINT = "; pass fields=/--benchmark-field"
ITEM_ID_FIELDS = ("id", "task_id", "unique_id", "question_id", "problem_id", "qid", "uid", "idx")


def load_phrases(path: str | os.PathLike) -> tuple[str, ...]:
    """Common-phrase list file: one phrase per non-blank line (UTF-8)."""
    if not os.path.isfile(path):  # not a bare "[Errno 2]": name the list and what it must be
        what = "is a directory" if os.path.isdir(path) else "does not exist"
        raise MissingFileError(f"common-phrase file {os.fspath(path)!r} {what}; give a text file of phrases, one "
                               "per line")
    with open(path, encoding="utf-8", errors="replace") as fh:
        return tuple(line.strip() for line in fh if line.strip())


@dataclass
class BenchmarkItems:
    """Items of all benchmark files. Piece p (one field value) belongs to item piece_item[p]."""

    names: list[str]                 # benchmark names (one per file)
    item_bench: np.ndarray           # int32 (I,)
    item_ids: list[str]              # (I,)
    piece_text: list[str] = field(default_factory=list)
    piece_item: list[int] = field(default_factory=list)
    no_field: dict[str, int] = field(default_factory=dict)
    id_field: dict[str, str | None] = field(default_factory=dict)  # per benchmark: the field its item ids are from


def _read_records(path: str) -> list[dict]:
    low = path.lower()
    try:  # a damaged file (a truncated gzip / zstd stream or Parquet file, a broken JSON array) names itself
        if low.endswith(".parquet"):
            import pyarrow.parquet as pq

            return pq.read_table(path).to_pylist()
        comp = "gzip" if low.endswith(".gz") else "zstd" if low.endswith(".zst") else None
        with pa.input_stream(path, compression=comp) as fh:
            raw = fh.read().decode("utf-8", "replace").lstrip("\ufeff")
        array = raw.lstrip().startswith("[")
        recs = json.loads(raw) if array else []
    except (OSError, pa.ArrowException, json.JSONDecodeError) as err:
        raise DataError(f"benchmark file {path}: not readable ({err}); restore or fix the file, or leave it out "
                        "of --benchmark") from err
    if not array:
        for ln, line in enumerate(raw.splitlines(), 1):
            if line.strip():
                try:
                    recs.append(json.loads(line, strict=False))
                except json.JSONDecodeError as err:
                    raise DataError(f"benchmark file {path}:{ln}: malformed JSON ({err.msg}); fix the line") from err
    bad = [i for i, r in enumerate(recs) if not isinstance(r, dict)]
    if bad:
        raise DataError(f"benchmark file {path}: record {bad[0]} is not a JSON object; each item must be one")
    return recs


def _is_records_file(path: str) -> bool:
    low = path.lower()
    for suf in (".gz", ".zst"):
        if low.endswith(suf):
            low = low[:-len(suf)]
    return low.endswith((".jsonl", ".json", ".parquet"))


def check_benchmark_file(path: str, label: str = "benchmark file") -> None:
    """``path`` is a file; else a ``MissingFileError`` naming it as ``label`` (the command line: its flag)."""
    if os.path.isdir(path):  # "does not exist" sent people looking for a path that is there
        raise MissingFileError(f"{label} {path!r} is a directory; give the benchmark files in it (e.g. "
                               f"{os.path.join(path, '*.jsonl')})")
    if not os.path.isfile(path):
        raise MissingFileError(f"{label} {path!r} does not exist; give existing benchmark files")


def read_benchmarks(paths: Sequence[str | os.PathLike], cfg: Any) -> BenchmarkItems:
    """Read every benchmark file into items and their text pieces (``cfg``: a ``ScreenConfig``; the policy in
    screening.py's module docstring)."""
    paths = [os.fspath(p) for p in ([paths] if isinstance(paths, (str, os.PathLike)) else paths)]
    if not paths:
        raise ConfigError("no benchmark files given; pass at least one --benchmark FILE")
    base = [os.path.basename(p) for p in paths]
    names = [b if base.count(b) == 1 else p for b, p in zip(base, paths)]
    items = BenchmarkItems(names=names, item_bench=np.zeros(0, np.int32), item_ids=[])
    bench: list[int] = []
    for b, (path, name) in enumerate(zip(paths, names)):
        check_benchmark_file(path)
        n_before = len(items.piece_text)
        if _is_records_file(path):
            recs = _read_records(path)
            id_field = item_id_field(recs, cfg.item_id_field, name)
            items.id_field[name] = id_field
            missing = 0
            for i, rec in enumerate(recs):
                pieces = []
                for f in cfg.fields:
                    v = rec.get(f)
                    if isinstance(v, str):
                        pieces.append(v)
                    elif isinstance(v, list):
                        pieces.extend(x for x in v if isinstance(x, str))
                if not pieces:
                    missing += 1
                    continue
                rid = rec.get(id_field) if id_field is not None else None
                _add_item(items, bench, b, str(rid) if rid is not None else f"{name}:{i}", pieces)
            items.no_field[name] = missing
            if recs and missing == len(recs):
                raise DataError(f"benchmark file {path!r}: no record has any of the fields {list(cfg.fields)}; "
                                f"keys of the first record: {sorted(recs[0])[:12]}{FIELDS_HINT}")
            if missing:
                logger.warning("benchmark %s: %d of %d records have none of the fields %s and are not indexed",
                               name, missing, len(recs), list(cfg.fields))
        else:
            with open(path, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
            if cfg.text_unit == "file":
                if text.strip():
                    _add_item(items, bench, b, name, [text])
            else:
                for ln, line in enumerate(text.split("\n"), 1):
                    if line.strip():
                        _add_item(items, bench, b, f"{name}:{ln}", [line])
            items.no_field[name] = 0
        if len(items.piece_text) == n_before:
            logger.warning("benchmark %s has no items", name)
    items.item_bench = np.asarray(bench, np.int32)
    return items


def item_id_field(records: list[dict], given: str | None, name: str) -> str | None:
    """The field that names the items of one benchmark file: ``given``, else the first of ``ITEM_ID_FIELDS``
    that any record has (None: none has one; items are named "<file>:<record index>"). Said in the log."""
    if given is not None:
        return given
    have = {k for r in records for k in r}
    found = next((f for f in ITEM_ID_FIELDS if f in have), None)
    if found is not None:
        logger.info("benchmark %s: items named by their field %r", name, found)
    elif records:
        logger.info("benchmark %s: no id field (none of %s): items named '%s:<record index>'", name,
                    ", ".join(ITEM_ID_FIELDS), name)
    return found


def _add_item(items: BenchmarkItems, bench: list[int], b: int, item_id: str, pieces: list[str]) -> None:
    idx = len(items.item_ids)
    items.item_ids.append(item_id)
    bench.append(b)
    items.piece_text.extend(pieces)
    items.piece_item.extend([idx] * len(pieces))
