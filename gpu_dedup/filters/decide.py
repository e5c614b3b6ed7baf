"""What the filter decides for each document, and what its outputs and run.json say of it: one set of functions that
the local engine (stage.py) runs over the whole run and the Ray engine (gpu_dedup/distributed/filter.py) over each
input file, the run's rank selections given from outside (``selection.Ranks``: the local one ranks the arrays it
is given; the Ray engine's cuts at thresholds found over every file).

    decide      ``decide_columns``: the paragraph pass, CCNet's buckets, then ``decide_filter`` (the order of
                stage.py's module docstring), each rank selection by the run's ``Ranks``
    vocabulary  ``reasons``: the run's reason codes; ``described``: its scorers as run.json (and a Ray driver,
                which loads no model) reads them
    table       ``concat_columns`` (a run's or a file's columns from its batches), ``scores_table``
    run.json    ``filter_stats`` (the shared header, models, order, retention per threshold: ``retention_table``)
    sources     ``source_stats``: each source's documents and the filter's removals
    audit       ``audit_sample``: the seeded sample of each side (``audit_pools``: from the sides' sizes alone) and
                the documents at the percentiles of every score, with their texts (``audit_tables``)
    result      ``FilterResult``; ``finish_filter``: run.json, report.html, the summary and the sources' check
"""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from .. import io
from ..decisions import FILTER_KEPT, filter_reasons, reason_array, scores_schema, value_counts
from ..errors import RunError
from ..runtime.device import batch_bytes
from ..runtime.heartbeat import phase
from ..runtime.run import RunResult, finish, header
from ..runtime.sources import check as check_sources
from .config import FilterConfig
from .paragraphs import ParagraphDecision, paragraph_pass, perplexity_judged
from .selection import AUDIT_PERCENTILES, LOCAL_RANKS, Ranks, percentile_picks, retention

logger = logging.getLogger(__name__)

DIRECTIONS = {"lid_prob": "min", "perplexity": "max", "dsir_weight": "min"}


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

    def columns(self, names: list[str]) -> pa.Table:
        """The scores table's columns ``names`` (a Ray run's: those alone read from its file or parts)."""
        return self.scores.select(names)


# ------------------------------------------------------------------------------------------ the columns
def concat_columns(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One column dict from the batches' (in row order); the id, row and empty columns even with none. Arrow
    columns (the ids, the reason codes of ``decide``: one dictionary per run) stay Arrow arrays."""
    if not parts:
        return {"id": pa.array([], pa.string()), "row": np.zeros(0, np.int64), "empty": np.zeros(0, bool)}
    return {k: (pa.chunked_array([p[k] for p in parts], pa.string() if k == "id" else parts[0][k].type)
                .combine_chunks() if isinstance(parts[0][k], pa.Array) else np.concatenate([p[k] for p in parts]))
            for k in parts[0]}


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


# ------------------------------------------------------------------------------------------ vocabulary
def reasons(scorers: Any) -> tuple[str, ...]:
    """The vocabulary of this run's reason codes (``decisions.filter_reasons``): the fixed reasons, every rule's
    column and every classifier's (``scorers``: the run's ``Scorers``, or its ``described`` dict)."""
    d = scorers if isinstance(scorers, dict) else described(scorers)
    return filter_reasons(list(d["rules"]), [c[0] for c in d["classifiers"]])


def described(scorers: Any) -> dict[str, Any]:
    """The run's scorers as JSON values: ``models`` (run.json's), ``rules`` (each rule's column and bounds), and
    ``classifiers``: [column, direction, draw column or None] in the order given."""
    rules: dict[str, Any] = {}
    if scorers.rules is not None:
        from .rules import describe

        rules = dict(describe(scorers.rules))
    return {"models": scorers.describe(), "rules": rules,
            "classifiers": [[c.spec.column, c.direction, c.draw_column if c.spec.retention is not None else None]
                            for c in scorers.classifiers]}


# ------------------------------------------------------------------------------------------ decisions
def decide_columns(cols: dict[str, Any], cfg: FilterConfig, scorers: Any, ranks: Ranks = LOCAL_RANKS
                   ) -> tuple[np.ndarray, pa.DictionaryArray, ParagraphDecision | None]:
    """(keep, reason, the paragraphs' decision or None) of the documents of ``cols`` (the run's, or one file's
    with its rows numbered in the run), DSIR aside: paragraph_action="remove"'s paragraph pass (a rank selection
    ranks the paragraphs of the documents still in), CCNet's buckets (column ``perplexity_bucket``), then
    ``decide_filter``. ``ranks``: the run's rank selections."""
    before = tuple(f for f in cfg.order[:cfg.order.index("perplexity")] if f != "lid")
    para = paragraph_pass(cols, cfg, scorers.lid is not None, scorers.has_lm,
                          alive=lambda: decide_filter(cols, cfg, scorers, families=before, ranks=ranks)[0],
                          ranks=ranks)
    if cfg.perplexity_buckets:
        cols["perplexity_bucket"] = ranks.buckets("document", cols["perplexity"], cfg.perplexity_buckets,
                                                  cols.get("perplexity_lang"))
    keep, reason = decide_filter(cols, cfg, scorers, para.all_removed if para is not None else None, ranks=ranks)
    return keep, reason, para


