"""OUT's per-document tables in either layout (distributed/outputs.py, decisions.table_path): the layout a run
writes, the local engine's refusal of a dataset, and every reader of a run's table reading a dataset of per-file
parts as the one file (the span programs' tables too). No Ray cluster here: the Ray runs' parts are
tests/distributed/test_engine.py's and test_programs.py's."""
import json
import os
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import gpu_dedup
from gpu_dedup import RunConfig
from gpu_dedup.cli import main
from gpu_dedup.decisions import DECISIONS_SCHEMA, read_table, table_path
from gpu_dedup.distributed import layout_of
from gpu_dedup.errors import ConfigError, DataError, MissingFileError
from gpu_dedup.paragraph.program import Paragraph
from gpu_dedup.report import write_report
from gpu_dedup.report.inputs import load_run
from gpu_dedup.runtime.program import Env
from gpu_dedup.runtime.run import write_tables
from gpu_dedup.testing.evalcorpus import make_corpus


def test_layout_of_defaults_and_refusals():
    assert [layout_of(None, "local"), layout_of(None, "ray"), layout_of("file", "ray"), layout_of("file", "local")] \
        == ["file", "dataset", "file", "file"]
    with pytest.raises(ConfigError, match="--table-layout dataset .* add --engine ray"):
        layout_of("dataset", "local")
    with pytest.raises(ConfigError, match="--table-layout"):
        layout_of("parts", "ray")


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    d = tmp_path_factory.mktemp("in")
    t = make_corpus(60, seed=3, mean_words=30, template_families=0)
    pq.write_table(t.slice(0, 40), d / "a.parquet")
    pq.write_table(t.slice(40), d / "b.parquet")
    return d


@pytest.mark.parametrize("command", [["run"], ["filter", "--rules", "gopher"], ["substring", "--min-tokens", "5"]])
def test_local_engine_refuses_a_dataset(src, tmp_path, capsys, command):
    """--table-layout dataset is the Ray tasks' layout: the local engine refuses it, naming the flag, and leaves
    no table behind (the span programs' too: `substring` takes the flag, a Paragraph step the Env's)."""
    assert main([*command, str(src), "-o", str(tmp_path / "o"), "--table-layout", "dataset", "-q"]) == 1
    err = capsys.readouterr().err
    assert "--table-layout dataset" in err and "--engine ray" in err
    assert not any((tmp_path / "o" / n).exists() for n in ("decisions.parquet", "decisions", "scores.parquet",
                                                            "substring_spans.parquet", "substring_spans"))
    with pytest.raises(ConfigError, match="--table-layout dataset .* add --engine ray"):
        Paragraph().run(str(src), str(tmp_path / "p"), Env(table_layout="dataset"))
    assert not (tmp_path / "p" / "removed_spans.parquet").exists()


def test_readers_read_a_dataset_as_the_file(src, tmp_path):
    """A run's decisions.parquet cut into per-file parts (OUT/decisions/part-<k>.parquet, as the Ray tasks write
    them, one empty): table_path finds it, read_table, the report's load_run and the report itself read the same
    rows, order and values."""
    one = tmp_path / "one"
    gpu_dedup.deduplicate(str(src), RunConfig(progress=False), one)
    want = pq.read_table(one / "decisions.parquet")
    parts = tmp_path / "parts"
    parts.mkdir()
    shutil.copy(one / "run.json", parts / "run.json")
    for k, (a, b) in enumerate([(0, 40), (40, 40), (40, 60)]):  # the middle one: an empty input file's part
        write_tables([want.slice(a, b - a)], DECISIONS_SCHEMA, parts / "decisions" / f"part-{k:06d}.parquet")
    assert table_path(parts, "decisions") == str(parts / "decisions")
    assert table_path(one, "decisions") == str(one / "decisions.parquet")
    got = read_table(parts, "decisions")
    assert got.equals(want) and got.schema.metadata == want.schema.metadata
    assert read_table(parts, "decisions", ["id", "keep"]).equals(want.select(["id", "keep"]))
    stats, dec = load_run(str(parts))
    assert dec.equals(want) and stats == json.loads((one / "run.json").read_text())
    assert write_report(str(parts)).endswith("report.html")
    with pytest.raises(MissingFileError, match="decisions.parquet.*a Ray run's parts"):
        table_path(tmp_path, "decisions")


