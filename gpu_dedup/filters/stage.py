"""``gpu-dedup filter``: score every document, decide which to keep, write what was decided and why.

Order of the decision (``reason`` names the column that rejected a document; the first failing test wins):
``empty``, then the four families in ``FilterConfig.order`` (default language ID first, as CCNet and
FineWeb: lid, rules, perplexity, classifiers; ``--order`` changes it), then DSIR:
    empty       no non-space character: nothing to score (every score null in scores.parquet)
    lid_label   the language (the LID model's top label, or the script pre-filter's) is not one of --lang
    lid_prob    its probability is below --lid-threshold (--domain-relax: the relaxed threshold for code/math)
    lid_agreement  (paragraph_action="remove", lid_sentence_agreement) every paragraph's sentences disagreed
    gopher_*    the first rule that fails (rules.py: Gopher's, then c4_*, fineweb_*, chars_*, url_*)
    perplexity  above --perplexity's maximum, or not among the ``perplexity_keep`` fraction with the lowest
                perplexity, ranked over the documents still in when its turn comes (002:57: each stage judges
                what the stages before it kept; ties by input order: ``rank_keep``); a document of fewer than
                ``min_perplexity_tokens`` LM words, or in a language without a model, gets no perplexity verdict
    <name>_score  each classifier, in the order given (its threshold and direction, per domain with
                ``domain_thresholds`` or a card's ``thresholds_by``; with stochastic
                retention, its uniform draw ``<name>_draw`` not below P(keep | score): ``selection.uniform_draws``)
    dsir_weight among the documents every test above kept, DSIR keeps the --select with the largest
                Gumbel-perturbed log importance weights; the rest are "not selected"
Every score is computed for every document, whatever rejected it, so that retention at other thresholds
and the audit read the same numbers.

Passes over the input: one; a second when DSIR is on (the raw corpus's feature distribution is known only
after the first); one for ``domain_field``'s values (the reader carries one field besides the text); one more for the audit sample's texts (``audit``: 0 skips it) and one to write filtered/
(paragraph_action="remove": and one for the cut paragraphs' texts, ``paragraphs.write_paragraph_logs``;
c4_remove_lines: one for the lines C4's rules cut, ``paragraphs.write_line_cuts``).

Outputs (OUT): scores.parquet (id, row, every score column, domain, keep, reason; its declared schema is
``decisions.scores_schema``, the reason an int8 code over ``reasons(scorers)`` written as its name),
filtered/ (the kept records, byte for byte, in the input's format and layout; with paragraph_action="remove"
their failing paragraphs cut, and paragraphs.parquet, removed_paragraphs.parquet: ``paragraphs.py``; with
c4_remove_lines the lines C4's rules remove cut, logged in removed_lines.parquet), audit.parquet (random
accepted and rejected documents with their text and scores), run.json (the shared run header, then models,
order, retention per threshold, ``selections``: what each rank selection ranked, ``retained_tokens``: words
and documents after each stage, per language and per domain) and report.html: written through the run
skeleton (gpu_dedup/runtime/run.py).

What is decided per document, and what run.json says of it, is ``decide.py``'s (one set of functions for both
engines); ``engine="ray"`` runs them per input file on a Ray cluster (gpu_dedup/distributed/filter.py), the rank
selections and DSIR's from per-file summaries: the same outputs, byte for byte.
"""
from __future__ import annotations

import logging
import os
from typing import Any

import numpy as np
import pyarrow as pa

from .. import io
from ..decisions import scores_schema
from ..runtime.device import batch_bytes, note_compiling
from ..runtime.passes import progress
from ..runtime.program import check_ray_args
from ..errors import ConfigError
from ..runtime.run import Steps, owned, resources, write_table
from ..runtime.sources import SourceGuard
from .ahead import compile_stages, filter_ahead
from .config import FilterConfig
from .decide import (FilterResult, audit_sample, audit_stats, concat_columns, decide_columns,  # noqa: F401
                     decide_filter, decision_counts, filter_stats, finish_filter, lid_prob_note, reasons,
                     retention_table, scores_table, source_stats, writing_note)
from .dsir_step import DsirStep
from .paragraphs import ParagraphScores, describe as describe_paragraphs, write_documents
from .scorers import Scorers, field_values, url_reading
from .selection import rank_stats, retained_tokens, retention_curves, selections

logger = logging.getLogger(__name__)


