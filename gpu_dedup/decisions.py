"""The per-document tables: their declared schemas, the reasons a row can carry, and the counts every summary
is built from.

    decisions.parquet  ``DECISIONS_SCHEMA`` (+ ``SEMANTIC_COLUMNS`` with --semantic: ``decisions_schema``), reasons
                       int8 codes over ``REASON_CODES``
    scores.parquet     ``scores_schema(columns)``: a filter run's columns, each of its declared type; reasons
                       int8 codes over ``filter_reasons(...)`` (the run's rules and classifiers name some)
    layouts            ``table_path``, ``read_table``: a run's table as one file (OUT/<name>.parquet) or as the Ray
                       engine's dataset of per-input-file parts (OUT/<name>/), read alike
    counting           ``value_counts`` (pc.value_counts, first appearance order), ``reason_counts``,
                       ``summary_counts``
    columns as numpy   ``flags_of`` (a keep column), ``codes_of`` (a dictionary's indices): not by pyarrow's
                       ``to_numpy``, which imports pandas
    composing          ``fold_removals``: the one composition rule of every composed run (``run --semantic``,
                       a recipe of steps): a later step sees the documents kept so far, and every removed row
                       names a document kept at the end (or, removed by a test, none)

One row per input document, whatever the device, engine, batch size or worker count (README, "Decisions
schema"). The pipeline writes decisions.parquet, semantic dedup and the incremental index extend it, the report
reads it; the filter (and dedup's prefilter) writes scores.parquet. Both tables store the reason as a string
column (the codes' dictionary cast back to its names), so readers see names. ``keep_rank`` is the keep order
(``--keep``) every program decides by: which copy of a duplicate stays.
"""
import os
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .errors import ConfigError, DataError, MissingFileError, RunError

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


def pipeline_schema(semantic: bool) -> pa.Schema:
    """A pipeline's decisions.parquet: ``DECISIONS_SCHEMA``, the step that removed a row, and (with a semantic
    step) ``SEMANTIC_COLUMNS``."""
    return pa.schema(list(DECISIONS_SCHEMA) + [("step", pa.string())] + (list(SEMANTIC_COLUMNS) if semantic else []))


def base_decisions(ids: pa.Array, sources: pa.Array, semantic: bool, first_row: int = 0) -> pa.Table:
    """A pipeline's decisions before any step (``pipeline_schema``): every document kept, alone in its cluster
    (its row, ``first_row`` the first: a part of the whole table holds its own rows)."""
    n = len(ids)
    rows = np.arange(first_row, first_row + n, dtype=np.int64)
    cols = {"id": ids, "keep": pa.array(np.ones(n, bool)), "reason": pa.array(["unique"] * n, pa.string()),
            "cluster_id": pa.array(rows), "representative_id": ids, "matched_id": pa.nulls(n, pa.string()),
            "jaccard": pa.nulls(n, pa.float64()), "cluster_size": pa.array(np.ones(n, np.int64)),
            "source": sources, "step": pa.nulls(n, pa.string())}
    if semantic:
        cols.update({"cosine": pa.nulls(n, pa.float64()), "semantic_nearest_id": pa.nulls(n, pa.string()),
                     "semantic_cluster": pa.nulls(n, pa.int64())})
    return pa.table(cols, schema=pipeline_schema(semantic))


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


def table_path(out: str | os.PathLike, name: str) -> str:
    """Where OUT holds its per-document table ``name`` ("decisions", "scores"): OUT/<name>.parquet (one file: the
    local engine's, the Ray engine's with --table-layout file), else OUT/<name>/ (the Ray engine's default: one
    Parquet file per input file, ``part-<k>.parquet``, that ``pyarrow.parquet.read_table`` reads as one table in
    input order).

    Raises:
        MissingFileError: neither exists (not the output directory of a finished run), or OUT/<name>/ holds no
            part (a run writes at least one: a dataset without any lost them all).
    """
    one, parts = os.path.join(os.fspath(out), f"{name}.parquet"), os.path.join(os.fspath(out), name)
    if os.path.isfile(one):
        return one
    if os.path.isdir(parts):
        if not any(n.endswith(".parquet") for n in os.listdir(parts)):
            raise MissingFileError(f"{parts!r} holds no part-<k>.parquet file: the run's {name} are lost; run it "
                                   "again (--overwrite)")
        return parts
    raise MissingFileError(f"neither {one!r} nor {parts!r} (a Ray run's parts) exists; point to the output "
                           "directory of a finished run")


