"""Run report: measurement helpers against hand-computed values, and the HTML of real small runs."""
import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from xml.etree import ElementTree

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import gpu_dedup
from gpu_dedup import RunConfig, report
from gpu_dedup.config import LSHConfig
from gpu_dedup.cli import report as report_cli
from gpu_dedup.report import html as report_html
from gpu_dedup.report import inputs as report_inputs
from gpu_dedup.report.page import fmt_bytes
from gpu_dedup.testing import evalcorpus

SECTIONS = ["Summary", "Documents per stage and reason", "Cluster sizes", "Largest clusters", "Sources",
            "LSH bands and buckets", "S-curve and measured similarities", "Timings and throughput", "Cost",
            "Device, config and contract"]
BASE_PLOTS = ["counts", "cluster_sizes", "band_load", "s_curve", "timings"]
SCRIPT = "<script>alert(1)</script>"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
N_INJECTED = 8


# ------------------------------------------------------------------------------------------ helpers
class _Page(HTMLParser):
    """Collects h2 headings, img sources and inline figures (each <svg>'s aria-label), and checks that every
    non-void element is closed in order."""

    VOID = {"meta", "img", "br", "hr", "input", "link", "col", "wbr"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.h2: list[str] = []
        self.imgs: list[str] = []
        self.figures: list[str] = []
        self.errors: list[str] = []
        self._in_h2 = False

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.imgs.append(dict(attrs).get("src", ""))
        if tag == "svg":
            self.figures.append(dict(attrs).get("aria-label", ""))
        if tag in self.VOID:
            return
        self.stack.append(tag)
        if tag == "h2":
            self._in_h2 = True
            self.h2.append("")

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:]}")
            return
        self.stack.pop()
        if tag == "h2":
            self._in_h2 = False

    def handle_data(self, data):
        if self._in_h2:
            self.h2[-1] += data


def parse(path: str) -> tuple[str, _Page]:
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    page = _Page()
    page.feed(text)
    page.close()
    assert not page.errors, page.errors[:5]
    assert page.stack == [], f"unclosed elements: {page.stack}"
    return text, page


def svg_files(out: str) -> dict[str, str]:
    """report/NAME.svg -> its text; each one parses as XML with an <svg> root (a file of its own)."""
    folder = os.path.join(out, "report")
    found = {}
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        with open(os.path.join(folder, name), encoding="utf-8") as fh:
            found[name] = fh.read()
        assert ElementTree.fromstring(found[name]).tag == "{http://www.w3.org/2000/svg}svg", name
    return found


def write_jsonl(path, rows) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """300 evalcorpus documents in two jsonl files, plus 8 edited copies of one unique document whose
    edit is markup, so the largest cluster (9 documents) must show '<script>' escaped."""
    base = tmp_path_factory.mktemp("report_run")
    corpus = evalcorpus.make_corpus(300, seed=3)
    rows = corpus.select(["id", "text"]).to_pylist()
    origins = set(corpus["origin"].drop_null().to_pylist())
    kinds = corpus["kind"].to_pylist()
    src = next(i for i, r in enumerate(rows)
               if kinds[i] == "unique" and r["id"] not in origins and len(r["text"].split()) >= 150 and i < 150)
    words = rows[src]["text"].split()
    injected = []
    for k in range(N_INJECTED):
        w = list(words)
        w[20 + 9 * k] = f"{SCRIPT} &amp; v{k}"
        injected.append({"id": f"inj<{k}>", "text": " ".join(w)})
    inputs = base / "inputs"
    inputs.mkdir()
    write_jsonl(inputs / "part0.jsonl", rows[:150])
    write_jsonl(inputs / "part1.jsonl", rows[150:] + injected)
    out = base / "out"
    result = gpu_dedup.deduplicate(str(inputs), RunConfig(device="cpu", progress=False), output_dir=str(out))
    all_rows = rows + injected
    return {"inputs": str(inputs), "out": str(out), "result": result, "rows": all_rows,
            "src_id": rows[src]["id"], "base": base}


def copy_run(run, dest) -> str:
    os.makedirs(dest)
    for name in ("run.json", "decisions.parquet"):
        shutil.copy(os.path.join(run["out"], name), dest)
    return str(dest)


