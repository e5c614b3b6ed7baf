"""``run --semantic --engine ray``: the semantic stage's removals folded into the lexical decisions by tasks
(``decisions.fold_removals``, the rule the local engine's ``semantic.merge_decisions`` follows), so the driver
holds no decision.

A removal changes only the rows of the clusters it touches: the cluster of the removed document and that of the
document it matched (a chain of matches goes on through removed documents, so every link's cluster is touched).
A row of any other cluster keeps its representative, cluster and size. So the fold runs on the rows of the touched
clusters alone (``fold_removals`` of a part that holds whole clusters equals that of the whole table) and the
other rows pass through:

    semfold_touched   per input file: the ids of its semantic removals and of the documents they matched
                      (``touched_ids``)
    semfold_clusters  per input file: the lexical clusters of its rows among those ids (``touched_clusters``)
    semfold_gather    per input file: its rows of those clusters, with their global row and the semantic stage's
                      verdict (``gathered``)
    semfold_fold      one task: ``fold_removals`` over the gathered rows (``fold_gathered``), each file's changed
                      rows sent back to it (the driver says how many it removed, as the local engine does)
    semfold_merge     per input file: its lexical part with the fold's rows put back and the semantic columns
                      added (``merged_part``): the final decisions part the later stages read

Order "beside" runs semfold_merge only (the lexical decisions stand). A task holds one file's rows, or (fold,
and the ids and clusters each task reads) the touched clusters' rows: the semantic duplicates and their groups,
not the corpus. With no semantic removal only semfold_touched and semfold_merge run.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..decisions import DECISIONS_SCHEMA, decisions_schema, fold_removals, row_positions
from ..errors import DataError
from ..semantic.select import semantic_columns
from .rows import Job, run_once
from .shuffle import Layout, file_of

_IDS = pa.schema([("id", pa.string())])
_CLUSTERS = pa.schema([("cluster", pa.int64())])
# the gathered rows: the decisions' columns, the row in the whole decisions table, the semantic verdict (a row the
# semantic stage did not see: not removed, no match)
_GATHERED = pa.schema(list(DECISIONS_SCHEMA) + [("row", pa.int64()), ("sem_removed", pa.bool_()),
                                                ("sem_matched", pa.string())])
_SEEN = {"after": "the documents the lexical stages kept", "beside": "every document"}


def touched_ids(sem: pa.Table) -> pa.Table:
    """The ids of ``sem``'s removals (a semantic decisions part) and of the documents they matched."""
    removed = pc.invert(sem["keep"])
    return pa.table({"id": pa.concat_arrays([sem["id"].filter(removed).combine_chunks(),
                                             sem["matched_id"].filter(removed).combine_chunks()])}, schema=_IDS)


def touched_clusters(lexical: pa.Table, ids: pa.Array) -> np.ndarray:
    """int64, ascending: the clusters of ``lexical``'s rows (a lexical decisions part) whose id is among ``ids``."""
    hit = np.asarray(pc.is_in(lexical["id"], value_set=ids).to_numpy(zero_copy_only=False), bool)
    return np.unique(np.asarray(lexical["cluster_id"].to_numpy(), np.int64)[hit])


def seen_rows(lexical: pa.Table, sem: pa.Table | None, order: str, where: str) -> np.ndarray:
    """int64: the rows of ``lexical`` the semantic stage saw ("after": those kept; "beside": all), checked against
    ``sem``, its decisions of them (None: it saw no document of this part); ``where`` names the part."""
    seen = np.flatnonzero(np.asarray(lexical["keep"].to_numpy(zero_copy_only=False), bool)) if order == "after" \
        else np.arange(lexical.num_rows, dtype=np.int64)
    n = 0 if sem is None else sem.num_rows
    if n != seen.shape[0] or (n and not lexical["id"].take(pa.array(seen)).equals(sem["id"])):
        raise DataError(f"the semantic decisions of {where} ({n} rows) must list {_SEEN[order]} ({seen.shape[0]}), "
                        "in input order: run both stages on the same input")
    return seen


