"""The Ray engine's driver: the run's plan, a declared table of stages (``PLAN``) it walks in order, and
what it adds to run.json. It holds no per-document state: file lists, partition counts, per-file row counts
and the tasks' small results.

    Stage      one step of the plan: its task function (stages.py, graph.py, options.py, outputs.py, summary.py),
               what one task covers (``per``: a file, an input file, a key range, a component range, one task),
               whether it runs on a GPU actor with --device cuda, when it runs, the driver's own work before and
               after it
    PLAN       count (a prefilter's stochastic retention: each file's first run row), sign, exact,
               exact_texts, exact_check, bands, buckets, star (rounds until the components are stars) or
               components (one task, when the candidate edges are few), labels, members, policy, resolve, ranks,
               sizes, write (then the sources' tallies merged: run.json ``sources``), semantic (--semantic: its
               tasks), semfold (its removals folded into the decisions by tasks: semfold.py) and recount (the final
               decisions' counts and tallies), kept (with a source limit or --semantic: the kept records once
               every source is within the limit), index_rows (not when a source is over the limit), publish
               (OUT/decisions/ as the tasks' parts: outputs.py), shown (report.html's largest clusters: summary.py)
    run        the cluster, the probe (and the dedup kernels Numba has not cached, compiled once per node), the
               plan, then run.json's counts and stage statistics
    key_ranges the key ranges of the shuffle (shuffle.py): --partitions, or the cluster's CPUs (at most 64);
               capped by the input's size
"""
from __future__ import annotations

import dataclasses
import logging
import os
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Callable, Literal

import numpy as np
import pyarrow as pa

from ..decisions import REASON_CODES, REASONS
from ..errors import ConfigError, RunError
from ..io.batch import ReadReport
from ..runtime.cost import current as current_meter
from . import graph, options, outputs, semfold, stages, summary
from .cluster import check_cluster_args, gpu_actors, probe, ray_cluster, ray_get
from .outputs import write_scores
from .shuffle import Layout, WorkFiles, check_partitions, key_ranges, run_key

logger = logging.getLogger(__name__)

Per = Literal["file", "input", "range", "component", "share", "one"]


@dataclass(frozen=True)
class Stage:
    """One step of the plan (module doc). ``fn(job, key, *args) -> dict``: the task (its markers and
    work-dir files are named ``fn.stage``); ``per``: its keys (every file of the run, the input files
    only (not an --against index), the key ranges, the component ranges, or "one": a single task);
    ``device``: with --device cuda it runs on a DeviceWorker actor (one per GPU); ``when(driver)``: whether it
    runs; ``args(driver)``: the tasks' extra arguments; ``before(driver)`` / ``then(driver, results)``: the
    driver's work around it; ``drive``: how the driver runs it when once is not enough (the star rounds)."""

    fn: Callable[..., dict[str, Any]]
    per: Per
    device: bool = False
    when: Callable[[Driver], bool] | None = None
    args: Callable[[Driver], tuple] | None = None
    before: Callable[[Driver], None] | None = None
    then: Callable[[Driver, list[dict]], None] | None = None
    drive: Callable[[Driver, Stage], list[dict]] | None = None

    @property
    def name(self) -> str:
        return self.fn.stage


