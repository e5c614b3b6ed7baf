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
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import io
from ..decisions import FILTER_KEPT, filter_reasons, reason_array, scores_schema, value_counts
from ..runtime.device import batch_bytes, note_compiling, set_threads
from ..runtime.passes import progress
from ..errors import ConfigError, RunError
from ..runtime.heartbeat import phase
from ..runtime.run import RunResult, Steps, finish, header, owned, resources, write_table
from ..runtime.sources import SourceGuard, Tally, check as check_sources, source_labels
from .ahead import compile_stages, filter_ahead
from .config import FilterConfig
from .dsir_step import DsirStep
from .paragraphs import (ParagraphScores, describe as describe_paragraphs, paragraph_pass, perplexity_judged,
                         write_documents)
from .scorers import Scorers, field_values, url_reading
from .selection import (AUDIT_PERCENTILES, percentile_picks, perplexity_buckets, rank_keep, rank_stats,
                        retained_tokens, retention, retention_curves, selections)

logger = logging.getLogger(__name__)


@dataclass
class FilterResult(RunResult):
    """scores: one row per input document (``scores.parquet``); stats: what run.json holds. ``summary()``,
    ``filter(data)``, ``keep_mask``, ``kept``, ``removed``, ``to_pandas()``: ``run.RunResult``'s, the surface
    every program's result shares."""

    TABLE = "scores"
    scores: pa.Table
    stats: dict[str, Any]
    output_dir: str | None = None

    @property
    def keep(self) -> np.ndarray:
        """bool (n,): the ``keep`` column (``keep_mask``)."""
        return self.scores["keep"].to_numpy(zero_copy_only=False)


def filter_corpus(source: Any, cfg: FilterConfig, output_dir: str | os.PathLike | None = None, *,
                  overwrite: bool = True, engine: str = "local", workers: int | None = None,
                  address: str | None = None, sources: SourceGuard | None = None) -> FilterResult:
    """Score and filter ``source``: the steps of the module docstring.

    With ``output_dir`` the outputs are owned as ``deduplicate`` owns its (gpu_dedup/runtime/outputs.py): outside the
    inputs, locked for the run, an earlier run's files replaced only with ``overwrite``, this run's removed
    again if it fails.

    Args:
        source: paths, globs, directories, URLs, or an in-memory table (pyarrow or pandas).
        cfg: the ``FilterConfig``: models, thresholds, rules, order, audit.
        output_dir: where scores.parquet, run.json, the kept records and report.html go (None: in memory).
        overwrite: replace an earlier run's outputs (the default here; the CLI asks for --overwrite).
        engine: "local", or "ray": one scoring task per input file on a Ray cluster. The scores are the
            local run's; the decisions, DSIR's selection and the outputs are made here, as locally.
        workers: with engine="ray", the number of local Ray worker processes.
        address: with engine="ray", the address of a running cluster.
        sources: a ``SourceGuard`` (runtime/sources.py): what names each document's source (its input file, or a
            field's value); run.json's ``sources`` has each source's removals, and a run that removes more than
            ``max_removal`` of some source's documents raises ``SourceRemovalError`` after writing scores.parquet,
            run.json and the report, before filtered/.

    Returns:
        A ``FilterResult``: the per-document scores and decisions, and run.json's statistics.

    Raises:
        ConfigError: an unknown engine, or ``workers`` / ``address`` without engine="ray".
        GpuDedupError: a model, input or output directory that cannot be used (the message names it).
    """
    if engine not in ("local", "ray"):
        raise ConfigError(f"engine must be 'local' or 'ray', got {engine!r}")
    if engine == "local" and (workers is not None or address is not None):
        raise ConfigError("workers / address need engine='ray' (--engine ray)")
    ray_args = (workers, address) if engine == "ray" else None
    guard = sources or SourceGuard()
    if output_dir is None:
        return _filter(source, cfg, None, ray_args, guard)
    from ..runtime.outputs import input_roots

    out = os.fspath(output_dir)
    roots = input_roots(source) + (input_roots(list(cfg.dsir_target)) if cfg.dsir_target else [])
    with owned(out, command="filter", overwrite=overwrite, roots=roots):
        return _filter(source, cfg, out, ray_args, guard)


