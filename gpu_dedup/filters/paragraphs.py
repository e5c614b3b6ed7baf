"""Paragraph-level filtering (issue #25; seed 002 §21.1.1 "score at the paragraph level ... surgical removal
rather than discarding entire pages", §21.2.1 Dolma "keeps paragraphs where p(en) > 0.5").

A paragraph is the package's one paragraph (``text/split.py``: a maximal run of non-blank lines, trimmed of
ASCII whitespace), split by ``scorers.paragraph_units``. With ``unit="paragraph"`` every paragraph is scored
as a document of its own (the LM: ``lm.score`` on the paragraph; LID: fastText's top label and probability);
with ``paragraph_action="remove"`` the scorers hand over one ``ParagraphScores`` per batch and the filter:

    decide     ``paragraph_decisions``: each paragraph by the document's language-ID and perplexity tests,
               in ``FilterConfig.order`` (the first failing test is its reason: lid_label, lid_prob,
               lid_agreement, perplexity). LID: its top label in --lang, its probability >= the threshold (the
               short-text threshold when it is under ``lid_short_chars`` characters and one is given; the
               relaxed one in a code / math document with domain relax; the lowest that applies); with
               ``lid_sentence_agreement`` at least that share of its sentences with the majority label
               (``scorers.sentence_agreement``). Perplexity: a paragraph of at least ``min_paragraph_tokens`` LM
               words by its own perplexity, a shorter one by its document's ("inherit"; not at all when the
               document itself is under ``min_perplexity_tokens`` pooled words) or not at all ("skip");
               --perplexity MAX cuts, keep=F ranks the paragraphs judged that are still in, of the documents
               the families before perplexity kept (per language with one model per language), ties by input
               order. A paragraph of a document in a language without a model is not judged by perplexity.
    documents  ``document_counts``: paragraphs and paragraphs_removed per document, and for a document whose
               every paragraph failed the reason of the first failing test in the order (it is then rejected
               by it; a document with no paragraph at all is ``empty``). The other tests (rules, classifiers,
               DSIR) read the whole original document, as without paragraph removal.
    log        ``write_paragraph_logs``: paragraphs.parquet (every paragraph: id, row, paragraph, byte_start,
               byte_end, chars, words, perplexity, perplexity_used, lid_label, lid_prob[, lid_agreement],
               lid_short, keep, reason) and removed_paragraphs.parquet (each paragraph cut from a document the filter keeps:
               id, byte_start, byte_end, cut_start, cut_end, cut_text, row, reason; paragraph dedup's cut
               rule and columns, ``paragraph.dedup.cut_ranges``: the paragraph with one adjacent separator).
               Re-inserting every cut_text at cut_start in ascending order restores the original text byte for
               byte.
    lines      ``write_line_cuts`` (``c4_remove_lines``, instead of paragraphs): every line
               (``rulesets.c4_line_units``) of a kept document that C4's line rules remove, as a cut in
               removed_lines.parquet (REMOVED_SCHEMA; reason: the line rule, ``rulesets.c4_line``; byte_start /
               byte_end: the line without its break, the cut: with one adjacent line break, the same rule).
    write      ``write_cut_filtered``: filtered/ = the kept documents with their cuts applied
               (``text.cutwrite.write_cut_documents``: untouched JSON lines verbatim, changed ones
               re-serialized with the text replaced; Parquet with its schema and codec).

Byte offsets are 0-based UTF-8 positions in the original document text.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import pyarrow as pa

from .. import io
from ..io.text import arrow_text_buffers
from ..runtime.device import batch_bytes
from ..runtime.run import write_tables
from .config import FilterConfig

logger = logging.getLogger(__name__)

PARAGRAPHS_FILE = "paragraphs.parquet"
REMOVED_FILE = "removed_paragraphs.parquet"
REMOVED_LINES_FILE = "removed_lines.parquet"  # --c4-remove-lines: the cut lines, in REMOVED_SCHEMA
TESTS = {"lid": ("lid_label", "lid_prob", "lid_agreement"), "perplexity": ("perplexity",)}  # each family's tests
REMOVED_SCHEMA = pa.schema([
    ("id", pa.string()), ("byte_start", pa.int64()), ("byte_end", pa.int64()), ("cut_start", pa.int64()),
    ("cut_end", pa.int64()), ("cut_text", pa.large_string()), ("row", pa.int64()), ("reason", pa.string()),
])


@dataclass
class ParagraphScores:
    """The paragraphs of a batch (or of the run), in document order: row int64 (P,) (the document's row:
    batch-local until ``shift``), index int64 (P,) (0-based within the document), start / end int64 (P,)
    (byte offsets in the document), chars int64 (P,) (code points), words int64 (P,) (LM words; 0 without an
    LM), perplexity float64 (P,) (its own; NaN without an LM or a sentence), lid_label object (P,) ("" without
    LID), lid_prob float64 (P,) (NaN without LID), lid_agreement float64 (P,) (the fraction of its sentences
    whose LID label is its sentences' majority label; NaN unless ``lid_sentence_agreement``)."""

    row: np.ndarray
    index: np.ndarray
    start: np.ndarray
    end: np.ndarray
    chars: np.ndarray
    words: np.ndarray
    perplexity: np.ndarray
    lid_label: np.ndarray
    lid_prob: np.ndarray
    lid_agreement: np.ndarray

    @classmethod
    def blank(cls, doc: np.ndarray, start: np.ndarray, end: np.ndarray, chars: np.ndarray) -> "ParagraphScores":
        """Paragraphs of documents ``doc`` with nothing scored yet."""
        p = len(doc)
        first = np.searchsorted(doc, doc, side="left") if p else np.zeros(0, np.int64)
        return cls(np.asarray(doc, np.int64), np.arange(p, dtype=np.int64) - first, np.asarray(start, np.int64),
                   np.asarray(end, np.int64), np.asarray(chars, np.int64), np.zeros(p, np.int64),
                   np.full(p, np.nan), np.full(p, "", dtype=object), np.full(p, np.nan), np.full(p, np.nan))

    def shift(self, rows: int) -> "ParagraphScores":
        """The same paragraphs with ``rows`` added to their documents' rows (a batch's first row)."""
        self.row = self.row + rows
        return self

    @classmethod
    def concat(cls, parts: list["ParagraphScores"]) -> "ParagraphScores":
        if not parts:
            return cls.blank(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64),
                             np.zeros(0, np.int64))
        return cls(**{f.name: np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(cls)})