@dataclass
class Driver:
    """One run's driver state: the tasks' results by stage and what the hooks read and set."""

    ray: Any
    job: stages.Job
    inputs: list
    out: str | None
    save_index: str | None
    index: Any
    fingerprint: str
    settings: dict
    timings: dict[str, float]
    actors: list = field(default_factory=list)
    results: dict[Stage, list[dict]] = field(default_factory=dict)
    remote: dict[Stage, Any] = field(default_factory=dict)
    step: int = 0  # the last star step, and the edge files it wrote from (labels reads them)
    sources: list[str] = field(default_factory=list)
    guard: Any = None          # sources.SourceGuard
    thresholds: dict = field(default_factory=dict)  # the boundary of the sources' tally
    source_stats: dict = field(default_factory=dict)  # run.json's ``sources`` (after write)
    progress: bool = False  # the driver's bars (the workers draw none)
    dataset: bool = False  # OUT/decisions/ as per-file parts written by the tasks (outputs.py), not one file
    peak_rss: int = 0  # the largest peak RSS any task reported (run.json engine.worker_peak_rss_bytes)
    semantic: Any = None  # run --semantic's SemanticConfig: its stage after the write stage (SEMANTIC)
    semantic_order: str = "after"
    sem_part: tuple = ()  # the semantic stage's work dir and how many documents it saw (semfold's tasks read it)
    fold_shares: int = 0  # the fold tasks of the semantic removals (semfold.fold_shares)
    nodes: int = 1
    resume: bool = False

    @property
    def deferred(self) -> bool:
        """The write stage writes no kept records (the kept stage does, later): a source limit holds them back until
        every source is found within it, a semantic stage removes more documents first."""
        return self.limited or self.semantic is not None

    @property
    def lexical(self) -> str:
        """The work dir's table of the write stage's decisions parts: "lexical" when SEMANTIC folds its removals
        into them (its "decisions" parts, which the later stages read), else "decisions"."""
        return "decisions" if self.semantic is None else "lexical"

    @property
    def written(self) -> list[dict]:
        """The per-file results of the final decisions (the recount stage's after a semantic stage, else the
        write stage's): counts, sources and report.html's aggregates."""
        return self.results.get(RECOUNT) or self.results[WRITE]

    @property
    def limited(self) -> bool:
        """A source limit holds the kept records back until every source is found within it."""
        return self.guard is not None and self.guard.max_removal is not None

    @property
    def stopped(self) -> bool:
        return bool(self.source_stats.get("over_limit"))

    def keys(self, stage: Stage) -> range:
        job = self.job
        return {"file": range(job.nfiles), "input": range(job.first, job.nfiles), "one": range(1),
                "share": range(self.fold_shares)}.get(stage.per, range(job.partitions))

    def stage(self, stage: Stage, *args) -> list[dict]:
        """One task per key of ``stage`` (round robin over the GPU actors for a device stage of a GPU run);
        their results in key order. A task's own error is raised as the local engine raises it
        (cluster.ray_get); one whose worker died or ran out of memory, naming the stage, file and knobs."""
        t = time.perf_counter()
        keys = list(self.keys(stage))
        bar, done = self._bar(stage, keys)
        with bar:
            res = self._run(stage, keys, args, lambda i, r: done(keys[i], r))
        self.timings[f"ray_{stage.name}"] = self.timings.get(f"ray_{stage.name}", 0.0) + time.perf_counter() - t
        self.peak_rss = max([self.peak_rss, *(int(r.get("peak_rss_bytes", 0) or 0) for r in res)])
        meter = current_meter()
        if meter is not None:  # the tasks' own accounting (run.json's cost)
            meter.add_tasks(res, on_gpu=bool(self.actors and stage.device))
        return res

    def _bar(self, stage: Stage, keys: list):
        """(the stage's progress bar on the driver: documents/s and an ETA, the workers draw none; what a
        finished task adds to it): documents of the files of a per-file stage (the sign tasks' counts, their
        total estimated before them: ``passes.Expected``), tasks of a per-range stage."""
        from ..runtime.passes import progress

        on = SimpleNamespace(progress=self.progress)
        name = f"ray {stage.name}"
        offs, first = self.job.offsets, self.job.first
        if stage.per not in ("file", "input"):
            bar = progress(on, name, len(keys), unit="task")
            return bar, lambda k, r: bar.update(1)
        if offs is not None:
            bar = progress(on, name, int(offs[keys[-1] + 1] - offs[keys[0]]) if keys else 0)
            return bar, lambda k, r: bar.update(int(offs[k + 1] - offs[k]))
        # sign: each task's count comes with its result, and refines the estimate of the others'
        bar = progress(on, name, files=self.inputs)
        return bar, lambda k, r: bar.update(int(r.get("rows", 0)), k - first) if k >= first else None

    def _run(self, stage: Stage, keys: list, args: tuple, done) -> list[dict]:
        if self.actors and stage.device:
            refs = [self.actors[i % len(self.actors)].run.remote(stage.fn, self.job, k, *args)
                    for i, k in enumerate(keys)]
        else:
            refs = [self.remote[stage].remote(self.job, k, *args) for k in keys]
        return ray_get(self.ray, refs, lambda i, exc: _task_failure(stage, keys[i], self.job.files, exc), done)


# ---------------------------------------------------------------------------------------------- the plan

