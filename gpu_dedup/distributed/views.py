"""The pipeline's views on the Ray engine: the records a step keeps (the next step's input, and OUT/deduplicated/
at the end) written by one task per file (``io.write_kept`` over that file alone, as the dedup engine's write
tasks do: the bytes of the local engine's write), the driver handing each task its file's rows of the keep mask.
A write is idempotent (atomic files), so a retried task rewrites the same bytes; a resumed pipeline writes a
view again only for a step it runs again."""
from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from .. import io
from .cluster import ray_cluster, ray_get
from .tasks import journal_files


def _write_one(f, keep: np.ndarray, target: str, reading: dict[str, Any]) -> dict[str, int]:
    """One file's kept rows into ``target`` (its relpath there)."""
    return io.write_kept([f], keep, target, file_rows=[int(keep.shape[0])], read_threads=1, **reading)


def write_view(files: Sequence[Any], keep: np.ndarray, file_rows: Sequence[int], target: str, reading: Any, *,
               workers: int | None, address: str | None) -> dict[str, int]:
    """``io.write_kept(files, keep, target, ...)`` as one Ray task per file (``files``: ``io.source_files``'
    inputs, their relpaths the layout's; ``file_rows``: the rows of each in ``keep``). Returns the local
    writer's counts (files, rows_written)."""
    from ..errors import RunError

    if len(file_rows) != len(files) or int(np.sum(file_rows)) != keep.shape[0]:
        raise RunError(f"a view of {keep.shape[0]:,} rows cannot be split over {len(files)} files holding "
                       f"{int(np.sum(file_rows)):,}: the view changed while the pipeline ran")
    target = os.path.abspath(target)
    journal_files(os.path.dirname(target), files, os.path.basename(target))
    offs = np.concatenate([[0], np.cumsum(np.asarray(file_rows, np.int64))])
    opts = {"id_field": reading.id_field, "text_field": reading.text_field, "on_error": reading.on_error}
    with ray_cluster(workers, address) as ray:
        fn = ray.remote(num_cpus=1, max_retries=3)(_write_one)
        refs = [fn.remote(f, keep[offs[i]:offs[i + 1]], target, opts) for i, f in enumerate(files)]
        res = ray_get(ray, refs, lambda i, exc: f"Ray task view_write[{i}] (file {files[i].relpath}) failed after "
                                                f"its retries: {type(exc).__name__}")
    return {"files": sum(r["files"] for r in res), "rows_written": sum(r["rows_written"] for r in res)}
