"""Pass 1 of the lexical pipeline: read -> normalize -> exact hash + MinHash -> band keys, for every input
file, and the per-document arrays it leaves (``Documents``).

Local engine: file by file here, batches read ahead in a thread (on a GPU the per-document results stay on
the device); the Ray engine's sign task (gpu_dedup/distributed/) runs ``_compute_file`` per file. With a work directory each file's
results are stored as a checksummed piece and valid pieces are reused on resume. Rows are numbered in file
order either way, so decisions depend on neither the engine, the worker count nor the batch size.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from .. import io
from ..config import RunConfig, keep_column, score_columns
from ..device import array_module, simulator, to_device, to_host
from ..engine import TextCache, prefetched, progress
from ..io.gpu import resolve_reader
from ..workdir import checkpoint, piece_table, unpack_piece
from .bandkeys import BandKeys
from .exact import exact_hashes
from .lsh import band_keys
from .minhash import compute_signatures, permutation_params
from ..io.text import arrow_text_buffers
from ..text.normalize import normalize_arrays

STEPS = ("read", "normalize", "minhash", "band_keys")  # pass 1's timings


@dataclass
class Documents:
    """Pass 1's per-document arrays for the whole run, in row order. ``exact``, ``nshingles`` and the band
    keys live on the device on a GPU; the rest on the host."""

    ids: pa.Array                    # string (n,), unique
    file_index: np.ndarray           # int32 (n,): the document's file, an index into the run's files
    file_rows: list[int]             # documents per input file
    text_bytes: np.ndarray           # int64 (n,): UTF-8 bytes of the raw text
    words: np.ndarray                # int64 (n,): words of the normalized text
    keep_values: np.ndarray | None   # float64 (n,): the keep=max:<column> values, else None
    exact: Any                       # uint64 (n, 2): the 128-bit exact hashes
    nshingles: Any                   # int64 (n,): shingles per document (0: short, exact path only)
    keys: BandKeys                   # (n, bands) uint64 band keys, in memory or on disk (work dir + budget)
    filter_pass: np.ndarray | None = None  # bool (n,): the prefilter kept the document (None: no prefilter)
    scope_codes: np.ndarray | None = None  # int32 (n,): each document's scope, an index into scope_values
    scope_values: list[str] | None = None  # the scopes (ClusterConfig.scope_field's values), first seen first

    def __len__(self) -> int:
        return len(self.ids)


@dataclass
class _Collected:
    """Per-batch arrays gathered in pass 1, concatenated into ``Documents`` at the end."""

    ids: list[pa.Array] = field(default_factory=list)
    file_index: list[np.ndarray] = field(default_factory=list)
    text_bytes: list[np.ndarray] = field(default_factory=list)
    words: list[np.ndarray] = field(default_factory=list)
    keep_values: list[np.ndarray] = field(default_factory=list)
    exact: list[np.ndarray] = field(default_factory=list)
    nshingles: list[np.ndarray] = field(default_factory=list)
    band_keys: list[np.ndarray] = field(default_factory=list)
    scope: list[pa.Array] = field(default_factory=list)
    file_rows: list[int] = field(default_factory=list)  # rows per input file


def read_signatures(files, cfg: RunConfig, device: str, report, timings: dict[str, float], work=None,
                    cache: TextCache | None = None, on_batch=None) -> Documents:
    """Pass 1 over every file (module doc), then the per-document arrays of the run. Adds the read report
    of every file to ``report`` and pass 1's times (``STEPS``, plus "collect") to ``timings``.
    ``on_batch(run row, ids, text)`` sees every batch's raw text (local engine, no work-dir pieces)."""
    if on_batch is not None and work is not None:
        raise ValueError("filtering inside dedup's pass 1 needs every batch's text: it runs on the local engine "
                         "without a work directory (drop --work-dir / --resume, or run "
                         "`gpu-dedup filter` first and deduplicate OUT/filtered)")
    col = _pass1(files, cfg, device, report, timings, work, cache, on_batch)
    t = time.perf_counter()
    xp = array_module(device)
    ids = pa.chunked_array(col.ids, pa.string()).combine_chunks() if col.ids else pa.array([], pa.string())
    io.check_unique_ids(pa.chunked_array([ids], pa.string()), files, col.file_rows, id_field=cfg.id_field,
                        text_field=cfg.text_field, on_error=cfg.on_error)
    exact = _cat2(col.exact, 2, np.uint64, xp)
    scope_codes = scope_values = mix = None
    if cfg.cluster.scope_field is not None:
        scope_codes, scope_values, salt = scope_salts(col.scope)
        salt_d = to_device(salt[scope_codes], device)
        exact = exact ^ salt_d  # equal hashes only within a scope (but with probability 2^-128, as any collision)
        mix = salt_d[:, 0]
    if col.band_keys or work is None or cfg.memory_budget is None:
        keys = BandKeys(cfg.lsh.bands, matrix=_cat2(col.band_keys, cfg.lsh.bands, np.uint64, xp), device=device,
                        mix=mix)
    else:  # with a budget and a work directory the band keys stay on disk, read one key range at a time
        keys = BandKeys(cfg.lsh.bands, work=work, file_rows=col.file_rows, device=device, mix=mix)
    docs = Documents(ids=ids, file_index=_cat(col.file_index, np.int32), file_rows=col.file_rows,
                     text_bytes=_cat(col.text_bytes, np.int64), words=_cat(col.words, np.int64),
                     keep_values=_cat(col.keep_values, np.float64) if keep_column(cfg.cluster.keep) else None,
                     exact=exact, nshingles=_cat(col.nshingles, np.int64, xp), keys=keys,
                     scope_codes=scope_codes, scope_values=scope_values)
    timings["collect"] = time.perf_counter() - t
    return docs


