"""``run --semantic --engine ray``: the semantic stage's removals folded into the lexical decisions by tasks
(``decisions.fold_removals``, the rule the local engine's ``semantic.merge_decisions`` follows), so the driver
holds no decision; and the fold's shares, which a recipe's composition (stepfold.py) deals the same way.

A removal changes only the rows of the clusters it touches: the cluster of the removed document and that of the
document it matched (a chain of matches goes on through removed documents, so every link's cluster is touched).
A row of any other cluster keeps its representative, cluster and size. So the fold runs on the rows of the touched
clusters alone (``fold_removals`` of a part that holds whole clusters equals that of the whole table) and the
other rows pass through. It runs in shares: the touched clusters grouped by the links between them (a group holds
every cluster a removal of its own links to), the groups dealt in order into shares of about FOLD_ROWS rows, a
fold task a share (``fold_shares``):

    semfold_touched     per input file: its semantic removals and the documents they matched (``touched_links``)
    semfold_clusters    per input file: its rows whose id is among those (``touched_rows``: id, cluster, size)
    semfold_components  one task: the touched clusters' shares (``fold_shares``)
    semfold_gather      per input file: its rows of the touched clusters, with their global row and the semantic
                        stage's verdict (``gathered``), by share
    semfold_fold        per share: ``fold_removals`` over its gathered rows (``fold_gathered``), each file's
                        changed rows sent back to it (the driver says how many it removed, as the local engine does)
    semfold_merge       per input file: its lexical part with the fold's rows put back and the semantic columns
                        added (``merged_part``): the final decisions part the later stages read

Order "beside" runs semfold_merge only (the lexical decisions stand). A task holds one file's rows, a share's
gathered rows (at most FOLD_ROWS but for the largest group's), or (the ids and clusters the clusters and components
tasks read) the touched ids: the semantic duplicates' links, not the corpus. With no semantic removal only
semfold_touched and semfold_merge run.
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

# a removal and the ids it links: its match, its representative (null: the end of its chain of matches)
LINKS = pa.schema([("id", pa.string()), ("matched_id", pa.string()), ("representative_id", pa.string())])
# a row whose id a removal links: its cluster and the cluster's size (the rows the fold gathers of it)
ID_CLUSTERS = pa.schema([("id", pa.string()), ("cluster", pa.int64()), ("size", pa.int64())])
# each touched cluster's share of the fold
SHARES = pa.schema([("cluster", pa.int64()), ("share", pa.int64())])
# gathered rows a fold task is dealt (whole groups of linked clusters; ~200 bytes a row with its verdict)
FOLD_ROWS = 1 << 21
# the gathered rows: the decisions' columns, the row in the whole decisions table, the semantic verdict (a row the
# semantic stage did not see: not removed, no match)
_GATHERED = pa.schema(list(DECISIONS_SCHEMA) + [("row", pa.int64()), ("sem_removed", pa.bool_()),
                                                ("sem_matched", pa.string()), ("share", pa.int64())])
_SEEN = {"after": "the documents the lexical stages kept", "beside": "every document"}


def touched_links(sem: pa.Table) -> pa.Table:
    """``LINKS`` of ``sem``'s removals (a semantic decisions part): each with the document it matched."""
    removed = pc.invert(sem["keep"])
    ids = sem["id"].filter(removed).combine_chunks()
    return pa.table([ids, sem["matched_id"].filter(removed).combine_chunks(), pa.nulls(len(ids), pa.string())],
                    schema=LINKS)


def touched_rows(decisions: pa.Table, links: pa.Table) -> pa.Table:
    """``ID_CLUSTERS`` of ``decisions``'s rows (a part: id, cluster_id, cluster_size) whose id ``links`` names."""
    ids = pa.concat_arrays([links[c].combine_chunks() for c in LINKS.names]).drop_null()
    t = decisions.filter(pc.is_in(decisions["id"], value_set=ids))
    return pa.table([t[c].combine_chunks() for c in ("id", "cluster_id", "cluster_size")], schema=ID_CLUSTERS)


