"""train-classifier: labelled input, group-disjoint split, fastText training, validation metrics and the card.

Golden values come from the fasttext package itself (its own predict on the shipped model) and from brute-force
recomputation in this file (the split rule, confusion matrix, retention table, threshold optima)."""
from __future__ import annotations

import gzip
import hashlib
import importlib.metadata
import json
import logging
import os
import random
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

fasttext = pytest.importorskip("fasttext")

from gpu_dedup._version import __version__  # noqa: E402
from gpu_dedup.filters import train as train_mod  # noqa: E402
from gpu_dedup.filters.labelled import LabelledInputError  # noqa: E402
from gpu_dedup.filters.train import (  # noqa: E402
    TrainClassifierConfig,
    TrainDependencyError,
    TrainingError,
    choose_threshold,
    format_summary,
    read_card,
    split_groups,
    train_classifier,
)

VOCAB = {lab: [f"{lab}{i}" for i in range(40)] for lab in ("hq", "cc", "zz")}
NOISE = [f"n{i}" for i in range(60)]
# Tiny model: a few hundred documents train in well under a second.
CFG = dict(dim=8, epoch=20, lr=0.5, bucket=5000, validation_fraction=0.2)


def make_rows(seed: int = 1, groups: int = 60, per_group: int = 5, labels=("cc", "hq")) -> list[dict]:
    """Documents whose words come 35% from their label's vocabulary, 15% from another label's and 50% from
    shared noise (so scores spread over (0, 1)); every group ("site<g>.com") holds one label; the first document
    of each group has a line break."""
    r = random.Random(seed)
    rows = []
    for g in range(groups):
        lab = labels[g % len(labels)]
        other = [x for x in labels if x != lab]
        for j in range(per_group):
            words = []
            for _ in range(r.randint(8, 20)):
                x = r.random()
                pool = VOCAB[lab] if x < 0.35 else VOCAB[r.choice(other)] if x < 0.5 else NOISE
                words.append(r.choice(pool))
            text = " ".join(words) + ("\nsecond line" if j == 0 else "")
            rows.append({"text": text, "label": lab, "group": f"site{g}.com"})
    return rows


def write_jsonl(path, rows, compress=False) -> str:
    data = "".join(json.dumps(x) + "\n" for x in rows).encode()
    with open(path, "wb") as fh:
        fh.write(gzip.compress(data) if compress else data)
    return str(path)


def reference_sides(groups: list[str], fraction: float, seed: int, test_fraction: float = 0.1,
                    strata: list[str] | None = None) -> dict[str, str]:
    """The documented split rule, re-derived here: BLAKE2b-64 of "<seed>\\0<group>" (little-endian) orders the
    groups; the test side, then the validation side, takes a group while the side stays within round(fraction *
    n) documents (per stratum, a group's stratum being its most frequent value, ties: the smallest); if none
    fits, the smallest group left. Group -> "train" / "validation" / "test"."""
    sizes: dict[str, int] = {}
    for g in groups:
        sizes[g] = sizes.get(g, 0) + 1
    key = {g: int.from_bytes(hashlib.blake2b(f"{seed}\0{g}".encode(), digest_size=8).digest(), "little")
           for g in sizes}
    order = sorted(sizes, key=lambda g: (key[g], g))
    votes: dict[str, dict[str, int]] = {}
    for i, g in enumerate(groups):
        v = strata[i] if strata is not None else ""
        votes.setdefault(g, {})
        votes[g][v] = votes[g].get(v, 0) + 1
    stratum = {g: sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[0][0] for g, c in votes.items()}
    docs: dict[str, int] = {}
    for g, n in sizes.items():
        docs[stratum[g]] = docs.get(stratum[g], 0) + n
    side: dict[str, str] = {}
    for name, frac in (("test", test_fraction), ("validation", fraction)):
        if not frac:
            continue
        target = {k: round(frac * n) for k, n in docs.items()}
        if strata is None:
            target[""] = max(1, target[""])
        held = {k: 0 for k in docs}
        before = len(side)
        for g in order:
            if g not in side and held[stratum[g]] + sizes[g] <= target[stratum[g]]:
                side[g] = name
                held[stratum[g]] += sizes[g]
        if len(side) == before:
            left = [g for g in order if g not in side]
            side[min(left, key=lambda g: (sizes[g], left.index(g)))] = name
    return {g: side.get(g, "train") for g in sizes}


def validation_groups(groups: list[str], fraction: float, seed: int, test_fraction: float = 0.1) -> set[str]:
    """The validation groups of ``reference_sides``."""
    return {g for g, s in reference_sides(groups, fraction, seed, test_fraction).items() if s == "validation"}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    d = tmp_path_factory.mktemp("trained")
    rows = make_rows()
    src = write_jsonl(d / "data.jsonl.gz", rows, compress=True)
    cfg = TrainClassifierConfig(**CFG)
    card = train_classifier([src], str(d / "model.bin"), cfg)
    return rows, src, d / "model.bin", card, cfg


def test_split_is_group_disjoint_deterministic_and_independent_of_python_hash():
    groups = [f"g{i % 37}" for i in range(400)]
    a = split_groups(groups, 0.1, seed=7)
    assert np.array_equal(a, split_groups(groups, 0.1, seed=7))
    assert not np.array_equal(a, split_groups(groups, 0.1, seed=8))
    val = {g for g, v in zip(groups, a) if v}
    train = {g for g, v in zip(groups, a) if not v}
    assert val and train and not val & train
    assert val == validation_groups(groups, 0.1, 7, test_fraction=0)
    assert 1 <= a.sum() <= round(0.1 * len(groups))
    # Another interpreter with another string-hash salt makes the same split.
    code = ("import json,sys; from gpu_dedup.filters.train import split_groups; "
            "g=[f'g{i % 37}' for i in range(400)]; print(json.dumps(split_groups(g, 0.1, 7).tolist()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONHASHSEED": "12345"})
    assert json.loads(out.stdout) == a.tolist()


def test_split_falls_back_to_the_smallest_group_when_none_fits():
    groups = ["big"] * 30 + ["mid"] * 20 + ["small"] * 10
    mask = split_groups(groups, 0.1, seed=0)  # target 6 documents: no group fits
    assert {g for g, v in zip(groups, mask) if v} == {"small"}


