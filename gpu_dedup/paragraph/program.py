"""Paragraph dedup as one step of a pipeline (``runtime.program.Step``, kind "span"): ``paragraph_dedup`` over the
step's view; it cuts repeated units and removes no document, so its verdicts keep every one."""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..runtime.program import Env, Kind, Outputs, StepRun, check_config, span_verdicts
from .dedup import DOCS_TABLE, OUTPUT_DIR, SPANS_TABLE, ParagraphConfig


@dataclass(frozen=True)
class Paragraph:
    """Paragraph-level dedup (keep-first or remove-all; a Bloom filter or an exact set): ``config`` (a
    ``ParagraphConfig``; its reading settings are the run's)."""

    name: ClassVar[str] = "paragraph"
    kind: ClassVar[Kind] = "span"
    # (on Ray the tables are by default datasets: OUT/<table>/ of per-input-file parts)
    outputs: ClassVar[Outputs] = Outputs(stats="paragraph_dedup.json", table=f"{DOCS_TABLE}.parquet",
                                         kept=OUTPUT_DIR, files=(f"{SPANS_TABLE}.parquet", f"{SPANS_TABLE}/",
                                                                 f"{DOCS_TABLE}/"))
    config: ParagraphConfig = field(default_factory=ParagraphConfig)

    def __post_init__(self) -> None:
        check_config(self, ParagraphConfig)

    def run(self, view: Any, out: str, env: Env) -> StepRun:
        from .dedup import paragraph_dedup

        cfg = dataclasses.replace(env.reading.apply(self.config), progress=env.progress)
        if env.table_layout is not None:  # a dataset asked of the local engine: refused, naming the flag
            from ..distributed import layout_of

            layout_of(env.table_layout, env.engine)
        if env.engine == "ray":
            from ..distributed import paragraph_dedup_ray

            res = paragraph_dedup_ray(view, cfg, out, env)
        else:
            res = paragraph_dedup(view, cfg, out, device=env.device)
        return StepRun(res, lambda: span_verdicts(out, DOCS_TABLE, res.stats),
                       os.path.join(out, OUTPUT_DIR), counts=(res.stats["counts"]["documents"], 0))
