"""filters/scorers.py (the one scoring step of filter and dedup's pass 1) and filters/prefilter.ScoreStep.

Fake models (NeMo Curator's FakeQualityFilter style) run Scorers -> stage.decide_filter -> stage.scores_table without
the fasttext package: their scores are a plain function of each text's bytes, so the reference is Python
arithmetic. The device test uses a real model (trained by the fasttext package) under the simulator and the
strict device arrays: the batch text goes to the device once for every fastText model, with the same scores
as on the CPU.
"""
import dataclasses
import json

import numpy as np
import pyarrow as pa
import pytest

from gpu_dedup.runtime import device as dev
from gpu_dedup.filters.config import ClassifierSpec, FilterConfig
from gpu_dedup.filters.scorers import Classifier, Scorers, paragraphs, text_buffers
from gpu_dedup.filters.stage import decide_filter, scores_table

LABELS = ["__label__hq", "__label__lq"]


def _fake_prob(b: bytes) -> float:
    """The fake classifier's P(hq): the fraction of bytes among 'a'..'m' (NaN: no byte, as fastText's
    "no feature")."""
    return sum(97 <= c <= 109 for c in b) / len(b) if b else float("nan")


class FakeModel:
    """Stands in for filters.fasttext.FastTextModel: the *_arrays calls the scorers make, on host or device
    buffers (``seen`` records where they were)."""

    def __init__(self, labels=LABELS):
        self.labels = list(labels)
        self.seen: list[str] = []

    def _docs(self, data, offsets) -> list[bytes]:
        self.seen.append(dev.module_of(data).__name__)
        d, o = dev.to_host(data), dev.to_host(offsets)
        return [bytes(d[o[i]:o[i + 1]]) for i in range(len(o) - 1)]

    def label_prob_arrays(self, data, offsets, label, device="cpu"):
        p = np.array([_fake_prob(b) for b in self._docs(data, offsets)], np.float64)
        return p if label == self.labels[0] else 1.0 - p

    def predict_arrays(self, data, offsets, k=1, threshold=0.0, device="cpu"):
        """LID: label 0 ("en") when the text starts with 'e', else label 1; probability _fake_prob (ties
        impossible, k=1 only)."""
        docs = self._docs(data, offsets)
        idx = np.array([[-1 if not b else (0 if b[:1] == b"e" else 1)] for b in docs], np.int32).reshape(-1, 1)
        prob = np.array([[np.nan if not b else _fake_prob(b)] for b in docs], np.float64).reshape(-1, 1)
        return idx, prob

    def describe(self):
        return {"path": "fake", "labels": self.labels}


def _scorers(tmp_path, unit="document", threshold=0.5, lid=False, lang=()):
    model = tmp_path / "fake.bin"
    model.write_bytes(b"not read: the fake model stands in for it")
    spec = ClassifierSpec("quality", str(model), threshold)
    cfg = FilterConfig(classifiers=(spec,), unit=unit, device="cpu", audit=0, lang=lang,
                       lid=str(model) if lid else None)
    s = Scorers(cfg, "cpu", classifiers=[Classifier(spec, FakeModel(), LABELS[0], threshold, "min", "flag")])
    if lid:
        s.lid = FakeModel(["__label__en", "__label__fr"])
    return cfg, s


TEXTS = ["abc abc abc", "xyz xyz", "", "   \n ", "ebb and flow\n\nzzz zzz zzz zzz", "mixed ABC def"]


def test_fake_classifier_scores_decisions_and_table(tmp_path):
    """Scorers.columns -> decide_filter -> scores_table with a fake model: the score of every document is the
    fake's function of its bytes, kept iff >= the threshold, blank documents are ``empty`` (null score)."""
    cfg, s = _scorers(tmp_path)
    text = pa.array(TEXTS, pa.large_string())
    cols = s.columns(text, pa.array([f"d{i}" for i in range(len(TEXTS))]), 10)
    assert cols["row"].tolist() == list(range(10, 10 + len(TEXTS)))
    want = [_fake_prob(t.encode()) for t in TEXTS]
    np.testing.assert_array_equal(cols["quality_score"], want)  # NaN == NaN here
    cols["keep"], cols["reason"] = decide_filter(cols, cfg, s)
    blank = [not t.strip() for t in TEXTS]
    for i, w in enumerate(want):
        expect = "empty" if blank[i] else ("kept" if w >= 0.5 else "quality_score")
        assert cols["reason"][i].as_py() == expect, (i, TEXTS[i], w)  # int8 codes over the reasons
        assert cols["keep"][i] == (expect == "kept")
    t = scores_table(cols)
    assert t.column_names[:2] == ["id", "row"] and t.column_names[-2:] == ["keep", "reason"]
    got = t["quality_score"].to_pylist()
    assert got[2] is None  # NaN (no byte) is written as null
    assert got[0] == pytest.approx(want[0]) and got[1] == 0.0


