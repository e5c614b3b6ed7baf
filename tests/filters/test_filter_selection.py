"""How the filter's scores are used (issue #25): perplexity selection by rank and CCNet's buckets, stochastic
retention (GPT-3's Pareto rule, linear, sigmoid), the expected score of an ordinal classifier. References:
a brute-force rank written here from Python sorts and exact fractions, the closed form of each retention
rule, the `fasttext` package's own predict(k=-1)."""
import json
import math
from fractions import Fraction

import numpy as np
import pyarrow.parquet as pq
import pytest

from gpu_dedup.cli import main
from gpu_dedup.filters.config import ClassifierSpec, FilterConfig, Retention, parse_classifier
from gpu_dedup.filters.selection import perplexity_buckets, rank_keep, uniform_draws

fasttext = pytest.importorskip("fasttext", reason="the fasttext package is the reference")

WORDS = ("theorem proof lemma analysis measure integral function space operator bounded click buy cheap free "
         "offer deal discount now best price").split()


def _brute_rank(values, fraction):
    """Indices kept: the round-half-up(fraction * m) lowest non-NaN values, ties by index (Python sort)."""
    scored = [(v, i) for i, v in enumerate(values) if not math.isnan(v)]
    scored.sort()
    x = Fraction(fraction) * len(scored)
    k = math.floor(x + Fraction(1, 2))
    return {i for _, i in scored[:k]}, scored


def test_rank_keep_and_buckets_equal_a_brute_force():
    rng = np.random.default_rng(3)
    for n in (1, 2, 7, 100, 1001):
        v = rng.integers(0, 12, n).astype(np.float64)  # many ties
        v[rng.random(n) < 0.1] = np.nan
        for f in (0.01, 0.33, 0.5, 2 / 3, 1.0):
            want, _ = _brute_rank(v.tolist(), f)
            assert set(np.flatnonzero(rank_keep(v, f)).tolist()) == want, (n, f)
        head, scored = _brute_rank(v.tolist(), 0.33)
        mid, _ = _brute_rank(v.tolist(), 0.67)
        got = perplexity_buckets(v, (0.33, 0.67))
        for i in range(n):
            want = None if math.isnan(v[i]) else "head" if i in head else "middle" if i in mid else "tail"
            assert got[i] == want


def _zipf_vocab():
    """The words of the ``lm`` fixture's reference text, and their Zipf probabilities."""
    rng = np.random.default_rng(0)
    vocab = ["".join(rng.choice(list("abcdefghij"), size=rng.integers(2, 7))) for _ in range(500)]
    p = 1.0 / np.arange(1, 501)
    return vocab, p / p.sum()


def _zipf_corpus(path, n, seed, dup_every=0):
    vocab, p = _zipf_vocab()
    rng = np.random.default_rng(seed)
    with open(path, "w") as fh:
        prev = None
        for i in range(n):
            text = " ".join(rng.choice(vocab, size=rng.integers(4, 20), p=p))
            if dup_every and i % dup_every == 0 and prev is not None:
                text = prev  # the same text: the same perplexity, a tie broken by input order
            fh.write(json.dumps({"id": f"r{i}", "text": text if i % 17 else ""}) + "\n")
            prev = text


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    d = tmp_path_factory.mktemp("lm")
    _zipf_corpus(d / "ref.jsonl", 400, seed=1)
    arpa = d / "m.arpa"
    assert main(["train-lm", str(d / "ref.jsonl"), "-o", str(arpa), "--order", "2", "--device", "cpu", "-q"]) == 0
    return str(arpa)


