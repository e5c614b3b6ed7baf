"""The lexical pipeline: stage order, passes over the input, decisions and outputs.

Pass 1 (streaming, bounded batches): read -> normalize -> exact hash + MinHash -> band keys.
Then, on the small per-document arrays: keep order -> exact groups -> LSH buckets.
Pass 2 (only with verification, only batches holding candidates): normalize -> shingle sets.
Then the removal policy, the decisions table, and pass 3 (the kept records, copied verbatim).
Only per-document arrays (band keys, hashes, ids) and the candidates' shingle sets are held in memory;
text is never held beyond one batch.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import logging
import os
import platform
import time
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import __version__
from .config import RunConfig, contract, contract_fingerprint, keep_column
from .device import array_backend

logger = logging.getLogger(__name__)

DECISIONS_SCHEMA = pa.schema([
    ("id", pa.string()), ("keep", pa.bool_()), ("reason", pa.string()), ("cluster_id", pa.int64()),
    ("representative_id", pa.string()), ("matched_id", pa.string()), ("jaccard", pa.float64()),
    ("cluster_size", pa.int64()), ("source", pa.string()),
])
REASONS = ("unique", "representative", "exact_duplicate", "short_exact_duplicate", "near_duplicate",
           "semantic_duplicate")


@dataclass
class DedupResult:
    """decisions: one row per input document (schema ``DECISIONS_SCHEMA``), in input order.
    stats: what run.json holds. output_dir: where outputs were written (None for in-memory runs)."""

    decisions: pa.Table
    stats: dict[str, Any]
    output_dir: str | None = None

    @property
    def kept(self) -> int:
        return int(pc.sum(self.decisions["keep"]).as_py() or 0)

    @property
    def removed(self) -> int:
        return self.decisions.num_rows - self.kept

    def to_pandas(self):
        return self.decisions.to_pandas()

    def summary(self) -> str:
        c = self.stats["counts"]
        parts = [f"{c['input']:,} documents: {c['kept']:,} kept, {c['removed']:,} removed"]
        by = ", ".join(f"{k} {v:,}" for k, v in c["by_reason"].items() if v)
        return parts[0] + (f" ({by})" if by else "")


@dataclass
class _Collected:
    """Per-document arrays gathered in pass 1 (row order)."""

    ids: list[pa.Array] = field(default_factory=list)
    file_index: list[np.ndarray] = field(default_factory=list)
    text_bytes: list[np.ndarray] = field(default_factory=list)
    words: list[np.ndarray] = field(default_factory=list)
    keep_values: list[np.ndarray] = field(default_factory=list)
    exact: list[np.ndarray] = field(default_factory=list)
    nshingles: list[np.ndarray] = field(default_factory=list)
    band_keys: list[np.ndarray] = field(default_factory=list)
    file_rows: list[int] = field(default_factory=list)  # rows per input file


class _TextCache:
    """Pass 1's normalized batches, kept (host memory, or device memory on a GPU) within ``budget`` bytes so
    that verification hashes the candidates' shingle sets without reading and normalizing the input again.
    It serves pass 2 only when it holds every batch of the run in row order; a batch past the budget, a
    reused work-dir piece or a dask worker's piece drops what it holds (the input is re-read then)."""

    def __init__(self, budget: int):
        self.budget = budget
        self.entries: list[tuple[int, Any]] = []  # (first row of the batch in the run, normalize.Normalized)
        self.rows = 0
        self.bytes = 0
        self.reason = None if budget > 0 else "cache_bytes=0"

    @property
    def complete(self) -> bool:
        return self.reason is None

    def add(self, row: int, norm) -> None:
        if not self.complete:
            return
        size = sum(int(a.nbytes) for a in (norm.data, norm.offsets, norm.words, norm.codepoints))
        if row != self.rows:  # pragma: no cover - pass 1 visits rows in order
            self.drop(f"batches arrived out of order (row {row}, expected {self.rows})")
        elif self.bytes + size > self.budget:
            self.drop(f"the normalized text exceeds cache_bytes={self.budget:,}")
        else:
            self.entries.append((row, norm))
            self.rows += len(norm)
            self.bytes += size

    def drop(self, reason: str) -> None:
        if self.complete:
            self.entries, self.bytes, self.reason = [], 0, reason

    def stats(self, used: bool) -> dict[str, Any]:
        return {"budget_bytes": self.budget, "kept_bytes": self.bytes, "rows": self.rows,
                "used_for_verification": used, **({"not_used_because": self.reason} if self.reason else {})}


def _known_text_bytes(files, text_field: str) -> int:
    """A lower bound of the normalized text's size known before reading: the text column's bytes in in-memory
    tables and Parquet metadata (uncompressed), at 90% (normalization trims and collapses whitespace); JSON
    Lines count 0. Unreadable metadata counts 0 (the reader reports the file)."""
    import pyarrow.parquet as pq

    total = 0
    for f in files:
        try:
            if f.fmt == "table" and f.table is not None and text_field in f.table.column_names:
                total += f.table[text_field].nbytes
            elif f.fmt == "parquet":
                meta = pq.ParquetFile(f.path).metadata
                cols = [j for j in range(meta.num_columns) if meta.schema.column(j).path == text_field]
                total += sum(meta.row_group(g).column(j).total_uncompressed_size
                             for g in range(meta.num_row_groups) for j in cols)
        except Exception:  # noqa: BLE001 - an estimate only; reading reports bad files with their names
            continue
    return int(total * 0.9)


