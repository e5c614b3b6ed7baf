"""DSIR importance resampling (gpu_dedup/filters/dsir.py, kernels/features*.py): hashed n-gram features against a
brute-force Python implementation (the `xxhash` package), CPU == GPU (simulator), log weights against NumPy,
Gumbel-top-k determinism and distribution, and selection on a two-topic corpus."""
import itertools
import math
import string
import unicodedata
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
import xxhash

from gpu_dedup.config import NormalizeConfig
from gpu_dedup.runtime.device import gpu_status, simulator, to_host
from gpu_dedup.filters import dsir
from gpu_dedup.filters.dsir import BagModel, DSIRConfig
from gpu_dedup.testing.unicode_reference import normalize_reference, reference_matches_tables

SEED = int(dsir.DSIR_SEED)
TEXTS = ["The quick brown fox jumps over the lazy dog again and again",
         "Hello, World!  hello---world... HELLO\tworld\n\nnew paragraph",
         "", "   ", "!!! ... ???", "one", "two words",
         "Straße café naïve 日本語 テキスト ﬁne ① — with    spaces\tand\nlines",
         "ΣΊΣΥΦΟΣ σοφός и русский текст тоже здесь есть", "emoji 👩\u200d💻 zero\u200bwidth soft\u00adhyphen",
         "x " * 40, "a_b c-d e'f g.h 3.14 1,000 $5 #tag @user"]


def ascii_words(text: str) -> list[str]:
    """The tokenization on ASCII text, independent of the package: lowercase, ASCII punctuation/symbols and
    control characters -> space, split on whitespace."""
    out = []
    for c in text.lower():
        out.append(" " if c in string.punctuation or unicodedata.category(c) == "Cc" else c)
    return "".join(out).split()


def ref_words(text: str) -> list[str]:
    norm = normalize_reference(text, NormalizeConfig(remove_punctuation=True))
    return norm.split(" ") if norm else []


def ref_ids(words: list[str], n: int, buckets: int) -> list[int]:
    """Brute force, in the kernel's documented order: for each word j, the m-grams ending at it, m = 1..n."""
    out = []
    for j in range(len(words)):
        for m in range(1, min(n, j + 1) + 1):
            out.append(xxhash.xxh64_intdigest(" ".join(words[j - m + 1:j + 1]).encode("utf-8"), seed=SEED) % buckets)
    return out


def random_texts(rng, n_docs, words=("alpha", "Beta", "gamma!", "délta", "日本", "z", "the", "of,", "x.y")):
    return [" ".join(rng.choice(list(words), rng.integers(0, 30))) for _ in range(n_docs)]


def _csr(cfg, texts, device="cpu"):
    base, ids = dsir.feature_ids(texts, cfg, device)
    base, ids = to_host(base), to_host(ids)
    return [ids[base[i]:base[i + 1]].tolist() for i in range(len(texts))]


@pytest.mark.parametrize("ngrams,buckets", [(1, 10_000), (2, 10_000), (3, 97), (8, 1)])
def test_features_equal_brute_force_ascii(ngrams, buckets):
    rng = np.random.default_rng(0)
    texts = [t for t in TEXTS if t.isascii()] + random_texts(rng, 30, ("Alpha", "b.c", "D-e", "f", "the", "OF,"))
    cfg = DSIRConfig(buckets=buckets, ngrams=ngrams)
    got = _csr(cfg, texts)
    for t, g in zip(texts, got):
        assert g == ref_ids(ascii_words(t), ngrams, buckets), t


@pytest.mark.skipif(not reference_matches_tables(), reason="Python's Unicode version differs from the tables'")
def test_features_equal_brute_force_unicode():
    rng = np.random.default_rng(1)
    texts = TEXTS + random_texts(rng, 30)
    cfg = DSIRConfig()
    for t, g in zip(texts, _csr(cfg, texts)):
        assert g == ref_ids(ref_words(t), 2, cfg.buckets), t


