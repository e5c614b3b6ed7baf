"""What every Ray task of the engine shares (stages.py, options.py): the Job it takes, the done-marker
wrapper that makes it idempotent, the keep order of a table of rows, a file's piece, the assignment schema."""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ..config import RunConfig
from ..decisions import keep_rank
from ..runtime.device import set_threads
from ..runtime.run import peak_rss_bytes
from ..runtime.workdir import checkpoint
from .shuffle import WorkFiles


@dataclass
class Job(WorkFiles):
    """What every task gets: the run's config, device, input files, work dir, key-range partitions P,
    the row offsets of the files (int (F+1,), after the sign stage) and the run key of the markers."""

    cfg: RunConfig
    device: str
    files: list
    work: str
    partitions: int
    offsets: list[int] | None = None
    run_key: str = ""
    first: int = 0  # the first input file: 1 when files[0] is the --against index
    prefilter: Any = None  # the filter flags' FilterConfig (filters/prefilter.py): pass 1 scores and decides
    row0: list[int] | None = None  # each file's first run row before pass 1 (driver.COUNT), or None: unknown

    @property
    def threads(self) -> int | None:
        """The CPU threads a task's kernels use (None: one)."""
        return self.cfg.threads

    @property
    def n_index(self) -> int:
        """Rows of the --against index (0 without one): rows 0..n_index-1."""
        return int(self.offsets[self.first]) if self.first else 0

    def rank_columns(self) -> list[str]:
        """The piece columns the keep order needs besides the row (piece_keep_order): the keep policy's,
        and with a prefilter its verdict (its rejects rank after every document it keeps)."""
        return keep_columns(self.cfg) + (["filter_pass"] if self.prefilter is not None else [])

    def dup_names(self, g: int) -> list[str]:
        """The dups_by_row / dups_by_leader files of file ``g``'s rows: the exact tasks' (one per key range),
        or with exact_verify the byte-checked ones (one per leader file: options.exact_check)."""
        if self.cfg.cluster.exact_verify:
            return [f"v{h:06d}-f{g:06d}" for h in range(self.nfiles)]
        return [f"p{p:04d}-f{g:06d}" for p in range(self.partitions)]


def run_once(stage: str, valid=None):
    """Run the task unless its done marker holds a result for this run key (then return that result);
    ``valid(job, key, result, *args)``: a further check of a stored result (the sign stage's input stamp,
    the write stage's output directory). The task keeps the function's name (Ray's task name; pickled by
    reference) and carries ``stage``, the name of its markers and work-dir files (driver.Stage.name)."""
    def wrap(fn):
        @functools.wraps(fn)
        def task(job: Job, key: int, *args):
            set_threads(job.threads or 1)
            lay = job.layout
            # a component step's marker names its step too
            name = f"{key}-s{args[0]}" if args and type(args[0]) is int else str(key)
            found = lay.done(stage, name, job.run_key)
            if found is not None and (valid is None or valid(job, key, found, *args)):
                return {**found, "reused": True}
            t, cpu = time.perf_counter(), time.process_time()
            result = fn(job, key, *args)
            checkpoint(f"ray-{stage}")  # outputs written, marker not yet (the fault tests kill a worker here)
            result["seconds"] = time.perf_counter() - t
            # the task's own CPU time (every thread of its worker process, which runs one task at a time):
            # run.json's cost
            result["cpu_seconds"] = time.process_time() - cpu
            result["peak_rss_bytes"] = peak_rss_bytes() or 0
            return lay.finish(stage, name, job.run_key, result)
        task.stage = stage
        return task
    return wrap


def keep_columns(cfg: RunConfig) -> list[str]:
    """The piece columns the keep rank needs besides the row (decisions.keep_rank's inputs)."""
    keep = cfg.cluster.keep
    return {"first": [], "longest": ["text_bytes"], "min-id": ["id"]}.get(keep, ["keep_value"])


def piece_keep_order(cfg: RunConfig, t: pa.Table, n_index: int = 0) -> np.ndarray:
    """Keep order of the rows of ``t`` (sorted by global row, column "row"): their order among the run's
    rows, since keep_rank breaks ties by position; an index's rows (< n_index) first, in row order; with
    a "filter_pass" column (a prefilter's verdict) its rejects after every row it keeps."""
    if n_index and t.num_rows:
        k = int(np.searchsorted(t["row"].to_numpy(), n_index))
        if k:
            return np.concatenate([np.arange(k, dtype=np.int64), k + piece_keep_order(cfg, t.slice(k))])
    n = t.num_rows
    rank = keep_rank(cfg.cluster.keep, n=n,
                     text_bytes=t["text_bytes"].to_numpy() if "text_bytes" in t.column_names else None,
                     ids=t["id"].combine_chunks() if "id" in t.column_names else None,
                     values=t["keep_value"].to_numpy() if "keep_value" in t.column_names else None)
    if "filter_pass" in t.column_names:  # decide.rank_rows: the prefilter's rejects after all it keeps
        passed = np.asarray(t["filter_pass"].to_numpy(zero_copy_only=False), bool)
        order = np.lexsort((rank, ~passed))
        rank = np.empty(n, np.int64)
        rank[order] = np.arange(n, dtype=np.int64)
    return rank


def read_piece(job: Job, fi: int, columns=None) -> pa.Table:
    return job.layout.read_one("pieces", f"f{fi:06d}", columns)


DUPS_SCHEMA = pa.schema([("row", pa.int64()), ("leader", pa.int64()), ("short", pa.bool_())])  # exact duplicates
ASSIGN_SCHEMA = pa.schema([("row", pa.int64()), ("rep", pa.int64()), ("reason", pa.int8()), ("jaccard", pa.float64()),
                     ("rep_id", pa.string()), ("matched_id", pa.string())])