def _prefetched(it: Iterable, depth: int = 2, prepare=None):
    """Yield from ``it`` (each item passed through ``prepare`` when given) while a background thread
    reads and prepares ahead ``depth`` items, so reading and parsing batch i+1 (pyarrow releases the
    GIL) and its copy to the device overlap the kernels on batch i (which release it too).
    depth 0: no thread (the CUDA simulator cannot run kernels from two threads at once)."""
    import queue
    import threading

    if prepare is not None:
        it = map(prepare, it)
    if depth == 0:
        yield from it
        return

    q: queue.Queue = queue.Queue(maxsize=depth)
    done = object()
    stop = threading.Event()

    def work() -> None:
        try:
            for item in it:
                if stop.is_set():
                    return
                q.put(item)
        except BaseException as exc:  # re-raised in the consumer, with its traceback
            q.put(exc)
            return
        q.put(done)

    thread = threading.Thread(target=work, name="gpu_dedup-reader", daemon=True)
    thread.start()
    try:
        while True:
            item = q.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        while thread.is_alive():  # unblock a producer waiting on a full queue
            try:
                q.get_nowait()
            except queue.Empty:
                thread.join(timeout=0.05)


class _NoProgress:
    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def update(self, n: int) -> None:
        return None


def _progress(cfg: RunConfig, desc: str, total: int | None = None):
    """A tqdm bar on stderr, or nothing at all with progress off (tqdm is not even imported then: in
    notebooks tqdm.auto warns about widgets on import)."""
    if not cfg.progress:
        return _NoProgress()
    from tqdm.auto import tqdm

    return tqdm(desc=desc, total=total, unit="doc", unit_scale=True, leave=False)


