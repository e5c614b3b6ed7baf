"""One pipeline: a list of steps over one input, one composition rule, one engine.

    >>> from gpu_dedup import Pipeline, Filter, Dedup, Substring, Semantic
    >>> from gpu_dedup.filters import FilterConfig
    >>> Pipeline([Filter(FilterConfig(rules="gopher")), Dedup(), Substring(), Semantic()]).run("crawl/", "out")

Every program is a step of the one program shape (``runtime.program.Step``): ``Filter`` (filters/), ``Dedup``
(lexical/: exact + MinHash), ``Paragraph`` (paragraph/), ``Substring`` (substring/), ``Semantic`` (semantic/),
``Screen`` (screen/). A step sees the documents the steps before it kept, with the text the span steps left; every
removed document names the step, the reason and the document kept for it (``decisions.fold_removals``).

    engine      ``run_pipeline``: the local engine (views, composition, the final span pass, the outputs)
    recipe      ``load_recipe``: a YAML or TOML recipe (the steps and their flags) as a ``Pipeline``
    report      the run's report.html
    compose     ``run_dedup``: ``gpu-dedup run``'s few steps (dedup, paragraph, substring) in one OUT
    warmup      compile every command's kernels ahead
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Sequence

from ..errors import ConfigError
from ..runtime.cost import Price
from ..runtime.program import Env, Reading
from ..runtime.sources import SourceGuard

ENGINES = ("local", "ray")


class Pipeline:
    """Steps run in order over one input (module docstring).

    Args:
        steps: the steps, e.g. ``[Filter(FilterConfig(rules="gopher")), Dedup(), Substring()]``.
        device: "auto" (a GPU when one is usable), "cpu" or "cuda" (never a silent fallback).
        threads: CPU threads of the kernels (None: every core).
        reading: how every step reads its input (``runtime.program.Reading``: id and text fields, bad records,
            batch size); one setting for the whole run.
        progress: progress bars on stderr (off in the API).
        sources: a ``SourceGuard`` (runtime/sources.py): what names each document's source (its input file, or a
            field) and the largest share of a source's documents the run may remove (run.json ``sources``).
        price: a ``Price`` (runtime/cost.py): run.json's ``cost`` in money too.
    """

    def __init__(self, steps: Sequence[Any], *, device: str = "auto", threads: int | None = None,
                 reading: Reading | None = None, progress: bool = False, sources: SourceGuard | None = None,
                 price: Price | None = None) -> None:
        from .engine import check_steps

        self.steps = list(steps)
        check_steps(self.steps, "steps")
        self.env = Env(device=device, threads=threads, progress=progress, reading=reading or Reading(),
                       sources=sources or SourceGuard(), price=price)

    def __repr__(self) -> str:
        return f"Pipeline([{', '.join(type(s).__name__ for s in self.steps)}])"

    def run(self, source: Any, output_dir: str | os.PathLike, *, engine: str = "local", resume: bool = False,
            overwrite: bool = True, workers: int | None = None, address: str | None = None,
            work_dir: str | os.PathLike | None = None, table_layout: str | None = None) -> Any:
        """Run the steps over ``source`` into ``output_dir``.

        Args:
            source: path(s), glob(s) or directories of .jsonl / .jsonl.gz / .jsonl.zst / .parquet files, a pyarrow
                Table or a pandas DataFrame.
            output_dir: OUT: decisions.parquet (every input document once), deduplicated/ (the final records),
                run.json, report.html, and each step's own outputs in OUT/steps/NN-name/.
            engine: "local" (this process) or "ray" (every step's Ray path, on one cluster started once: ``workers``
                local processes, or the running one at ``address``; the same decisions and outputs).
            resume: reuse every finished step whose settings, and every earlier step's, are unchanged (on Ray also
                the finished tasks of the step that was interrupted).
            overwrite: replace an earlier run in OUT (False: refuse one).
            workers, address: the Ray cluster (``engine="ray"``).
            work_dir: the steps' intermediate files (on Ray a path every node sees, or an fsspec URL).
            table_layout: each step's per-document tables as one file each ("file") or as folders of
                per-input-file parts the Ray tasks write ("dataset", the Ray engine's default); None: the engine's
                default. OUT's composed decisions.parquet is one file.

        Returns:
            A ``PipelineResult``: ``.decisions``, ``.stats`` (run.json), ``.steps``, ``.summary()``, ``.filter(df)``.

        Raises:
            GpuDedupError: a bad setting, input or output directory (the message names it and the fix).
        """
        from .engine import run_pipeline

        if engine not in ENGINES:
            raise ConfigError(f"engine must be one of {ENGINES}, got {engine!r}")
        env = dataclasses.replace(self.env, engine=engine, workers=workers, address=address, resume=resume,
                                  work_dir=os.fspath(work_dir) if work_dir is not None else None,
                                  table_layout=table_layout)
        return run_pipeline(self.steps, source, output_dir, env=env, resume=resume, overwrite=overwrite)


def steps_table() -> dict[str, type]:
    """Every step a recipe can name: step name -> its class (a declared table, not a lookup by string)."""
    from ..filters.program import Filter
    from ..lexical.program import Dedup
    from ..paragraph.program import Paragraph
    from ..screen.program import Screen
    from ..semantic.program import Semantic
    from ..substring.program import Substring

    return {c.name: c for c in (Filter, Dedup, Paragraph, Substring, Semantic, Screen)}


__all__ = ["ENGINES", "Env", "Pipeline", "Reading", "steps_table"]