def fold_shares(links: pa.Table, rows: pa.Table, fold_rows: int) -> tuple[pa.Table, dict[str, int]]:
    """Each touched cluster's share of the fold (``SHARES``, clusters ascending) and (clusters, groups, shares,
    rows). ``links``: every removal's ``LINKS``; ``rows``: every ``touched_rows``. A removal's cluster, its
    match's and its representative's are one group, and so are the clusters of one id; the groups, in the order
    of their smallest cluster, are dealt into shares of about ``fold_rows`` rows (cluster sizes), a group whole:
    the fold of each share equals that of every touched cluster at once. With ``fold_rows`` 1, a share a group."""
    from ..lexical.policy import connected_components

    ids = rows["id"].combine_chunks()
    nodes, node = np.unique(np.asarray(rows["cluster"].to_numpy(), np.int64), return_inverse=True)
    size = np.zeros(nodes.shape[0], np.int64)
    size[node] = np.asarray(rows["size"].to_numpy(), np.int64)
    u, v = [node], [node[row_positions(ids, ids)]]  # each row with the first row of its id
    at = row_positions(links["id"], ids)
    for c in ("matched_id", "representative_id"):
        other = row_positions(links[c], ids)
        ok = (at >= 0) & (other >= 0)  # a match outside the run (an --against index's document) links nothing
        u.append(node[at[ok]])
        v.append(node[other[ok]])
    label = connected_components(nodes.shape[0], np.concatenate(u), np.concatenate(v), "cpu")
    groups, group = np.unique(label, return_inverse=True)
    weight = np.bincount(group, weights=size, minlength=groups.shape[0]).astype(np.int64)
    start = np.cumsum(weight) - weight  # the rows dealt before each group
    # a share: the groups starting within its fold_rows rows (under fold_rows rows, but for its last group's)
    dealt, share = np.unique(start // fold_rows, return_inverse=True)  # numbered densely: none empty
    table = pa.table([pa.array(nodes, pa.int64()), pa.array(share[group], pa.int64())], schema=SHARES)
    return table, {"clusters": int(nodes.shape[0]), "groups": int(groups.shape[0]), "shares": int(dealt.shape[0]),
                   "rows": int(weight.sum())}


def share_of(cluster: np.ndarray, shares: pa.Table) -> np.ndarray:
    """int64: the share of each of ``cluster`` (-1: a cluster no removal touches)."""
    wanted = np.asarray(shares["cluster"].to_numpy(), np.int64)
    out = np.full(cluster.shape[0], -1, np.int64)
    if not wanted.shape[0]:
        return out
    at = np.minimum(np.searchsorted(wanted, cluster), wanted.shape[0] - 1)
    hit = wanted[at] == cluster
    out[hit] = np.asarray(shares["share"].to_numpy(), np.int64)[at[hit]]
    return out


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


def gathered(lexical: pa.Table, sem: pa.Table | None, shares: pa.Table, row0: int, where: str) -> pa.Table:
    """``lexical``'s rows of the clusters of ``shares`` (_GATHERED): with their row in the whole table (``row0`` +
    position), their share and, for a row the semantic stage saw, its verdict (``sem``: its decisions of the kept
    rows, order "after")."""
    seen = seen_rows(lexical, sem, "after", where)
    removed = np.zeros(lexical.num_rows, bool)
    at = np.full(lexical.num_rows, -1, np.int64)
    if seen.shape[0]:
        removed[seen] = ~np.asarray(sem["keep"].to_numpy(zero_copy_only=False), bool)
        at[seen] = np.arange(seen.shape[0])
    share = share_of(np.asarray(lexical["cluster_id"].to_numpy(), np.int64), shares)
    pick = np.flatnonzero(share >= 0)
    matched = sem["matched_id"].combine_chunks().take(pa.array(np.maximum(at[pick], 0), mask=at[pick] < 0)) \
        if seen.shape[0] else pa.nulls(pick.shape[0], pa.string())
    part = lexical.select(DECISIONS_SCHEMA.names).take(pa.array(pick, pa.int64()))
    return pa.Table.from_arrays([*part.columns, pa.array(row0 + pick, pa.int64()), pa.array(removed[pick]),
                                 matched.cast(pa.string()), pa.array(share[pick], pa.int64())], schema=_GATHERED)


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
    """File ``fi``'s semantic removals and their matches (``touched_links``)."""
    sem = _sem_part(job, fi, sem_work, seen)
    links = touched_links(sem) if sem is not None else LINKS.empty_table()
    job.layout.write(links, "semfold_ids", f"f{fi:06d}")
    return {"removed": links.num_rows}


def _inputs(job: Job, fmt: str = "f{:06d}") -> list[str]:
    return [fmt.format(fi) for fi in range(job.first, job.nfiles)]


@run_once("semfold_clusters")
def semfold_clusters(job: Job, fi: int, table: str) -> dict[str, Any]:
    """File ``fi``'s rows whose id every file's removals link (``touched_rows``)."""
    lay = job.layout
    rows = touched_rows(lay.read_one(table, f"f{fi:06d}", ["id", "cluster_id", "cluster_size"]),
                        lay.read("semfold_ids", _inputs(job), LINKS))
    lay.write(rows, "semfold_clusters", f"f{fi:06d}")
    return {"rows": rows.num_rows}


@run_once("semfold_components")
def semfold_components(job: Job, key: int, fold_rows: int) -> dict[str, Any]:
    """The touched clusters' shares of the fold (``fold_shares``)."""
    lay = job.layout
    shares, info = fold_shares(lay.read("semfold_ids", _inputs(job), LINKS),
                               lay.read("semfold_clusters", _inputs(job), ID_CLUSTERS), fold_rows)
    lay.write(shares, "semfold_shares", "all")
    return info


@run_once("semfold_gather")
def semfold_gather(job: Job, fi: int, table: str, sem_work: str, seen: int, shares: int) -> dict[str, Any]:
    """File ``fi``'s rows of every touched cluster (``gathered``), a file for each of the ``shares``."""
    lay = job.layout
    g = gathered(lay.read_one(table, f"f{fi:06d}"), _sem_part(job, fi, sem_work, seen),
                 lay.read_one("semfold_shares", "all"), _row0(job, fi), _where(job, fi))
    lay.write_split(g, np.asarray(g["share"].to_numpy(), np.int64), shares, "semfold_rows",
                    lambda r: f"s{r:06d}-f{fi:06d}")
    return {"rows": g.num_rows}


@run_once("semfold_fold")
def semfold_fold(job: Job, key: int) -> dict[str, Any]:
    """``fold_gathered`` over share ``key``'s gathered rows of every file; each file's folded rows written for its
    merge task."""
    lay = job.layout
    g = lay.read("semfold_rows", _inputs(job, f"s{key:06d}-f{{:06d}}"), _GATHERED)
    out, removed = fold_gathered(g)
    offs = job.offs()
    at = file_of(out["row"].to_numpy() + int(offs[job.first]), offs) - job.first
    lay.write_split(out, at, job.nfiles - job.first, "semfold_folded",
                    lambda f: f"s{key:06d}-f{f + job.first:06d}")
    return {"rows": out.num_rows, "removed": removed}


@run_once("semfold_merge")
def semfold_merge(job: Job, fi: int, table: str, sem_work: str, seen: int, order: str, shares: int) -> dict[str, Any]:
    """File ``fi``'s final decisions part (``merged_part``; the fold's rows of it from each of the ``shares``),
    which the recount, kept and publish stages read."""
    lay = job.layout
    folded = [f"s{r:06d}-f{fi:06d}" for r in range(shares)]
    part = merged_part(lay.read_one(table, f"f{fi:06d}"),
                       lay.read("semfold_folded", folded) if folded else None,
                       _sem_part(job, fi, sem_work, seen), _row0(job, fi), order, _where(job, fi))
    lay.write(part, "decisions", f"f{fi:06d}")
    return {"rows": part.num_rows}