def scope_salts(parts: list[pa.Array]) -> tuple[np.ndarray, list[str], np.ndarray]:
    """A scoped run's scopes: (codes int32 (n,), the scope values in order of first appearance, salts uint64
    (scopes, 2)). A scope's salt is the 128-bit BLAKE2b of its UTF-8 value, XORed into the exact hashes (both
    words) and the band keys (the first word) of its documents: a bijection inside a scope, so every group
    and bucket of a scope is the one that scope alone gives, and two scopes share a key only by collision."""
    import hashlib

    arr = pa.chunked_array(parts, pa.string()).combine_chunks() if parts else pa.array([], pa.string())
    enc = arr.dictionary_encode()
    values = enc.dictionary.to_pylist()
    codes = np.asarray(enc.indices.to_numpy(zero_copy_only=False), np.int32)
    salt = np.array([np.frombuffer(hashlib.blake2b(v.encode("utf-8"), digest_size=16,
                                                   person=b"gpu_dedup.scope").digest(), "<u8") for v in values],
                    np.uint64).reshape(len(values), 2)
    return codes, values, salt


def reader_name(cfg: RunConfig, device: str, prefilter: bool = False) -> str:
    """Which reader decoded Parquet text in pass 1 (JSON Lines and tables always use pyarrow; so does a run
    that scores the text on the host: ``scores``, a prefilter)."""
    if prefilter or score_columns(cfg.scores):
        return "pyarrow"
    r = resolve_reader(cfg.reader, device)
    return r.name if r is not None else "pyarrow"


def _first_fields(f) -> list[str]:
    """The column names of input ``f``: a table's or Parquet file's schema, a JSON Lines file's first record."""
    import json

    from ..io.remote import open_parquet, open_stream

    if f.fmt == "table":
        return list(f.table.schema.names)
    if f.fmt == "parquet":
        return list(open_parquet(f).schema_arrow.names)
    with open_stream(f) as fh:
        for line in fh.read(1 << 20).splitlines():
            if line.strip():
                try:
                    obj = json.loads(line)
                except ValueError:
                    return []  # a malformed first line is the reader's to report
                return list(obj) if isinstance(obj, dict) else []
    return []


