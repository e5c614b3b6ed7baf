"""The Ray engine: the whole lexical pipeline as map -> shuffle -> reduce over Arrow files in a shared work
dir, with no per-document state in the driver (it holds file lists, partition counts and per-file row counts).

    driver.py   the plan (``PLAN``: a declared table of ``Stage``s, each naming its task function, what one
                task covers and whether it runs on a GPU actor), the GPU actor, the run, run.json's statistics,
                OUT's tables
    cluster.py  the Ray cluster (a local one, or a running one joined by --address), the probe every node
                runs before pass 1, the tasks' errors raised as the local engine's
    stages.py   the tasks, one function per stage
    options.py  the tasks of --against / --exact-verify / --keep-copies / --save-index
    rows.py     what the tasks share: the Job, the done markers (run_once), the keep order
    shuffle.py  partition functions and the work-dir layout of every stage's files

The per-file programs (their outputs the local engine's, byte for byte; the driver holds file lists, per-file
counts and the tasks' small results):

    perfile.py  what they share: the job every task gets, the session (cluster, probe, GPU actors), the tasks
                run in file order, their parts streamed into OUT's one-file tables
    filter.py   ``filter --engine ray`` (its tasks: filter_tasks.py): pass 1, the rank selections and DSIR's
                top-k from per-file summaries, the final decisions, run.json's statistics, the outputs
    ranks.py    exact order statistics from mergeable per-file summaries (a histogram round, then the one
                bin holding the rank fetched): the filter's global selections
    screen.py   ``screen --engine ray``: one task per file against the broadcast benchmark index
    outputs.py  OUT's per-document tables: one file streamed by the driver, or (the default) a dataset of
                per-file parts the tasks write (OUT/decisions/, OUT/scores/)
    summary.py  report.html's aggregates of a dedup run (the write tasks' counts, the largest clusters' rows)
    tasks.py    what the span and semantic programs' tasks share (their job, the runner, the session)
    paragraph.py, substring.py, semantic.py   those programs on Ray (docs/pipeline.md, "One engine on Ray")
    views.py    the views between a recipe's steps, written by one task per file
    stepfold.py a recipe's composition: each removing step's verdicts folded into the decisions' per-file parts
    graph.py    the candidate graph: its edges, the star rounds, or the components in one task

The stages, in the plan's order:

    probe      every node: same gpu-dedup version and contract, the work dir visible
    count      (a prefilter with stochastic retention) per input file: its documents, so that each sign task
               draws the retention by the run's row, as the local engine
    sign       per file: pass 1, the piece, exact rows by hash range
    exact      per hash range: exact groups
    exact_texts, exact_check   (--exact-verify) per file: the groups' normalized texts read again, each
               member's bytes compared with its leader's in the leader's file
    bands      per file: the leaders' band rows by key range (beyond stages.BANDS_FROM_PIECES key ranges;
               with fewer, each buckets task reads the pieces' band keys itself)
    buckets    per key range: LSH buckets -> star edges of the candidate graph
    star       rounds of large-star / small-star per file of rows until the edges stop changing
    labels     per file: each candidate's component = its smallest row
    members    per file: candidates' keep keys, band keys, shingle sets -> their component's range
    policy     per component range: decide.py's bucket + policy stages, as the local engine
    resolve    per file: exact duplicates take their leader's representative
    ranks      (--keep-copies) per file: the removed rows' keep keys -> their cluster's file
    sizes      per file: cluster sizes
    write      per input file: the decisions part and deduplicated/
    semantic   (--semantic) SemDeDup's tasks (semantic.py) over the documents the write stage's decisions keep, on
               the same cluster; the driver folds its removals into the decisions (``semantic.merge_decisions``,
               the local engine's rule: the run's decisions held in the driver for the fold)
    recount    (--semantic) per input file: the final decisions' counts, sources and report aggregates; the
               kept stage then writes deduplicated/ (as with a source limit)
    index_rows per input file (--save-index): its kept rows; the driver streams the parent index and the
               parts into the new index's documents.parquet (index.IndexWriter), one part at a time

    publish    per input file (the dataset layout, the default): its decisions part (and scores part) into
               OUT/decisions/ (OUT/scores/); with --table-layout file the driver streams the parts into
               decisions.parquet in the local engine's row groups instead (the same bytes: outputs.py)

``--against``: the index is file 0 of every stage (options.IndexSource): rows 0..I-1, first in keep order,
pinned, with no decisions part, exactly as the local engine puts it in front of the input's rows.

Every task is idempotent (atomic writes, then a done marker): Ray retries a task whose worker died, and
``resume`` reuses every finished task of a killed run. Decisions equal the local engine's byte for byte:
each reduce sees all rows of its keys and runs the local engine's own stage functions on them.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# the names below, imported from their module when first asked for: importing one module of the package (the
# CLI's cluster.start_local, before the command runs; a Ray worker's first task) costs that module alone
_EXPORTS = {"ray_cluster": "cluster", "run_scope": "cluster", "start_local": "cluster", "PLAN": "driver",
            "Stage": "driver", "check_engine_args": "driver", "run": "driver", "filter_files": "filter",
            "IndexSource": "options", "TABLE_LAYOUTS": "outputs", "layout_of": "outputs", "write_decisions": "outputs",
            "write_scores": "outputs", "paragraph_dedup_ray": "paragraph", "screen_files": "screen",
            "semantic_dedup_ray": "semantic", "substring_dedup_ray": "substring", "write_view": "views",
            "FileSpec": "stepfold", "StepSpec": "stepfold", "compose_step": "stepfold", "totals_all": "stepfold",
            "journal_parts": "outputs"}

if TYPE_CHECKING:
    from .cluster import ray_cluster, run_scope, start_local
    from .stepfold import FileSpec, StepSpec, compose_step, totals_all
    from .driver import PLAN, Stage, check_engine_args, run
    from .filter import filter_files
    from .options import IndexSource
    from .outputs import TABLE_LAYOUTS, journal_parts, layout_of, write_decisions, write_scores
    from .paragraph import paragraph_dedup_ray
    from .screen import screen_files
    from .semantic import semantic_dedup_ray
    from .substring import substring_dedup_ray
    from .views import write_view


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)


__all__ = ["PLAN", "TABLE_LAYOUTS", "FileSpec", "IndexSource", "Stage", "StepSpec", "check_engine_args",
           "compose_step", "filter_files", "journal_parts", "layout_of", "paragraph_dedup_ray", "totals_all",
           "ray_cluster", "run", "run_scope", "screen_files", "semantic_dedup_ray", "start_local",
           "substring_dedup_ray", "write_decisions", "write_scores", "write_view"]
