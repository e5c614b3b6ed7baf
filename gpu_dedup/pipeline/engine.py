"""The local engine: a list of steps (``runtime.program.Step``) run over one input, composed by one rule, into one
owned output directory. Named stages, composed and timed by ``run_pipeline``:

    own        OUT (outside the inputs, locked, an earlier run's files replaced; ``runtime.run.owned``); an
               in-memory source is written once as Parquet, the first step's view
    steps      each step over its view: the documents the earlier steps kept, with the text the span steps left
               (``Plan``); its outputs in its own directory (``layout="steps"``: OUT/steps/NN-name/) or in OUT
               itself (``layout="flat"``: one command's few steps, whose files never collide); its verdicts
               folded into the run's decisions (``decisions.fold_removals``: every removed row names a document
               kept at the end, or, removed by a test, none); its kept records the next step's view. A flat OUT
               with one removing step (``run``: dedup, its span stages before or after it) composes nothing:
               every step's outputs are the run's, no step's verdicts are built (``_uncomposed``)
    final      span steps whose cuts a later step could orphan (it removed the document holding a kept copy) run
               again, in order, over the survivors' original records: every cut then keeps a copy in a kept
               document. Span steps after the last removing step run once, here
    write      decisions.parquet (every input document once: the step and reason that removed it and the document
               kept for it; ``decisions.pipeline_schema``), run.json (with ``sources``: what each source lost, per
               step, from the composed decisions, runtime/sources.py; and ``cost``: the run's, each step's in
               ``steps``, runtime/cost.py), report.html, then deduplicated/ (the final records) unless a source
               lost more than ``Env.sources.max_removal`` (then ``SourceRemovalError``: the rest stays for
               inspection). In the steps layout the steps only report their sources; the engine checks the
               composed decisions

A recipe on the Ray engine composes by tasks (``parts``): the decisions are one part per input file, each
removing step folded into them by tasks that read its verdicts file by file (distributed/stepfold.py), and OUT's
decisions are a dataset of those parts (or, with ``table_layout="file"``, one file streamed from them); the driver
holds file lists, counts and one keep flag a document (the views' rows), never a decision.

With ``resume`` a step whose directory holds its finished record (``STEP_FILE``: the fingerprint of its settings
and of every step before it, and its verdicts) is not run again.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any, Literal, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import io
from ..decisions import base_decisions, fold_removals, pipeline_schema, value_counts
from ..errors import ConfigError, DataError, RunError
from ..runtime.outputs import input_roots
from ..runtime.program import KINDS, Env, Verdicts
from ..runtime.cost import metered
from ..runtime.run import Steps, finish, header, owned, resources, seconds_line, write_table
from ..runtime.sources import Tally, check as check_sources, source_labels, thresholds
from . import parts
from .parts import Parts
from .result import AloneResult, PartsResult, PipelineResult, StepRecord
from .views import STEPS_DIR, View, input_paths, materialize, view_files, write_rows
from .resume import fingerprint, input_fingerprint, json_values, load_verdicts, save_verdicts

logger = logging.getLogger(__name__)

Layout = Literal["steps", "flat"]
KEPT_DIR = "kept"               # the kept records the engine writes for a step that writes none
FINAL = "deduplicated"          # the final records, in OUT
@dataclass
class _Run:
    """The state of one pipeline run while its steps go."""

    steps: Sequence[Any]
    out: str
    layout: Layout
    env: Env
    resume: bool
    relpaths: list[str] = field(default_factory=list)
    decisions: pa.Table | None = None
    records: list[StepRecord] = field(default_factory=list)
    fingerprint: str = ""
    final_verbatim: str | None = None  # flat: the directory of OUT the survivors' own records go to at the end
    alone: Any = None  # (step, StepRun) when nothing is composed (``_uncomposed``): the removing step's (else the
    # first step's), whose verdicts are the run's decisions, built only when asked for
    file_rows: list[int] | None = None  # the input's rows per file (the first step's read): placing them needs no count
    parts: Parts | None = None  # the decisions as per-file parts, composed by tasks (``parts.uses_parts``)
    input_read: dict | None = None  # what the first step's read of the input skipped (``input_read``)


def _step_dir(run: _Run, i: int, name: str, phase: str) -> str:
    if run.layout == "flat":  # a view run's outputs are final unless a later step orphans its cuts (then replaced)
        return run.out
    suffix = {"main": "", "view": ".view", "final": ""}[phase]
    return os.path.join(run.out, STEPS_DIR, f"{i + 1:02d}-{name}{suffix}")


def _run_step(run: _Run, i: int, step: Any, view: View, phase: str) -> tuple[Verdicts, View]:
    """One step over ``view``: run (or reuse) it, fold its verdicts, and return them with the next view (the
    step's kept records, or its view's rows it kept, written when a later step reads them)."""
    d = _step_dir(run, i, step.name, phase)
    run.fingerprint = fingerprint(step, run.env, run.fingerprint + phase)
    t = time.perf_counter()
    if (view.rows is not None and view.rows.shape[0] == 0) or view.count == 0:  # the steps before removed all
        logger.warning("step %d (%s): no document is left to it (the steps before it removed every one); not run",
                       i + 1, step.name)
        none = pa.array([], pa.string())
        run.records.append(StepRecord(i + 1, step.name, step.kind, os.path.relpath(d, run.out), 0, 0, 0.0, phase))
        return Verdicts(none, none, np.zeros(0, bool), none, np.zeros(0, np.int64)), view
    view = materialize(run, view, os.path.join(d, "input") if run.layout == "steps" else
                       os.path.join(run.out, "work", "views", f"{i + 1:02d}-input"))
    if run.parts is not None:
        return None, _parts_step(run, i, step, view, d, phase, t)
    loaded = load_verdicts(d, run.fingerprint) if run.resume and run.layout == "steps" else None
    result = cost = None
    if loaded is not None:
        v, kept = loaded
        logger.info("step %d (%s): reused from %s", i + 1, step.name, d)
    else:
        sr, cost = _execute(run, i, step, view, d, phase)
        kept, result = sr.kept, sr.result
        if _uncomposed(run, i, sr):  # its outputs are the run's, as written; its kept records the next view
            seen, removed = sr.counts
            run.records.append(StepRecord(i + 1, step.name, step.kind, os.path.relpath(d, run.out), seen, removed,
                                          time.perf_counter() - t, phase, False, result, cost))
            if run.alone is None or step.kind != "span":
                run.alone = (step, sr)
            if not run.relpaths:  # the input's files and rows per file, as the first step read them
                run.relpaths = list(result.stats.get("inputs") or [])
                run.file_rows = list(result.stats.get("read", {}).get("file_rows") or []) or None
            if len(run.steps) > 1:
                _done_line(i, step.name, seen, removed, run.records[-1].seconds)
            original = view.original and step.kind != "span"
            if i == len(run.steps) - 1:  # no later step reads a view
                return None, view
            if sr.kept is not None:
                nxt = view_files(sr.kept, run.relpaths, None, original)
            elif removed:  # its view's rows it kept (written when a later step reads them)
                nxt = View(None, None, original, parent=view, keep=_kept_flags(run))
            else:
                nxt = view
            return None, dataclasses.replace(nxt, count=seen - removed)
        v = sr.verdicts
    if run.decisions is None:
        if view.rows is not None:
            raise RunError("the first step must read the whole input")
        run.decisions = base_decisions(v.ids, v.sources, any(s.name == "semantic" for s in run.steps))
        # the input's files as the step read them (a reused step: as it would, empty files included)
        run.relpaths = list(result.stats.get("inputs") or []) if result is not None else \
            [f.relpath for f in io.source_files(view.files)]
        if not run.relpaths:
            run.relpaths = list(dict.fromkeys(v.sources.to_pylist()))
        per_file = pc.value_counts(v.sources).to_pylist() if len(v.sources) else []
        counts = {d["values"]: d["counts"] for d in per_file}
        run.file_rows = [int(counts.get(r, 0)) for r in run.relpaths]  # the input's rows per file, as read
    rows = np.arange(run.decisions.num_rows, dtype=np.int64) if view.rows is None else view.rows
    if len(v.ids) != rows.shape[0]:
        raise RunError(f"step {i + 1} ({step.name}) read {len(v.ids):,} documents but the steps before it kept "
                       f"{rows.shape[0]:,}: its view changed while the pipeline ran")
    if step.kind != "span" and phase != "final":
        values = {k: val for k, val in v.values.items() if k in run.decisions.column_names}
        values["step"] = pa.array([step.name] * rows.shape[0], pa.string())
        run.decisions = fold_removals(run.decisions, rows, ~v.keep, v.matched, v.reason,
                                      representative=v.representative, kind=step.kind, values=values)
    if loaded is None and run.layout == "steps":
        save_verdicts(d, v, kept, run.fingerprint, rows)
    seconds = time.perf_counter() - t
    run.records.append(StepRecord(i + 1, step.name, step.kind, os.path.relpath(d, run.out), rows.shape[0],
                                  int((~v.keep).sum()), seconds, phase, loaded is not None, result, cost))
    if loaded is None:  # where the time went, as each step ends (run.json has it too)
        _done_line(i, step.name, rows.shape[0], int((~v.keep).sum()), seconds)
    original = view.original and step.kind != "span"
    if kept is not None:
        return v, view_files(kept, run.relpaths, rows[v.keep], original)
    return v, View(None, rows[v.keep], original, parent=view, keep=np.asarray(v.keep, bool))


def _execute(run: _Run, i: int, step: Any, view: View, d: str, phase: str) -> tuple[Any, Any]:
    """Step ``i``'s program over ``view`` into ``d``: (its ``StepRun``, its meter's usage)."""
    os.makedirs(d, exist_ok=True)
    n = view.count if view.rows is None else view.rows.shape[0]
    logger.info("step %d (%s%s) over %s", i + 1, step.name, "" if phase == "main" else f", {phase}",
                "the input" if n is None else f"{n:,} documents")
    with metered(run.env.price, fresh=True) as meter:  # the step's program writes it into its stats too
        sr = step.run(view.files, d, _step_env(run, i, step, d, view))
        if i == 0 and phase != "final":  # the first step reads the input: the later ones, its survivors
            run.input_read = input_read(step.name, getattr(sr.result, "stats", None))
        return sr, meter.usage(d, getattr(sr.result, "stats", None))


READ_LOSSES = ("skipped", "invalid_utf8_rows", "empty_files")  # a read report's entries on what it dropped


def input_read(step: str, stats: dict[str, Any] | None) -> dict[str, Any] | None:
    """run.json's ``input_read``: what the step that read the input (``step``, its ``stats``) skipped or repaired.
    A later step reads the survivors only, so without it a run that began with a span step (paragraph or substring
    "before" the dedup) listed no skipped record anywhere once that step ran again over the survivors."""
    read = (stats or {}).get("read") or {}
    if not isinstance(read, dict) or not any(k in read for k in READ_LOSSES):
        return None
    return {"step": step, **{k: read[k] for k in READ_LOSSES if k in read}}


def _parts_step(run: _Run, i: int, step: Any, view: View, d: str, phase: str, t: float) -> View:
    """Step ``i`` of a run composed by tasks (``parts``): run (or reuse) it, fold a removing step's verdicts into
    the decisions' parts; the next view, with its documents per input file."""
    span = step.kind == "span"
    rec = parts.load(run.parts, d, run.fingerprint) if run.resume else None
    result = cost = saw = None
    if rec is None:
        sr, cost = _execute(run, i, step, view, d, phase)
        result, kept = sr.result, sr.kept
        if not run.relpaths:  # the input's files and rows per file, as the first step read them
            run.relpaths = list(result.stats.get("inputs") or [])
            run.file_rows = list(result.stats.get("read", {}).get("file_rows") or [])
        if span:
            seen, removed = sr.counts if sr.counts is not None else (view.count, 0)
        else:
            seen, removed, saw = parts.fold_step(run.parts, i, step, sr, view.names, run.relpaths, run.file_rows,
                                                 d, run.env)
        parts.save(d, run.fingerprint, kept, seen, removed, run.file_rows, run.relpaths, composed=not span)
    else:
        kept, seen, removed, saw = rec["kept"], rec["seen"], rec["removed"], rec.get("saw")
        run.relpaths, run.file_rows = run.relpaths or rec["relpaths"], run.file_rows or rec["file_rows"]
        logger.info("step %d (%s): reused from %s", i + 1, step.name, d)
    seconds = time.perf_counter() - t
    run.records.append(StepRecord(i + 1, step.name, step.kind, os.path.relpath(d, run.out), seen, removed, seconds,
                                  phase, rec is not None, result, cost))
    if rec is None:
        _done_line(i, step.name, seen, removed, seconds)
    counts = view.counts or dict(zip(run.relpaths, run.file_rows))
    if saw is not None:
        counts = {r: int(s.sum()) for r, s in zip(run.relpaths, saw)}
    original = view.original and not span
    if kept is not None:
        nxt = view_files(kept, run.relpaths, None, original)
    elif removed:  # its view's rows it kept (written when a later step reads them)
        nxt = View(None, None, original, parent=view, keep=np.concatenate(saw))
    else:
        nxt = view
    return dataclasses.replace(nxt, count=seen - removed, counts=counts)