def read_table(out: str | os.PathLike, name: str, columns: Sequence[str] | None = None) -> pa.Table:
    """OUT's per-document table ``name`` in either layout (``table_path``): the same rows, order and values.

    Raises:
        MissingFileError: as ``table_path``.
        DataError: a file or part that is not a readable Parquet file (truncated, damaged), named.
    """
    import pyarrow.parquet as pq

    path = table_path(out, name)
    try:
        return pq.read_table(path, columns=list(columns) if columns is not None else None)
    except (OSError, pa.ArrowException) as err:  # (pyarrow's message names the bad part of a dataset)
        raise DataError(f"{path}: not a readable Parquet table ({err}); the run's {name} are damaged: run it "
                        "again (--overwrite)") from err


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


def flags_of(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """bool (n,) of a bool column without nulls (a keep column), not by pyarrow's ``to_numpy``, which imports
    pandas (35 MiB and 0.3 s of a Ray driver that has no other use for it)."""
    u = pc.cast(column, pa.uint8())
    if isinstance(u, pa.ChunkedArray):
        u = u.combine_chunks()
    if u.null_count:
        raise DataError(f"a flag column holds {u.null_count} nulls")
    return np.frombuffer(u.buffers()[1], np.uint8, len(u), u.offset).astype(bool) if len(u) else np.zeros(0, bool)


def codes_of(indices: pa.Array, null: int) -> np.ndarray:
    """int64 (n,) of an integer array (a dictionary's indices), each null ``null``; not by pyarrow's ``to_numpy``,
    which imports pandas (as ``flags_of``)."""
    v = pc.cast(indices, pa.int64())
    if not len(v):
        return np.zeros(0, np.int64)
    out = np.frombuffer(v.buffers()[1], np.int64, len(v), v.offset).copy()
    if v.null_count:
        out[~flags_of(pc.is_valid(v))] = null
    return out


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


# the columns the fold computes that a step's values may still give for some removed rows: an --against index's
# document as their representative, with its cluster (lexical.program.decision_verdicts); null elsewhere
_OWN = ("representative_id", "cluster_id")


def fold_removals(decisions: pa.Table, rows: np.ndarray, removed: np.ndarray, matched: np.ndarray,
                  reason: str | Sequence[str] | pa.Array, *, representative: np.ndarray | None = None,
                  kind: str = "dedup", values: dict[str, Any] | None = None,
                  positions: np.ndarray | None = None) -> pa.Table:
    """The composition rule: fold a later step's removals into the decisions of the steps before it.

    The later step saw only the documents still kept (``rows``, in their order) and removed some of them. Then:

    - ``kind="dedup"`` (exact + MinHash, SemDeDup): each removal is for an earlier document of the step's input
      (``matched``: its evidence, which the same step may have removed too, e.g. SemDeDup's chain="all"); its
      representative is ``representative`` when given, else the end of its chain of matches: the first
      document along it that the step keeps. Every document an earlier step removed for (or kept beside) a
      newly removed one moves to that representative. So every removed row names a document kept at the end,
      and no duplicate group loses every copy.
    - ``kind="select"`` (a filter's test, a contamination screen): a removal has no representative. The
      documents an earlier step removed for a newly removed one move to a copy of theirs that stays (a kept
      copy of the cluster-size policy), else share its verdict: the same reason, no representative, the
      removed representative as their match (their text is a near copy of one that failed the test).
    - Nothing removed before comes back; nothing the step did not see changes but its representative; cluster
      sizes add up over merged clusters; a kept document representing others is a ``representative``.

    Args:
        decisions: the decisions so far (``DECISIONS_SCHEMA`` columns; more columns pass through), one row per
            input document.
        rows: int64 (m,) ascending: the rows of ``decisions`` the later step saw, all kept.
        removed: bool (m,): the step's removals, over its own input.
        matched: int64 (m,): for a removed document, the position in ``rows`` of the document it matched (-1:
            none); ignored where not removed.
        reason: the removed rows' reason: one, or one per row of the step's input.
        representative: int64 (m,): for a removed document, the position in ``rows`` of its kept representative
            (kind "dedup"; None: the end of the chain of matches; -1: none, as a select step's removal).
        kind: "dedup" or "select" (every removal without a representative).
        values: more columns for the removed rows, name -> one value per row of the step's input (e.g. the
            ``jaccard`` a dedup step measured, the ``step`` that removed them); a column of that name must exist.
            ``representative_id`` / ``cluster_id`` (a representative outside the table) apply where not null.
        positions: int64 (n,): each row's position in the whole decisions table when ``decisions`` is a part of
            it (None: the rows are the whole table): the cluster id a row leading a cluster of its own takes. A
            part folds as the whole does when it holds every row of each cluster the step touches (the Ray
            engine's fold: distributed/semfold.py).

    Returns:
        The decisions with the step's removals folded in.

    Raises:
        RunError: ``rows`` holds a removed document, or a representative that is removed too (a bug of the step,
            never of the input).
    """
    n = decisions.num_rows
    rows = np.asarray(rows, np.int64)
    removed = np.asarray(removed, bool)
    keep = np.asarray(decisions["keep"].to_numpy(zero_copy_only=False), bool)
    if kind not in ("dedup", "select"):
        raise RunError(f"kind must be 'dedup' or 'select', got {kind!r}")
    if rows.shape[0] != removed.shape[0] or not keep[rows].all():
        raise RunError(f"a later step must see only kept documents, one flag each: {rows.shape[0]} rows, "
                       f"{removed.shape[0]} flags, {int((~keep[rows]).sum())} of the rows already removed")
    if not removed.any():
        return decisions
    m = rows.shape[0]
    matched = np.asarray(matched, np.int64)
    newly = np.zeros(n, bool)
    newly[rows[removed]] = True
    step_reason = _per_row(reason, m)
    ids = decisions["id"].combine_chunks()
    old_rep = row_positions(decisions["representative_id"], ids)  # -1: none, or an index's document
    # the step's representative of each of its rows (-1: a removal without one: a test's verdict)
    root = np.arange(m, dtype=np.int64)
    if kind == "dedup":
        given = matched if representative is None else np.asarray(representative, np.int64)
        root = np.where(removed, given, root)
        if (root >= m).any():
            raise RunError("a removed document's representative is not among the step's input")
        for _ in range(64):  # pointer jumping over chains of matches: every chain halves each round
            nxt = np.where(root >= 0, root[np.maximum(root, 0)], -1)
            if np.array_equal(nxt, root):
                break
            root = nxt
        if removed[root[root >= 0]].any():
            raise RunError("a representative is removed by the same step (a cycle among the step's removals)")
    else:
        root = np.where(removed, -1, root)
    forward = np.arange(n, dtype=np.int64)  # every row -> where its dependents go (itself if not removed now)
    forward[rows] = np.where(root >= 0, rows[np.maximum(root, 0)], -1)
    keep_after = keep & ~newly
    # a group whose representative the step removed without a representative of its own: a copy of the group
    # that stays takes it over (the first such row), else the group shares the removed one's verdict
    lost = newly & (forward < 0)
    hit = (old_rep >= 0) & lost[np.maximum(old_rep, 0)] & (old_rep != np.arange(n))
    survivor = np.full(n, -1, np.int64)
    for r in np.flatnonzero(hit & keep_after)[::-1]:  # descending, so the smallest row wins
        survivor[old_rep[r]] = r
    forward[lost] = survivor[lost]
    rep = np.where(old_rep >= 0, forward[np.maximum(old_rep, 0)], -1)
    inherit = hit & (rep < 0) & ~keep_after & ~newly  # a row the step removed itself keeps its own verdict
    verdict_of = np.where(inherit, old_rep, np.arange(n, dtype=np.int64))  # whose verdict a row shares
    rep[newly] = np.where(lost[newly], -1, forward[newly])
    old_cluster = np.asarray(decisions["cluster_id"].to_numpy(zero_copy_only=False), np.int64)
    old_size = np.asarray(decisions["cluster_size"].to_numpy(zero_copy_only=False), np.int64)
    cluster = old_cluster.copy()
    moved = (rep != old_rep) & (rep >= 0)
    own = moved & (rep == np.arange(n))  # a copy that took its group over leads a cluster of its own
    at = np.arange(n, dtype=np.int64) if positions is None else np.asarray(positions, np.int64)
    cluster[own] = at[own]
    other = np.flatnonzero(moved & ~own)
    for _ in range(64):  # the cluster of the representative a row moved to (which may have moved too)
        nxt = cluster.copy()
        nxt[other] = cluster[rep[other]]
        if np.array_equal(nxt, cluster):
            break
        cluster = nxt
    alone = newly & (rep < 0) | inherit
    cluster[alone] = at[alone]  # no representative: a cluster of its own (lexical's convention)
    # sizes: members in this table, plus those outside it (an index's document leads its cluster)
    uniq, first, count = np.unique(old_cluster, return_index=True, return_counts=True)
    outside = old_size[first] - count
    final, inverse, final_count = np.unique(cluster, return_inverse=True, return_counts=True)
    at = np.minimum(np.searchsorted(uniq, final), len(uniq) - 1)
    size = (final_count + np.where(uniq[at] == final, outside[at], 0))[inverse]
    keep = keep & ~newly
    local = np.full(n, -1, np.int64)
    local[rows] = np.arange(m)
    source_row = np.where(inherit, verdict_of, np.arange(n))  # whose step values a row takes
    changed = newly | inherit
    take = pa.array(np.where(changed, local[source_row], 0), pa.int64())
    reason_col = pc.if_else(pa.array(changed), step_reason.take(take), decisions["reason"].combine_chunks())
    reason_col = pc.if_else(pc.and_(pa.array(keep & (size > 1)), pc.equal(reason_col, "unique")), "representative",
                            reason_col)
    reason_col = pc.if_else(pc.and_(pa.array(keep & (size == 1)), pc.equal(reason_col, "representative")), "unique",
                            reason_col)
    match = np.full(n, -1, np.int64)
    match[rows[removed]] = np.where(matched[removed] >= 0, rows[np.maximum(matched[removed], 0)], -1)
    match[inherit] = verdict_of[inherit]
    matched_id = pc.if_else(pa.array(changed), ids.take(pa.array(np.maximum(match, 0), mask=match < 0)),
                            decisions["matched_id"].combine_chunks())
    out = decisions
    # a representative outside the table (an --against index's document) stands: the step never saw it
    rep_id = pc.if_else(pa.array((old_rep < 0) & ~changed), decisions["representative_id"].combine_chunks(),
                        ids.take(pa.array(np.maximum(rep, 0), mask=rep < 0)))
    columns = {"keep": pa.array(keep), "reason": reason_col, "cluster_id": pa.array(cluster),
               "representative_id": rep_id, "matched_id": matched_id,
               "cluster_size": pa.array(size, pa.int64())}
    for name, v in (values or {}).items():
        if name not in decisions.column_names:
            raise RunError(f"the decisions have no column {name!r} to fold a step's values into")
        v = v if isinstance(v, (pa.Array, pa.ChunkedArray)) else pa.array(v)
        old = decisions[name].combine_chunks()
        if name in _OWN:  # a representative outside the table (null: the fold's own, as computed above)
            new = v.take(take).cast(old.type)
            columns[name] = pc.if_else(pc.and_(pa.array(changed), pc.is_valid(new)), new, columns[name].cast(old.type))
            continue
        columns[name] = pc.if_else(pa.array(changed), v.take(take).cast(old.type), old)
    for name, value in columns.items():
        i = out.schema.get_field_index(name)
        out = out.set_column(i, out.schema.field(i), value.cast(out.schema.field(i).type))
    return out


def _per_row(reason: str | Sequence[str] | pa.Array, m: int) -> pa.Array:
    """``reason`` as a string array of ``m`` values (one reason repeated, or one per row)."""
    if isinstance(reason, str):
        return pa.array([reason] * m, pa.string()) if m else pa.array([], pa.string())
    arr = reason.combine_chunks() if isinstance(reason, pa.ChunkedArray) else pa.array(reason)
    if len(arr) != m:
        raise RunError(f"{len(arr)} reasons for a step over {m} documents")
    return arr.cast(pa.string())


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