def check_score_shadowing(f, cfg: RunConfig) -> None:
    """Refuse a ``--score NAME=MODEL`` whose column ``NAME_score`` the input already has: the computed score
    would replace the input's column in keep=max:NAME_score without a word."""
    for column, (name, _model) in score_columns(cfg.scores).items():
        if column in _first_fields(f):
            raise ValueError(f"{f.relpath} already has a column {column!r}, which scores={name + '=...'!r} would "
                             f"compute and use in its place: give the score another name (e.g. "
                             f"{name}2=MODEL, then keep 'max:{name}2_score'), or drop the score and keep "
                             f"'max:{column}' to use the input's column")


def _compute_file(fi: int, f, cfg: RunConfig, device: str, params, bar=None, keep_text=None, on_batch=None):
    """Pass 1 over one input file: returns (parts, read report dict, timings). A part is (ids, text_bytes,
    words, keep_values, exact hashes, shingle counts, band keys, scope values or None) of one batch; the
    exact hashes, shingle counts and band keys stay on the device on a GPU. ``keep_text(row in the file,
    normalized batch)`` is offered every batch, and ``on_batch(row in the file, ids, raw text)`` too (the
    prefilter)."""
    kc = keep_column(cfg.cluster.keep)
    report = io.ReadReport()
    parts = []
    tm = dict.fromkeys(STEPS, 0.0)
    t = time.perf_counter()
    scorer = None
    if kc in score_columns(cfg.scores):
        from ..filters.scorers import pass1_scorer

        check_score_shadowing(f, cfg)
        scorer = pass1_scorer(*score_columns(cfg.scores)[kc], device)
    # a score is computed from the batch's text on the host: the device reader would keep it on the GPU
    device_reader = resolve_reader(cfg.reader, device) if scorer is None and on_batch is None else None

    def on_device(batch):
        """(batch, text bytes per row, data, offsets on the device); runs in the reading thread."""
        if batch.device_text is not None:  # decoded on the device (cudf): only the lengths come back
            data, offsets = batch.device_text.data, batch.device_text.offsets
            return batch, to_host(offsets[1:] - offsets[:-1]).astype(np.int64), data, offsets
        data, offsets = arrow_text_buffers(batch.text)
        if device == "cuda" and (offsets[0] > 0 or offsets[-1] < data.shape[0]):
            # a slice of a larger buffer (batches of an in-memory table share the table's whole text
            # buffer): copy only this batch's bytes, with offsets rebased to them
            data, offsets = data[offsets[0]:offsets[-1]], offsets - offsets[0]
        return batch, np.diff(offsets), to_device(data, device), to_device(offsets, device)

    # a device reader launches a kernel (UTF-8 check) in the reading thread
    depth = 0 if device_reader is not None and simulator() else 2
    batches = io.iter_batches([f], report=report, device_reader=device_reader, **cfg.reader_options())
    for batch, text_bytes, data, offsets in prefetched(batches, depth, on_device):
        t0 = time.perf_counter()
        norm = normalize_arrays(data, offsets, cfg.normalize, device)
        t1 = time.perf_counter()
        if keep_text is not None:
            keep_text(batch.row_start, norm)
        if on_batch is not None:
            on_batch(batch.row_start, batch.ids, batch.text)
        h = exact_hashes(norm, device)
        sig = compute_signatures(norm, cfg.shingle, cfg.minhash, params, device)
        t2 = time.perf_counter()
        keys = band_keys(sig.values, cfg.lsh, device)
        t3 = time.perf_counter()
        values = scorer(batch.text) if scorer is not None else \
            (np.asarray(batch.keep_values, np.float64) if kc else None)
        parts.append((batch.ids, text_bytes, to_host(norm.words), values, h, sig.nshingles, keys, batch.scope))
        tm["read"] += t0 - t
        tm["normalize"] += t1 - t0
        tm["minhash"] += t2 - t1
        tm["band_keys"] += t3 - t2
        if bar is not None:
            bar.update(len(batch))
        checkpoint("batch")
        t = time.perf_counter()
    return parts, report.to_dict(), tm


