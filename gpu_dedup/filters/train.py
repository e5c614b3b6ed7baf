"""Training a fastText classifier with a validation discipline (``gpu-dedup train-classifier``).

``train_classifier(inputs, out, cfg)`` follows the seed's procedure (000 §6-7): it reads labelled documents
(``labelled``: formats, newline and label-token handling, groups, which are required), optionally screens them
against benchmarks (``screen``: 000 §5, "keep tests out of fitting/tuning"), splits them into train, validation
and a held-out test side with no group on two sides (stratified by a column when asked), trains a fastText
supervised model (the ``fasttext`` package, optional extra ``gpu-dedup[train]``), evaluates it on the
validation side with the package's own ``predict``, chooses a threshold there by a stated rule, scores the
test side once with that threshold, and writes the model with a JSON card beside it (``<model>.json``, e.g.
``model.bin.json``) that ``read_card`` returns: metrics, calibration, per-group retention and false rejection.

Split
    Each group's key is hashed with BLAKE2b-64 of ``"<seed>\\0<group>"`` (not Python's salted ``hash()``), and
    the groups are visited in hash order, first for the test side (``test_fraction``), then, among the groups
    left, for the validation side: a group joins a side when that keeps the side within ``round(fraction *
    documents)`` documents; if no group fits, the smallest group left (first in hash order) is the side. With
    ``stratify_field`` (source / language / domain) each group belongs to the stratum most of its documents
    have (ties: the first value in sorted order), and the filling runs per stratum with ``round(fraction *
    documents of the stratum)``, so every stratum is represented on each side in proportion (as far as whole
    groups allow); the card gives every side's per-label and per-stratum counts. Same input and seed, same
    split, on any machine.

Test side
    Nothing is chosen on it: the model is trained on the train side, the threshold (and the per-value
    thresholds) on the validation side, and the test side is scored once at the end with them; the card
    reports it separately (``test``).

Calibration (``calibration``)
    Of the positive label's score: a reliability table of ``CALIBRATION_BINS`` equal-width bins (bin
    ``min(floor(score * 10), 9)``: [0, 0.1), ..., [0.9, 1.0]) with each bin's documents, mean score and
    fraction positive; ECE = sum over bins of (documents / N) * |fraction positive - mean score|; Brier =
    mean of (score - truth)^2 (truth 1 for the positive label, else 0).

Per-group audit (``audit``; 000 §6 "audit per-domain false rejection", 002 §21.2.2)
    For the stratify column and every ``audit_fields`` column, per value, on the validation and test sides:
    documents, retention at the threshold and the false-rejection rate: for ``direction="min"`` (the filter
    keeps score >= threshold: a quality model) the fraction of positive documents removed; for ``"max"``
    (the filter removes score > threshold: a toxicity model) the fraction of negative documents removed (the
    false-positive rate of the harm label). A value whose rate is at least ``AUDIT_RATIO`` (3, the seed's
    "3-5x the baseline") times the side's overall rate is listed in ``flagged`` and logged. The card's
    ``thresholds_by`` gives, per value of those columns, the threshold the rule chooses on that value's
    validation documents alone (None where the value lacks a positive or a negative document), for both
    directions.

Determinism
    fastText's training is deterministic for a fixed ``seed`` only with one thread (its Hogwild SGD threads
    race on the shared weights), so ``threads`` defaults to 1; more threads train faster and log a warning
    that the model and its metrics then vary from run to run. Product quantization uses fastText's fixed seed.
    fastText runs in a child process (the same interpreter and ``fasttext`` module) whose allocations start
    zeroed, so that builds which leave part of the initial matrix uninitialized stay deterministic (``_train``).

Threshold
    The score of a document is fastText's probability of the positive label (``predict(k=-1)``; 0 when it is
    not returned). ``direction="min"``: the filter keeps a document when ``score >= threshold`` (the positive
    label is the one kept); ``"max"``: it removes it when ``score > threshold`` (the positive label is the
    one removed, e.g. ``toxic``). The predicted-positive set is ``score >= threshold`` (min) or ``score >
    threshold`` (max). Candidate thresholds are the midpoints between consecutive distinct validation scores
    (and half the lowest score: all predicted positive; for max also the midpoint of the highest score and
    1: none), so each candidate is a distinct set and no validation score sits on a threshold. Rules: ``f1``
    (default): the highest F1 of the positive label (ties: the higher threshold); ``precision``: among the
    thresholds with precision >= target, the one with the most predicted positive (if none reaches it: the
    highest precision, and the card says ``target_met: false``); ``retention``: the threshold that removes
    the most while keeping at least the target fraction.
    The positive label is ``positive_label``, or, for two labels, the one named like a positive class
    (``1``, ``hq``, ``pos``, ``positive``, ``good``, ``keep``, ``true``, ``yes``, ``high``); otherwise set it.
    With more than two labels and no positive label there is no threshold (confusion matrix and per-label
    metrics only).
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np

from .._version import __version__
from ..config import did_you_mean, is_int, is_real
from ..errors import ConfigError, DataError, DependencyError, MissingFileError, OutputExistsError, RunError, UsageError
from ..runtime.heartbeat import phase, ticking
from ..runtime.outputs import check_outside_inputs, input_roots
from ..io.discover import file_sha256
from ..io.write import atomic_path
from .cards import format_summary  # noqa: F401 (the train-classifier command imports it from here)
from ..runtime.run import created, versions
from .head import HEAD_L2, refit_head
from .labelled import (DEFAULT_GROUP_FIELD, LABEL_PREFIX, LabelledData, LabelledInputError, LabelTokens, choose_bucket,
                       read_labelled)
from .validation import (SIDES, TEST, TRAIN, VALIDATION, Direction, ThresholdRule, assign_sides,  # noqa: F401
                         calibration, choose_threshold, evaluate, group_audit, score_test, side_summary, split_groups)

logger = logging.getLogger(__name__)

Loss = Literal["softmax", "hs", "ova"]
CARD_FORMAT = "gpu_dedup-classifier-card"
CARD_VERSION = 2  # 2: test side, calibration, per-group audit, direction, screening
CARD_VERSIONS_READ = (1, 2)  # a version-1 card has the threshold and direction the filter reads
POSITIVE_NAMES = ("1", "hq", "pos", "positive", "good", "keep", "true", "yes", "high")
INSTALL_HINT = 'pip install "gpu-dedup[train]"'


class TrainDependencyError(DependencyError):
    """The optional ``fasttext`` package (extra ``gpu-dedup[train]``) is not installed."""


class TrainingError(RunError):
    """fastText could not train or quantize the model; the message says what to change."""


def _fasttext() -> Any:
    try:
        import fasttext
    except ImportError as e:
        raise TrainDependencyError(f"training a classifier needs the fastText package: {INSTALL_HINT} "
                                   f"(installs fasttext-community; import failed: {e})") from e
    return fasttext


def card_path(model_path: str | os.PathLike) -> str:
    """The card of a model: its path + ``.json`` (``model.bin`` -> ``model.bin.json``)."""
    return os.fspath(model_path) + ".json"


@dataclass(frozen=True)
class TrainClassifierConfig:
    """What ``train_classifier`` reads, how it splits, trains (fastText hyper-parameters, fastText's names in
    comments where they differ) and chooses the threshold. Defaults: the seed's procedure (000:267
    ``train_supervised(lr=.5, epoch=10, wordNgrams=2, dim=100, thread=1)``), with ``bucket=None``: the hashed
    n-gram rows are chosen from the training data (``labelled.bucket_from_data``), not fastText's 2,000,000,
    which at dim 100 writes an 800 MB model even for a thousand documents. ``label_tokens``: a text holding a
    ``__label__`` token is refused, as the seed's procedure does (000:264, "reserved training label spelling in
    text"), or ("strip") the tokens are removed and counted. ``head_of``: keep that fastText model's input matrix
    and dictionary and fit only a new output layer on the labels (``head.refit_head``; ``head_l2`` its L2 weight;
    the fastText hyper-parameters are then the base model's)."""

    text_field: str = "text"
    label_field: str = "label"
    group_field: str | None = DEFAULT_GROUP_FIELD  # None: train without groups (each document its own)
    stratify_field: str | None = None  # the column validation and test are stratified by
    audit_fields: tuple[str, ...] = ()  # more columns for per-group retention / false rejection
    validation_fraction: float = 0.1
    test_fraction: float = 0.1  # the held-out test side, scored once at the end (0: none)
    seed: int = 0  # the split's hash and fastText's seed
    threads: int = 1  # fastText is deterministic only with 1
    epoch: int = 10  # the seed's (000:267); fastText's own default is 5
    lr: float = 0.5  # the seed's (000:267); fastText's own default is 0.1
    dim: int = 100
    word_ngrams: int = 2  # wordNgrams
    minn: int = 0
    maxn: int = 0
    bucket: int | None = None  # None: from the training data (bucket_from_data)
    loss: Loss = "softmax"
    min_count: int = 1  # minCount
    quantize: bool = False  # product-quantize (qnorm) and write a .ftz
    cutoff: int = 0  # with quantize: keep this many input rows (0: all), then retrain
    positive_label: str | None = None
    threshold_rule: ThresholdRule = "f1"
    threshold_target: float | None = None  # precision or retention target for those rules
    direction: Direction = "min"  # min: keep score >= threshold; max: remove score > threshold (toxicity)
    screen: tuple[str, ...] = ()  # benchmark files: training documents sharing an n-gram with one are refused
    screen_drop: bool = False  # ... or dropped and listed in the card
    label_tokens: LabelTokens = "refuse"  # a "__label__" token in a text: refused (the seed's) or stripped
    head_of: str | None = None  # fit only a new output layer of this model (its embeddings frozen)
    head_l2: float = HEAD_L2  # the output layer's L2 weight (relative to the hidden vectors' scale)

    def __post_init__(self) -> None:
        def bad(name: str, want: str) -> ValueError:
            return ConfigError(f"TrainClassifierConfig.{name} must be {want}, got {getattr(self, name)!r}")

        optional = ("group_field", "positive_label", "stratify_field")
        for name in ("text_field", "label_field", *optional):
            v = getattr(self, name)
            if not (isinstance(v, str) and v.strip()) and not (v is None and name in optional):
                raise bad(name, "a non-empty string" + (" or None" if name in optional else ""))
        for name in ("audit_fields", "screen"):
            v = getattr(self, name)
            if not isinstance(v, (tuple, list)):
                raise bad(name, "a tuple of " + ("column names" if name == "audit_fields" else "file paths"))
            if not all(isinstance(x, (str, os.PathLike)) and os.fspath(x).strip() for x in v):
                raise bad(name, "non-empty strings")
            object.__setattr__(self, name, tuple(os.fspath(x) for x in v))
        if self.screen_drop and not self.screen:
            raise ConfigError("TrainClassifierConfig.screen_drop=True drops the documents that `screen` flags: "
                              "give the benchmark files with screen=(FILE, ...), or leave screen_drop out")
        if not isinstance(self.screen_drop, bool):
            raise bad("screen_drop", "a bool")
        if self.direction not in get_args(Direction):
            raise ConfigError(f"TrainClassifierConfig.direction must be one of {get_args(Direction)} (min: keep "
                              f"score >= threshold; max: remove score > threshold), got {self.direction!r}"
                              + did_you_mean(self.direction, get_args(Direction)))
        if self.positive_label is not None:
            if self.positive_label.startswith(LABEL_PREFIX):
                object.__setattr__(self, "positive_label", self.positive_label[len(LABEL_PREFIX):])
            if not self.positive_label or any(c.isspace() for c in self.positive_label):
                raise bad("positive_label", "a label name without whitespace (with or without '__label__')")
        if not is_real(self.validation_fraction) or not 0 < self.validation_fraction < 1:
            raise bad("validation_fraction", "a number in (0, 1), e.g. 0.1")
        if not is_real(self.test_fraction) or not 0 <= self.test_fraction < 1:
            raise bad("test_fraction", "a number in [0, 1), e.g. 0.1 (0: no test side)")
        if self.validation_fraction + self.test_fraction >= 1:
            raise ConfigError(f"TrainClassifierConfig.validation_fraction ({self.validation_fraction}) + "
                              f"test_fraction ({self.test_fraction}) must be below 1: the rest is the training side")
        if not is_int(self.seed) or not 0 <= self.seed < 2**31:
            raise bad("seed", "an int in [0, 2**31) (fastText's seed is a C int)")
        for name in ("threads", "epoch", "dim", "word_ngrams", "min_count"):
            if not is_int(getattr(self, name)) or getattr(self, name) < 1:
                raise bad(name, "a positive int")
        for name in ("minn", "maxn", "bucket", "cutoff"):
            if (not is_int(getattr(self, name)) or getattr(self, name) < 0) and not (name == "bucket"
                                                                                     and self.bucket is None):
                raise bad(name, "an int >= 0" + (" or None (from the data)" if name == "bucket" else ""))
        if self.minn > self.maxn:
            raise ConfigError(f"TrainClassifierConfig.minn ({self.minn}) must be <= TrainClassifierConfig.maxn "
                              f"({self.maxn}); char n-grams of minn..maxn characters are used (maxn=0: none)")
        if self.bucket == 0 and (self.word_ngrams > 1 or self.maxn > 0):
            raise ConfigError("TrainClassifierConfig.bucket must be >= 1 when word_ngrams > 1 or maxn > 0 (word and "
                              "char n-grams are hashed into bucket rows); e.g. bucket=2000000")
        if not is_real(self.lr) or self.lr <= 0:
            raise bad("lr", "a positive number, e.g. 0.1")
        if self.loss not in get_args(Loss):
            raise ConfigError(f"TrainClassifierConfig.loss must be one of {get_args(Loss)}, got {self.loss!r}"
                              + did_you_mean(self.loss, get_args(Loss)))
        if not isinstance(self.quantize, bool):
            raise bad("quantize", "a bool")
        if self.label_tokens not in get_args(LabelTokens):
            raise ConfigError(f"TrainClassifierConfig.label_tokens must be one of {get_args(LabelTokens)} (refuse: a "
                              f"text holding __label__ is an error, as the seed's procedure; strip: the tokens are "
                              f"removed and counted), got {self.label_tokens!r}")
        if self.head_of is not None:
            if not isinstance(self.head_of, (str, os.PathLike)) or not os.path.isfile(self.head_of):
                raise MissingFileError(f"TrainClassifierConfig.head_of: model file {self.head_of!r} does not exist "
                                       "(a fastText .bin or .ftz whose output layer is refitted)")
            object.__setattr__(self, "head_of", os.fspath(self.head_of))
            if self.quantize:
                raise ConfigError("TrainClassifierConfig.head_of refits a model's output layer and keeps its input "
                                  "matrix as it is (quantized in a .ftz): quantize=True does not apply; drop it")
        if not is_real(self.head_l2) or not self.head_l2 > 0:
            raise bad("head_l2", "a number > 0, e.g. 0.001")
        if self.cutoff and not self.quantize:
            raise ConfigError(f"TrainClassifierConfig.cutoff={self.cutoff} prunes a quantized model: set "
                              "quantize=True, or cutoff=0")
        if self.threshold_rule not in get_args(ThresholdRule):
            raise ConfigError(f"TrainClassifierConfig.threshold_rule must be one of {get_args(ThresholdRule)}, "
                              f"got {self.threshold_rule!r}" + did_you_mean(self.threshold_rule,
                                                                            get_args(ThresholdRule)))
        if self.threshold_rule == "f1":
            if self.threshold_target is not None:
                raise ConfigError(f"TrainClassifierConfig.threshold_target={self.threshold_target!r} is only used "
                                  "by threshold_rule 'precision' or 'retention'; drop it or choose one of those")
        elif not is_real(self.threshold_target) or not 0 < self.threshold_target <= 1:
            raise bad("threshold_target", f"a number in (0, 1] for threshold_rule={self.threshold_rule!r} "
                      "(e.g. 0.9)")

    def hyperparameters(self) -> dict[str, Any]:
        """The fastText ``train_supervised`` arguments (fastText's names) this config trains with."""
        return {"epoch": self.epoch, "lr": self.lr, "dim": self.dim, "wordNgrams": self.word_ngrams,
                "minn": self.minn, "maxn": self.maxn, "bucket": self.bucket, "loss": self.loss,
                "minCount": self.min_count, "seed": self.seed, "thread": self.threads}


def _positive(cfg: TrainClassifierConfig, classes: list[str]) -> str | None:
    if cfg.positive_label is not None:
        if cfg.positive_label not in classes:
            same = [c for c in classes if c.lower() == cfg.positive_label.lower()]  # labels are case-sensitive
            hint = f"; did you mean {same[0]!r}?" if same else did_you_mean(cfg.positive_label, classes)
            raise ConfigError(f"positive_label {cfg.positive_label!r} is not a label of the input (labels: "
                              f"{', '.join(classes)}){hint}")
        return cfg.positive_label
    if len(classes) != 2:
        return None
    named = [c for c in classes if c.lower() in POSITIVE_NAMES]
    if len(named) != 1:
        raise ConfigError(f"two labels, {classes[0]!r} and {classes[1]!r}, and no positive_label: set "
                          "positive_label=NAME, the label the filter keeps")
    logger.info("positive label: %r (named like a positive class; set positive_label to choose)", named[0])
    return named[0]


def _model_path(out: str | os.PathLike, cfg: TrainClassifierConfig) -> str:
    path = os.path.abspath(os.fspath(out))
    if cfg.head_of is not None:  # the base's input matrix, quantized or not: any of its suffixes
        return path if os.path.splitext(path)[1] else path + (os.path.splitext(cfg.head_of)[1] or ".bin")
    want = ".ftz" if cfg.quantize else ".bin"
    suffix = os.path.splitext(path)[1].lower()
    if suffix in (".bin", ".ftz") and suffix != want:
        raise ConfigError(f"output {os.fspath(out)!r}: a {'quantized' if cfg.quantize else 'full'} model is a "
                          f"{want} file; name it {os.path.splitext(os.fspath(out))[0] + want!r}"
                          + ("" if cfg.quantize else " (or set quantize=True for a .ftz)"))
    return path if suffix else path + want


# The training child: fastText trains (and quantizes) and saves the model; errors go to stderr as one JSON line.
_CHILD = r"""
import json, sys
spec = json.loads(sys.argv[1])
sys.path.insert(0, spec["path"])
stage = "import"
try:
    import fasttext
    stage = "train"
    model = fasttext.train_supervised(input=spec["input"], verbose=0, **spec["kwargs"])
    if spec["quantize"]:
        stage = "quantize"
        model.quantize(input=spec["input"] if spec["cutoff"] else None, qnorm=True, cutoff=spec["cutoff"],
                       retrain=bool(spec["cutoff"]))
    stage = "save"
    model.save_model(spec["output"])
except Exception as e:
    sys.stderr.write("\nGPU_DEDUP_TRAIN_ERROR " + json.dumps({"stage": stage, "message": str(e)}) + "\n")
    sys.exit(3)
"""
_ERROR_TAG = "GPU_DEDUP_TRAIN_ERROR "


def _zeroed_env() -> dict[str, str]:
    """The child's environment: glibc returns every allocation zero-filled (perturb byte 255 fills allocations
    with 255 ^ 0xff = 0; the per-thread cache, which skips that, is off)."""
    env = dict(os.environ)
    env["MALLOC_PERTURB_"] = "255"
    tunables = "glibc.malloc.perturb=255:glibc.malloc.tcache_count=0"
    env["GLIBC_TUNABLES"] = f"{env['GLIBC_TUNABLES']}:{tunables}" if env.get("GLIBC_TUNABLES") else tunables
    return env


def _train(ft: Any, train_file: str, model_file: str, cfg: TrainClassifierConfig) -> None:
    """Train (and quantize) in a child process and save the model at ``model_file``.

    Why a child: fastText's ``DenseMatrix::uniform`` with one thread initializes only the first tenth of the
    input matrix, and some builds of the ``fasttext`` module do not zero the allocation behind the rest. With
    fasttext-numpy2 0.10.4 (which the project used before fasttext-community) 20 of 20 in-process trainings of a
    200-word model hit "Encountered NaN" and the surviving models differed run to run. A fresh process whose
    allocations glibc zero-fills gives those rows the zeros upstream fastText's zero-initialized matrix has (0 of
    20 failures, bit-identical models); fasttext-community initializes every row and is unaffected. The child
    also keeps an out-of-memory kill from taking the caller down. On a C library without these settings the
    child runs unchanged."""
    spec = {"input": train_file, "output": model_file, "kwargs": cfg.hyperparameters(), "quantize": cfg.quantize,
            "cutoff": cfg.cutoff, "path": os.path.dirname(os.path.dirname(os.path.abspath(ft.__file__)))}
    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(spec)], env=_zeroed_env(),
                          capture_output=True, text=True, errors="replace")
    if proc.returncode == 0 and os.path.exists(model_file):
        return
    err = next((json.loads(line[len(_ERROR_TAG):]) for line in proc.stderr.splitlines()
                if line.startswith(_ERROR_TAG)), None)
    if err is None:
        rows = "(words + bucket)" if cfg.bucket else "words"
        raise TrainingError(f"the fastText training process ended with status {proc.returncode} "
                            f"({proc.stderr.strip()[-300:] or 'no message'}); a killed process is usually out of "
                            f"memory: the input matrix takes {rows} x dim x 4 bytes (bucket={cfg.bucket}, "
                            f"dim={cfg.dim})")
    msg = err["message"]
    if err["stage"] == "train" and "NaN" in msg:
        raise TrainingError(f"fastText training diverged ({msg}) with lr={cfg.lr}, epoch={cfg.epoch}: lower lr "
                            f"(e.g. lr={cfg.lr / 4:g})")
    if err["stage"] == "quantize":
        raise TrainingError(f"fastText quantization failed: {msg}. Product quantization needs at least 256 "
                            "input rows (vocabulary + bucket): raise bucket (with word_ngrams >= 2 or maxn > 0), "
                            "or set quantize=False")
    raise TrainingError(f"fastText {err['stage']} failed: {msg}")