def _kept_flags(run: _Run) -> np.ndarray:
    """bool (n,): the documents kept at the end, in input order: from the composed decisions, or (nothing
    composed) the removing step's result (its ``keep_mask``: over its view, which every step before it, cutting
    spans only, left whole)."""
    if run.parts is not None:
        return parts.kept_flags(run.parts)
    if run.decisions is not None:
        return np.asarray(run.decisions["keep"].to_numpy(zero_copy_only=False), bool)
    return np.asarray(run.alone[1].result.keep_mask, bool)


def _done_line(i: int, name: str, seen: int, removed: int, seconds: float) -> None:
    """Where the time went, as each step ends (run.json has it too)."""
    logger.info("step %d (%s) done: %s documents in %.2f s (%s docs/s), %s removed", i + 1, name, f"{seen:,}",
                seconds, f"{seen / seconds:,.0f}" if seconds > 0 else "-", f"{removed:,}")


def _uncomposed(run: _Run, i: int, sr: Any) -> bool:
    """Whether step ``i`` (just run: ``sr``) leaves the engine nothing to compose: a flat OUT (every step's outputs
    are the run's, no composed table is written) with one removing step at most (one command's steps: ``run``
    with its span stages before and after dedup), every step giving its counts. Then no verdicts are built (a
    table per document, which a Ray run's driver never holds): a step's kept records are the next view, without
    a row list, and the removing step's keep flags alone (``_kept_flags``: one byte a document) choose the
    survivors where it wrote none, or the span steps run again over them; ``PipelineResult.decisions`` composes
    its verdicts when asked."""
    steps = run.steps
    fits = sr.counts is not None
    if i == 0:
        return run.layout == "flat" and sum(s.kind != "span" for s in steps) <= 1 and fits
    if run.alone is not None and not fits:  # the first step composed nothing: no later one can compose
        raise RunError(f"step {i + 1} ({steps[i].name}) gave no counts in a run that composes none: a step of a "
                       "flat OUT must give them (``StepRun(counts=...)``)")
    return run.alone is not None


