"""The validation discipline of ``train-classifier`` (``filters.train``): the group-disjoint, optionally
stratified train / validation / test split, the threshold rules, the metrics (confusion matrix, per-label
precision/recall/F1, retention table), the calibration (reliability table, ECE, Brier) and the per-group audit
(retention and false rejection per value of a column). The rules are stated in ``filters.train``'s docstring.
Scores come from fastText's own ``predict(k=-1)`` on the shipped model (``predict``)."""
from __future__ import annotations

import hashlib
import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..constants import LABEL_PREFIX
from .labelled import LabelledInputError

logger = logging.getLogger(__name__)

ThresholdRule = Literal["f1", "precision", "retention"]
Direction = Literal["min", "max"]
TABLE_THRESHOLDS = tuple(round(0.05 * i, 2) for i in range(1, 20))  # 0.05 .. 0.95
CALIBRATION_BINS = 10
AUDIT_RATIO = 3.0  # a group's false-rejection rate this many times the overall one is flagged (002: "3-5x")
TRAIN, VALIDATION, TEST = 0, 1, 2
SIDES = ("train", "validation", "test")


def _group_hash(group: str, seed: int) -> int:
    data = f"{seed}\x00{group}".encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def assign_sides(groups: list[str], validation_fraction: float, seed: int, *, test_fraction: float = 0.0,
                 strata: list[str] | None = None) -> np.ndarray:
    """The side of every document: ``TRAIN`` (0), ``VALIDATION`` (1) or ``TEST`` (2), whole groups, by the rule in
    the module docstring (test first, then validation; per stratum when ``strata`` is given).

    Args:
        groups: the group of every document.
        validation_fraction: the validation side's share of the documents (of each stratum).
        seed: the hash seed of the group order.
        test_fraction: the test side's share (0: no test side).
        strata: the stratum (stratify column value) of every document, or None.

    Returns:
        int8 (documents,): the side of each document.

    Raises:
        LabelledInputError: too few groups for the sides asked for.
    """
    sizes = Counter(groups)
    need = 3 if test_fraction > 0 else 2
    if len(sizes) < need:
        raise LabelledInputError(
            f"the {len(groups)} documents are in {len(sizes)} group(s) ({', '.join(map(repr, list(sizes)[:3]))}); "
            f"group-disjoint train / validation{' / test' if need == 3 else ''} sides need at least {need} groups: add "
            "documents of other groups, or use a finer group field" + (", or set test_fraction=0" if need == 3 else ""))
    order = sorted(sizes, key=lambda g: (_group_hash(g, seed), g))
    if strata is None:
        stratum_of = dict.fromkeys(sizes, "")
    else:
        votes: dict[str, Counter] = {}
        for g, v in zip(groups, strata):
            votes.setdefault(g, Counter())[v] += 1
        stratum_of = {g: min(c.items(), key=lambda kv: (-kv[1], kv[0]))[0] for g, c in votes.items()}
    stratum_docs = Counter()
    for g, n in sizes.items():
        stratum_docs[stratum_of[g]] += n
    side_of: dict[str, int] = {}
    for side, fraction in ((TEST, test_fraction), (VALIDATION, validation_fraction)):
        if fraction <= 0:
            continue
        held: Counter = Counter()
        target = {k: round(fraction * n) for k, n in stratum_docs.items()}
        if strata is None:
            target[""] = max(1, target[""])
        chosen = False
        for g in order:
            k = stratum_of[g]
            if g not in side_of and held[k] + sizes[g] <= target[k]:
                side_of[g] = side
                held[k] += sizes[g]
                chosen = True
        if not chosen:
            left = [g for g in order if g not in side_of]
            if len(left) < 2:
                raise LabelledInputError(f"too few groups ({len(sizes)}) for train, validation and test sides; add "
                                         "documents of other groups, or lower test_fraction / validation_fraction")
            side_of[min(left, key=lambda g: sizes[g])] = side  # min keeps the first of equal sizes (hash order)
    return np.fromiter((side_of.get(g, TRAIN) for g in groups), dtype=np.int8, count=len(groups))


def split_groups(groups: list[str], fraction: float, seed: int) -> np.ndarray:
    """Validation mask (bool per document) of the unstratified split without a test side.

    Args:
        groups: the group of every document.
        fraction: the validation side's share of the documents.
        seed: the hash seed of the group order.

    Returns:
        bool (documents,): True on the validation side.

    Raises:
        LabelledInputError: fewer than 2 groups.
    """
    return assign_sides(groups, fraction, seed) == VALIDATION