def test_perplexity_keep_and_buckets_through_filter(tmp_path, lm):
    corpus = tmp_path / "in" / "c.jsonl"
    corpus.parent.mkdir()
    _zipf_corpus(corpus, 120, seed=2, dup_every=5)
    out = tmp_path / "out"
    # issue 37 item 1 (002:53): documents of fewer than 10 LM words get no perplexity verdict and are not ranked
    assert main(["filter", str(corpus.parent), "-o", str(out), "--perplexity", f"{lm}:keep=0.33",
                 "--perplexity-buckets", "0.33,0.67", "--min-perplexity-tokens", "10", "--device", "cpu", "-q",
                 "--audit", "3"]) == 0
    texts = [json.loads(x)["text"] for x in corpus.read_text().splitlines()]
    rows = pq.read_table(out / "scores.parquet").to_pylist()
    ppl = [math.nan if r["perplexity"] is None else r["perplexity"] for r in rows]
    short = [len(t.split()) < 10 for t in texts]  # the zipf words are the LM's words
    assert 0 < sum(s and t != "" for s, t in zip(short, texts)) < len(texts) - 20
    judged = [math.nan if s else p for p, s in zip(ppl, short)]
    assert len(set(p for p in judged if not math.isnan(p))) < sum(not math.isnan(p) for p in judged)  # ties exist
    want, scored = _brute_rank(judged, 0.33)
    head, every = _brute_rank(ppl, 0.33)  # the buckets label every document with a perplexity
    mid, _ = _brute_rank(ppl, 0.67)
    for i, (r, t) in enumerate(zip(rows, texts)):
        assert r["perplexity_short"] == (short[i] if r["perplexity"] is not None or not t.strip() else True)
        assert r["perplexity_words"] == len(t.split())
        assert r["keep"] == (i in want or (short[i] and t != ""))
        assert r["reason"] == ("empty" if t == "" else "kept" if r["keep"] else "perplexity")
        assert r["perplexity_bucket"] == (None if r["perplexity"] is None else "head" if i in head
                                          else "middle" if i in mid else "tail")
    stats = json.loads((out / "run.json").read_text())
    pr = stats["perplexity_rank"]
    assert pr["ranked"] == len(scored) and pr["kept"] == len(want)
    assert pr["cut"] == max(ppl[i] for i in want)
    assert pr["buckets"]["documents"] == {"head": len(head), "middle": len(mid) - len(head),
                                          "tail": len(every) - len(mid)}
    assert "perplexity" in (out / "report.html").read_text()


def test_perplexity_rank_bad_input(tmp_path, lm, capsys):
    corpus = tmp_path / "c.jsonl"
    _zipf_corpus(corpus, 5, seed=2)
    for value, needle in ((f"{lm}:keep=0", "--perplexity"), (f"{lm}:keep=1.5", "(0, 1]"),
                          (f"{lm}:keep=x", "keep='x'")):
        assert main(["filter", str(corpus), "-o", str(tmp_path / "o"), "--perplexity", value, "-q"]) == 1
        err = capsys.readouterr().err
        assert needle in err and "FilterConfig" not in err, err
    with pytest.raises(SystemExit):
        main(["filter", str(corpus), "-o", str(tmp_path / "o"), "--perplexity", lm, "--perplexity-buckets",
              "0.67,0.33"])
    assert "0 < A < B < 1" in capsys.readouterr().err
    with pytest.raises(ValueError, match="two fractions"):
        FilterConfig(perplexity=lm, perplexity_buckets=(0.5,))
    with pytest.raises(ValueError, match="one"):
        FilterConfig(perplexity=lm, perplexity_keep=0.5, max_perplexity=100.0)
    # one read of the input (run) cannot rank the corpus: refused by name
    assert main(["run", str(corpus), "-o", str(tmp_path / "r"), "--perplexity", f"{lm}:keep=0.5", "-q"]) == 1
    assert "rank the whole corpus" in capsys.readouterr().err


# ------------------------------------------------------------------------------------ stochastic retention
def test_retention_closed_forms():
    s = np.array([0.0, 0.25, 0.5, 0.9, 1.0, np.nan])
    p = Retention("pareto", alpha=9).prob(s)
    assert p[:5] == pytest.approx([(2 - x) ** -9 for x in s[:5]], rel=1e-12) and np.isnan(p[5])
    assert Retention("linear").prob([-0.1, 0.3, 1.2]).tolist() == [0.0, 0.3, 1.0]
    assert Retention("sigmoid", center=0.5, slope=10).prob([0.5, 0.7])[1] == pytest.approx(
        1 / (1 + math.exp(-2)))
    for bad in (dict(kind="pareto", alpha=0), dict(kind="pareto", alpha=-1), dict(kind="pareto"),
                dict(kind="sigmoid", center=0.5, slope=0), dict(kind="coin")):
        with pytest.raises(ValueError):
            Retention(**bad)
    with pytest.raises(ValueError, match="replaces the threshold"):
        ClassifierSpec("q", "m.bin", threshold=0.5, retention=Retention("linear"))


