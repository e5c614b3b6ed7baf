"""The filter as one step of a pipeline (``runtime.program.Step``): ``filters.stage.filter_corpus`` over the step's
view, its keep column and reasons as the verdicts the engine composes (kind "select": no representative)."""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from ..runtime.program import Env, Kind, Outputs, StepRun, VerdictTable, Verdicts, check_config, file_sources
from .config import FilterConfig


@dataclass(frozen=True)
class Filter:
    """Language ID, heuristic rules, classifiers, perplexity and DSIR (``config``: a ``FilterConfig``; its reading
    settings, device and threads are the run's)."""

    name: ClassVar[str] = "filter"
    kind: ClassVar[Kind] = "select"
    outputs: ClassVar[Outputs] = Outputs(stats="run.json", table="scores.parquet", kept="filtered",
                                         files=("report.html", "report/", "audit/", "scores/"))
    config: FilterConfig

    def __post_init__(self) -> None:
        check_config(self, FilterConfig)

    def run(self, view: Any, out: str, env: Env) -> StepRun:
        from .stage import filter_corpus

        cfg = dataclasses.replace(env.reading.apply(self.config), device=env.device, threads=env.threads,
                                  progress=env.progress, write_filtered=self.config.write_filtered and env.write_kept)
        res = filter_corpus(view, cfg, out, overwrite=env.overwrite, engine=env.engine, workers=env.workers,
                            address=env.address, sources=env.sources, work_dir=env.work_dir, resume=env.resume,
                            table_layout=env.table_layout)
        def verdicts() -> Verdicts:
            s = res.columns(["id", "keep", "reason"])  # on Ray: these alone read, not the ~20 score columns
            return Verdicts(s["id"].combine_chunks(), file_sources(res.stats),
                            np.asarray(s["keep"].to_numpy(zero_copy_only=False), bool),
                            s["reason"].combine_chunks().cast(pa.string()), np.full(s.num_rows, -1, np.int64))

        c = res.stats["counts"]
        return StepRun(res, verdicts, os.path.join(out, self.outputs.kept) if cfg.write_filtered else None,
                       counts=(c["input"], c["removed"]),
                       table=VerdictTable(out, "scores", (("id", "id"), ("keep", "keep"), ("reason", "reason"))))