def side_summary(labels: list[str], groups: list[str], mask: np.ndarray, strata: list[str] | None
                 ) -> dict[str, Any]:
    """One side's documents, groups, per-label and (stratified) per-stratum counts.

    Args:
        labels: every document's label.
        groups: every document's group.
        mask: the side's documents.
        strata: every document's stratum, or None.

    Returns:
        {"documents", "groups", "per_label"[, "per_stratum"]}.
    """
    idx = np.flatnonzero(mask)
    out = {"documents": int(idx.size), "groups": len({groups[i] for i in idx}),
           "per_label": dict(sorted(Counter(labels[i] for i in idx).items()))}
    if strata is not None:
        out["per_stratum"] = dict(sorted(Counter(strata[i] for i in idx).items()))
    return out


def _predicted(p: np.ndarray, t: float, direction: Direction) -> np.ndarray:
    """The predicted-positive documents at threshold ``t``: kept (min) or removed (max)."""
    return p >= t if direction == "min" else p > t


def metrics_at(p: np.ndarray, y: np.ndarray, t: float, direction: Direction = "min") -> dict[str, Any]:
    """Precision/recall/F1 of the positive label, retention and false rejection at threshold ``t``."""
    pred = _predicted(p, t, direction)
    keep = pred if direction == "min" else ~pred
    flagged, tp, pos = int(pred.sum()), int((pred & y).sum()), int(y.sum())
    prec = tp / flagged if flagged else None
    rec = tp / pos if pos else None
    f1 = 2 * tp / (flagged + pos) if flagged + pos else None
    wrong = ~keep & (y if direction == "min" else ~y)  # good documents removed: the false rejections
    base = int(y.sum()) if direction == "min" else int((~y).sum())
    return {"threshold": t, "kept": int(keep.sum()), "retention": int(keep.sum()) / len(p) if len(p) else None,
            "precision": prec, "recall": rec, "f1": f1,
            "false_rejection": int(wrong.sum()) / base if base else None}


def choose_threshold(p: np.ndarray, y: np.ndarray, rule: ThresholdRule, target: float | None,
                     direction: Direction = "min") -> tuple[float, bool]:
    """(threshold, target met) for scores ``p`` (float64) and truths ``y`` (bool), by ``rule`` (module docstring).

    Args:
        p: the positive label's scores.
        y: whether each document has the positive label.
        rule: "f1", "precision" or "retention".
        target: the precision or retention target (None for f1).
        direction: "min" (keep score >= threshold) or "max" (remove score > threshold).

    Returns:
        (threshold, whether the target was met).
    """
    u = np.unique(p)[::-1]  # distinct scores, descending
    cuts = np.append((u[:-1] + u[1:]) / 2, u[-1] / 2)  # cuts[j]: predicted positive = exactly the scores >= u[j]
    pos = int(y.sum())
    flagged = len(p) - np.searchsorted(np.sort(p), u, side="left")  # documents with score >= u[j]
    tp = pos - np.searchsorted(np.sort(p[y]), u, side="left")  # positives among them
    if rule == "f1":
        f1 = 2 * tp / (flagged + pos)
        return float(cuts[int(np.argmax(f1))]), True
    if rule == "precision":
        prec = tp / flagged
        ok = np.flatnonzero(prec >= target - 1e-12)
        if ok.size:
            return float(cuts[ok[-1]]), True
        return float(cuts[int(np.argmax(prec))]), False
    if direction == "min":
        return float(cuts[int(np.flatnonzero(flagged / len(p) >= target - 1e-12)[0])]), True
    ok = np.flatnonzero(1 - flagged / len(p) >= target - 1e-12)  # retention falls as j grows
    return (float(cuts[ok[-1]]) if ok.size else float((u[0] + 1) / 2)), True  # else: remove none


def calibration(p: np.ndarray, y: np.ndarray, bins: int = CALIBRATION_BINS) -> dict[str, Any]:
    """Reliability table, ECE and Brier score of scores ``p`` against truths ``y`` (module docstring).

    Args:
        p: the positive label's scores in [0, 1].
        y: whether each document has the positive label.
        bins: equal-width bins over [0, 1].

    Returns:
        {"bins": [{lower, upper, documents, mean_score, fraction_positive}], "ece", "brier", "documents"}.
    """
    b = np.minimum(np.floor(p * bins).astype(np.int64), bins - 1)
    rows, ece = [], 0.0
    for k in range(bins):
        sel = b == k
        n = int(sel.sum())
        mean = float(p[sel].mean()) if n else None
        frac = float(y[sel].mean()) if n else None
        if n:
            ece += n / len(p) * abs(frac - mean)
        rows.append({"lower": k / bins, "upper": (k + 1) / bins, "documents": n, "mean_score": mean,
                     "fraction_positive": frac})
    return {"bins": rows, "ece": ece if len(p) else None,
            "brier": float(np.mean((p - y) ** 2)) if len(p) else None, "documents": int(len(p)),
            "binning": f"{bins} equal-width bins, bin = min(floor(score * {bins}), {bins - 1})"}