def deduplicate(source: Any, config: RunConfig | None = None, output_dir: str | os.PathLike | None = None, *,
                against: str | os.PathLike | None = None, save_index: str | os.PathLike | None = None,
                semantic: Any = None, work_dir: str | os.PathLike | None = None, resume: bool = False,
                engine: str = "local", workers: int | None = None, scheduler: str | None = None,
                **overrides: Any) -> DedupResult:
    """Deduplicate ``source`` (path(s)/glob(s)/directory, a pyarrow Table or a pandas DataFrame).

    ``overrides`` are applied to ``config`` with ``RunConfig.replace`` (e.g. ``cluster__threshold=0.9``).
    With ``output_dir``: writes decisions.parquet, run.json and (unless disabled) deduplicated/.
    ``against``: an index saved by an earlier run; its documents come first in keep order and are never
    removed, so new documents that duplicate one are removed in its favour (representative_id is the
    indexed id, cluster_id is -1 - its index position). ``save_index``: write this run's kept documents
    (plus the ``against`` index's, when given) as a new index. ``semantic``: a ``SemanticConfig`` to run
    SemDeDup over all documents too; a document kept by the lexical stages but semantically redundant
    becomes ``semantic_duplicate`` (columns cosine, semantic_nearest_id, semantic_cluster are added).
    ``work_dir`` (default OUT/work when ``resume``): store pass 1's results per input file, checksummed;
    with ``resume`` valid pieces are reused, so a killed run finishes with the same decisions.
    ``engine="dask"``: pass 1 runs as one task per input file on a dask.distributed cluster: an existing
    one (``scheduler``: an address like tcp://host:8786, or a scheduler-file path) or a LocalCluster of
    ``workers`` processes. The grouping and the policy run here on the gathered per-document arrays.
    """
    from . import io
    from .device import resolve_device, set_threads

    cfg = (config or RunConfig()).replace(**overrides) if overrides else (config or RunConfig())
    device = resolve_device(cfg.device)
    from .device import batch_bytes

    cfg = cfg.replace(batch_bytes=batch_bytes(cfg.batch_bytes, device))
    threads = set_threads(cfg.threads)
    t_start = time.perf_counter()
    index = None
    if against is not None:
        from .index import load_index

        index = load_index(os.fspath(against), contract(cfg))
    files = io.source_files(source)
    timings: dict[str, float] = {}
    report = io.ReadReport()
    work = None
    if work_dir is not None or resume:
        from .workdir import WorkDir

        if work_dir is None and output_dir is None:
            raise ValueError("resume needs a work directory: pass work_dir or output_dir")
        wd = os.fspath(work_dir) if work_dir is not None else os.path.join(os.fspath(output_dir), "work")
        work = WorkDir(wd, contract_fingerprint(contract(cfg)), resume)
    from .device import cache_bytes

    cache = _TextCache(cache_bytes(cfg.cache_bytes, device) if cfg.cluster.verify else 0)
    if not cfg.cluster.verify:
        cache.reason = "no verification"
    elif cache.complete and _known_text_bytes(files, cfg.text_field) > cache.budget:
        # known before reading (Parquet metadata, in-memory tables): do not hold text that cannot all fit
        cache.drop(f"the input's text exceeds cache_bytes={cache.budget:,} (from the Parquet metadata)")
    with _engine(cfg, engine, workers, scheduler, device) as client:
        col = _pass1(files, cfg, device, report, timings, work, client, cache)
    n = sum(col.file_rows)

    t = time.perf_counter()
    ids = pa.chunked_array(col.ids, pa.string()).combine_chunks() if col.ids else pa.array([], pa.string())
    io.check_unique_ids(pa.chunked_array([ids], pa.string()))
    file_index = _cat(col.file_index, np.int32)
    text_bytes = _cat(col.text_bytes, np.int64)
    from .device import array_module

    xp = array_module(device)
    exact_h = _cat2(col.exact, 2, np.uint64, xp)
    nshingles = _cat(col.nshingles, np.int64, xp)
    from .bandkeys import BandKeys

    if col.band_keys or work is None or cfg.memory_budget is None:
        keys = BandKeys(cfg.lsh.bands, matrix=_cat2(col.band_keys, cfg.lsh.bands, np.uint64, xp), device=device)
    else:  # with a budget and a work directory the band keys stay on disk, read one key range at a time
        keys = BandKeys(cfg.lsh.bands, work=work, file_rows=col.file_rows, device=device)
    kc = keep_column(cfg.cluster.keep)
    values = _cat(col.keep_values, np.float64) if kc else None
    timings["collect"] = time.perf_counter() - t

    decisions, stage_stats, keep_mask = _decide(cfg, device, files, ids, file_index, text_bytes, exact_h, nshingles,
                                                keys, values, timings, index, cache)
    cache.drop("released after verification")  # free the text (device memory on a GPU) before writing
    if semantic is not None:
        from .semantic import merge_decisions, semantic_dedup

        t = time.perf_counter()
        if output_dir is not None:
            os.makedirs(os.fspath(output_dir), exist_ok=True)
        sem = semantic_dedup(source, semantic, output_dir, device=device, run=cfg)
        decisions = merge_decisions(decisions, sem.decisions)
        keep_mask = np.asarray(decisions["keep"].to_numpy(zero_copy_only=False), bool)
        stage_stats["semantic"] = {k: sem.stats[k] for k in ("counts", "eps", "clusters", "pairwise_backend")
                                   if k in sem.stats}
        timings["semantic"] = time.perf_counter() - t
    if save_index is not None:
        t = time.perf_counter()
        stage_stats["index"] = _write_index(os.fspath(save_index), cfg, device, files, ids, exact_h, nshingles, keys,
                                            keep_mask, index)
        timings["save_index"] = time.perf_counter() - t
    counts = _counts(decisions, n)
    words = _cat(col.words, np.int64)
    counts["text_bytes"] = {"input": int(text_bytes.sum()), "kept": int(text_bytes[keep_mask].sum())}
    counts["words"] = {"input": int(words.sum()), "kept": int(words[keep_mask].sum()),
                       "note": "words of the normalized text (space-separated runs)"}
    stats: dict[str, Any] = {
        "gpu_dedup_version": __version__,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "device": device, "array_backend": array_backend(device), "threads": threads,
        "parquet_text_reader": _reader_name(cfg, device),
        "versions": _versions(),
        "config": cfg.to_dict(),
        "contract": contract(cfg), "contract_fingerprint": contract_fingerprint(contract(cfg)),
        "inputs": [f.relpath for f in files],
        "input_paths": [f.path for f in files if f.fmt != "table"],
        "read": report.to_dict(),
        # what each pass read: pass 1's text, verification's second read (0 when pass 1's text was kept),
        # and the input files read whole again to copy the kept records (0 when not written)
        "bytes_read": {"pass1_text": report.bytes_text,
                       "verification_text": stage_stats.get("verify", {}).get("text_bytes_read", 0),
                       "deduplicated_input_files": 0},
        "counts": counts,
        "stages": stage_stats,
        "timings_s": timings,
    }
    stats["engine"] = {"name": engine, "workers": workers, "scheduler": scheduler}
    if work is not None:
        stats["work_dir"] = {"path": work.path, "pieces_reused": work.reused, "pieces_computed": work.recomputed}
    out = None
    if output_dir is not None:
        out = os.fspath(output_dir)
        os.makedirs(out, exist_ok=True)
        t = time.perf_counter()
        if cfg.write_deduplicated:
            # files in parallel on the reader's threads (pass 1's default: pyarrow's CPU count), each
            # placed in keep_mask by the rows pass 1 read from it
            stats["deduplicated"] = io.write_kept(files, keep_mask, os.path.join(out, "deduplicated"),
                                                  id_field=cfg.id_field, text_field=cfg.text_field,
                                                  on_error=cfg.on_error, file_rows=col.file_rows)
            # the kept records are copied verbatim: every input file is read once more, whole
            stats["bytes_read"]["deduplicated_input_files"] = sum(os.path.getsize(f.path) for f in files
                                                                  if f.fmt != "table")
        timings["write_deduplicated"] = time.perf_counter() - t
        from .workdir import fault_point

        fault_point("decisions")
        io.write_parquet_atomic(decisions, os.path.join(out, "decisions.parquet"))
    timings["total"] = time.perf_counter() - t_start
    stats["throughput_docs_per_s"] = n / timings["total"] if timings["total"] > 0 else None
    if out is not None:
        io.write_json_atomic(stats, os.path.join(out, "run.json"))
        try:
            from .report import write_report

            t = time.perf_counter()
            write_report(out, source=files)
            logger.info("report: %s (%.1f s)", os.path.join(out, "report.html"), time.perf_counter() - t)
        except Exception as exc:  # the report is a convenience: never lose a finished run to it
            logger.warning("run report not written (%s); outputs are complete; retry with: gpu-dedup report %s",
                           exc, out, exc_info=True)
    result = DedupResult(decisions, stats, out)
    logger.info("%s in %.2f s", result.summary(), timings["total"])
    return result