def test_pareto_draws_match_the_closed_form():
    """Observed retention at fixed scores vs P(keep) = (2 - s) ** -alpha (and linear, sigmoid): within 5
    binomial standard deviations for 40,000 documents per point (a false alarm ~ 6e-7 per check)."""
    n = 40_000
    for k, (rule, closed) in enumerate([
            (Retention("pareto", alpha=9), lambda s: (2 - s) ** -9),
            (Retention("pareto", alpha=2.5), lambda s: (2 - s) ** -2.5),
            (Retention("linear"), lambda s: s),
            (Retention("sigmoid", center=0.6, slope=8), lambda s: 1 / (1 + math.exp(-8 * (s - 0.6))))]):
        for j, s in enumerate((0.1, 0.5, 0.8, 0.95)):
            u = uniform_draws(k * 10 + j, "q", np.arange(n))
            observed = float(np.mean(u < rule.prob(np.full(n, s))))
            p = closed(s)
            assert abs(observed - p) <= 5 * math.sqrt(p * (1 - p) / n) + 1e-12, (rule, s, observed, p)
    # the draws themselves: uniform (Kolmogorov-Smirnov, 1e5 draws, critical value at alpha=1e-4: 1.95/sqrt(n))
    u = np.sort(uniform_draws(7, "q", np.arange(100_000)))
    ks = np.max(np.abs(u - np.arange(1, len(u) + 1) / len(u)))
    assert ks < 1.95 / math.sqrt(len(u))
    # independent per classifier name and seed; the same for the same row whatever the batch
    assert not np.array_equal(uniform_draws(7, "q", np.arange(10)), uniform_draws(7, "r", np.arange(10)))
    assert not np.array_equal(uniform_draws(7, "q", np.arange(10)), uniform_draws(8, "q", np.arange(10)))
    assert np.array_equal(uniform_draws(7, "q", np.arange(100))[40:60], uniform_draws(7, "q", np.arange(40, 60)))


def _docs(n, seed):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        good = i % 2 == 0
        pool = WORDS[:10] if good else WORDS[10:]
        words = rng.choice(pool, size=rng.integers(6, 20)).tolist() + rng.choice(WORDS, size=3).tolist()
        out.append(("hq" if good else "lq", " ".join(words)))
    return out


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("ft")
    (d / "q.txt").write_text("".join(f"__label__{lab} {t}\n" for lab, t in _docs(1000, seed=1)))
    q = d / "q.bin"
    fasttext.train_supervised(str(d / "q.txt"), epoch=5, dim=8, minn=2, maxn=3, bucket=5000, thread=1, seed=1,
                              verbose=0).save_model(str(q))
    # an ordinal model: the label is the number of "good" words among the first five (0..5), FineWeb-Edu style
    rng = np.random.default_rng(2)
    lines = []
    for _ in range(1500):
        words = rng.choice(WORDS, size=5).tolist()
        lines.append(f"__label__{sum(w in WORDS[:10] for w in words)} {' '.join(words)}\n")
    (d / "e.txt").write_text("".join(lines))
    e = d / "e.bin"
    fasttext.train_supervised(str(d / "e.txt"), epoch=10, dim=8, bucket=5000, thread=1, seed=1,
                              verbose=0).save_model(str(e))
    return str(q), str(e)


def _corpus(path, docs):
    with open(path, "w") as fh:
        for i, (_, t) in enumerate(docs):
            fh.write(json.dumps({"id": f"d{i}", "text": t}) + "\n")


def _corpus_dir(tmp_path, docs):
    """tmp_path/in/c.jsonl with ``docs``; returns the directory (the filter's input)."""
    (tmp_path / "in").mkdir()
    _corpus(tmp_path / "in" / "c.jsonl", docs)
    return tmp_path / "in"


