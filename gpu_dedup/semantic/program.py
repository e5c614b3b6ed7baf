"""SemDeDup as one step of a pipeline (``runtime.program.Step``, kind "dedup"): ``semantic_dedup`` over the step's
view; a semantic duplicate's representative is the kept end of its chain of matches (``decisions.fold_removals``).
The engine writes the step's kept records (it writes none of its own)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..decisions import row_positions
from ..runtime.program import Env, Kind, Outputs, StepRun, VerdictTable, Verdicts, check_config, file_sources
from .config import SemanticConfig


@dataclass(frozen=True)
class Semantic:
    """Semantic dedup (embeddings -> k-means -> within-cluster cosine): ``config`` (a ``SemanticConfig``)."""

    name: ClassVar[str] = "semantic"
    kind: ClassVar[Kind] = "dedup"
    outputs: ClassVar[Outputs] = Outputs(stats="semantic.json", table="semantic_decisions.parquet",
                                         files=("semantic/",))
    config: SemanticConfig = field(default_factory=SemanticConfig)

    def __post_init__(self) -> None:
        check_config(self, SemanticConfig)

    def run(self, view: Any, out: str, env: Env) -> StepRun:
        from ..config import RunConfig
        from .run import semantic_dedup

        reading = env.reading.apply(RunConfig(progress=env.progress))
        if env.engine == "ray":
            from ..distributed import semantic_dedup_ray

            res = semantic_dedup_ray(view, self.config, out, env, reading)
        else:
            res = semantic_dedup(view, self.config, out, device=env.device, run=reading)
        d = res.decisions
        ids = d["id"].combine_chunks()
        values = {"cosine": d["cosine"], "semantic_nearest_id": d["nearest_id"],
                  "semantic_cluster": d["semantic_cluster"]}
        verdicts = Verdicts(ids, file_sources(res.stats), np.asarray(d["keep"].to_numpy(zero_copy_only=False), bool),
                            d["reason"].combine_chunks(), row_positions(d["matched_id"], ids), None, values)
        table = VerdictTable(out, "semantic_decisions", tuple((k, k) for k in ("id", "keep", "reason", "matched_id")),
                             (("cosine", "cosine"), ("semantic_nearest_id", "nearest_id"),
                              ("semantic_cluster", "semantic_cluster")))
        return StepRun(res, verdicts, None, table=table)