def group_audit(p: np.ndarray, y: np.ndarray, values: list[str], t: float, direction: Direction,
                ratio: float = AUDIT_RATIO) -> dict[str, Any]:
    """Per value of a column: documents, retention and false rejection at threshold ``t`` (module docstring).

    Args:
        p: the positive label's scores.
        y: whether each document has the positive label.
        values: the column's value for each document.
        t: the threshold.
        direction: "min" or "max".
        ratio: a value whose false-rejection rate is at least this many times the overall one is flagged.

    Returns:
        {"overall": metrics, "values": {value: metrics + rate_ratio}, "flagged": [values at >= ratio x],
        "ratio": ratio}.
    """
    overall = metrics_at(p, y, t, direction)
    base = overall["false_rejection"]
    out: dict[str, Any] = {}
    flagged = []
    vals = np.asarray(values, dtype=object)
    for v in sorted(set(values)):
        sel = vals == v
        m = metrics_at(p[sel], y[sel], t, direction)
        m["documents"], m["positives"] = int(sel.sum()), int(y[sel].sum())
        fr = m["false_rejection"]
        m["rate_ratio"] = (fr / base if base else None) if fr is not None else None
        if fr is not None and fr > 0 and (not base or fr >= ratio * base):
            flagged.append(v)
        out[v] = {k: m[k] for k in ("documents", "positives", "kept", "retention", "false_rejection",
                                      "rate_ratio")}
    return {"overall": {"documents": len(p), "positives": int(y.sum()), "kept": overall["kept"],
                        "retention": overall["retention"], "false_rejection": base},
            "values": out, "flagged": flagged, "ratio": ratio}


@dataclass
class Predictions:
    """fastText's ``predict(k=-1)`` on one side: the top label of each document ("" when none) and the positive
    label's probability (0 when it is not returned)."""

    top: list[str]
    p: np.ndarray
    unpredicted: int


def predict(model: Any, texts: list[str], positive: str | None) -> Predictions:
    """Score ``texts`` with the model's own ``predict(k=-1)``.

    Args:
        model: a loaded fastText model.
        texts: the documents (no line breaks).
        positive: the positive label (None: no score).

    Returns:
        The ``Predictions``.
    """
    if not texts:
        return Predictions([], np.zeros(0), 0)
    pred_labels, pred_probs = model.predict(texts, k=-1)
    top, unpredicted = [], 0
    p = np.zeros(len(texts), dtype=np.float64)
    for i, (labs, probs) in enumerate(zip(pred_labels, pred_probs)):
        if not labs:
            unpredicted += 1
            top.append("")
            continue
        top.append(labs[0][len(LABEL_PREFIX):])
        if positive is not None:
            for lab, prob in zip(labs, probs):
                if lab == LABEL_PREFIX + positive:
                    p[i] = float(prob)
    return Predictions(top, p, unpredicted)


def _classification(pr: Predictions, truth: list[str], labels: list[str]) -> dict[str, Any]:
    """Confusion matrix (rows: true label, columns: predicted = top label) and per-label metrics."""
    index = {lab: i for i, lab in enumerate(labels)}
    cm = np.zeros((len(labels), len(labels)), dtype=np.int64)
    for t, top in zip(truth, pr.top):
        if top:
            cm[index[t], index[top]] += 1
    per_label = {}
    for lab, i in index.items():
        tp, col, row = int(cm[i, i]), int(cm[:, i].sum()), int(cm[i, :].sum())
        prec, rec = (tp / col if col else None), (tp / row if row else None)
        f1 = 2 * tp / (col + row) if col + row else None
        per_label[lab] = {"precision": prec, "recall": rec, "f1": f1, "support": row}
    f1s = [m["f1"] for m in per_label.values() if m["support"]]
    return {"metrics": {"accuracy": float(np.trace(cm)) / len(truth) if truth else None,
                        "macro_f1": sum(f1s) / len(f1s) if f1s else None,
                        "per_label": per_label, "unpredicted": pr.unpredicted},
            "confusion_matrix": {"labels": labels, "rows": "true label", "columns": "predicted label (top-1)",
                                 "matrix": cm.tolist()}}


def columns_audit(p: np.ndarray, y: np.ndarray, columns: dict[str, list[str]], t: float, direction: Direction,
                  ratio: float = AUDIT_RATIO) -> dict[str, Any]:
    """``group_audit`` of every column (column -> each document's value), a WARNING per column with a flagged
    value."""
    audit = {}
    for col, values in columns.items():
        audit[col] = group_audit(p, y, values, t, direction, ratio)
        if audit[col]["flagged"]:
            logger.warning("column %r: false rejection of %s is at least %gx the overall rate (%s): this model rejects "
                           "these groups more than others (the card's audit lists them)", col, audit[col]["flagged"],
                           ratio, audit[col]["values"][audit[col]["flagged"][0]]["false_rejection"])
    return audit


