"""How the filter's scores are used beyond a threshold (issue #25): selection by rank and CCNet's buckets
(``rank_keep``, ``perplexity_buckets``, per language with ``groups``), the stochastic-retention draw
(``uniform_draws``; the rules are ``config.Retention``) and its curve for run.json (``retention_curves``),
the documents at the 33rd / 50th / 67th percentile of every score for the audit (``percentile_picks``), and
the retention a single threshold gives at points over a score's range (``retention``, run.json's table). Pure functions of score columns; ``stage`` calls them."""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from .config import FilterConfig

RETENTION_POINTS = 21  # thresholds of run.json's retention table per score column, and of a stochastic-retention curve


def perplexity_ranks(values: np.ndarray) -> np.ndarray:
    """int64 (n,): each document's 0-based rank by ascending perplexity among the documents that have one
    (ties by input order: a stable sort), -1 for a null (NaN) perplexity."""
    ranks = np.full(len(values), -1, np.int64)
    idx = np.flatnonzero(~np.isnan(values))
    ranks[idx[np.argsort(values[idx], kind="stable")]] = np.arange(len(idx))
    return ranks


def _groups(values: np.ndarray, groups) -> list[np.ndarray]:
    """The row sets ranked on their own: all rows, or one set per distinct value of ``groups``."""
    if groups is None:
        return [np.arange(len(values))]
    return [np.flatnonzero(groups == g) for g in sorted(set(groups.tolist()))]


def rank_keep(values: np.ndarray, fraction: float, groups: np.ndarray | None = None) -> np.ndarray:
    """bool (n,): the round(fraction * m) documents of lowest ``values`` among the m non-NaN ones (halves
    up, as DSIR's --select; ties by input order); with ``groups`` (a language per row), within each group."""
    from .dsir import select_count

    out = np.zeros(len(values), bool)
    for rows in _groups(values, groups):
        ranks = perplexity_ranks(values[rows])
        k = select_count(int((ranks >= 0).sum()), float(fraction))
        out[rows] = (ranks >= 0) & (ranks < k)
    return out


BUCKETS = ("head", "middle", "tail")


class Ranks:
    """The run's rank selections: ``keep_lowest`` (``rank_keep``) and ``buckets`` (``perplexity_buckets``) of the
    units ``unit`` ("document" or "paragraph") given, in input order. This one ranks the arrays it is given, which
    hold every unit of the run (the local engine, ``LOCAL_RANKS``); the Ray engine's cuts each file's units at
    thresholds found over every file (gpu_dedup/distributed/filter.py), the same selection."""

    def keep_lowest(self, unit: str, values: np.ndarray, fraction: float, groups: np.ndarray | None = None
                    ) -> np.ndarray:
        return rank_keep(values, fraction, groups)

    def buckets(self, unit: str, values: np.ndarray, cuts: tuple[float, ...], groups: np.ndarray | None = None
                ) -> np.ndarray:
        return perplexity_buckets(values, cuts, groups)


LOCAL_RANKS = Ranks()


def perplexity_buckets(values: np.ndarray, cuts: tuple[float, ...], groups: np.ndarray | None = None) -> np.ndarray:
    """object (n,): CCNet's bucket of every document: "head" for the round(a * m) lowest perplexities,
    "middle" up to round(b * m), "tail" for the rest, None without a perplexity (the rank of ``rank_keep``;
    with ``groups``, within each)."""
    from .dsir import select_count

    out = np.full(len(values), None, dtype=object)
    for rows in _groups(values, groups):
        ranks = perplexity_ranks(values[rows])
        m = int((ranks >= 0).sum())
        ka, kb = select_count(m, float(cuts[0])), select_count(m, float(cuts[1]))
        ok = ranks >= 0
        out[rows[ok]] = np.array(BUCKETS, dtype=object)[(ranks[ok] >= ka).astype(np.int64) + (ranks[ok] >= kb)]
    return out


def perplexity_rank_stats(values: np.ndarray, cfg: FilterConfig, ranked: np.ndarray | None = None
                          ) -> dict[str, Any]:
    """run.json's ``perplexity_rank``: the units (documents, or paragraphs) ``perplexity_keep`` ranked
    (``ranked`` bool: those still in when perplexity's turn came; None: every one with a perplexity), the
    kept count and the perplexity at the cut; the bucket cuts with their perplexity boundaries and counts
    (buckets label every unit with a perplexity, whatever removed it: they select nothing). ``rank_summary`` of
    the sorted values."""
    scored = ~np.isnan(values)
    v = np.sort(values[scored & (ranked if ranked is not None else True)])
    w = np.sort(values[scored])
    return rank_summary(cfg, len(values), len(v), len(w), lambda r: float(v[r]), lambda r: float(w[r]))