def test_card_metrics_match_fasttext_predictions(trained):
    rows, src, model_path, card, cfg = trained
    model = fasttext.load_model(str(model_path))
    groups = [r["group"] for r in rows]
    sides = reference_sides(groups, cfg.validation_fraction, cfg.seed, cfg.test_fraction)
    val = {g for g, x in sides.items() if x == "validation"}
    vrows = [r for r in rows if r["group"] in val]
    trows = [r for r in rows if sides[r["group"]] == "train"]
    erows = [r for r in rows if sides[r["group"]] == "test"]
    sp = card["split"]
    assert sp["validation"]["documents"] == len(vrows) and sp["train"]["documents"] == len(trows)
    assert sp["test"]["documents"] == len(erows) == round(0.1 * len(rows)) and card["test"]["documents"] == len(erows)
    assert sp["validation"]["groups"] == len(val) and sp["train"]["groups"] == len(set(groups)) - len(val) - \
        len({r["group"] for r in erows})
    for side, rs in (("train", trows), ("validation", vrows), ("test", erows)):
        assert sp[side]["per_label"] == {lab: sum(r["label"] == lab for r in rs) for lab in ("cc", "hq")}
    labels = card["labels"]
    assert labels == ["cc", "hq"] and card["positive_label"] == "hq"
    cm = [[0, 0], [0, 0]]
    scores, truth = [], []
    for r in vrows:
        text = r["text"].replace("\n", " ")
        top, _ = model.predict(text, k=1)
        cm[labels.index(r["label"])][labels.index(top[0][len("__label__"):])] += 1
        labs, probs = model.predict(text, k=-1)
        scores.append(float(dict(zip(labs, probs)).get("__label__hq", 0.0)))
        truth.append(r["label"] == "hq")
    assert card["confusion_matrix"]["matrix"] == cm
    assert card["metrics"]["accuracy"] == pytest.approx((cm[0][0] + cm[1][1]) / len(vrows), abs=1e-12)
    tp, fp, fn = cm[1][1], cm[0][1], cm[1][0]
    assert card["metrics"]["per_label"]["hq"]["precision"] == pytest.approx(tp / (tp + fp), abs=1e-12)
    assert card["metrics"]["per_label"]["hq"]["recall"] == pytest.approx(tp / (tp + fn), abs=1e-12)
    assert card["metrics"]["accuracy"] > 0.6  # distinct vocabularies: the model learned something
    s, y = np.array(scores), np.array(truth)
    assert len(np.unique(s)) > 10  # scores spread: the threshold choice is not trivial
    for row in card["retention_table"]:
        keep = s >= row["threshold"]
        assert row["kept"] == keep.sum()
        assert row["retention"] == pytest.approx(keep.mean(), abs=1e-12)
        assert row["recall"] == pytest.approx((keep & y).sum() / y.sum(), abs=1e-12)
        if keep.any():
            assert row["precision"] == pytest.approx((keep & y).sum() / keep.sum(), abs=1e-12)
    grid = [r["threshold"] for r in card["retention_table"]]
    assert {round(0.05 * i, 2) for i in range(1, 20)} | {card["threshold"]} == set(grid)
    # Rule f1: no threshold on the validation scores does better (brute force over every keep set).
    best = max(2 * (y & (s >= t)).sum() / ((s >= t).sum() + y.sum()) for t in np.unique(s))
    assert card["metrics"]["at_threshold"]["f1"] == pytest.approx(best, abs=1e-12)
    assert card["threshold"] not in set(s.tolist())  # a midpoint, never a validation score


def test_card_contents(trained):
    rows, src, model_path, card, cfg = trained
    assert card["format"] == "gpu_dedup-classifier-card" and card["format_version"] == 2
    assert read_card(model_path) == card
    assert os.path.exists(str(model_path) + ".json")
    assert card["model"]["bytes"] == os.path.getsize(model_path)
    assert card["model"]["sha256"] == hashlib.sha256(model_path.read_bytes()).hexdigest()
    assert card["model"]["quantized"] is False
    assert card["direction"] == "min" and card["threshold_rule"]["rule"] == "f1"
    assert card["threshold_rule"]["positive_label"] == "hq" and 0 < card["threshold"] < 1
    assert card["inputs"] == [{"path": src, "fmt": "jsonl", "bytes": os.path.getsize(src),
                               "sha256": hashlib.sha256(open(src, "rb").read()).hexdigest(),
                               "documents": len(rows)}]
    assert card["preprocessing"]["documents_with_newlines"] == sum("\n" in r["text"] for r in rows)
    assert "replaced by spaces" in card["preprocessing"]["newlines"]
    tr = card["training"]
    assert tr["deterministic"] is True and tr["hyperparameters"]["thread"] == 1
    assert tr["effective_args"]["dim"] == 8 and tr["effective_args"]["bucket"] == 5000
    assert tr["effective_args"]["wordNgrams"] == 2 and tr["effective_args"]["loss"] == "softmax"
    owners = {d.metadata["Name"]: d.version for d in importlib.metadata.distributions()
              if any(str(f) == "fasttext/__init__.py" for f in d.files or ())}
    import numba
    import pyarrow

    # run.versions: the software every run record names, then the distributions providing fasttext
    assert owners and card["versions"] == {"python": ".".join(map(str, sys.version_info[:3])),
                                           "numpy": np.__version__, "numba": numba.__version__,
                                           "pyarrow": pyarrow.__version__, **owners}
    assert card["gpu_dedup_version"] == __version__
    assert card["split"]["groups_from"] == "field 'group'" and card["split"]["seed"] == 0
    assert card["config"]["validation_fraction"] == 0.2 and card["created"].endswith("+00:00")
    text = format_summary(card)
    m = card["confusion_matrix"]["matrix"]
    assert f"{card['threshold']:.6g}" in text and "confusion matrix" in text
    assert f"  {'cc':<8} {m[0][0]:>8} {m[0][1]:>8}\n" in text and "retention" in text


def test_same_seed_same_model_and_metrics(trained, tmp_path):
    rows, src, model_path, card, cfg = trained
    again = train_classifier([src], str(tmp_path / "again.bin"), cfg)
    assert again["model"]["sha256"] == card["model"]["sha256"]  # bit-identical model file
    for key in ("metrics", "confusion_matrix", "retention_table", "threshold", "split"):
        assert again[key] == card[key]
    a, b = fasttext.load_model(str(model_path)), fasttext.load_model(str(tmp_path / "again.bin"))
    texts = [r["text"].replace("\n", " ") for r in rows[:50]]
    pa_, pb = a.predict(texts, k=-1), b.predict(texts, k=-1)
    assert pa_[0] == pb[0] and all(np.array_equal(x, y) for x, y in zip(pa_[1], pb[1]))


def _brute(p, y, rule, target):
    """Every keep set 'score >= s' for s a distinct score, by brute force: the (threshold set, met) the rule wants."""
    sets = []
    for s in sorted(set(p), reverse=True):
        keep = [q >= s for q in p]
        kept, tp = sum(keep), sum(k and t for k, t in zip(keep, y))
        sets.append((s, kept / len(p), tp / kept, 2 * tp / (kept + sum(y))))
    if rule == "f1":
        return max(sets, key=lambda x: x[3])[0]
    if rule == "precision":
        ok = [x for x in sets if x[2] >= target]
        return max(ok, key=lambda x: x[1])[0] if ok else max(sets, key=lambda x: x[2])[0]
    return min((x for x in sets if x[1] >= target), key=lambda x: x[1])[0]