def _step_env(run: _Run, i: int, step: Any, d: str, view: View) -> Env:
    """The run's settings for one step: in the steps layout each step keeps its intermediate files in its own
    work directory (under --work-dir, or with --resume in its directory's work/). In a flat OUT a removing step
    over text a span step cut writes no kept records: OUT's are the survivors' own, written at the end."""
    env = run.env
    if run.layout == "flat":
        if not view.original and step.kind != "span" and step.outputs.kept:
            run.final_verbatim = step.outputs.kept
            return dataclasses.replace(env, write_kept=False)
        return env
    env = dataclasses.replace(env, sources=env.sources.without_limit())  # the engine checks the composition
    if env.work_dir is None and not env.resume:
        return env
    wd = os.path.join(env.work_dir, f"{i + 1:02d}-{step.name}") if env.work_dir is not None else \
        os.path.join(d, "work")
    return dataclasses.replace(env, work_dir=wd)


def plan(steps: Sequence[Any]) -> tuple[int, list[int]]:
    """(the index of the last step that removes documents, the span steps before it: each cuts a view for a later
    step and, should a later step remove a document, runs again over the survivors)."""
    removing = [i for i, s in enumerate(steps) if s.kind != "span"]
    last = removing[-1] if removing else -1
    return last, [i for i, s in enumerate(steps) if s.kind == "span" and i < last]


