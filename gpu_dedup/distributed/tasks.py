"""What the programs other than dedup share on the Ray engine (paragraph.py, substring.py, semantic.py, views.py):
the job every task takes, the runner of one program's stages, and the session around them.

    ProgramJob  what every task of a program gets: its config, device, input files, work dir, key ranges, the
                files' row offsets (after the first stage), the run key of its markers and the small results
                of earlier stages (``extra``); no per-document state
    Runner      ``stage(fn, keys, *args)``: one task per key (``rows.run_once`` functions: idempotent, a marker
                with the run key reused, Ray retries a task whose worker died), results in key order, timed
                (run.json's ``engine.stage_seconds``) and metered (run.json's ``cost``); ``device=True`` with
                device="cuda": on GPU actors (cluster.DeviceWorker), one per GPU
    program_session  perfile.session (the cluster: one already connected, e.g. the pipeline's, started once
                for all its steps, is used as it is; the probe; the work dir cleared for a fresh run, kept with
                ``resume``) around one program's Runner
    program_key a program run's key: its name, settings, device, key ranges and every input's identity (a
                marker of another input or setting is never reused)
    merged_read the per-file read reports of the first stage merged in file order (run.json's ``read``)
    work_root   the program's own folder of the work dir (WORK/<program>): programs of one OUT never share one
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from ..io import ReadReport, is_url
from ..runtime.cost import current as current_meter
from .cluster import ray_get
from .outputs import journal_paths
from .perfile import session
from .shuffle import WorkFiles
from .shuffle import run_key as digest


@dataclass
class ProgramJob(WorkFiles):
    """What every task of a program run gets (module doc). ``offsets``: int (F+1,), the prefix sum of the files'
    rows (set after the first stage); ``extra``: small values of earlier stages the later tasks read."""

    cfg: Any
    device: str
    files: list
    work: str
    partitions: int = 1
    offsets: list[int] | None = None
    run_key: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def threads(self) -> int | None:
        """The CPU threads a task's kernels use (None: one; a program's config may have no ``threads``)."""
        return getattr(self.cfg, "threads", None)

    def offs(self) -> np.ndarray:
        return np.asarray(self.offsets, np.int64)


def work_root(work: str, program: str) -> str:
    """WORK/<program> (a path every node sees, absolute, or an fsspec URL): each program's own folder."""
    if is_url(work):
        return work.rstrip("/") + "/" + program
    return os.path.join(os.path.abspath(work), program)


def _identity(f) -> Any:
    """An input's identity for the run key: the file's (device, inode, size, times; remote: its etag), a table's
    rows and content hash."""
    from ..runtime.workdir import file_identity, table_hash

    if f.fmt == "table":
        return {"rows": f.table.num_rows, "content": table_hash(f.table)}
    return {"path": f.path, **file_identity(f)}


def program_key(program: str, settings: Any, device: str, partitions: int, files, *more: Any) -> str:
    """The run key of a program's markers (module doc)."""
    plain = dataclasses.asdict(settings) if dataclasses.is_dataclass(settings) else dict(settings)
    plain.pop("progress", None)  # bars change no output
    return digest([program, plain, device, partitions, [_identity(f) for f in files], list(more)])