def _filter(source: Any, cfg: FilterConfig, out: str | None, ray_args: tuple | None = None,
            guard: SourceGuard = SourceGuard()) -> FilterResult:
    steps = Steps()
    timings = steps.timings
    with steps("score"):  # set-up (device, models) included; a first run's compiling is timings["compile"]
        device, threads = resources(cfg.device, cfg.threads)
        files = io.source_files(source)
        ahead = None
        if ray_args is None:  # before the models load (fastText's vocabulary kernels) and the bar: one line
            if device == "cpu":  # a first run: the rules' kernels compile in a second process meanwhile
                ahead = filter_ahead(cfg)
            note_compiling(device, compile_stages(cfg), ahead=ahead.stages if ahead else ())
        try:
            scorers = Scorers.load(cfg, device)
            report = io.ReadReport()
            dsir = DsirStep(cfg, device) if cfg.dsir_target else None
            if ray_args is None:
                cols, file_rows = _score_pass(files, cfg, device, scorers, dsir, report)
            else:
                cols, file_rows = _score_pass_ray(files, cfg, device, dsir, report, *ray_args)
        except BaseException:
            if ahead is not None:
                ahead.kill()
            raise
        if ahead is not None:
            ahead.wait()
    n = len(cols["id"])
    if cfg.domain_field:  # one more read: the reader carries one field besides the text (--url-field's)
        cols["domain_label"] = field_values(files, cfg, cfg.domain_field)
    # paragraph_action="remove"; a rank selection ranks the paragraphs of the documents still in
    before = tuple(f for f in cfg.order[:cfg.order.index("perplexity")] if f != "lid")
    para = paragraph_pass(cols, cfg, scorers.lid is not None, scorers.has_lm,
                          alive=lambda: decide_filter(cols, cfg, scorers, families=before)[0])
    if para is not None and out is None:
        logger.warning("paragraph_action='remove': the cuts are written with output_dir only (filtered/)")
    if cfg.perplexity_buckets:
        cols["perplexity_bucket"] = perplexity_buckets(cols["perplexity"], cfg.perplexity_buckets,
                                                       cols.get("perplexity_lang"))
    keep, reason = decide_filter(cols, cfg, scorers, para.all_removed if para is not None else None)
    dsir_stats = None
    if dsir is not None:
        with steps("dsir"):
            keep, reason, dsir_stats = dsir.select(files, cfg, cols, keep, reason)
    cols["keep"], cols["reason"] = keep, reason
    if scorers.lid is not None and not cfg.lang:  # issue 36: say what the threshold alone removed
        logger.info("--lid without --lang keeps every language, but removed %d documents whose top language has "
                    "a probability below --lid-threshold %g (reason lid_prob)",
                    int(np.sum(~keep & (cols["reason"].indices.to_numpy(zero_copy_only=False) ==
                                        reasons(scorers).index("lid_prob")))), cfg.lid_threshold)
    table = scores_table(cols)
    stats = _stats(cfg, device, threads, files, report, scorers, table, n, timings)
    if dsir_stats is not None:
        stats["dsir"] = dsir_stats
    if any(c.spec.retention is not None for c in scorers.classifiers):
        stats["stochastic_retention"] = retention_curves(cols, scorers)
    if cfg.perplexity_keep is not None or cfg.perplexity_buckets:
        stats["perplexity_rank"] = rank_stats(cols, cfg, para)
    stats["selections"] = selections(cols, cfg, para, dsir_stats)
    stats["retained_tokens"] = retained_tokens(cols, cfg, scorers)
    if cfg.unit == "paragraph":
        stats["paragraph_rules"] = describe_paragraphs(cfg)
    if cfg.perplexity_lang:
        used = cols["perplexity_lang"]
        stats["perplexity_by_language"] = {**{lang: int((used == lang).sum()) for lang, _ in cfg.perplexity_lang},
                                           "(no model)": int((used == "").sum())}
    stats["engine"] = {"name": "local"} if ray_args is None else \
        {"name": "ray", "workers": ray_args[0], "address": ray_args[1], "tasks": len(files)}
    with steps("sources"):
        stats["sources"] = _sources(files, cfg, guard, table, file_rows)
    stopped = bool(stats["sources"]["over_limit"])
    if out is not None:
        os.makedirs(out, exist_ok=True)
        with steps("write"):
            phase(logger, "filter: writing scores.parquet%s (%s kept documents)",
                  " and filtered/" if cfg.write_filtered else "", f"{int(keep.sum()):,}")
            write_table(table, scores_schema(table.column_names), os.path.join(out, "scores.parquet"))
            if not stopped:  # a source over the limit: no kept records (sources.check below)
                stats.update(write_documents(files, cfg, cols["id"], para, keep, out, file_rows))
    if out is not None and cfg.audit:
        with steps("audit"):
            audit, percentiles = audit_sample(files, cfg, table)
            io.write_parquet_atomic(audit, os.path.join(out, "audit.parquet"))
            io.write_parquet_atomic(percentiles, os.path.join(out, "audit_percentiles.parquet"))
            stats["audit"] = {"accepted": int(pc.sum(audit["keep"]).as_py() or 0),
                              "rejected": int(audit.num_rows - (pc.sum(audit["keep"]).as_py() or 0)),
                              "note": "uniform random sample of each side, seeded by FilterConfig.seed",
                              "percentiles": {"file": "audit_percentiles.parquet",
                                              "percentiles": list(AUDIT_PERCENTILES), "rows": percentiles.num_rows,
                                              "note": "per score, the document of rank round(q/100 * (m-1)) "
                                                      "among the m scored, ties by input order"}}
    steps.total()
    stats["throughput_docs_per_s"] = n / timings["score"] if timings["score"] > 0 else None
    if out is not None:
        def report() -> str:
            from .report import write_filter_report

            return write_filter_report(out)

        finish(out, stats, report=report, what="filter")
    logger.info("filter: kept %d of %d documents", int(keep.sum()), n)
    check_sources(stats["sources"], "filtered/")
    return FilterResult(table, stats, out)