@dataclass
class ParagraphDecision:
    """The paragraphs of the run (``scores``) and what was decided for each: keep bool (P,), reason object (P,),
    used float64 (P,) (``paragraph_decisions``), and all_removed object (n,) (``document_counts``)."""

    scores: ParagraphScores
    keep: np.ndarray
    reason: np.ndarray
    used: np.ndarray
    all_removed: np.ndarray
    ranked: np.ndarray | None = None  # bool (P,): the paragraphs perplexity_keep ranked (None: no rank)


def paragraph_pass(cols: dict[str, Any], cfg: FilterConfig, lid: bool, has_lm: bool,
                   alive: Any = None, ranks: Any = None) -> ParagraphDecision | None:
    """Pop the run's ``ParagraphScores`` from ``cols`` (the scorers leave them under "paragraph_scores" with
    paragraph_action="remove"; None without), decide every paragraph and add the documents' ``paragraphs``
    and ``paragraphs_removed`` columns to ``cols``. ``alive``: a function giving bool (n,), the documents the
    document-level families before perplexity in ``cfg.order`` keep (called only for a rank selection: it
    ranks the paragraphs of those documents that are still in); ``ranks``: the run's rank selections
    (``selection.Ranks``; None: the local engine's)."""
    ps = cols.pop("paragraph_scores", None)
    if ps is None:
        return None
    ranked = np.zeros(len(ps.row), bool) if cfg.perplexity_keep is not None and has_lm else None
    keep, reason, used = paragraph_decisions(ps, cols, cfg, lid, has_lm,
                                             alive() if ranked is not None and alive is not None else None, ranked,
                                             ranks)
    cols["paragraphs"], cols["paragraphs_removed"], all_removed = document_counts(len(cols["row"]), ps, keep,
                                                                                  reason, cfg)
    return ParagraphDecision(ps, keep, reason, used, all_removed, ranked)