def test_feature_csr_counts_and_fit_counts_accumulate():
    rng = np.random.default_rng(2)
    texts = random_texts(rng, 60)
    cfg = DSIRConfig(buckets=500)
    csr = dsir.feature_csr(texts, cfg)
    total = Counter()
    for i, t in enumerate(texts):
        want = Counter(ref_ids(ref_words(t), 2, 500))
        sl = slice(csr.offsets[i], csr.offsets[i + 1])
        assert dict(zip(csr.ids[sl].tolist(), csr.counts[sl].tolist())) == want
        total += want
    whole = dsir.fit_counts(texts, cfg)
    assert whole.dtype == np.int64 and whole.shape == (500,)
    assert whole.tolist() == [total.get(b, 0) for b in range(500)]
    batched = dsir.fit_counts(texts[:17], cfg) + dsir.fit_counts(texts[17:], cfg)
    assert np.array_equal(batched, whole)
    assert dsir.fit_counts([], cfg).sum() == 0 and dsir.fit_counts(["", "  "], cfg).sum() == 0


def test_inputs_arrow_and_chunked_equal_lists():
    cfg = DSIRConfig()
    ref = dsir.fit_counts(TEXTS, cfg)
    assert np.array_equal(dsir.fit_counts(pa.array(TEXTS, pa.string()), cfg), ref)
    assert np.array_equal(dsir.fit_counts(pa.chunked_array([TEXTS[:3], TEXTS[3:]]), cfg), ref)
    with pytest.raises(TypeError, match="texts\\[1\\]"):
        dsir.fit_counts(["a", 3], cfg)
    with pytest.raises(TypeError, match="one string"):
        dsir.fit_counts("just one", cfg)


def _models(cfg, target_texts, raw_texts):
    return (BagModel.from_counts(dsir.fit_counts(target_texts, cfg), cfg.alpha),
            BagModel.from_counts(dsir.fit_counts(raw_texts, cfg), cfg.alpha))


def test_log_weights_equal_numpy_reference_and_empty_documents_get_minus_inf():
    rng = np.random.default_rng(3)
    texts = TEXTS + random_texts(rng, 40)
    cfg = DSIRConfig(buckets=300, alpha=0.5)
    target, raw = _models(cfg, random_texts(rng, 20, ("alpha", "beta", "the")), texts)
    got = dsir.log_weights(texts, target, raw, cfg)
    logdiff = np.log(target.probs) - np.log(raw.probs)
    for i, t in enumerate(texts):
        ids = ref_ids(ref_words(t), 2, 300)
        if not ids:
            assert got[i] == -np.inf, t
        else:
            want = float(np.bincount(ids, minlength=300) @ logdiff)
            assert math.isclose(got[i], want, rel_tol=1e-12, abs_tol=1e-12), (t, got[i], want)
    # min_words moves the -inf line; a document with enough words keeps its weight
    strict = dsir.log_weights(texts, target, raw, DSIRConfig(buckets=300, alpha=0.5, min_words=3))
    nwords = np.array([len(ref_words(t)) for t in texts])
    assert np.all(strict[nwords < 3] == -np.inf) and np.array_equal(strict[nwords >= 3], got[nwords >= 3])
    with pytest.raises(ValueError, match="buckets"):
        dsir.log_weights(texts, target, raw, DSIRConfig(buckets=301))


@pytest.mark.skipif(not simulator() and not gpu_status()[0], reason="needs the CUDA simulator or a GPU")
def test_gpu_kernels_equal_cpu():
    rng = np.random.default_rng(4)
    texts = TEXTS + random_texts(rng, 10)
    for cfg in (DSIRConfig(buckets=1000), DSIRConfig(buckets=7, ngrams=3)):
        assert _csr(cfg, texts, "cuda") == _csr(cfg, texts, "cpu")
        assert np.array_equal(dsir.fit_counts(texts, cfg, "cuda"), dsir.fit_counts(texts, cfg, "cpu"))
        target, raw = _models(cfg, texts[:5], texts)
        c = dsir.log_weights(texts, target, raw, cfg, "cpu")
        g = dsir.log_weights(texts, target, raw, cfg, "cuda")
        assert np.array_equal(c, g)  # bit-identical: same source, same summation order