def _columns(cfg: TrainClassifierConfig) -> dict[str, str]:
    """The columns to read: column -> the option that asked for it (stratify first, then the audit fields)."""
    cols = {}
    if cfg.stratify_field is not None:
        cols[cfg.stratify_field] = "stratify_field"
    for c in cfg.audit_fields:
        cols.setdefault(c, "audit_fields")
    return cols


def _screen(data: LabelledData, cfg: TrainClassifierConfig) -> dict[str, Any] | None:
    """Screen every labelled document against ``cfg.screen`` (refuse, or drop them from ``data``)."""
    if not cfg.screen:
        return None
    import pyarrow as pa

    from ..screen.training import TrainingScreen

    scr = TrainingScreen(cfg.screen, drop=cfg.screen_drop, option="screen")
    keep = scr.check(pa.array(data.texts, pa.large_string()), lambda i: data.where[i])
    scr.verdict("labelled documents")
    if not keep.all():
        idx = np.flatnonzero(keep).tolist()
        for name in ("texts", "labels", "groups", "where"):
            setattr(data, name, [getattr(data, name)[i] for i in idx])
        data.columns = {c: [v[i] for i in idx] for c, v in data.columns.items()}
    return scr.record()


def train_classifier(inputs: list[str], out: str, cfg: TrainClassifierConfig, *,
                     overwrite: bool = False) -> dict[str, Any]:
    """Train a fastText classifier: read, screen, split, train, evaluate on validation, score the test side, write.

    The model and its card ``<model>.json`` are written atomically: a failed run leaves neither.

    Args:
        inputs: the labelled files (JSON Lines, Parquet or fastText .txt).
        out: the model path: ``.bin``, or ``.ftz`` when quantized (added when ``out`` has no suffix).
        cfg: the ``TrainClassifierConfig``.
        overwrite: replace an existing model or card.

    Returns:
        The card: split sizes, threshold, metrics, calibration, audit, test side, screening, versions.

    Raises:
        UsageError: ``cfg`` is not a ``TrainClassifierConfig``.
        OutputExistsError: the model or card exists and ``overwrite`` is False.
        ConfigError: ``out`` at or under an input (the tool never writes into its inputs).
        LabelledInputError: a bad labelled row, no groups, a missing column (the message names the file and
            line, the option and the fields present).
        ContaminatedTrainingError: a labelled document shares an n-gram with a ``screen`` benchmark and
            ``screen_drop`` is off.
        TrainDependencyError: the ``fasttext`` package (the ``train`` extra) is missing.
        TrainingError: fastText could not train or quantize.
    """
    if not isinstance(cfg, TrainClassifierConfig):
        raise UsageError(f"cfg must be a TrainClassifierConfig, got {type(cfg).__name__}")
    check_outside_inputs({"`out`": out}, input_roots(list(inputs)) + input_roots(list(cfg.screen)))
    model_path = _model_path(out, cfg)
    for p in (model_path, card_path(model_path)):
        if os.path.exists(p) and not overwrite:
            raise OutputExistsError(f"{p} already exists; pass overwrite=True to replace it, "
                                    "or choose another output")
    ft = _fasttext()
    started = time.time()
    data = read_labelled(inputs, text_field=cfg.text_field, label_field=cfg.label_field,
                         group_field=cfg.group_field, columns=_columns(cfg), label_tokens=cfg.label_tokens)
    screened = _screen(data, cfg)
    classes = sorted(set(data.labels))
    if len(classes) < 2:
        raise LabelledInputError(f"every one of the {len(data)} documents has the label {classes[0]!r}: a classifier "
                                 "needs at least two labels; add documents of the other class(es)")
    positive = _positive(cfg, classes)
    strata = data.columns.get(cfg.stratify_field) if cfg.stratify_field is not None else None
    sides = assign_sides(data.groups, cfg.validation_fraction, cfg.seed, test_fraction=cfg.test_fraction,
                         strata=strata)
    val, test, trn = sides == VALIDATION, sides == TEST, sides == TRAIN
    summary = {name: side_summary(data.labels, data.groups, sides == k, strata) for k, name in enumerate(SIDES)}
    train_side, val_side = summary["train"], summary["validation"]
    if len(train_side["per_label"]) < 2:
        raise LabelledInputError(
            f"the training side holds only label(s) {list(train_side['per_label'])} ({train_side['documents']} "
            f"documents in {train_side['groups']} groups): too few documents or groups for the validation and test "
            "sides; add labelled documents of every class in more groups, or try another seed")
    only_val = sorted((set(val_side["per_label"]) | set(summary["test"]["per_label"]))
                      - set(train_side["per_label"]))
    if only_val:
        logger.warning("label(s) %s occur only on the validation / test side: the model cannot predict them", only_val)
    if cfg.threads > 1:
        logger.warning("training with %d threads: fastText is deterministic only with threads=1, so this model and "
                       "its metrics will vary from run to run", cfg.threads)
    logger.info("split: train %d documents (%d groups), validation %d (%d groups), test %d (%d groups)",
                train_side["documents"], train_side["groups"], val_side["documents"], val_side["groups"],
                summary["test"]["documents"], summary["test"]["groups"])
    bucket_from = None  # how the bucket was chosen, for the card (None: given)
    if cfg.bucket is None and cfg.head_of is None:
        bucket, bucket_from = choose_bucket([data.texts[i] for i in np.flatnonzero(trn)], cfg)
        cfg = dataclasses.replace(cfg, bucket=bucket)
    os.makedirs(os.path.dirname(model_path), exist_ok=True)

    def part(mask: np.ndarray) -> tuple[list[str], list[str], dict[str, list[str]]]:
        idx = np.flatnonzero(mask)
        return ([data.texts[i] for i in idx], [data.labels[i] for i in idx],
                {c: [v[i] for i in idx] for c, v in data.columns.items()})

    # The training lines go next to the model (same file system, usually more room than /tmp); the leading dot
    # hides the directory from input discovery.
    with tempfile.TemporaryDirectory(prefix=".gpu-dedup-train-", dir=os.path.dirname(model_path)) as tmpdir:
        train_file = os.path.join(tmpdir, "train.txt")
        with open(train_file, "w", encoding="utf-8", newline="\n") as fh:
            for i in np.flatnonzero(trn):
                fh.write(f"{LABEL_PREFIX}{data.labels[i]} {data.texts[i]}\n")
        trained = os.path.join(tmpdir, "model" + os.path.splitext(model_path)[1])
        t0 = time.time()
        head = None
        if cfg.head_of is not None:  # the base's embeddings, a new output layer fitted on the training side
            head = refit_head(cfg.head_of, [data.texts[i] for i in np.flatnonzero(trn)],
                              [data.labels[i] for i in np.flatnonzero(trn)], trained, l2=cfg.head_l2)
        else:
            with ticking(logger, f"training fastText on {train_side['documents']:,} documents ({cfg.epoch} epochs, "
                                 f"dim {cfg.dim}, bucket {cfg.bucket:,}{', then quantizing' if cfg.quantize else ''})"):
                _train(ft, train_file, trained, cfg)
        train_seconds = time.time() - t0
        phase(logger, "evaluating the model on the validation side (%s documents)%s", f"{val_side['documents']:,}",
              " and scoring the test side" if test.any() else "")
        model = ft.load_model(trained)  # evaluate the very file that is shipped
        ev = evaluate(model, *part(val)[:2], classes, positive, cfg, part(val)[2])
        tested = (score_test(model, *part(test)[:2], classes, positive, ev["threshold"], cfg, part(test)[2])
                  if test.any() else None)
        with atomic_path(model_path) as tmp_model:
            os.replace(trained, tmp_model)
            card = _card(cfg, data, model, model_path, tmp_model, ev, classes, positive, summary, tested, screened, head,
                         train_seconds, time.time() - started)
            card["training"]["bucket_from_data"] = bucket_from
            with atomic_path(card_path(model_path)) as tmp_card:
                with open(tmp_card, "w", encoding="utf-8") as fh:
                    json.dump(card, fh, indent=2, allow_nan=False)
                    fh.write("\n")
    logger.info("wrote %s and %s", model_path, card_path(model_path))
    return card