def check_steps(steps: Sequence[Any], layout: Layout) -> None:
    """Refuse what cannot run: no step, an object that is no step, two steps whose files collide in a flat OUT.

    Raises:
        ConfigError: naming the step and the fix.
    """
    if not steps:
        raise ConfigError("a pipeline needs at least one step: e.g. Pipeline([Dedup()])")
    for i, s in enumerate(steps):
        if not (hasattr(s, "run") and getattr(s, "kind", None) in KINDS and hasattr(s, "name")):
            raise ConfigError(f"step {i + 1} ({s!r}) is no pipeline step: use gpu_dedup.Filter, Dedup, Paragraph, "
                              "Substring, Semantic or Screen")
    if layout == "flat":
        seen: dict[str, str] = {}
        for s in steps:
            for f in s.outputs.all():
                if f in seen and seen[f] != s.name:
                    raise ConfigError(f"steps {seen[f]} and {s.name} both write {f}: they cannot share one output "
                                      "directory; run them as a recipe (`gpu-dedup pipeline`), each in its own")
                seen[f] = s.name


def run_pipeline(steps: Sequence[Any], source: Any, output_dir: str | os.PathLike, *, env: Env | None = None,
                 layout: Layout = "steps", command: str = "pipeline", resume: bool = False,
                 overwrite: bool = True, replace_own: bool = False) -> PipelineResult:
    """Run ``steps`` over ``source`` into ``output_dir`` (the stages of the module docstring).

    Args:
        steps: the steps, in order (``gpu_dedup.Filter``, ``Dedup``, ``Paragraph``, ``Substring``, ``Semantic``,
            ``Screen``).
        source: path(s), glob(s) or directories of input files, a pyarrow Table or a pandas DataFrame.
        output_dir: the directory the run owns.
        env: device, threads, progress bars, how the input is read (``runtime.program.Env``).
        layout: "steps" (each step in OUT/steps/NN-name/, the composed decisions and the final records in OUT) or
            "flat" (every step writes into OUT: one command's few steps; no composed table of its own).
        command: the command that owns OUT (its manifest names it).
        resume: reuse every finished step whose settings and earlier steps are unchanged.
        overwrite: replace an earlier run's files in OUT (else refuse a finished run there).
        replace_own: replace an earlier run of the same ``command`` in OUT even without ``overwrite`` (the demo).

    Returns:
        A ``PipelineResult``.

    Raises:
        ConfigError: no steps, an object that is no step, colliding files in a flat OUT, OUT inside the inputs.
        GpuDedupError: what a step raises (its message names the file, the value and the fix).
    """
    env = env or Env()
    check_steps(steps, layout)
    if env.table_layout is not None:  # a dataset is the Ray engine's: refused before OUT is owned or a step runs
        from ..distributed import layout_of

        layout_of(env.table_layout, env.engine)
    out = os.fspath(output_dir)
    t0 = time.perf_counter()
    resources(env.device, env.threads)  # an unusable device fails here, before anything is written; the steps
    # get the device as asked ("auto" stays "auto": a dedup step's work-dir pieces are fingerprinted by it)
    roots = input_roots(source)
    work = os.path.join(out, STEPS_DIR) if layout == "steps" else None
    timer = Steps(t0)
    with metered(env.price, fresh=True), owned(out, roots=roots, command=command, overwrite=overwrite, resume=resume,
                                               work_dir=work, overwrite_same_command=replace_own), \
            cluster(env):
        run = _Run(steps, out, layout, env, resume, fingerprint=input_fingerprint(source))
        if parts.uses_parts(steps, layout, env.engine):
            run.parts = parts.Parts(any(s.name == "semantic" for s in steps),
                                    work=os.path.join(out, STEPS_DIR, "work", "compose"))
        view = View(input_paths(source, out), None)
        last, viewing = plan(steps)
        span_orphans = False
        for i, step in enumerate(steps):
            if step.kind == "span" and i > last:
                continue  # after the last removing step: once, in the final chain
            with timer(f"{i + 1:02d}-{step.name}"):
                v, nxt = _run_step(run, i, step, view, "view" if i in viewing else "main")
            removed = run.records[-1].removed if v is None else int((~v.keep).sum())
            if step.kind != "span" and removed and any(j < i for j in viewing):
                span_orphans = True  # a span step before this one may have cut from a document now removed
            view = nxt
        finals = [i for i, s in enumerate(steps) if s.kind == "span" and (i > last or span_orphans)]
        if span_orphans:  # the survivors' original records: every span step again, over them
            keep = _kept_flags(run)
            logger.info("span steps %s run again over the %s documents kept: a later step removed documents they "
                        "may have kept a copy in", ", ".join(steps[i].name for i in viewing), f"{int(keep.sum()):,}")
            if layout == "flat":  # their first outputs in OUT go; the second run writes them anew
                for i in viewing:
                    _remove_outputs(out, steps[i].outputs)
            view = View(None, None if run.alone or run.parts else np.flatnonzero(keep), True,
                        parent=View(input_paths(source, out), None), keep=keep, count=int(keep.sum()),
                        counts=None if run.parts is None else
                        {r: int(k.sum()) for r, k in zip(run.relpaths, run.parts.keep)})
        for i in finals:
            with timer(f"{i + 1:02d}-{steps[i].name}"):
                _, view = _run_step(run, i, steps[i], view, "final")
        result = _finish(run, source, view, timer, env)
        logger.info("%s in %s", result.summary(), seconds_line(result.stats["timings_s"]))
        if layout == "steps":
            check_sources(result.stats["sources"])  # inside the owned block: its outputs stay, as "stopped"
    return result


