"""The lexical pipeline: ``deduplicate`` composes the stages and writes the outputs.

    read + sign   pass 1, streaming bounded batches: read -> normalize -> exact hash + MinHash -> band keys
                  (lexical/signatures.py; work-dir pieces for resume; the Ray engine: distributed/)
    decide        keep order -> exact groups -> LSH buckets -> verification (pass 2, only the candidates'
                  text, or pass 1's kept text) -> removal policy -> decisions (lexical/decide.py)
    semantic      optionally SemDeDup over the same documents (semantic/)
    sources       what each source lost (runtime/sources.py: run.json ``sources``); over ``max_removal`` of
                  some source the run stops before its kept records and index (decisions, run.json and the
                  report stay, for inspection)
    index         optionally save the kept documents as an index for later runs (index.py)
    write         deduplicated/ (the kept records, copied verbatim), decisions.parquet, run.json, report.html

Only per-document arrays (band keys, hashes, ids) and the candidates' shingle sets are held in memory;
text is never held beyond one batch (except pass 1's normalized text, within cache_bytes).
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import tempfile
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from .. import io
from ..config import RunConfig, keep_column
from ..contract import contract, contract_fingerprint
from ..decisions import decisions_schema, scores_schema, summary_counts, value_counts
from ..errors import ConfigError
from ..runtime.device import batch_bytes, cache_bytes, note_compiling
from ..runtime.outputs import input_roots
from ..runtime.passes import TextCache, known_text_bytes
from ..runtime.program import check_ray_args
from ..runtime.run import RunResult, finish, header, owned, resources, write_tables
from ..runtime.sources import SourceGuard, Tally, check as check_sources, source_labels, thresholds
from ..runtime.workdir import WorkDir, checkpoint
from .decide import Decided, decide
from .signatures import Documents, read_signatures, reader_name

logger = logging.getLogger(__name__)
PREFILTER_SEMANTIC = ("a prefilter and the semantic stage cannot share a run yet: filter first (`gpu-dedup filter`), "
                      "then run --semantic on OUT/filtered")


@dataclass
class DedupResult(RunResult):
    """decisions: one row per input document (schema ``DECISIONS_SCHEMA``), in input order.
    stats: what run.json holds. output_dir: where outputs were written (None for in-memory runs).
    ``summary()``, ``filter(data)``, ``keep_mask``, ``kept``, ``removed``, ``to_pandas()``: ``run.RunResult``'s,
    the surface every program's result shares."""

    TABLE = "decisions"
    decisions: pa.Table
    stats: dict[str, Any]
    output_dir: str | None = None

    def kept_ids(self) -> pa.Array:
        """The ids of the kept documents, in input order."""
        return self.decisions["id"].filter(self.decisions["keep"]).combine_chunks()


