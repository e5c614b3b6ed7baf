"""A pipeline run's result: each step as it ran (``StepRecord``) and the run's (``PipelineResult``: the surface
every program's result shares, ``runtime.run.RunResult``), its decisions in memory, or read when first asked for:
``AloneResult`` (a run that composed nothing: its removing step's verdicts as composed ones), ``PartsResult`` (a
run composed by tasks: OUT's decisions, either layout)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from ..decisions import base_decisions, fold_removals
from ..runtime.run import RunResult


@dataclass
class StepRecord:
    """One step as it ran: its position, name, kind, directory, the documents it saw and removed, its seconds,
    whether it was reused (``resume``) and its program's result (None when reused)."""

    index: int
    name: str
    kind: str
    directory: str
    seen: int
    removed: int
    seconds: float
    phase: str = "main"  # "main", "view" (a span step's cut for a later step), "final" (over the survivors)
    reused: bool = False
    result: Any = None
    cost: dict[str, Any] | None = None  # the step's own meter (cost.Meter.usage); None when reused or not run

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "kind": self.kind, "dir": self.directory,
                "phase": self.phase, "documents": self.seen, "removed": self.removed,
                "seconds": round(self.seconds, 3), "reused": self.reused, "cost": self.cost}


@dataclass
class PipelineResult(RunResult):
    """decisions: one row per input document (``pipeline_schema``), in input order; stats: run.json; steps: each
    step as it ran (``StepRecord``); output_dir. ``summary()``, ``filter(data)``, ``keep_mask``, ``kept``,
    ``to_pandas()``: ``run.RunResult``'s, the surface every program's result shares."""

    TABLE = "decisions"
    decisions: pa.Table
    stats: dict[str, Any]
    steps: list[StepRecord] = field(default_factory=list)
    output_dir: str | None = None

    def summary(self) -> str:
        c = self.stats["counts"]
        line = f"{c['input']:,} documents: {c['kept']:,} kept, {c['removed']:,} removed"
        by = ", ".join(f"{k} {v:,}" for k, v in c["by_step"].items() if v)
        return line + (f" (by step: {by})" if by else "")


class AloneResult(PipelineResult):
    """The result of a run that composed nothing (``_uncomposed``): its counts from the steps', its decisions (the
    first step's verdicts as composed ones: the later steps remove nothing) built only when asked for."""

    def __init__(self, run: Any, stats: dict[str, Any]):
        self._run, self.stats, self.steps, self.output_dir = run, stats, run.records, run.out
        self._table: pa.Table | None = None

    @property
    def decisions(self) -> pa.Table:  # type: ignore[override]
        if self._table is None:
            step, v = self._run.alone[0], self._run.alone[1].verdicts
            values = {k: val for k, val in v.values.items()}
            values["step"] = pa.array([step.name] * len(v.ids), pa.string())
            base = base_decisions(v.ids, v.sources, step.name == "semantic")
            self._table = fold_removals(base, np.arange(len(v.ids), dtype=np.int64), ~v.keep, v.matched, v.reason,
                                        representative=v.representative, kind=step.kind,
                                        values={k: x for k, x in values.items() if k in base.column_names})
        return self._table


class PartsResult(PipelineResult):
    """The result of a run composed by tasks: its decisions read from OUT when first asked for."""

    def __init__(self, stats: dict[str, Any], records: list[StepRecord], out: str):
        self.stats, self.steps, self.output_dir, self._table = stats, records, out, None

    @property
    def decisions(self) -> pa.Table:  # type: ignore[override]
        if self._table is None:
            from ..decisions import read_table

            self._table = read_table(self.output_dir, "decisions")
        return self._table