def cluster(env: Env):
    """With ``env.engine == "ray"``, the Ray cluster of the whole run (started once, or joined: every step's
    tasks, and the views' write tasks, run on it; ``distributed.run_scope``: joined at the first task); else nothing."""
    if env.engine != "ray":
        return contextlib.nullcontext()
    from ..distributed import run_scope

    return run_scope(env.workers, env.address)


def _remove_outputs(out: str, outputs: Any) -> None:
    """A step's declared outputs in ``out``, removed (files and directories)."""
    import shutil

    for rel in outputs.all():
        path = os.path.join(out, rel.rstrip("/"))
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)


def _finish(run: _Run, source: Any, view: View, timer: Steps, env: Env) -> PipelineResult:
    """decisions.parquet, deduplicated/ (the final records: ``view``), run.json, report.html; the result."""
    if run.alone is not None:
        return _alone_result(run, source, timer, env)
    if run.parts is not None:
        return _parts_finish(run, source, view, timer, env)
    d = run.decisions
    n = d.num_rows
    keep = np.asarray(d["keep"].to_numpy(zero_copy_only=False), bool)
    by_step = {s.name: 0 for s in run.steps}
    by_step.update(value_counts(d["step"].drop_null()))
    counts = {"input": n, "kept": int(keep.sum()), "removed": int(n - keep.sum()), "by_step": by_step,
              "by_reason": dict(sorted(value_counts(d["reason"].filter(pa.array(~keep))).items()))}
    stats = _stats(run, source, env, timer, counts)
    if run.layout == "steps":
        with timer("sources"):
            stats["sources"] = _sources(run, source, d, env)
    if run.layout == "flat":  # every step wrote its own outputs into OUT
        if run.final_verbatim:
            with timer("write_" + run.final_verbatim):
                stats[run.final_verbatim] = write_rows(run, View(input_paths(source, run.out), None), keep,
                                                        os.path.join(run.out, run.final_verbatim))
        timer.total()
        return PipelineResult(d, stats, run.records, run.out)
    with timer("write"):
        write_table(d, pipeline_schema("cosine" in d.column_names), os.path.join(run.out, "decisions.parquet"))
        _write_final(run, view, stats, n)
    _finished(run, stats, timer)
    return PipelineResult(d, stats, run.records, run.out)


