"""gpu_dedup/pipeline/report.py: a pipeline run's report.html from its decisions in either layout
(OUT/decisions.parquet, or a Ray run's OUT/decisions/ of one part per input file) is the same page, byte for byte, read
a batch at a time and never as a whole table: the removals per step and reason in the whole table's order, and the
texts of the boundary pairs read from the inputs (JSON Lines read from the start, Parquet by row group)."""
import itertools
import json
import os
import random
import shutil
import subprocess
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import gpu_dedup.decisions
from gpu_dedup.config import RunConfig
from gpu_dedup.decisions import value_counts
from gpu_dedup.filters.config import FilterConfig
from gpu_dedup.filters.program import Filter
from gpu_dedup.lexical.program import Dedup
from gpu_dedup.pipeline import Pipeline
from gpu_dedup.pipeline.report import write_pipeline_report
from gpu_dedup.report import streamed
from gpu_dedup.report.page import html_table, pct


def _finished(src, jsonl: tuple[str, ...]):
    """A local run of filter (Gopher: the documents without stop words go) then dedup over a, b and c (those named
    in ``jsonl`` as JSON Lines, the others Parquet in row groups of 7 rows) in the new folder ``src``: near copies
    of a few texts across the files, so that each file (its source) has removals at the similarity threshold."""
    rng = random.Random(11)
    words = [f"w{i}" for i in range(300)]
    families = [[rng.choice(words) for _ in range(120)] for _ in range(6)]
    src.mkdir()
    for name in ("a", "b", "c"):
        rows = []
        for i in range(40):
            if rng.random() < 0.7:
                t = list(rng.choice(families))
                for _ in range(rng.randrange(0, 5)):
                    t[rng.randrange(len(t))] = rng.choice(words)
            else:
                t = [rng.choice(words) for _ in range(rng.randrange(60, 120))]
            rows.append({"id": f"{name}{i}", "text": " ".join(t) + (" the and" if rng.random() < 0.8 else "")})
        if name in jsonl:
            (src / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        else:
            pq.write_table(pa.Table.from_pylist(rows), src / f"{name}.parquet", row_group_size=7)
    out = src.parent / "out"
    Pipeline([Filter(FilterConfig(rules="gopher")), Dedup(RunConfig(progress=False))], device="cpu").run(src, out)
    return out


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """The run over a.jsonl, b.parquet and c.jsonl (``_finished``)."""
    return _finished(tmp_path_factory.mktemp("pipeline_report") / "in", ("a", "c"))


def _copy(out, dst, parts: bool) -> str:
    """A copy of the finished run ``out``; with ``parts``, its decisions split at the input files' boundaries into
    OUT/decisions/part-<k>.parquet (row groups of 5 rows), as a Ray run writes them, the one file deleted."""
    shutil.copytree(out, dst)
    if parts:
        d = pq.read_table(os.path.join(dst, "decisions.parquet"))
        os.mkdir(os.path.join(dst, "decisions"))
        src = d["source"].to_pylist()
        starts = [i for i in range(len(src)) if i == 0 or src[i] != src[i - 1]] + [len(src)]
        for k, (a, b) in enumerate(itertools.pairwise(starts)):
            pq.write_table(d.slice(a, b - a), os.path.join(dst, "decisions", f"part-{k:06d}.parquet"),
                           row_group_size=5)
        assert k == 2
        os.remove(os.path.join(dst, "decisions.parquet"))
    return str(dst)


def _page(out: str) -> str:
    with open(write_pipeline_report(out), encoding="utf-8") as fh:
        return fh.read().replace(out, "OUT")  # the page names its folder


def test_the_report_of_the_parts_is_the_report_of_the_one_file(finished, tmp_path, monkeypatch):
    one = _page(_copy(finished, tmp_path / "one", parts=False))
    parts = _page(_copy(finished, tmp_path / "parts", parts=True))
    assert parts == one
    assert one.count('class="pair"') >= 3 and "Texts are not shown" not in one  # the pairs' texts were read
    for src in ("a.jsonl", "b.parquet", "c.jsonl"):  # ... from both kinds of input
        assert f"<summary>{src}: " in one
    monkeypatch.setattr(streamed, "BATCH_ROWS", 3)  # batches that split the files, the row groups and the pairs
    assert _page(str(tmp_path / "parts")) == one and _page(str(tmp_path / "one")) == one


def test_the_removals_are_counted_in_the_whole_tables_order(finished, tmp_path, monkeypatch):
    """Per step in order of first appearance among the removed rows, then per reason within the step: the table
    of the report written before it streamed the decisions."""
    d = pq.read_table(os.path.join(finished, "decisions.parquet"))
    n = d.num_rows
    removed = d.filter(pc.invert(d["keep"]))
    want = [(step, reason, f"{k:,}", pct(k, n)) for step in value_counts(removed["step"])
            for reason, k in value_counts(removed.filter(pc.equal(removed["step"], step))["reason"]).items()]
    assert {w[0] for w in want} == {"filter", "dedup"} and len(want) >= 3
    monkeypatch.setattr(streamed, "BATCH_ROWS", 2)
    assert html_table(("step", "reason", "documents", "of the input"), want) in _page(
        _copy(finished, tmp_path / "one", parts=False))


def test_the_decisions_are_never_read_whole(finished, tmp_path, monkeypatch):
    """No whole-table read of the decisions (pyarrow.parquet.read_table, a ParquetFile's read, the layouts'
    read_table) nor of an input's row group, only batches of at most BATCH_ROWS rows, each followed by a release of
    the Arrow pool's unused memory, in either layout; the page is the same."""
    one, parts = _copy(finished, tmp_path / "one", parts=False), _copy(finished, tmp_path / "parts", parts=True)
    want = _page(one)

    def whole(*a, **k):
        raise AssertionError(f"the decisions read whole: {a}")

    batches = []
    real = pq.ParquetFile.iter_batches

    def counted(self, *a, **k):
        for b in real(self, *a, **k):
            batches.append(b.num_rows)
            yield b

    releases = []
    monkeypatch.setattr(pq, "read_table", whole)
    monkeypatch.setattr(pq.ParquetFile, "read", whole)
    monkeypatch.setattr(pq.ParquetFile, "read_row_group", whole)
    monkeypatch.setattr(gpu_dedup.decisions, "read_table", whole)
    monkeypatch.setattr(pq.ParquetFile, "iter_batches", counted)
    monkeypatch.setattr(streamed, "release_pool", lambda: releases.append(len(batches)))
    monkeypatch.setattr(streamed, "BATCH_ROWS", 4)
    assert _page(one) == want and _page(parts) == want
    assert batches and max(batches) <= 4
    # the pool's unused memory given back after each batch (the reads' next batch, or its row group's end), but the
    # last batch of each page's StreamedRows, whose read stops where the wanted rows end
    assert len(releases) == len(batches) - 2


def test_the_report_imports_no_pandas(tmp_path):
    """The report of a Ray run's parts over Parquet inputs imports no pandas (pyarrow imports it to build an array of
    Python values, to make a scalar of one, or in ``to_numpy``: 33 MiB of a Ray driver that has no other use for it),
    and shows the pairs' texts."""
    out = _copy(_finished(tmp_path / "in", ()), tmp_path / "parts", parts=True)
    code = ("import sys\n"
            "from gpu_dedup.pipeline.report import write_pipeline_report\n"
            f"page = open(write_pipeline_report({out!r}), encoding='utf-8').read()\n"
            "print('pandas' in sys.modules, page.count('class=\"pair\"') >= 3, 'Texts are not shown' in page)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.split() == ["False", "True", "False"], r.stdout + r.stderr


def test_the_report_command_writes_a_pipelines_page(finished, tmp_path):
    """`gpu-dedup report OUT` of a pipeline run writes the pipeline's page (was: the dedup run's page, over it; a
    pipeline whose report failed names that command to retry), with --source and --no-inputs; --max-clusters,
    which it has no use for, is refused."""
    from gpu_dedup.cli import main

    out = _copy(finished, tmp_path / "one", parts=False)
    want = _page(out)
    os.remove(os.path.join(out, "report.html"))
    assert main(["report", out]) == 0
    with open(os.path.join(out, "report.html"), encoding="utf-8") as fh:
        assert fh.read().replace(out, "OUT") == want
    assert main(["report", out, "--no-inputs"]) == 0
    with open(os.path.join(out, "report.html"), encoding="utf-8") as fh:
        page = fh.read()
    assert "Texts are not shown: the inputs were not read" in page and "Sources" in page
    assert main(["report", out, "--max-clusters", "3"]) == 1
