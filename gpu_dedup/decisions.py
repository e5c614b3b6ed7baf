"""The per-document tables: their declared schemas, the reasons a row can carry, and the counts every summary
is built from.

    decisions.parquet  ``DECISIONS_SCHEMA`` (+ ``SEMANTIC_COLUMNS`` with --semantic: ``decisions_schema``), reasons
                       int8 codes over ``REASON_CODES``
    scores.parquet     ``scores_schema(columns)``: a filter run's columns, each of its declared type; reasons
                       int8 codes over ``filter_reasons(...)`` (the run's rules and classifiers name some)
    counting           ``value_counts`` (pc.value_counts, first appearance order), ``reason_counts``,
                       ``summary_counts``

One row per input document, whatever the device, engine, batch size or worker count (README, "Decisions
schema"). The pipeline writes decisions.parquet, semantic dedup and the incremental index extend it, the report
reads it; the filter (and dedup's prefilter) writes scores.parquet. Both tables store the reason as a string
column (the codes' dictionary cast back to its names), so readers see names. ``keep_rank`` is the keep order
(``--keep``) every program decides by: which copy of a duplicate stays.
"""
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .errors import ConfigError, RunError

DECISIONS_SCHEMA = pa.schema([
    ("id", pa.string()), ("keep", pa.bool_()), ("reason", pa.string()), ("cluster_id", pa.int64()),
    ("representative_id", pa.string()), ("matched_id", pa.string()), ("jaccard", pa.float64()),
    ("cluster_size", pa.int64()), ("source", pa.string()),
])
# the columns semantic dedup adds to the decisions (semantic/select.merge_decisions)
SEMANTIC_COLUMNS = pa.schema([("cosine", pa.float64()), ("semantic_nearest_id", pa.string()),
                              ("semantic_cluster", pa.int64())])
# Reasons in the order summaries list them; a row is kept exactly when its reason is in KEPT_REASONS.
REASONS = ("unique", "representative", "exact_duplicate", "short_exact_duplicate", "near_duplicate",
           "semantic_duplicate")
# Reasons only some runs give, listed by summaries when they occur: a prefiltered run's rejects, and the
# duplicates a cluster-size policy keeps (ClusterConfig.remove_clusters_larger_than / keep_copies); these keep
# representative_id, matched_id and jaccard as a removed duplicate would, so the choice is reversible.
FILTERED = "filtered"
CLUSTER_POLICY_REASONS = ("kept_small_cluster", "kept_copy")
REASON_CODES = REASONS + (FILTERED,) + CLUSTER_POLICY_REASONS  # the vocabulary of the int8 reason codes
KEPT_REASONS = ("unique", "representative") + CLUSTER_POLICY_REASONS
LEXICAL_REMOVALS = ("exact_duplicate", "short_exact_duplicate", "near_duplicate")


def decisions_schema(semantic: bool = False) -> pa.Schema:
    """decisions.parquet's declared schema: ``DECISIONS_SCHEMA``, then ``SEMANTIC_COLUMNS`` after --semantic."""
    if not semantic:
        return DECISIONS_SCHEMA
    return pa.schema(list(DECISIONS_SCHEMA) + list(SEMANTIC_COLUMNS))


# scores.parquet: the string columns of a filter run, and the two it ends with; every other column is a score
# (float64, null where a document was not scored: no model ran on it, no paragraph, no sentence)
SCORE_LABELS = {"id": pa.string(), "row": pa.int64(), "lid_label": pa.string(), "script_lang": pa.string(),
                "domain": pa.string(), "perplexity_lang": pa.string(), "perplexity_bucket": pa.string(),
                "lid_short": pa.bool_(), "paragraphs": pa.int64(), "paragraphs_removed": pa.int64(),
                "words": pa.int64(), "perplexity_words": pa.int64(), "perplexity_short": pa.bool_(),
                "perplexity_ranked": pa.bool_(), "domain_label": pa.string()}
SCORE_ORDER = ("id", "row", "words", "lid_label", "lid_prob", "lid_short", "script_lang", "script_frac",
               "domain", "domain_label")  # first, when present
SCORES_END = pa.schema([("keep", pa.bool_()), ("reason", pa.string())])
# a filter run's reasons, but for the columns its rules and classifiers name (``filter_reasons``)
FILTER_KEPT = "kept"
FILTER_REASONS = (FILTER_KEPT, "empty", "lid_label", "lid_prob", "lid_agreement", "perplexity", "dsir_weight")


def scores_schema(columns: Sequence[str]) -> pa.Schema:
    """scores.parquet's declared schema for a run with these score ``columns`` (any order; ``keep`` and
    ``reason`` may be among them): ``SCORE_ORDER``'s present first, then the others in the given order, then
    keep and reason. Types: ``SCORE_LABELS``, float64 for every score."""
    names = [k for k in SCORE_ORDER if k in columns]
    names += [k for k in columns if k not in names and k not in SCORES_END.names and k != "empty"]
    return pa.schema([(k, SCORE_LABELS.get(k, pa.float64())) for k in names] + list(SCORES_END))