def _stats(run: _Run, source: Any, env: Env, timer: Steps, counts: dict[str, Any]) -> dict[str, Any]:
    """run.json of a composed run, but its sources and final records: the header, the steps, what they read."""
    # what the steps read (each step's own bytes_read, summed: a later step reads its view)
    read = {f"{r.index:02d}-{r.name}" + ("" if r.phase == "main" else f".{r.phase}"): r.cost["bytes_read"]
            for r in run.records if r.cost}
    device, threads = resources(env.device, env.threads)
    stats = header("pipeline", device=device, threads=threads, config=_describe(run.steps, env),
                   files=io.source_files(source), read=_read(run, counts["input"]), counts=counts,
                   timings=timer.timings, bytes_read=read)
    stats["steps"] = [r.to_dict() for r in run.records]
    stats["layout"] = run.layout
    stats["input_paths"] = [f.path for f in io.source_files(source) if f.fmt != "table"]  # the report's texts
    return stats


def _read(run: _Run, rows: int) -> dict[str, Any]:
    """run.json's ``read`` of the run's decisions: their rows, and what the first step's read of the input
    skipped (the decisions' rows are the documents it read: the report places them in the files by it; a
    first step reused by --resume: from its own record)."""
    first = run.input_read if run.input_read is not None or not run.records else _recorded_read(run.out,
                                                                                                run.records[0])
    lost = {k: v for k, v in (first or {}).items() if k != "step"}
    return {"rows": rows, **lost}