def test_readers_name_a_damaged_or_emptied_dataset(src, tmp_path, capsys):
    """A truncated part of OUT/scores/ (a Ray filter run's dataset): `gpu-dedup report` fails with one line naming
    the part (was pyarrow's traceback); a dataset folder holding no part at all is refused, not read as a table of
    no rows (was a report of nothing)."""
    out = tmp_path / "o"
    assert main(["filter", str(src), "-o", str(out), "--rules", "gopher", "-q"]) == 0
    t = pq.read_table(out / "scores.parquet")
    (out / "scores.parquet").unlink()
    write_tables([t.slice(0, 40)], t.schema, out / "scores" / "part-000000.parquet")
    write_tables([t.slice(40)], t.schema, out / "scores" / "part-000001.parquet")
    assert read_table(out, "scores").equals(t)
    bad = out / "scores" / "part-000001.parquet"
    bad.write_bytes(bad.read_bytes()[:100])
    with pytest.raises(DataError, match="part-000001.parquet"):
        read_table(out, "scores")
    capsys.readouterr()
    assert main(["report", str(out)]) == 1
    err = capsys.readouterr().err
    assert "part-000001.parquet" in err and "Traceback" not in err
    for p in (out / "scores").iterdir():
        p.unlink()
    with pytest.raises(MissingFileError, match="holds no part"):
        read_table(out, "scores")


def _as_dataset(out, table, schema, bounds):
    """OUT/<table>.parquet cut into the parts a Ray run's tasks write (OUT/<table>/part-<k>.parquet, one per
    input file of ``bounds``: its run rows [a, b); an empty file's part holds none), the file removed."""
    t = pq.read_table(out / f"{table}.parquet")
    (out / f"{table}.parquet").unlink()
    rows = t["row"].to_numpy()
    for k, (a, b) in enumerate(bounds):
        write_tables([t.filter((rows >= a) & (rows < b))], schema, out / table / f"part-{k:06d}.parquet")
    return t


@pytest.fixture(scope="module")
def span_src(tmp_path_factory):
    """Two files whose documents share a paragraph and a long span (every reader below sees rows to read)."""
    d = tmp_path_factory.mktemp("spans")
    shared = "this shared boilerplate paragraph repeats across many documents of the corpus word for word"
    for name, n0, n in (("a", 0, 12), ("b", 12, 6)):
        pq.write_table(pa.table({"id": [f"d{i}" for i in range(n0, n0 + n)],
                                 "text": [f"document {i} has its own first line\n{shared}" for i in range(n0, n0 + n)]}),
                       d / f"{name}.parquet")
    return d


@pytest.mark.parametrize("program", ["paragraph", "substring"])
def test_span_readers_read_a_dataset_as_the_file(span_src, tmp_path, capsys, program):
    """A span program's tables as a Ray run's datasets (OUT/removed_spans/, OUT/paragraph_docs/; substring_spans/,
    substring_docs/: one part per input file, an empty file's part between): read_table reads the rows of the
    files; the step's verdicts (runtime.program.span_verdicts: the documents table's ids) are the same; the
    command-line summary names the dataset (was: the verdicts failed on the missing .parquet file and the
    summary named it)."""
    from gpu_dedup.cli import run as run_cli
    from gpu_dedup.cli import substring as substring_cli
    from gpu_dedup.paragraph import dedup as pdedup
    from gpu_dedup.substring import dedup as sdedup
    from gpu_dedup.substring.config import SubstringConfig
    from gpu_dedup.substring.program import Substring

    mod = pdedup if program == "paragraph" else sdedup
    names = ("removed_spans", "paragraph_docs") if program == "paragraph" else ("substring_spans", "substring_docs")
    step = Paragraph() if program == "paragraph" else Substring(SubstringConfig(min_tokens=5))
    want_ids = step.run(str(span_src), str(tmp_path / "one"), Env()).verdicts.ids
    out = tmp_path / "parts"
    sr = step.run(str(span_src), str(out), Env())  # its verdicts not asked for yet
    bounds = [(0, 12), (12, 12), (12, 18)]  # a.parquet's rows, an empty file's, b.parquet's
    spans = _as_dataset(out, names[0], mod.SPANS_SCHEMA, bounds)
    docs = _as_dataset(out, names[1], mod.DOCS_SCHEMA, bounds)
    assert spans.num_rows > 0 and docs.num_rows == 18
    assert read_table(out, names[0]).equals(spans) and read_table(out, names[1]).equals(docs)
    assert sr.verdicts.ids.equals(want_ids) and sr.verdicts.keep.all()
    capsys.readouterr()
    if program == "paragraph":
        run_cli._paragraph_summary(sr.result)
    else:
        substring_cli.summary(sr.result)
    line = capsys.readouterr().out
    assert f"{names[0]}{os.sep}," in line and ".parquet" not in line