def deduplicate(source: Any, config: RunConfig | None = None, output_dir: str | os.PathLike | None = None, *,
                against: str | os.PathLike | None = None, save_index: str | os.PathLike | None = None,
                semantic: Any = None, semantic_order: str = "after", work_dir: str | os.PathLike | None = None,
                resume: bool = False,
                overwrite: bool = True, engine: str = "local", workers: int | None = None,
                scheduler: str | None = None, prefilter: Any = None, address: str | None = None,
                partitions: int | None = None, sources: SourceGuard | None = None, table_layout: str | None = None,
                **overrides: Any) -> DedupResult:
    """Deduplicate ``source`` (path(s)/glob(s)/directory, a pyarrow Table or a pandas DataFrame).

    ``overrides`` are applied to ``config`` with ``RunConfig.replace`` (e.g. ``cluster__threshold=0.9``).
    With ``output_dir``: writes decisions.parquet, run.json and (unless disabled) deduplicated/.
    ``against``: an index saved by an earlier run; its documents come first in keep order and are never
    removed, so new documents that duplicate one are removed in its favour (representative_id is the
    indexed id, cluster_id is -1 - its index position). ``save_index``: write this run's kept documents
    (plus the ``against`` index's, when given) as a new index. ``semantic``: a ``SemanticConfig`` to run
    SemDeDup over the documents the lexical stages kept (``semantic_order="after"``): one that is semantically
    redundant becomes ``semantic_duplicate``, represented by a kept document, and the lexical duplicates it
    represented move to that document (``decisions.fold_removals``: no group loses every copy); columns
    cosine, semantic_nearest_id, semantic_cluster are added. ``semantic_order="beside"``: SemDeDup over every
    document, recorded in those columns only (the lexical decisions stand; what ``compare`` reads).
    ``work_dir`` (default OUT/work when ``resume``): store pass 1's results per input file, checksummed;
    with ``resume`` valid pieces are reused, so a killed run finishes with the same decisions.
    ``engine="dask"`` / ``scheduler``: replaced by ``engine="ray"`` (an error says how to move over).
    ``engine="ray"``: the whole lexical pipeline as Ray tasks over a shared work dir (gpu_dedup/distributed/),
    with no per-document state here: a local cluster of ``workers`` CPUs, or the running one at ``address``
    ("auto" or HOST:PORT); ``partitions``: key ranges of the shuffle (default: the cluster's CPUs, at most 64).
    The work dir (default OUT/work) must be visible to every node. Same decisions as the local engine.
    ``table_layout``: "file" (OUT/decisions.parquet, the local engine's) or "dataset" (OUT/decisions/: one Parquet
    file per input file, written by the Ray tasks, read as one table by ``pyarrow.parquet.read_table``; the Ray
    engine's default: no row passes through this process).
    ``prefilter``: a ``filters.FilterConfig`` applied in pass 1, before dedup (filters/prefilter.py): the
    documents it rejects are removed as ``filtered`` and never remove a kept one; every score and the
    detailed reason go to OUT/scores.parquet. One read of the input; no semantic; the local engine
    without a work dir, or the Ray engine (each sign task scores its file; with a stochastic retention a count
    task per file first, so that the draws go by the run's row).
    ``sources``: a ``SourceGuard``: each document's source (its input file, or ``source_field``'s value, read
    once more) and ``max_removal``; run.json's ``sources`` has every source's removals, similarity histogram and
    boundary pairs, and a run that removes more than ``max_removal`` of some source's documents raises
    ``SourceRemovalError`` after writing decisions.parquet, run.json and the report, before deduplicated/ and
    the index (runtime/sources.py).

    What the run owns (gpu_dedup/runtime/outputs.py): ``output_dir``, ``work_dir`` and ``save_index`` must lie outside
    the inputs; they are locked for the run (a concurrent run into one of them fails at once, naming this
    one). ``overwrite`` (default True): replace an earlier run in ``output_dir``, every file it wrote and
    nothing else (False: raise FileExistsError when it holds a finished run, like the CLI without
    --overwrite). A run that raises removes the outputs it wrote (the work dir's pieces stay).
    """
    t_start = time.perf_counter()  # run.json's total: from here (device and thread set-up included)
    cfg = (config or RunConfig()).replace(**overrides) if overrides else (config or RunConfig())
    device, threads = resources(cfg.device, cfg.threads)
    cfg = cfg.replace(batch_bytes=batch_bytes(cfg.batch_bytes, device))
    index = None
    if against is not None and engine == "ray":  # its path and manifest only: the Ray tasks read its rows
        from ..distributed import IndexSource
        from .index import index_manifest

        index = IndexSource(os.fspath(against), index_manifest(os.fspath(against), contract(cfg),
                                                               cfg.cluster.scope_field))
    elif against is not None:
        from .index import load_index

        index = load_index(os.fspath(against), contract(cfg), cfg.cluster.scope_field)
    files = io.source_files(source)
    out = os.fspath(output_dir) if output_dir is not None else None
    semantic, table_layout = check_arguments(cfg, engine=engine, scheduler=scheduler, workers=workers,
                                             address=address, partitions=partitions, semantic=semantic,
                                             semantic_order=semantic_order, prefilter=prefilter,
                                             table_layout=table_layout)
    if engine == "ray":
        if work_dir is None and out is None:
            raise ConfigError("engine='ray' needs a shared work directory: pass work_dir or output_dir")
        work_dir = work_dir if work_dir is not None else os.path.join(out, "work")
    check_work_dir(work_dir, engine, out)
    wd = _work_path(work_dir, out, resume)
    owned_wd = None if wd is not None and io.is_url(wd) else wd  # a URL is not locked: the Ray probe checks it
    if save_index is not None:
        from .index import check_index_target

        check_index_target(os.fspath(save_index), os.fspath(against) if against is not None else None)
    roots = input_roots(source) + (input_roots(os.fspath(against)) if against is not None else [])
    with owned(out, work_dir=owned_wd, index_dir=save_index, command="deduplicate", overwrite=overwrite, resume=resume,
               roots=roots):
        if engine == "ray":
            result = _run_ray(cfg, device, threads=threads, t_start=t_start, files=files, out=out, work=wd,
                              workers=workers, address=address, partitions=partitions, resume=resume,
                              index=index, save_index=os.fspath(save_index) if save_index is not None else None,
                              prefilter=prefilter, guard=sources or SourceGuard(), dataset=table_layout == "dataset",
                              semantic=(semantic, semantic_order))
            logger.info("%s in %.2f s", result.summary(), result.stats["timings_s"]["total"])
            check_sources(result.stats["sources"])
            return result
        # a scoped run's pieces hold its scope values: reused only by a run of the same scope field
        scope = "" if cfg.cluster.scope_field is None else f"+scope:{cfg.cluster.scope_field}"
        work = WorkDir(wd, contract_fingerprint(contract(cfg)) + scope, resume) if wd is not None else None
        result = _run(source, cfg, device, threads=threads, t_start=t_start, files=files, index=index, out=out,
                      work=work, semantic=(semantic, semantic_order), save_index=save_index,
                      engine_args=(engine, workers),
                      prefilter=prefilter, guard=sources or SourceGuard())
        logger.info("%s in %.2f s", result.summary(), result.stats["timings_s"]["total"])
        check_sources(result.stats["sources"])  # inside the owned block: its outputs stay, as "stopped"
    return result