def rank_summary(cfg: FilterConfig, n: int, ranked: int, scored: int, ranked_at, scored_at) -> dict[str, Any]:
    """``perplexity_rank_stats`` of ``n`` units, ``ranked`` of them ranked and ``scored`` with a perplexity;
    ``ranked_at(r)`` / ``scored_at(r)``: the perplexity of rank r (0-based) among them."""
    from .dsir import select_count

    out: dict[str, Any] = {"ranked": ranked, "ties": "input order", "null_perplexity": int(n - scored)}
    if cfg.perplexity_keep is not None:
        k = select_count(ranked, float(cfg.perplexity_keep))
        out.update(keep_fraction=cfg.perplexity_keep, kept=k, cut=ranked_at(k - 1) if k else None,
                   not_ranked=int(n - ranked))
    if cfg.perplexity_buckets:
        ks = [select_count(scored, float(c)) for c in cfg.perplexity_buckets]
        out["buckets"] = {"cuts": list(cfg.perplexity_buckets), "of": "every unit with a perplexity",
                          "upper_perplexity": {"head": scored_at(ks[0] - 1) if ks[0] else None,
                                               "middle": scored_at(ks[1] - 1) if ks[1] else None},
                          "documents": {"head": ks[0], "middle": ks[1] - ks[0], "tail": scored - ks[1]}}
    return out


