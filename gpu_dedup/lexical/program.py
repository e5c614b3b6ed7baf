"""Exact + MinHash/LSH dedup as one step of a pipeline (``runtime.program.Step``): ``lexical.dedup.deduplicate``
over the step's view, its decisions as the verdicts the engine composes."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pyarrow.compute as pc

from ..config import RunConfig
from ..decisions import row_positions
from ..runtime.program import Env, Kind, Outputs, StepRun, VerdictTable, Verdicts, check_config


@dataclass(frozen=True)
class Dedup:
    """Exact and near-duplicate (MinHash/LSH, verified) dedup: ``config`` (a ``RunConfig``; its reading settings,
    device and threads are the run's), ``against`` / ``save_index`` (an index of earlier runs: ``deduplicate``)."""

    name: ClassVar[str] = "dedup"
    kind: ClassVar[Kind] = "dedup"
    outputs: ClassVar[Outputs] = Outputs(stats="run.json", table="decisions.parquet", kept="deduplicated",
                                         files=("report.html", "report/", "decisions/"))
    config: RunConfig = field(default_factory=RunConfig)
    against: str | None = None
    save_index: str | None = None
    # fused into this step (``gpu-dedup run``'s one read): a FilterConfig scoring pass 1, a SemanticConfig over the
    # survivors and its order, the Ray shuffle's key ranges (``deduplicate``'s arguments of those names)
    prefilter: Any = None
    semantic: Any = None
    semantic_order: str = "after"
    partitions: int | None = None

    def __post_init__(self) -> None:
        check_config(self, RunConfig)

    def run(self, view: Any, out: str, env: Env) -> StepRun:
        """``deduplicate`` over ``view`` into ``out``."""
        from .dedup import deduplicate

        cfg = env.reading.apply(self.config).replace(device=env.device, threads=env.threads, progress=env.progress)
        if not env.write_kept:
            cfg = cfg.replace(write_deduplicated=False)
        ray = {"workers": env.workers, "address": env.address, "partitions": self.partitions} \
            if env.engine == "ray" else {}
        res = deduplicate(view, cfg, out, against=self.against, save_index=self.save_index, overwrite=env.overwrite,
                          engine=env.engine, work_dir=env.work_dir, resume=env.resume, prefilter=self.prefilter,
                          semantic=self.semantic, semantic_order=self.semantic_order, sources=env.sources,
                          table_layout=env.table_layout, **ray)
        kept = os.path.join(out, self.outputs.kept) if cfg.write_deduplicated else None
        c = res.stats["counts"]
        semantic = [(c, c) for c in ("cosine", "semantic_nearest_id", "semantic_cluster") if self.semantic is not None]
        table = VerdictTable(out, "decisions", tuple((k, k) for k in ("id", "keep", "reason", "matched_id",
                                                                     "representative_id")),
                             (("jaccard", "jaccard"), *semantic), representative=True)
        return StepRun(res, lambda: decision_verdicts(res.decisions), kept, counts=(c["input"], c["removed"]),
                       table=table)


def decision_verdicts(d: Any) -> Verdicts:
    """A decisions table (``DECISIONS_SCHEMA``, a dedup run's) as the verdicts the engine folds: a removal's
    representative and match as positions in the table (-1: none, or a document of an index outside the run,
    whose id and cluster then travel as values)."""
    ids = d["id"].combine_chunks()
    keep = np.asarray(d["keep"].to_numpy(zero_copy_only=False), bool)
    rep = row_positions(d["representative_id"], ids)
    outside = ~keep & (rep < 0) & pc.is_valid(d["representative_id"]).to_numpy(zero_copy_only=False)
    values = {"jaccard": d["jaccard"]}
    if outside.any():  # an --against index's document: its id and cluster as the step wrote them
        values["representative_id"] = pc.if_else(outside, d["representative_id"], None)
        values["cluster_id"] = pc.if_else(outside, d["cluster_id"], None)
    extra = [c for c in ("cosine", "semantic_nearest_id", "semantic_cluster") if c in d.column_names]
    values.update({c: d[c] for c in extra})
    return Verdicts(ids, d["source"].combine_chunks(), keep, d["reason"].combine_chunks(),
                    row_positions(d["matched_id"], ids), rep, values)