def _sources(files, cfg: FilterConfig, guard: SourceGuard, table: pa.Table, file_rows: list[int]) -> dict[str, Any]:
    """run.json's ``sources`` (runtime/sources.py): each source's documents and the filter's removals."""
    rel = pa.array([f.relpath for f in files], pa.string())
    by_file = rel.take(pa.array(np.repeat(np.arange(len(files)), file_rows), pa.int64()))
    tally = Tally()
    tally.add(source_labels(files, guard.source_field, cfg, by_file),
              np.asarray(table["keep"].to_numpy(zero_copy_only=False), bool), step="filter", reason=table["reason"])
    return tally.stats(guard)


# ------------------------------------------------------------------------------------------ the pass
def concat_columns(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One column dict from the batches' (in row order); the id, row and empty columns even with none. Arrow
    columns (the ids, the reason codes of ``decide``: one dictionary per run) stay Arrow arrays."""
    if not parts:
        return {"id": pa.array([], pa.string()), "row": np.zeros(0, np.int64), "empty": np.zeros(0, bool)}
    return {k: (pa.chunked_array([p[k] for p in parts], pa.string() if k == "id" else parts[0][k].type)
                .combine_chunks() if isinstance(parts[0][k], pa.Array) else np.concatenate([p[k] for p in parts]))
            for k in parts[0]}


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
    cols = concat_columns(parts)
    if cfg.paragraph_action == "remove":
        cols["paragraph_scores"] = ParagraphScores.concat(paras)
    io.check_unique_ids(pa.chunked_array([cols["id"]], pa.string()), files, file_rows, id_field=cfg.id_field,
                        text_field=cfg.text_field, on_error=cfg.on_error)
    return cols, file_rows


def _score_file(f, cfg: FilterConfig, device: str, with_dsir: bool) -> dict[str, Any]:
    """A Ray task: file ``f``'s score columns (rows numbered from 0 within the file), its read report and,
    for DSIR, its raw feature counts (int64, summed exactly in the driver)."""
    from ..io import ReadReport
    from .dsir import DSIRConfig, fit_counts

    import time

    from ..runtime.run import peak_rss_bytes

    t, cpu = time.perf_counter(), time.process_time()
    set_threads(cfg.threads or 1)
    scorers = Scorers.load(cfg, device)
    report = ReadReport()
    parts, counts, paras = [], None, []
    dcfg = DSIRConfig(buckets=cfg.dsir_buckets, seed=cfg.seed, select=cfg.select) if with_dsir else None
    for batch in io.iter_batches([f], id_field=cfg.id_field, text_field=cfg.text_field,
                                 batch_bytes=batch_bytes(cfg.batch_bytes, device), on_error=cfg.on_error,
                                 report=report, **url_reading(cfg)):
        parts.append(scorers.columns(batch.text, batch.ids, batch.row_start, urls=batch.scope))
        if "paragraph_scores" in parts[-1]:
            paras.append(parts[-1].pop("paragraph_scores").shift(batch.row_start))
        if dcfg is not None:
            c = fit_counts(batch.text, dcfg, device)
            counts = c if counts is None else counts + c
    return {"cols": concat_columns(parts) if parts else None, "report": report.to_dict(), "dsir_counts": counts,
            "paragraphs": ParagraphScores.concat(paras), "seconds": time.perf_counter() - t,
            "cpu_seconds": time.process_time() - cpu, "peak_rss_bytes": peak_rss_bytes() or 0}


def _score_pass_ray(files, cfg: FilterConfig, device: str, dsir, report, workers: int | None,
                    address: str | None) -> tuple[dict, list[int]]:
    """_score_pass as one Ray task per file (_score_file); the columns are put together in file order."""
    from ..distributed.cluster import ray_cluster, ray_get

    if device == "cuda":
        raise ConfigError("filter --engine ray scores on CPU workers only yet: run it with --device cpu, or "
                          "--engine local --device cuda")
    from ..runtime.cost import current

    meter = current()
    with ray_cluster(workers, address) as ray:
        task = ray.remote(num_cpus=1, max_retries=3)(_score_file)
        refs = [task.remote(f, cfg, device, dsir is not None) for f in files]
        parts, file_rows, row0, paras = [], [], 0, []
        for ref in refs:
            got = ray_get(ray, [ref])[0]  # a task's own error as the local engine raises it
            if meter is not None:  # the task's own accounting: run.json's cost
                meter.add_tasks([got])
            report.merge(got["report"])
            if got["dsir_counts"] is not None:
                dsir.raw_counts += got["dsir_counts"]
            n = len(got["cols"]["id"]) if got["cols"] is not None else 0
            if n:
                got["cols"]["row"] = got["cols"]["row"] + row0
                parts.append(got["cols"])
                paras.append(got["paragraphs"].shift(row0))
            file_rows.append(n)
            row0 += n
    cols = concat_columns(parts)
    if cfg.paragraph_action == "remove":
        cols["paragraph_scores"] = ParagraphScores.concat(paras)
    io.check_unique_ids(pa.chunked_array([cols["id"]], pa.string()), files, file_rows, id_field=cfg.id_field,
                        text_field=cfg.text_field, on_error=cfg.on_error)
    return cols, file_rows


# --------------------------------------------------------------------------------------- decisions
def reasons(scorers: Scorers) -> tuple[str, ...]:
    """The vocabulary of this run's reason codes (``decisions.filter_reasons``): the fixed reasons, every rule's
    column and every classifier's."""
    rules: list[str] = []
    if scorers.rules is not None:
        from .rules import describe

        rules = list(describe(scorers.rules))
    return filter_reasons(rules, [c.spec.column for c in scorers.classifiers])


def decide_filter(cols: dict[str, Any], cfg: FilterConfig, scorers: Scorers, all_removed: np.ndarray | None = None,
           families: tuple[str, ...] | None = None) -> tuple[np.ndarray, pa.DictionaryArray]:
    """(keep bool (n,), reason: int8 codes over ``reasons(scorers)`` as a dictionary array (n,)) by the order in
    the module docstring (DSIR excepted). ``all_removed`` (paragraph_action="remove": object (n,),
    ``paragraphs.document_counts``): language ID and perplexity reject a document only when every paragraph
    failed, with the reason given there. ``families``: only these of ``cfg.order`` (in its order; None: all).
    A rank selection (``perplexity_keep``) ranks the documents still kept when its family's turn comes; they
    are marked in ``cols["perplexity_ranked"]``."""
    n = len(cols["row"])
    vocab = reasons(scorers)
    code = {r: i for i, r in enumerate(vocab)}
    keep = np.ones(n, bool)
    reason = np.full(n, code[FILTER_KEPT], dtype=np.int8)

    def reject(mask: np.ndarray, why: str) -> None:
        hit = keep & mask
        reason[hit] = code[why]
        keep[hit] = False

    reject(cols["empty"], "empty")
    domain = cols.get("domain")
    special = (domain != "") if domain is not None and cfg.domain.relax else np.zeros(n, bool)

    def lid() -> None:
        if "lid_label" in cols and all_removed is not None:
            for why in ("lid_label", "lid_prob", "lid_agreement"):
                reject(all_removed == why, why)
        elif "lid_label" in cols:
            if cfg.lang:
                reject(~np.isin(cols["lid_label"], list(cfg.lang)), "lid_label")
            if scorers.lid is not None or cfg.lang:
                need = np.where(special, cfg.domain.relaxed_lid_threshold, cfg.lid_threshold)
                if cfg.lid_short_threshold is not None and "lid_short" in cols:  # the lower that applies
                    need = np.where(cols["lid_short"], np.minimum(need, cfg.lid_short_threshold), need)
                with np.errstate(invalid="ignore"):
                    reject(~(cols["lid_prob"] >= need), "lid_prob")

    def classifiers() -> None:
        for c in scorers.classifiers:
            if c.spec.retention is not None:
                with np.errstate(invalid="ignore"):
                    reject(~(cols[c.draw_column] < c.spec.retention.prob(cols[c.spec.column])), c.spec.column)
                continue
            # per domain (domain_label) when given, else the classifier's; --domain-relax lowers min ones only
            need = c.need(cols.get("domain_label"), special, cfg.domain.relaxed_factor)
            s = cols[c.spec.column]
            with np.errstate(invalid="ignore"):
                judged = ~np.isnan(need)
                reject(judged & ~((s >= need) if c.direction == "min" else (s <= need)), c.spec.column)

    def perplexity() -> None:
        if not scorers.has_lm:
            return
        if all_removed is not None:
            reject(all_removed == "perplexity", "perplexity")
            return
        # not judged: a document in a language without a model, or one of too few LM words (002:53)
        judged = perplexity_judged(cols, cfg)
        if cfg.max_perplexity is not None:
            with np.errstate(invalid="ignore"):
                reject(judged & ~(cols["perplexity"] <= cfg.max_perplexity), "perplexity")
        if cfg.perplexity_keep is not None:  # the rank of the documents still in (002:57: the stages in order)
            ranked = judged & keep
            cols["perplexity_ranked"] = ranked
            reject(ranked & ~rank_keep(np.where(ranked, cols["perplexity"], np.nan), cfg.perplexity_keep,
                                       cols.get("perplexity_lang")), "perplexity")

    def rules() -> None:
        if scorers.rules is not None:
            from .rules import describe, rule_decisions

            names = list(describe(scorers.rules))
            ok, why = rule_decisions({k: cols[k] for k in names}, scorers.rules)
            why = np.asarray(why, dtype=object)
            for name in names:
                reject(~np.asarray(ok) & (why == name), name)

    tests = {"lid": lid, "rules": rules, "perplexity": perplexity, "classifiers": classifiers}
    for family in cfg.order:
        if families is None or family in families:
            tests[family]()
    return keep, reason_array(reason, vocab)


# ------------------------------------------------------------------------------------------ outputs
def scores_table(cols: dict[str, Any]) -> pa.Table:
    """scores.parquet from the run's columns, of its declared schema (``decisions.scores_schema``): the
    reason codes as their names, a float score NaN (not scored) as null."""
    schema = scores_schema(list(cols))
    arrays = []
    for k in schema.names:
        v = cols[k]
        if isinstance(v, pa.DictionaryArray):
            arrays.append(v.cast(pa.string()))
        elif isinstance(v, (pa.Array, pa.ChunkedArray)):
            arrays.append(v)
        elif v.dtype == object:
            arrays.append(pa.array(v.tolist(), pa.string()))
        elif v.dtype.kind == "f":
            # a score a document did not get (no model ran on it, no paragraph, no sentence) is null, not NaN:
            # the scorers use NaN for "not scored" inside a run, the outputs say it with Arrow's null
            arrays.append(pa.array(v, mask=np.isnan(v)))
        else:
            arrays.append(pa.array(v))
    return pa.table(dict(zip(schema.names, arrays)), schema=schema)


DIRECTIONS = {"lid_prob": "min", "perplexity": "max", "dsir_weight": "min"}


def _stats(cfg: FilterConfig, device: str, threads: int, files, report, scorers: Scorers, table: pa.Table,
           n: int, timings: dict[str, float]) -> dict[str, Any]:
    """run.json: the shared header (``run.header``), then the filter's models, order and retention."""
    import dataclasses

    from .rules import describe as describe_rules

    by_reason = value_counts(table["reason"])  # in order of first appearance
    kept = int(np.sum(table["keep"].to_numpy(zero_copy_only=False))) if n else 0
    directions = dict(DIRECTIONS)
    for c in scorers.classifiers:
        directions[c.spec.column] = c.direction
    if scorers.rules is not None:
        from .rules import describe

        for column, rule in describe(scorers.rules).items():  # a two-sided rule: its lower bound
            directions[column] = "min" if rule.get("min") is not None else "max"
    ret = {col: retention(table[col].to_numpy(zero_copy_only=False), d)
           for col, d in directions.items() if col in table.column_names}
    counts = {"input": n, "kept": kept, "removed": n - kept, "by_reason": by_reason}
    stats = header("filter", device=device, threads=threads, config=dataclasses.asdict(cfg), files=files,
                   read=report, counts=counts, timings=timings)
    return {
        **stats, "stage": "filter", "models": scorers.describe(),
        "order": ["empty"] + [col for family in cfg.order for col in {
            "lid": ["lid_label", "lid_prob"], "classifiers": [c.spec.column for c in scorers.classifiers],
            "perplexity": ["perplexity"],
            "rules": list(describe_rules(scorers.rules)) if scorers.rules is not None else []}[family]]
        + ["dsir_weight"],
        "order_families": list(cfg.order),
        "text_given_to_models": "unit=document: the whole document as one line (newlines become spaces); "
                                "unit=paragraph: each paragraph as one line, scores byte-weighted per document",
        "retention": ret,
    }


def _read_texts(files, cfg: FilterConfig, pick: np.ndarray) -> dict[int, str]:
    """row -> text of the rows ``pick`` (sorted int64), one more read of the input."""
    texts: dict[int, str] = {}
    if not len(pick):
        return texts
    want = set(pick.tolist())
    for batch in io.iter_batches(files, id_field=cfg.id_field, text_field=cfg.text_field,
                                 batch_bytes=batch_bytes(cfg.batch_bytes, "cpu"), on_error=cfg.on_error):
        lo, hi = batch.row_start, batch.row_start + len(batch.text)
        inside = pick[(pick >= lo) & (pick < hi)]
        if len(inside):
            got = batch.text.take(pa.array(inside - lo)).to_pylist()
            texts.update(zip(inside.tolist(), got))
        if hi > pick[-1]:
            break
    missing = want - set(texts)
    if missing:
        raise RunError(f"audit: rows {sorted(missing)[:5]} were not found on the second read: the input "
                       f"changed during the run")
    return texts


def audit_sample(files, cfg: FilterConfig, table: pa.Table) -> tuple[pa.Table, pa.Table]:
    """(audit, percentiles): up to ``cfg.audit`` random accepted and ``cfg.audit`` random rejected documents
    (seeded), and the documents at the 33rd / 50th / 67th percentile of every score (``percentile_picks``;
    columns ``score``, ``percentile``, ``value`` first), each with its text (one more read of the input, for
    both) and every score: reading a random sample of the rejections is how a filter's precision is checked."""
    n = table.num_rows
    keep = table["keep"].to_numpy(zero_copy_only=False) if n else np.zeros(0, bool)
    rng = np.random.default_rng(cfg.seed)
    rows = []
    for side in (True, False):
        pool = np.flatnonzero(keep == side)
        if len(pool):
            rows.append(np.sort(rng.choice(pool, size=min(cfg.audit, len(pool)), replace=False)))
    pick = np.sort(np.concatenate(rows)) if rows else np.zeros(0, np.int64)
    pct = percentile_picks(table)
    texts = _read_texts(files, cfg, np.unique(np.concatenate([pick, np.array([r for _, _, r in pct], np.int64)])))
    sub = table.take(pa.array(pick, pa.int64()))
    audit = sub.append_column("text", pa.array([texts[int(r)] for r in pick], pa.large_string()))
    prow = np.array([r for _, _, r in pct], np.int64)
    psub = table.take(pa.array(prow, pa.int64()))
    values = [table[c][r].as_py() for c, _, r in pct]
    percentiles = pa.table({"score": pa.array([c for c, _, _ in pct], pa.string()),
                            "percentile": pa.array([q for _, q, _ in pct], pa.int16()),
                            "value": pa.array([None if v is None else float(v) for v in values], pa.float64())})
    for name in psub.column_names:
        percentiles = percentiles.append_column(psub.schema.field(name), psub[name])
    percentiles = percentiles.append_column("text", pa.array([texts[int(r)] for r in prow], pa.large_string()))
    return audit, percentiles
