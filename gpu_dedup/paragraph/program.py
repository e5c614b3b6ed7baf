"""Paragraph dedup as one step of a pipeline (``runtime.program.Step``, kind "span"): ``paragraph_dedup`` over the
step's view; it cuts repeated units and removes no document, so its verdicts keep every one."""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..runtime.program import Env, Kind, Outputs, StepRun, check_config, span_verdicts
from .dedup import OUTPUT_DIR, ParagraphConfig

DOCS_FILE = "paragraph_docs.parquet"


@dataclass(frozen=True)
class Paragraph:
    """Paragraph-level dedup (keep-first or remove-all; a Bloom filter or an exact set): ``config`` (a
    ``ParagraphConfig``; its reading settings are the run's)."""

    name: ClassVar[str] = "paragraph"
    kind: ClassVar[Kind] = "span"
    outputs: ClassVar[Outputs] = Outputs(stats="paragraph_dedup.json", table=DOCS_FILE, kept=OUTPUT_DIR,
                                         files=("removed_spans.parquet",))
    config: ParagraphConfig = field(default_factory=ParagraphConfig)

    def __post_init__(self) -> None:
        check_config(self, ParagraphConfig)

    def run(self, view: Any, out: str, env: Env) -> StepRun:
        from .dedup import paragraph_dedup

        cfg = dataclasses.replace(env.reading.apply(self.config), progress=env.progress)
        if env.engine == "ray":
            from ..distributed import paragraph_dedup_ray

            res = paragraph_dedup_ray(view, cfg, out, env)
        else:
            res = paragraph_dedup(view, cfg, out, device=env.device)
        return StepRun(res, lambda: span_verdicts(os.path.join(out, DOCS_FILE), res.stats),
                       os.path.join(out, OUTPUT_DIR), counts=(res.stats["counts"]["documents"], 0))