def decide_filter(cols: dict[str, Any], cfg: FilterConfig, scorers: Any, all_removed: np.ndarray | None = None,
                  families: tuple[str, ...] | None = None, ranks: Ranks = LOCAL_RANKS
                  ) -> tuple[np.ndarray, pa.DictionaryArray]:
    """(keep bool (n,), reason: int8 codes over ``reasons(scorers)`` as a dictionary array (n,)) by the order in
    stage.py's module docstring (DSIR excepted). ``all_removed`` (paragraph_action="remove": object (n,),
    ``paragraphs.document_counts``): language ID and perplexity reject a document only when every paragraph
    failed, with the reason given there. ``families``: only these of ``cfg.order`` (in its order; None: all).
    A rank selection (``perplexity_keep``, by ``ranks``) ranks the documents still kept when its family's turn
    comes; they are marked in ``cols["perplexity_ranked"]``."""
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
            reject(ranked & ~ranks.keep_lowest("document", np.where(ranked, cols["perplexity"], np.nan),
                                               cfg.perplexity_keep, cols.get("perplexity_lang")), "perplexity")

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


# ------------------------------------------------------------------------------------------ run.json
def directions(scorers: Any) -> dict[str, str]:
    """Each thresholded column's direction ("min": a document passes at or above; "max": at or below), for run.json's
    retention table (a two-sided rule: its lower bound). ``scorers``: the ``Scorers``, or their ``described``."""
    d = scorers if isinstance(scorers, dict) else described(scorers)
    out = dict(DIRECTIONS)
    for column, direction, _ in d["classifiers"]:
        out[column] = direction
    for column, rule in d["rules"].items():
        out[column] = "min" if rule.get("min") is not None else "max"
    return out


def retention_table(table: pa.Table, scorers: Any) -> dict[str, Any]:
    """run.json's ``retention``: for every thresholded column of ``table`` (scores.parquet), the retention a single
    threshold gives at points over its range (``selection.retention``)."""
    return {col: retention(table[col].to_numpy(zero_copy_only=False), d)
            for col, d in directions(scorers).items() if col in table.column_names}


def filter_stats(cfg: FilterConfig, device: str, threads: int, files, report, scorers: Any, counts: dict[str, Any],
                 ret: dict[str, Any], timings: dict[str, float]) -> dict[str, Any]:
    """run.json: the shared header (``run.header``: ``counts`` are input / kept / removed / by_reason), then the
    filter's models, order and retention per threshold (``ret``: ``retention_table``'s). ``scorers``: the
    ``Scorers``, or their ``described``."""
    d = scorers if isinstance(scorers, dict) else described(scorers)
    stats = header("filter", device=device, threads=threads, config=dataclasses.asdict(cfg), files=files,
                   read=report, counts=counts, timings=timings)
    return {
        **stats, "stage": "filter", "models": d["models"],
        "order": ["empty"] + [col for family in cfg.order for col in {
            "lid": ["lid_label", "lid_prob"], "classifiers": [c[0] for c in d["classifiers"]],
            "perplexity": ["perplexity"], "rules": list(d["rules"])}[family]]
        + ["dsir_weight"],
        "order_families": list(cfg.order),
        "text_given_to_models": "unit=document: the whole document as one line (newlines become spaces); "
                                "unit=paragraph: each paragraph as one line, scores byte-weighted per document",
        "retention": ret,
    }


def decision_counts(table: pa.Table) -> dict[str, Any]:
    """run.json's ``counts`` of scores.parquet's rows (``by_reason`` in order of first appearance)."""
    n = table.num_rows
    kept = int(np.sum(table["keep"].to_numpy(zero_copy_only=False))) if n else 0
    return {"input": n, "kept": kept, "removed": n - kept, "by_reason": value_counts(table["reason"])}


def source_stats(files, cfg: FilterConfig, guard: Any, table: pa.Table, file_rows: list[int]) -> Any:
    """The sources' ``Tally`` (runtime/sources.py) of ``table``'s rows (scores.parquet's, or one file's; the files
    ``files`` holding ``file_rows`` rows each): each source's documents and the filter's removals."""
    from ..runtime.sources import Tally, source_labels

    rel = pa.array([f.relpath for f in files], pa.string())
    by_file = rel.take(pa.array(np.repeat(np.arange(len(files)), file_rows), pa.int64()))
    tally = Tally()
    tally.add(source_labels(files, guard.source_field, cfg, by_file),
              np.asarray(table["keep"].to_numpy(zero_copy_only=False), bool), step="filter", reason=table["reason"])
    return tally


