"""Scoring inside dedup's pass 1: ``ScoreStep``, the filter's scoring step (``Scorers.columns``) as one of
pass 1's per-batch steps (lexical/signatures.py), in one read of the input. Two uses, one mechanism:

    run --score NAME=MODEL     ``ScoreStep.for_scores(RunConfig.scores)``: a classifier scored as column
                               NAME_score (its label resolved as ``--classifier`` resolves it), only to order
                               the duplicates (``--keep max:NAME_score``); it decides nothing. Stateless, so it
                               runs on any engine and its values are stored in the work dir's pieces.
    run --lid/--classifier/... ``ScoreStep(FilterConfig, decides=True)`` (``deduplicate(..., prefilter=)``):
                               the filter scores every batch and decides (``stage.decide_filter``, the order of the
                               filter command), before dedup; every score and the detailed reason go to
                               OUT/scores.parquet (``table``). Local engine, no work dir: it keeps every
                               batch's columns.

The prefilter's order is stated and fixed: filter first. A document the filter rejects is ranked after every
document it keeps, so it can never be the representative that removes a kept one (exact groups keep their
first member in keep order; the representative policy removes a document only for one kept earlier in keep
order; a component keeps its first), and its decision is ``filtered`` whatever its duplicates. Any of its
scores can order the duplicates (``--keep min:perplexity``, ``--keep max:quality_score``). DSIR needs the
whole corpus's distribution before it can weigh a document, so it is not available here (run
``gpu-dedup filter`` first, then ``run`` on OUT/filtered).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from ..config import SCORE_RE
from ..errors import ConfigError, RunError
from .config import ClassifierSpec, FilterConfig
from .scorers import Scorers
from .decide import concat_columns, decide_filter, scores_table


def check_in_pass1(cfg: FilterConfig) -> None:
    """Refuse the filter settings that need the whole corpus before deciding one document (dedup's pass 1
    reads it batch by batch), naming the two-step command.

    Args:
        cfg: the prefilter's FilterConfig.

    Raises:
        ConfigError: DSIR, paragraph_action="remove", perplexity_keep, perplexity_buckets or domain_field.
    """
    if cfg.paragraph_action == "remove":
        raise ConfigError("paragraph_action='remove' cuts paragraphs from the filtered output: run `gpu-dedup "
                          "filter ... --paragraph-action remove` and then `gpu-dedup run OUT/filtered`")
    if cfg.dsir_target:
        raise ConfigError("DSIR cannot run inside dedup's pass 1 (it needs the whole corpus first): run "
                          "`gpu-dedup filter ... --dsir-target` and then `gpu-dedup run OUT/filtered`")
    if cfg.perplexity_keep is not None or cfg.perplexity_buckets:
        raise ConfigError("perplexity_keep / perplexity_buckets rank the whole corpus, which dedup's pass 1 "
                          "reads batch by batch: run `gpu-dedup filter ... --perplexity MODEL:keep=F` and then "
                          "`gpu-dedup run OUT/filtered`")
    if cfg.domain_field is not None:
        raise ConfigError("domain_field is read in a pass of its own, which dedup's pass 1 does not make: run "
                          "`gpu-dedup filter ... --domain-field COLUMN` and then `gpu-dedup run OUT/filtered` (or "
                          "give the domains by a model: domain_model)")


class ScoreStep:
    """A per-batch step of dedup's pass 1 (the ``BatchStep`` shape of lexical/signatures.py): scores each
    batch with ``Scorers.columns`` and returns the columns pass 1 keeps: ``keep_values`` (float64, the
    ``keep_column`` this step supplies, when it is one of its columns) and, when ``decides``, ``filter_pass``
    (bool: the filter kept the document). A deciding step also keeps every batch's columns for ``table``."""

    timing = "score"  # pass 1's timing of its time
    raw_text = True   # it scores the raw text, read on the host (pass 1 then does not decode on the device)

    def __init__(self, cfg: FilterConfig, device: str, *, decides: bool = True, keep_column: str | None = None,
                 scorers: Scorers | None = None):
        if decides:
            check_in_pass1(cfg)
        self.cfg = cfg
        self.device = device
        self.decides = decides
        self.every_batch = decides  # its scores.parquet needs every batch's columns: no work-dir piece holds them
        self.scorers = scorers if scorers is not None else Scorers.load(cfg, device)  # (tests: fake models)
        self.keep_column = keep_column if keep_column in self.provides else None
        self.supplies = (("keep_values",) if self.keep_column is not None else ()) + \
            (("filter_pass",) if decides else ())
        self.parts: dict[int, dict[str, Any]] = {}

    @classmethod
    def for_scores(cls, scores: tuple[str, ...], device: str, keep_column: str | None) -> "ScoreStep":
        """The step of ``RunConfig.scores`` (``--score NAME=MODEL``, validated by ``config.score_columns``):
        each a classifier with no threshold, scored on the whole document, deciding nothing."""
        specs = tuple(ClassifierSpec(name=m.group(1), model=m.group(2))
                      for m in (SCORE_RE.match(item) for item in scores))
        return cls(FilterConfig(classifiers=specs, device=device, audit=0, write_filtered=False), device,
                   decides=False, keep_column=keep_column)

    @property
    def provides(self) -> set[str]:
        """The numeric score columns this step computes (usable as ``--keep max:/min:<column>``)."""
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

    def __call__(self, b) -> dict[str, np.ndarray]:
        """Score (and decide) pass 1's batch ``b`` (signatures.PassBatch: run row, batch, its text's bytes on
        the device)."""
        part = self.scorers.columns(b.batch.text, b.batch.ids, b.row, buffers=(b.data, b.offsets))
        out: dict[str, np.ndarray] = {}
        if self.keep_column is not None:
            out["keep_values"] = np.asarray(part[self.keep_column], np.float64)
        if self.decides:
            part["keep"], part["reason"] = decide_filter(part, self.cfg, self.scorers)
            self.parts[b.row] = part
            out["filter_pass"] = np.asarray(part["keep"], bool)
        return out

    def columns(self, n: int, first: int = 0) -> dict[str, Any]:
        """Every batch's columns, in row order: rows ``first`` .. ``first + n - 1`` of the run (a Ray sign task's
        file starts at its first run row)."""
        cols = concat_columns([self.parts[r] for r in sorted(self.parts)])
        if len(cols["row"]) != n or not np.array_equal(cols["row"], np.arange(first, first + n)):
            raise RunError(f"prefilter: scored {len(cols['row'])} of the run's {n} documents; every batch of "
                           f"pass 1 must be scored once")
        return cols

    def table(self, n: int, first: int = 0) -> pa.Table:
        """scores.parquet of the run (the filter command's columns; ``columns``' rows)."""
        return scores_table(self.columns(n, first))

    def describe(self) -> dict[str, Any]:
        return {"order": "filter, then deduplicate the documents the filter kept (one read of the input)",
                "models": self.scorers.describe()}