def test_pareto_retention_through_filter(tmp_path, models):
    q, _ = models
    docs = _docs(300, seed=5)
    corpus = _corpus_dir(tmp_path, docs) / "c.jsonl"
    out = tmp_path / "out"
    assert main(["filter", str(corpus.parent), "-o", str(out), "--classifier", f"quality={q}:pareto=9",
                 "--classifier-label", "quality=hq", "--device", "cpu", "-q", "--audit", "2", "--seed", "4"]) == 0
    rows = pq.read_table(out / "scores.parquet").to_pylist()
    ref = fasttext.load_model(q)
    for i, (r, (_, text)) in enumerate(zip(rows, docs)):
        labels, probs = ref.predict(text, k=-1)
        s = dict(zip(labels, probs))["__label__hq"]
        assert r["quality_score"] == pytest.approx(s, abs=1e-5)
        # the draw is the one documented: keep when u < (2 - s) ** -9, i.e. s > 1 - (u ** (-1/9) - 1)
        assert r["keep"] == (r["quality_draw"] < (2 - r["quality_score"]) ** -9)
        assert r["keep"] == (r["quality_score"] > 1 - (r["quality_draw"] ** (-1 / 9) - 1))
        assert r["reason"] == ("kept" if r["keep"] else "quality_score")
    assert 0 < sum(r["keep"] for r in rows) < len(rows)
    stats = json.loads((out / "run.json").read_text())
    sr = stats["stochastic_retention"]["quality_score"]
    assert [c["p_keep"] for c in sr["curve"]] == pytest.approx([(2 - c["score"]) ** -9 for c in sr["curve"]])
    assert sr["observed_retention"] == pytest.approx(np.mean([r["keep"] for r in rows]))
    assert sr["expected_retention"] == pytest.approx(np.mean([(2 - r["quality_score"]) ** -9 for r in rows]))
    assert stats["models"]["classifiers"][0]["retention"]["alpha"] == 9
    assert "Stochastic retention" in (out / "report.html").read_text()
    # deterministic: another batch size, the same decisions
    out2 = tmp_path / "out2"
    assert main(["filter", str(corpus.parent), "-o", str(out2), "--classifier", f"quality={q}:pareto=9",
                 "--classifier-label", "quality=hq", "--device", "cpu", "-q", "--audit", "0", "--seed", "4",
                 "--batch-mb", "0.002"]) == 0
    assert pq.read_table(out2 / "scores.parquet")["keep"].to_pylist() == [r["keep"] for r in rows]


def test_stochastic_bad_input(tmp_path, models, capsys):
    q, _ = models
    corpus = tmp_path / "c.jsonl"
    _corpus(corpus, _docs(3, seed=1))
    for value, needle in (("pareto=0", "alpha must be a finite number > 0"), ("pareto=-2", "> 0"),
                          ("pareto=", "is not a finite number"), ("sigmoid=0.5", "not a threshold")):
        assert main(["filter", str(corpus), "-o", str(tmp_path / "o"), "--classifier", f"q={q}:{value}",
                     "-q"]) == 1
        err = capsys.readouterr().err
        assert "--classifier" in err and needle in err, err


# ------------------------------------------------------------------------------------ expected (ordinal) score
def test_expected_score_equals_fasttext(tmp_path, models):
    q, e = models
    docs = _docs(80, seed=9)
    corpus = _corpus_dir(tmp_path, docs) / "c.jsonl"
    out = tmp_path / "out"
    assert main(["filter", str(corpus.parent), "-o", str(out), "--classifier", f"edu={e}:expected>=2.5",
                 "--device", "cpu", "-q", "--audit", "0"]) == 0
    ref = fasttext.load_model(e)
    rows = pq.read_table(out / "scores.parquet").to_pylist()
    for r, (_, text) in zip(rows, docs):
        labels, probs = ref.predict(text, k=-1)
        want = sum(int(lab[len("__label__"):]) * p for lab, p in zip(labels, probs))
        assert r["edu_score"] == pytest.approx(want, abs=1e-4)
        assert r["keep"] == (r["edu_score"] >= 2.5)
    assert 0 < sum(r["keep"] for r in rows) < len(rows)
    c = json.loads((out / "run.json").read_text())["models"]["classifiers"][0]
    assert c["score"].startswith("expected value sum k * p(k)") and c["keeps"] == "edu_score >= 2.5"
    # max direction and the record-only form
    spec = parse_classifier(f"edu={e}:expected<=1")
    assert (spec.score, spec.threshold, spec.direction) == ("expected", 1.0, "max")
    assert parse_classifier(f"edu={e}:expected").threshold is None
    # a model whose labels are not integers is refused by name
    assert main(["filter", str(corpus.parent), "-o", str(tmp_path / "o2"), "--classifier", f"hq={q}:expected",
                 "--device", "cpu", "-q"]) == 1
    with pytest.raises(ValueError, match="finite"):
        ClassifierSpec("edu", e, threshold=float("inf"), score="expected")