def _reader_name(cfg: RunConfig, device: str) -> str:
    """Which reader decoded Parquet text in pass 1 (JSON Lines and tables always use pyarrow)."""
    from .gpu_io import resolve_reader

    r = resolve_reader(cfg.reader, device)
    return r.name if r is not None else "pyarrow"


def _compute_file(fi: int, f, cfg: RunConfig, device: str, params, bar=None, keep_text=None):
    """Pass 1 over one input file: returns (parts, read report dict, timings). A part is (ids, text_bytes,
    words, keep_values, exact hashes, shingle counts, band keys) of one batch; the last three stay on
    the device on a GPU. ``keep_text(row in the file, normalized batch)`` is offered every batch."""
    from . import io
    from .device import simulator, to_device, to_host
    from .exact import exact_hashes
    from .gpu_io import resolve_reader
    from .lsh import band_keys
    from .minhash import compute_signatures
    from .normalize import arrow_text_buffers, normalize_arrays
    from .workdir import fault_point

    kc = keep_column(cfg.cluster.keep)
    report = io.ReadReport()
    parts = []
    tm = {"read": 0.0, "normalize": 0.0, "minhash": 0.0, "band_keys": 0.0}
    t = time.perf_counter()
    device_reader = resolve_reader(cfg.reader, device)

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
    for batch, text_bytes, data, offsets in _prefetched(batches, depth, on_device):
        t0 = time.perf_counter()
        norm = normalize_arrays(data, offsets, cfg.normalize, device)
        t1 = time.perf_counter()
        if keep_text is not None:
            keep_text(batch.row_start, norm)
        h = exact_hashes(norm, device)
        sig = compute_signatures(norm, cfg.shingle, cfg.minhash, params, device)
        t2 = time.perf_counter()
        keys = band_keys(sig.values, cfg.lsh, device)
        t3 = time.perf_counter()
        parts.append((batch.ids, text_bytes, to_host(norm.words),
                      np.asarray(batch.keep_values, np.float64) if kc else None, h, sig.nshingles, keys))
        tm["read"] += t0 - t
        tm["normalize"] += t1 - t0
        tm["minhash"] += t2 - t1
        tm["band_keys"] += t3 - t2
        if bar is not None:
            bar.update(len(batch))
        fault_point("batch")
        t = time.perf_counter()
    return parts, report.to_dict(), tm


def _piece_task(fi: int, f, cfg: RunConfig, device: str):
    """Dask task: pass 1 of one file on a worker (its CPU threads, or its GPU), as a host piece table."""
    from .device import set_threads
    from .minhash import permutation_params

    set_threads(cfg.threads or 1)  # one numba thread per dask worker thread unless told otherwise
    parts, report, tm = _compute_file(fi, f, cfg, device, permutation_params(cfg.minhash))
    return _piece_of(parts, cfg), report, tm