def gathered(lexical: pa.Table, sem: pa.Table | None, clusters: np.ndarray, row0: int, where: str) -> pa.Table:
    """``lexical``'s rows of ``clusters`` (_GATHERED): with their row in the whole table (``row0`` + position)
    and, for a row the semantic stage saw, its verdict (``sem``: its decisions of the kept rows, order "after")."""
    seen = seen_rows(lexical, sem, "after", where)
    removed = np.zeros(lexical.num_rows, bool)
    at = np.full(lexical.num_rows, -1, np.int64)
    if seen.shape[0]:
        removed[seen] = ~np.asarray(sem["keep"].to_numpy(zero_copy_only=False), bool)
        at[seen] = np.arange(seen.shape[0])
    pick = np.flatnonzero(np.isin(np.asarray(lexical["cluster_id"].to_numpy(), np.int64), clusters))
    matched = sem["matched_id"].combine_chunks().take(pa.array(np.maximum(at[pick], 0), mask=at[pick] < 0)) \
        if seen.shape[0] else pa.nulls(pick.shape[0], pa.string())
    part = lexical.select(DECISIONS_SCHEMA.names).take(pa.array(pick, pa.int64()))
    return pa.Table.from_arrays([*part.columns, pa.array(row0 + pick, pa.int64()), pa.array(removed[pick]),
                                 matched.cast(pa.string())], schema=_GATHERED)


def fold_gathered(g: pa.Table) -> tuple[pa.Table, int]:
    """``fold_removals`` of the gathered rows (every row of each touched cluster, in row order): (the folded
    rows (DECISIONS_SCHEMA and "row"), the number of semantic removals among them)."""
    decisions = g.select(DECISIONS_SCHEMA.names)
    rows = np.flatnonzero(np.asarray(g["keep"].to_numpy(zero_copy_only=False), bool))
    removed = np.asarray(g["sem_removed"].to_numpy(zero_copy_only=False), bool)[rows]
    matched = row_positions(g["sem_matched"].combine_chunks().take(pa.array(rows, pa.int64())),
                            g["id"].combine_chunks().take(pa.array(rows, pa.int64())))
    out = fold_removals(decisions, rows, removed, matched, "semantic_duplicate", positions=g["row"].to_numpy())
    return out.append_column("row", g["row"]), int(removed.sum())


def merged_part(lexical: pa.Table, folded: pa.Table | None, sem: pa.Table | None, row0: int, order: str,
                where: str) -> pa.Table:
    """The final decisions part (``decisions_schema(semantic=True)``): ``lexical`` with ``folded``'s rows (the
    fold's rows of this part, by their "row", ``row0`` its first) in their places, and the semantic columns of
    the rows the semantic stage saw (``sem``: its decisions of them; null for the others)."""
    seen = seen_rows(lexical, sem, order, where)
    columns = put_back(lexical.select(DECISIONS_SCHEMA.names), folded, row0).columns
    columns += semantic_columns(sem, seen, lexical.num_rows)
    return pa.Table.from_arrays(columns, schema=decisions_schema(semantic=True))


def put_back(part: pa.Table, folded: pa.Table | None, row0: int) -> pa.Table:
    """``part`` (a file's decisions, ``row0`` its first row in the whole table) with the fold's rows of it
    (``folded``: its columns and each row's "row" in the whole table) in their places."""
    if folded is None or not folded.num_rows:
        return part
    n = part.num_rows
    src = np.arange(n, dtype=np.int64)
    src[np.asarray(folded["row"].to_numpy(), np.int64) - row0] = n + np.arange(folded.num_rows)
    take = pa.array(src, pa.int64())
    return pa.Table.from_arrays([pa.concat_arrays([part[c].combine_chunks(), folded[c].combine_chunks()
                                                   .cast(part.schema.field(c).type)]).take(take)
                                 for c in part.column_names], schema=part.schema)


# ---------------------------------------------------------------------------------------------- the tasks

