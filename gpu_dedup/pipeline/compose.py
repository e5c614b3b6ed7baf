"""One ``gpu-dedup run`` as one Python call: the document-level dedup (``pipeline.deduplicate``) composed with the
reversible span stages (paragraph dedup, exact-substring dedup) in the order asked for, over one owned OUT.

  check_composition   the preconditions of the order: an "after" stage reads OUT/deduplicated/ (so the run must
                      write it), lexical=False needs the semantic stage
  stage_configs       the span stages read and normalize as the run does (fields, batches, bad records, the
                      normalization, the keep order, the progress bar): taken from the RunConfig
  run_dedup           own OUT, then the stages in order; every stage's result, in the order they ran

Orders (``paragraph_order`` / ``substring_order``): "after" (default): over the documents the document stages kept
(OUT/deduplicated/; the substring stage after an "after" paragraph stage reads OUT/paragraph_deduplicated/, so
both cuts are in one output); "before": the document stages read the stage's output (its cut text), and when they
remove documents the stage runs again over the survivors' own records (``engine``: a cut never loses its kept
copy), OUT/deduplicated/ holding those records; "beside": both read the input (separate results).
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any, Literal, get_args

from ..config import RunConfig
from ..errors import ConfigError
from ..io import is_url
from ..lexical.dedup import DedupResult, check_arguments, check_work_dir, deduplicate
from ..paragraph.dedup import ParagraphConfig
from ..runtime.outputs import check_outside_inputs, input_roots, own
from ..substring.config import SubstringConfig

StageOrder = Literal["after", "before", "beside"]
ORDERS: tuple[str, ...] = get_args(StageOrder)
DEDUPLICATED = "deduplicated"  # the document stages' kept records, in OUT


@dataclass(frozen=True)
class RunStages:
    """``run_dedup``'s results: the document-level dedup's, each span stage's (None when not run), and the
    order the stages ran in ("paragraph", "substring", "dedup")."""

    dedup: DedupResult
    paragraph: Any = None  # paragraph.dedup.ParagraphResult
    substring: Any = None  # substring.dedup.SubstringResult
    order: tuple[str, ...] = ("dedup",)


def check_composition(cfg: RunConfig, *, paragraph: ParagraphConfig | None, paragraph_order: str,
                      substring: SubstringConfig | None, substring_order: str, engine: str, lexical: bool,
                      semantic: Any, output_dir: Any) -> None:
    """Raise ``ValueError`` naming the arguments when the stages cannot run in the order asked for."""
    for name, order in (("paragraph_order", paragraph_order), ("substring_order", substring_order)):
        if order not in ORDERS:
            raise ConfigError(f"{name} must be one of {ORDERS}, got {order!r}")
    if paragraph is not None and not isinstance(paragraph, ParagraphConfig):
        raise ConfigError(f"paragraph must be a ParagraphConfig or None, got {paragraph!r}")
    if substring is not None and not isinstance(substring, SubstringConfig):
        raise ConfigError(f"substring must be a SubstringConfig or None, got {substring!r}")
    if not lexical and semantic is None:
        raise ConfigError("lexical=False skips MinHash/LSH, which only the `semantic` stage replaces: give it, or "
                          "keep the lexical stages")
    if (paragraph is not None or substring is not None) and output_dir is None:
        raise ConfigError("the paragraph and substring stages write into output_dir: pass one")
    if paragraph is not None and paragraph_order == "after" and not cfg.write_deduplicated:
        raise ConfigError("paragraph_order='after' cuts paragraphs from OUT/deduplicated/, which "
                          "write_deduplicated=False turns off: drop one of them, or use paragraph_order='beside'")
    if substring is not None and substring_order == "after" and not cfg.write_deduplicated:
        raise ConfigError("substring_order='after' cuts spans from OUT/deduplicated/, which write_deduplicated=False "
                          "turns off: drop one of them, or use substring_order='beside'")
    if substring is not None:  # its missing extra: one line before anything is read, not after the lexical stages
        from ..substring.suffix import require_library

        require_library(cfg.device)


def stage_configs(cfg: RunConfig, paragraph: ParagraphConfig | None,
                  substring: SubstringConfig | None) -> tuple[ParagraphConfig | None, SubstringConfig | None]:
    """The span stages' configs with the run's reading, normalization, keep order and progress settings."""
    if paragraph is not None:
        paragraph = dataclasses.replace(paragraph, progress=cfg.progress, normalize=cfg.normalize,
                                        id_field=cfg.id_field, text_field=cfg.text_field,
                                        batch_bytes=cfg.batch_bytes, on_error=cfg.on_error)
    if substring is not None:
        substring = dataclasses.replace(substring, keep=cfg.cluster.keep, normalize=cfg.normalize,
                                        id_field=cfg.id_field, text_field=cfg.text_field, on_error=cfg.on_error)
    return paragraph, substring


def run_dedup(source: Any, config: RunConfig | None = None, output_dir: str | os.PathLike | None = None, *,
              paragraph: ParagraphConfig | None = None, paragraph_order: StageOrder = "after",
              substring: SubstringConfig | None = None, substring_order: StageOrder = "after",
              lexical: bool = True, semantic: Any = None, semantic_order: str = "after",
              against: str | os.PathLike | None = None, save_index: str | os.PathLike | None = None,
              work_dir: str | os.PathLike | None = None, resume: bool = False, overwrite: bool = True,
              engine: str = "local", workers: int | None = None, address: str | None = None,
              partitions: int | None = None, prefilter: Any = None, sources: Any = None,
              price: Any = None, table_layout: str | None = None) -> RunStages:
    """``deduplicate`` with paragraph and/or exact-substring dedup in the stated order (module docstring), as one
    flat pipeline (``engine.run_pipeline``, layout "flat": every step writes into ``output_dir``, which this call
    owns as the "run" command: outside the inputs, locked, an earlier run's files replaced only with
    ``overwrite``, this run's removed again if any step fails). A span step "before" the document stages cuts
    the text they compare; when they remove documents it runs again over the survivors' own records, so that
    every cut keeps a copy in a kept document, and OUT/deduplicated/ holds the survivors' own records.

    Args:
        source, config, output_dir, against, save_index, work_dir, resume, overwrite, engine, workers, address,
            partitions, semantic, semantic_order, prefilter: as ``deduplicate``.
        paragraph: run paragraph dedup with these settings (its reading, normalization and progress settings
            are the run's: ``stage_configs``); None: not run.
        paragraph_order: "after" (default), "before" or "beside" the document stages.
        substring: run exact-substring dedup with these settings (keep order and reading settings: the run's).
        substring_order: as ``paragraph_order``; "after" follows an "after" paragraph stage.
        lexical: False skips MinHash/LSH (``cluster.near=False``), for a semantic-only run; exact duplicates
            are still removed.
        sources: a ``SourceGuard`` (each document's source; the largest share of one a run may remove: the dedup
            step stops before deduplicated/ when a source lost more). price: a ``Price`` (run.json's ``cost``).
        table_layout: the per-document tables (decisions, and the span stages' removed_spans, paragraph_docs,
            substring_spans, substring_docs) as one file each ("file") or as folders of per-input-file parts
            ("dataset": the Ray engine's); None: the engine's default (``runtime.program.Env``).

    Returns:
        A ``RunStages``: every stage's result, in the order they ran.

    Raises:
        ValueError: an order whose preconditions fail (``check_composition``), or what ``deduplicate`` and the
            stages raise.
        FileExistsError: ``output_dir`` holds an earlier run and ``overwrite`` is False.
    """
    cfg = config or RunConfig()
    check_composition(cfg, paragraph=paragraph, paragraph_order=paragraph_order, substring=substring,
                      substring_order=substring_order, engine=engine, lexical=lexical, semantic=semantic,
                      output_dir=output_dir)
    ray = dict(workers=workers, address=address, partitions=partitions) if engine == "ray" else {}
    # the dedup step's own refusals, here: none may come after a Ray cluster started or a step ran
    semantic, _ = check_arguments(cfg, engine=engine, semantic=semantic, semantic_order=semantic_order,
                                  prefilter=prefilter, table_layout=table_layout, workers=workers, address=address,
                                  partitions=partitions)
    if not lexical:
        cfg = cfg.replace(cluster__near=False)
    pcfg, scfg = stage_configs(cfg, paragraph, substring)
    if output_dir is None:  # in memory: no span stage (check_composition)
        return RunStages(deduplicate(source, cfg, None, against=against, save_index=save_index, semantic=semantic,
                                     semantic_order=semantic_order, work_dir=work_dir, resume=resume,
                                     engine=engine, overwrite=overwrite, prefilter=prefilter, sources=sources,
                                     **ray))
    from ..lexical.program import Dedup
    from ..paragraph.program import Paragraph
    from ..runtime.program import Env, Reading
    from ..substring.program import Substring
    from .engine import run_pipeline

    out = os.fspath(output_dir)
    # OUT (with every stage's outputs), the work dir and the index are checked, locked and their earlier run
    # replaced before anything is written; the pipeline's and deduplicate's own ownership join this one
    if save_index is not None:
        from ..lexical.index import check_index_target

        check_index_target(os.fspath(save_index), os.fspath(against) if against is not None else None)
    roots = input_roots(source) + (input_roots(os.fspath(against)) if against is not None else [])
    check_work_dir(work_dir, engine, out)  # before own(): a URL is no directory to make here
    check_outside_inputs({"output_dir": out, "work_dir": work_dir, "save_index": save_index}, roots)
    wd = work_dir if work_dir is not None else (os.path.join(out, "work") if resume else None)
    dedup = Dedup(cfg, os.fspath(against) if against is not None else None,
                  os.fspath(save_index) if save_index is not None else None, prefilter=prefilter, semantic=semantic,
                  semantic_order=semantic_order, partitions=partitions)
    steps: list[Any] = []
    beside: list[tuple[str, Any]] = []
    for name, stage_cfg, order in (("paragraph", pcfg, paragraph_order), ("substring", scfg, substring_order)):
        if stage_cfg is not None and order == "before":
            steps.append(Paragraph(stage_cfg) if name == "paragraph" else Substring(stage_cfg))
        elif stage_cfg is not None and order == "beside":
            beside.append((name, stage_cfg))
    steps.append(dedup)
    for name, stage_cfg, order in (("paragraph", pcfg, paragraph_order), ("substring", scfg, substring_order)):
        if stage_cfg is not None and order == "after":
            steps.append(Paragraph(stage_cfg) if name == "paragraph" else Substring(stage_cfg))
    from ..runtime.sources import SourceGuard

    env = Env(device=cfg.device, threads=cfg.threads, progress=cfg.progress, reading=Reading.of(cfg),
              overwrite=overwrite, engine=engine, workers=workers, address=address,
              work_dir=os.fspath(wd) if wd is not None else None, resume=resume, sources=sources or SourceGuard(),
              price=price, table_layout=table_layout)
    locked_wd = None if wd is not None and is_url(os.fspath(wd)) else wd  # not locked: the Ray probe checks it
    results: dict[str, Any] = {}
    with own(out, work_dir=locked_wd, index_dir=save_index, command="run", overwrite=overwrite, resume=resume,
             roots=roots, flag="overwrite=True"):
        for name, stage_cfg in beside:  # both read the input: separate results, outside the composition
            step = Paragraph(stage_cfg) if name == "paragraph" else Substring(stage_cfg)
            results[name] = step.run(source, out, env).result  # the engine's program (on Ray: its tasks)
        run = run_pipeline(steps, source, out, env=env, layout="flat", command="run", resume=resume,
                           overwrite=overwrite)
        last: dict[str, int] = {name: -1 for name, _ in beside}
        for k, rec in enumerate(run.steps):  # a step's last run (over the survivors when it ran twice) is its result
            results[rec.name], last[rec.name] = rec.result, k
        amend: dict[str, Any] = {}
        if steps[0] is not dedup and run.stats.get("input_read"):
            # the dedup read a span step's survivors: what that step's read of the input skipped is OUT's record
            # (its own file was replaced when it ran again over the survivors)
            amend["input_read"] = run.stats["input_read"]
        if pcfg is not None and pcfg.fp_sample > 0:  # the measured Bloom false-positive rate beside its target
            amend["paragraph_fp_audit"] = {"file": "paragraph_dedup.json", **results["paragraph"].stats["fp_audit"]}
        if amend:
            _amend_run_json(out, amend, source)
    order = tuple(sorted(last, key=last.get))
    return RunStages(results["dedup"], results.get("paragraph"), results.get("substring"), order)


def _amend_run_json(out: str, keys: dict[str, Any], source: Any) -> None:
    """OUT/run.json (the dedup step's) with ``keys`` added, then the report drawn again, so that it shows them
    whatever the stage order."""
    import json

    from .. import io
    from ..report import write_report
    from ..runtime.run import report_safely

    path = os.path.join(out, "run.json")
    with open(path, encoding="utf-8") as fh:
        stats = json.load(fh)
    stats.update(keys)
    io.write_json_atomic(stats, path)
    if os.path.exists(os.path.join(out, "report.html")):
        report_safely(out, lambda: write_report(out, source=source))
