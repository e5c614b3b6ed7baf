"""Per-file programs on the Ray engine (the filter, the screen): one task per input file over a shared work dir,
with the dedup plan's conventions: absolute paths for the tasks, the work dir's layout and done markers
(``shuffle.Layout``, ``rows.run_once``), GPU actors with --device cuda (``cluster.DeviceWorker``), results in file
order, the tasks' own accounting in the run's meter. The driver holds file lists, per-file counts and the tasks'
small results only; the tasks write their rows as per-file parts.

    FileJob       what every per-file task gets: the program's config, device, files, work dir, run key and
                  (after the first pass) the files' row offsets
    Session       one run's cluster: ``map`` runs a task per file (or per key) and returns the results in key
                  order (``device=True``: on the GPU actors with --device cuda)
    session       the context that opens one: the cluster joined or started, every node probed, the work dir
                  made (cleared unless resuming), the GPU actors started and freed again
    shifted_parts the tasks' per-file parts in file order, each part's file-local rows shifted by its file's first
                  row: what ``runtime/run.write_tables`` streams into OUT's one-file table (the local engine's row
                  groups and bytes)
    offsets_of    the files' first rows from the tasks' row counts
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..io import is_url
from ..runtime.cost import current as current_meter
from .cluster import gpu_actors, probe, ray_cluster, ray_get
from .shuffle import Layout, WorkFiles

logger = logging.getLogger(__name__)


@dataclass
class FileJob(WorkFiles):
    """What every per-file task gets (``rows.run_once`` reads ``threads``, ``layout`` and ``run_key``): the
    program's ``cfg`` (its progress bars off: the workers draw none), ``device``, the input ``files``, the work
    dir ``work`` (absolute, or a URL), the ``run_key`` of its done markers, after the first pass the files' row
    ``offsets`` (int (F+1,)), and the CPU ``threads`` of a task's kernels (None: one)."""

    cfg: Any
    device: str
    files: list
    work: str
    run_key: str = ""
    offsets: list[int] | None = None
    threads: int | None = None

    def keyed(self, *parts: Any) -> "FileJob":
        """This job with a run key that also holds ``parts`` (a later pass's inputs: its markers are its own)."""
        from .shuffle import run_key

        return dataclasses.replace(self, run_key=run_key([self.run_key, *parts]))


def unchanged(job: FileJob, fi: int, result: dict[str, Any], *_: Any) -> bool:
    """``rows.run_once``'s check of a stored per-file result: reused only for the same input file (the stamp
    the task recorded, ``runtime/workdir``'s rules)."""
    return same_input(job.files[fi], result, "its task ran; computing it again")


def same_input(f, result: dict[str, Any], since: str) -> bool:
    """Whether input ``f`` is the one a stored task ``result`` stamped (``runtime/workdir``'s rules); if not,
    a warning names the file, what changed and ``since`` (what the task is doing about it)."""
    from ..runtime.workdir import file_identity, what_changed

    try:
        identity = None if f.fmt == "table" else file_identity(f)
    except OSError:
        identity = None
    why = what_changed(result.get("stamp", {}), f, identity)
    if why is not None:
        logger.warning("input %s changed since %s", f.relpath, since.replace(";", f" ({why});", 1))
    return why is None


def stamp_of(f) -> Callable[[], dict[str, Any]]:
    """The stamp of input ``f`` as a task starts reading it; call the result once it has read it (an input that
    changed meanwhile is stamped as such: never reused)."""
    from ..runtime.workdir import file_identity, input_stamp

    before = None if f.fmt == "table" else file_identity(f)
    return lambda: input_stamp(f, before)


def offsets_of(rows: list[int]) -> list[int]:
    """int (F+1,): the first row of each file and the total, from the files' row counts."""
    return np.concatenate([[0], np.cumsum(rows, dtype=np.int64)]).astype(np.int64).tolist()