@pytest.mark.parametrize("rule,target,expected,met", [
    ("f1", None, 0.25, True),  # keep the top 6 of 7: F1 = 2*4/(6+4) = 0.8 (top 4: 0.75)
    ("precision", 0.75, 0.5, True),  # top 4: precision 3/4, the most kept at >= 0.75
    ("precision", 1.0, 0.75, True),  # top 2
    ("retention", 0.5, 0.5, True),  # 4 of 7 >= 0.5
    ("retention", 1.0, 0.1, True),  # keep all: half the lowest score
    ("retention", 0.1, 0.85, True),  # the top document alone
])
def test_threshold_rules(rule, target, expected, met):
    p = np.array([0.9, 0.8, 0.7, 0.6, 0.4, 0.3, 0.2])
    y = np.array([1, 1, 0, 1, 0, 1, 0], dtype=bool)
    t, ok = choose_threshold(p, y, rule, target)
    assert t == pytest.approx(expected, abs=1e-12) and ok is met
    lowest_kept = p[p >= t].min()
    assert lowest_kept == _brute(p.tolist(), y.tolist(), rule, target)


def test_threshold_rules_with_ties_and_unreachable_precision():
    p = np.array([0.5, 0.5, 0.5, 0.2])
    y = np.array([False, True, False, True])
    t, ok = choose_threshold(p, y, "retention", 0.25)
    assert t == pytest.approx(0.35) and ok  # the tied scores are kept or dropped together
    t, ok = choose_threshold(p, y, "precision", 0.9)
    assert not ok and t == pytest.approx(0.1)  # no keep set reaches 0.9: the highest precision (keep all, 0.5)
    r = random.Random(3)
    for _ in range(50):  # random cases against the brute force
        n = r.randint(2, 30)
        p = np.round(np.array([r.random() for _ in range(n)]), 1)
        y = np.array([r.random() < 0.5 for _ in range(n)])
        y[0] = True
        for rule, target in (("f1", None), ("precision", 0.7), ("retention", 0.3)):
            t, _ = choose_threshold(p, y, rule, target)
            assert p[p >= t].min() == _brute(p.tolist(), y.tolist(), rule, target)


def test_precision_and_retention_rules_end_to_end(trained, tmp_path):
    rows, src, *_ = trained
    card = train_classifier([src], str(tmp_path / "r.bin"),
                            TrainClassifierConfig(**CFG, threshold_rule="retention", threshold_target=0.3))
    at = card["metrics"]["at_threshold"]
    assert at["retention"] >= 0.3 and card["threshold_rule"]["target"] == 0.3
    higher = [r for r in card["retention_table"] if r["threshold"] > card["threshold"]]
    assert all(r["retention"] <= at["retention"] for r in higher)
    card = train_classifier([src], str(tmp_path / "p.bin"),
                            TrainClassifierConfig(**CFG, threshold_rule="precision", threshold_target=0.8))
    at = card["metrics"]["at_threshold"]
    assert card["threshold_rule"]["target_met"] == (at["precision"] >= 0.8)
    assert "rule precision target 0.8" in format_summary(card)


def test_fasttext_txt_input(tmp_path):
    rows = make_rows(seed=5, groups=40, per_group=3)
    path = tmp_path / "train.txt"
    path.write_text("".join(f"__label__{r['label']} {r['text'].replace(chr(10), ' ')}\n" for r in rows)
                    + "\n   \n")  # blank lines are skipped
    with pytest.raises(LabelledInputError, match=r"train\.txt: fastText \.txt input has no groups.*group_field=None"):
        train_classifier([str(path)], str(tmp_path / "m"), TrainClassifierConfig(**CFG))
    card = train_classifier([str(path)], str(tmp_path / "m"), TrainClassifierConfig(**CFG, group_field=None))
    assert card["groups"]["used"] is False and "without groups" in card["groups"]["without_groups"]
    assert card["model"]["path"] == str(tmp_path / "m.bin")  # suffix added
    sp = card["split"]
    assert sp["train"]["documents"] + sp["validation"]["documents"] + sp["test"]["documents"] == len(rows)
    assert sp["train"]["groups"] == sp["train"]["documents"]  # every line is its own group
    assert "fastText .txt" in sp["groups_from"] and card["inputs"][0]["fmt"] == "fasttext"
    bad = tmp_path / "two.txt"
    bad.write_text("__label__a x y\n__label__a __label__b z\n")
    with pytest.raises(LabelledInputError, match=r"two\.txt:2: 2 labels .*multi-label"):
        train_classifier([str(bad)], str(tmp_path / "x.bin"), TrainClassifierConfig(**CFG, group_field=None))
    bad.write_text("__label__a x y\nno label here\n")
    with pytest.raises(LabelledInputError, match=r"two\.txt:2: no label.*__label__NAME"):
        train_classifier([str(bad)], str(tmp_path / "x.bin"), TrainClassifierConfig(**CFG, group_field=None))


def test_quantized_ftz(trained, tmp_path):
    rows, src, *_ = trained
    cfg = TrainClassifierConfig(**CFG, quantize=True, cutoff=1000)
    with pytest.raises(ValueError, match=r"\.ftz"):
        train_classifier([src], str(tmp_path / "q.bin"), cfg)
    card = train_classifier([src], str(tmp_path / "q.ftz"), cfg)
    model = fasttext.load_model(str(tmp_path / "q.ftz"))
    assert model.f.isQuant() and card["model"]["quantized"] is True
    assert card["training"]["quantization"] == {"qnorm": True, "cutoff": 1000, "retrain": True}
    assert card["model"]["bytes"] < os.path.getsize(trained[2])
    val = validation_groups([r["group"] for r in rows], 0.2, 0)
    vrows = [r for r in rows if r["group"] in val]
    correct = sum(model.predict(r["text"].replace("\n", " "))[0][0] == "__label__" + r["label"] for r in vrows)
    assert card["metrics"]["accuracy"] == pytest.approx(correct / len(vrows), abs=1e-12)
    with pytest.raises(TrainingError, match="256"):  # too few rows to product-quantize
        train_classifier([src], str(tmp_path / "small.ftz"),
                         TrainClassifierConfig(**{**CFG, "word_ngrams": 1}, quantize=True))


def test_parquet_and_directory_input_with_label_tokens(tmp_path):
    rows = make_rows(seed=2, groups=40, per_group=4)
    rows[3]["text"] += " __label__hq and __label__x"
    d = tmp_path / "in"
    d.mkdir()
    write_jsonl(d / "a.jsonl", rows[:80])
    tail = rows[80:]
    pq.write_table(pa.table({"body": [r["text"] for r in tail], "label": [r["label"] for r in tail],
                             "group": [r["group"] for r in tail]}), d / "b.parquet")
    with pytest.raises(LabelledInputError, match=r"b\.parquet: no column 'text'.*'body'"):
        train_classifier([str(d)], str(tmp_path / "m.bin"), TrainClassifierConfig(**CFG, label_tokens="strip"))
    pq.write_table(pa.table({"text": [r["text"] for r in tail], "label": [r["label"] for r in tail],
                             "group": [r["group"] for r in tail]}), d / "b.parquet")
    # issue 37 item 6 (000:264): a text holding fastText's reserved label spelling is refused by default ...
    with pytest.raises(LabelledInputError, match=r"a\.jsonl:4: the text holds .*__label__hq.*--strip-label-tokens"):
        train_classifier([str(d)], str(tmp_path / "m.bin"), TrainClassifierConfig(**CFG))
    assert not os.path.exists(tmp_path / "m.bin")
    # ... or its label tokens are stripped and counted when asked
    card = train_classifier([str(d)], str(tmp_path / "m.bin"), TrainClassifierConfig(**CFG, label_tokens="strip"))
    assert [(os.path.basename(f["path"]), f["fmt"], f["documents"]) for f in card["inputs"]] == \
        [("a.jsonl", "jsonl", 80), ("b.parquet", "parquet", len(tail))]
    assert card["preprocessing"]["label_tokens_removed"] == 2
    assert card["config"]["label_tokens"] == "strip"