def check_arguments(cfg: RunConfig, *, engine: str = "local", scheduler: str | None = None, workers: Any = None,
                    address: str | None = None, partitions: Any = None, semantic: Any = None,
                    semantic_order: str = "after", prefilter: Any = None,
                    table_layout: str | None = None) -> tuple[Any, str | None]:
    """``deduplicate``'s checks of the arguments that need no input: the engine and its cluster, the semantic
    stage and what it cannot share a run with, the filter settings pass 1 cannot run, the table layout. Run
    before anything is owned, read or started (``pipeline.compose.run_dedup`` runs them before its first step,
    so that no refusal comes after a Ray cluster started or a step ran).

    Returns:
        (the SemanticConfig or None: ``semantic=True`` is its defaults, the table layout: the engine's default
        when None and engine="ray").

    Raises:
        ConfigError: naming the argument (on the CLI, its flag) and the fix.
    """
    if engine == "dask" or scheduler is not None:
        raise ConfigError("the dask engine was replaced by Ray: pass engine='ray' (CLI --engine ray) with "
                          "workers=N for a local cluster or address='auto' / 'HOST:PORT' to join one started by "
                          "`ray start --head` (pip install 'gpu-dedup[ray]')")
    if engine not in ("local", "ray"):
        raise ConfigError(f"engine must be 'local' or 'ray', got {engine!r}")
    check_ray_args(engine, workers=workers, address=address, partitions=partitions)
    if cfg.cluster.scope_field is not None and semantic is not None:
        raise ConfigError("--scope-field cannot be combined with --semantic yet (the semantic stage is global): "
                          "run it without one of them")
    if semantic is True:  # semantic=True: SemDeDup with its defaults
        from ..semantic.config import SemanticConfig

        semantic = SemanticConfig()
    elif semantic is not None and type(semantic).__name__ != "SemanticConfig":
        raise ConfigError(f"semantic must be a SemanticConfig (gpu_dedup.SemanticConfig), True or None, got "
                          f"{semantic!r}")
    if not cfg.cluster.exact and not cfg.cluster.near and semantic is None:
        # no document-level stage would run: only documents too short for shingles are compared; every other
        # document would be kept, whatever its copies
        raise ConfigError("ClusterConfig.exact=False with ClusterConfig.near=False leaves no duplicate stage to "
                          "run: every document long enough for shingles would be kept, whatever its copies; drop "
                          "one of them")
    if semantic_order not in ("after", "beside"):
        raise ConfigError(f"semantic_order must be 'after' or 'beside', got {semantic_order!r}")
    if prefilter is not None and semantic is not None:
        raise ConfigError(PREFILTER_SEMANTIC)
    if prefilter is not None:  # the filter settings no pass 1 runs (they need the whole corpus first)
        from ..filters.prefilter import check_in_pass1

        check_in_pass1(prefilter)
    if engine == "ray" or table_layout is not None:
        from ..distributed import layout_of

        table_layout = layout_of(table_layout, engine)
    if engine == "ray":
        from ..distributed import check_engine_args

        check_engine_args(workers, address, partitions)
    return semantic, table_layout