@pytest.mark.skipif(not simulator() and not gpu_status()[0], reason="needs the CUDA simulator or a GPU")
@pytest.mark.parametrize("chunk", [1, 3, 7])
def test_gpu_features_bit_identical_at_every_chunk_boundary(chunk):
    """The GPU cuts documents into chunks of ``chunk`` words (and 4 KB of text for the word starts): one long
    document (> 4 KB, several byte chunks) among short ones gives the CPU's ids and the same float64 bits."""
    rng = np.random.default_rng(5)
    long_doc = " ".join(rng.choice(["alpha", "Beta", "délta", "日本語", "of,", "x.y", "zz"], 1200))
    texts = TEXTS[:4] + [long_doc] + random_texts(rng, 6)
    assert len(long_doc.encode()) > 4096
    cfg = DSIRConfig(buckets=500, ngrams=3)
    base, ids = (to_host(a) for a in dsir.feature_ids(texts, cfg, "cuda", chunk=chunk))
    assert [ids[base[i]:base[i + 1]].tolist() for i in range(len(texts))] == _csr(cfg, texts, "cpu")
    target, raw = _models(cfg, texts[5:], texts)
    c = dsir.log_weights(texts, target, raw, cfg, "cpu")
    g = dsir.log_weights(texts, target, raw, cfg, "cuda", chunk=chunk)
    assert np.array_equal(c.view(np.uint64), g.view(np.uint64))


# ------------------------------------------------------------------------------------------- resampling
def test_gumbel_topk_is_deterministic_and_orders_ties_by_index():
    w = np.random.default_rng(5).normal(size=1000)
    a = dsir.gumbel_topk(w, 100, seed=7)
    assert np.array_equal(a, dsir.gumbel_topk(w, 100, seed=7)) and a.dtype == np.int64
    assert len(set(a.tolist())) == 100
    assert not np.array_equal(a, dsir.gumbel_topk(w, 100, seed=8))
    keys = w + np.random.default_rng(7).gumbel(size=1000)
    assert np.all(np.diff(keys[a]) <= 0) and keys[a].min() >= np.sort(keys)[-100]
    tie = np.array([np.inf, 0.0, np.inf, np.inf, -np.inf])
    assert dsir.gumbel_topk(tie, 2, seed=0).tolist() == [0, 2]
    # -inf documents are never selected, even when k asks for more
    assert sorted(dsir.gumbel_topk(tie, 5, seed=0).tolist()) == [0, 1, 2, 3]
    assert dsir.gumbel_topk(tie, 0, seed=0).shape == (0,)
    with pytest.raises(ValueError, match="NaN at index 1"):
        dsir.gumbel_topk([0.0, np.nan], 1, seed=0)
    with pytest.raises(ValueError, match="k must be"):
        dsir.gumbel_topk([0.0], True, seed=0)


def test_gumbel_top1_frequencies_follow_softmax():
    """P(i is top-1) = softmax(log w)_i. 20,000 fixed seeds; each frequency within 5 binomial standard
    deviations (a false failure has probability < 1e-5 per item)."""
    log_w = np.log(np.array([1.0, 2.0, 3.0, 4.0, 10.0]))
    trials = 20_000
    wins = np.bincount([dsir.gumbel_topk(log_w, 1, seed=s)[0] for s in range(trials)], minlength=5)
    p = np.exp(log_w) / np.exp(log_w).sum()
    sigma = np.sqrt(p * (1 - p) / trials)
    assert np.all(np.abs(wins / trials - p) <= 5 * sigma), (wins / trials, p)


def test_gumbel_top2_inclusion_matches_sampling_without_replacement():
    """P(i among the top 2) equals the exact probability under sequential sampling without replacement
    proportional to w (enumerated); 10,000 seeds, 5 sigma."""
    w = np.array([1.0, 1.0, 2.0, 6.0])
    exact = np.zeros(4)
    for a, b in itertools.permutations(range(4), 2):
        pr = w[a] / w.sum() * w[b] / (w.sum() - w[a])
        exact[a] += pr
        exact[b] += pr
    trials = 10_000
    hits = np.zeros(4)
    for s in range(trials):
        hits[dsir.gumbel_topk(np.log(w), 2, seed=s)] += 1
    sigma = np.sqrt(exact * (1 - exact) / trials)
    assert np.all(np.abs(hits / trials - exact) <= 5 * sigma), (hits / trials, exact)