def test_defaults_are_the_seeds_procedure():
    """Issue 37 item 6 (000:267 ``train_supervised(input=..., lr=.5, epoch=10, wordNgrams=2, dim=100, thread=1)``)."""
    hp = TrainClassifierConfig().hyperparameters()
    assert (hp["lr"], hp["epoch"], hp["wordNgrams"], hp["dim"], hp["thread"]) == (0.5, 10, 2, 100, 1)
    assert TrainClassifierConfig().label_tokens == "refuse"
    with pytest.raises(ValueError, match="label_tokens must be one of"):
        TrainClassifierConfig(label_tokens="keep")


def _bad(tmp_path, rows, **cfg):
    src = write_jsonl(tmp_path / "bad.jsonl", rows)
    train_classifier([src], str(tmp_path / "m.bin"), TrainClassifierConfig(**{**CFG, **cfg}))


@pytest.mark.parametrize("edit,cfg,pattern", [
    (lambda rs: [{"txt" if k == "text" else k: v for k, v in r.items()} for r in rs], {},
     r"bad\.jsonl:1: no text field 'text'.*did you mean 'txt'.*text_field"),
    (lambda rs: [{"lable" if k == "label" else k: v for k, v in r.items()} for r in rs], {},
     r"bad\.jsonl:1: no label field 'label'.*did you mean 'lable'"),
    (lambda rs: rs[:4] + [{**rs[4], "label": None}] + rs[5:], {}, r"bad\.jsonl:5: label field 'label' is null"),
    (lambda rs: rs[:2] + [{**rs[2], "label": "  "}] + rs[3:], {}, r"bad\.jsonl:3: .*empty"),
    (lambda rs: [{**rs[0], "label": "very good"}] + rs[1:], {}, r"bad\.jsonl:1: label 'very good' contains "
                                                                  r"whitespace.*'very_good'"),
    (lambda rs: [{**rs[0], "label": [1]}] + rs[1:], {}, r"bad\.jsonl:1: label field 'label' is \[1\] \(list\)"),
    (lambda rs: [{**rs[0], "text": None}] + rs[1:], {}, r"bad\.jsonl:1: text field 'text' is null"),
    (lambda rs: [{**r, "label": "hq"} for r in rs], {}, r"has the label 'hq'.*at least two labels"),
    (lambda rs: [{**r, "group": "one"} for r in rs], {}, r"in 1 group\(s\) \('one'\).*at least 3 groups.*test_fraction=0"),
    (lambda rs: [{**r, "group": "one"} for r in rs], {"test_fraction": 0}, r"at least 2 groups"),
    (lambda rs: [{**r, "group": "a" if r["label"] == "hq" else "b"} for r in rs],
     {"validation_fraction": 0.5, "test_fraction": 0},
     r"training side holds only label\(s\) \['(cc|hq)'\].*too few documents or groups"),
    (lambda rs: rs[:6] + [{k: v for k, v in rs[6].items() if k != "group"}] + rs[7:], {},
     r"bad\.jsonl:7: no group \(field 'group'.*group_field=None"),
    (lambda rs: rs, {"group_field": "domain"}, r"no document has the group field 'domain'.*fields present"),
    (lambda rs: [{**r, "label": {"hq": "ham", "cc": "spam"}[r["label"]]} for r in rs], {},
     r"'ham' and 'spam'.*positive_label"),
    (lambda rs: rs, {"positive_label": "HQ"}, r"positive_label 'HQ' is not a label.*did you mean 'hq'"),
])
def test_bad_input_errors(tmp_path, edit, cfg, pattern):
    with pytest.raises(ValueError, match=pattern):
        _bad(tmp_path, edit(make_rows(groups=20, per_group=3)), **cfg)
    assert not os.path.exists(tmp_path / "m.bin") and not os.path.exists(tmp_path / "m.bin.json")


def test_bad_json_lines(tmp_path):
    src = tmp_path / "b.jsonl"
    src.write_text('{"text": "a", "label": "x", "group": 1}\n\n{"text": "b", "label": \n')
    with pytest.raises(LabelledInputError, match=r"b\.jsonl:3: not valid JSON"):
        train_classifier([str(src)], str(tmp_path / "m.bin"), TrainClassifierConfig(**CFG))
    src.write_text('{"text": "a", "label": "x"}\n["b", "y"]\n')
    with pytest.raises(LabelledInputError, match=r"b\.jsonl:2: a JSON list, not an object"):
        train_classifier([str(src)], str(tmp_path / "m.bin"), TrainClassifierConfig(**CFG))


def test_groups_are_required_and_training_without_them_is_named_in_the_card(tmp_path):
    """000 §7: "Train and validation groups must be disjoint before fitting": no group field is an error naming
    the fix; group_field=None (--no-group-field) trains with each document its own group, and the card says so."""
    rows = [{k: v for k, v in r.items() if k != "group"} for r in make_rows(groups=30, per_group=3)]
    src = write_jsonl(tmp_path / "a.jsonl", rows)
    with pytest.raises(LabelledInputError, match=r"no document has the group field 'group'.*training needs groups"
                                                  r".*fields present: 'text', 'label'.*group_field=None"):
        train_classifier([src], str(tmp_path / "m.bin"), TrainClassifierConfig(**CFG, positive_label="cc"))
    card = train_classifier([src], str(tmp_path / "m.bin"),
                            TrainClassifierConfig(**CFG, positive_label="cc", group_field=None))
    assert card["split"]["train"]["groups"] == card["split"]["train"]["documents"]
    assert card["positive_label"] == "cc" and "own group" in card["split"]["groups_from"]
    assert card["groups"] == {"required": True, "used": False, "field": None,
                              "without_groups": card["groups"]["without_groups"]}
    assert "--no-group-field" in card["groups"]["without_groups"]
    assert "WARNING: trained without groups" in format_summary(card)


@pytest.mark.parametrize("kw,pattern", [
    ({"epoch": True}, r"epoch must be a positive int, got True"),
    ({"loss": "softmx"}, r"loss must be one of .*did you mean 'softmax'"),
    ({"threshold_rule": "precision"}, r"threshold_target must be a number in \(0, 1\]"),
    ({"threshold_target": 0.5}, r"only used by threshold_rule"),
    ({"cutoff": 10}, r"cutoff=10 prunes a quantized model"),
    ({"minn": 3, "maxn": 2}, r"minn \(3\) must be <= TrainClassifierConfig.maxn \(2\)"),
    ({"validation_fraction": float("nan")}, r"validation_fraction must be a number in \(0, 1\)"),
    ({"word_ngrams": 2, "bucket": 0}, r"bucket must be >= 1"),
    ({"positive_label": "a b"}, r"positive_label must be a label name"),
])
def test_config_validation(kw, pattern):
    with pytest.raises(ValueError, match=pattern):
        TrainClassifierConfig(**kw)
    assert TrainClassifierConfig(positive_label="__label__hq").positive_label == "hq"