def rank_stats(cols: dict[str, Any], cfg: FilterConfig, para=None) -> dict[str, Any]:
    """run.json's ``perplexity_rank`` (``perplexity_rank_stats``) of the run: its documents (or with
    paragraph_action="remove" its paragraphs, ``para``: a ``paragraphs.ParagraphDecision``), per language
    with one model per language."""
    if para is not None:
        values, ranked = para.used, para.ranked
        lang = cols["perplexity_lang"][para.scores.row] if cfg.perplexity_lang else None
    else:
        values, ranked, lang = cols["perplexity"], cols.get("perplexity_ranked"), cols.get("perplexity_lang")
    if not cfg.perplexity_lang:
        return perplexity_rank_stats(values, cfg, ranked)
    return {"by_language": {code: perplexity_rank_stats(values[lang == code], cfg,
                                                         ranked[lang == code] if ranked is not None else None)
                            for code, _ in cfg.perplexity_lang}}


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix64(z: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer (uint64 arrays; the wrap-around is the point)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def uniform_draws(seed: int, name: str, rows: np.ndarray) -> np.ndarray:
    """float64 (n,) in [0, 1): the stochastic-retention draw of each document, a splitmix64 hash of (seed,
    the classifier's name, the document's input row), so that it does not depend on batching, device or the
    other filters, and two classifiers draw independently. Top 53 bits / 2**53."""
    import zlib

    with np.errstate(over="ignore"):
        base = _mix64(np.array([(int(seed) << 32 | zlib.crc32(name.encode())) & (2**64 - 1)], np.uint64))
        z = _mix64(base + (np.asarray(rows, np.uint64) + np.uint64(1)) * _GOLDEN)
    return (z >> np.uint64(11)).astype(np.float64) * (1.0 / 2**53)


def retention_counts(cols: dict[str, Any], scorers) -> dict[str, list]:
    """Per classifier with stochastic retention: [documents with a score, those its draw kept, the sum of their
    P(keep)]: what ``retention_curves`` says, added over files (the sum in float64: a Ray run's may differ from
    the local engine's in its last bits)."""
    out: dict[str, list] = {}
    for c in scorers.classifiers:
        r = c.spec.retention
        if r is None:
            continue
        s = np.asarray(cols[c.spec.column], np.float64)
        ok = ~np.isnan(s)
        p = r.prob(s[ok])
        out[c.spec.column] = [int(ok.sum()), int((cols[c.draw_column][ok] < p).sum()), float(p.sum())]
    return out


def retention_curves(cols: dict[str, Any], scorers, points: int = RETENTION_POINTS,
                     counts: dict[str, list] | None = None) -> dict[str, Any]:
    """run.json's ``stochastic_retention``: per classifier with stochastic retention, its formula, P(keep)
    at ``points`` scores in [0, 1], the retention it implies on this corpus (mean P(keep) over the scored
    documents) and the one observed (documents its draw kept, among those with a score). ``counts``: the
    ``retention_counts`` (of every file, added) when ``cols`` are not the run's."""
    counts = counts if counts is not None else retention_counts(cols, scorers)
    out: dict[str, Any] = {}
    grid = np.linspace(0.0, 1.0, points)
    for c in scorers.classifiers:
        r = c.spec.retention
        if r is None:
            continue
        scored, kept, p_sum = counts[c.spec.column]
        out[c.spec.column] = {
            "formula": r.formula(), "draw_column": c.draw_column,
            "curve": [{"score": float(g), "p_keep": float(v)} for g, v in zip(grid, r.prob(grid))],
            "scored": int(scored),
            "expected_retention": float(np.float64(p_sum) / scored) if scored else None,
            "observed_retention": float(np.float64(kept) / scored) if scored else None}
    return out


NOT_SCORES = ("row", "paragraphs", "paragraphs_removed", "words", "perplexity_words")  # numeric, but counts
AUDIT_PERCENTILES = (33, 50, 67)  # the text at these percentiles of a score shows what a threshold there cuts


def pick_columns(schema: pa.Schema) -> list[str]:
    """The score columns of scores.parquet (``schema``) the audit picks percentiles of: numeric, not id / row / keep /
    the paragraph counts, not a stochastic draw."""
    return [f.name for f in schema if f.name not in NOT_SCORES and not f.name.endswith("_draw")
            and (pa.types.is_floating(f.type) or pa.types.is_integer(f.type))]


def percentile_picks(table: pa.Table, percentiles=AUDIT_PERCENTILES) -> list[tuple[str, int, int]]:
    """[(score column, percentile, row)]: for every numeric score column of scores.parquet (not id / row /
    keep / the paragraph counts, not a stochastic draw) and every percentile q, the document of rank round(q / 100 * (m - 1))
    (halves up) among the m documents with that score, sorted by value with ties by input order."""
    out = []
    for name in pick_columns(table.schema):
        v = table[name].to_numpy(zero_copy_only=False).astype(np.float64)
        idx = np.flatnonzero(~np.isnan(v))
        if not len(idx):
            continue
        order = idx[np.argsort(v[idx], kind="stable")]
        for q in percentiles:
            out.append((name, int(q), int(order[int(np.floor(q / 100 * (len(order) - 1) + 0.5))])))
    return out


def retention(values: np.ndarray, direction: str, points: int = RETENTION_POINTS) -> list[dict[str, float]]:
    """Fraction of documents a single threshold keeps, at ``points`` thresholds spanning the scores
    (probabilities: 0..1; others: their 0th..100th percentiles). NaN scores are never kept."""
    v = np.asarray(values, np.float64)
    finite = v[np.isfinite(v)]
    n = len(v)
    if not n or not len(finite):
        return []
    if finite.min() >= 0.0 and finite.max() <= 1.0:
        grid = np.linspace(0.0, 1.0, points)
    else:
        grid = np.unique(np.percentile(finite, np.linspace(0, 100, points)))
    s = np.sort(finite)
    out = []
    for t in grid:
        kept = (len(s) - np.searchsorted(s, t, "left")) if direction == "min" else np.searchsorted(s, t, "right")
        out.append({"threshold": float(t), "retention": float(kept) / n})
    return out


# ------------------------------------------------------------------------------ stages, selections, tokens
STAGE_OF = {"empty": "empty", "lid_label": "lid", "lid_prob": "lid", "lid_agreement": "lid",
            "perplexity": "perplexity", "dsir_weight": "dsir"}  # the fixed reasons' stage; rules / classifiers too


def stage_index(reason: np.ndarray, stages: list[str], rule_columns, classifier_columns) -> np.ndarray:
    """int64 (n,): the index in ``stages`` of the stage that removed each document (``len(stages)``: kept),
    from its reason (object (n,))."""
    of = dict(STAGE_OF, **{c: "rules" for c in rule_columns}, **{c: "classifiers" for c in classifier_columns})
    index = {st: i for i, st in enumerate(stages)}
    out = np.full(len(reason), len(stages), np.int64)
    for why, st in of.items():
        out[reason == why] = index[st]
    return out


def _retained(c: list[int]) -> dict[str, Any]:
    """A side's documents, documents kept, words and words kept (``c``) as run.json says them."""
    docs, kept, w_in, w_kept = (int(x) for x in c)
    return {"documents": docs, "documents_kept": kept, "words": w_in, "words_kept": w_kept,
            "words_retention": w_kept / w_in if w_in else None}


def _sides(words: np.ndarray, keep: np.ndarray) -> list[int]:
    return [int(len(words)), int(keep.sum()), int(words.sum()), int(words[keep].sum())]


def token_counts(cols: dict[str, Any], cfg: FilterConfig, scorers) -> dict[str, Any]:
    """What ``retained_tokens`` says, as whole numbers that add over files (``merge_token_counts``): per stage
    (empty, ``cfg.order``, DSIR) the documents and words still in after it and the words it removed, the input's
    and the kept documents and words, and those per language / domain value."""
    from .rules import describe

    words = np.asarray(cols["words"], np.int64)
    keep = np.asarray(cols["keep"], bool)
    reason = cols["reason"].cast(pa.string()).to_numpy(zero_copy_only=False).astype(object)
    stages = ["empty", *cfg.order, "dsir"]
    at = stage_index(reason, stages, list(describe(scorers.rules)) if scorers.rules is not None else [],
                     [c.spec.column for c in scorers.classifiers])
    out: dict[str, Any] = {"stages": [[int((at > i).sum()), int(words[at > i].sum()), int(words[at == i].sum())]
                                      for i in range(len(stages))], "kept": _sides(words, keep)}
    for key, col in (("by_language", "lid_label"), ("by_domain", "domain_label" if "domain_label" in cols
                                                                 else "domain")):
        if col in cols:
            values = np.array(["" if v is None else v for v in cols[col]], dtype=object)
            out[key] = {"column": col, "values": {v: _sides(words[values == v], keep[values == v])
                                                  for v in sorted(set(values.tolist()))}}
    return out


def merge_token_counts(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """``token_counts`` of several files (in file order) as those of their union."""
    out = {"stages": [[sum(x) for x in zip(*rows)] for rows in zip(*(p["stages"] for p in parts))],
           "kept": [sum(x) for x in zip(*(p["kept"] for p in parts))]}
    for key in ("by_language", "by_domain"):
        have = [p[key] for p in parts if key in p]
        if have:
            values: dict[str, list[int]] = {}
            for h in have:
                for v, c in h["values"].items():
                    values[v] = [a + b for a, b in zip(values.get(v, [0, 0, 0, 0]), c)]
            out[key] = {"column": have[0]["column"], "values": dict(sorted(values.items()))}
    return out


def retained_tokens(cols: dict[str, Any], cfg: FilterConfig, scorers, counts: dict[str, Any] | None = None
                    ) -> dict[str, Any]:
    """run.json's ``retained_tokens`` (002:57 "Quantify the expected token retention at each stage"; 000:247
    "report retained-token/domain/language proportions"): words (column ``words``) and documents still in
    after each stage, in the order the run applied them (empty, ``cfg.order``, DSIR), and kept per language
    (``lid_label``) and per domain (``domain_label``, else the code / math tag ``domain``). ``counts``: the
    ``token_counts`` (of every file, merged) when ``cols`` are not the run's."""
    c = counts if counts is not None else token_counts(cols, cfg, scorers)
    docs, _, total, _ = c["kept"]
    rows = [{"stage": st, "documents": d, "words": w, "words_removed": removed,
             "words_retention": w / total if total else None}
            for st, (d, w, removed) in zip(["empty", *cfg.order, "dsir"], c["stages"])]
    out: dict[str, Any] = {
        "unit": "words: runs of non-whitespace characters (scores.parquet column words), a model-free stand-in "
                "for tokens",
        "input": {"documents": docs, "words": total}, "after_each_stage": rows, "kept": _retained(c["kept"])}
    if cfg.paragraph_action == "remove" or cfg.c4_remove_lines:
        out["note"] = "the words of the kept documents before their paragraph / line cuts"
    for key in ("by_language", "by_domain"):
        if key in c:
            out[key] = {"column": c[key]["column"],
                        "values": {(v or "(none)"): _retained(x) for v, x in c[key]["values"].items()}}
    return out


def selections(cfg: FilterConfig, ranked: int, paragraphs: bool, dsir: dict | None = None) -> dict[str, Any]:
    """run.json's ``selections``: the order the run applied its stages in, and for each selection what it
    ranked: ``perplexity_keep`` the ``ranked`` units (documents, or ``paragraphs`` with
    paragraph_action="remove") still in when its turn came in ``cfg.order``; DSIR the documents every other test
    kept (``dsir``: run.json's ``dsir``)."""
    before = ["empty"] + list(cfg.order[:cfg.order.index("perplexity")])
    out: dict[str, Any] = {"order": ["empty", *cfg.order, "dsir"]}
    if cfg.perplexity_keep is not None:
        out["perplexity"] = {
            "kind": f"keep the fraction {cfg.perplexity_keep:g} of lowest perplexity"
                    + (" per language" if cfg.perplexity_lang else ""),
            "unit": "paragraph" if paragraphs else "document",
            "ranked": int(ranked),
            "ranked_from": f"the {'paragraphs' if paragraphs else 'documents'} still in after "
                           f"{', '.join(before)} (002:57: each stage judges what the stages before it kept), "
                           f"judged by perplexity (a model for their language, at least "
                           f"{cfg.min_perplexity_tokens} LM words)"}
    if dsir is not None:
        out["dsir"] = {"kind": f"select {dsir['requested']}", "ranked": dsir["pool"],
                       "ranked_from": "the documents every other test kept"}
    return out