def filter_corpus(source: Any, cfg: FilterConfig, output_dir: str | os.PathLike | None = None, *,
                  overwrite: bool = True, engine: str = "local", workers: int | None = None,
                  address: str | None = None, sources: SourceGuard | None = None,
                  work_dir: str | os.PathLike | None = None, resume: bool = False,
                  table_layout: str | None = None) -> FilterResult:
    """Score and filter ``source``: the steps of the module docstring.

    With ``output_dir`` the outputs are owned as ``deduplicate`` owns its (gpu_dedup/runtime/outputs.py): outside the
    inputs, locked for the run, an earlier run's files replaced only with ``overwrite``, this run's removed
    again if it fails.

    Args:
        source: paths, globs, directories, URLs, or an in-memory table (pyarrow or pandas).
        cfg: the ``FilterConfig``: models, thresholds, rules, order, audit.
        output_dir: where scores.parquet, run.json, the kept records and report.html go (None: in memory).
        overwrite: replace an earlier run's outputs (the default here; the CLI asks for --overwrite).
        engine: "local", or "ray": tasks per input file on a Ray cluster (gpu_dedup/distributed/filter.py) that
            score, decide and write, the rank selections and DSIR's from summaries of every file: the local run's
            outputs, byte for byte.
        workers: with engine="ray", the number of local Ray worker processes.
        address: with engine="ray", the address of a running cluster.
        sources: a ``SourceGuard`` (runtime/sources.py): what names each document's source (its input file, or a
            field's value); run.json's ``sources`` has each source's removals, and a run that removes more than
            ``max_removal`` of some source's documents raises ``SourceRemovalError`` after writing scores.parquet,
            run.json and the report, before filtered/.
        work_dir: with engine="ray", the tasks' per-file parts and done markers (a directory every node sees, or
            an fsspec URL; default OUT/work).
        resume: with engine="ray", reuse the finished tasks of an interrupted run in ``work_dir``; on either engine
            an earlier run's outputs in ``output_dir`` are replaced as with ``overwrite``.
        table_layout: "file" (OUT/scores.parquet, the local engine's) or "dataset" (OUT/scores/: one Parquet file
            per input file, written by the Ray tasks; the Ray engine's default); None: the engine's default.

    Returns:
        A ``FilterResult``: the per-document scores and decisions, and run.json's statistics.

    Raises:
        ConfigError: an unknown engine, ``workers`` / ``address`` without engine="ray", or engine="ray" without
            a work dir or output dir.
        GpuDedupError: a model, input or output directory that cannot be used (the message names it).
    """
    if engine not in ("local", "ray"):
        raise ConfigError(f"engine must be 'local' or 'ray', got {engine!r}")
    check_ray_args(engine, workers=workers, address=address)
    guard = sources or SourceGuard()
    if engine == "ray" or table_layout is not None:
        from .. import distributed

        table_layout = distributed.layout_of(table_layout, engine)
    if engine == "ray":
        from .. import distributed

        if output_dir is None and work_dir is None:
            raise ConfigError("filter on the Ray engine needs a shared work directory: pass work_dir (--work-dir) "
                              "or output_dir (-o)")
        work = os.fspath(work_dir) if work_dir is not None else os.path.join(os.fspath(output_dir), "work")
        run = lambda out: distributed.filter_files(source, cfg, out, guard, work=work,  # noqa: E731
                                                   workers=workers, address=address, resume=resume,
                                                   dataset=table_layout == "dataset")
    else:
        run = lambda out: _filter(source, cfg, out, guard)  # noqa: E731
    if output_dir is None:
        return run(None)
    from ..runtime.outputs import input_roots

    out = os.fspath(output_dir)
    roots = input_roots(source) + (input_roots(list(cfg.dsir_target)) if cfg.dsir_target else [])
    with owned(out, command="filter", overwrite=overwrite, resume=resume, roots=roots):
        return run(out)