def _pass1(files, cfg: RunConfig, device: str, report, timings: dict[str, float], work=None,
           cache: TextCache | None = None, on_batch=None) -> _Collected:
    """Pass 1 over every file, reusing stored pieces (module doc)."""
    col = _Collected()
    params = permutation_params(cfg.minhash)
    kc = keep_column(cfg.cluster.keep)
    for k in STEPS:
        timings[k] = 0.0
    stored = {fi: work.load(fi, f) for fi, f in enumerate(files)} if work is not None else {}
    with progress(cfg, "read+minhash") as bar:
        for fi, f in enumerate(files):
            piece = stored.get(fi)
            if piece is not None:
                if cache is not None:
                    cache.drop("pass 1 reused work-dir pieces")
                u = unpack_piece(piece[0], cfg.lsh.bands)
                report.merge(piece[1])
                parts = [(u["ids"], u["text_bytes"], u["words"], u["keep_values"], to_device(u["exact"], device),
                          to_device(u["nshingles"], device), to_device(u["keys"], device), u["scope"])]
            else:
                row0 = sum(col.file_rows)
                keep_text = None if cache is None else (lambda r, norm, row0=row0: cache.add(row0 + r, norm))
                batch_hook = None if on_batch is None else \
                    (lambda r, ids, text, row0=row0: on_batch(row0 + r, ids, text))
                parts, part_report, tm = _compute_file(fi, f, cfg, device, params, bar, keep_text, batch_hook)
                for k, v in tm.items():
                    timings[k] += v
                report.merge(part_report)
                if work is not None:
                    work.store(fi, f, _piece_of(parts, cfg), part_report)
            col.file_rows.append(sum(len(p[0]) for p in parts))
            keep_keys = work is None or cfg.memory_budget is None  # else they are read back from the pieces
            for ids, text_bytes, words, values, h, nsh, keys, scope in parts:
                col.ids.append(ids)
                col.file_index.append(np.full(len(ids), fi, np.int32))
                col.text_bytes.append(text_bytes)
                col.words.append(words)
                if kc:
                    col.keep_values.append(values)
                col.exact.append(h)
                col.nshingles.append(nsh)
                if keep_keys:
                    col.band_keys.append(keys)
                if cfg.cluster.scope_field is not None:
                    col.scope.append(scope)

    return col


def _piece_of(parts, cfg: RunConfig):
    if not parts:
        return piece_table(pa.array([], pa.string()), np.zeros(0, np.int64), np.zeros(0, np.int64),
                           np.zeros((0, 2), np.uint64), np.zeros(0, np.int64), np.zeros((0, cfg.lsh.bands), np.uint64),
                           np.zeros(0) if keep_column(cfg.cluster.keep) else None,
                           pa.array([], pa.string()) if cfg.cluster.scope_field is not None else None)
    kc = keep_column(cfg.cluster.keep)
    return piece_table(pa.concat_arrays([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
                       np.concatenate([p[2] for p in parts]),
                       np.concatenate([to_host(p[4]) for p in parts]), np.concatenate([to_host(p[5]) for p in parts]),
                       np.concatenate([to_host(p[6]) for p in parts]),
                       np.concatenate([p[3] for p in parts]) if kc else None,
                       pa.concat_arrays([p[7] for p in parts]) if cfg.cluster.scope_field is not None else None)


def _cat(parts: list, dtype, xp=np):
    return xp.concatenate(parts).astype(dtype, copy=False) if parts else xp.zeros(0, dtype)


def _cat2(parts: list, width: int, dtype, xp=np):
    return xp.concatenate(parts).astype(dtype, copy=False) if parts else xp.zeros((0, width), dtype)
