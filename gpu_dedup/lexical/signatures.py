"""Pass 1 of the lexical pipeline: read -> normalize -> exact hash + MinHash -> band keys, for every input
file, and the per-document arrays it leaves (``Documents``).

Local engine: file by file here, batches read ahead in a thread (on a GPU the per-document results stay on
the device); the Ray engine's sign task (gpu_dedup/distributed/) runs ``compute_file`` per file. Each batch
is offered to the run's per-batch steps (``BatchStep``: the verification text cache, the score step of
``--score`` and of the filter flags, filters/prefilter.py) after it is normalized; what a step returns
(a keep column's values, the prefilter's verdict) becomes the batch's rows of ``Documents``. With a work
directory each file's results are stored as a checksummed piece and valid pieces are reused on resume. Rows
are numbered in file order either way, so decisions depend on neither the engine, the worker count nor the
batch size.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from .. import io
from ..config import RunConfig, keep_column, score_columns
from ..runtime.device import array_module, simulator, to_device, to_host
from ..runtime.passes import TextCache, prefetched, progress
from ..errors import ConfigError, DataError
from ..io.gpu import resolve_reader
from ..runtime.workdir import checkpoint, piece_table, unpack_piece
from .bandkeys import BandKeys
from .exact import exact_hashes
from .lsh import band_keys
from .minhash import compute_signatures, permutation_params
from ..io.text import arrow_text_buffers
from ..text.normalize import Normalized, normalize_arrays

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
    """Per-batch arrays of pass 1 (one entry per batch, or per stored piece), in row order: one file's
    (``compute_file``, a work-dir piece) or the run's, concatenated into ``Documents`` at the end. On a GPU
    ``exact``, ``nshingles`` and ``band_keys`` stay on the device; the rest is on the host."""

    ids: list[pa.Array] = field(default_factory=list)            # string (n,)
    file_index: list[np.ndarray] = field(default_factory=list)   # int32 (n,) (the run's only)
    text_bytes: list[np.ndarray] = field(default_factory=list)   # int64 (n,)
    words: list[np.ndarray] = field(default_factory=list)        # int64 (n,)
    keep_values: list[np.ndarray] = field(default_factory=list)  # float64 (n,) (keep=max:/min: runs only)
    exact: list[Any] = field(default_factory=list)               # uint64 (n, 2)
    nshingles: list[Any] = field(default_factory=list)           # int64 (n,)
    band_keys: list[Any] = field(default_factory=list)           # uint64 (n, bands) (unless read from pieces)
    scope: list[pa.Array] = field(default_factory=list)          # string (n,) (scoped runs only)
    filter_pass: list[np.ndarray] = field(default_factory=list)  # bool (n,) (a prefilter's runs only)
    file_rows: list[int] = field(default_factory=list)           # rows per input file (the run's only)

    @property
    def rows(self) -> int:
        return sum(len(a) for a in self.ids)

    def extend(self, part: "_Collected", *, keys: bool = True) -> None:
        """Append ``part``'s batches (without its band keys when ``keys`` is False)."""
        for name in ("ids", "text_bytes", "words", "keep_values", "exact", "nshingles", "scope", "filter_pass"):
            getattr(self, name).extend(getattr(part, name))
        if keys:
            self.band_keys.extend(part.band_keys)


@dataclass(frozen=True)
class PassBatch:
    """What pass 1 offers each per-batch step: one batch, read and normalized."""

    row: int          # the run row of the batch's first document (the file's row on the Ray engine)
    batch: Any        # io.Batch: ids, raw text (host Arrow; None when decoded on the device), keep values
    data: Any         # uint8 (T,): the raw text's UTF-8 bytes, where the device's kernels read them
    offsets: Any      # int64 (n + 1,): document d is data[offsets[d]:offsets[d + 1]]
    norm: Normalized  # the normalized text (on the device on a GPU)