def drawn(prefilter) -> bool:
    """A prefilter with a classifier's stochastic retention: its draws go by the document's run row."""
    return prefilter is not None and any(c.retention is not None for c in prefilter.classifiers)


def _counted(d: Driver, counted: list[dict]) -> None:
    """Each file's first run row, for the sign tasks (an --against index's file: none, 0); the counts join the
    sign tasks' run key (another count moves every later file's draws)."""
    job = d.job
    rows = [0] * job.first + [r["rows"] for r in counted]
    job.row0 = [0] * job.first + np.cumsum([0] + rows[job.first:-1], dtype=np.int64).tolist()
    job.run_key = run_key([job.run_key, rows])


def _signed(d: Driver, signed: list[dict]) -> None:
    """Pass 1 done: the files' row offsets, and the run key of every later marker (the map markers' stamps)."""
    rows = [r["rows"] for r in signed]
    if COUNT in d.results and rows[d.job.first:] != [r["rows"] for r in d.results[COUNT]]:
        raise RunError("an input file changed while the run read it (pass 1 read another number of documents than "
                       "the count before it): run again")
    d.job.offsets = np.concatenate([[0], np.cumsum(rows, dtype=np.int64)]).tolist()
    d.job.run_key = run_key([d.fingerprint, d.settings, d.job.device, d.job.partitions, [r["stamp"] for r in signed],
                             rows, d.job.first])


def _unique_ids(d: Driver, ex: list[dict]) -> None:
    if any(r["duplicate_ids"] for r in ex):
        _raise_duplicate_ids(d.job, [r["rows"] for r in d.results[SIGN]], d.index)


def _exact_verify(d: Driver) -> bool:
    return d.job.cfg.cluster.exact_verify


def _few_edges(d: Driver) -> bool:
    """At most graph.COMPONENTS_IN_ONE_TASK candidate edges: one task builds the components' stars instead of the
    star rounds, whose tasks then cost more than the edges (on one machine most of all)."""
    return sum(r["edges"] for r in d.results[BUCKETS]) <= graph.COMPONENTS_IN_ONE_TASK


def _one_star(d: Driver, res: list[dict]) -> None:
    d.step, d.sources = "c", ["c"]  # the labels stage reads the star of the components task (edges_c)


def _star_rounds(d: Driver, stage: Stage) -> list[dict]:
    d.step, d.sources, res = graph.star_rounds(lambda *a: d.stage(stage, *a), d.job.partitions, d.job.nfiles)
    return res


def _journal(d: Driver) -> None:
    """The output session journals what the workers will write into OUT/deduplicated/ (with a source limit,
    before the kept stage: the write stage writes none)."""
    if d.out is not None and d.job.cfg.write_deduplicated:
        from ..io import output_path
        from ..io.write import WRITE_HOOKS

        for f in d.inputs:
            for hook in WRITE_HOOKS:
                hook(output_path(os.path.join(d.out, "deduplicated"), f))


COUNT = Stage(options.count, "input", when=lambda d: drawn(d.job.prefilter), then=_counted)
SIGN = Stage(stages.sign, "file", device=True, then=_signed)
EXACT = Stage(stages.exact, "range", device=True, then=_unique_ids)
EXACT_TEXTS = Stage(options.exact_texts, "file", when=_exact_verify)  # the groups' bytes compared: they replace
EXACT_CHECK = Stage(options.exact_check, "file", when=_exact_verify)  # the exact tasks' groups
BANDS = Stage(stages.bands, "file", when=lambda d: d.job.partitions > stages.BANDS_FROM_PIECES)
BUCKETS = Stage(stages.buckets, "range", device=True)
STAR = Stage(graph.star, "file", drive=_star_rounds, when=lambda d: not _few_edges(d))
COMPONENTS = Stage(graph.components, "one", when=_few_edges, then=_one_star)
LABELS = Stage(graph.labels, "file", args=lambda d: (d.step, d.sources))
MEMBERS = Stage(stages.members, "file", device=True)
POLICY = Stage(stages.policy, "component", device=True)
RESOLVE = Stage(stages.resolve, "file")
RANKS = Stage(options.ranks, "file", when=lambda d: d.job.cfg.cluster.keep_copies > 1)
def _tallied(d: Driver, wr: list[dict]) -> None:
    """The write tasks' source tallies merged in file order: run.json's ``sources``."""
    from ..runtime.sources import SourceGuard, Tally

    tally = Tally(d.thresholds)
    for w in wr:
        tally.merge(Tally.from_dict(w["sources"]))
    d.source_stats = tally.stats(d.guard or SourceGuard())