# ----------------------------------------------------------------------------------- pure helpers
def test_jaccard_histogram_by_hand():
    h = report.jaccard_histogram([0.81, 0.85, 0.853, 1.0, np.nan, 0.0, 0.5], bins=10)
    assert h.edges.tolist() == [k / 10 for k in range(11)]
    # 0.0 -> bin 0, 0.5 -> bin 5, 0.81/0.85/0.853 -> bin 8, 1.0 -> last bin (closed on the right)
    assert h.counts.tolist() == [1, 0, 0, 0, 0, 1, 0, 0, 3, 1]
    assert h.missing == 1 and h.total == 6
    assert report.jaccard_histogram([], bins=4).counts.tolist() == [0, 0, 0, 0]
    with pytest.raises(ValueError, match="1.2"):
        report.jaccard_histogram([0.5, 1.2])
    with pytest.raises(ValueError, match="bins"):
        report.jaccard_histogram([0.5], bins=0)


def test_candidate_rates_by_hand():
    lsh = LSHConfig(bands=2, rows=3)
    keys = np.array([[1, 2], [1, 3], [4, 5], [6, 5]], np.uint64)
    left, right = np.array([0, 0, 2]), np.array([1, 2, 3])
    jac = np.array([0.85, 0.83, 0.16])  # (0,1) share band 0, (0,2) share nothing, (2,3) share band 1
    cr = report.candidate_rates(keys, lsh, left, right, jac, bins=20)
    assert cr.pairs.tolist() == [0, 0, 0, 1] + [0] * 12 + [1, 1, 0, 0]
    assert cr.candidates.tolist() == [0, 0, 0, 1] + [0] * 12 + [0, 1, 0, 0]
    rate = cr.rate
    assert rate[3] == 1.0 and rate[16] == 0.0 and rate[17] == 1.0 and np.isnan(rate[0])
    assert cr.theory[17] == pytest.approx(1 - (1 - 0.85**3) ** 2)   # 0.85^3 = 0.614125 -> 0.851100...
    assert cr.theory[17] == pytest.approx(0.8511005, abs=1e-7)
    assert cr.theory[3] == pytest.approx(1 - (1 - 0.16**3) ** 2)
    assert cr.recall_above(0.8) == 0.5
    assert cr.stderr[16] == 0.0
    with pytest.raises(ValueError, match="bin edges"):
        cr.recall_above(0.81)
    with pytest.raises(ValueError, match="shape"):
        report.candidate_rates(keys[:, :1], lsh, left, right, jac)
    with pytest.raises(ValueError, match="NaN"):
        report.candidate_rates(keys, lsh, left, right, np.array([0.5, np.nan, 0.5]))
    with pytest.raises(ValueError, match="indexes"):
        report.candidate_rates(keys, lsh, np.array([0]), np.array([4]), np.array([0.5]))


def test_semantic_reasons_are_listed_only_for_a_run_with_a_semantic_stage():
    """Issue 36 item 14: the report's stage and reason tables list semantic rows for a run that had a semantic
    stage (even with 0 removed), not for one without."""
    from types import SimpleNamespace

    from gpu_dedup.decisions import reason_counts
    from gpu_dedup.report.sections import _stage_rows, run_reasons

    def summary(t):  # the two fields run_reasons reads of a report.summary.RunSummary
        return SimpleNamespace(reasons=reason_counts(t), semantic="cosine" in t.column_names)

    d = pa.table({"reason": ["unique", "near_duplicate", "representative"]})
    lexical = run_reasons(summary(d), {"stages": {"exact": {}}})
    assert "semantic_duplicate" not in lexical and lexical["near_duplicate"] == 1
    assert [r[0] for r in _stage_rows(3, lexical)] == ["input", "exact", "near (MinHash/LSH)", "kept"]
    with_semantic = run_reasons(summary(d), {"stages": {"semantic": {"order": "after"}}})
    assert with_semantic["semantic_duplicate"] == 0
    assert "semantic" in [r[0] for r in _stage_rows(3, with_semantic)]
    assert run_reasons(summary(d.append_column("cosine", pa.array([None, None, None], pa.float64()))), {}) \
        == with_semantic