def test_refuses_to_overwrite_and_failed_runs_leave_nothing(trained, tmp_path, monkeypatch):
    rows, src, model_path, card, cfg = trained
    before = model_path.read_bytes()
    with pytest.raises(FileExistsError, match="overwrite=True"):
        train_classifier([src], str(model_path), cfg)
    assert model_path.read_bytes() == before
    out = tmp_path / "m.bin"
    (tmp_path / "m.bin.json").write_text("{}")  # a card alone also blocks
    with pytest.raises(FileExistsError, match="m.bin.json"):
        train_classifier([src], str(out), cfg)

    def boom(*a, **k):
        raise TrainingError("simulated failure")
    monkeypatch.setattr(train_mod, "_train", boom)
    with pytest.raises(TrainingError, match="simulated"):
        train_classifier([src], str(out), cfg, overwrite=True)
    assert sorted(os.listdir(tmp_path)) == ["m.bin.json"]  # no model, no temporary files
    monkeypatch.undo()
    again = train_classifier([src], str(out), cfg, overwrite=True)
    assert again["model"]["sha256"] == card["model"]["sha256"] and read_card(out) == again


def test_divergence_is_a_clear_error(trained, tmp_path):
    with pytest.raises(TrainingError, match=r"diverged .*lower lr"):
        train_classifier([trained[1]], str(tmp_path / "m.bin"), TrainClassifierConfig(**{**CFG, "lr": 1000.0}))
    assert os.listdir(tmp_path) == []


def test_threads_warning(trained, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="gpu_dedup.filters.train"):
        card = train_classifier([trained[1]], str(tmp_path / "m.bin"), TrainClassifierConfig(**CFG, threads=2))
    assert "deterministic only with threads=1" in caplog.text and card["training"]["deterministic"] is False


def test_missing_fasttext_package(trained, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "fasttext", None)  # makes `import fasttext` raise ImportError
    with pytest.raises(TrainDependencyError, match=r'pip install "gpu-dedup\[train\]"') as e:
        train_classifier([trained[1]], str(tmp_path / "m.bin"), TrainClassifierConfig(**CFG))
    assert isinstance(e.value, ImportError)


def test_read_card(trained, tmp_path):
    model_path = trained[2]
    assert read_card(tmp_path / "none.bin") is None
    copy = tmp_path / "m.bin"
    copy.write_bytes(model_path.read_bytes() + b"x")
    (tmp_path / "m.bin.json").write_text(json.dumps(trained[3]))
    with pytest.raises(ValueError, match="stale"):
        read_card(copy)
    (tmp_path / "m.bin.json").write_text('{"format": "other"}')
    with pytest.raises(ValueError, match="not a gpu-dedup classifier card"):
        read_card(copy)
    (tmp_path / "m.bin.json").write_text("{")
    with pytest.raises(ValueError, match="not a readable classifier card"):
        read_card(copy)


def test_three_labels(tmp_path):
    rows = make_rows(seed=4, groups=45, per_group=4, labels=("cc", "hq", "zz"))
    src = write_jsonl(tmp_path / "a.jsonl", rows)
    card = train_classifier([src], str(tmp_path / "m.bin"), TrainClassifierConfig(**CFG))
    assert card["labels"] == ["cc", "hq", "zz"] and card["positive_label"] is None
    assert card["threshold"] is None and card["retention_table"] == []
    assert np.array(card["confusion_matrix"]["matrix"]).shape == (3, 3)
    assert "no threshold" in format_summary(card)
    card = train_classifier([src], str(tmp_path / "z.bin"), TrainClassifierConfig(**CFG, positive_label="zz"))
    val = validation_groups([r["group"] for r in rows], 0.2, 0)
    model = fasttext.load_model(str(tmp_path / "z.bin"))
    keep, truth = [], []
    for r in rows:
        if r["group"] in val:
            labs, probs = model.predict(r["text"].replace("\n", " "), k=-1)
            keep.append(dict(zip(labs, probs)).get("__label__zz", 0.0) >= card["threshold"])
            truth.append(r["label"] == "zz")
    keep, truth = np.array(keep), np.array(truth)
    at = card["metrics"]["at_threshold"]  # one-vs-rest for the chosen label
    assert card["positive_label"] == "zz" and at["kept"] == keep.sum()
    assert at["recall"] == pytest.approx((keep & truth).sum() / truth.sum(), abs=1e-12)


def test_bucket_comes_from_the_data(tmp_path, caplog):
    """Issue 28 item 9: with the default bucket=None the hashed rows are twice the distinct training n-grams
    (counted here by brute force), a power of two: a 300-document corpus gives a model of kilobytes, not the
    ~800 MB of fastText's 2,000,000 rows; the log says the bucket and the size."""
    from gpu_dedup.filters.labelled import BUCKET_MIN, bucket_from_data

    rows = make_rows()
    src = write_jsonl(tmp_path / "d.jsonl", rows)
    cfg = TrainClassifierConfig(dim=8, epoch=5, validation_fraction=0.2)
    assert cfg.bucket is None
    with caplog.at_level("INFO", logger="gpu_dedup.filters"):
        card = train_classifier([src], str(tmp_path / "m.bin"), cfg)
    bucket = card["training"]["effective_args"]["bucket"]
    texts = [r["text"] for r in rows]
    bigrams = {(a, b) for t in texts for a, b in zip(t.split(), t.split()[1:])}
    assert bucket_from_data(texts, cfg) == (max(BUCKET_MIN, 1 << (2 * len(bigrams) - 1).bit_length()), len(bigrams))
    seen = card["training"]["bucket_from_data"]["distinct_ngrams"]  # the card says how the bucket was chosen
    assert 0 < seen <= len(bigrams) and bucket == max(BUCKET_MIN, 1 << (2 * seen - 1).bit_length())
    assert BUCKET_MIN <= bucket < 2 * 2 * len(bigrams) or bucket == BUCKET_MIN
    assert card["model"]["bytes"] < 2_000_000
    assert any(f"bucket {bucket} from the data" in r.getMessage() and " MB" in r.getMessage() for r in caplog.records)
    # char n-grams count too; no n-grams hashed: 0
    c = TrainClassifierConfig(word_ngrams=1, minn=2, maxn=3)
    grams = {u[i:i + n] for w in {"ab", "abc"} for u in [f"<{w}>"] for n in (2, 3) for i in range(len(u) - n + 1)}
    assert bucket_from_data(["ab abc ab"], c) == (BUCKET_MIN, len(grams))
    assert bucket_from_data(["a b"], TrainClassifierConfig(word_ngrams=1)) == (0, 0)


# ------------------------------------------------------------------ the seed's procedure (issue 25, 000 §6-7)

LANGS = ("de", "en", "fr")