def thresholds_by(p: np.ndarray, y: np.ndarray, columns: dict[str, list[str]], rule: ThresholdRule,
                  target: float | None, direction: Direction) -> dict[str, dict[str, float | None]]:
    """column -> value -> the threshold ``rule`` chooses on that value's documents alone (None where they lack a
    positive or a negative document): the card's ``thresholds_by``, which ``filter`` applies per domain."""
    out: dict[str, dict[str, float | None]] = {}
    for col, values in columns.items():
        vals = np.asarray(values, dtype=object)
        per: dict[str, float | None] = {}
        for v in sorted(set(values)):
            sel = vals == v
            per[v] = None if y[sel].all() or not y[sel].any() else \
                choose_threshold(p[sel], y[sel], rule, target, direction)[0]
        out[col] = per
    return out


def evaluate(model: Any, texts: list[str], truth: list[str], labels: list[str], positive: str | None,
             cfg: Any, columns: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """Validation metrics of ``model`` with fastText's own ``predict(k=-1)``: confusion matrix, per-label
    precision/recall/F1, and for the positive label the chosen threshold, the retention table, the
    calibration, the per-column audit and the per-value thresholds.

    Args:
        model: the loaded model.
        texts: the validation documents.
        truth: their labels.
        labels: every label (sorted).
        positive: the positive label (None: no threshold).
        cfg: the config (threshold rule, target, direction).
        columns: column -> the validation documents' values (stratify and audit columns).

    Returns:
        The card's validation part.
    """
    columns = columns or {}
    pr = predict(model, texts, positive)
    out: dict[str, Any] = {**_classification(pr, truth, labels), "threshold": None, "threshold_rule": None,
                           "retention_table": [], "calibration": None, "audit": {}, "thresholds_by": {}}
    if positive is None:
        return out
    p = pr.p
    y = np.array([t == positive for t in truth])
    if not y.any():
        logger.warning("no validation document has the positive label %r: its precision/recall are undefined and "
                       "the threshold only sets retention", positive)
    t, met = choose_threshold(p, y, cfg.threshold_rule, cfg.threshold_target, cfg.direction)
    at = metrics_at(p, y, t, cfg.direction)
    if not met:
        logger.warning("no threshold reaches precision >= %s on the validation side; chose the one of the highest "
                       "precision (%.4f)", cfg.threshold_target, at["precision"] or 0.0)
    out["threshold"] = t
    keep = "score >= threshold" if cfg.direction == "min" else "score <= threshold (removes score > threshold)"
    out["threshold_rule"] = {"rule": cfg.threshold_rule, "target": cfg.threshold_target, "target_met": met,
                             "positive_label": positive, "keep": keep, "direction": cfg.direction,
                             "score": f"fastText probability of {LABEL_PREFIX}{positive} (predict k=-1; 0 if absent)"}
    out["metrics"]["at_threshold"] = at
    out["retention_table"] = [metrics_at(p, y, x, cfg.direction) for x in sorted({*TABLE_THRESHOLDS, t})]
    out["calibration"] = calibration(p, y)
    out["audit"] = columns_audit(p, y, columns, t, cfg.direction)
    out["thresholds_by"] = thresholds_by(p, y, columns, cfg.threshold_rule, cfg.threshold_target, cfg.direction)
    return out


def score_test(model: Any, texts: list[str], truth: list[str], labels: list[str], positive: str | None,
               threshold: float | None, cfg: Any,
               columns: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """The held-out test side, scored once with the threshold chosen on validation (nothing is chosen here).

    Args:
        model: the loaded model.
        texts: the test documents.
        truth: their labels.
        labels: every label (sorted).
        positive: the positive label (None: classification metrics only).
        threshold: the validation side's threshold.
        cfg: the config (direction).
        columns: column -> the test documents' values.

    Returns:
        The card's ``test`` part: documents, metrics (and at_threshold), confusion matrix, calibration, audit.
    """
    columns = columns or {}
    pr = predict(model, texts, positive)
    out: dict[str, Any] = {"documents": len(texts), **_classification(pr, truth, labels), "calibration": None,
                           "audit": {}, "threshold": threshold, "scored": "once, after training and choosing the "
                                                                           "threshold on the validation side"}
    if positive is None or threshold is None:
        return out
    y = np.array([t == positive for t in truth])
    out["metrics"]["at_threshold"] = metrics_at(pr.p, y, threshold, cfg.direction)
    out["calibration"] = calibration(pr.p, y)
    out["audit"] = columns_audit(pr.p, y, columns, threshold, cfg.direction)
    return out