class BatchStep(Protocol):
    """A per-batch step of pass 1: ``step(PassBatch)`` returns the batch's columns of ``Documents`` it
    supplies (``supplies``: "keep_values" float64, the keep=max:/min: column; "filter_pass" bool, the
    prefilter's verdict), each of the batch's length."""

    timing: str              # the pass-1 timing its time counts in
    raw_text: bool           # reads the raw text on the host (pass 1 then decodes Parquet text with pyarrow)
    every_batch: bool        # must see every batch: no stored work-dir piece can stand in for one
    supplies: tuple[str, ...]

    def __call__(self, b: PassBatch) -> dict[str, np.ndarray]: ...


class TextCacheStep:
    """The step that keeps each batch's normalized text for verification (``engine.TextCache``)."""

    timing = "normalize"
    raw_text = False
    every_batch = False
    supplies: tuple[str, ...] = ()

    def __init__(self, cache: TextCache):
        self.cache = cache

    def __call__(self, b: PassBatch) -> dict[str, np.ndarray]:
        self.cache.add(b.row, b.norm)
        return {}


def read_signatures(files, cfg: RunConfig, device: str, report, timings: dict[str, float], work=None,
                    cache: TextCache | None = None, steps: tuple = ()) -> Documents:
    """Pass 1 over every file (module doc), then the per-document arrays of the run. Adds the read report
    of every file to ``report`` and pass 1's times (``STEPS``, "collect", and each step's timing) to
    ``timings``. ``steps`` (``BatchStep``) see every batch, after the text cache (``cache``) when there is
    one."""
    if work is not None and any(s.every_batch for s in steps):
        raise ConfigError("filtering inside dedup's pass 1 needs every batch's text: it runs on the local engine "
                          "without a work directory (drop --work-dir / --resume, or run "
                          "`gpu-dedup filter` first and deduplicate OUT/filtered)")
    col = _pass1(files, cfg, device, report, timings, work, cache, tuple(steps))
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
    filtered = any("filter_pass" in s.supplies for s in steps)
    docs = Documents(ids=ids, file_index=_cat(col.file_index, np.int32), file_rows=col.file_rows,
                     text_bytes=_cat(col.text_bytes, np.int64), words=_cat(col.words, np.int64),
                     keep_values=_cat(col.keep_values, np.float64) if keep_column(cfg.cluster.keep) else None,
                     exact=exact, nshingles=_cat(col.nshingles, np.int64, xp), keys=keys,
                     filter_pass=_cat(col.filter_pass, bool) if filtered else None,
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
            raise DataError(f"{f.relpath} already has a column {column!r}, which scores={name + '=...'!r} would "
                            f"compute and use in its place: give the score another name (e.g. "
                            f"{name}2=MODEL, then keep 'max:{name}2_score'), or drop the score and keep "
                            f"'max:{column}' to use the input's column")


def compute_file(f, cfg: RunConfig, device: str, params, bar=None, steps: tuple = (),
                 row0: int = 0) -> tuple[_Collected, dict, dict[str, float]]:
    """Pass 1 over one input file: returns (its batches' arrays, read report dict, timings). Every batch is
    offered to ``steps`` (``BatchStep``) as a ``PassBatch`` whose row is ``row0`` + its row in the file;
    a step that supplies "keep_values" replaces the input's keep column (which is then not read), the
    "filter_pass" of the steps that supply one are combined (a document passes when every one passes it)."""
    parts, report, tm = compute_files([f], cfg, device, params, None if bar is None else _OneFileBar(bar), steps,
                                      row0)
    return parts[0], report, tm


class _OneFileBar:
    """A one-file bar (``update(n)``: passes.progress' ``for_file``) as ``compute_files``' bar, whose ``update``
    also names the batch's file."""

    def __init__(self, bar) -> None:
        self.bar = bar

    def update(self, n: int, file_index: int | None = None) -> None:
        self.bar.update(n)


def compute_files(files, cfg: RunConfig, device: str, params, bar=None, steps: tuple = (),
                  row0: int = 0) -> tuple[list[_Collected], dict, dict[str, float]]:
    """Pass 1 over ``files`` as one stream (``compute_file``'s rules): the reader decodes the next file while
    this one's last batches are hashed, and the kernels are loaded while the first batch is decoded
    (``_preload``). ``bar``: a progress bar counting each batch's documents with its file (``update(n,
    file_index)``), or None. Returns each file's batches' arrays, the read report of all of them, and the
    timings."""
    kc = keep_column(cfg.cluster.keep)
    report = io.ReadReport()
    parts = [_Collected() for _ in files]
    tm = dict.fromkeys(STEPS, 0.0)
    supplied = kc is not None and any("keep_values" in s.supplies for s in steps)
    if supplied and kc in score_columns(cfg.scores):
        for f in files:
            check_score_shadowing(f, cfg)
    # a step that reads the raw text reads it on the host: the device reader would keep it on the GPU
    device_reader = None if any(s.raw_text for s in steps) else resolve_reader(cfg.reader, device)

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
    opts = cfg.reader_options()
    if supplied:
        opts["keep_column"] = None  # computed by a step, not read from the input
    batches = io.iter_batches(list(files), report=report, device_reader=device_reader, **opts)
    stream = prefetched(batches, depth, on_device)
    t = time.perf_counter()
    if depth:
        _preload(cfg, device, params)  # while the reading thread decodes the first batch
    for batch, text_bytes, data, offsets in stream:
        col = parts[batch.file_index]
        t0 = time.perf_counter()
        norm = normalize_arrays(data, offsets, cfg.normalize, device)
        t1 = time.perf_counter()
        got: dict[str, list[np.ndarray]] = {}
        pb = PassBatch(row0 + batch.row_start, batch, data, offsets, norm)
        for s in steps:
            ts = time.perf_counter()
            for name, v in s(pb).items():
                got.setdefault(name, []).append(v)
            tm[s.timing] = tm.get(s.timing, 0.0) + time.perf_counter() - ts
        t2 = time.perf_counter()
        h = exact_hashes(norm, device)
        sig = compute_signatures(norm, cfg.shingle, cfg.minhash, params, device)
        t3 = time.perf_counter()
        keys = band_keys(sig.values, cfg.lsh, device)
        t4 = time.perf_counter()
        col.ids.append(batch.ids)
        col.text_bytes.append(text_bytes)
        col.words.append(to_host(norm.words))
        if kc:
            col.keep_values.append(got["keep_values"][0] if supplied else np.asarray(batch.keep_values, np.float64))
        col.exact.append(h)
        col.nshingles.append(sig.nshingles)
        col.band_keys.append(keys)
        if cfg.cluster.scope_field is not None:
            col.scope.append(batch.scope)
        if "filter_pass" in got:
            col.filter_pass.append(np.logical_and.reduce(got["filter_pass"]))
        tm["read"] += t0 - t
        tm["normalize"] += t1 - t0
        tm["minhash"] += t3 - t2
        tm["band_keys"] += t4 - t3
        if bar is not None:
            bar.update(len(batch), batch.file_index)
        checkpoint("batch")
        t = time.perf_counter()
    return parts, report.to_dict(), tm


_PRELOAD_TEXT = "pass one loads its kernels while the reader decodes the first batch"


def _preload(cfg: RunConfig, device: str, params) -> None:
    """Pass 1's kernels on a one-document batch: the first call of each loads its machine code from Numba's cache
    (and Numba's registries: ~0.3-0.5 s), which then overlaps the decoding of the first batch instead of
    following it. Same array types as a real batch (``arrow_text_buffers``), so the real calls find the code
    loaded; the results are dropped."""
    if device != "cpu":
        return
    data, offsets = arrow_text_buffers(pa.array([_PRELOAD_TEXT], pa.large_string()))
    norm = normalize_arrays(data, offsets, cfg.normalize, device)
    exact_hashes(norm, device)
    band_keys(compute_signatures(norm, cfg.shingle, cfg.minhash, params, device).values, cfg.lsh, device)


def _pass1(files, cfg: RunConfig, device: str, report, timings: dict[str, float], work=None,
           cache: TextCache | None = None, steps: tuple = ()) -> _Collected:
    """Pass 1 over every file, reusing stored pieces (module doc)."""
    col = _Collected()
    params = permutation_params(cfg.minhash)
    for k in STEPS:
        timings[k] = 0.0
    steps = ((TextCacheStep(cache),) if cache is not None else ()) + steps
    stored = {fi: work.load(fi, f) for fi, f in enumerate(files)} if work is not None else {}
    keep_keys = work is None or cfg.memory_budget is None  # else they are read back from the pieces
    with progress(cfg, "read+minhash", files=files) as bar:
        if work is None:  # one stream over every file: the next file is read while this one is hashed
            parts, part_report, tm = compute_files(files, cfg, device, params, bar, steps)
            for k, v in tm.items():
                timings[k] = timings.get(k, 0.0) + v
            report.merge(part_report)
            for fi, part in enumerate(parts):
                col.file_rows.append(part.rows)
                col.file_index.extend(np.full(len(a), fi, np.int32) for a in part.ids)
                col.extend(part)
            return col
        for fi, f in enumerate(files):
            piece = stored.get(fi)
            if piece is not None:
                if cache is not None:
                    cache.drop("pass 1 reused work-dir pieces")
                part = _unpacked(piece[0], cfg, device)
                report.merge(piece[1])
            else:
                part, part_report, tm = compute_file(f, cfg, device, params, bar.for_file(fi), steps, row0=col.rows)
                for k, v in tm.items():
                    timings[k] = timings.get(k, 0.0) + v
                report.merge(part_report)
                if work is not None:
                    work.store(fi, f, piece_of(part, cfg), part_report)
            rows = part.rows
            col.file_rows.append(rows)
            col.file_index.extend(np.full(len(a), fi, np.int32) for a in part.ids)
            col.extend(part, keys=keep_keys)
    return col


def piece_of(part: _Collected, cfg: RunConfig):
    """The work-dir piece (workdir.piece_table) of one file's pass-1 arrays."""
    kc = keep_column(cfg.cluster.keep)
    scoped = cfg.cluster.scope_field is not None
    if not part.ids:
        return piece_table(pa.array([], pa.string()), np.zeros(0, np.int64), np.zeros(0, np.int64),
                           np.zeros((0, 2), np.uint64), np.zeros(0, np.int64), np.zeros((0, cfg.lsh.bands), np.uint64),
                           np.zeros(0) if kc else None, pa.array([], pa.string()) if scoped else None)
    return piece_table(pa.concat_arrays(part.ids), np.concatenate(part.text_bytes), np.concatenate(part.words),
                       np.concatenate([to_host(a) for a in part.exact]),
                       np.concatenate([to_host(a) for a in part.nshingles]),
                       np.concatenate([to_host(a) for a in part.band_keys]),
                       np.concatenate(part.keep_values) if kc else None,
                       pa.concat_arrays(part.scope) if scoped else None)


def _unpacked(piece: pa.Table, cfg: RunConfig, device: str) -> _Collected:
    """A stored piece (``piece_of``) as one file's pass-1 arrays, its hashes and keys on the device."""
    u = unpack_piece(piece, cfg.lsh.bands)
    return _Collected(ids=[u["ids"]], text_bytes=[u["text_bytes"]], words=[u["words"]],
                      keep_values=[u["keep_values"]] if keep_column(cfg.cluster.keep) else [],
                      exact=[to_device(u["exact"], device)], nshingles=[to_device(u["nshingles"], device)],
                      band_keys=[to_device(u["keys"], device)],
                      scope=[u["scope"]] if cfg.cluster.scope_field is not None else [])


def _cat(parts: list, dtype, xp=np):
    return xp.concatenate(parts).astype(dtype, copy=False) if parts else xp.zeros(0, dtype)


def _cat2(parts: list, width: int, dtype, xp=np):
    return xp.concatenate(parts).astype(dtype, copy=False) if parts else xp.zeros((0, width), dtype)