def audited_rows() -> list[dict]:
    """make_rows plus a "lang" column (the group's language, one document of each group in the next language:
    a group's stratum is its majority) and a "dialect" column; the "hq" documents of dialect "b" mostly use the
    "cc" vocabulary, so a quality model rejects them more (the audit must show it)."""
    rows = make_rows(seed=9, groups=90, per_group=5)
    r = random.Random(4)
    for i, row in enumerate(rows):
        g, j = divmod(i, 5)
        row["lang"] = LANGS[(g + (j == 4)) % 3]
        row["dialect"] = "b" if g % 5 == 0 else "a"
        if row["dialect"] == "b" and row["label"] == "hq":
            row["text"] = " ".join(r.choice(VOCAB["cc"] if r.random() < 0.6 else NOISE) for _ in range(14))
    return rows


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    d = tmp_path_factory.mktemp("audited")
    rows = audited_rows()
    src = write_jsonl(d / "a.jsonl", rows)
    cfg = TrainClassifierConfig(**CFG, stratify_field="lang", audit_fields=("dialect",), test_fraction=0.2)
    card = train_classifier([src], str(d / "m.bin"), cfg)
    model = fasttext.load_model(str(d / "m.bin"))
    sides = reference_sides([x["group"] for x in rows], cfg.validation_fraction, cfg.seed, cfg.test_fraction,
                            strata=[x["lang"] for x in rows])
    return rows, src, card, cfg, model, sides


def _scores(model, rows, label="__label__hq"):
    """fastText's own predict: the positive label's probability and the top label per row."""
    p, top = [], []
    for r in rows:
        labs, probs = model.predict(r["text"].replace("\n", " "), k=-1)
        p.append(float(dict(zip(labs, probs)).get(label, 0.0)))
        top.append(labs[0][len("__label__"):])
    return p, top


def _ece_brier(p, y, bins=10):
    """Plain-Python ECE (equal-width bins, the last one closed) and Brier score."""
    groups = {}
    for q, t in zip(p, y):
        k = min(int(q * bins), bins - 1)
        groups.setdefault(k, []).append((q, t))
    ece = sum(len(v) / len(p) * abs(sum(t for _, t in v) / len(v) - sum(q for q, _ in v) / len(v))
              for v in groups.values())
    return ece, sum((q - t) ** 2 for q, t in zip(p, y)) / len(p), {k: len(v) for k, v in groups.items()}


def test_stratified_split_follows_the_rule_and_keeps_every_stratum(audited):
    rows, src, card, cfg, model, sides = audited
    sp = card["split"]
    assert sp["stratified_by"] == "lang" and sp["test_fraction"] == 0.2
    for side in ("train", "validation", "test"):
        mine = [r for r in rows if sides[r["group"]] == side]
        assert sp[side]["documents"] == len(mine)
        assert sp[side]["per_stratum"] == {lang: sum(r["lang"] == lang for r in mine) for lang in LANGS}
    # every stratum is on both held-out sides, close to its share (whole groups of 5: within one group)
    for lang in LANGS:
        n = sum(r["lang"] == lang for r in rows)
        assert abs(sp["validation"]["per_stratum"][lang] - 0.2 * n) <= 5
        assert abs(sp["test"]["per_stratum"][lang] - 0.2 * n) <= 5
    groups = [r["group"] for r in rows]
    from gpu_dedup.filters.train import assign_sides
    again = assign_sides(groups, 0.2, 0, test_fraction=0.2, strata=[r["lang"] for r in rows])
    assert again.tolist() == [("train", "validation", "test").index(sides[g]) for g in groups]
    assert not np.array_equal(again, assign_sides(groups, 0.2, 1, test_fraction=0.2,
                                                  strata=[r["lang"] for r in rows]))


def test_test_side_is_scored_once_with_the_validation_threshold(audited):
    rows, src, card, cfg, model, sides = audited
    test_rows = [r for r in rows if sides[r["group"]] == "test"]
    val_rows = [r for r in rows if sides[r["group"]] == "validation"]
    t = card["threshold"]
    vp, _ = _scores(model, val_rows)
    vy = [r["label"] == "hq" for r in val_rows]
    assert t == pytest.approx(choose_threshold(np.array(vp), np.array(vy), "f1", None)[0], abs=1e-12)
    p, top = _scores(model, test_rows)
    y = [r["label"] == "hq" for r in test_rows]
    te = card["test"]
    assert te["documents"] == len(test_rows) and te["threshold"] == t
    assert te["metrics"]["accuracy"] == pytest.approx(sum(a == r["label"] for a, r in zip(top, test_rows))
                                                      / len(test_rows), abs=1e-12)
    keep = [q >= t for q in p]
    tp = sum(k and v for k, v in zip(keep, y))
    at = te["metrics"]["at_threshold"]
    assert at["kept"] == sum(keep) and at["precision"] == pytest.approx(tp / sum(keep), abs=1e-12)
    assert at["recall"] == pytest.approx(tp / sum(y), abs=1e-12)
    assert at["false_rejection"] == pytest.approx(1 - tp / sum(y), abs=1e-12)
    ece, brier, _ = _ece_brier(p, y)
    assert te["calibration"]["ece"] == pytest.approx(ece, abs=1e-9)
    assert te["calibration"]["brier"] == pytest.approx(brier, abs=1e-9)
    text = format_summary(card)
    assert "test (held out, scored once)" in text and "calibration (validation): ECE" in text


def test_calibration_equals_plain_python_ece_and_brier(audited):
    rows, src, card, cfg, model, sides = audited
    val_rows = [r for r in rows if sides[r["group"]] == "validation"]
    p, _ = _scores(model, val_rows)
    y = [r["label"] == "hq" for r in val_rows]
    ece, brier, counts = _ece_brier(p, y)
    cal = card["calibration"]
    assert cal["ece"] == pytest.approx(ece, abs=1e-9) and cal["brier"] == pytest.approx(brier, abs=1e-9)
    assert [b["documents"] for b in cal["bins"]] == [counts.get(k, 0) for k in range(10)]
    for k, b in enumerate(cal["bins"]):
        sel = [(q, t) for q, t in zip(p, y) if min(int(q * 10), 9) == k]
        if sel:
            assert b["mean_score"] == pytest.approx(sum(q for q, _ in sel) / len(sel), abs=1e-9)
            assert b["fraction_positive"] == pytest.approx(sum(t for _, t in sel) / len(sel), abs=1e-12)
        else:
            assert b["mean_score"] is None and b["fraction_positive"] is None
    from gpu_dedup.filters.train import calibration
    perfect = calibration(np.array([0.0, 0.0, 1.0, 1.0]), np.array([False, False, True, True]))
    assert perfect["ece"] == 0 and perfect["brier"] == 0
    worst = calibration(np.array([1.0, 0.0]), np.array([False, True]))
    assert worst["ece"] == 1 and worst["brier"] == 1


