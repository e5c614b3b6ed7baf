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

from .errors import ConfigError

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
                "lid_short": pa.bool_(), "paragraphs": pa.int64(), "paragraphs_removed": pa.int64()}
SCORE_ORDER = ("id", "row", "lid_label", "lid_prob", "lid_short", "script_lang", "script_frac",
               "domain")  # first, when present
SCORES_END = pa.schema([("keep", pa.bool_()), ("reason", pa.string())])
# a filter run's reasons, but for the columns its rules and classifiers name (``filter_reasons``)
FILTER_KEPT = "kept"
FILTER_REASONS = (FILTER_KEPT, "empty", "lid_label", "lid_prob", "perplexity", "dsir_weight")


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