def _source_field(d: Driver) -> str | None:
    return d.guard.source_field if d.guard else None


def semantic_step(d: Driver, stage: Stage) -> list[dict]:
    """SemDeDup over the documents the write stage's decisions keep ("after"; every document, "beside"), on this
    run's cluster and GPU actors (semantic.semantic_in_run: OUT's semantic_decisions.parquet, semantic.json,
    semantic/centroids.npy); the SEMFOLD stages then fold its removals into the decisions by tasks, as the local
    engine folds them (``semantic.merge_decisions``; semfold.py): the driver holds no decision."""
    from .semantic import semantic_in_run

    job = d.job
    t = time.perf_counter()
    select = (job.work, d.lexical, job.first) if d.semantic_order == "after" else None
    sem = semantic_in_run(d.ray, d.actors, d.nodes, d.inputs, d.semantic, job.device, job.work, job.cfg,
                          resume=d.resume, partitions=job.partitions, select=select,
                          key=[job.run_key, d.semantic_order], out=d.out, dataset=d.dataset)
    d.sem_part = sem.parts
    d.timings["semantic"] = time.perf_counter() - t
    # the later stages' markers hold the semantic stage's key too: another eps or model is never reused
    job.run_key = run_key([job.run_key, sem.run_key])
    keys = ("counts", "eps", "clusters", "pairwise_backend", "long_text")
    return [{"stats": {"order": d.semantic_order, **{k: sem.stats[k] for k in keys if k in sem.stats}},
             "engine": sem.stats["engine"]}]


semantic_step.stage = "semantic"


def _after(d: Driver) -> bool:
    return d.semantic is not None and d.semantic_order == "after"


def _removed(d: Driver) -> bool:
    """The semantic stage removed a document: its removals are folded in (else the lexical decisions stand)."""
    return _after(d) and sum(r["removed"] for r in d.results[SEMFOLD_TOUCHED]) > 0


def _shares(d: Driver, res: list[dict]) -> None:
    d.fold_shares = res[0]["shares"]


def _folded(d: Driver, res: list[dict]) -> None:
    """The local engine's line (``semantic.merge_decisions``; the fold tasks' own logging stays in their workers)."""
    logger.info("semantic: %d of the %d documents the lexical stages kept are semantic duplicates, removed for a "
                "kept representative", sum(r["removed"] for r in res), d.sem_part[1])


SIZES = Stage(stages.sizes, "file")
WRITE = Stage(stages.write, "input", before=lambda d: None if d.deferred else _journal(d), then=_tallied,
              args=lambda d: (None if d.deferred else d.out, _source_field(d), d.thresholds, d.lexical))
SEMANTIC = Stage(semantic_step, "one", drive=semantic_step, when=lambda d: d.semantic is not None)
# the semantic removals folded into the decisions by tasks (semfold.py): the touched clusters' rows only
SEMFOLD_TOUCHED = Stage(semfold.semfold_touched, "input", when=_after, args=lambda d: d.sem_part)
SEMFOLD_CLUSTERS = Stage(semfold.semfold_clusters, "input", when=_removed, args=lambda d: (d.lexical,))
SEMFOLD_COMPONENTS = Stage(semfold.semfold_components, "one", when=_removed, then=_shares,
                           args=lambda d: (semfold.FOLD_ROWS,))
SEMFOLD_GATHER = Stage(semfold.semfold_gather, "input", when=_removed,
                       args=lambda d: (d.lexical, *d.sem_part, d.fold_shares))
SEMFOLD_FOLD = Stage(semfold.semfold_fold, "share", when=_removed, then=_folded)
SEMFOLD_MERGE = Stage(semfold.semfold_merge, "input", when=lambda d: d.semantic is not None,
                      args=lambda d: (d.lexical, *d.sem_part, d.semantic_order, d.fold_shares))
RECOUNT = Stage(stages.recount, "input", when=lambda d: d.semantic is not None, then=_tallied,
                args=lambda d: (_source_field(d), d.thresholds))