def test_diff_words_marks_and_escapes():
    a, b = report.diff_words("the quick brown fox", "the quick red fox")
    assert a == "the quick <del>brown</del> fox"
    assert b == "the quick <mark>red</mark> fox"
    a, b = report.diff_words("x <b>bold</b> & y", "x <b>bold</b> & z")
    assert a == "x &lt;b&gt;bold&lt;/b&gt; &amp; <del>y</del>"
    assert b == "x &lt;b&gt;bold&lt;/b&gt; &amp; <mark>z</mark>"
    # long unchanged stretches collapse to `context` words next to the change
    text = " ".join(f"w{i}" for i in range(40))
    a, b = report.diff_words(text, text.replace("w20", "CHANGED"), context=3)
    skip = '<span class="skip">[… {} identical words …]</span>'
    assert a == f"{skip.format(17)} w17 w18 w19 <del>w20</del> w21 w22 w23 {skip.format(16)}"
    assert b == f"{skip.format(17)} w17 w18 w19 <mark>CHANGED</mark> w21 w22 w23 {skip.format(16)}"
    assert report.diff_words(text, text, context=None)[0] == text
    a, _ = report.diff_words("a b c d e", "a b c d e", max_words=2)
    assert a == 'a b <span class="skip">… (3 more words, not compared)</span>'


def test_largest_clusters_by_hand():
    d = pa.table({"keep": [True, True, False, False, True, False, True],
                  "cluster_size": [3, 2, 3, 2, 1, 3, 1],
                  "cluster_id": [0, 1, 0, 1, 4, 0, 6],
                  "jaccard": [None, None, 0.9, 1.0, None, 0.82, None]})
    views = report.largest_clusters(d, 5, members=1)
    assert [(v.rep, v.size, v.members) for v in views] == [(0, 3, (5,)), (1, 2, (3,))]
    assert report.largest_clusters(d, 1)[0].members == (5, 2)
    assert report.largest_clusters(d, 0) == []


# ------------------------------------------------------------------------------------------- report
def test_report_renders_with_excerpts(run, monkeypatch):
    monkeypatch.chdir(run["inputs"])  # run.json names the inputs relative to their folder
    path = report.write_report(run["out"], max_clusters=3)
    assert path == os.path.join(run["out"], "report.html")
    text, page = parse(path)
    assert page.h2 == SECTIONS
    assert page.imgs == [] and len(page.figures) == len(BASE_PLOTS)  # inline: the page needs no other file
    files = svg_files(run["out"])
    assert sorted(files) == sorted(f"{name}.svg" for name in BASE_PLOTS)
    for name in BASE_PLOTS:  # the page's figure is the file's
        assert files[f"{name}.svg"].split("\n", 1)[1].strip() in text

    # the injected cluster is the largest and its markup is shown as text, never as markup
    assert f"Cluster of {N_INJECTED + 1} documents, kept: <code>{run['src_id']}</code>" in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "<script" not in text.lower()
    assert "&amp;amp;" in text and "inj&lt;0&gt;" in text
    assert "<mark>" in text and "<del>" in text
    largest = text[text.index('id="largest"'):text.index("<section", text.index('id="largest"'))]
    assert largest.count('class="pair"') == 3 * 3  # 3 clusters x 3 members
    assert "not shown" not in text

    # counts per stage, from an independent tally of the decisions
    d = run["result"].decisions.to_pydict()
    by = collections.Counter(d["reason"])
    exact = by["exact_duplicate"] + by["short_exact_duplicate"]
    assert f'<td class="l">exact</td><td>{exact:,}</td>' in text
    assert f'<td class="l">near (MinHash/LSH)</td><td>{by["near_duplicate"]:,}</td>' in text
    assert '<td class="l">semantic' not in text  # no semantic stage ran: no "semantic 0" rows (issue 36 item 14)

    # retained bytes and whitespace words, recomputed from the input rows
    texts = {r["id"]: r["text"] for r in run["rows"]}
    kept = [texts[i] for i, k in zip(d["id"], d["keep"]) if k]
    b_in, b_kept = sum(len(t.encode()) for t in texts.values()), sum(len(t.encode()) for t in kept)
    w_in, w_kept = sum(len(t.split()) for t in texts.values()), sum(len(t.split()) for t in kept)
    assert f"{fmt_bytes(b_kept)} of {fmt_bytes(b_in)}" in text
    assert f"{w_kept:,} of {w_in:,}" in text

    # the removed near-duplicates drawn over the S-curve, labelled as what they are
    n_near = by["near_duplicate"]
    assert f"the {n_near:,} removed near-duplicates counted by their exact Jaccard" in text
    assert "not a candidate rate" in text