def _filter(source: Any, cfg: FilterConfig, out: str | None, guard: SourceGuard = SourceGuard()) -> FilterResult:
    steps = Steps()
    timings = steps.timings
    with steps("score"):  # set-up (device, models) included; a first run's compiling is timings["compile"]
        device, threads = resources(cfg.device, cfg.threads)
        files = io.source_files(source)
        ahead = None
        if device == "cpu":  # before the models load (fastText's vocabulary kernels) and the bar: one line;
            ahead = filter_ahead(cfg)  # a first run: the rules' kernels compile in a second process meanwhile
        note_compiling(device, compile_stages(cfg), ahead=ahead.stages if ahead else ())
        try:
            scorers = Scorers.load(cfg, device)
            report = io.ReadReport()
            dsir = DsirStep(cfg, device) if cfg.dsir_target else None
            cols, file_rows = _score_pass(files, cfg, device, scorers, dsir, report)
        except BaseException:
            if ahead is not None:
                ahead.kill()
            raise
        if ahead is not None:
            ahead.wait()
    n = len(cols["id"])
    if cfg.domain_field:  # one more read: the reader carries one field besides the text (--url-field's)
        cols["domain_label"] = field_values(files, cfg, cfg.domain_field)
    keep, reason, para = decide_columns(cols, cfg, scorers)
    if para is not None and out is None:
        logger.warning("paragraph_action='remove': the cuts are written with output_dir only (filtered/)")
    dsir_stats = None
    if dsir is not None:
        with steps("dsir"):
            keep, reason, dsir_stats = dsir.select(files, cfg, cols, keep, reason)
    cols["keep"], cols["reason"] = keep, reason
    if scorers.lid is not None and not cfg.lang:
        lid_prob_note(cfg, int(np.sum(~keep & (reason.indices.to_numpy(zero_copy_only=False) ==
                                               reasons(scorers).index("lid_prob")))))
    table = scores_table(cols)
    stats = filter_stats(cfg, device, threads, files, report, scorers, decision_counts(table),
                         retention_table(table, scorers), timings)
    if dsir_stats is not None:
        stats["dsir"] = dsir_stats
    if any(c.spec.retention is not None for c in scorers.classifiers):
        stats["stochastic_retention"] = retention_curves(cols, scorers)
    if cfg.perplexity_keep is not None or cfg.perplexity_buckets:
        stats["perplexity_rank"] = rank_stats(cols, cfg, para)
    ranked = para.ranked if para is not None else cols.get("perplexity_ranked")
    stats["selections"] = selections(cfg, int(np.sum(ranked)) if ranked is not None else 0, para is not None,
                                     dsir_stats)
    stats["retained_tokens"] = retained_tokens(cols, cfg, scorers)
    if cfg.unit == "paragraph":
        stats["paragraph_rules"] = describe_paragraphs(cfg)
    if cfg.perplexity_lang:
        used = cols["perplexity_lang"]
        stats["perplexity_by_language"] = {**{lang: int((used == lang).sum()) for lang, _ in cfg.perplexity_lang},
                                           "(no model)": int((used == "").sum())}
    stats["engine"] = {"name": "local"}
    with steps("sources"):
        stats["sources"] = source_stats(files, cfg, guard, table, file_rows).stats(guard)
    stopped = bool(stats["sources"]["over_limit"])
    if out is not None:
        os.makedirs(out, exist_ok=True)
        with steps("write"):
            writing_note(cfg, int(keep.sum()))
            write_table(table, scores_schema(table.column_names), os.path.join(out, "scores.parquet"))
            if not stopped:  # a source over the limit: no kept records (sources.check below)
                stats.update(write_documents(files, cfg, cols["id"], para, keep, out, file_rows))
    if out is not None and cfg.audit:
        with steps("audit"):
            audit, percentiles = audit_sample(files, cfg, table)
            io.write_parquet_atomic(audit, os.path.join(out, "audit.parquet"))
            io.write_parquet_atomic(percentiles, os.path.join(out, "audit_percentiles.parquet"))
            stats["audit"] = audit_stats(audit, percentiles)
    steps.total()
    stats["throughput_docs_per_s"] = n / timings["score"] if timings["score"] > 0 else None
    finish_filter(out, stats)
    return FilterResult(table, stats, out)


# ------------------------------------------------------------------------------------------ the pass
def _score_pass(files, cfg: FilterConfig, device: str, scorers: Scorers, dsir, report) -> tuple[dict, list[int]]:
    parts: list[dict[str, Any]] = []
    paras: list[ParagraphScores] = []
    file_rows: list[int] = [0] * len(files)
    bb = batch_bytes(cfg.batch_bytes, device)
    with progress(cfg, "filter", files=files) as bar:
        for batch in io.iter_batches(files, id_field=cfg.id_field, text_field=cfg.text_field, batch_bytes=bb,
                                     on_error=cfg.on_error, report=report, **url_reading(cfg)):
            file_rows[batch.file_index] += len(batch.text)
            parts.append(scorers.columns(batch.text, batch.ids, batch.row_start, urls=batch.scope))
            if "paragraph_scores" in parts[-1]:
                paras.append(parts[-1].pop("paragraph_scores").shift(batch.row_start))
            if dsir is not None:
                dsir.add_raw(batch.text)
            bar.update(len(batch.text), batch.file_index)
    cols = concat_columns(parts or [scorers.no_rows()])
    if cfg.paragraph_action == "remove":
        cols["paragraph_scores"] = ParagraphScores.concat(paras)
    io.check_unique_ids(pa.chunked_array([cols["id"]], pa.string()), files, file_rows, id_field=cfg.id_field,
                        text_field=cfg.text_field, on_error=cfg.on_error)
    return cols, file_rows