KEPT = Stage(options.kept, "input", before=_journal, args=lambda d: (d.out,),
             when=lambda d: d.deferred and not d.stopped and d.out is not None and d.job.cfg.write_deduplicated)
INDEX_ROWS = Stage(options.index_rows, "input", when=lambda d: d.save_index is not None and not d.stopped)
# OUT/decisions/ (the dataset layout; OUT/semantic_decisions/ too): each file's part, written by a task (outputs.py)
PUBLISH = Stage(outputs.publish, "input", args=lambda d: (d.out, d.sem_part or None),
                when=lambda d: d.dataset and d.out is not None,
                before=lambda d: outputs.journal(d.out, d.job.nfiles - d.job.first, d.job.prefilter is not None,
                                                 d.semantic is not None))
# report.html's largest clusters: their rows, ids and texts from the files holding them (summary.py)
SHOWN = Stage(summary.shown, "input", args=lambda d: (summary.largest(d.written),), when=lambda d: bool(d.out))

PLAN: tuple[Stage, ...] = (COUNT, SIGN, EXACT, EXACT_TEXTS, EXACT_CHECK, BANDS, BUCKETS, STAR, COMPONENTS, LABELS,
                           MEMBERS, POLICY, RESOLVE, RANKS, SIZES, WRITE, SEMANTIC, SEMFOLD_TOUCHED, SEMFOLD_CLUSTERS,
                           SEMFOLD_COMPONENTS, SEMFOLD_GATHER, SEMFOLD_FOLD, SEMFOLD_MERGE, RECOUNT, KEPT, INDEX_ROWS,
                           PUBLISH, SHOWN)


def walk(d: Driver) -> None:
    """Every stage of PLAN that runs, in order, with the driver's work around it."""
    for stage in PLAN:
        if stage.when is not None and not stage.when(d):
            continue
        if stage.before is not None:
            stage.before(d)
        res = stage.drive(d, stage) if stage.drive is not None else \
            d.stage(stage, *(stage.args(d) if stage.args is not None else ()))
        d.results[stage] = res
        if stage.then is not None:
            stage.then(d, res)


# ---------------------------------------------------------------------------------------------- the run

def check_engine_args(workers: int | None, address: str | None, partitions: Any) -> None:
    """The API's checks of the engine's arguments, before anything is written: a local cluster (``workers``)
    or a running one (``address``), not both; ``partitions`` None or a whole number >= 1 (the CLI's types say
    the same)."""
    check_cluster_args(workers, address)
    check_partitions(partitions)


