"""``screen --engine ray``: one task per input file against the benchmark index, built once by the driver and
broadcast to every worker (``ray.put``: one copy per node's object store). Each task scans its file as the local
engine scans it (``screening.scan``), writes its matches (file-local rows) and its documents' ids as parts and
returns its tally (``screening.match_tally``: counts, flagged rows, matched item ids); the driver merges the
tallies into counts.json and screen.json and streams the parts into matches.parquet, shifted by each file's first
row: the local engine's rows, counts and bytes. The driver holds the index, file lists and the tallies only.

    screen_files  the run (the API's and the Screen step's ``engine="ray"``)
    screen_file   the task of one file (idempotent, with a done marker: a killed worker's task runs again, a
                  resumed run reuses the finished ones)
"""
from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any

import pyarrow as pa

from .. import io
from ..errors import ConfigError
from ..screen.screening import MATCHES_SCHEMA, ScreenResult
from .perfile import FileJob, offsets_of, session, shifted_parts, stamp_of, task_paths, unchanged
from .rows import run_once
from .shuffle import Layout, run_key

logger = logging.getLogger(__name__)

_IDS = pa.schema([("id", pa.string())])


@run_once("screen", valid=unchanged)
def screen_file(job: FileJob, fi: int, index: Any) -> dict[str, Any]:
    """File ``fi`` against ``index`` (a ``screening.BenchmarkIndex`` on the host; moved to the device with
    --device cuda): its matches part and ids part (``f<fi>``), its read report and tally."""
    from ..runtime.device import to_device
    from ..screen.screening import match_tally, scan

    f = job.files[fi]
    stamp = stamp_of(f)
    if job.device != "cpu":
        index = dataclasses.replace(index, hashes=to_device(index.hashes, job.device),
                                    bitmap=to_device(index.bitmap, job.device))
    report = io.ReadReport()
    matches, ids = scan([f], index, job.cfg, job.device, report)
    lay = job.layout
    n = sum(len(i) for i in ids)
    lay.write(matches, "matches", f"f{fi:06d}")
    lay.write(pa.table({"id": pa.chunked_array(ids, pa.string()) if ids else pa.array([], pa.string())},
                       schema=_IDS), "ids", f"f{fi:06d}")
    return {"rows": n, "report": report.to_dict(), "tally": match_tally(matches, n), "stamp": stamp()}


def screen_files(source: Any, benchmark_files: Any, cfg: Any, output_dir: str | os.PathLike | None, device: str,
                 *, workers: int | None = None, address: str | None = None, work_dir: str | os.PathLike | None = None,
                 resume: bool = False) -> Any:
    """``screening.screen`` on the Ray engine (module docstring): the same arguments, outputs and result (a
    ``ScreenResult`` whose ``ids`` are read from the tasks' parts when asked for), and the cluster's:
    ``workers`` (a local one of N processes) or ``address`` (a running one), ``work_dir`` (the tasks' parts and
    done markers; default OUT/work), ``resume`` (reuse the finished tasks there).

    Raises:
        ConfigError: neither a work dir nor an output dir (the tasks' parts need a shared directory), or either
            inside the inputs.
        GpuDedupError: a benchmark or corpus that cannot be read (the message names the file).
    """
    from ..runtime.outputs import check_outside_inputs, input_roots
    from ..runtime.run import Steps, resources
    from ..screen.screening import build_index, merge_tallies, read_benchmarks, screen_stats, write_screen

    if work_dir is None and output_dir is None:
        raise ConfigError("screen on the Ray engine needs a shared work directory: pass work_dir (--work-dir) "
                          "or output_dir (-o)")
    check_outside_inputs({"output_dir": output_dir, "work_dir": work_dir},
                         input_roots(source) + input_roots(benchmark_files))
    device, threads = resources(device)
    steps = Steps()
    with steps("index"):  # on the host: broadcast to every worker, which moves it to its device
        index = build_index(read_benchmarks(benchmark_files, cfg), cfg, "cpu")
    files = io.source_files(source)
    work = os.fspath(work_dir) if work_dir is not None else os.path.join(os.fspath(output_dir), "work")
    settings = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in ("progress", "threads")}
    job = FileJob(dataclasses.replace(cfg, progress=False), device, files, task_paths(work),
                  run_key([settings, device, index.policy, index.items.names, index.items.item_ids,
                           [f.relpath for f in files], "screen"]))
    with steps("scan"), session(work, device, workers=workers, address=address, resume=resume,
                                progress=cfg.progress) as s:
        got = s.map(screen_file, job, range(len(files)), s.ray.put(index), device=True)
    report = io.ReadReport()
    for g in got:
        report.merge(g["report"])
    stats = screen_stats(index, cfg, device, threads, files, report, steps, merge_tallies([g["tally"] for g in got]))
    stats["engine"] = {"name": "ray", "workers": workers, "address": address, "nodes": s.nodes, "tasks": len(got),
                       "tasks_reused": sum(1 for g in got if g.get("reused")), "work_dir": work}
    lay, offsets = Layout(job.work), offsets_of([g["rows"] for g in got])
    out = None if output_dir is None else write_screen(output_dir, shifted_parts(lay, "matches", offsets), index,
                                                       stats)
    return ScreenParts(index.counts, stats, out, lay, offsets)


class ScreenParts(ScreenResult):
    """The ``ScreenResult`` of a Ray run: its matches (few: flagged pairs) and ids (every document's) read from
    the tasks' parts the first time they are asked for (a pipeline's verdicts name every document; the command
    line asks for neither)."""

    def __init__(self, counts: dict, stats: dict, output_dir: str | None, layout: Layout, offsets: list[int]):
        self.counts, self.stats, self.output_dir = counts, stats, output_dir
        self._layout, self._offsets, self._matches, self._ids = layout, offsets, None, None

    @property
    def matches(self) -> pa.Table:  # type: ignore[override]
        if self._matches is None:
            parts = list(shifted_parts(self._layout, "matches", self._offsets))
            self._matches = pa.concat_tables(parts).combine_chunks() if parts else MATCHES_SCHEMA.empty_table()
        return self._matches

    @property
    def ids(self) -> pa.Array:  # type: ignore[override]
        if self._ids is None:
            parts = [self._layout.read_one("ids", f"f{fi:06d}")["id"] for fi in range(len(self._offsets) - 1)]
            self._ids = pa.chunked_array([c for p in parts for c in p.chunks], pa.string()).combine_chunks()
        return self._ids