@dataclass
class Session:
    """One run's cluster (``ray``), its remote functions (made once per task function) and GPU actors."""

    ray: Any
    device: str
    progress: bool = False
    actors: list = dataclasses.field(default_factory=list)
    nodes: int = 0
    workers: int | None = None
    address: str | None = None
    _remote: dict = dataclasses.field(default_factory=dict)

    def map(self, fn: Callable[..., Any], job: FileJob, keys, *args, device: bool = False,
            args_of: Callable[[int], tuple] | None = None) -> list[Any]:
        """``fn(job, key, *args, *args_of(key))`` for every key (a file's index, or a key range's), in key
        order; on the GPU actors (round robin) when ``device`` and the run has them. A task's own error is raised
        as the local engine raises it; one whose worker died or ran out of memory names the task, its file and
        the knobs."""
        return list(self.stream(fn, job, keys, *args, device=device, args_of=args_of))

    def stream(self, fn: Callable[..., Any], job: FileJob, keys, *args, device: bool = False,
               args_of: Callable[[int], tuple] | None = None) -> Iterator[Any]:
        """``map``'s results one at a time, in key order, each dropped by the driver once the caller has folded
        it (an order statistic's rounds: the driver holds one merged summary, not every task's)."""
        keys = list(keys)
        what = getattr(fn, "stage", fn.__name__)
        more = args_of or (lambda k: ())
        if self.actors and device:
            refs = [self.actors[i % len(self.actors)].run.remote(fn, job, k, *args, *more(k))
                    for i, k in enumerate(keys)]
        else:
            if fn not in self._remote:
                self._remote[fn] = self.ray.remote(num_cpus=1, max_retries=3)(fn)
            refs = [self._remote[fn].remote(job, k, *args, *more(k)) for k in keys]
        from ..runtime.passes import progress

        meter = current_meter()
        with progress(SimpleNamespace(progress=self.progress), f"ray {what}", len(keys), unit="task") as bar:
            for i, ref in enumerate(refs):
                try:
                    (r,) = ray_get(self.ray, [ref], lambda _, exc: _failure(what, job.files, keys[i], exc))
                except BaseException:
                    for later in refs[i + 1:]:  # the tasks still running: cancelled (a joined cluster lives on)
                        try:
                            self.ray.cancel(later)
                        except Exception:  # noqa: BLE001 - finished or an actor's: nothing to cancel
                            pass
                    raise
                bar.update(1)
                if meter is not None and isinstance(r, dict):  # the tasks' own accounting: run.json's cost
                    meter.add_tasks([r], on_gpu=bool(self.actors and device))
                yield r


def _failure(what: str, files, key: int, exc) -> str:
    """The error of a task that failed for memory (or whose worker kept dying): the task, its file, the knob."""
    where = f"file {files[key].relpath}" if 0 <= key < len(files) else f"key {key}"
    return (f"Ray task {what}[{key}] ({where}) failed after its retries: {type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}. Each task holds one file: give workers more memory "
            "(fewer --workers per node) or split large input files; --resume reuses the finished tasks")


def task_paths(work: str) -> str:
    """The work dir as the tasks see it: absolute (a joined cluster's workers do not run in this directory),
    or the URL as given."""
    return work if is_url(work) else os.path.abspath(work)


@contextlib.contextmanager
def session(work: str, device: str, *, workers: int | None, address: str | None, resume: bool,
            progress: bool = False) -> Iterator[Session]:
    """A ``Session`` on the cluster of ``workers`` / ``address`` (cluster.ray_cluster): every node probed (the
    same gpu-dedup, the work dir ``work`` visible), the work dir made (cleared first unless ``resume``), one
    GPU actor per GPU with ``device="cuda"``, freed on the way out."""

    WorkFiles.prepare(work, resume)
    with ray_cluster(workers, address) as ray:
        s = Session(ray, device, progress, nodes=probe(ray, task_paths(work)), workers=workers, address=address)
        with gpu_actors(ray, device) as s.actors:
            yield s


def shifted_parts(lay: Layout, stage: str, offsets: list[int], columns=None, shift: bool = True
                  ) -> Iterator[pa.Table]:
    """The per-file parts of ``stage`` (``f<file>``, file-local rows in column "row"), in file order, each with
    its file's first row added to "row" (``shift``; False: their rows are the run's already; a file without a
    part: none). One part in memory at a time."""
    for fi in range(len(offsets) - 1):
        if not lay.exists(stage, f"f{fi:06d}"):
            continue
        t = lay.read_one(stage, f"f{fi:06d}", columns)
        if shift and "row" in t.column_names:
            i = t.schema.get_field_index("row")
            t = t.set_column(i, "row", pc.add(t["row"], pa.scalar(int(offsets[fi]), pa.int64())))
        yield t
