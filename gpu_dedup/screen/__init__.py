"""Benchmark-contamination screening: flag corpus documents that share word n-grams with benchmark items.

    screening   ``screen``: the corpus against a benchmark index, streamed (the policy, the outputs)
    training    ``TrainingScreen``: the training data of a model (train-lm, train-classifier) screened the same way
"""
from .screening import MATCHES_SCHEMA, ScreenConfig, ScreenResult, TextUnit, load_phrases, screen

__all__ = ["MATCHES_SCHEMA", "ScreenConfig", "ScreenResult", "TextUnit", "load_phrases", "screen"]