def test_audit_shows_a_group_rejected_more_than_the_others(audited):
    rows, src, card, cfg, model, sides = audited
    t = card["threshold"]
    val_rows = [r for r in rows if sides[r["group"]] == "validation"]
    p, _ = _scores(model, val_rows)
    a = card["audit"]["dialect"]
    pos = [(q, r) for q, r in zip(p, val_rows) if r["label"] == "hq"]
    base = sum(q < t for q, _ in pos) / len(pos)
    assert a["overall"]["false_rejection"] == pytest.approx(base, abs=1e-12)
    for v in ("a", "b"):
        mine = [(q, r) for q, r in zip(p, val_rows) if r["dialect"] == v]
        mpos = [q for q, r in mine if r["label"] == "hq"]
        fr = sum(q < t for q in mpos) / len(mpos)
        m = a["values"][v]
        assert m["documents"] == len(mine) and m["positives"] == len(mpos)
        assert m["retention"] == pytest.approx(sum(q >= t for q, _ in mine) / len(mine), abs=1e-12)
        assert m["false_rejection"] == pytest.approx(fr, abs=1e-12)
        assert m["rate_ratio"] == pytest.approx(fr / base, abs=1e-9)
    assert a["values"]["b"]["false_rejection"] >= 3 * base and a["flagged"] == ["b"]  # the fixture's bias shows
    assert set(card["audit"]) == {"lang", "dialect"} and set(card["test"]["audit"]) == {"lang", "dialect"}
    assert "rejected more than the others" in format_summary(card)
    # per-value thresholds: the rule on that value's validation documents alone
    for v, th in card["thresholds_by"]["lang"].items():
        sel = [(q, r["label"] == "hq") for q, r in zip(p, val_rows) if r["lang"] == v]
        q, yy = np.array([x for x, _ in sel]), np.array([x for _, x in sel])
        assert th == pytest.approx(choose_threshold(q, yy, "f1", None)[0], abs=1e-12)
        assert q[q >= th].min() == _brute(q.tolist(), yy.tolist(), "f1", None)


def test_max_direction_card(tmp_path, audited):
    """direction="max" (a toxicity-style model: the filter removes score > threshold): retention counts the
    documents at or below the threshold, false rejection the negatives above it; per-value thresholds too."""
    rows, src, *_ = audited
    card = train_classifier([src], str(tmp_path / "t.bin"),
                            TrainClassifierConfig(**CFG, positive_label="cc", direction="max", audit_fields=("lang",)))
    assert card["direction"] == "max" and "score > threshold" in card["threshold_rule"]["keep"]
    model = fasttext.load_model(str(tmp_path / "t.bin"))
    sides = reference_sides([r["group"] for r in rows], 0.2, 0, 0.1)
    val_rows = [r for r in rows if sides[r["group"]] == "validation"]
    p, _ = _scores(model, val_rows, "__label__cc")
    y = [r["label"] == "cc" for r in val_rows]
    for row in card["retention_table"]:
        t = row["threshold"]
        assert row["kept"] == sum(q <= t for q in p)
        neg = [q for q, v in zip(p, y) if not v]
        assert row["false_rejection"] == pytest.approx(sum(q > t for q in neg) / len(neg), abs=1e-12)
    q, yy = np.array(p), np.array(y)
    assert card["threshold"] == pytest.approx(choose_threshold(q, yy, "f1", None, "max")[0], abs=1e-12)
    for v, th in card["thresholds_by"]["lang"].items():
        sel = np.array([r["lang"] == v for r in val_rows])
        assert th == pytest.approx(choose_threshold(q[sel], yy[sel], "f1", None, "max")[0], abs=1e-12)


@pytest.mark.parametrize("target", [0.2, 0.5, 0.9, 1.0])
def test_max_direction_retention_rule_against_brute_force(target):
    """retention for max: the threshold that removes the most (score > t) while keeping >= target."""
    r = random.Random(11)
    for _ in range(30):
        p = np.round(np.array([r.random() for _ in range(r.randint(2, 25))]), 1)
        y = np.array([r.random() < 0.5 for _ in range(len(p))])
        t, ok = choose_threshold(p, y, "retention", target, "max")
        assert ok and (p <= t).mean() >= target - 1e-12
        best = min((p <= s).sum() for s in [*set(p.tolist()), 1.0] if (p <= s).mean() >= target - 1e-12)
        assert (p <= t).sum() == best
        assert t not in set(p.tolist()) or t == 1.0


def test_missing_stratify_or_audit_column_names_the_option_and_the_fields(tmp_path, capsys):
    from gpu_dedup.cli import main

    src = write_jsonl(tmp_path / "a.jsonl", make_rows(groups=20, per_group=3))
    with pytest.raises(LabelledInputError, match=r"a\.jsonl:1: no column 'lang' \(stratify_field\); fields present: "
                                                  r"'text', 'label', 'group'"):
        train_classifier([src], str(tmp_path / "m.bin"), TrainClassifierConfig(**CFG, stratify_field="lang"))
    assert main(["train-classifier", src, "-o", str(tmp_path / "m.bin"), "--stratify-field", "lable", "-q"]) == 1
    err = capsys.readouterr().err
    assert "no column 'lable' (--stratify-field)" in err and "'text', 'label', 'group'" in err
    assert "did you mean 'label'" in err
    assert main(["train-classifier", src, "-o", str(tmp_path / "m.bin"), "--audit-field", "dialect", "-q"]) == 1
    assert "no column 'dialect' (--audit-field)" in capsys.readouterr().err
    pq.write_table(pa.table({"text": ["a b"], "label": ["hq"], "group": ["g"]}), tmp_path / "b.parquet")
    with pytest.raises(LabelledInputError, match=r"b\.parquet: no column 'lang' \(stratify_field\)"):
        train_classifier([str(tmp_path / "b.parquet")], str(tmp_path / "m.bin"),
                         TrainClassifierConfig(**CFG, stratify_field="lang"))
    assert not os.path.exists(tmp_path / "m.bin")


BENCH_ITEM = ("which of the following best describes the role of mitochondria in a eukaryotic cell during "
              "aerobic respiration and energy production")