# ------------------------------------------------------------------------------------ order of the tests
def _reference_reason(row, order_cols, rules, threshold):
    """The first failing column in ``order_cols`` (brute force from the scores and the recorded rules)."""
    if row["reason"] == "empty":
        return "empty"
    for col in order_cols:
        v = row.get(col)
        if col == "quality_score":
            if not (v is not None and v >= threshold):
                return col
        elif col in rules:
            r = rules[col]
            if v is None or (r.get("min") is not None and v < r["min"]) or \
                    (r.get("max") is not None and v > r["max"]):
                return col
    return "kept"


def test_order_of_the_tests(tmp_path, models, capsys):
    q, _ = models
    corpus = tmp_path / "in" / "c.jsonl"
    corpus.parent.mkdir()
    docs = _docs(60, seed=11)
    # long documents pass gopher_word_count, short ones fail it; the classifier's 0.9 fails the "lq" half
    docs = [(lab, " ".join([t] * (6 if i % 3 else 1))) for i, (lab, t) in enumerate(docs)]
    _corpus(corpus, docs)
    reasons = {}
    for order in (None, "classifiers,lid,perplexity,rules"):
        out = tmp_path / f"out{order is None}"
        extra = ["--order", order] if order else []
        assert main(["filter", str(corpus.parent), "-o", str(out), "--classifier", f"quality={q}:0.9",
                     "--classifier-label", "quality=hq", "--rules", "gopher", "--device", "cpu", "-q",
                     "--audit", "0"] + extra) == 0
        stats = json.loads((out / "run.json").read_text())
        assert stats["order_families"] == (order.split(",") if order else ["lid", "rules", "perplexity",
                                                                            "classifiers"])
        rules = stats["models"]["rules"]
        cols = stats["order"][1:-1]
        assert (cols[0] == "quality_score") == bool(order) and cols[-1 if order else 0] != "quality_score"
        rows = pq.read_table(out / "scores.parquet").to_pylist()
        for r in rows:
            assert r["reason"] == _reference_reason(r, cols, rules, 0.9)
        reasons[order] = [r["reason"] for r in rows]
        assert stats["order"] == ["empty"] + cols + ["dsir_weight"]
    # the same documents are kept either way; documents failing both tests change their reason
    a, b = reasons[None], reasons["classifiers,lid,perplexity,rules"]
    assert [x == "kept" for x in a] == [x == "kept" for x in b]
    assert any(x.startswith("gopher_") and y == "quality_score" for x, y in zip(a, b))
    with pytest.raises(SystemExit):
        main(["filter", str(corpus.parent), "-o", str(tmp_path / "o"), "--rules", "gopher", "--order",
              "lid,rules,classifiers"])
    assert "must name each of lid,rules,perplexity,classifiers once" in capsys.readouterr().err
    with pytest.raises(ValueError, match="order must name each"):
        FilterConfig(rules="gopher", order=("lid", "lid", "rules", "perplexity"))