@dataclass
class Runner:
    """One program run's stages on the cluster (module doc)."""

    ray: Any
    job: ProgramJob
    timings: dict[str, float] = field(default_factory=dict)  # each stage's wall seconds (run.json engine)
    actors: list = field(default_factory=list)
    nodes: int = 1
    _remote: dict = field(default_factory=dict)

    def stage(self, fn: Callable[..., dict], keys, *args, device: bool = False,
              each: Callable[[int], tuple] | None = None) -> list[dict]:
        """One task ``fn(job, key, *args, *each(key))`` per key; their results in key order (a task's error
        raised as the local engine raises it, ``cluster.ray_get``)."""
        keys = list(keys)
        t = time.perf_counter()
        more = each or (lambda k: ())
        if device and self.actors:
            refs = [self.actors[i % len(self.actors)].run.remote(fn, self.job, k, *args, *more(k))
                    for i, k in enumerate(keys)]
        else:
            if fn not in self._remote:
                self._remote[fn] = self.ray.remote(num_cpus=1, max_retries=3)(fn)
            refs = [self._remote[fn].remote(self.job, k, *args, *more(k)) for k in keys]
        res = ray_get(self.ray, refs, lambda i, exc: _failure(fn, keys[i], self.job, exc))
        self.timings[fn.stage] = self.timings.get(fn.stage, 0.0) + time.perf_counter() - t
        meter = current_meter()
        if meter is not None:  # the tasks' own accounting (run.json's cost)
            meter.add_tasks(res, on_gpu=bool(device and self.actors))
        return res

    def engine_stats(self, workers, address, results: list[list[dict]]) -> dict[str, Any]:
        """run.json's ``engine``: Ray, the nodes, key ranges, tasks reused, the workers' peak memory."""
        flat = [r for rs in results for r in rs]
        return {"name": "ray", "workers": workers, "address": address, "nodes": self.nodes,
                "partitions": self.job.partitions, "tasks": len(flat),
                "tasks_reused": sum(1 for r in flat if r.get("reused")), "device_workers": len(self.actors),
                "worker_peak_rss_bytes": max([r.get("peak_rss_bytes", 0) for r in flat] or [0]),
                "stage_seconds": dict(self.timings)}


def task(stage: str, per: str = "file", valid: Callable[..., bool] | None = None):
    """A program's task function: ``rows.run_once(stage, valid)`` (markers, retries, reuse), covering one input
    file (``per="file"``: its errors name the file) or one key range / one unit of work (``per="range"``)."""
    from .rows import run_once

    def wrap(fn):
        t = run_once(stage, valid)(fn)
        t.per = per
        return t
    return wrap


def _failure(fn: Callable, key: int, job: ProgramJob, exc) -> str:
    """The error of a task whose worker died or ran out of memory after its retries: the task, the knob."""
    stage = fn.stage
    what = f"file {job.files[key].relpath}" if getattr(fn, "per", "file") == "file" else f"{fn.per} {key}"
    return (f"Ray task {stage}[{key}] ({what}) failed after its retries: {type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}. Each task holds one file or one key range: give "
            "workers more memory (fewer --workers per node) or split large input files; --resume reuses the "
            "finished tasks")


@contextlib.contextmanager
def program_session(job: ProgramJob, *, workers: int | None, address: str | None, resume: bool,
                    device_stages: bool = False) -> Iterator[Runner]:
    """``perfile.session`` (the cluster, the probe, the work dir; one DeviceWorker actor per GPU when
    ``device_stages`` and device="cuda", freed on the way out) around one program run: yields its ``Runner``."""
    device = job.device if device_stages else "cpu"
    with session(job.work, device, workers=workers, address=address, resume=resume) as s:
        yield Runner(s.ray, job, {}, s.actors, s.nodes)


def merged_read(results: list[dict]) -> ReadReport:
    """The first stage's per-file read reports (``report``), merged in file order."""
    report = ReadReport()
    for r in results:
        report.merge(r["report"])
    return report


def sum_counts(total: dict[str, Any], part: dict[str, Any]) -> dict[str, Any]:
    """``part``'s counts added into ``total`` (numbers summed, nested mappings by key); returns ``total``."""
    for k, v in part.items():
        if isinstance(v, dict):
            sum_counts(total.setdefault(k, {}), v)
        else:
            total[k] = total.get(k, 0) + v
    return total


def journal_files(out: str, files, folder: str) -> None:
    """Journal OUT/``folder``/<each input's relpath> in the output session before tasks write them (a failed run
    then removes them, as the local engine's own writes)."""
    from ..io import output_path

    journal_paths(output_path(os.path.join(out, folder), f) for f in files)