def run(files, cfg, device: str, *, work: str, out: str | None, workers: int | None, address: str | None,
        partitions: int | None, resume: bool, timings: dict[str, float], fingerprint: str, index=None,
        save_index: str | None = None, prefilter=None, guard=None, dataset: bool = False, semantic=None,
        semantic_order: str = "after", precompile: Callable[[str], float] | None = None) -> dict[str, Any]:
    """The plan (module doc); returns what run.json adds (counts, stage stats, read report, the engine)
    and leaves WORK/ray/decisions/ (and OUT/deduplicated/ with ``out``; the caller writes
    OUT/decisions.parquet: write_decisions). ``index``: the --against index as an IndexSource (its path
    and checked manifest; the tasks read its rows); ``save_index``: the directory of the new index (the
    kept documents after the ``index``'s); ``prefilter``: the filter flags' FilterConfig (the sign tasks
    score and decide; OUT/scores.parquet from their parts); ``guard``: a ``sources.SourceGuard`` (run.json's
    ``sources``; with a limit, the kept records and the index only when every source is within it); ``dataset``:
    OUT/decisions/ as the tasks' per-file parts (outputs.py; the caller writes no decisions.parquet then);
    ``semantic``: ``run --semantic``'s SemanticConfig, its stage over the documents the lexical stages kept
    (``semantic_order`` "after") or over every one ("beside"), folded into the decisions (SEMANTIC);
    ``precompile(device) -> seconds``: compiles the dedup kernels on a node whose Numba cache lacks them (the
    probe runs it once there: cluster.probe; lexical.dedup passes its own)."""
    inputs = files
    first = 1 if index is not None else 0
    check_engine_args(workers, address, partitions)
    if index is not None and cfg.cluster.exact_verify:
        from ..lexical.decide import EXACT_VERIFY_AGAINST

        raise ConfigError(EXACT_VERIFY_AGAINST)
    if index is not None:
        files = [index] + list(files)
    if save_index is not None:
        from ..lexical.index import check_extends

        check_extends(save_index, cfg, index)
    from .perfile import task_paths

    work_tasks = task_paths(work)  # absolute: a joined cluster's workers do not run in this directory
    out_tasks = os.path.abspath(out) if out is not None else None
    lay = WorkFiles.prepare(work, resume)
    with ray_cluster(workers, address) as ray:
        nodes = probe(ray, work_tasks, cfg, fingerprint, compile_device=device, precompile=precompile, timings=timings)
        parts = key_ranges(partitions, int(ray.cluster_resources().get("CPU", 1)), inputs)
        # every setting that can change a task's output is in the key (the contract alone leaves out the
        # policy, the keep order, the reader's options): a marker of another config is never reused
        settings = {k: v for k, v in cfg.to_dict().items() if k not in ("progress", "threads")}
        if prefilter is not None:
            settings["prefilter"] = dataclasses.asdict(prefilter)
        if semantic is not None:  # the write stage's parts are then "lexical" (the semantic stage's key is its own)
            settings["write_table"] = "lexical"
        # pass 1 needs no policy setting (but the scope: a scoped piece's keys are salted)
        signing = {**settings, "cluster": {"keep": cfg.cluster.keep, "scope_field": cfg.cluster.scope_field}}
        # the workers draw no progress bar: Ray would forward its fragments to this terminal
        job = stages.Job(cfg.replace(progress=False), device, files, work_tasks, parts, first=first,
                         prefilter=prefilter,
                         run_key=run_key([fingerprint, signing, device, parts, len(files), first, "sign"]))
        from ..runtime.sources import thresholds

        d = Driver(ray, job, inputs, out_tasks, save_index, index, fingerprint, settings, timings,
                   remote={s: ray.remote(num_cpus=1, max_retries=3)(s.fn) for s in PLAN}, guard=guard,
                   thresholds=thresholds(cfg, semantic), progress=cfg.progress, dataset=dataset and out is not None,
                   semantic=semantic, semantic_order=semantic_order, nodes=nodes, resume=resume)
        with gpu_actors(ray, device) as d.actors:
            walk(d)
    return _run_stats(d, nodes, prefilter, workers, address, lay)


def _run_stats(d: Driver, nodes: int, prefilter, workers, address, lay: Layout) -> dict[str, Any]:
    job, r = d.job, d.results
    first, nf = job.first, job.nfiles
    signed = r[SIGN]
    rows = [s["rows"] for s in signed]
    stats = _stats(signed[first:], r[EXACT], r[BUCKETS], r[LABELS], r[MEMBERS], r[POLICY], r[SIZES], r[WRITE],
                   d.written, rows[first:], job.partitions, nodes, d.step if isinstance(d.step, int) else 0,
                   job.cfg.lsh.bands)
    if SEMANTIC in r:  # the local engine's stages.semantic; the semantic stage's own engine stats beside it
        stats["stages"]["semantic"] = r[SEMANTIC][0]["stats"]
        stats["engine"]["semantic"] = r[SEMANTIC][0]["engine"]
    if SEMFOLD_COMPONENTS in r:  # how the fold of the semantic removals was spread over tasks
        stats["engine"]["semantic_fold"] = {k: r[SEMFOLD_COMPONENTS][0][k] for k in
                                            ("clusters", "groups", "shares", "rows")}
    if COMPONENTS in r:  # one task found the components: no star step ran
        stats["stages"]["components"].update(method="one task", rounds=r[COMPONENTS][0]["rounds"])
    else:
        stats["stages"]["components"]["method"] = "star rounds"
    if EXACT_CHECK in r:  # the groups after byte verification, as the local engine counts them
        chk = r[EXACT_CHECK]
        stats["stages"]["exact"].update({k: sum(c[k] for c in chk) for k in
                                         ("groups_with_duplicates", "removed", "hash_collisions")},
                                        byte_verified=True, text_bytes_read=sum(t["text_bytes_read"]
                                                                                for t in r[EXACT_TEXTS]))
    if job.cfg.cluster.scope_field is not None:
        stats["stages"]["scope"] = _scope_stats(job.cfg.cluster.scope_field, r[WRITE])
    mapped = signed + r[EXACT]
    stats["engine"].update({"workers": workers, "address": address, "worker_peak_rss_bytes": d.peak_rss,
                            "sign_tasks_reused": sum(1 for s in signed[first:] if s.get("reused")),
                            "device_workers": len(d.actors),
                            "device_worker_processes": len({x["worker_pid"] for x in mapped if "worker_pid" in x}),
                            "device_array_backends": sorted({x["array_backend"] for x in mapped + r[POLICY]
                                                             if "array_backend" in x})})
    if d.index is not None:
        stats["stages"]["against_index"] = {"path": d.index.path, "documents": rows[0],
                                            "generation": d.index.manifest["generation"],
                                            **({"scope": d.index.manifest["scope"]} if "scope" in d.index.manifest
                                               else {})}
    if prefilter is not None:
        stats["prefilter"] = _prefilter_stats(prefilter, signed[first:])
        if d.out is not None and not d.dataset:  # (a dataset's parts: the publish tasks')
            t = time.perf_counter()
            write_scores(lay, range(first, nf), job.offsets, os.path.join(d.out, "scores.parquet"))
            d.timings["write_scores"] = time.perf_counter() - t
    stats["sources"] = d.source_stats
    if SHOWN in r:  # report.html's aggregates: run.json's report, the shown rows in OUT/report/shown.json
        stats["report"] = summary.report(d.written, r[SIZES][:first], r[SHOWN], d.out)
    if KEPT in r:  # a run with a source limit wrote its kept records in the kept stage
        stats["deduplicated"] = {k: sum(x["deduplicated"][k] for x in r[KEPT]) for k in ("files", "rows_written")}
    if d.save_index is not None and not d.stopped:
        t = time.perf_counter()
        stats["stages"]["index"] = _write_index(lay, d.save_index, job.cfg, d.index, range(first, nf),
                                                r[INDEX_ROWS])
        d.timings["save_index"] = time.perf_counter() - t
    return stats