# ------------------------------------------------------------------------------------ percentile audit
def test_audit_at_the_33rd_50th_67th_percentiles(tmp_path, models, lm):
    q, _ = models
    corpus = tmp_path / "in" / "c.jsonl"
    corpus.parent.mkdir()
    _zipf_corpus(corpus, 90, seed=4, dup_every=4)
    out = tmp_path / "out"
    assert main(["filter", str(corpus.parent), "-o", str(out), "--perplexity", lm, "--classifier",
                 f"quality={q}:pareto=3", "--classifier-label", "quality=hq", "--rules", "gopher_quality",
                 "--device", "cpu", "-q", "--audit", "4"]) == 0
    scores = pq.read_table(out / "scores.parquet")
    pct = pq.read_table(out / "audit_percentiles.parquet").to_pylist()
    texts = [json.loads(x)["text"] for x in corpus.read_text().splitlines()]
    numeric = [c for c in scores.column_names if c not in ("id", "row", "keep", "reason", "quality_draw", "words",
                                                           "perplexity_words", "perplexity_short")]
    assert sorted({r["score"] for r in pct}) == sorted(numeric)
    for col in numeric:
        vals = scores[col].to_pylist()
        ranked = sorted((v, i) for i, v in enumerate(vals) if v is not None)
        got = {r["percentile"]: r for r in pct if r["score"] == col}
        assert sorted(got) == [33, 50, 67]
        for qq, r in got.items():
            v, i = ranked[math.floor(Fraction(qq, 100) * (len(ranked) - 1) + Fraction(1, 2))]
            assert (r["row"], r["value"], r["text"]) == (i, v, texts[i])
    assert pq.read_table(out / "audit.parquet").num_rows <= 8  # the random sample is unchanged
    html = (out / "report.html").read_text()
    assert "50th percentile" in html
    assert json.loads((out / "run.json").read_text())["audit"]["percentiles"]["rows"] == len(pct)


# ------------------------------------------------------------------------------------ one LM per language
def _lang_text(rng, vocab, n):
    p = 1.0 / np.arange(1, len(vocab) + 1)  # Zipf: Kneser-Ney needs singletons and repeats
    return " ".join(rng.choice(vocab, size=n, p=p / p.sum()).tolist())


def test_one_perplexity_model_per_language(tmp_path, capsys):
    """--perplexity en=EN,de=DE:keep=0.5 routes by the LID label; each document's perplexity equals the
    kenlm package's with its language's model; fr (no model) gets none and is not judged by it; the rank is
    per language (brute force)."""
    kenlm = pytest.importorskip("kenlm")
    rng = np.random.default_rng(5)
    vocab = {lang: ["".join(rng.choice(list(letters), size=rng.integers(3, 7))) for _ in range(300)]
             for lang, letters in (("en", "abcdefg"), ("de", "hijklmn"), ("fr", "opqrstu"))}
    (tmp_path / "lid.txt").write_text("".join(f"__label__{lang} {_lang_text(rng, v, 8)}\n"
                                              for _ in range(300) for lang, v in vocab.items()))
    lid = tmp_path / "lid.bin"
    fasttext.train_supervised(str(tmp_path / "lid.txt"), epoch=5, dim=8, minn=2, maxn=3, bucket=5000, thread=1,
                              seed=1, verbose=0).save_model(str(lid))
    arpa = {}
    for lang in ("en", "de"):
        ref = tmp_path / f"{lang}.jsonl"
        ref.write_text("".join(json.dumps({"text": _lang_text(rng, vocab[lang], 10)}) + "\n" for _ in range(400)))
        arpa[lang] = tmp_path / f"{lang}.arpa"
        assert main(["train-lm", str(ref), "-o", str(arpa[lang]), "--order", "2", "--device", "cpu", "-q"]) == 0
    corpus = tmp_path / "in" / "c.jsonl"
    corpus.parent.mkdir()
    langs = ["en", "de", "fr"] * 12
    texts = [_lang_text(rng, vocab[lang], int(rng.integers(4, 12))) for lang in langs]
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    out = tmp_path / "out"
    flag = f"en={arpa['en']},de={arpa['de']}:keep=0.5"
    assert main(["filter", str(corpus.parent), "-o", str(out), "--lid", str(lid), "--perplexity", flag,
                 "--perplexity-buckets", "0.33,0.67", "--min-perplexity-tokens", "0", "--device", "cpu", "-q",
                 "--audit", "0"]) == 0
    rows = pq.read_table(out / "scores.parquet").to_pylist()
    models = {lang: kenlm.Model(str(p)) for lang, p in arpa.items()}
    ppl = []
    for r, lang, t in zip(rows, langs, texts):
        assert r["lid_label"] == lang
        if lang == "fr":
            assert r["perplexity"] is None and r["perplexity_lang"] == "" and r["perplexity_bucket"] is None
            assert r["keep"] and r["reason"] == "kept"
            ppl.append(math.nan)
            continue
        lp = models[lang].score(t.lower(), bos=True, eos=True)
        assert r["perplexity_lang"] == lang
        assert r["perplexity"] == pytest.approx(10 ** (-lp / (len(t.split()) + 1)), rel=1e-3)
        ppl.append(r["perplexity"])
    for lang in ("en", "de"):
        sub = [p if lg == lang else math.nan for p, lg in zip(ppl, langs)]
        want, _ = _brute_rank(sub, 0.5)
        head, _ = _brute_rank(sub, 0.33)
        for i, r in enumerate(rows):
            if langs[i] == lang:
                assert r["keep"] == (i in want)
                assert (r["perplexity_bucket"] == "head") == (i in head)
    stats = json.loads((out / "run.json").read_text())
    assert stats["perplexity_by_language"] == {"en": 12, "de": 12, "(no model)": 12}
    assert set(stats["models"]["perplexity"]["models"]) == {"en", "de"}
    assert stats["perplexity_rank"]["by_language"]["en"]["kept"] == 6
    # a language the LID model does not know, a map without --lid: errors naming the flag and value
    assert main(["filter", str(corpus.parent), "-o", str(tmp_path / "o"), "--lid", str(lid), "--perplexity",
                 f"xx={arpa['en']}", "-q"]) == 1
    err = capsys.readouterr().err
    assert "--perplexity 'xx'" in err and "not a label of the LID model" in err, err
    assert main(["filter", str(corpus.parent), "-o", str(tmp_path / "o"), "--perplexity", f"en={arpa['en']}",
                 "-q"]) == 1
    assert "--lid" in capsys.readouterr().err
    assert main(["filter", str(corpus.parent), "-o", str(tmp_path / "o"), "--lid", str(lid), "--perplexity",
                 f"en={arpa['en']},de", "-q"]) == 1
    assert "is not LANG=MODEL" in capsys.readouterr().err