def _sem_part(job: Job, fi: int, sem_work: str, seen: int) -> pa.Table | None:
    """The semantic stage's decisions of input file ``fi`` (its work dir ``sem_work``; ``seen``: how many
    documents it saw in the whole run, 0: it wrote no part)."""
    return Layout(sem_work).read_one("decisions", f"f{fi - job.first:06d}") if seen else None


def _where(job: Job, fi: int) -> str:
    return f"file {job.files[fi].relpath}"


def _row0(job: Job, fi: int) -> int:
    """The first row of input file ``fi`` in the decisions table (rows after an --against index's)."""
    offs = job.offs()
    return int(offs[fi] - offs[job.first])


@run_once("semfold_touched")
def semfold_touched(job: Job, fi: int, sem_work: str, seen: int) -> dict[str, Any]:
    """File ``fi``'s semantic removals and their matches (``touched_ids``)."""
    sem = _sem_part(job, fi, sem_work, seen)
    ids = touched_ids(sem) if sem is not None else _IDS.empty_table()
    job.layout.write(ids, "semfold_ids", f"f{fi:06d}")
    return {"removed": ids.num_rows // 2}


@run_once("semfold_clusters")
def semfold_clusters(job: Job, fi: int, table: str) -> dict[str, Any]:
    """The lexical clusters of file ``fi``'s rows among every file's touched ids."""
    lay = job.layout
    ids = lay.read("semfold_ids", [f"f{g:06d}" for g in range(job.first, job.nfiles)], _IDS)["id"]
    c = touched_clusters(lay.read_one(table, f"f{fi:06d}", ["id", "cluster_id"]), ids.combine_chunks())
    lay.write(pa.table({"cluster": pa.array(c, pa.int64())}, schema=_CLUSTERS), "semfold_clusters", f"f{fi:06d}")
    return {"clusters": int(c.shape[0])}


@run_once("semfold_gather")
def semfold_gather(job: Job, fi: int, table: str, sem_work: str, seen: int) -> dict[str, Any]:
    """File ``fi``'s rows of every touched cluster (``gathered``)."""
    lay = job.layout
    c = lay.read("semfold_clusters", [f"f{g:06d}" for g in range(job.first, job.nfiles)], _CLUSTERS)["cluster"]
    g = gathered(lay.read_one(table, f"f{fi:06d}"), _sem_part(job, fi, sem_work, seen),
                 np.unique(np.asarray(c.to_numpy(), np.int64)), _row0(job, fi), _where(job, fi))
    lay.write(g, "semfold_rows", f"f{fi:06d}")
    return {"rows": g.num_rows}


@run_once("semfold_fold")
def semfold_fold(job: Job, key: int) -> dict[str, Any]:
    """``fold_gathered`` over every file's gathered rows; each file's folded rows written for its merge task."""
    lay = job.layout
    g = lay.read("semfold_rows", [f"f{fi:06d}" for fi in range(job.first, job.nfiles)], _GATHERED)
    out, removed = fold_gathered(g)
    offs = job.offs()
    at = file_of(out["row"].to_numpy() + int(offs[job.first]), offs) - job.first
    lay.write_split(out, at, job.nfiles - job.first, "semfold_folded", lambda f: f"f{f + job.first:06d}")
    return {"rows": out.num_rows, "removed": removed}


@run_once("semfold_merge")
def semfold_merge(job: Job, fi: int, table: str, sem_work: str, seen: int, order: str, folded: bool) -> dict[str, Any]:
    """File ``fi``'s final decisions part (``merged_part``), which the recount, kept and publish stages read."""
    lay = job.layout
    part = merged_part(lay.read_one(table, f"f{fi:06d}"),
                       lay.read_one("semfold_folded", f"f{fi:06d}") if folded else None,
                       _sem_part(job, fi, sem_work, seen), _row0(job, fi), order, _where(job, fi))
    lay.write(part, "decisions", f"f{fi:06d}")
    return {"rows": part.num_rows}