def test_fake_paragraph_unit_is_the_byte_weighted_mean(tmp_path):
    _, s = _scorers(tmp_path, unit="paragraph")
    text = pa.array(TEXTS, pa.large_string())
    got = s.score(text)["quality_score"]
    for i, t in enumerate(TEXTS):
        paras = [p for p in t.replace(" \n", "\n").split("\n\n") if p.strip()]
        if not paras:
            assert np.isnan(got[i])
            continue
        w = np.array([len(p.encode()) for p in paras], float)
        assert got[i] == pytest.approx(np.dot(w, [_fake_prob(p.encode()) for p in paras]) / w.sum())
    assert len(paragraphs(text)[1]) == 5  # abc, xyz, ebb, zzz, mixed: the blank documents have none


def test_fake_lid_routes_and_decides(tmp_path):
    """A fake LID model: lid_label / lid_prob from predict_arrays, --lang en rejects the others first."""
    cfg, s = _scorers(tmp_path, threshold=0.0, lid=True, lang=("en",))
    text = pa.array(TEXTS, pa.large_string())
    cols = s.columns(text, pa.array([f"d{i}" for i in range(len(TEXTS))]), 0)
    assert cols["lid_label"].tolist() == ["fr", "fr", "", "fr", "en", "fr"]
    np.testing.assert_array_equal(cols["lid_prob"], [_fake_prob(t.encode()) for t in TEXTS])
    cols["keep"], cols["reason"] = decide_filter(cols, cfg, s)
    # blank first, then the language, then its probability (0.24 of "ebb and flow ..." < lid_threshold)
    assert cfg.lid_threshold > 0.24
    assert cols["reason"].tolist() == ["lid_label", "lid_label", "empty", "empty", "lid_prob", "lid_label"]
    assert not cols["keep"].any()
    cfg2 = dataclasses.replace(cfg, lid_threshold=0.2)
    assert decide_filter(cols, cfg2, s)[0].tolist() == [False, False, False, False, True, False]


def test_score_step_for_scores_supplies_the_keep_column_only(tmp_path):
    """--score NAME=MODEL is ScoreStep.for_scores: the classifier's column as the keep values, no verdict;
    a prefilter's step also returns filter_pass (the filter's keep) and collects scores.parquet."""
    from types import SimpleNamespace

    from gpu_dedup.filters.prefilter import ScoreStep

    cfg, s = _scorers(tmp_path)
    step = ScoreStep(cfg, "cpu", decides=False, keep_column="quality_score", scorers=s)
    assert step.supplies == ("keep_values",) and not step.every_batch
    assert ScoreStep(cfg, "cpu", keep_column="nothing", scorers=s).supplies == ("filter_pass",)
    text = pa.array(TEXTS, pa.large_string())
    data, offsets = text_buffers(text, "cpu")
    b = SimpleNamespace(row=3, batch=SimpleNamespace(text=text, ids=pa.array([str(i) for i in range(6)])),
                        data=data, offsets=offsets, norm=None)
    out = step(b)
    assert set(out) == {"keep_values"} and not step.parts
    np.testing.assert_array_equal(out["keep_values"], [_fake_prob(t.encode()) for t in TEXTS])
    step = ScoreStep(cfg, "cpu", keep_column="quality_score", scorers=s)  # a prefilter: decides
    assert step.supplies == ("keep_values", "filter_pass") and step.every_batch
    out = step(b)
    np.testing.assert_array_equal(out["keep_values"], [_fake_prob(t.encode()) for t in TEXTS])
    want = [bool(t.strip()) and _fake_prob(t.encode()) >= 0.5 for t in TEXTS]
    assert want == [True, False, False, False, False, True]
    assert out["filter_pass"].dtype == bool and out["filter_pass"].tolist() == want
    assert list(step.parts) == [3] and step.parts[3]["reason"].tolist()[1] == "quality_score"
    assert step.provides == {"quality_score"}