def _task_failure(stage: Stage, key: int, files, exc) -> str:
    """The error of a task that failed for memory (or whose worker kept dying): the task, its file, the knob."""
    what = f"file {files[key].relpath}" if stage.per in ("file", "input") else f"{stage.per} range {key}"
    return (f"Ray task {stage.name}[{key}] ({what}) failed after its retries: {type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}. Each task holds one file or one key range: give "
            "workers more memory (fewer --workers per node), split large input files, raise --partitions, "
            "or bound the grouping with --memory-budget; --resume reuses the finished tasks")


def _raise_duplicate_ids(job, rows, index=None) -> None:
    """The local engine's errors (io.check_unique_ids: the ids, counts, files and lines; then an id already
    in the --against index: Index.check_new_ids), built from the pieces' ids: per-document state in the
    driver on this error path only."""
    from .. import io

    ids = [job.layout.read_one("pieces", f"f{fi:06d}", ["id"])["id"]
           for fi in range(job.first, job.nfiles)]
    cfg = job.cfg
    ids = pa.chunked_array([c for t in ids for c in t.chunks], pa.string())
    reader = {"id_field": cfg.id_field, "text_field": cfg.text_field, "on_error": cfg.on_error}
    inputs, file_rows = job.files[job.first:], rows[job.first:]
    io.check_unique_ids(ids, inputs, file_rows, **reader)
    if index is not None:  # the index's ids, read on this error path only
        from ..contract import contract
        from ..lexical.index import load_index

        load_index(index.path, contract(cfg), cfg.cluster.scope_field).check_new_ids(ids.combine_chunks(), inputs, file_rows, **reader)
    raise RunError("an exact task found a duplicated id that the check of all ids did not")  # pragma: no cover


def _write_index(lay: Layout, path: str, cfg, index, file_range, rows: list[dict]) -> dict[str, Any]:
    """The new index: the parent's rows (--against), then every file's index_rows part, one at a time (with a
    scope, the index_rows tasks' documents per scope value)."""
    from ..lexical.index import save_index

    def fill(writer) -> None:
        writer.copy_parent()
        for fi in file_range:
            writer.write_table(lay.read_one("index_rows", f"f{fi:06d}"))
        for r in rows:
            writer.add_scopes(dict(r.get("scopes") or []))

    return save_index(path, cfg, index, fill)


