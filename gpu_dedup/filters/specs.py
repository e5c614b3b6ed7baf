"""What a filter flag's value says: ``--classifier NAME=MODEL[:THRESHOLD|:MODE]`` (``parse_classifier`` ->
``ClassifierSpec``, with stochastic ``Retention``), a ``MODEL[:THRESHOLD]`` suffix (``split_threshold``) and
``--domain-threshold NAME:DOMAIN=THRESHOLD`` (``parse_domain_threshold``). ``config`` re-exports them.

A classifier's score column is ``<NAME>_score`` = the model's probability of its positive label, and THRESHOLD
says which documents stay: ``0.5`` or ``min0.5`` keeps scores >= 0.5 (quality), ``max0.3`` keeps scores <= 0.3
(toxicity: "documents that exceed the threshold are discarded"). Without THRESHOLD the model card
(``train-classifier`` or ``calibrate`` writes it) gives it; without a card the score is recorded and nothing is
removed for it.
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from typing import Any, Literal, get_args

from ..config import is_real
from ..errors import ConfigError, MissingFileError

Direction = Literal["min", "max"]
ScoreKind = Literal["label", "expected"]
RetentionKind = Literal["pareto", "linear", "sigmoid"]
NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


def check_prob(owner: str, name: str, value, lo_open: bool = False) -> None:
    if not is_real(value) or not math.isfinite(value) or not (0.0 < value if lo_open else 0.0 <= value) \
            or value > 1.0:
        raise ConfigError(f"{owner}.{name} must be a number in {'(0' if lo_open else '[0'}, 1], got {value!r}")


@dataclass(frozen=True)
class Retention:
    """Stochastic retention of a classifier's documents (GPT-3's rule, as NeMo Curator applies it): a document
    with score s is kept with probability ``prob(s)``, decided by a uniform draw u in [0, 1) fixed by the run's
    seed, the classifier's name and the document's row (``stage.uniform_draws``): kept when u < prob(s).

    pareto (alpha): keep when s > 1 - X, X ~ Lomax(alpha) (numpy's ``pareto``, P(X > x) = (1 + x) ** -alpha),
    so prob(s) = (2 - s) ** -alpha for s <= 1 (1 for s >= 1); u < prob(s) is that draw with
    X = u ** (-1 / alpha) - 1. linear: prob(s) = s clipped to [0, 1]. sigmoid (center, slope):
    prob(s) = 1 / (1 + exp(-slope * (s - center)))."""

    kind: RetentionKind
    alpha: float | None = None
    center: float | None = None
    slope: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in get_args(RetentionKind):
            raise ConfigError(f"Retention.kind must be 'pareto', 'linear' or 'sigmoid', got {self.kind!r}")
        if self.kind == "pareto" and (not is_real(self.alpha) or not math.isfinite(self.alpha) or self.alpha <= 0):
            raise ConfigError(f"pareto alpha must be a finite number > 0 (GPT-3 used 9), got {self.alpha!r}")
        if self.kind == "sigmoid":
            for name in ("center", "slope"):
                v = getattr(self, name)
                if not is_real(v) or not math.isfinite(v):
                    raise ConfigError(f"sigmoid {name} must be a finite number, got {v!r}")
            if self.slope <= 0:
                raise ConfigError(f"sigmoid slope must be > 0 (higher scores kept more often), got {self.slope!r}")

    def prob(self, s):
        """float64 array: the probability of keeping a document of score ``s`` (NaN where s is NaN)."""
        import numpy as np

        s = np.asarray(s, np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            if self.kind == "pareto":
                return np.where(s >= 1.0, 1.0, np.power(2.0 - np.minimum(s, 1.0), -float(self.alpha)))
            if self.kind == "linear":
                return np.clip(s, 0.0, 1.0)
            return 1.0 / (1.0 + np.exp(-float(self.slope) * (s - float(self.center))))

    def formula(self) -> str:
        if self.kind == "pareto":
            return f"keep when score > 1 - X, X ~ Lomax(alpha={self.alpha:g}): P(keep) = (2 - score) ** -{self.alpha:g}"
        if self.kind == "linear":
            return "P(keep) = score (clipped to [0, 1])"
        return f"P(keep) = 1 / (1 + exp(-{self.slope:g} * (score - {self.center:g})))"


@dataclass(frozen=True)
class ClassifierSpec:
    """One learned classifier: ``name`` (column ``<name>_score``), the fastText ``model`` file, the
    ``threshold`` and its ``direction`` (min: keep score >= threshold; max: keep score <= threshold; None:
    take them from the model card, else only record the score) and the positive ``label`` whose
    probability is the score (None: the card's (``card``, else ``<model>.json``), else ``__label__<name>`` when the model has it, else the
    only label of a one-label model, else the one label of a two-label model named like a positive class
    (``train.POSITIVE_NAMES``: 1, hq, pos, positive, good, ...); anything else must be given).
    score: "label" (that probability) or "expected" (an ordinal / multi-class model whose labels are all
    integers, e.g. FineWeb-Edu's 0..5: the score is the expected value sum k * p(k) over every label, and the
    threshold any finite number). retention: keep documents at random with a probability of their score
    (``Retention``) instead of a threshold."""

    name: str
    model: str
    threshold: float | None = None
    direction: Direction = "min"
    label: str | None = None
    score: ScoreKind = "label"
    retention: Retention | None = None
    card: str | None = None  # the model card's path (None: ``<model>.json`` beside the model, when there is one)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not NAME_RE.match(self.name):
            raise ConfigError(f"classifier name {self.name!r} must be lowercase letters, digits and '_' (starting "
                              f"with a letter, at most 40): it names the column <name>_score")
        if self.name in ("lid",):
            raise ConfigError("classifier name 'lid' is taken by --lid; choose another name")
        if not isinstance(self.model, str) or not self.model:
            raise ConfigError(f"classifier {self.name!r}: model must be a file path, got {self.model!r}")
        if self.score not in get_args(ScoreKind):
            raise ConfigError(f"classifier {self.name!r}: score must be 'label' or 'expected', got {self.score!r}")
        if self.threshold is not None and self.score == "expected":
            if not is_real(self.threshold) or not math.isfinite(self.threshold):
                raise ConfigError(f"classifier {self.name!r}: threshold must be a finite number, got "
                                  f"{self.threshold!r}")
        elif self.threshold is not None:
            check_prob(f"classifier {self.name!r}", "threshold", self.threshold)
        if self.retention is not None:
            if not isinstance(self.retention, Retention):
                raise ConfigError(f"classifier {self.name!r}: retention must be a Retention, got {self.retention!r}")
            if self.threshold is not None or self.score != "label":
                raise ConfigError(f"classifier {self.name!r}: stochastic retention ({self.retention.kind}) replaces "
                                  f"the threshold and reads a probability: give it without a threshold and with "
                                  f"score='label'")
        if self.direction not in get_args(Direction):
            raise ConfigError(f"classifier {self.name!r}: direction must be 'min' or 'max', got {self.direction!r}")
        if self.label is not None and (not isinstance(self.label, str) or not self.label):
            raise ConfigError(f"classifier {self.name!r}: label must be a non-empty string, got {self.label!r}")
        if self.card is not None and (not isinstance(self.card, str) or not os.path.isfile(self.card)):
            raise MissingFileError(f"classifier {self.name!r}: model card {self.card!r} does not exist (write one "
                                   f"with `gpu-dedup calibrate MODEL LABELLED -o CARD`)")

    @property
    def column(self) -> str:
        return f"{self.name}_score"


_THRESHOLD = re.compile(r"^(min|max)?([0-9.eE+-]+)$")


def split_threshold(flag: str, text: str, directions: bool = True, shown: str | None = None) -> tuple[str, Any]:
    """``MODEL[:THRESHOLD]`` -> (model path, threshold or None); with ``directions`` THRESHOLD is ``0.5`` /
    ``min0.5`` / ``max0.3`` and the threshold is (value, "min" | "max"), else a plain finite number. A suffix
    after the last ':' that is no threshold is an error saying so (with the forms) unless the whole text is
    an existing file (a path with a colon); then, if the part before it is no file either, that too.
    ``shown``: the flag's whole value, for the message (default ``text``)."""
    forms = "MODEL:0.5, MODEL:min0.5 (keep >=) or MODEL:max0.3 (keep <=)" if directions else "MODEL:1000"
    if flag == "--classifier":
        forms += ("; or MODEL:pareto=9, MODEL:linear, MODEL:sigmoid=0.5,10 (stochastic retention), "
                  "MODEL:expected>=3 (an ordinal model's expected score)")
    elif flag == "--perplexity":
        forms += " (keep <= 1000) or MODEL:keep=0.33 (the lowest-perplexity third)"
    if ":" not in text or os.path.exists(text):
        return text, None
    head, tail = text.rsplit(":", 1)
    if not head:  # ":0.5": the threshold is fine, the model is missing
        raise ConfigError(f"{flag} {shown or text!r}: no model path before ':{tail}'; write {forms}")
    m = _THRESHOLD.match(tail)
    value = None
    if m and (directions or not m.group(1)):
        try:
            value = float(m.group(2))
        except ValueError:
            pass
    if value is None or not math.isfinite(value):
        missing = "" if os.path.exists(head) else f"; and no model file {head!r} exists either"
        raise ConfigError(f"{flag} {shown or text!r}: {tail!r} after the last ':' is not a threshold; write {forms}"
                          f"{missing}")
    return head, ((value, m.group(1) or "min") if directions else value)


_MODE = re.compile(r"^(?:pareto=(?P<alpha>[^,]*)|(?P<linear>linear)|sigmoid=(?P<center>[^,]*),(?P<slope>[^,]*)"
                   r"|(?P<expected>expected)(?:(?P<op>>=|<=)(?P<value>.*))?)$")


def _number(flag: str, text: str, what: str, value: str) -> float:
    try:
        v = float(value)
    except ValueError:
        v = float("nan")
    if not math.isfinite(v):
        raise ConfigError(f"{flag} {text!r}: {what} {value!r} is not a finite number")
    return v


def parse_classifier(text: str) -> ClassifierSpec:
    """Parse one ``--classifier`` value.

    Args:
        text: ``NAME=MODEL[:THRESHOLD]`` with THRESHOLD ``0.5`` / ``min0.5`` (keep >=) or ``max0.3`` (keep <=);
            or ``NAME=MODEL:pareto=ALPHA`` / ``:linear`` / ``:sigmoid=CENTER,SLOPE`` (stochastic retention); or
            ``NAME=MODEL:expected[>=X | <=X]`` (the expected score of an ordinal model).

    Returns:
        The ``ClassifierSpec``.

    Raises:
        ConfigError: the text is not of that form (the message shows the forms).
    """
    if not isinstance(text, str) or "=" not in text:
        raise ConfigError(f"--classifier {text!r}: expected NAME=MODEL[:THRESHOLD], e.g. quality=quality.bin:0.5 "
                          f"or hate=hate.bin:max0.3")
    name, model = text.split("=", 1)
    try:
        model, kw = _classifier_mode(text, model)
        return ClassifierSpec(name=name.strip(), model=model, **kw)
    except ValueError as exc:
        if str(exc).startswith("--classifier "):
            raise
        raise ConfigError(f"--classifier {text!r}: {exc}") from None


def _classifier_mode(text: str, model: str) -> tuple[str, dict[str, Any]]:
    """(model path, ClassifierSpec's threshold / direction / score / retention) of ``MODEL[:MODE]``."""
    kw: dict[str, Any] = {}
    m = _MODE.match(model.rsplit(":", 1)[1]) if ":" in model and not os.path.exists(model) else None
    if m:
        model = model.rsplit(":", 1)[0]
        if m.group("alpha") is not None:
            kw["retention"] = Retention("pareto", alpha=_number("--classifier", text, "pareto alpha",
                                                                m.group("alpha")))
        elif m.group("linear"):
            kw["retention"] = Retention("linear")
        elif m.group("center") is not None:
            kw["retention"] = Retention("sigmoid", center=_number("--classifier", text, "sigmoid center",
                                                                  m.group("center")),
                                        slope=_number("--classifier", text, "sigmoid slope", m.group("slope")))
        else:
            kw["score"] = "expected"
            if m.group("op"):
                kw["threshold"] = _number("--classifier", text, "expected-score threshold", m.group("value"))
                kw["direction"] = "min" if m.group("op") == ">=" else "max"
    else:
        model, t = split_threshold("--classifier", model, shown=text)
        threshold, direction = t if t is not None else (None, "min")
        kw = dict(threshold=threshold, direction=direction)
    return model, kw


def parse_domain_threshold(text: str) -> tuple[str, str, float, str | None]:
    """Parse one ``--domain-threshold`` value.

    Args:
        text: ``NAME:DOMAIN=THRESHOLD``: classifier NAME's threshold for the documents whose domain
            (``FilterConfig.domain_field``'s value, or ``domain_model``'s top label) is DOMAIN; THRESHOLD ``0.6``,
            ``min0.6`` or ``max0.6`` (a direction, when given, must be the classifier's own).

    Returns:
        (classifier name, domain, threshold, direction or None).

    Raises:
        ConfigError: the text is not of that form.
    """
    form = "NAME:DOMAIN=THRESHOLD, e.g. hate:medical=max0.6 or quality:fiction=0.2"
    if not isinstance(text, str) or ":" not in text or "=" not in text.split(":", 1)[1]:
        raise ConfigError(f"--domain-threshold {text!r}: expected {form}")
    name, rest = text.split(":", 1)
    domain, value = rest.rsplit("=", 1)
    m = _THRESHOLD.match(value.strip())
    try:
        t = float(m.group(2)) if m else float("nan")
    except ValueError:
        t = float("nan")
    if not NAME_RE.match(name.strip()) or not domain or not math.isfinite(t):
        raise ConfigError(f"--domain-threshold {text!r}: expected {form}")
    return name.strip(), domain, t, m.group(1)