def test_select_count():
    assert dsir.select_count(100, 10) == 10 and dsir.select_count(5, 10) == 5
    assert dsir.select_count(100, 0.25) == 25 and dsir.select_count(10, 1.0) == 10
    assert dsir.select_count(3, 0.5) == 2 and dsir.select_count(0, 0.5) == 0  # halves round up
    for bad in (0, -1, 0.0, 1.5, float("nan"), True, "10"):
        with pytest.raises(ValueError):
            dsir.select_count(10, bad)


@pytest.mark.parametrize("field,value,match", [
    ("buckets", 0, "buckets"), ("buckets", 2**31, "buckets"), ("buckets", True, "buckets"),
    ("ngrams", 0, "ngrams"), ("ngrams", 9, "ngrams"), ("alpha", 0.0, "alpha"), ("alpha", float("inf"), "alpha"),
    ("seed", -1, "seed"), ("select", 0, "count must be >= 1"), ("select", 1.5, "fraction must be"),
    ("select", float("nan"), "select"), ("min_words", -1, "min_words"), ("remove_punctuation", 1, "bool")])
def test_config_validation(field, value, match):
    with pytest.raises(ValueError, match=match):
        DSIRConfig(**{field: value})


def test_kl_divergence_and_bag_model():
    p = np.array([0.5, 0.5, 0.0])
    assert dsir.kl_divergence(p, p) == 0.0
    assert math.isclose(dsir.kl_divergence([0.5, 0.5], [0.25, 0.75]),
                        0.5 * math.log(2) + 0.5 * math.log(0.5 / 0.75), rel_tol=1e-12)
    assert dsir.kl_divergence([1, 1], [1, 0]) == math.inf
    with pytest.raises(ValueError):
        dsir.kl_divergence([1, 0], [1, 0, 0])
    m = BagModel.from_counts(np.array([3, 0, 1]), alpha=1.0)
    assert np.allclose(m.probs, [4 / 7, 1 / 7, 2 / 7]) and m.buckets == 3
    with pytest.raises(ValueError, match="non-negative"):
        BagModel.from_counts([1, -1], 1.0)
    with pytest.raises(ValueError, match="alpha"):
        BagModel.from_counts([1, 1], 0.0)


def test_bag_model_save_load(tmp_path):
    m = BagModel.from_counts(np.arange(10), 0.5)
    m.save(tmp_path / "m.npz")
    assert np.array_equal(BagModel.load(tmp_path / "m.npz").probs, m.probs)
    np.savez(tmp_path / "other.npz", probs=m.probs)
    with pytest.raises(ValueError, match="not a BagModel"):
        BagModel.load(tmp_path / "other.npz")


# ---------------------------------------------------------------------------------- end to end selection
SHARED = [f"common{i}" for i in range(40)]
TOPIC_A = [f"protein{i}" for i in range(60)]
TOPIC_B = [f"match{i}" for i in range(60)]


def topic_docs(rng, topic_words, n):
    docs = []
    for _ in range(n):
        k = int(rng.integers(30, 80))
        w = np.where(rng.random(k) < 0.5, rng.choice(SHARED, k), rng.choice(topic_words, k))
        docs.append(" ".join(w))
    return docs