def _prefilter_stats(prefilter, signed: list[dict]) -> dict[str, Any]:
    """run.json's ``prefilter`` (the local engine's: the step's description, the config, rows per reason
    in name order) from the sign tasks' results."""
    by: dict[str, int] = {}
    for s in signed:
        for r, k in s["prefilter"]["by_reason"].items():
            by[r] = by.get(r, 0) + k
    described = next((s["prefilter"]["describe"] for s in signed if s["prefilter"]["scored"]),
                     signed[0]["prefilter"]["describe"] if signed else {})
    return {**described, "config": dataclasses.asdict(prefilter), "by_reason": dict(sorted(by.items()))}


def _scope_stats(field_name: str, wr: list[dict]) -> dict[str, Any]:
    """run.json's ``stages.scope`` (decide.scope_counts' shape) from the write tasks' per-file counts,
    merged in file order: the scopes in order of first appearance in the run, as the local engine's."""
    scopes: dict[str, dict[str, int]] = {}
    for w in wr:
        for value, docs, kept in w["scopes"]:
            c = scopes.setdefault(value, {"input": 0, "kept": 0, "removed": 0})
            c["input"] += docs
            c["kept"] += kept
            c["removed"] += docs - kept
    return {"field": field_name, "scopes": scopes}


def _stats(signed, ex, bk, lab, mem, pol, sz, wr, fin, rows, parts, nodes, step, bands) -> dict[str, Any]:
    """run.json's counts (of the final decisions: ``fin``, the recount or write tasks' results), stages (the
    lexical ones: ``wr``, the write tasks'), read report, pass 1's task seconds, deduplicated/ and engine."""
    n = sum(rows)
    by = {r: sum(w["by_reason"][r] for w in fin) for r in REASONS}
    by.update({r: k for r in REASON_CODES if r not in by and (k := sum(w["by_reason"].get(r, 0) for w in fin))})
    kept = sum(w["kept"] for w in fin)
    counts = {"input": n, "kept": kept, "removed": n - kept, "by_reason": by,
              "text_bytes": {"input": sum(w["text_bytes"][0] for w in fin),
                             "kept": sum(w["text_bytes"][1] for w in fin)},
              "words": {"input": sum(w["words"][0] for w in fin), "kept": sum(w["words"][1] for w in fin),
                        "note": "words of the normalized text (space-separated runs)"}}

    def total(rs, k):
        return sum(r.get(k, 0) for r in rs)

    stages_ = {
        "exact": {"groups_with_duplicates": total(ex, "groups_with_duplicates"), "removed": total(ex, "removed"),
                  "short_documents": total(ex, "short_documents"), "byte_verified": False, "hash_collisions": None},
        "lsh": {"buckets": total(bk, "buckets"), "bucket_entries": total(bk, "bucket_entries"),
                "largest_bucket": max([r["largest_bucket"] for r in bk] or [0]), "star_edges": total(bk, "edges"),
                "candidate_documents": total(lab, "candidates"), "key_range_partitions": parts,
                # the report's band-load plot: the buckets tasks' per-band counts, summed
                "buckets_per_band": np.sum([r["buckets_per_band"] for r in bk] or [[0] * bands], axis=0).tolist()},
        "components": {"star_steps": step, "candidates": total(lab, "candidates")},
        "verify": {"documents": total(mem, "candidates"), "text": "re-read from the input (per file, on the workers)",
                   "text_bytes_read": total(mem, "text_bytes_read")},
        "policy": {"removed": total(pol, "removed"), "verified_pairs": total(pol, "verified_pairs")},
        "clusters": {"with_duplicates": sum(w["clusters_with_duplicates"] for w in wr),
                     "largest": max([w["largest_cluster"] for w in wr] or [0])},
    }
    report = ReadReport()  # the local engine's read report (file_rows: a pipeline places each file's rows)
    timings = {}
    for s in signed:
        report.merge(s["report"])
        for k, v in s["timings"].items():
            timings[k] = timings.get(k, 0.0) + v
    dedup = {"files": total([w["deduplicated"] for w in wr], "files"),
             "rows_written": total([w["deduplicated"] for w in wr], "rows_written")}
    return {"counts": counts, "stages": stages_, "read": report.to_dict(), "pass1_task_seconds": timings,
            "deduplicated": dedup, "engine": {"name": "ray", "nodes": nodes, "partitions": parts}}