def _card(cfg: TrainClassifierConfig, data: LabelledData, model: Any, model_path: str, written: str,
          ev: dict[str, Any], classes: list[str], positive: str | None, sides: dict[str, dict],
          tested: dict[str, Any] | None, screened: dict[str, Any] | None, head: Any, train_seconds: float,
          seconds: float) -> dict[str, Any]:
    a = model.f.getArgs()
    effective = {"dim": a.dim, "epoch": a.epoch, "lr": a.lr, "wordNgrams": a.wordNgrams, "minn": a.minn,
                 "maxn": a.maxn, "bucket": a.bucket, "minCount": a.minCount, "loss": a.loss.name,
                 "seed": a.seed, "thread": a.thread}
    return {
        "format": CARD_FORMAT, "format_version": CARD_VERSION,
        "gpu_dedup_version": __version__, "created": created(),
        "model": {"path": model_path, "bytes": os.path.getsize(written), "sha256": file_sha256(written),
                  "quantized": cfg.quantize, "words": len(model.words)},
        "labels": classes, "positive_label": positive,
        "threshold": ev["threshold"], "direction": cfg.direction,  # min: keep score >= t; max: keep score <= t
        "threshold_rule": ev["threshold_rule"],
        "thresholds_by": ev["thresholds_by"],
        "metrics": ev["metrics"], "confusion_matrix": ev["confusion_matrix"],
        "retention_table": ev["retention_table"],
        "calibration": ev["calibration"], "audit": ev["audit"],
        "test": tested,
        "split": {"rule": "group-disjoint, BLAKE2b-64(seed, group) order; test then validation filled up to "
                          "round(fraction * documents)" + (" per stratum (a group's stratum: the value most of its "
                                                          "documents have)" if cfg.stratify_field else ""),
                  "seed": cfg.seed, "validation_fraction": cfg.validation_fraction,
                  "test_fraction": cfg.test_fraction, "stratified_by": cfg.stratify_field,
                  "groups_from": data.groups_from, **sides},
        "groups": {"required": True, "used": cfg.group_field is not None, "field": cfg.group_field,
                   "without_groups": None if cfg.group_field is not None else
                   "trained without groups (group_field=None, --no-group-field): each document is its own group, "
                   "so near-copies can sit on both sides and the metrics can be optimistic"},
        "screen": screened,
        "preprocessing": {"newlines": "replaced by spaces (fastText trains on one line per document)",
                          "documents_with_newlines": data.documents_with_newlines,
                          "label_tokens_removed": data.label_tokens_removed,
                          "empty_documents": data.empty_documents},
        "training": {"hyperparameters": cfg.hyperparameters() if head is None else None,
                     "effective_args": effective,
                     "head_of": None if head is None else {
                         "model": cfg.head_of, "sha256": file_sha256(cfg.head_of), "l2": cfg.head_l2,
                         "rule": "the base model's input matrix and words kept; a softmax output layer fitted to "
                                 "the training side (filters/head.py)", **head.describe()},
                     "deterministic": cfg.threads == 1, "seconds": round(train_seconds, 3),
                     "total_seconds": round(seconds, 3),
                     "quantization": ({"qnorm": True, "cutoff": cfg.cutoff, "retrain": bool(cfg.cutoff)}
                                      if cfg.quantize else None)},
        "inputs": [dataclasses.asdict(f) for f in data.files],
        "fields": {"text": cfg.text_field, "label": cfg.label_field, "group": cfg.group_field,
                   "stratify": cfg.stratify_field, "audit": list(cfg.audit_fields)},
        "versions": versions(modules=("fasttext",)),
        "config": {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(cfg).items()},
    }