def test_selection_raises_target_topic_share_and_lowers_kl():
    rng = np.random.default_rng(6)
    raw = topic_docs(rng, TOPIC_A, 120) + topic_docs(rng, TOPIC_B, 280) + ["", " "]
    is_a = np.array([True] * 120 + [False] * 282)
    target = topic_docs(np.random.default_rng(60), TOPIC_A, 100)
    cfg = DSIRConfig(select=0.3, seed=11)
    t_counts, r_counts = dsir.fit_counts(target, cfg), dsir.fit_counts(raw, cfg)
    t_model, r_model = BagModel.from_counts(t_counts, cfg.alpha), BagModel.from_counts(r_counts, cfg.alpha)
    log_w = dsir.log_weights(raw, t_model, r_model, cfg)
    k = dsir.select_count(len(raw), cfg.select)
    sel = dsir.gumbel_topk(log_w, k, cfg.seed)
    assert len(sel) == k == 121 and not np.isinf(log_w[sel]).any()
    share = is_a[sel].mean()
    assert is_a.mean() < 0.3 and share >= 0.9, share  # raw share 0.30 -> at least 0.90
    report = dsir.dsir_report(t_counts, r_counts, dsir.fit_counts([raw[i] for i in sel], cfg), log_w, cfg,
                              selected=sel, bins=10)
    assert report["kl_target_selected"] < 0.5 * report["kl_target_raw"], report
    assert report["kl_reduction"] > 0 and report["documents"] == 402 and report["documents_without_features"] == 2
    hist = report["weight_histogram"]
    assert sum(hist["counts"]) == 400 and len(hist["edges"]) == 11 and sum(hist["selected_counts"]) == 121


def test_dsir_target_screened_against_benchmarks(tmp_path, capsys):
    """--dsir-screen BENCHMARK (issue 25, 000 §5: the DSIR target is fitted to, so benchmark text stays out of it):
    a target document sharing a 13-gram with an item refuses the run (naming the flag, document and item); with
    --dsir-screen-drop it is left out, and the weights equal those of a run on the target without it."""
    import json

    import pyarrow.parquet as pq

    from gpu_dedup.cli import main

    rng = np.random.default_rng(5)
    words = "river mountain forest valley lake snow trail summit market price stock trade".split()
    item = ("which of the following best describes the role of mitochondria in a eukaryotic cell during aerobic "
            "respiration")
    target = [" ".join(rng.choice(words, size=40)) for _ in range(12)]
    leaked = target[:5] + ["so " + item + " indeed"] + target[5:]
    for name, docs in (("clean.jsonl", target), ("leaked.jsonl", leaked)):
        (tmp_path / name).write_text("".join(json.dumps({"text": t}) + "\n" for t in docs))
    bench = tmp_path / "bench.jsonl"
    bench.write_text(json.dumps({"id": "q7", "question": item}) + "\n")
    corpus = tmp_path / "in" / "c.jsonl"
    corpus.parent.mkdir()
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "text": " ".join(rng.choice(words, size=30))}) + "\n"
                              for i in range(20)))
    base = ["filter", str(corpus.parent), "--select", "0.5", "--device", "cpu", "-q", "--audit", "0"]
    assert main(base + ["-o", str(tmp_path / "o1"), "--dsir-target", str(tmp_path / "leaked.jsonl"),
                        "--dsir-screen", str(bench)]) == 1
    err = capsys.readouterr().err
    assert "--dsir-screen: 1 of 13 DSIR target documents share a 13-gram" in err and "item q7" in err
    assert "leaked.jsonl row 5" in err and "--dsir-screen-drop" in err
    assert main(base + ["-o", str(tmp_path / "o2"), "--dsir-target", str(tmp_path / "leaked.jsonl"),
                        "--dsir-screen", str(bench), "--dsir-screen-drop"]) == 0
    assert main(base + ["-o", str(tmp_path / "o3"), "--dsir-target", str(tmp_path / "clean.jsonl")]) == 0
    w2 = pq.read_table(tmp_path / "o2" / "scores.parquet").column("dsir_weight").to_pylist()
    w3 = pq.read_table(tmp_path / "o3" / "scores.parquet").column("dsir_weight").to_pylist()
    assert w2 == w3
    rep = json.loads((tmp_path / "o2" / "run.json").read_text())["dsir"]
    assert rep["target_documents"] == 12 and rep["target_screen"]["documents_dropped"] == 1
    assert rep["target_screen"]["flagged"][0]["item_id"] == "q7"
    assert main(base + ["-o", str(tmp_path / "o4"), "--dsir-target", str(tmp_path / "clean.jsonl"),
                        "--dsir-screen", str(tmp_path / "nope.jsonl")]) == 1
    err = capsys.readouterr().err
    assert "--dsir-screen: benchmark file" in err and "nope.jsonl" in err and "cannot be read" in err