def _pass1(files, cfg: RunConfig, device: str, report, timings: dict[str, float], work=None,
           client=None, cache: _TextCache | None = None) -> _Collected:
    """Read -> normalize -> exact hash + MinHash -> band keys for every file. Local engine: file by file
    here (on a GPU the per-document results stay on the device). Dask engine (``client``): one task per
    file on the cluster's workers. With a work directory each file's results are stored as a piece,
    and valid pieces are reused on resume. Rows are numbered in file order either way, so decisions do
    not depend on the engine, the worker count or the batch size."""
    from .device import to_device
    from .minhash import permutation_params
    from .workdir import unpack_piece

    col = _Collected()
    params = permutation_params(cfg.minhash)
    kc = keep_column(cfg.cluster.keep)
    for k in ("read", "normalize", "minhash", "band_keys"):
        timings[k] = 0.0
    stored = {fi: work.load(fi, f) for fi, f in enumerate(files)} if work is not None else {}
    futures = {}
    if client is not None:
        todo = [fi for fi in range(len(files)) if stored.get(fi) is None]
        futures = {fi: client.submit(_piece_task, fi, files[fi], cfg, device, pure=False) for fi in todo}
    with _progress(cfg, "read+minhash") as bar:
        for fi, f in enumerate(files):
            piece = stored.get(fi)
            if piece is None and fi in futures:
                table, part_report, tm = futures.pop(fi).result()
                for k, v in tm.items():
                    timings[k] += v
                if work is not None:
                    work.store(fi, f, table, part_report)
                piece = (table, part_report)
                bar.update(table.num_rows)
            if piece is not None:
                if cache is not None:
                    cache.drop("pass 1 reused work-dir pieces" if stored.get(fi) is not None
                               else "pass 1 ran on dask workers")
                u = unpack_piece(piece[0], cfg.lsh.bands)
                _merge_report(report, piece[1])
                parts = [(u["ids"], u["text_bytes"], u["words"], u["keep_values"], to_device(u["exact"], device),
                          to_device(u["nshingles"], device), to_device(u["keys"], device))]
            else:
                row0 = sum(col.file_rows)
                keep_text = None if cache is None else (lambda r, norm, row0=row0: cache.add(row0 + r, norm))
                parts, part_report, tm = _compute_file(fi, f, cfg, device, params, bar, keep_text)
                for k, v in tm.items():
                    timings[k] += v
                _merge_report(report, part_report)
                if work is not None:
                    work.store(fi, f, _piece_of(parts, cfg), part_report)
            col.file_rows.append(sum(len(p[0]) for p in parts))
            keep_keys = work is None or cfg.memory_budget is None  # else they are read back from the pieces
            for ids, text_bytes, words, values, h, nsh, keys in parts:
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

    return col