@pytest.fixture(scope="module")
def real_model(tmp_path_factory):
    fasttext = pytest.importorskip("fasttext", reason="the fasttext package trains the real model")
    d = tmp_path_factory.mktemp("smodel")
    rng = np.random.default_rng(3)
    good, bad = "river forest lake summit trail".split(), "buy cheap click offer free".split()
    with open(d / "train.txt", "w") as fh:
        for i in range(400):
            words = rng.choice(good if i % 2 else bad, size=12)
            fh.write(f"__label__{'hq' if i % 2 else 'lq'} {' '.join(words)}\n")
    m = fasttext.train_supervised(str(d / "train.txt"), epoch=5, dim=8, minn=2, maxn=3, bucket=5000, thread=1,
                                  seed=1, verbose=0)
    m.save_model(str(d / "q.bin"))
    return str(d / "q.bin")


@pytest.mark.skipif(not dev.simulator() and not dev.gpu_status()[0], reason="needs the CUDA simulator or a GPU")
def test_batch_text_goes_to_the_device_once_for_every_model(real_model, monkeypatch):
    """The domain rules, LID and two classifiers on device="cuda" (simulator + strict arrays): the batch's
    UTF-8 bytes are copied to the device once (not once per model: four before), pass 1's device copy is
    used as it is (no copy), and every column equals the CPU's bit for bit."""
    from gpu_dedup.filters.config import DomainConfig

    cfg = FilterConfig(lid=real_model, classifiers=(ClassifierSpec("a", real_model, label="hq"),
                                                    ClassifierSpec("b", real_model, label="lq")),
                       domain=DomainConfig(script_prefilter=True), device="cpu", audit=0)
    text = pa.array(["river forest lake", "buy cheap click now", "", "summit trail offer"], pa.large_string())
    ids = pa.array(["w", "x", "y", "z"])
    host_data = text_buffers(text, "cpu")[0]
    ref = Scorers.load(cfg, "cpu").columns(text, ids, 0)
    gpu = Scorers.load(cfg, "cuda")
    gpu.columns(text, ids, 0)  # the models' own arrays go to the device on first use, not counted below
    copies = []
    to_device = dev.to_device

    def counting(x, device):
        if isinstance(x, np.ndarray) and x.dtype == np.uint8 and np.shares_memory(x, host_data):
            copies.append(x.nbytes)
        return to_device(x, device)

    monkeypatch.setattr(dev, "to_device", counting)
    monkeypatch.setattr("gpu_dedup.filters.domain.to_device", counting)
    got = gpu.columns(text, ids, 0)
    assert len(copies) == 1, copies
    assert {"lid_label", "lid_prob", "a_score", "b_score", "domain", "script_frac"} <= set(got)
    assert set(got) == set(ref)
    for k in ref:
        np.testing.assert_array_equal(np.asarray(got[k]), np.asarray(ref[k]), err_msg=k)
    buffers = text_buffers(text, "cuda")  # pass 1 hands over the copy it made for normalization
    copies.clear()
    got = gpu.columns(text, ids, 0, buffers=buffers)
    assert copies == []
    for k in ref:
        np.testing.assert_array_equal(np.asarray(got[k]), np.asarray(ref[k]), err_msg=k)


def test_run_score_and_prefilter_share_the_step(tmp_path, real_model):
    """`run --score` and `run --classifier` go through the same ScoreStep: --score's keep values are the
    prefilter's score column, and the prefilter with a threshold of 0 keeps everything, so both runs decide
    the same (one exact-duplicate group per text, its best-scored copy kept)."""
    from gpu_dedup.cli import main
    import pyarrow.parquet as pq

    texts = ["river forest lake summit", "buy cheap click offer"]
    rows = [{"id": f"g{g}v{v}", "text": t if v == 0 else (t.upper() if v == 1 else t.title())}
            for g, t in enumerate(texts) for v in range(3)]
    corpus = tmp_path / "in" / "c.jsonl"
    corpus.parent.mkdir()
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["run", str(corpus.parent), "-o", str(a), "--score", f"q={real_model}", "--keep", "max:q_score",
                 "--exact-only", "--device", "cpu", "-q"]) == 0
    assert main(["run", str(corpus.parent), "-o", str(b), "--classifier", f"q={real_model}:0",
                 "--classifier-label", "q=hq", "--keep", "max:q_score", "--exact-only", "--device", "cpu",
                 "-q"]) == 0
    da, db = (pq.read_table(p / "decisions.parquet") for p in (a, b))
    assert da.equals(db)
    assert not (a / "scores.parquet").exists() and (b / "scores.parquet").exists()
    s = pq.read_table(b / "scores.parquet").to_pydict()
    kept = set(da.filter(da["keep"])["id"].to_pylist())
    for g in range(len(texts)):
        members = [i for i, r in enumerate(rows) if r["id"].startswith(f"g{g}v")]
        best = max(members, key=lambda i: s["q_score"][i])
        assert rows[best]["id"] in kept and sum(rows[i]["id"] in kept for i in members) == 1
    ta, tb = (json.loads((p / "run.json").read_text())["timings_s"] for p in (a, b))
    assert "score" in ta and "score" in tb