_precompiling = False


@contextlib.contextmanager
def no_precompile():
    """Runs inside this block compile as they go (the warm-up's runs, and the precompile run itself)."""
    global _precompiling
    was, _precompiling = _precompiling, True
    try:
        yield
    finally:
        _precompiling = was


def _precompile(device: str) -> float:
    """A real run's first step on the CPU: when the dedup kernels are not all cached, compile them now by a tiny
    run of the bundled sample (its log lines dropped), so that compilation is a run.json entry of its own
    (``timings_s.compile``) and stays out of the stage timings and docs/s. Returns the seconds spent (0.0 when
    everything was cached, on a GPU, or inside a warm-up run)."""
    from ..runtime.compiling import COMMANDS, uncached, write_sample

    if device != "cpu" or _precompiling or not uncached(COMMANDS["run"]):
        return 0.0
    pkg = logging.getLogger(__name__.partition('.')[0])  # the package's loggers, gpu_dedup.*
    level = pkg.level
    t = time.perf_counter()
    pkg.setLevel(logging.ERROR)
    try:
        with no_precompile(), tempfile.TemporaryDirectory(prefix="gpu-dedup-compile-") as d:
            src = write_sample(os.path.join(d, "sample.jsonl"))
            deduplicate(src, RunConfig.preset("default", device=device), os.path.join(d, "run"))
    finally:
        pkg.setLevel(level)
    return time.perf_counter() - t


