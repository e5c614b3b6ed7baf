"""Contamination screening as one step of a pipeline (``runtime.program.Step``, kind "select"): ``screen`` over the
step's view; in a pipeline a flagged document is removed as ``contaminated`` (its matches are in matches.parquet).
The engine writes the step's kept records."""
from __future__ import annotations

import dataclasses

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from ..errors import ConfigError
from ..runtime.program import Env, Kind, Outputs, StepRun, Verdicts, check_config, file_sources
from .screening import ScreenConfig

CONTAMINATED = "contaminated"


@dataclass(frozen=True)
class Screen:
    """Benchmark-contamination screening by word n-gram overlap: ``benchmarks`` (files: jsonl / parquet / text),
    ``config`` (a ``ScreenConfig``; its reading settings are the run's)."""

    name: ClassVar[str] = "screen"
    kind: ClassVar[Kind] = "select"
    outputs: ClassVar[Outputs] = Outputs(stats="screen.json", table="matches.parquet", files=("counts.json",))
    benchmarks: tuple[str, ...] = ()
    config: ScreenConfig = field(default_factory=ScreenConfig)

    def __post_init__(self) -> None:
        check_config(self, ScreenConfig)
        if isinstance(self.benchmarks, str) or not self.benchmarks:
            raise ConfigError(f"Screen needs benchmarks: a list of benchmark files, got {self.benchmarks!r}")

    def run(self, view: Any, out: str, env: Env) -> StepRun:
        cfg = dataclasses.replace(env.reading.apply(self.config), progress=env.progress)
        if env.engine == "ray":  # one task per file against the broadcast index: the same outputs
            from .. import distributed

            res = distributed.screen_files(view, list(self.benchmarks), cfg, out, env.device, workers=env.workers,
                                           address=env.address, work_dir=env.work_dir, resume=env.resume)
        else:
            from .screening import screen

            res = screen(view, list(self.benchmarks), cfg, out, device=env.device)
        def verdicts() -> Verdicts:
            m = len(res.ids)
            flagged = np.zeros(m, bool)
            flagged[np.asarray(res.matches["row"].to_numpy(zero_copy_only=False), np.int64)] = True
            reason = pa.array([CONTAMINATED] * m, pa.string()) if m else pa.array([], pa.string())
            return Verdicts(res.ids, file_sources(res.stats), ~flagged, reason, np.full(m, -1, np.int64))

        totals = res.stats["totals"]
        return StepRun(res, verdicts, counts=(totals["documents"], totals["documents_flagged"]))