@pytest.mark.skipif(not (dev.simulator() and dev.strict_device()), reason="needs the simulator + strict arrays")
def test_pass1_scoring_on_the_device_reads_pass1s_copy(real_model, tmp_path, monkeypatch):
    """Dedup's pass 1 on device="cuda" (simulator + strict arrays) with --score and a prefilter (domain
    rules + a classifier): the score steps read the device copy pass 1 made for normalization (the scorers
    make none of their own: text_buffers is never called), and decisions.parquet / scores.parquet equal the
    CPU run's."""
    import gpu_dedup
    import pyarrow.parquet as pq
    from gpu_dedup import RunConfig
    from gpu_dedup.filters import scorers as sc
    from gpu_dedup.filters.config import DomainConfig

    rng = np.random.default_rng(5)
    words = "river forest lake summit trail buy cheap click offer free".split()
    texts = [" ".join(rng.choice(words, size=int(rng.integers(6, 14)))) for _ in range(10)]
    texts += [t.upper() for t in texts[:4]]  # exact duplicates after case folding, scored differently
    table = pa.table({"id": [f"d{i}" for i in range(len(texts))], "text": texts})
    pre = FilterConfig(classifiers=(ClassifierSpec("q", real_model, 0.3, label="hq"),),
                       domain=DomainConfig(script_prefilter=True), device="cpu", audit=0, write_filtered=False)
    small = dict(progress=False, minhash__num_perm=32, lsh__bands=8, lsh__rows=4)
    outs = {}
    for device in ("cpu", "cuda"):
        calls = []
        real = sc.text_buffers
        monkeypatch.setattr(sc, "text_buffers", lambda *a, **k: calls.append(1) or real(*a, **k))
        for name, cfg, kw in (("score", RunConfig.preset("default", scores=(f"hq={real_model}",),
                                                         cluster__keep="max:hq_score", device=device, **small), {}),
                              ("pre", RunConfig.preset("default", cluster__keep="max:q_score", device=device,
                                                       **small), {"prefilter": pre})):
            out = tmp_path / f"{name}-{device}"
            gpu_dedup.deduplicate(table, cfg, out, **kw)
            outs[name, device] = out
        assert calls == [], device
        monkeypatch.undo()
    for name in ("score", "pre"):
        a, b = outs[name, "cpu"], outs[name, "cuda"]
        assert pq.read_table(a / "decisions.parquet").equals(pq.read_table(b / "decisions.parquet")), name
    assert pq.read_table(outs["pre", "cpu"] / "scores.parquet").equals(
        pq.read_table(outs["pre", "cuda"] / "scores.parquet"))
    d = pq.read_table(outs["score", "cpu"] / "decisions.parquet")
    assert 0 < d.num_rows - int(np.sum(d["keep"].to_numpy(zero_copy_only=False))) < d.num_rows


def test_a_domain_threshold_for_a_domain_the_domain_model_lacks_is_refused(tmp_path, capsys):
    """--domain-threshold NAME:DOMAIN=T with --domain-model: DOMAIN must be one of the model's labels (it was
    accepted and applied to no document, silently)."""
    fasttext = pytest.importorskip("fasttext")
    from gpu_dedup.cli import main

    (tmp_path / "dom.txt").write_text("".join(f"__label__{lab} {w} {w} words\n" for _ in range(20)
                                              for lab, w in (("medical", "patient"), ("legal", "court"))))
    dom = tmp_path / "dom.bin"
    fasttext.train_supervised(str(tmp_path / "dom.txt"), epoch=2, dim=4, bucket=100, thread=1, seed=1,
                              verbose=0).save_model(str(dom))
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "a", "text": "patient words"}) + "\n")
    base = ["filter", str(corpus), "-q", "--classifier", f"c={dom}:0.5", "--classifier-label", "c=__label__medical",
            "--domain-model", str(dom), "--device", "cpu"]
    assert main([*base, "-o", str(tmp_path / "o1"), "--domain-threshold", "c:fiction=0.2"]) == 1
    err = capsys.readouterr().err
    assert "--domain-threshold c:fiction: 'fiction' is not a label of --domain-model" in err
    assert "its domains: medical, legal" in err or "its domains: legal, medical" in err
    assert main([*base, "-o", str(tmp_path / "o2"), "--domain-threshold", "c:legal=0.2"]) == 0