def _run(source: Any, cfg: RunConfig, device: str, *, threads: int, t_start: float, files, index, out: str | None,
         work: WorkDir | None, semantic: tuple[Any, str], save_index, engine_args: tuple,
         prefilter: Any = None, guard: SourceGuard = SourceGuard()) -> DedupResult:
    """``deduplicate`` once its directories are owned: pass 1, decide, semantic, index, write."""
    engine, workers = engine_args
    timings: dict[str, float] = {}
    report = io.ReadReport()
    cache = _text_cache(cfg, device, files)
    note_compiling(device)  # before pass 1's progress bar
    compile_s = _precompile(device)  # its own entry, out of the stage timings and docs/s
    if compile_s:
        timings["compile"] = compile_s
    if (cfg.scores or prefilter is not None) and cfg.reader == "cudf":
        logger.warning("reader='cudf' is not used: --score and the filter flags score each batch's text on the "
                       "host, so pass 1 reads Parquet text with pyarrow")
    # pass 1's score steps (filters/prefilter.py): the filter flags' (prefilter, which decides) and --score's
    semantic, semantic_order = semantic
    steps = _score_steps(cfg, device, prefilter)
    pre = next((s for s in steps if s.decides), None)
    # set-up: the device and threads, input discovery, locks, the kernel modules' import (compilation aside)
    timings["setup"] = time.perf_counter() - t_start - timings.get("compile", 0.0)
    docs = read_signatures(files, cfg, device, report, timings, work, cache, steps=steps)
    scores = pre.table(len(docs)) if pre is not None else None
    decided = decide(cfg, device, files, docs, timings, index, cache)
    cache.drop("released after verification")  # free the text (device memory on a GPU) before writing
    if semantic is not None:
        decided = _add_semantic(decided, source, semantic, semantic_order, out, device, cfg, timings)
    t = time.perf_counter()
    tally = _sources(decided.decisions, files, cfg, guard, docs, semantic)
    timings["sources"] = time.perf_counter() - t
    stopped = bool(tally["over_limit"])
    if save_index is not None and not stopped:
        from .index import write_index

        t = time.perf_counter()
        decided.stats["index"] = write_index(os.fspath(save_index), cfg, device, files, docs, decided.keep, index)
        timings["save_index"] = time.perf_counter() - t

    stats = _run_stats(cfg, device, threads, files, report, docs, decided, timings)
    stats["sources"] = tally
    stats["engine"] = {"name": engine, "workers": workers}
    stats["parquet_text_reader"] = reader_name(cfg, device, prefilter=pre is not None)
    if pre is not None:
        # by reason name, in name order (the table's reason column: the filter's vocabulary, as strings)
        stats["prefilter"] = {**pre.describe(), "config": dataclasses.asdict(prefilter),
                              "by_reason": dict(sorted(value_counts(scores["reason"]).items()))}
        if out is not None:
            write_tables([scores], scores_schema(scores.column_names), os.path.join(out, "scores.parquet"))
    if work is not None:
        stats["work_dir"] = {"path": work.path, "pieces_reused": work.reused, "pieces_computed": work.recomputed}
    texts = None
    if out is not None:
        texts = _write_outputs(out, cfg, files, docs, decided, stats, timings, kept=not stopped)
    timings["total"] = time.perf_counter() - t_start
    busy = timings["total"] - timings.get("compile", 0.0)
    stats["throughput_docs_per_s"] = len(docs) / busy if busy > 0 else None
    if out is not None:
        _finish(out, stats, files, texts)
    return DedupResult(decided.decisions, stats, out)


class _FileDecisions(DedupResult):
    """A Ray run's result: the decisions are read from the written parquet file only when asked for, so
    the driver holds no per-document state unless the caller wants the table."""

    def __init__(self, path: str, stats: dict[str, Any], output_dir: str | None):
        self._path, self.stats, self.output_dir = path, stats, output_dir
        self._table = None

    @property
    def decisions(self) -> pa.Table:  # type: ignore[override]
        if self._table is None:
            import pyarrow.parquet as pq

            self._table = pq.read_table(self._path)
        return self._table

    @property
    def keep_mask(self) -> np.ndarray:  # type: ignore[override]
        """bool (n,): the keep column alone (the table is not read: a pipeline's span steps ask for it), a
        dataset's parts one at a time in input order (a dataset scan of them cost the driver 44-56 MiB)."""
        if self._table is not None:
            return super().keep_mask
        import pyarrow.parquet as pq

        from ..decisions import flags_of

        parts = sorted(os.path.join(self._path, n) for n in os.listdir(self._path) if n.endswith(".parquet")) \
            if os.path.isdir(self._path) else [self._path]
        return np.concatenate([np.zeros(0, bool)] + [flags_of(pq.ParquetFile(p).read(columns=["keep"])["keep"])
                                                     for p in parts])


