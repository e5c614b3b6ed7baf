"""Filtering: the half of the pipeline that asks "is this document good enough?" rather than "have we seen
it?". Language identification and learned classifiers (fastText models, run by our own kernels), n-gram
language-model perplexity (KenLM / ARPA), importance resampling (DSIR) and heuristic rules (Gopher, C4,
FineWeb, character and URL rules), each a
score column of ``scores.parquet`` that ``gpu-dedup filter`` thresholds and ``--keep max:/min:<column>``
uses to choose which duplicate survives.

One module per stage, in the order data passes:

    config       FilterConfig, ClassifierSpec (NAME=MODEL[:THRESHOLD]), DomainConfig
    fasttext     fastText .bin / .ftz inference on CPU and GPU (kernels/fasttext*.py); fasttext_format parses
    train        train-classifier: the seed's procedure, fastText training, card (labelled reads the input)
    head         train-classifier --head-of: a new output layer on a model's frozen embeddings
    validation   its split (group-disjoint, stratified, test side), threshold rules, calibration, per-group audit
    calibrate    calibrate: any classifier scored on a labelled sample, its card (threshold, ECE, alarms, domains)
    cards        the cards' human-readable summaries
    lm           n-gram LM contract, ARPA read/write, perplexity scoring (kernels/lm*.py)
    kneser_ney   train-lm: exact n-gram counts, interpolated modified Kneser-Ney
    dsir         hashed n-gram features (kernels/features*.py), importance weights, Gumbel top-k
    dsir_step    DSIR as a step of the filter run: the target fitted (and screened), the selection pass
    rules        heuristic rules: RulesConfig and its presets, Gopher's statistics, decisions
    rulesets     C4, FineWeb, character and URL rule statistics; URL blocklist files
    domain       script pre-filter, code / math detectors (kernels/domain*.py)
    scorers      the models of one run, loaded once; a batch of text -> score columns
    selection    rank selection and CCNet buckets, stochastic-retention draws, percentile audit picks, the
                 selections' record and the retained words per stage / language / domain
    paragraphs   --unit paragraph: paragraph-level perplexity / LID tests and cuts (--paragraph-action remove)
    stage        filter_corpus: the pass, the decisions (reason = the column that rejected), outputs
    prefilter    filter inside dedup's pass 1 (``run --lid/--classifier/...``): one read
    report       report.html of a filter run
    cli          the filter, train-classifier, calibrate and train-lm commands

The public names are importable from here; each module is imported on first use, so importing the package
(and the CLI) loads neither numba nor a model.
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "FilterConfig": "config", "ClassifierSpec": "config", "DomainConfig": "config", "parse_classifier": "config",
    "filter_corpus": "stage", "FilterResult": "stage",
    "load_fasttext": "fasttext", "FastTextModel": "fasttext", "FastTextFormatError": "fasttext",
    "train_classifier": "train", "TrainClassifierConfig": "train", "read_card": "train",
    "format_summary": "cards", "format_calibration": "cards",
    "calibrate": "calibrate", "CalibrateConfig": "calibrate", "refit_head": "head",
    "load_lm": "lm", "NgramLM": "lm", "LMNormalization": "lm", "ARPAError": "arpa",
    "train_lm": "kneser_ney", "LMTrainConfig": "kneser_ney", "DiscountError": "kneser_ney",
    "DSIRConfig": "dsir", "RulesConfig": "rules", "rule_scores": "rules", "rule_decisions": "rules",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