@contextlib.contextmanager
def _engine(cfg: RunConfig, engine: str, workers: int | None, scheduler: str | None, device: str = "cpu"):
    """None for the local engine; a dask.distributed Client otherwise (closed afterwards; a cluster
    started here is shut down with it): a LocalCluster of CPU processes, or on a GPU run a dask-cuda
    LocalCUDACluster with one worker per GPU."""
    if engine == "local":
        if workers is not None or scheduler is not None:
            raise ValueError("workers / scheduler need engine='dask'")
        yield None
        return
    if engine != "dask":
        raise ValueError(f"engine must be 'local' or 'dask', got {engine!r}")
    try:
        from distributed import Client, LocalCluster
    except ImportError as exc:
        raise ImportError("engine='dask' needs dask.distributed: pip install 'gpu-dedup[dask]'") from exc
    if scheduler is not None:
        client = Client(scheduler_file=scheduler) if os.path.isfile(scheduler) else Client(scheduler)
        cluster = None
    elif device == "cuda":
        try:
            from dask_cuda import LocalCUDACluster
        except ImportError as exc:
            raise ImportError("engine='dask' with device='cuda' starts a dask-cuda LocalCUDACluster (one worker "
                              "per GPU): pip install dask-cuda, or pass --scheduler of a running cluster") from exc
        cluster = LocalCUDACluster(n_workers=workers, threads_per_worker=1, dashboard_address=None)
        client = Client(cluster)
    else:
        n = workers or os.cpu_count() or 1
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
    logger.info("dask engine: %s", client)
    try:
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _piece_of(parts, cfg: RunConfig):
    from .device import to_host
    from .workdir import piece_table

    if not parts:
        return piece_table(pa.array([], pa.string()), np.zeros(0, np.int64), np.zeros(0, np.int64),
                           np.zeros((0, 2), np.uint64), np.zeros(0, np.int64), np.zeros((0, cfg.lsh.bands), np.uint64),
                           np.zeros(0) if keep_column(cfg.cluster.keep) else None)
    kc = keep_column(cfg.cluster.keep)
    return piece_table(pa.concat_arrays([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
                       np.concatenate([p[2] for p in parts]),
                       np.concatenate([to_host(p[4]) for p in parts]), np.concatenate([to_host(p[5]) for p in parts]),
                       np.concatenate([to_host(p[6]) for p in parts]),
                       np.concatenate([p[3] for p in parts]) if kc else None)


def _merge_report(report, part: dict) -> None:
    """Add one file's read report (a ReadReport.to_dict()) into the run's."""
    report.files += part["files"]
    report.rows += part["rows"]
    report.bytes_text += part["bytes_text"]
    report.skipped.extend(part["skipped"])
    report.invalid_utf8_rows += part["invalid_utf8_rows"]
    report.empty_files.extend(part["empty_files"])


def _decide(cfg, device, files, ids, file_index, text_bytes, exact_h, nshingles, keys, values, timings, index=None,
            cache: _TextCache | None = None):
    """Exact groups, LSH buckets, verification and the policy (on the device when device="cuda"), then
    the decisions table on the host. With an index, its documents are rows 0..I-1 in front of the
    input's, first in keep order and pinned (never removed); the table returned covers the input only."""
    from .cluster import components_policy, keep_rank, representative_policy
    from .device import array_module, to_device, to_host
    from .exact import exact_groups
    from .lsh import group_buckets

    xp = array_module(device)
    n = len(ids)
    n_index = len(index) if index is not None else 0
    total = n_index + n
    rows = np.arange(total, dtype=np.int64)
    t = time.perf_counter()
    rank_h = keep_rank(cfg.cluster.keep, n=n, text_bytes=text_bytes, ids=ids, values=values)
    short_d = nshingles == 0
    if index is not None:
        rank_h = np.concatenate([np.arange(n_index, dtype=np.int64), rank_h + n_index])
        exact_h = xp.concatenate([to_device(index.exact, device), exact_h])
        short_d = xp.concatenate([to_device(index.short, device), short_d])
        keys = keys.with_prefix(index.band_keys)
    rank = to_device(rank_h, device)
    leader_d = exact_groups(exact_h, rank, xp)
    if not cfg.cluster.exact:
        leader_d = xp.where(short_d, leader_d, xp.arange(total, dtype=xp.int64))  # short: exact path only
    leader, short = to_host(leader_d), to_host(short_d)
    collisions = None
    if cfg.cluster.exact_verify:
        if index is not None:
            raise ValueError("exact_verify cannot byte-compare against an index (it stores hashes, not text); "
                             "run without --exact-verify or without --against")
        from .exact import verify_groups

        leader, collisions = verify_groups(files, cfg, leader)
    timings["exact"] = time.perf_counter() - t

    t = time.perf_counter()
    lsh_rows = np.flatnonzero((leader == rows) & ~short) if cfg.cluster.near else np.zeros(0, np.int64)
    lsh_rows_d = to_device(lsh_rows, device)
    from .lsh import partitions_for

    partitions = partitions_for(int(lsh_rows.shape[0]), cfg.memory_budget)
    buckets = group_buckets(keys, lsh_rows_d, partitions)
    has_entries = to_host(xp.diff(buckets.doc_offsets) > 0)
    cand_local = np.flatnonzero(has_entries)
    timings["buckets"] = time.perf_counter() - t
    bucket_size = to_host(buckets.bucket_size)
    largest = int(bucket_size.max()) if buckets.n_buckets else 0
    stage: dict[str, Any] = {
        "exact": {"groups_with_duplicates": int(np.unique(leader[leader != rows]).shape[0]),
                  "removed": int((leader[n_index:] != rows[n_index:]).sum()),
                  "short_documents": int(short[n_index:].sum()),
                  "byte_verified": cfg.cluster.exact_verify, "hash_collisions": collisions},
        "lsh": {"documents": int(lsh_rows.shape[0]), "buckets": buckets.n_buckets,
                "bucket_entries": int(buckets.entry_doc.shape[0]),
                "candidate_documents": int(cand_local.shape[0]),
                "largest_bucket": largest, "key_range_partitions": partitions,
                "band_keys_on_disk": keys.on_disk,
                "buckets_per_band": np.bincount(to_host(buckets.bucket_band), minlength=cfg.lsh.bands).tolist()},
    }
    if index is not None:
        stage["against_index"] = {"path": index.path, "documents": n_index,
                                  "generation": index.manifest["generation"]}
    if largest >= 10_000:
        logger.warning("giant LSH bucket of %d documents (templated text?); work stays linear but check the "
                       "largest clusters", largest)

    sets = None
    from_cache = cache is not None and cache.complete and cache.rows == n
    if cfg.cluster.verify and cand_local.shape[0]:
        t = time.perf_counter()
        sets, reread = _candidate_sets(cfg, device, files, lsh_rows, cand_local, index, cache if from_cache else None)
        timings["shingle_sets"] = time.perf_counter() - t
        stage["verify"] = {"documents": int(cand_local.shape[0]), "shingle_hashes": int(sets.hashes.shape[0]),
                           "text": "kept from pass 1" if from_cache else "re-read from the input",
                           "text_bytes_read": reread}
    if cache is not None:
        stage["text_cache"] = cache.stats(bool(from_cache and sets is not None))

    t = time.perf_counter()
    m = lsh_rows.shape[0]
    lrank = rank[lsh_rows_d]
    if m == 0:
        rep_local, jac_local = np.zeros(0, np.int64), np.zeros(0)
        stage["policy"] = {"removed": 0}
    else:
        if cfg.cluster.policy == "representative":
            res = representative_policy(buckets, sets if sets is not None else _empty_sets(m, xp), lrank,
                                        cfg.cluster.threshold, cfg.cluster.max_representatives_per_bucket, device,
                                        pinned=to_device(lsh_rows < n_index, device))
        else:
            res = components_policy(buckets, lrank, cfg.cluster.threshold, sets, device)
        rep_local, jac_local, stage["policy"] = to_host(res.rep), to_host(res.jaccard), res.stats
    timings["policy"] = time.perf_counter() - t

    t = time.perf_counter()
    if index is not None:
        ids = pa.concat_arrays([index.ids, ids])
        file_index = np.concatenate([np.zeros(n_index, np.int32), file_index])
    decisions, stage["clusters"], keep = _decisions_table(files, ids, file_index, leader, short, lsh_rows, rep_local,
                                                          jac_local, n_index)
    timings["decisions"] = time.perf_counter() - t
    return decisions, stage, keep


def _decisions_table(files, ids, file_index, leader, short, lsh_rows, rep_local, jac_local, n_index=0):
    """Merge exact groups and near-duplicate representatives into one row per document (host arrays).
    Rows before ``n_index`` are indexed documents: they give representatives but get no row."""
    n = len(ids)
    rows = np.arange(n, dtype=np.int64)
    kept_rep = rows.copy()
    jac = np.full(n, np.nan)
    near = np.zeros(n, bool)
    removed_local = np.flatnonzero(rep_local >= 0)
    kept_rep[lsh_rows[removed_local]] = lsh_rows[rep_local[removed_local]]
    jac[lsh_rows[removed_local]] = jac_local[removed_local]
    near[lsh_rows[removed_local]] = True
    dup = leader != rows
    # an exact duplicate has its leader's shingle set, so its representative and Jaccard are the leader's
    kept_rep[dup] = kept_rep[leader[dup]]
    leader_kept = kept_rep[leader] == leader
    jac[dup] = np.where(leader_kept[dup], 1.0, jac[leader[dup]])
    jac[dup & short] = np.nan
    matched = np.where(dup, leader, np.where(near, kept_rep, -1))
    keep = kept_rep == rows
    sizes = np.bincount(kept_rep, minlength=n)
    cluster_size = sizes[kept_rep]
    # reasons as codes into REASONS (no Python string per document), later decoded by Arrow
    reason = np.zeros(n, np.int8)  # "unique"
    reason[keep & (cluster_size > 1)] = REASONS.index("representative")
    reason[dup] = REASONS.index("exact_duplicate")
    reason[dup & short] = REASONS.index("short_exact_duplicate")
    reason[near] = REASONS.index("near_duplicate")
    relpaths = pa.array([f.relpath for f in files] or [""], pa.string())
    cluster_id = np.where(kept_rep < n_index, -1 - kept_rep, kept_rep - n_index)
    new = slice(n_index, n)
    decisions = pa.table({
        "id": ids[new],
        "keep": pa.array(keep[new]),
        "reason": pa.DictionaryArray.from_arrays(pa.array(reason[new]), pa.array(REASONS)).cast(pa.string()),
        "cluster_id": pa.array(cluster_id[new], pa.int64()),
        "representative_id": ids.take(pa.array(kept_rep[new], pa.int64())),
        "matched_id": ids.take(pa.array(matched[new], pa.int64(), mask=matched[new] < 0)),
        "jaccard": pa.array(jac[new], pa.float64(), from_pandas=True),
        "cluster_size": pa.array(cluster_size[new], pa.int64()),
        "source": relpaths.take(pa.array(file_index[new], pa.int32())),
    }, schema=DECISIONS_SCHEMA)
    sizes_new = sizes[np.unique(kept_rep[new])] if n > n_index else np.zeros(0, np.int64)
    clusters = {"with_duplicates": int((sizes_new > 1).sum()), "largest": int(sizes_new.max()) if sizes_new.size else 0}
    return decisions, clusters, keep[new]


def _candidate_sets(cfg, device, files, lsh_rows, cand_local, index, cache=None):
    """Shingle sets of the candidates: indexed documents' from the index, the input's from pass 2 (or from
    pass 1's kept text). lsh_rows is sorted, so the indexed documents (rows < I) come first."""
    if index is None:
        return _shingle_sets_pass(cfg, device, files, lsh_rows, cand_local, cache)  # (sets, text bytes re-read)
    from .device import array_module, to_device
    from .verify import ShingleSets

    xp = array_module(device)
    n_index = len(index)
    n_idx_lsh = int(np.searchsorted(lsh_rows, n_index))
    in_index = cand_local < n_idx_lsh
    idx_sets = index.shingle_sets(lsh_rows[cand_local[in_index]])
    new_sets, reread = _shingle_sets_pass(cfg, device, files, lsh_rows[n_idx_lsh:] - n_index,
                                          cand_local[~in_index] - n_idx_lsh, cache)
    m = lsh_rows.shape[0]
    offsets = xp.zeros(m, xp.int64)
    sizes = xp.zeros(m, xp.int64)
    picked = to_device(cand_local[in_index], device)
    offsets[picked] = to_device(idx_sets.offsets, device)
    sizes[picked] = to_device(idx_sets.sizes, device)
    offsets[n_idx_lsh:] = new_sets.offsets + int(idx_sets.hashes.shape[0])
    sizes[n_idx_lsh:] = new_sets.sizes
    return ShingleSets(xp.concatenate([to_device(idx_sets.hashes, device), new_sets.hashes]), offsets, sizes), reread


def _shingle_sets_pass(cfg, device, files, lsh_rows, cand_local, cache: _TextCache | None = None):
    """Pass 2: hash the candidates' shingle sets, from pass 1's kept normalized text when ``cache`` holds it
    all, else re-reading the input. Returns (sets over all m LSH documents (empty for non-candidates), text
    bytes read again: 0 from the kept text)."""
    from . import io
    from .device import array_module, to_device
    from .normalize import normalize_text
    from .verify import ShingleSets, shingle_sets

    xp = array_module(device)
    m = lsh_rows.shape[0]
    cand_rows = lsh_rows[cand_local]
    parts = []
    reread = io.ReadReport()
    with _progress(cfg, "verify: shingle sets", total=int(cand_rows.shape[0])) as bar:
        if cache is not None:
            for row0, norm in cache.entries:
                lo, hi = np.searchsorted(cand_rows, [row0, row0 + len(norm)])
                if lo < hi:
                    parts.append(shingle_sets(norm, to_device(cand_rows[lo:hi] - row0, device), cfg.shingle, device))
                    bar.update(int(hi - lo))
        else:
            # normalize only the candidates (iter_rows packs their bytes into one contiguous buffer)
            for sel, text in _prefetched(io.iter_rows(files, cand_rows, report=reread, **cfg.reader_options())):
                norm = normalize_text(text, cfg.normalize, device)
                parts.append(shingle_sets(norm, xp.arange(sel.shape[0], dtype=xp.int64), cfg.shingle, device))
                bar.update(int(sel.shape[0]))
    cand_sets = ShingleSets.concat(parts, xp)
    if len(cand_sets) != cand_local.shape[0]:
        raise RuntimeError(f"input changed between passes: expected {cand_local.shape[0]} candidate documents, "
                           f"re-read {len(cand_sets)}")
    offsets = xp.zeros(m, xp.int64)
    sizes = xp.zeros(m, xp.int64)
    cl = to_device(cand_local, device)
    offsets[cl] = cand_sets.offsets
    sizes[cl] = cand_sets.sizes
    return ShingleSets(cand_sets.hashes, offsets, sizes), reread.bytes_text


def _write_index(path, cfg, device, files, ids, exact_h, nshingles, keys, keep_mask, index):
    """Save the kept documents (after the ``against`` index's, when given) as a new index. With
    verification the kept documents' shingle sets are hashed again in one streaming pass."""
    from . import io
    from .device import to_device, to_host
    from .index import IndexWriter, shingles_as_lists
    from .normalize import normalize_text
    from .verify import shingle_sets

    if index is not None and os.path.abspath(path) == os.path.abspath(index.path):
        raise ValueError(f"--save-index {path!r} is the index being read; indexes are versioned: write the "
                         "next generation to a new directory")
    if index is not None and cfg.cluster.verify and not index.manifest["has_shingles"]:
        raise ValueError(f"index {index.path!r} has no shingle sets, so an index with them cannot extend it")
    writer = IndexWriter(path, contract(cfg), has_shingles=cfg.cluster.verify, parent=index)
    writer.copy_parent()
    exact = to_host(exact_h)
    short = to_host(nshingles) == 0
    kept = np.flatnonzero(keep_mask)
    band = keys.rows(to_device(kept, device))  # (kept, bands): row j belongs to kept[j]
    if not cfg.cluster.verify:
        writer.write(ids.take(pa.array(kept)), exact[kept], short[kept], band, None)
    else:
        lo = 0
        for rows, text in _prefetched(io.iter_rows(files, kept, **cfg.reader_options())):
            hi = lo + rows.shape[0]
            norm = normalize_text(text, cfg.normalize)
            lists = shingles_as_lists(shingle_sets(norm, np.arange(rows.shape[0]), cfg.shingle))
            lists = pa.compute.if_else(pa.array(short[rows]), pa.nulls(len(rows), lists.type), lists)
            writer.write(ids.take(pa.array(rows)), exact[rows], short[rows], band[lo:hi], lists)
            lo = hi
    manifest = writer.close()
    logger.info("saved index %s: %d documents (generation %d)", path, manifest["documents"], manifest["generation"])
    return {"path": path, "documents": manifest["documents"], "generation": manifest["generation"]}


def _empty_sets(m: int, xp=np):
    from .verify import ShingleSets

    return ShingleSets(xp.zeros(0, xp.uint64), xp.zeros(m, xp.int64), xp.zeros(m, xp.int64))


def _cat(parts: list, dtype, xp=np):
    return xp.concatenate(parts).astype(dtype, copy=False) if parts else xp.zeros(0, dtype)


def _cat2(parts: list, width: int, dtype, xp=np):
    return xp.concatenate(parts).astype(dtype, copy=False) if parts else xp.zeros((0, width), dtype)


def _counts(decisions: pa.Table, n: int) -> dict[str, Any]:
    vc = pc.value_counts(decisions["reason"]) if n else []
    found = {d["values"]: int(d["counts"]) for d in (vc.to_pylist() if n else [])}
    by = {r: found.get(r, 0) for r in REASONS}
    kept = by["unique"] + by["representative"]
    return {"input": n, "kept": kept, "removed": n - kept, "by_reason": by}


def _versions() -> dict[str, str]:
    import numba

    return {"python": platform.python_version(), "numpy": np.__version__, "numba": numba.__version__,
            "pyarrow": pa.__version__}