# ------------------------------------------------------------------------------------ selections rank survivors
def _words(text):
    """Runs of characters other than ASCII whitespace."""
    import re

    return len(re.findall(r"[^ \t\n\v\f\r]+", text))


def test_rank_selection_ranks_the_documents_the_rules_kept(tmp_path, lm):
    """Issue 37 item 2 (002:52, 002:57: language ID, rules, then perplexity): with a URL rule that rejects the
    lower-perplexity half of 20 documents, keep=0.5 ranks the 10 the rule kept and keeps 5 of them (a brute-force
    rank of the survivors); with perplexity first it ranks all 20 and the rule then removes every one it kept.
    run.json says what was ranked, and the words retained after each stage equal a count of the texts."""
    rng = np.random.default_rng(7)
    vocab, p = _zipf_vocab()
    texts = [" ".join(rng.choice(vocab, size=60 + i, p=p)) for i in range(20)]
    corpus = tmp_path / "in" / "c.jsonl"
    corpus.parent.mkdir()

    def write(urls):
        corpus.write_text("".join(json.dumps({"id": f"d{i}", "text": t, "url": u}) + "\n"
                                  for i, (t, u) in enumerate(zip(texts, urls))))

    write([f"https://site{i}.example/page" for i in range(20)])
    base = ["filter", str(corpus.parent), "--device", "cpu", "-q", "--audit", "0"]
    assert main(base + ["-o", str(tmp_path / "p"), "--perplexity", lm]) == 0
    ppl = pq.read_table(tmp_path / "p" / "scores.parquet")["perplexity"].to_pylist()
    low = sorted(range(20), key=lambda i: (ppl[i], i))[:10]
    (tmp_path / "block.txt").write_text("".join(f"site{i}.example\n" for i in low))
    rule = ["--rules", "url", "--url-field", "url", "--url-blocklist", str(tmp_path / "block.txt"),
            "--perplexity", f"{lm}:keep=0.5"]
    assert main(base + ["-o", str(tmp_path / "seed")] + rule) == 0
    rows = pq.read_table(tmp_path / "seed" / "scores.parquet").to_pylist()
    survivors = [math.nan if i in low else ppl[i] for i in range(20)]
    want, _ = _brute_rank(survivors, 0.5)
    assert len(want) == 5 and sum(r["keep"] for r in rows) == 5
    for i, r in enumerate(rows):
        assert r["keep"] == (i in want)
        assert r["reason"] == ("url_blocked" if i in low else "kept" if i in want else "perplexity")
        assert r["perplexity_ranked"] == (i not in low)
    stats = json.loads((tmp_path / "seed" / "run.json").read_text())
    sel = stats["selections"]
    assert sel["order"] == ["empty", "lid", "rules", "perplexity", "classifiers", "dsir"]
    assert sel["perplexity"]["ranked"] == 10 and "empty, lid, rules" in sel["perplexity"]["ranked_from"]
    assert stats["perplexity_rank"]["ranked"] == 10 and stats["perplexity_rank"]["kept"] == 5
    # the retained words after each stage, from the texts
    words = [_words(t) for t in texts]
    rt = stats["retained_tokens"]
    assert rt["input"] == {"documents": 20, "words": sum(words)}
    after = {x["stage"]: x for x in rt["after_each_stage"]}
    assert after["empty"]["words"] == after["lid"]["words"] == sum(words)
    assert after["rules"]["words"] == sum(w for i, w in enumerate(words) if i not in low)
    assert after["rules"]["words_removed"] == sum(words[i] for i in low)
    assert after["perplexity"]["words"] == after["dsir"]["words"] == sum(words[i] for i in want)
    assert rt["kept"]["words_kept"] == sum(words[i] for i in want) and rt["kept"]["documents_kept"] == 5
    assert [r["words"] for r in rows] == words
    html = (tmp_path / "seed" / "report.html").read_text()
    assert "Retained words per stage" in html and "ranked 10" in html
    # perplexity before the rules: the rank runs over all 20, keeps the 10 lowest, which the rule removes
    assert main(base + ["-o", str(tmp_path / "first"), "--order", "perplexity,lid,rules,classifiers"] + rule) == 0
    rows = pq.read_table(tmp_path / "first" / "scores.parquet").to_pylist()
    assert sum(r["keep"] for r in rows) == 0
    assert json.loads((tmp_path / "first" / "run.json").read_text())["selections"]["perplexity"]["ranked"] == 20