def read_card(model_path: str | os.PathLike, card: str | os.PathLike | None = None) -> dict[str, Any] | None:
    """Read the card of a model: the one ``train_classifier`` (or ``calibrate``) wrote beside it, or ``card``.

    Args:
        model_path: the model file (its card is ``<model>.json``).
        card: the card's path instead (``calibrate -o CARD``; filter's --classifier-card).

    Returns:
        The card, or None when there is none.

    Raises:
        DataError: the file is not a card of this tool, of a format this version reads, or of this model file
            (its size differs).
    """
    path = os.fspath(card) if card is not None else card_path(model_path)
    if not os.path.exists(path):
        if card is not None:
            raise DataError(f"model card {path} does not exist; write one with `gpu-dedup calibrate`")
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            card = json.load(fh)
    except (OSError, ValueError) as e:
        raise DataError(f"{path}: not a readable classifier card ({e}); delete it or retrain the model") from None
    if not isinstance(card, dict) or card.get("format") != CARD_FORMAT:
        fmt = card.get("format") if isinstance(card, dict) else None
        raise DataError(f"{path}: not a gpu-dedup classifier card (format {fmt!r}); "
                        "give the threshold explicitly (NAME=MODEL:THRESHOLD) or move the file")
    if card.get("format_version") not in CARD_VERSIONS_READ:
        raise DataError(f"{path}: card format_version {card.get('format_version')!r}; this gpu-dedup reads "
                        f"version {CARD_VERSION}: retrain with this version or give the threshold explicitly")
    size = os.path.getsize(model_path) if os.path.exists(model_path) else None
    if size is not None and size != card["model"]["bytes"]:
        raise DataError(f"{path} describes a model of {card['model']['bytes']} bytes but {os.fspath(model_path)} "
                        f"has {size}: the card is stale; retrain, or give the threshold explicitly")
    return card
