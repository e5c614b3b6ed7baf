"""Exact-substring dedup as one step of a pipeline (``runtime.program.Step``, kind "span"): ``substring_dedup``
over the step's view; it cuts repeated spans and removes no document, so its verdicts keep every one."""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..runtime.program import Env, Kind, Outputs, StepRun, check_config, span_verdicts
from .config import SubstringConfig
from .dedup import (
    DOCS_FILE,
    DOCS_TABLE,
    OUTPUT_DIR,
    SPANS_FILE,
    SPANS_TABLE,
    STATS_FILE,
)


@dataclass(frozen=True)
class Substring:
    """Exact-substring dedup (suffix arrays; spans of at least ``config.min_tokens`` tokens): ``config`` (a
    ``SubstringConfig``; its reading settings are the run's)."""

    name: ClassVar[str] = "substring"
    kind: ClassVar[Kind] = "span"
    # (on Ray the tables are by default datasets: OUT/<table>/ of per-input-file parts)
    outputs: ClassVar[Outputs] = Outputs(stats=STATS_FILE, table=DOCS_FILE, kept=OUTPUT_DIR,
                                         files=(SPANS_FILE, "substring_report.html", f"{SPANS_TABLE}/",
                                                f"{DOCS_TABLE}/"))
    config: SubstringConfig = field(default_factory=SubstringConfig)

    def __post_init__(self) -> None:
        check_config(self, SubstringConfig)

    def run(self, view: Any, out: str, env: Env) -> StepRun:
        from .dedup import substring_dedup

        cfg = dataclasses.replace(env.reading.apply(self.config), progress=env.progress)
        if cfg.work_dir is None and env.work_dir is not None and env.engine == "local":
            os.makedirs(env.work_dir, exist_ok=True)  # the spilled tokens go to the run's work directory
            cfg = dataclasses.replace(cfg, work_dir=env.work_dir)
        if env.table_layout is not None:  # a dataset asked of the local engine: refused, naming the flag
            from ..distributed import layout_of

            layout_of(env.table_layout, env.engine)
        if env.engine == "ray":
            from ..distributed import substring_dedup_ray

            res = substring_dedup_ray(view, cfg, out, env)
        else:
            res = substring_dedup(view, cfg, out, device=env.device, overwrite=env.overwrite, resume=env.resume)
        return StepRun(res, lambda: span_verdicts(out, DOCS_TABLE, res.stats),
                       os.path.join(out, OUTPUT_DIR), counts=(res.stats["counts"]["documents"], 0))
