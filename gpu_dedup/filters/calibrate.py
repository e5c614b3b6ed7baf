"""Calibrating and auditing any fastText classifier on a labelled sample (``gpu-dedup calibrate``).

002:221 "Never pick a threshold from the paper. Always calibrate on a human-audited sample of 500-1,000 random
positives (discards) and negatives (retains)"; 002:223 "measure false positive rates per demographic group. If they
exceed 3-5x the baseline false positive rate, either adjust the threshold or curate additional training data";
002:224 "apply per-domain thresholds"; 002:231 "use the labels to recalibrate the decision threshold". A model
``train-classifier`` made gets this on its validation side; ``calibrate`` gives it to a model from elsewhere (a
Jigsaw toxicity model, a quality model someone shared), and writes a card ``filter`` reads.

    read       the labelled sample (``labelled.read_labelled``: JSON Lines / Parquet, text and label fields, the
               group and domain columns; newlines become spaces, ``__label__`` tokens are stripped: fastText's
               predict drops them, so the scores are the ones the filter computes)
    score      P(label) of every document by our fastText kernels, as ``filter`` scores it (``FastTextModel.
               label_prob``: the fasttext package's ``predict(k=-1)`` probability); a document with no feature
               has no score: it is counted (``unscored``) and left out (the filter removes it whatever the
               threshold)
    truth      a document is positive when its label is ``positive_value`` (default: the scored label's name)
    threshold  chosen on the sample by ``threshold_rule`` (``validation.choose_threshold``: f1, precision or
               retention target), for ``direction`` min (quality: keep score >= t) or max (a harm: remove score > t)
    measure    reliability table, ECE and Brier (``validation.calibration``); precision, recall, F1, retention
               and false rejection at 0.05 .. 0.95 and at the threshold (``validation.metrics_at``); per value of
               every group column the false rejection (for max: the false-positive rate of the harm label,
               negatives removed; for min: positives removed), its ratio to the whole sample's and an alarm at
               ``audit_ratio`` x or more (``validation.group_audit``); per value of the domain column the threshold
               the rule chooses there (``thresholds_by``)
    write      the card (``train.CARD_FORMAT``, ``kind: "calibration"``): beside the model as ``<model>.json`` (then
               ``filter --classifier NAME=MODEL`` reads it) or anywhere (``filter --classifier-card NAME=CARD``)

Everything is measured on the one sample the threshold is chosen on: confirm it on another sample (a second
``calibrate`` run with ``--threshold`` fixed: ``threshold`` given, nothing chosen).
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from dataclasses import dataclass
from typing import Any, get_args

import numpy as np

from .._version import __version__
from ..config import is_real
from ..constants import LABEL_PREFIX
from ..errors import ConfigError, OutputExistsError
from .labelled import LabelledInputError, read_labelled
from .validation import (AUDIT_RATIO, CALIBRATION_BINS, TABLE_THRESHOLDS, Direction, ThresholdRule, calibration,
                         choose_threshold, columns_audit, metrics_at, thresholds_by)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CalibrateConfig:
    """What ``calibrate`` reads and how it chooses. text_field / label_field: the sample's fields. group_fields:
    columns audited per value (dialect, demographic group, source). domain_field: the column whose values get a
    threshold each (the card's ``thresholds_by[domain_field]``, which ``filter --domain-field`` applies). label:
    the model's label whose probability is the score (None: the only label of a one-label model, else the one
    label of a two-label model named like a positive class, ``train.POSITIVE_NAMES``). positive_value: the
    sample's label that means positive (None: ``label``'s name). direction, threshold_rule, threshold_target: as
    ``train-classifier``'s; threshold: a fixed threshold (nothing is chosen: a second sample confirms one).
    audit_ratio: the alarm's ratio to the whole sample's false-rejection rate (the seed's 3-5x). bins: the
    reliability table's equal-width bins."""

    text_field: str = "text"
    label_field: str = "label"
    group_fields: tuple[str, ...] = ()
    domain_field: str | None = None
    label: str | None = None
    positive_value: str | None = None
    direction: Direction = "min"
    threshold_rule: ThresholdRule = "f1"
    threshold_target: float | None = None
    threshold: float | None = None
    audit_ratio: float = AUDIT_RATIO
    bins: int = CALIBRATION_BINS
    device: str = "auto"

    def __post_init__(self) -> None:
        for name in ("text_field", "label_field"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ConfigError(f"CalibrateConfig.{name} must be a field name, got {getattr(self, name)!r}")
        if isinstance(self.group_fields, str) or not all(isinstance(x, str) and x for x in self.group_fields):
            raise ConfigError(f"CalibrateConfig.group_fields must be a tuple of column names, got {self.group_fields!r}")
        object.__setattr__(self, "group_fields", tuple(self.group_fields))
        if self.direction not in get_args(Direction):
            raise ConfigError(f"CalibrateConfig.direction must be 'min' (keep score >= threshold) or 'max' (remove "
                              f"score > threshold), got {self.direction!r}")
        if self.threshold_rule not in get_args(ThresholdRule):
            raise ConfigError(f"CalibrateConfig.threshold_rule must be one of {get_args(ThresholdRule)}, got "
                              f"{self.threshold_rule!r}")
        if (self.threshold_target is None) != (self.threshold_rule == "f1"):
            raise ConfigError(f"CalibrateConfig.threshold_target is the target of threshold_rule 'precision' or "
                              f"'retention' (a number in (0, 1]) and not given with 'f1'; got rule "
                              f"{self.threshold_rule!r}, target {self.threshold_target!r}")
        if self.threshold_target is not None and (not is_real(self.threshold_target)
                                                  or not 0 < self.threshold_target <= 1):
            raise ConfigError(f"CalibrateConfig.threshold_target must be in (0, 1], got {self.threshold_target!r}")
        if self.threshold is not None and (not is_real(self.threshold) or not 0 <= self.threshold <= 1):
            raise ConfigError(f"CalibrateConfig.threshold must be a probability in [0, 1], got {self.threshold!r}")
        if not is_real(self.audit_ratio) or not self.audit_ratio > 1:
            raise ConfigError(f"CalibrateConfig.audit_ratio must be a number > 1 (the seed says 3-5), got "
                              f"{self.audit_ratio!r}")
        if isinstance(self.bins, bool) or not isinstance(self.bins, int) or self.bins < 2:
            raise ConfigError(f"CalibrateConfig.bins must be an int >= 2, got {self.bins!r}")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ConfigError(f"CalibrateConfig.device must be 'auto', 'cpu' or 'cuda', got {self.device!r}")


def scored_label(model: Any, label: str | None) -> str:
    """The full label (``__label__X``) whose probability is the score: ``label``, else the model's only label,
    else its one label named like a positive class (of two)."""
    from .train import POSITIVE_NAMES

    if label is not None:
        return model.labels[model.label_index(label)]
    if len(model.labels) == 1:
        return model.labels[0]
    named = [x for x in model.labels if x[len(LABEL_PREFIX):].lower() in POSITIVE_NAMES] \
        if len(model.labels) == 2 else []
    if len(named) == 1:
        return named[0]
    raise ConfigError(f"model {model.path} has labels {', '.join(model.labels[:10])}"
                      f"{' ...' if len(model.labels) > 10 else ''}: name the one whose probability is the score "
                      f"with --label (e.g. --label {model.labels[0][len(LABEL_PREFIX):]})")


def calibrate(model_path: str | os.PathLike, inputs: list[str], out: str | os.PathLike | None = None,
              cfg: CalibrateConfig | None = None, *, overwrite: bool = False) -> dict[str, Any]:
    """Score a labelled sample with a fastText model and write its calibration card (module docstring).

    Args:
        model_path: the fastText model (.bin / .ftz).
        inputs: the labelled sample (JSON Lines / Parquet files or directories).
        out: the card's path (None: ``<model>.json``, read by ``filter`` with no more flags).
        cfg: the ``CalibrateConfig``.
        overwrite: replace an existing card.

    Returns:
        The card.

    Raises:
        OutputExistsError: the card exists and ``overwrite`` is False.
        LabelledInputError: a bad labelled row or column, or a sample without positives or negatives.
        ConfigError: a label the model does not have.
    """
    from ..io.discover import file_sha256
    from ..io.write import atomic_path
    from ..runtime.outputs import check_outside_inputs, input_roots
    from ..runtime.run import created, resources, versions
    from .fasttext import load_fasttext
    from .train import CARD_FORMAT, CARD_VERSION, card_path

    cfg = cfg or CalibrateConfig()
    model_path = os.fspath(model_path)
    out = os.fspath(out) if out is not None else card_path(model_path)
    check_outside_inputs({"`out`": out}, input_roots(list(inputs)))
    if os.path.isdir(out):  # not replaceable by a file, with overwrite or without
        raise ConfigError(f"`out` {out!r} is a directory: name the card file to write, e.g. "
                          f"{os.path.join(out, 'card.json')!r}")
    if os.path.exists(out) and not overwrite:
        raise OutputExistsError(f"{out} already exists; pass overwrite=True (--overwrite) to replace it, or choose "
                                f"another card path")
    started = time.time()
    device, _ = resources(cfg.device, None)
    model = load_fasttext(model_path)
    label = scored_label(model, cfg.label)
    columns = {c: "--group-field" for c in cfg.group_fields}
    if cfg.domain_field is not None:
        columns.setdefault(cfg.domain_field, "--domain-field")
    data = read_labelled(list(inputs), text_field=cfg.text_field, label_field=cfg.label_field, group_field=None,
                         columns=columns, label_tokens="strip")
    positive = cfg.positive_value if cfg.positive_value is not None else label[len(LABEL_PREFIX):]
    truth = np.array([x == positive for x in data.labels])
    values = sorted(set(data.labels))
    if truth.all() or not truth.any():
        raise LabelledInputError(f"the {len(truth)} labelled documents are all {'positive' if truth.any() else 'negative'}"
                                 f" (positive: label {positive!r}; labels found: {', '.join(values[:10])}): calibration "
                                 "needs positives and negatives; name the positive label with --positive-value")
    p = np.asarray(model.label_prob(data.texts, label, device=device), np.float64)
    scored = ~np.isnan(p)
    if not scored.all():
        logger.warning("%d of %d labelled documents have no feature the model knows (no score): left out; the filter "
                       "removes such documents whatever the threshold", int((~scored).sum()), len(p))
    p, y = p[scored], truth[scored]
    cols = {c: [v for v, ok in zip(data.columns[c], scored) if ok] for c in columns}
    if cfg.threshold is not None:
        t, met = float(cfg.threshold), True
    else:
        t, met = choose_threshold(p, y, cfg.threshold_rule, cfg.threshold_target, cfg.direction)
    audit = columns_audit(p, y, {c: cols[c] for c in cfg.group_fields}, t, cfg.direction, cfg.audit_ratio)
    alarms = [{"column": c, "value": v, "false_rejection": a["values"][v]["false_rejection"],
               "baseline": a["overall"]["false_rejection"], "rate_ratio": a["values"][v]["rate_ratio"]}
              for c, a in audit.items() for v in a["flagged"]]
    by = thresholds_by(p, y, {cfg.domain_field: cols[cfg.domain_field]}, cfg.threshold_rule, cfg.threshold_target,
                       cfg.direction) if cfg.domain_field is not None else {}
    keep = "score >= threshold" if cfg.direction == "min" else "score <= threshold (removes score > threshold)"
    card = {
        "format": CARD_FORMAT, "format_version": CARD_VERSION, "kind": "calibration",
        "gpu_dedup_version": __version__, "created": created(),
        "model": {"path": os.path.abspath(model_path), "bytes": os.path.getsize(model_path),
                  "sha256": file_sha256(model_path), "labels": list(model.labels), "quantized": model.quantized},
        "positive_label": label[len(LABEL_PREFIX):], "positive_value": positive,
        "threshold": t, "direction": cfg.direction,
        "threshold_rule": {"rule": "fixed" if cfg.threshold is not None else cfg.threshold_rule,
                           "target": cfg.threshold_target, "target_met": met, "keep": keep,
                           "score": f"P({label}) by gpu-dedup's fastText kernels (the fasttext package's predict "
                                    "k=-1 probability), as filter scores the document",
                           "chosen_on": "this sample (no held-out side): confirm on another with --threshold"},
        "thresholds_by": by,
        "metrics": {"at_threshold": metrics_at(p, y, t, cfg.direction)},
        "retention_table": [metrics_at(p, y, x, cfg.direction) for x in sorted({*TABLE_THRESHOLDS, t})],
        "calibration": calibration(p, y, cfg.bins),
        "audit": audit, "alarms": alarms,
        "audit_rule": f"false rejection per value ({'negatives removed: the false-positive rate of the harm label' if cfg.direction == 'max' else 'positives removed'}); "
                      f"an alarm at {cfg.audit_ratio:g}x the whole sample's rate or more (002: 3-5x the baseline)",
        "sample": {"inputs": [dataclasses.asdict(f) for f in data.files], "documents": len(truth),
                   "scored": int(scored.sum()), "unscored": int((~scored).sum()), "positives": int(y.sum()),
                   "negatives": int((~y).sum()), "labels": values,
                   "label_tokens_removed": data.label_tokens_removed,
                   "documents_with_newlines": data.documents_with_newlines},
        "fields": {"text": cfg.text_field, "label": cfg.label_field, "groups": list(cfg.group_fields),
                   "domain": cfg.domain_field},
        "versions": versions(), "seconds": round(time.time() - started, 3),
        "config": {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(cfg).items()},
    }
    for a in alarms:
        logger.warning("ALARM: %s=%r: false rejection %.3f is %.1fx the sample's %.3f (alarm at %gx): adjust the "
                       "threshold for it, or curate more training data for it (002)", a["column"], a["value"],
                       a["false_rejection"], a["rate_ratio"] or float("inf"), a["baseline"] or 0.0, cfg.audit_ratio)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with atomic_path(out) as tmp:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(card, fh, indent=2, allow_nan=False)
            fh.write("\n")
    logger.info("wrote %s", out)
    return card
