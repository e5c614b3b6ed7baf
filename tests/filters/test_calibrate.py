"""gpu-dedup calibrate: any fastText classifier scored on a labelled sample, its card, and filter applying it.

References: the fasttext package's own predict(k=-1) for the scores; plain-Python closed forms and brute force
for the reliability table, ECE, Brier, precision / recall per threshold, the F1-optimal threshold, the false
rejection per group and its alarm, the thresholds per domain."""
import json
import logging

import numpy as np
import pyarrow.parquet as pq
import pytest

from gpu_dedup.cli import main
from gpu_dedup.filters.calibrate import CalibrateConfig, calibrate

fasttext = pytest.importorskip("fasttext", reason="the fasttext package is the reference")

GOOD = "theorem proof lemma analysis measure integral function space operator bounded".split()
BAD = "click buy cheap free offer deal discount casino bonus prize".split()


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    d = tmp_path_factory.mktemp("model")
    rng = np.random.default_rng(1)
    lines = []
    for i in range(1500):
        own, other = (GOOD, BAD) if i % 2 else (BAD, GOOD)
        words = rng.choice(own, size=rng.integers(6, 14)).tolist() + rng.choice(other, size=2).tolist()
        lines.append(f"__label__{'hq' if i % 2 else 'lq'} {' '.join(rng.permutation(words))}\n")
    (d / "t.txt").write_text("".join(lines))
    path = d / "harm.bin"
    fasttext.train_supervised(str(d / "t.txt"), epoch=5, lr=0.1, dim=8, bucket=5000, thread=1, seed=1,
                              verbose=0).save_model(str(path))
    return str(path)