def _run_ray(cfg: RunConfig, device: str, *, threads: int, t_start: float, files, out: str | None, work: str,
             workers, address, partitions, resume: bool, index=None, save_index: str | None = None,
             prefilter: Any = None, guard: SourceGuard = SourceGuard(), dataset: bool = True,
             semantic: tuple[Any, str] = (None, "after")) -> DedupResult:
    """``deduplicate`` on the Ray engine (gpu_dedup/distributed/): tasks compute and write everything (with
    ``dataset`` and an OUT, OUT/decisions/ too: nothing streams through this process; a semantic stage's
    removals are folded in by the driver: distributed/driver.py, SEMANTIC)."""
    from .. import distributed

    timings: dict[str, float] = {}
    fp = contract_fingerprint(contract(cfg))
    got = distributed.run(files, cfg, device, work=work, out=out, workers=workers, address=address,
                          partitions=partitions, resume=resume, timings=timings, fingerprint=fp, index=index,
                          save_index=save_index, prefilter=prefilter, guard=guard, dataset=dataset,
                          semantic=semantic[0], semantic_order=semantic[1], precompile=_precompile)
    checkpoint("decisions")
    first = 1 if index is not None else 0  # an --against index is the Ray run's file 0 (no decisions)
    if dataset and out is not None:  # the tasks wrote OUT/decisions/, one part per input file
        path, tables = os.path.join(out, "decisions"), {"layout": "dataset", "parts": len(files)}
    else:
        path, tables = os.path.join(out if out is not None else work, "decisions.parquet"), {"layout": "file"}
        distributed.write_decisions(work, len(files) + first, path, first, semantic=semantic[0] is not None)
    bytes_read = {"pass1_text": got["read"]["bytes_text"],
                  "verification_text": got["stages"]["verify"]["text_bytes_read"],
                  "deduplicated_input_files": sum(io.file_size(f) for f in files if f.fmt != "table")
                  if out is not None and cfg.write_deduplicated else 0}
    stats = header("deduplicate", device=device, threads=threads, config=cfg.to_dict(), files=files,
                   read=got["read"], bytes_read=bytes_read, counts=got["counts"], timings=timings)
    stats.update({"parquet_text_reader": reader_name(cfg, device, prefilter=prefilter is not None),
                  "contract": contract(cfg), "contract_fingerprint": fp, "input_paths": [f.path for f in files if f.fmt != "table"],
                  "stages": got["stages"], "engine": got["engine"],
                  "work_dir": {"path": work, "pieces_reused": got["engine"]["sign_tasks_reused"],
                               "pieces_computed": len(files) - got["engine"]["sign_tasks_reused"]}})
    if out is not None and cfg.write_deduplicated and not got["sources"]["over_limit"]:
        stats["deduplicated"] = got["deduplicated"]
    stats["sources"] = got["sources"]
    if "prefilter" in got:
        stats["prefilter"] = got["prefilter"]
    if "report" in got:  # report.html's aggregates, from the tasks (the report reads no decisions table)
        stats["report"] = got["report"]
    stats["decisions"] = {"path": os.path.basename(path), **tables}
    timings["total"] = time.perf_counter() - t_start
    n = got["counts"]["input"]
    busy = timings["total"] - timings.get("compile", 0.0)  # (the nodes' first compile: as the local engine's)
    stats["throughput_docs_per_s"] = n / busy if busy > 0 else None
    if out is not None:
        _finish(out, stats, files)
    return _FileDecisions(path, stats, out)


def _score_steps(cfg: RunConfig, device: str, prefilter: Any) -> tuple:
    """Pass 1's score steps: the prefilter's (``prefilter``, a FilterConfig: scores, decides and writes
    scores.parquet) and ``cfg.scores``' (--score: a keep column only). A keep=max:/min: column comes from
    the prefilter when it computes it, else from --score, else from the input."""
    from ..config import score_columns

    kc = keep_column(cfg.cluster.keep)
    steps = []
    if prefilter is not None:
        from ..filters.prefilter import ScoreStep

        steps.append(ScoreStep(prefilter, device, keep_column=kc))
    if kc in score_columns(cfg.scores) and not any(s.keep_column == kc for s in steps):
        from ..filters.prefilter import ScoreStep

        steps.append(ScoreStep.for_scores(cfg.scores, device, kc))
    return tuple(steps)