# ------------------------------------------------------------------------------------------ the audit
def audit_pools(cfg: FilterConfig, accepted: int, rejected: int) -> tuple[np.ndarray, np.ndarray]:
    """(positions among the accepted documents, positions among the rejected), each sorted: up to ``cfg.audit`` of
    each side, drawn without replacement from a generator seeded by ``cfg.seed`` (the accepted side first). They
    depend on the sides' sizes alone (``Generator.choice`` of an array draws the positions it takes)."""
    rng = np.random.default_rng(cfg.seed)
    out = []
    for size in (accepted, rejected):
        out.append(np.sort(rng.choice(size, size=min(cfg.audit, size), replace=False)).astype(np.int64)
                   if size else np.zeros(0, np.int64))
    return out[0], out[1]


def audit_tables(picked: pa.Table, picked_texts: list[str], pct: list[tuple[str, int, int]], pct_rows: pa.Table,
                 pct_texts: list[str]) -> tuple[pa.Table, pa.Table]:
    """(audit.parquet, audit_percentiles.parquet) from scores.parquet's rows of the sample (``picked``, in row
    order) and of the percentile picks (``pct``: (score, percentile, row), ``pct_rows`` in that order), with their
    texts."""
    audit = picked.append_column("text", pa.array(picked_texts, pa.large_string()))
    values = [pct_rows[c][i].as_py() for i, (c, _, _) in enumerate(pct)]
    percentiles = pa.table({"score": pa.array([c for c, _, _ in pct], pa.string()),
                            "percentile": pa.array([q for _, q, _ in pct], pa.int16()),
                            "value": pa.array([None if v is None else float(v) for v in values], pa.float64())})
    for name in pct_rows.column_names:
        percentiles = percentiles.append_column(pct_rows.schema.field(name), pct_rows[name])
    percentiles = percentiles.append_column("text", pa.array(pct_texts, pa.large_string()))
    return audit, percentiles


def audit_stats(audit: pa.Table, percentiles: pa.Table) -> dict[str, Any]:
    """run.json's ``audit``."""
    accepted = int(np.sum(audit["keep"].to_numpy(zero_copy_only=False))) if audit.num_rows else 0
    return {"accepted": accepted, "rejected": int(audit.num_rows - accepted),
            "note": "uniform random sample of each side, seeded by FilterConfig.seed",
            "percentiles": {"file": "audit_percentiles.parquet", "percentiles": list(AUDIT_PERCENTILES),
                            "rows": percentiles.num_rows,
                            "note": "per score, the document of rank round(q/100 * (m-1)) among the m scored, "
                                    "ties by input order"}}


def read_texts(files, cfg: FilterConfig, pick: np.ndarray) -> dict[int, str]:
    """row -> text of the rows ``pick`` (sorted int64) of ``files``, one more read of them."""
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
    (``audit_pools``), and the documents at the 33rd / 50th / 67th percentile of every score
    (``selection.percentile_picks``; columns ``score``, ``percentile``, ``value`` first), each with its text (one
    more read of the input, for both) and every score: reading a random sample of the rejections is how a filter's
    precision is checked."""
    n = table.num_rows
    keep = table["keep"].to_numpy(zero_copy_only=False) if n else np.zeros(0, bool)
    sides = [np.flatnonzero(keep == side) for side in (True, False)]
    pools = audit_pools(cfg, len(sides[0]), len(sides[1]))
    pick = np.sort(np.concatenate([s[p] for s, p in zip(sides, pools)])).astype(np.int64)
    pct = percentile_picks(table)
    prow = np.array([r for _, _, r in pct], np.int64)
    texts = read_texts(files, cfg, np.unique(np.concatenate([pick, prow])))
    return audit_tables(table.take(pa.array(pick, pa.int64())), [texts[int(r)] for r in pick], pct,
                        table.take(pa.array(prow, pa.int64())), [texts[int(r)] for r in prow])


# ------------------------------------------------------------------------------------------ the run's end
def lid_prob_note(cfg: FilterConfig, removed: int) -> None:
    """Issue 36: say what --lid-threshold alone removed when --lid runs without --lang."""
    logger.info("--lid without --lang keeps every language, but removed %d documents whose top language has a "
                "probability below --lid-threshold %g (reason lid_prob)", removed, cfg.lid_threshold)


def writing_note(cfg: FilterConfig, kept: int) -> None:
    phase(logger, "filter: writing scores.parquet%s (%s kept documents)",
          " and filtered/" if cfg.write_filtered else "", f"{kept:,}")


def finish_filter(out: str | None, stats: dict[str, Any]) -> None:
    """run.json and report.html in ``out`` (None: nothing written), the summary in the log, then the sources'
    check (a source over --max-source-removal raises, its outputs kept)."""
    if out is not None:
        def report() -> str:
            from .report import write_filter_report

            return write_filter_report(out)

        finish(out, stats, report=report, what="filter")
    logger.info("filter: kept %d of %d documents", stats["counts"]["kept"], stats["counts"]["input"])
    check_sources(stats["sources"], "filtered/")