def _sample(path, n=400, seed=2):
    """Labelled documents: a mixture of good and bad words, labelled lq (the harm) when bad words dominate
    (10% of the labels flipped); dialect B's negatives carry 6 more bad words (the classifier over-flags them);
    four domains."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        g, b = int(rng.integers(1, 10)), int(rng.integers(1, 10))
        harm = (b > g) != (rng.random() < 0.1)
        dialect = "B" if i % 8 == 0 else "A"
        if dialect == "B" and not harm:
            b += 6
        words = rng.choice(GOOD, size=g).tolist() + rng.choice(BAD, size=b).tolist()
        rows.append({"text": " ".join(rng.permutation(words)), "label": "lq" if harm else "hq",
                     "dialect": dialect, "domain": ["medical", "legal", "fiction", "news"][i % 4 // 1 % 4]})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def _ref(model, rows, label="__label__lq"):
    m = fasttext.load_model(model)
    return np.array([dict(zip(*m.predict(r["text"], k=-1))).get(label, 0.0) for r in rows], np.float64)


def _brute_f1_threshold(p, y, direction):
    """The F1-optimal cut among the midpoints of consecutive distinct scores (and half the lowest), ties to the
    higher threshold; predicted positive: p >= t (min) or p > t (max); from Python lists."""
    u = sorted(set(p.tolist()), reverse=True)
    cands = [(a + b) / 2 for a, b in zip(u, u[1:])] + [u[-1] / 2]
    best = None
    for t in cands:
        pred = [(x >= t) if direction == "min" else (x > t) for x in p.tolist()]
        tp = sum(1 for a, b in zip(pred, y.tolist()) if a and b)
        f1 = 2 * tp / (sum(pred) + sum(y.tolist()))
        if best is None or f1 > best[0]:
            best = (f1, t)
    return best


def test_calibration_card_equals_brute_force(model, tmp_path, caplog):
    rows = _sample(tmp_path / "s.jsonl")
    with caplog.at_level(logging.WARNING):
        card = calibrate(model, [str(tmp_path / "s.jsonl")], tmp_path / "card.json",
                         CalibrateConfig(label="lq", direction="max", group_fields=("dialect",),
                                         domain_field="domain", device="cpu"))
    p = _ref(model, rows)
    y = np.array([r["label"] == "lq" for r in rows])
    assert card["positive_label"] == "lq" and card["positive_value"] == "lq" and card["direction"] == "max"
    assert card["sample"] == {**card["sample"], "documents": 400, "unscored": 0, "positives": int(y.sum())}
    # reliability table, ECE and Brier: closed forms over the package's probabilities
    bins = [min(int(x * 10), 9) for x in p.tolist()]
    ece = 0.0
    for k in range(10):
        idx = [i for i, b in enumerate(bins) if b == k]
        row = card["calibration"]["bins"][k]
        assert row["documents"] == len(idx)
        if idx:
            mean, frac = sum(p[i] for i in idx) / len(idx), sum(y[i] for i in idx) / len(idx)
            assert row["mean_score"] == pytest.approx(mean, abs=1e-5) and row["fraction_positive"] == frac
            ece += len(idx) / len(p) * abs(frac - mean)
    assert card["calibration"]["ece"] == pytest.approx(ece, abs=1e-5)
    assert card["calibration"]["brier"] == pytest.approx(sum((a - b) ** 2 for a, b in zip(p, y)) / len(p), abs=1e-5)
    # the chosen threshold is the F1 optimum; precision / recall per threshold
    f1, t = _brute_f1_threshold(p, y, "max")
    assert card["threshold"] == pytest.approx(t, abs=1e-5)
    assert card["metrics"]["at_threshold"]["f1"] == pytest.approx(f1, abs=1e-9)
    for r in card["retention_table"]:
        pred = p > r["threshold"]
        tp = int((pred & y).sum())
        assert r["kept"] == int((~pred).sum())
        assert r["precision"] == (pytest.approx(tp / pred.sum()) if pred.sum() else None)
        assert r["recall"] == pytest.approx(tp / y.sum())
    # false rejection per dialect (negatives removed: the false-positive rate of the harm label), the alarm
    t = card["threshold"]
    fpr = {d: sum(1 for r, x in zip(rows, p) if r["dialect"] == d and r["label"] == "hq" and x > t)
           / sum(1 for r in rows if r["dialect"] == d and r["label"] == "hq") for d in "AB"}
    base = sum(1 for r, x in zip(rows, p) if r["label"] == "hq" and x > t) / sum(1 for r in rows if r["label"] == "hq")
    audit = card["audit"]["dialect"]
    for d in "AB":
        assert audit["values"][d]["false_rejection"] == pytest.approx(fpr[d])
        assert audit["values"][d]["rate_ratio"] == pytest.approx(fpr[d] / base)
    assert fpr["B"] >= 3 * base > 0 and audit["flagged"] == ["B"]
    assert card["alarms"] == [{"column": "dialect", "value": "B", "false_rejection": pytest.approx(fpr["B"]),
                               "baseline": pytest.approx(base), "rate_ratio": pytest.approx(fpr["B"] / base)}]
    assert "ALARM: dialect='B'" in caplog.text
    # the threshold per domain: each domain's own F1 optimum
    for dom in ("medical", "legal", "fiction", "news"):
        sel = np.array([r["domain"] == dom for r in rows])
        assert card["thresholds_by"]["domain"][dom] == pytest.approx(_brute_f1_threshold(p[sel], y[sel], "max")[1],
                                                                     abs=1e-5)


def test_filter_applies_the_calibration_card(model, tmp_path):
    """The card written beside the model gives filter its threshold, direction and label; --domain-field applies
    its thresholds per domain; --classifier-card reads a card written elsewhere (-o)."""
    _sample(tmp_path / "s.jsonl")
    assert main(["calibrate", model, str(tmp_path / "s.jsonl"), "--label", "lq", "--direction", "max",
                 "--domain-field", "domain", "--device", "cpu", "-q", "-o", str(tmp_path / "card.json")]) == 0
    card = json.loads((tmp_path / "card.json").read_text())
    corpus = tmp_path / "in" / "c.jsonl"
    corpus.parent.mkdir()
    test_rows = _sample(corpus, n=80, seed=9)
    p = _ref(model, test_rows)
    out = tmp_path / "out"
    assert main(["filter", str(corpus.parent), "-o", str(out), "--classifier", f"harm={model}", "--classifier-card",
                 f"harm={tmp_path / 'card.json'}", "--domain-field", "domain", "--device", "cpu", "-q",
                 "--audit", "0"]) == 0
    got = pq.read_table(out / "scores.parquet").to_pylist()
    by = card["thresholds_by"]["domain"]
    for r, x, row in zip(got, p, test_rows):
        t = by.get(row["domain"]) if by.get(row["domain"]) is not None else card["threshold"]
        assert r["harm_score"] == pytest.approx(x, abs=1e-5)
        assert r["keep"] == (r["harm_score"] <= t)
    c = json.loads((out / "run.json").read_text())["models"]["classifiers"][0]
    assert (c["threshold"], c["direction"], c["threshold_from"], c["label"]) == \
        (card["threshold"], "max", "card", "__label__lq")
    assert {d: x["from"] for d, x in c["thresholds_by_domain"].items()} == {d: "card" for d, t in by.items() if t}
    # without -o the card goes beside the model, where filter finds it with no more flags
    import shutil

    model = str(shutil.copy(model, tmp_path / "harm.bin"))
    assert main(["calibrate", model, str(tmp_path / "s.jsonl"), "--label", "lq", "--direction", "max", "-q",
                 "--device", "cpu"]) == 0
    assert json.loads((tmp_path / "harm.bin.json").read_text())["threshold"] == card["threshold"]
    assert main(["filter", str(corpus.parent), "-o", str(tmp_path / "o2"), "--classifier", f"harm={model}",
                 "--device", "cpu", "-q", "--audit", "0"]) == 0
    got2 = pq.read_table(tmp_path / "o2" / "scores.parquet").to_pylist()
    assert [r["keep"] for r in got2] == [r["harm_score"] <= card["threshold"] for r in got2]


def test_calibrate_errors(model, tmp_path, capsys):
    rows = _sample(tmp_path / "s.jsonl", n=40)
    (tmp_path / "one.jsonl").write_text("".join(json.dumps({**r, "label": "hq"}) + "\n" for r in rows))
    cases = [([str(tmp_path / "one.jsonl"), "--label", "lq"], "all negative"),
             ([str(tmp_path / "s.jsonl"), "--label", "nope"], "'nope' is not one of the labels"),
             ([str(tmp_path / "s.jsonl"), "--label", "lq", "--group-field", "dialekt"], "did you mean 'dialect'"),
             ([str(tmp_path / "s.jsonl"), "--label", "lq", "--threshold-rule", "precision"], "--threshold-target is the target")]
    for extra, needle in cases:
        assert main(["calibrate", model, "-o", str(tmp_path / "c.json"), "-q"] + extra) == 1, extra
        err = capsys.readouterr().err
        assert needle in err, (extra, err)
    assert main(["calibrate", model, str(tmp_path / "s.jsonl"), "--label", "lq", "-o", str(tmp_path / "c.json"),
                 "-q"]) == 0
    assert main(["calibrate", model, str(tmp_path / "s.jsonl"), "--label", "lq", "-o", str(tmp_path / "c.json"),
                 "-q"]) == 1
    assert "--overwrite" in capsys.readouterr().err
    (tmp_path / "cards").mkdir()  # a directory is not replaced by the card, with --overwrite or without
    assert main(["calibrate", model, str(tmp_path / "s.jsonl"), "--label", "lq", "-o", str(tmp_path / "cards"),
                 "-q", "--overwrite"]) == 1
    err = capsys.readouterr().err
    assert "--output" in err and "is a directory: name the card file" in err and "Errno" not in err
    with pytest.raises(ValueError, match="audit_ratio"):
        CalibrateConfig(audit_ratio=1.0)