def check_work_dir(work_dir, engine: str, output_dir) -> None:
    """A URL work dir only on the Ray engine, with a local ``output_dir``, and of a file system fsspec can
    open here (checked before any directory is made: a URL is never a local path)."""
    if work_dir is None or not io.is_url(os.fspath(work_dir)):
        return
    url = os.fspath(work_dir)
    if engine != "ray":
        raise ConfigError(f"work_dir {url!r} is a URL: the local engine keeps its work dir on a local path; pass "
                          "one, or run on the Ray engine (--engine ray), whose workers reach a URL work dir")
    if output_dir is None:
        raise ConfigError(f"work_dir {url!r} is a URL: pass output_dir (-o) too, a local directory for "
                          "decisions.parquet and run.json")
    from ..errors import GpuDedupError
    from ..io.remote import url_filesystem

    try:
        url_filesystem(url)
    except GpuDedupError as exc:
        raise type(exc)(f"work_dir {url!r}: {exc}") from None


def _work_path(work_dir, output_dir: str | None, resume: bool) -> str | None:
    """The work directory of pass 1's pieces: ``work_dir``, else OUT/work with ``resume``, else none."""
    if work_dir is None and not resume:
        return None
    if work_dir is None and output_dir is None:
        raise ConfigError("resume needs a work directory: pass work_dir or output_dir")
    return os.fspath(work_dir) if work_dir is not None else os.path.join(output_dir, "work")


def _text_cache(cfg: RunConfig, device: str, files) -> TextCache:
    """Where pass 1 keeps its normalized text for verification, within cache_bytes (device.cache_bytes)."""
    cache = TextCache(cache_bytes(cfg.cache_bytes, device) if cfg.cluster.verify else 0)
    if not cfg.cluster.verify:
        cache.reason = "no verification"
    elif cache.complete and known_text_bytes(files, cfg.text_field) > cache.budget:
        # known before reading (Parquet metadata, in-memory tables): it will hold a prefix of the run only
        cache.reason = f"the input's text exceeds cache_bytes={cache.budget:,} (from the Parquet metadata)"
    return cache


def _add_semantic(decided: Decided, source: Any, semantic: Any, semantic_order: str, output_dir, device: str,
                  cfg: RunConfig, timings: dict[str, float]) -> Decided:
    """SemDeDup over the documents the lexical stages kept ("after"; or over every document, "beside"): a kept
    document that is semantically redundant becomes ``semantic_duplicate`` (``semantic.merge_decisions``)."""
    from ..semantic import merge_decisions, semantic_dedup

    t = time.perf_counter()
    if output_dir is not None:
        os.makedirs(os.fspath(output_dir), exist_ok=True)
    # the composition rule (decisions.fold_removals): after the lexical stages it sees the documents they kept
    rows = None if semantic_order == "beside" else decided.keep
    sem = semantic_dedup(source, semantic, output_dir, device=device, run=cfg, rows=rows)
    decisions = merge_decisions(decided.decisions, sem.decisions, semantic_order)
    keep = np.asarray(decisions["keep"].to_numpy(zero_copy_only=False), bool)
    decided.stats["semantic"] = {"order": semantic_order,
                                 **{k: sem.stats[k] for k in ("counts", "eps", "clusters", "pairwise_backend",
                                                              "long_text") if k in sem.stats}}
    timings["semantic"] = time.perf_counter() - t
    return Decided(decisions, decided.stats, keep)


def _run_stats(cfg: RunConfig, device: str, threads: int, files, report, docs: Documents,
               decided: Decided, timings: dict[str, float]) -> dict[str, Any]:
    """run.json, but for the engine and work-dir entries and what writing the outputs adds."""
    keep = decided.keep
    counts = summary_counts(decided.decisions, len(docs))
    counts["text_bytes"] = {"input": int(docs.text_bytes.sum()), "kept": int(docs.text_bytes[keep].sum())}
    counts["words"] = {"input": int(docs.words.sum()), "kept": int(docs.words[keep].sum()),
                       "note": "words of the normalized text (space-separated runs)"}
    # what each pass read: pass 1's text, verification's second read (0 when pass 1's text was kept),
    # and the input files read whole again to copy the kept records (0 when not written)
    bytes_read = {"pass1_text": report.bytes_text,
                  "verification_text": decided.stats.get("verify", {}).get("text_bytes_read", 0),
                  "deduplicated_input_files": 0}
    stats = header("deduplicate", device=device, threads=threads, config=cfg.to_dict(), files=files, read=report,
                   bytes_read=bytes_read, counts=counts, timings=timings)
    stats.update({"parquet_text_reader": reader_name(cfg, device), "contract": contract(cfg),
                  "contract_fingerprint": contract_fingerprint(contract(cfg)),
                  "input_paths": [f.path for f in files if f.fmt != "table"], "stages": decided.stats})
    return stats