def _recorded_read(out: str, rec: StepRecord) -> dict[str, Any] | None:
    """``input_read`` of a step's record in its directory (run.json, paragraph_dedup.json, ...)."""
    d = os.path.join(out, rec.directory)
    for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if name.endswith(".json") and name != "step.json":
            with contextlib.suppress(OSError, DataError):  # a damaged record tells nothing: the rows alone
                found = input_read(rec.name, io.read_json_record(os.path.join(d, name)))
                if found is not None:
                    return found
    return None


def _write_final(run: _Run, view: View, stats: dict[str, Any], n: int) -> None:
    """OUT/deduplicated/ (``view``: the last step's kept records, or its view's rows it kept), unless a source is
    over the limit (run_pipeline raises once the report is written)."""
    if stats["sources"]["over_limit"]:
        return
    target = os.path.join(run.out, FINAL)
    if not stats["counts"]["kept"]:
        stats["deduplicated"] = {"files": 0, "rows_written": 0}
    elif view.files is None:
        stats["deduplicated"] = write_rows(run, view.parent, view.keep, target)
    else:
        rows = view.rows.shape[0] if view.rows is not None else view.count if view.count is not None else n
        stats["deduplicated"] = write_rows(run, view, np.ones(rows, bool), target)


def _finished(run: _Run, stats: dict[str, Any], timer: Steps) -> None:
    """run.json and report.html of a composed run."""
    timer.total()

    def report() -> str:
        from .report import write_pipeline_report

        return write_pipeline_report(run.out)

    finish(run.out, stats, report=report, what="pipeline")


