"""Filter, then deduplicate the survivors, in one read of the input: ``gpu-dedup run ... --lid MODEL
--lang en --classifier ...`` (``deduplicate(..., prefilter=FilterConfig(...))``).

Dedup's pass 1 already holds every batch's text; the filter scores it there (``stage.score_batch``) and decides
(``stage.decide``, the order of the filter command). The order is stated and fixed: filter first. A
document the filter rejects is ranked after every document it keeps, so it can never be the representative
that removes a kept one (exact groups keep their first member in keep order; the representative policy
removes a document only for one kept earlier in keep order; a component keeps its first), and its decision
is ``filtered`` whatever its duplicates. Its detailed reason and every score are in OUT/scores.parquet, and
any of those scores can order the duplicates (``--keep min:perplexity``, ``--keep max:quality_score``).
DSIR needs the whole corpus's distribution before it can weigh a document, so it is not available here
(run ``gpu-dedup filter`` first, then ``run`` on OUT/filtered).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import ConfigError, RunError
from .config import FilterConfig
from .scorers import Scorers
from .stage import concat_columns, decide, score_batch, scores_table


class Prefilter:
    """Collects the filter's columns batch by batch during pass 1 (``add``), in any order of batches."""

    def __init__(self, cfg: FilterConfig, device: str):
        if cfg.dsir_target:
            raise ConfigError("DSIR cannot run inside dedup's pass 1 (it needs the whole corpus first): run "
                              "`gpu-dedup filter ... --dsir-target` and then `gpu-dedup run OUT/filtered`")
        if cfg.perplexity_keep is not None or cfg.perplexity_buckets:
            raise ConfigError("perplexity_keep / perplexity_buckets rank the whole corpus, which dedup's pass 1 "
                              "reads batch by batch: run `gpu-dedup filter ... --perplexity MODEL:keep=F` and then "
                              "`gpu-dedup run OUT/filtered`")
        self.cfg = cfg
        self.device = device
        self.scorers = Scorers.load(cfg, device)
        self.parts: dict[int, dict[str, Any]] = {}

    @property
    def provides(self) -> set[str]:
        """The numeric score columns this prefilter computes (usable as ``--keep max:/min:<column>``)."""
        cols = {c.spec.column for c in self.scorers.classifiers}
        if self.scorers.lid is not None:
            cols.add("lid_prob")
        if self.scorers.has_lm:
            cols.add("perplexity")
        if self.scorers.rules is not None:
            from .rules import describe

            cols |= set(describe(self.scorers.rules))
        if self.cfg.domain.script_prefilter:
            cols.add("script_frac")
        return cols

    def add(self, row: int, ids: pa.Array, text: pa.Array) -> None:
        """Score and decide the batch whose first document is the run's row ``row``."""
        part = score_batch(text, ids, row, self.cfg, self.device, self.scorers)
        part["keep"], part["reason"] = decide(part, self.cfg, self.scorers)
        self.parts[row] = part

    def columns(self, n: int) -> dict[str, Any]:
        cols = concat_columns([self.parts[r] for r in sorted(self.parts)])
        if len(cols["row"]) != n or not np.array_equal(cols["row"], np.arange(n)):
            raise RunError(f"prefilter: scored {len(cols['row'])} of the run's {n} documents; every batch of "
                           f"pass 1 must be scored once")
        return cols

    def table(self, n: int) -> pa.Table:
        """scores.parquet of the run (the filter command's columns)."""
        return scores_table(self.columns(n))

    def describe(self) -> dict[str, Any]:
        return {"order": "filter, then deduplicate the documents the filter kept (one read of the input)",
                "models": self.scorers.describe()}