def _write_outputs(out: str, cfg: RunConfig, files, docs: Documents, decided: Decided, stats: dict[str, Any],
                   timings: dict[str, float], kept: bool = True) -> dict[int, str] | None:
    """deduplicated/ (unless disabled, or ``kept`` False: the source guard stopped the run), then
    decisions.parquet. Returns the texts of the rows the report shows, picked up while deduplicated/ was written
    (None when it was not)."""
    os.makedirs(out, exist_ok=True)
    t = time.perf_counter()
    texts = None
    if cfg.write_deduplicated and kept:
        # files in parallel on the reader's threads (pass 1's default: pyarrow's CPU count), each
        # placed in the keep mask by the rows pass 1 read from it
        annotate = None
        if cfg.annotate:
            annotate = {"dup_cluster_size": decided.decisions["cluster_size"].to_numpy(),
                        "dup_cluster_id": decided.decisions["cluster_id"].to_numpy()}
        from ..report import shown_rows

        stats["deduplicated"] = io.write_kept(files, decided.keep, os.path.join(out, "deduplicated"),
                                              id_field=cfg.id_field, text_field=cfg.text_field,
                                              on_error=cfg.on_error, file_rows=docs.file_rows, annotate=annotate,
                                              texts_of=shown_rows(decided.decisions, stats))
        texts = stats["deduplicated"].pop("texts")  # the report's excerpts: not a second read of the inputs
        # the kept records are copied verbatim: every input file is read once more, whole
        stats["bytes_read"]["deduplicated_input_files"] = sum(io.file_size(f) for f in files
                                                              if f.fmt != "table")
    timings["write_deduplicated"] = time.perf_counter() - t
    checkpoint("decisions")
    t = time.perf_counter()
    schema = decisions_schema(semantic="cosine" in decided.decisions.column_names)
    write_tables([decided.decisions], schema, os.path.join(out, "decisions.parquet"))  # the Ray engine's bytes
    timings["write_decisions"] = time.perf_counter() - t
    return texts


def _sources(decisions: pa.Table, files, cfg: RunConfig, guard: SourceGuard, docs: Documents,
             semantic: Any) -> dict[str, Any]:
    """run.json's ``sources`` (runtime/sources.py) of the decisions: a scope field's values when the source field
    is the scope field (pass 1 read them), else the input file or the field read once more."""
    if guard.source_field is not None and guard.source_field == cfg.cluster.scope_field:
        labels = pa.array(docs.scope_values, pa.string()).take(pa.array(docs.scope_codes))
    else:
        labels = source_labels(files, guard.source_field, cfg, decisions["source"].combine_chunks())
    tally = Tally(thresholds(cfg, semantic))
    d = decisions
    tally.add(labels, np.asarray(d["keep"].to_numpy(zero_copy_only=False), bool), step="dedup", reason=d["reason"],
              jaccard=d["jaccard"], cosine=d["cosine"] if "cosine" in d.column_names else None, ids=d["id"],
              matched=d["matched_id"])
    return tally.stats(guard)


def _finish(out: str, stats: dict[str, Any], files, texts: dict[int, str] | None = None) -> None:
    """run.json, then report.html (drawn from it and the shown rows' ``texts``; a failure never fails the run),
    then run.json again."""
    def report() -> str:
        from ..report import write_report

        return write_report(out, source=files, texts=texts)

    finish(out, stats, report=report)