def filter_reasons(rule_columns: Sequence[str] = (), classifier_columns: Sequence[str] = ()) -> tuple[str, ...]:
    """The vocabulary of a filter run's int8 reason codes: ``FILTER_REASONS`` and the score columns of its
    rules and classifiers (a document's reason names the test that rejected it)."""
    vocab = FILTER_REASONS + tuple(c for c in (*rule_columns, *classifier_columns) if c not in FILTER_REASONS)
    if len(vocab) > 127:
        raise ConfigError(f"a filter run has {len(vocab)} reasons; its int8 reason codes hold at most 127: use "
                          "fewer rules or classifiers in one run")
    return vocab


def reason_array(codes: np.ndarray, vocabulary: Sequence[str]) -> pa.DictionaryArray:
    """int8 ``codes`` over ``vocabulary`` as an Arrow dictionary array (cast to string when written)."""
    return pa.DictionaryArray.from_arrays(pa.array(np.asarray(codes, np.int8), pa.int8()),
                                          pa.array(list(vocabulary), pa.string()))


def value_counts(values: pa.Array | pa.ChunkedArray) -> dict[str, int]:
    """Rows per value of a reason column (strings, or dictionary codes: counted on the codes), in order of
    first appearance (``pc.value_counts``)."""
    if len(values) == 0:
        return {}
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if pa.types.is_dictionary(arr.type):
        names = arr.dictionary.to_pylist()
        return {names[d["values"]]: int(d["counts"]) for d in pc.value_counts(arr.indices).to_pylist()}
    return {d["values"]: int(d["counts"]) for d in pc.value_counts(arr).to_pylist()}


def reason_counts(decisions: pa.Table | pa.Array | pa.ChunkedArray) -> dict[str, int]:
    """Rows per reason (of a decisions table, or of its reason column): every name of REASONS (0 when absent)
    in that order, then any other reason found (a later stage's), by name."""
    found = value_counts(decisions["reason"] if isinstance(decisions, pa.Table) else decisions)
    ordered = {r: found.pop(r, 0) for r in REASONS}
    ordered.update(sorted(found.items()))
    return ordered


def summary_counts(decisions: pa.Table, n: int) -> dict[str, Any]:
    """run.json's ``counts``: input, kept, removed and rows per reason of REASONS."""
    found = reason_counts(decisions) if n else {}
    by = {r: found.get(r, 0) for r in REASONS}
    by.update({r: k for r, k in found.items() if r not in by and k})  # a prefiltered run's "filtered"
    kept = sum(by.get(r, 0) for r in KEPT_REASONS)
    return {"input": n, "kept": kept, "removed": n - kept, "by_reason": by}