def test_short_documents_get_no_perplexity_verdict(tmp_path, lm):
    """Issue 37 item 1 (002:53 "Set a minimum token threshold (50-100 tokens is typical) before applying the
    perplexity filter"): a 5-word junk document is kept, flagged perplexity_short, at --unit document and at
    --unit paragraph (score and remove); with --min-perplexity-tokens 0 it is rejected as before."""
    rng = np.random.default_rng(3)
    vocab, p = _zipf_vocab()
    good = [" ".join(rng.choice(vocab, size=70, p=p)) for _ in range(6)]
    junk = "zzqx qxzz xqzq zqqx xxzq"
    corpus = tmp_path / "in" / "c.jsonl"
    corpus.parent.mkdir()
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(good + [junk])))
    base = ["filter", str(corpus.parent), "--device", "cpu", "-q", "--audit", "0", "--perplexity"]
    ppl = None
    for extra in ([], ["--unit", "paragraph"], ["--unit", "paragraph", "--paragraph-action", "remove"]):
        out = tmp_path / f"o{len(extra)}"
        # the junk's perplexity is far above the others': a maximum between them removes it when it is judged
        if ppl is None:
            assert main(base + [lm, "-o", str(tmp_path / "probe")]) == 0
            ppl = pq.read_table(tmp_path / "probe" / "scores.parquet")["perplexity"].to_pylist()
            assert ppl[-1] > 2 * max(ppl[:-1])
        cut = f"{lm}:{(ppl[-1] + max(ppl[:-1])) / 2}"
        assert main(base + [cut, "-o", str(out)] + extra) == 0
        rows = pq.read_table(out / "scores.parquet").to_pylist()
        assert all(r["keep"] for r in rows), extra
        assert [r["perplexity_short"] for r in rows] == [False] * 6 + [True], extra
        assert rows[-1]["perplexity_words"] == 5
        assert main(base + [cut, "-o", str(out), "--overwrite", "--min-perplexity-tokens", "0"] + extra) == 0
        rows = pq.read_table(out / "scores.parquet").to_pylist()
        assert [r["reason"] for r in rows] == ["kept"] * 6 + ["perplexity"], extra