def _alone_result(run: _Run, source: Any, timer: Steps, env: Env) -> PipelineResult:
    rec = run.records[0]
    removed = sum(r.removed for r in run.records)
    counts = {"input": rec.seen, "kept": rec.seen - removed, "removed": removed,
              "by_step": {s.name: sum(r.removed for r in run.records if r.name == s.name) for s in run.steps}}
    device, threads = resources(env.device, env.threads)
    stats = header("pipeline", device=device, threads=threads, config=_describe(run.steps, env),
                   files=io.source_files(source), read={"rows": rec.seen}, counts=counts, timings=timer.timings)
    if run.input_read is not None:  # (the removing step's own record holds the rest: run.json in a flat OUT)
        stats["input_read"] = run.input_read
    stats["steps"] = [r.to_dict() for r in run.records]
    stats["layout"] = run.layout
    if run.final_verbatim:  # the removing step read cut text: OUT's kept records are the survivors' own
        with timer("write_" + run.final_verbatim):
            stats[run.final_verbatim] = write_rows(run, View(input_paths(source, run.out), None), _kept_flags(run),
                                                    os.path.join(run.out, run.final_verbatim))
    timer.total()
    return AloneResult(run, stats)


def _parts_finish(run: _Run, source: Any, view: View, timer: Steps, env: Env) -> PipelineResult:
    """``_finish`` of a run composed by tasks: the counts, sources and OUT's decisions from each file's final
    part (``parts.final_counts``), deduplicated/ by the view's write tasks; the driver holds no decision."""
    tally = Tally(_bounds(run.steps))
    files = {f.relpath: f for f in io.source_files(input_paths(source, run.out))}
    with timer("write"):
        counts = parts.final_counts(run.parts, run.out, run.relpaths, [files[r] for r in run.relpaths], tally, env)
    layout = counts.pop("layout")
    counts["by_step"] = {**{s.name: 0 for s in run.steps}, **counts["by_step"]}  # in the steps' order, as _finish
    stats = _stats(run, source, env, timer, counts)
    stats.update({"sources": tally.stats(env.sources),
                  "tables": {"decisions": {"path": "decisions", "layout": "dataset", "parts": len(run.relpaths)}
                             if layout == "dataset" else {"path": "decisions.parquet", "layout": "file"}}})
    with timer("write"):
        _write_final(run, view, stats, counts["input"])
    _finished(run, stats, timer)
    return PartsResult(stats, run.records, run.out)


def _bounds(steps: Sequence[Any]) -> dict[str, float]:
    """The sources' similarity boundaries: the first dedup step's Jaccard threshold, the first semantic step's
    1 - eps."""
    bounds: dict[str, float] = {}
    for s in steps:  # the first step measuring each similarity sets its boundary
        if s.name == "dedup":
            for k, v in thresholds(s.config, s.semantic).items():
                bounds.setdefault(k, v)
        elif s.name == "semantic":
            bounds.setdefault("cosine", 1.0 - s.config.eps)
    return bounds


def _sources(run: _Run, source: Any, d: pa.Table, env: Env) -> dict[str, Any]:
    """run.json's ``sources`` of the composed decisions: per source, its removals per step, their similarities and
    the pairs at each measure's threshold (the first dedup step's Jaccard threshold, the first semantic step's
    1 - eps)."""
    bounds = _bounds(run.steps)
    labels = source_labels(input_paths(source, run.out), env.sources.source_field, env.reading,
                           d["source"].combine_chunks())
    tally = Tally(bounds)
    tally.add(labels, np.asarray(d["keep"].to_numpy(zero_copy_only=False), bool), step=d["step"], reason=d["reason"],
              jaccard=d["jaccard"], cosine=d["cosine"] if "cosine" in d.column_names else None, ids=d["id"],
              matched=d["matched_id"])
    return tally.stats(env.sources)


def _describe(steps: Sequence[Any], env: Env) -> dict[str, Any]:
    """run.json's ``config``: every step's settings, and the run's."""
    return {"steps": [{"step": s.name, **json_values(s)} for s in steps], "device": env.device,
            "threads": env.threads, "reading": json_values(env.reading)}