def test_screen_refuses_or_drops_benchmark_text(tmp_path, capsys):
    """--screen BENCHMARK: a labelled document sharing a 13-gram with a benchmark item is refused (the error names
    it), or with --screen-drop dropped and listed in the card; an unreadable benchmark names --screen and the file."""
    from gpu_dedup.cli import main

    rows = make_rows(groups=30, per_group=4)
    leak = [3, 50]
    for i in leak:
        rows[i]["text"] = "intro words " + BENCH_ITEM + " more words"
    src = write_jsonl(tmp_path / "a.jsonl", rows)
    bench = tmp_path / "bench" / "mmlu.jsonl"
    bench.parent.mkdir()
    write_jsonl(bench, [{"id": "q1", "question": BENCH_ITEM}, {"id": "q2", "question": "a short one"}])
    with pytest.raises(ValueError, match=r"`screen`: 2 of 120 labelled documents share a 13-gram with a benchmark "
                                         r"item \(e\.g\. .*a\.jsonl:4 with mmlu\.jsonl item q1.*screen_drop=True"):
        train_classifier([src], str(tmp_path / "m.bin"), TrainClassifierConfig(**CFG, screen=(str(bench),)))
    assert not os.path.exists(tmp_path / "m.bin")
    card = train_classifier([src], str(tmp_path / "m.bin"),
                            TrainClassifierConfig(**CFG, screen=(str(bench),), screen_drop=True))
    scr = card["screen"]
    assert scr["action"] == "drop" and scr["documents_screened"] == 120 and scr["documents_dropped"] == 2
    assert [(f["where"].rsplit("/", 1)[1], f["item_id"]) for f in scr["flagged"]] == [("a.jsonl:4", "q1"),
                                                                                      ("a.jsonl:51", "q1")]
    assert scr["policy"]["ngram"] == 13 and scr["counts"]["mmlu.jsonl"]["items_too_short"] == 1
    sp = card["split"]
    assert sp["train"]["documents"] + sp["validation"]["documents"] + sp["test"]["documents"] == 118
    assert "2 dropped" in format_summary(card)
    # the command line: the flags and the errors' names
    assert main(["train-classifier", src, "-o", str(tmp_path / "c.bin"), "--dim", "8", "--screen", str(bench),
                 "-q"]) == 1
    err = capsys.readouterr().err
    assert "--screen: 2 of 120" in err and "pass --screen-drop to drop them" in err
    missing = tmp_path / "none.jsonl"
    assert main(["train-classifier", src, "-o", str(tmp_path / "c.bin"), "--screen", str(missing), "-q"]) == 1
    err = capsys.readouterr().err
    assert "--screen: benchmark file" in err and "none.jsonl" in err and "cannot be read" in err
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"question": "x"\n')
    with pytest.raises(ValueError, match=r"`screen`: benchmark file .*broken\.jsonl' cannot be read \(.*broken\.jsonl:1"):
        train_classifier([src], str(tmp_path / "m2.bin"), TrainClassifierConfig(**CFG, screen=(str(bench),
                                                                                               str(broken))))
    with pytest.raises(ValueError, match="screen_drop=True drops"):
        TrainClassifierConfig(screen_drop=True)


# --------------------------------------------------------------------------------- --head-of: a new output layer
def _softmax(z):
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("quantized", [False, True])
def test_head_of_refits_only_the_output_layer(trained, tmp_path, quantized):
    """Issue 37 item 3 (002:175 "fine-tune a new output layer ... keeping the base embeddings frozen", 002:231):
    --head-of MODEL keeps MODEL's words and input matrix (the fasttext package reads them back equal), fits a
    softmax layer on the new labels of the training side, and that layer is the optimum of its stated objective:
    the gradient of mean cross-entropy + c/2 ||W||^2, computed here from the package's own sentence vectors and
    output matrix, vanishes. The package's predict on the new model is softmax(W h)."""
    base = str(trained[2])
    if quantized:
        m = fasttext.load_model(base)
        m.quantize(qnorm=True)
        base = str(tmp_path / "base.ftz")
        m.save_model(base)
    rows = make_rows(seed=4, groups=40, per_group=4, labels=("hq", "cc"))
    for r in rows:  # new labels (the base model's are hq / cc), on text whose words its embeddings know
        r["label"] = {"hq": "keep", "cc": "drop"}[r["label"]]
    src = write_jsonl(tmp_path / "new.jsonl", rows)
    out = tmp_path / ("head.ftz" if quantized else "head.bin")
    card = train_classifier([src], str(out), TrainClassifierConfig(**CFG, head_of=base, positive_label="keep"))
    new, old = fasttext.load_model(str(out)), fasttext.load_model(base)
    assert sorted(new.labels) == ["__label__drop", "__label__keep"] and new.words == old.words
    texts = [r["text"].replace("\n", " ") for r in rows]
    if not quantized:
        assert np.array_equal(new.get_input_matrix(), old.get_input_matrix())
    h = np.array([new.get_sentence_vector(t) for t in texts], np.float64)
    assert np.array_equal(h, np.array([old.get_sentence_vector(t) for t in texts], np.float64))
    sides = reference_sides([r["group"] for r in rows], 0.2, 0)
    trn = np.array([sides[r["group"]] == "train" for r in rows])
    head = card["training"]["head_of"]
    assert head["converged"] and head["labels"][0] in ("keep", "drop")
    if not quantized:  # the package reads a quantized model's output matrix only through predict
        w = new.get_output_matrix().astype(np.float64)
        y = np.array([new.labels.index("__label__" + r["label"]) for r in rows])[trn]
        p = _softmax(h[trn] @ w.T)
        p[np.arange(len(y)), y] -= 1
        grad = p.T @ h[trn] / len(y) + head["l2_penalty"] * w
        p0 = _softmax(np.zeros((len(y), len(new.labels))))
        p0[np.arange(len(y)), y] -= 1
        assert np.abs(grad).max() < 1e-4 * np.abs(p0.T @ h[trn] / len(y)).max()
        labs, probs = new.predict(texts[:20], k=-1)
        want = _softmax(h[:20] @ w.T)
        for i in range(20):
            got = dict(zip(labs[i], probs[i]))
            # fastText reports exp(log(p + 1e-5)): its std_log adds 1e-5 to every probability
            assert [float(got[x]) for x in new.labels] == pytest.approx(want[i] + 1e-5, abs=1e-6)
    # the new layer separates the new labels on the validation side (what the card measured with the package)
    assert card["metrics"]["accuracy"] > 0.8
    assert card["training"]["hyperparameters"] is None and card["training"]["effective_args"]["loss"] == "softmax"


def test_head_of_errors(trained, tmp_path):
    with pytest.raises(FileNotFoundError, match="head_of"):
        TrainClassifierConfig(head_of=str(tmp_path / "none.bin"))
    with pytest.raises(ValueError, match="quantize=True does not apply"):
        TrainClassifierConfig(head_of=str(trained[2]), quantize=True)
    with pytest.raises(ValueError, match="head_l2"):
        TrainClassifierConfig(head_of=str(trained[2]), head_l2=0)


def test_training_says_what_it_does_while_fasttext_runs(tmp_path, caplog, monkeypatch):
    """Issue 36 item 11: train-classifier was silent for 13-15 s. Now fastText's training says it starts (its
    documents, epochs, dim and bucket) and, every HEARTBEAT_S (0.05 s here), that it is still going; the
    evaluation says it starts after it."""
    from gpu_dedup.runtime import heartbeat

    monkeypatch.setattr(heartbeat, "HEARTBEAT_S", 0.05)  # the child process alone takes longer to start
    src = write_jsonl(tmp_path / "d.jsonl", make_rows())
    with caplog.at_level("INFO", logger="gpu_dedup.filters"):
        card = train_classifier([src], str(tmp_path / "m.bin"), TrainClassifierConfig(dim=8, epoch=5, bucket=5000,
                                                                                  validation_fraction=0.2))
    said = [r.getMessage() for r in caplog.records]
    n = card["split"]["train"]["documents"]
    start = said.index(f"training fastText on {n:,} documents (5 epochs, dim 8, bucket 5,000) ...")
    going = [i for i, m in enumerate(said) if m.startswith("training fastText on ") and ": still going after " in m]
    evaluating = next(i for i, m in enumerate(said) if m.startswith("evaluating the model on the validation side ("))
    assert going and start < going[0] and going[-1] < evaluating, said
    assert card["training"]["bucket_from_data"] is None  # given, not chosen from the data