def test_report_without_inputs_says_so(run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the relative input paths lead nowhere from here
    out = copy_run(run, tmp_path / "out")
    run_json = os.path.join(out, "run.json")  # and the absolute ones as if the corpus had moved
    meta = json.load(open(run_json))
    meta["input_paths"] = [str(tmp_path / "moved" / p) for p in meta["inputs"]]
    json.dump(meta, open(run_json, "w"))
    text, page = parse(report.write_report(out))
    assert page.h2 == SECTIONS
    assert len(page.figures) == len(BASE_PLOTS)
    assert "were not found" in text and "--source" in text
    assert "<mark>" not in text and 'class="pair"' not in text
    assert "inj&lt;0&gt;" in text  # member ids are still listed, escaped
    # the same directory with source= shows the excerpts
    text, _ = parse(report.write_report(out, source=run["inputs"], max_clusters=1))
    largest = text[text.index('id="largest"'):text.index("<section", text.index('id="largest"'))]
    assert largest.count('class="pair"') == 3 and "&lt;script&gt;" in text


def test_report_with_other_inputs_says_they_do_not_match(run, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    write_jsonl(other / "part0.jsonl", [{"id": f"x{i}", "text": f"some other text number {i} here"}
                                        for i in range(5)])
    write_jsonl(other / "part1.jsonl", [{"id": "y", "text": "more"}])
    out = copy_run(run, tmp_path / "out")
    text, _ = parse(report.write_report(out, source=str(other)))
    assert "do not match this run" in text and "x0" in text
    assert 'class="pair"' not in text


def test_report_for_table_input_and_cli(tmp_path, capsys):
    corpus = evalcorpus.make_corpus(120, seed=11).select(["id", "text"])
    out = str(tmp_path / "out")
    gpu_dedup.deduplicate(corpus, RunConfig(device="cpu", progress=False), output_dir=out)
    text, _ = parse(report.write_report(out))
    assert "in-memory table" in text
    text, _ = parse(report.write_report(out, source=corpus, max_clusters=2))
    assert "<mark>" in text or "identical words" in text
    assert "in-memory table" not in text

    parser = argparse.ArgumentParser()
    report_cli.add_arguments(parser)
    args = parser.parse_args([out, "--max-clusters", "1", "--no-inputs"])
    assert report_cli.run(args) == 0
    assert capsys.readouterr().out.strip() == f"wrote {os.path.join(out, 'report.html')}"
    text, _ = parse(os.path.join(out, "report.html"))
    assert "the inputs were not read" in text


def test_report_giant_bucket_optional_plots_and_unverified(run, tmp_path):
    out = copy_run(run, tmp_path / "out")
    with open(os.path.join(out, "run.json")) as fh:
        stats = json.load(fh)
    stats["stages"]["lsh"]["largest_bucket"] = 25_000
    stats["stages"]["lsh"]["bucket_size_log2_counts"] = [0, 500, 60, 7, 1]
    stats["config"]["cluster"]["verify"] = False
    stats["stages"]["against_index"] = {"path": "idx<1>", "documents": 5}
    with open(os.path.join(out, "run.json"), "w") as fh:
        json.dump(stats, fh)
    # two removed documents matched an indexed one (cluster_id = -1 - index position)
    d = pq.read_table(os.path.join(out, "decisions.parquet"))
    cid = d["cluster_id"].to_numpy().copy()
    cid[np.flatnonzero(~d["keep"].to_numpy(zero_copy_only=False))[:2]] = [-1, -4]
    d = d.set_column(d.column_names.index("cluster_id"), "cluster_id", pa.array(cid, pa.int64()))
    pq.write_table(d, os.path.join(out, "decisions.parquet"))
    text, page = parse(report.write_report(out, read_inputs=False))
    assert "Giant bucket: 25,000 documents" in text
    assert len(page.figures) == len(BASE_PLOTS) + 1
    assert os.path.exists(os.path.join(out, "report", "bucket_sizes.svg"))
    assert "Verification was off" in text
    assert "2 of the removed documents duplicate a document of the index <code>idx&lt;1&gt;</code>" in text
    # a later report without the optional data removes the stale plot
    del stats["stages"]["lsh"]["bucket_size_log2_counts"]
    with open(os.path.join(out, "run.json"), "w") as fh:
        json.dump(stats, fh)
    report.write_report(out, read_inputs=False)
    assert not os.path.exists(os.path.join(out, "report", "bucket_sizes.svg"))


def test_report_errors(tmp_path, run):
    with pytest.raises(FileNotFoundError, match="run.json"):
        report.write_report(str(tmp_path))
    with pytest.raises(ValueError, match="max_clusters"):
        report.write_report(run["out"], max_clusters=-1)
    out = copy_run(run, tmp_path / "out")
    pq.write_table(pq.read_table(os.path.join(out, "decisions.parquet")).slice(0, 10),
                   os.path.join(out, "decisions.parquet"))
    with pytest.raises(ValueError, match="different runs"):
        report.write_report(out)


@pytest.mark.parametrize("damage", ["{bad", "[1, 2]", ""])
def test_report_of_a_damaged_run_json_names_the_file(tmp_path, run, capsys, damage):
    """A run.json cut short or edited is one error line naming it (it was a JSONDecodeError traceback)."""
    from gpu_dedup.cli.main import main

    out = copy_run(run, tmp_path / "out")
    with open(os.path.join(out, "run.json"), "w", encoding="utf-8") as fh:
        fh.write(damage)
    with pytest.raises(gpu_dedup.errors.DataError, match=r"run\.json.*run it again"):
        report.write_report(out)
    assert main(["report", out]) == 1
    err = capsys.readouterr().err
    assert "gpu-dedup: error:" in err and "run.json" in err and "Traceback" not in err


def test_report_draws_its_figures_without_matplotlib(run, tmp_path):
    """The figures are drawn from the aggregates (report/svg.py): with matplotlib unimportable the page has all
    of them, and no earlier version's PNG figures are left beside them."""
    out = copy_run(run, tmp_path / "out")
    os.makedirs(os.path.join(out, "report"))
    with open(os.path.join(out, "report", "counts.png"), "wb") as fh:  # an earlier report's figure
        fh.write(b"\x89PNG")
    code = ("import sys; sys.modules['matplotlib'] = None\n"  # `import matplotlib` raises ImportError
            "from gpu_dedup import report\n"
            f"report.write_report({out!r}, read_inputs=False)\n"
            "assert not any(m.partition('.')[0] in ('matplotlib', 'PIL') for m in sys.modules if sys.modules[m])\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    text, page = parse(os.path.join(out, "report.html"))
    assert page.h2 == SECTIONS and len(page.figures) == len(BASE_PLOTS) and "failed" not in text
    assert sorted(svg_files(out)) == sorted(f"{name}.svg" for name in BASE_PLOTS)


def test_a_run_report_reads_no_input_again(tmp_path, monkeypatch):
    """A run that writes deduplicated/ hands the shown clusters' texts to its report (picked up while the kept
    records were copied): the same page as a report that reads the inputs, without reading them."""
    corpus = evalcorpus.make_corpus(300, seed=3).select(["id", "text"])
    inputs = tmp_path / "in"
    inputs.mkdir()
    pq.write_table(corpus.slice(0, 150), inputs / "a.parquet")
    write_jsonl(inputs / "b.jsonl", corpus.slice(150).to_pylist())
    calls = []
    real = report_inputs.scan_inputs
    monkeypatch.setattr(report_inputs, "scan_inputs", lambda *a, **k: calls.append(a) or real(*a, **k))
    monkeypatch.setattr(report_html, "scan_inputs", report_inputs.scan_inputs)
    out = tmp_path / "out"
    gpu_dedup.deduplicate(str(inputs), RunConfig(device="cpu", progress=False), output_dir=str(out))
    assert calls == []
    by_run = (out / "report.html").read_text()
    assert by_run.count('class="pair"') > 10  # both files' clusters are shown
    report.write_report(str(out))  # the report command: reads the rows shown from the inputs
    assert len(calls) == 1
    pairs = lambda page: re.findall(r'<div class="pair">.*?</div></div></div>', page)  # noqa: E731
    assert pairs((out / "report.html").read_text()) == pairs(by_run)


# ------------------------------------------------------------- Parquet inputs: only the row groups shown
def _near_texts(rng, n: int, rep: int, members: list[int]) -> list[str]:
    """n random 200-word texts; rows ``members`` are copies of row ``rep`` with one word edited each."""
    vocab = np.array([f"w{i}" for i in range(5000)])
    out = [" ".join(rng.choice(vocab, 200)) for _ in range(n)]
    words = out[rep].split()
    for k, m in enumerate(members):
        w = list(words)
        w[50 + 7 * k] = f"edit{k}"
        out[m] = " ".join(w)
    return out


@pytest.fixture(scope="module")
def parquet_run(tmp_path_factory):
    """A run over four Parquet files, each with one cluster near its end:
    a.parquet: 20 rows, row groups of 5, a null text at row 1 (on_error='skip' drops it);
    b.parquet: 40 rows, row groups of 10, binary text, invalid UTF-8 in the shown member b33;
    c.parquet: 30 rows, row groups of 10, no id column (generated ids), representative in row group 1;
    d.parquet: 12 rows, row groups of 4, integer ids 1000.. ."""
    base = tmp_path_factory.mktemp("report_parquet")
    inputs = base / "inputs"
    inputs.mkdir()
    rng = np.random.default_rng(5)
    a = _near_texts(rng, 20, 14, [15, 16, 17])
    a[1] = None
    pq.write_table(pa.table({"id": [f"a{i}" for i in range(20)], "text": a}), inputs / "a.parquet", row_group_size=5)
    b = [t.encode() for t in _near_texts(rng, 40, 31, [32, 33, 34, 35])]
    b[33] = b[33].replace(b" ", b" \xff\xfe", 1)
    pq.write_table(pa.table({"id": [f"b{i}" for i in range(40)], "text": pa.array(b, pa.binary())}),
                   inputs / "b.parquet", row_group_size=10)
    c = _near_texts(rng, 30, 18, [25, 26, 27])
    pq.write_table(pa.table({"text": c}), inputs / "c.parquet", row_group_size=10)
    d = _near_texts(rng, 12, 8, [9, 10, 11])
    pq.write_table(pa.table({"id": pa.array(range(1000, 1012), pa.int64()), "text": d}), inputs / "d.parquet",
                   row_group_size=4)
    texts = {f"a{i}": t for i, t in enumerate(a) if t is not None}
    texts.update({f"b{i}": t.decode("utf-8", "replace") for i, t in enumerate(b)})
    texts.update({f"c.parquet:{i}": t for i, t in enumerate(c)})
    texts.update({str(1000 + i): t for i, t in enumerate(d)})
    out = base / "out"
    gpu_dedup.deduplicate(str(inputs), RunConfig(device="cpu", progress=False, on_error="skip"), output_dir=str(out))
    return {"inputs": str(inputs), "out": str(out), "texts": texts}


def _shown(decisions) -> np.ndarray:
    """The rows write_report shows (as write_report picks them)."""
    views = report.largest_clusters(decisions, 10)
    return np.unique(np.array([r for v in views for r in (v.rep, *v.members)], np.int64))


class _Reads:
    """Records what the report reads: row groups per Parquet file (read whole, or in batches of the row groups
    named), and the files read by the run's reader (io.iter_batches)."""

    def __init__(self, monkeypatch) -> None:
        from gpu_dedup import io

        self.groups: dict[str, list[int]] = collections.defaultdict(list)
        self.sequential: list[str] = []
        init, read_group, iter_batches = pq.ParquetFile.__init__, pq.ParquetFile.read_row_group, io.iter_batches
        group_batches = pq.ParquetFile.iter_batches

        def spy_init(pf, source, *args, **kwargs):
            init(pf, source, *args, **kwargs)
            pf._spy_name = os.path.basename(os.fspath(source)) if isinstance(source, (str, os.PathLike)) else "?"

        def spy_read_group(pf, i, *args, **kwargs):
            self.groups[getattr(pf, "_spy_name", "?")].append(i)
            return read_group(pf, i, *args, **kwargs)

        def spy_group_batches(pf, *args, row_groups=None, **kwargs):
            if row_groups is not None:
                self.groups[getattr(pf, "_spy_name", "?")].extend(row_groups)
            return group_batches(pf, *args, row_groups=row_groups, **kwargs)

        def spy_iter_batches(files, **kwargs):
            self.sequential.extend(f.relpath for f in files)
            return iter_batches(files, **kwargs)

        monkeypatch.setattr(pq.ParquetFile, "__init__", spy_init)
        monkeypatch.setattr(pq.ParquetFile, "read_row_group", spy_read_group)
        monkeypatch.setattr(pq.ParquetFile, "iter_batches", spy_group_batches)
        monkeypatch.setattr(io, "iter_batches", spy_iter_batches)


def _scan(out: str, source=None, stats_edit=None, need_sizes: bool = False):
    stats, decisions = report_inputs.load_run(out)
    if stats_edit is not None:
        stats_edit(stats)
    files, why = report_inputs.locate_inputs(stats, source)
    assert why is None, why
    want = _shown(decisions)
    return report_inputs.scan_inputs(files, stats, decisions, want, need_sizes), decisions, want


def test_parquet_report_reads_only_the_row_groups_shown(parquet_run, monkeypatch):
    reads = _Reads(monkeypatch)
    scan, decisions, want = _scan(parquet_run["out"])
    ids = decisions["id"].to_pylist()
    assert {ids[r] for r in want} >= {"b31", "b33", "c.parquet:18", "c.parquet:25", "1008", "1011", "a14"}
    assert scan.texts == {r: parquet_run["texts"][ids[r]] for r in want.tolist()}
    b33 = scan.texts[ids.index("b33")]
    assert "\ufffd" in b33 and "\xff" not in b33  # repaired like the reader: bytes.decode("utf-8", "replace")
    # b's shown rows all lie in its last row group; c's in groups 1 and 2; d's in its last one
    assert dict(reads.groups) == {"b.parquet": [3], "c.parquet": [1, 2], "d.parquet": [2]}
    assert reads.sequential == ["a.parquet"]  # its run numbering is not its physical one (a dropped row)

    # the sequential path (every file read from its start) gives the same texts
    monkeypatch.setattr(report_inputs, "_parquet_texts", lambda *args, **kwargs: None)
    reads.sequential.clear()
    seq, _, _ = _scan(parquet_run["out"])
    assert seq.texts == scan.texts
    assert reads.sequential == ["a.parquet", "b.parquet", "c.parquet", "d.parquet"]


def test_parquet_report_page_reads_only_the_row_groups_shown(parquet_run, tmp_path, monkeypatch):
    out = copy_run({"out": parquet_run["out"]}, tmp_path / "out")
    reads = _Reads(monkeypatch)
    text, _ = parse(report.write_report(out))
    assert text.count('class="pair"') == 4 * 3 and "not shown" not in text and "do not match" not in text
    assert "<mark>edit0</mark>" in text and "\ufffd" in text
    assert dict(reads.groups) == {"b.parquet": [3], "c.parquet": [1, 2], "d.parquet": [2]}
    assert reads.sequential == ["a.parquet"]


def test_parquet_report_with_skipped_rows_reads_sequentially(parquet_run, monkeypatch):
    reads = _Reads(monkeypatch)
    scan, decisions, want = _scan(parquet_run["out"])
    ids = decisions["id"].to_pylist()
    a_rows = [r for r in want.tolist() if ids[r].startswith("a")]
    assert [ids[r] for r in a_rows] == ["a14", "a15", "a16", "a17"]
    assert a_rows[0] == 13  # run row 13 is the file's physical row 14: row 1 was dropped
    assert all(scan.texts[r] == parquet_run["texts"][ids[r]] for r in a_rows)
    assert "a.parquet" not in reads.groups and reads.sequential == ["a.parquet"]
    # reading a's row groups as if its rows were numbered physically would be wrong: caught by the count
    stats, _ = report_inputs.load_run(parquet_run["out"])
    files, _ = report_inputs.locate_inputs(stats, None)
    start, count = report_inputs._file_rows(decisions, stats["inputs"])
    with pytest.raises(report_inputs.Mismatch, match="a.parquet now has 20 rows but the run read 19"):
        report_inputs._parquet_texts(files[0], "text", "id", decisions["id"].combine_chunks(), int(start[0]),
                              int(start[0] + count[0]), np.array(a_rows, np.int64))

    # a run.json that does not list the skipped rows: with on_error='skip' no file can be trusted
    reads.groups.clear()
    reads.sequential.clear()
    old, _, _ = _scan(parquet_run["out"], stats_edit=lambda s: s.pop("read"))
    assert old.texts == scan.texts
    assert not reads.groups and reads.sequential == ["a.parquet", "b.parquet", "c.parquet", "d.parquet"]
    assert report_inputs._files_without_skips({"config": {"on_error": "raise"}}, ["x", "y"]) == {0, 1}
    assert report_inputs._files_without_skips({"config": {"on_error": "skip"}, "read": {"skipped": []}}, ["x"]) == {0}


def test_parquet_report_sizes_read_every_row(parquet_run, monkeypatch):
    reads = _Reads(monkeypatch)
    scan, decisions, _ = _scan(parquet_run["out"], need_sizes=True)
    assert not reads.groups and reads.sequential == ["a.parquet", "b.parquet", "c.parquet", "d.parquet"]
    texts = [parquet_run["texts"][i] for i in decisions["id"].to_pylist()]
    assert scan.bytes_input == sum(len(t.encode()) for t in texts)
    assert scan.words_input == sum(len(t.split()) for t in texts)


def _rewrite(path, change) -> None:
    md = pq.ParquetFile(path).metadata
    table = change(pq.read_table(path))
    pq.write_table(table, path, row_group_size=md.row_group(0).num_rows)


def _set_id(table, k: int, value):
    col = table.column("id").to_pylist()
    col[k] = value
    return table.set_column(table.column_names.index("id"), "id", pa.array(col, table.schema.field("id").type))


@pytest.mark.parametrize("name,row,value,shown_id", [("b.parquet", 33, "zz", "b33"),  # a shown row
                                                     ("b.parquet", 39, "zz", "b39"),  # not shown, group read
                                                     ("d.parquet", 11, 7, "1011")])   # integer ids
def test_parquet_report_changed_id_is_a_mismatch(parquet_run, tmp_path, monkeypatch, name, row, value, shown_id):
    inputs = tmp_path / "inputs"
    shutil.copytree(parquet_run["inputs"], inputs)
    _rewrite(inputs / name, lambda t: _set_id(t, row, value))
    reads = _Reads(monkeypatch)
    stats, decisions = report_inputs.load_run(parquet_run["out"])
    run_row = decisions["id"].to_pylist().index(shown_id)
    with pytest.raises(report_inputs.Mismatch, match=f"row {run_row:,} of the run has id '{shown_id}' but the input "
                                                      f"now has '{value}' \\({name}\\)"):
        _scan(parquet_run["out"], source=str(inputs))
    assert name not in reads.sequential  # found by the row-group read
    out = copy_run({"out": parquet_run["out"]}, tmp_path / "out")
    text, _ = parse(report.write_report(out, source=str(inputs)))
    assert "do not match this run" in text and 'class="pair"' not in text


def test_parquet_report_changed_row_count_is_a_mismatch(parquet_run, tmp_path):
    inputs = tmp_path / "inputs"
    shutil.copytree(parquet_run["inputs"], inputs)
    _rewrite(inputs / "c.parquet", lambda t: t.slice(1))  # one row less: every generated id would shift
    with pytest.raises(report_inputs.Mismatch, match="c.parquet now has 29 rows but the run read 30"):
        _scan(parquet_run["out"], source=str(inputs))


def test_the_largest_clusters_excerpts_import_no_pandas():
    """The largest clusters' excerpts read the shown rows' ids, reasons and Jaccard values as they are (a Python
    value made an Arrow scalar imported pandas: 0.3 s of a Ray run's driver, whose report comes from its tasks'
    aggregates); an integer Jaccard is shown as a float, a missing one not at all."""
    code = ("import sys, types\n"
            "from gpu_dedup.report.metrics import ClusterView\n"
            "from gpu_dedup.report.sections import excerpts_section\n"
            "rows = {0: {'id': 'a<', 'reason': 'representative', 'jaccard': None},\n"
            "        1: {'id': 'b', 'reason': 'near_duplicate', 'jaccard': 1},\n"
            "        2: {'id': 'c', 'reason': 'exact_duplicate', 'jaccard': None}}\n"
            "html = excerpts_section(types.SimpleNamespace(rows=rows), [ClusterView(0, 4, (1, 2))], None, 'none')\n"
            "print('pandas' in sys.modules, 'J with kept = 1.000' in html, html.count('J with kept'), 'a&lt;' in html)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.split() == ["False", "True", "1", "True"], r.stdout + r.stderr