def pooled_perplexity(n: int, doc: np.ndarray, logprob: np.ndarray, tokens: np.ndarray, words: np.ndarray,
                      min_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """(perplexity float64 (n,), words int64 (n,)): each document's perplexity from its paragraphs' LM results
    (doc int64 (P,), logprob float64, tokens / words int64): 10 ** (-sum log10 p / sum tokens) over its
    paragraphs of at least ``min_tokens`` words (and one), over all its paragraphs when it has none such (then
    the whole document's perplexity: sentences are lines, which never cross paragraphs); NaN without a
    sentence; and the LM words of the paragraphs pooled (what ``min_perplexity_tokens`` reads)."""
    long = (words >= max(1, min_tokens)) & (tokens > 0)
    has_long = np.bincount(doc[long], minlength=n) > 0
    use = long | ~has_long[doc]
    lp = np.bincount(doc[use], weights=logprob[use], minlength=n)
    tok = np.bincount(doc[use], weights=tokens[use].astype(np.float64), minlength=n)
    used_words = np.bincount(doc[use], weights=words[use].astype(np.float64), minlength=n).astype(np.int64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.where(tok > 0, 10.0 ** (-lp / np.maximum(tok, 1)), np.nan), used_words


def perplexity_judged(cols: dict[str, Any], cfg: FilterConfig) -> np.ndarray:
    """bool (n,): the documents a perplexity verdict may be given to: a model scored them (one model per
    language: their language has one) and their perplexity rests on at least ``min_perplexity_tokens`` LM
    words (002:53; column ``perplexity_short`` marks the others)."""
    n = len(cols["row"])
    judged = cols["perplexity_lang"] != "" if "perplexity_lang" in cols else np.ones(n, bool)
    if "perplexity_short" in cols:
        judged = judged & ~cols["perplexity_short"]
    return judged


def used_perplexity(ps: ParagraphScores, doc_ppl: np.ndarray, cfg: FilterConfig,
                    doc_judged: np.ndarray | None = None) -> np.ndarray:
    """float64 (P,): the perplexity each paragraph is judged by: its own when it has at least
    ``min_paragraph_tokens`` words, else its document's ("inherit"; NaN when the document itself is not judged
    by perplexity: ``doc_judged`` bool (n,), ``perplexity_judged``) or NaN ("skip": not judged)."""
    long = ps.words >= max(1, cfg.min_paragraph_tokens)
    inherited = doc_ppl if doc_judged is None else np.where(doc_judged, doc_ppl, np.nan)
    inherited = inherited[ps.row] if cfg.short_paragraphs == "inherit" else np.full(len(ps.row), np.nan)
    return np.where(long, ps.perplexity, inherited)


def paragraph_decisions(ps: ParagraphScores, cols: dict[str, Any], cfg: FilterConfig, lid: bool,
                        has_lm: bool, alive: np.ndarray | None = None, ranked: np.ndarray | None = None,
                        ranks: Any = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(keep bool (P,), reason object (P,): "" or the first failing test, perplexity_used float64 (P,)) of
    every paragraph, by the rules in the module docstring. ``cols``: the run's document columns (lid_label,
    domain, perplexity, perplexity_lang, perplexity_short); ``lid``: a LID model ran; ``has_lm``: a perplexity
    model did; ``alive``: bool (n,), the documents still in when perplexity's turn comes (None: all); the
    paragraphs a rank selection ranks are set in ``ranked`` bool (P,); ``ranks``: the run's rank selections
    (``selection.Ranks``; None: the local engine's)."""
    from .selection import LOCAL_RANKS

    ranks = ranks or LOCAL_RANKS

    p = len(ps.row)
    keep = np.ones(p, bool)
    reason = np.full(p, "", dtype=object)
    used = np.full(p, np.nan)

    def reject(mask: np.ndarray, why: str) -> None:
        hit = keep & mask
        reason[hit] = why
        keep[hit] = False

    def lid_tests() -> None:
        if "lid_label" not in cols or not (lid or cfg.lang):
            return
        if cfg.lang:
            reject(~np.isin(ps.lid_label, list(cfg.lang)), "lid_label")
        need = np.full(p, cfg.lid_threshold)
        if cfg.lid_short_threshold is not None:
            short = ps.chars < cfg.lid_short_chars
            need[short] = np.minimum(need[short], cfg.lid_short_threshold)
        domain = cols.get("domain")
        if domain is not None and cfg.domain.relax:
            special = (domain != "")[ps.row]
            need[special] = np.minimum(need[special], cfg.domain.relaxed_lid_threshold)
        with np.errstate(invalid="ignore"):
            reject(~(ps.lid_prob >= need), "lid_prob")
        if cfg.lid_sentence_agreement is not None:  # NaN (no sentence the model read): lid_prob's to judge
            with np.errstate(invalid="ignore"):
                reject(ps.lid_agreement < cfg.lid_sentence_agreement, "lid_agreement")

    def perplexity_tests() -> None:
        if not has_lm:
            return
        doc_judged = perplexity_judged(cols, cfg)  # a short document passes no verdict on to its paragraphs
        used[:] = used_perplexity(ps, cols["perplexity"], cfg, doc_judged)
        judged = ps.words >= max(1, cfg.min_paragraph_tokens)
        if cfg.short_paragraphs == "inherit":
            judged = judged | doc_judged[ps.row]
        lang = cols.get("perplexity_lang")
        groups = None
        if lang is not None:
            groups = lang[ps.row]
            judged &= groups != ""
        if cfg.max_perplexity is not None:
            with np.errstate(invalid="ignore"):
                reject(judged & ~(used <= cfg.max_perplexity), "perplexity")
        if cfg.perplexity_keep is not None:  # the paragraphs still in, of the documents still in (002:57)
            now = judged & keep & (alive[ps.row] if alive is not None else True)
            if ranked is not None:
                ranked[:] = now
            reject(now & ~ranks.keep_lowest("paragraph", np.where(now, used, np.nan), cfg.perplexity_keep, groups),
                   "perplexity")

    tests = {"lid": lid_tests, "perplexity": perplexity_tests}
    for family in cfg.order:
        if family in tests:
            tests[family]()
    return keep, reason, used


def document_counts(n: int, ps: ParagraphScores, keep: np.ndarray, reason: np.ndarray,
                    cfg: FilterConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(paragraphs int64 (n,), paragraphs_removed int64 (n,), all_removed object (n,): for a document whose
    every paragraph failed, the first test in ``cfg.order`` that removed one of them, else "")."""
    total = np.bincount(ps.row, minlength=n).astype(np.int64)
    removed = np.bincount(ps.row[~keep], minlength=n).astype(np.int64)
    order = [t for family in cfg.order for t in TESTS.get(family, ())]
    rank = np.full(len(ps.row), len(order), np.int64)
    for i, t in enumerate(order):
        rank[reason == t] = i
    first = np.full(n, len(order), np.int64)
    np.minimum.at(first, ps.row, rank)
    names = np.array(order + [""], dtype=object)
    all_removed = np.where((total > 0) & (removed == total), names[first], "")
    return total, removed, all_removed.astype(object)


def removed_spans(ps: ParagraphScores, keep: np.ndarray, doc_keep: np.ndarray) -> dict[str, np.ndarray]:
    """The cuts of the documents the filter keeps (``doc_keep`` bool (n,)): for each removed paragraph of
    one, its row, byte_start / byte_end, cut_start / cut_end (paragraph dedup's rule) and its position."""
    from ..text.spans import cut_ranges

    n = len(doc_keep)
    unit_off = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(ps.row, minlength=n), out=unit_off[1:])
    cs, ce = cut_ranges(unit_off, ps.start, ps.end, ~keep)
    pick = np.flatnonzero(~keep & doc_keep[ps.row])
    return {"row": ps.row[pick], "byte_start": ps.start[pick], "byte_end": ps.end[pick], "cut_start": cs[pick],
            "cut_end": ce[pick], "paragraph": pick}


def write_paragraph_logs(files, cfg: FilterConfig, ids: pa.Array, para: ParagraphDecision, doc_keep: np.ndarray,
                         out: str) -> dict[str, Any]:
    """paragraphs.parquet and removed_paragraphs.parquet (module docstring) in ``out`` (``doc_keep``: the
    documents the filter keeps); the cut texts are read from the input once more. Returns run.json's
    ``paragraphs`` counts."""
    from ..text.spans import gather_spans

    ps, keep, reason, used = para.scores, para.keep, para.reason, para.used
    ptable = pa.table({
        "id": ids.take(pa.array(ps.row)), "row": ps.row, "paragraph": ps.index, "byte_start": ps.start,
        "byte_end": ps.end, "chars": ps.chars, "words": ps.words,
        "perplexity": pa.array(ps.perplexity, mask=np.isnan(ps.perplexity)),
        "perplexity_used": pa.array(used, mask=np.isnan(used)),
        "lid_label": pa.array(ps.lid_label.tolist(), pa.string()),
        "lid_prob": pa.array(ps.lid_prob, mask=np.isnan(ps.lid_prob)),
        **({"lid_agreement": pa.array(ps.lid_agreement, mask=np.isnan(ps.lid_agreement))}
           if cfg.lid_sentence_agreement is not None else {}),
        "lid_short": ps.chars < cfg.lid_short_chars, "keep": keep,
        "reason": pa.array(np.where(keep, "kept", reason).tolist(), pa.string())})
    write_tables([ptable], ptable.schema, os.path.join(out, PARAGRAPHS_FILE))
    sp = removed_spans(ps, keep, doc_keep)
    texts: list[pa.Array] = []
    rows = sp["row"]
    if len(rows):
        for batch in io.iter_batches(files, id_field=cfg.id_field, text_field=cfg.text_field,
                                     batch_bytes=batch_bytes(cfg.batch_bytes, "cpu"), on_error=cfg.on_error):
            lo, hi = batch.row_start, batch.row_start + len(batch.text)
            a, b = np.searchsorted(rows, [lo, hi])
            if b > a:
                data, offsets = arrow_text_buffers(batch.text)
                base = offsets[rows[a:b] - lo]
                texts.append(gather_spans(data, sp["cut_start"][a:b] + base, sp["cut_end"][a:b] + base))
            if hi > rows[-1]:
                break
    cut_text = pa.concat_arrays(texts) if texts else pa.array([], pa.large_string())
    removed = pa.table({"id": ids.take(pa.array(rows)), "byte_start": sp["byte_start"], "byte_end": sp["byte_end"],
                        "cut_start": sp["cut_start"], "cut_end": sp["cut_end"], "cut_text": cut_text, "row": rows,
                        "reason": pa.array(reason[sp["paragraph"]].tolist(), pa.string())}, schema=REMOVED_SCHEMA)
    write_tables([removed], REMOVED_SCHEMA, os.path.join(out, REMOVED_FILE))
    return {"paragraphs": int(len(ps.row)), "removed": int((~keep).sum()),
            "removed_from_kept_documents": int(len(rows)),
            "bytes_cut": int((sp["cut_end"] - sp["cut_start"]).sum()),
            "files": {"every_paragraph": PARAGRAPHS_FILE, "cuts": REMOVED_FILE}}


def write_line_cuts(files, cfg: FilterConfig, ids: pa.Array, doc_keep: np.ndarray, out: str) -> dict[str, Any]:
    """removed_lines.parquet (module docstring) in ``out``: the lines C4's line rules remove from the documents
    the filter keeps (``doc_keep`` bool (n,)), read from the input once more. Returns run.json's
    ``c4_lines`` counts."""
    from ..text.spans import cut_ranges, gather_spans
    from .rulesets import c4_line_units

    rc = cfg.rules_config()
    parts: list[dict[str, Any]] = []
    lines = 0
    for batch in io.iter_batches(files, id_field=cfg.id_field, text_field=cfg.text_field,
                                 batch_bytes=batch_bytes(cfg.batch_bytes, "cpu"), on_error=cfg.on_error):
        lo = batch.row_start
        mine = np.flatnonzero(doc_keep[lo:lo + len(batch.text)])
        if not len(mine):
            continue
        text = batch.text.take(pa.array(mine, pa.int64()))
        u = c4_line_units(text, rc.c4_min_words_per_line, rc.c4_max_word_length, rc.c4_terminal_punct)
        lines += len(u["doc"])
        removed = u["reason"] != ""
        unit_off = np.zeros(len(mine) + 1, np.int64)
        np.cumsum(np.bincount(u["doc"], minlength=len(mine)), out=unit_off[1:])
        cs, ce = cut_ranges(unit_off, u["start"], u["end"], removed)
        pick = np.flatnonzero(removed)
        data, offsets = arrow_text_buffers(text.cast(pa.large_string()))
        base = offsets[u["doc"][pick]]
        rows = lo + mine[u["doc"][pick]]
        parts.append({"id": ids.take(pa.array(rows)), "byte_start": u["start"][pick], "byte_end": u["end"][pick],
                      "cut_start": cs[pick], "cut_end": ce[pick],
                      "cut_text": gather_spans(data, cs[pick] + base, ce[pick] + base), "row": rows,
                      "reason": pa.array(u["reason"][pick].tolist(), pa.string())})
    if parts:
        table = pa.concat_tables([pa.table(p, schema=REMOVED_SCHEMA) for p in parts])
    else:
        table = REMOVED_SCHEMA.empty_table()
    write_tables([table], REMOVED_SCHEMA, os.path.join(out, REMOVED_LINES_FILE))
    cut = (table["cut_end"].to_numpy() - table["cut_start"].to_numpy()) if table.num_rows else np.zeros(0)
    return {"lines_of_kept_documents": int(lines), "removed": int(table.num_rows),
            "documents_changed": int(len(np.unique(table["row"].to_numpy()))) if table.num_rows else 0,
            "bytes_cut": int(cut.sum()), "file": REMOVED_LINES_FILE,
            "rules": "C4's line rules (rulesets.c4_line): " + ("" if rc.c4_terminal_punct else "no ")
                     + "terminal punctuation, >= " + str(rc.c4_min_words_per_line) + " words, no word over "
                     + str(rc.c4_max_word_length) + " characters, no lorem ipsum / javascript / { / policy phrase",
            "cut": "the line and one adjacent line break (the one before it when an earlier line is kept); "
                   "re-inserting every cut_text at cut_start in ascending order restores the text"}


def write_cut_filtered(files, keep: np.ndarray, out: str, cfg: FilterConfig, spans: str) -> dict[str, int]:
    """filtered/ in ``out``: the kept documents (``keep`` bool (n,)) with the cuts of the file ``spans``
    (removed_paragraphs.parquet, or removed_lines.parquet) applied."""
    from ..text.cutwrite import write_cut_documents

    return write_cut_documents(files, spans, os.path.join(out, "filtered"), cfg, keep=keep)


def write_documents(files, cfg: FilterConfig, ids: pa.Array, para: ParagraphDecision | None, keep: np.ndarray,
                    out: str, file_rows: list[int], logs: str | None = None) -> dict[str, Any]:
    """The filter's document outputs in ``out`` (``keep`` bool (n,): the kept documents): with paragraph
    removal (``para``) or C4's line removal the cut logs (in ``logs``, default ``out``: a Ray task writes its
    file's part of them elsewhere), then filtered/ with their cuts applied; else filtered/ = the kept records byte
    for byte (``io.write_kept``). Returns run.json's entries."""
    stats: dict[str, Any] = {}
    logs = out if logs is None else logs
    if para is not None:  # the paragraph logs first: filtered/ applies removed_paragraphs.parquet's cuts
        stats["paragraphs"] = write_paragraph_logs(files, cfg, ids, para, keep, logs)
        if cfg.write_filtered:
            stats["filtered"] = write_cut_filtered(files, keep, out, cfg, os.path.join(logs, REMOVED_FILE))
    elif cfg.c4_remove_lines:  # removed_lines.parquet first: filtered/ applies its cuts
        stats["c4_lines"] = write_line_cuts(files, cfg, ids, keep, logs)
        if cfg.write_filtered:
            stats["filtered"] = write_cut_filtered(files, keep, out, cfg, os.path.join(logs, REMOVED_LINES_FILE))
    elif cfg.write_filtered:
        stats["filtered"] = io.write_kept(files, keep, os.path.join(out, "filtered"), id_field=cfg.id_field,
                                          text_field=cfg.text_field, on_error=cfg.on_error, file_rows=file_rows)
    return stats


def describe(cfg: FilterConfig) -> dict[str, Any]:
    """run.json's statement of the paragraph rules of this run."""
    return {"unit": "paragraph: a maximal run of non-blank lines, trimmed of ASCII whitespace (text/split.py)",
            "action": cfg.paragraph_action, "min_paragraph_tokens": cfg.min_paragraph_tokens,
            "short_paragraphs": cfg.short_paragraphs,
            "perplexity": "each paragraph scored as a document of its own; a paragraph of fewer than "
                          f"{cfg.min_paragraph_tokens} LM words is short: "
                          + ("it inherits its document's perplexity" if cfg.short_paragraphs == "inherit"
                             else "it is never judged by perplexity")
                          + "; a document's perplexity is its long paragraphs' pooled (all of them when none "
                            "is long)",
            "lid": "each paragraph: fastText's top label in --lang and its probability >= the threshold "
                   f"(under {cfg.lid_short_chars} characters: "
                   + (f"{cfg.lid_short_threshold}" if cfg.lid_short_threshold is not None else "the same") + ")",
            "document": "rejected by language ID / perplexity only when every paragraph fails; the rules, "
                        "classifiers and DSIR read the whole original document"}