def fold_removals(decisions: pa.Table, rows: np.ndarray, removed: np.ndarray, matched: np.ndarray,
                  reason: str) -> pa.Table:
    """The composition rule: fold a later step's removals into the decisions of the steps before it.

    The later step saw only the documents still kept (``rows``, in their order) and removed some of them, each
    for an earlier document of its own input (``matched``: its evidence; that document may itself be removed by
    the same step, e.g. SemDeDup's chain="all"). Then:

    - a newly removed document's representative is the end of its chain of matches: the first document along
      it that the step keeps (``representative_id``, ``cluster_id``);
    - every document represented by a newly removed one (an earlier step's duplicates, kept copies) moves to
      that document's representative, so every removed row names a document that is kept at the end and no
      duplicate group loses every copy;
    - nothing removed before comes back, and nothing the step did not see changes but its representative;
    - cluster sizes add up over the merged clusters; a kept document that now represents others is a
      ``representative``.

    Args:
        decisions: the decisions so far (``DECISIONS_SCHEMA`` columns; more columns pass through), one row per
            input document.
        rows: int64 (m,) ascending: the rows of ``decisions`` the later step saw, all kept.
        removed: bool (m,): the step's removals, over its own input.
        matched: int64 (m,): for a removed document, the position in ``rows`` of the document it matched (an
            earlier one of the step's input); ignored where not removed.
        reason: the removed rows' reason.

    Returns:
        The decisions with the step's removals folded in.

    Raises:
        RunError: ``rows`` holds a removed document, or a chain of matches never reaches a kept document (a bug of
            the step, never of the input).
    """
    n = decisions.num_rows
    rows = np.asarray(rows, np.int64)
    removed = np.asarray(removed, bool)
    keep = np.asarray(decisions["keep"].to_numpy(zero_copy_only=False), bool)
    if rows.shape[0] != removed.shape[0] or not keep[rows].all():
        raise RunError(f"a later step must see only kept documents, one flag each: {rows.shape[0]} rows, "
                       f"{removed.shape[0]} flags, {int((~keep[rows]).sum())} of the rows already removed")
    if not removed.any():
        return decisions
    m = rows.shape[0]
    root = np.where(removed, np.asarray(matched, np.int64), np.arange(m, dtype=np.int64))
    if ((root < 0) | (root >= m)).any():
        raise RunError("a removed document matched no document of the step's input")
    for _ in range(64):  # pointer jumping: every chain halves each round
        nxt = root[root]
        if np.array_equal(nxt, root):
            break
        root = nxt
    if removed[root].any():
        raise RunError("a chain of matches ends at a removed document (a cycle among the step's removals)")
    forward = np.arange(n, dtype=np.int64)  # every row -> its final representative (itself if not removed now)
    forward[rows] = rows[root]
    newly = np.zeros(n, bool)
    newly[rows[removed]] = True
    ids = decisions["id"].combine_chunks()
    old_rep = row_positions(decisions["representative_id"], ids)  # -1: none, or an index's document
    rep = np.where(old_rep >= 0, forward[np.maximum(old_rep, 0)], -1)
    rep[newly] = forward[newly]
    old_cluster = np.asarray(decisions["cluster_id"].to_numpy(zero_copy_only=False), np.int64)
    old_size = np.asarray(decisions["cluster_size"].to_numpy(zero_copy_only=False), np.int64)
    moved = rep != old_rep
    cluster = old_cluster.copy()
    cluster[moved] = old_cluster[rep[moved]]
    # sizes: members in this table, plus those outside it (an index's document leads its cluster)
    uniq, first, count = np.unique(old_cluster, return_index=True, return_counts=True)
    outside = old_size[first] - count
    final, inverse, final_count = np.unique(cluster, return_inverse=True, return_counts=True)
    at = np.minimum(np.searchsorted(uniq, final), len(uniq) - 1)
    size = (final_count + np.where(uniq[at] == final, outside[at], 0))[inverse]
    keep = keep & ~newly
    reason = pc.if_else(pa.array(newly), pa.scalar(reason, pa.string()), decisions["reason"].combine_chunks())
    grouped = pa.array(keep & (size > 1))
    alone = pa.array(keep & (size == 1))
    reason = pc.if_else(pc.and_(grouped, pc.equal(reason, "unique")), "representative", reason)
    reason = pc.if_else(pc.and_(alone, pc.equal(reason, "representative")), "unique", reason)
    match = np.full(n, -1, np.int64)
    match[rows[removed]] = rows[np.asarray(matched, np.int64)[removed]]
    matched_id = pc.if_else(pa.array(newly), ids.take(pa.array(np.maximum(match, 0), pa.int64())),
                            decisions["matched_id"].combine_chunks())
    out = decisions
    for name, value in (("keep", pa.array(keep)), ("reason", reason), ("cluster_id", pa.array(cluster)),
                        ("representative_id", ids.take(pa.array(np.maximum(rep, 0), mask=rep < 0))),
                        ("matched_id", matched_id), ("cluster_size", pa.array(size, pa.int64()))):
        i = out.schema.get_field_index(name)
        out = out.set_column(i, out.schema.field(i), value.cast(out.schema.field(i).type))
    return out


def row_positions(values: pa.Array | pa.ChunkedArray, ids: pa.Array) -> np.ndarray:
    """int64: the position in ``ids`` of each of ``values`` (-1 for a null, or a value not among ``ids``)."""
    idx = pc.index_in(values, value_set=ids)
    return np.asarray(pc.fill_null(idx, -1).to_numpy(zero_copy_only=False), np.int64)


def keep_rank(keep: str, *, n: int, text_bytes: np.ndarray | None = None, ids: pa.Array | None = None,
              values: np.ndarray | None = None) -> np.ndarray:
    """Position of each row in keep order (int64 (n,), a permutation of 0..n-1; 0 is kept first).

    first: input order. longest: most raw UTF-8 bytes first. min-id: smallest id (binary string order)
    first. max:<column> / min:<column>: largest / smallest value first, NaN/null last. Ties always go to input order."""
    rows = np.arange(n, dtype=np.int64)
    if keep == "first":
        return rows
    if keep == "longest":
        order = np.lexsort((rows, -np.asarray(text_bytes, np.int64)))
    elif keep == "min-id":
        order = np.asarray(pc.sort_indices(pa.table({"id": ids, "row": rows}),
                                           sort_keys=[("id", "ascending"), ("row", "ascending")]), np.int64)
    elif keep.startswith(("max:", "min:")):
        v = np.asarray(values, np.float64)
        nan = np.isnan(v)
        sign = -1.0 if keep.startswith("max:") else 1.0
        order = np.lexsort((rows, sign * np.where(nan, 0.0, v), nan))
    else:
        raise ConfigError(f"unknown keep policy {keep!r}")
    rank = np.empty(n, np.int64)
    rank[order] = rows
    return rank
