"""Refitting only the output layer of a fastText classifier on new labels (``train-classifier --head-of MODEL``).

002:175 "fine-tune a new output layer on dialect-specific data (Wikipedia, CommonVoice transcripts) while keeping
the base embeddings frozen"; 002:231 "either fine-tune the classifier's output layer or use the labels to
recalibrate the decision threshold ... it is the classification boundary that shifts with domain".

    hidden     each labelled document's hidden vector under the base model (``FastTextModel.hidden``: the mean of
               the input rows of its words, n-grams and ``</s>``, what fastText's predict multiplies by the output
               matrix); the input matrix and the dictionary of words are never changed
    fit        a softmax output layer W (labels x dim, no bias: fastText's) minimizing the mean cross-entropy of
               the labels plus ``c / 2 * ||W||^2`` with c = l2 * lambda, lambda = lambda_max(H^T H / n) for the
               hidden vectors H (n x dim), so that ``l2`` means the same whatever the scale of the embeddings
               (``fit_head``): a strictly convex problem, solved by Nesterov's accelerated gradient with the
               constant step 1 / L, L = lambda / 2 + c (the softmax Hessian's largest eigenvalue is at most 1/2),
               from W = 0, until the gradient's largest entry is below ``tol`` times its largest entry at W = 0:
               one answer whatever the machine, and its optimality is checkable (the gradient at it)
    write      the base model file with the new labels (dictionary order: most documents first, ties by name, as
               fastText orders labels), loss = softmax and W as a dense output matrix (``fasttext_format.
               write_model``); a quantized (.ftz) base keeps its quantized input matrix

The result is an ordinary fastText model: the ``fasttext`` package and ``filter`` load it.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..constants import LABEL_PREFIX
from ..errors import ConfigError

logger = logging.getLogger(__name__)

HEAD_L2 = 1e-3  # the default L2 weight (relative to lambda_max(H^T H / n)): W stays finite on separable labels
HEAD_TOL = 1e-6  # the fit stops when the gradient's largest entry is below this times its largest at W = 0
HEAD_MAX_ITER = 20_000
SOFTMAX = 3  # fastText's loss code (fasttext_format.LOSS_NAMES)


@dataclass
class HeadFit:
    """The fitted output layer: ``weights`` float64 (labels, dim), ``labels`` (names without the prefix, in the
    written order), the objective and the largest gradient entry at the end, iterations, and whether it met
    the tolerance."""

    weights: np.ndarray
    labels: list[str]
    penalty: float
    loss: float
    gradient: float
    iterations: int
    converged: bool

    def describe(self) -> dict[str, Any]:
        return {"labels": self.labels, "l2_penalty": self.penalty, "objective": self.loss, "max_gradient": self.gradient,
                "iterations": self.iterations, "converged": self.converged}


def _objective(w: np.ndarray, h: np.ndarray, y: np.ndarray, l2: float) -> tuple[float, np.ndarray]:
    """(mean cross-entropy + l2/2 ||W||^2, its gradient) of W (L, d) on hidden vectors h (n, d), labels y (n,)."""
    z = h @ w.T
    z -= z.max(axis=1, keepdims=True)
    e = np.exp(z)
    s = e.sum(axis=1, keepdims=True)
    p = e / s
    n = len(y)
    loss = float(np.mean(np.log(s[:, 0]) - z[np.arange(n), y])) + 0.5 * l2 * float(np.sum(w * w))
    p[np.arange(n), y] -= 1.0
    return loss, p.T @ h / n + l2 * w


def fit_head(hidden: np.ndarray, y: np.ndarray, classes: int, l2: float = HEAD_L2, tol: float = HEAD_TOL,
             max_iter: int = HEAD_MAX_ITER) -> tuple[np.ndarray, float, float, float, int, bool]:
    """(W float64 (classes, d), the penalty c, objective, largest gradient entry, iterations, converged): the
    minimizer of the module docstring's objective for hidden vectors ``hidden`` (n, d) and label indexes ``y``
    int (n,)."""
    h = np.asarray(hidden, np.float64)
    n, d = h.shape
    lam = float(np.linalg.eigvalsh(h.T @ h / max(n, 1))[-1])
    c = l2 * lam if lam > 0 else l2  # all-zero hidden vectors (no known feature): any c, W = 0 is optimal
    lip = 0.5 * lam + c
    momentum = (np.sqrt(lip / c) - 1) / (np.sqrt(lip / c) + 1)  # Nesterov's for a c-strongly convex objective
    w = np.zeros((classes, d))
    v = w.copy()
    loss, grad = _objective(w, h, y, c)
    stop = tol * float(np.abs(grad).max())
    it = 0
    for it in range(1, max_iter + 1):
        if np.abs(grad).max() <= stop:
            break
        w_next = v - _objective(v, h, y, c)[1] / lip
        v = w_next + momentum * (w_next - w)
        w = w_next
        loss, grad = _objective(w, h, y, c)
    gmax = float(np.abs(grad).max())
    return w, c, loss, gmax, it, gmax <= stop


def refit_head(base: str, texts: list[str], labels: list[str], out: str, *, l2: float = HEAD_L2,
               device: str = "cpu") -> HeadFit:
    """Write to ``out`` the model ``base`` with its output layer refitted on ``labels`` (module docstring).

    Args:
        base: a fastText supervised model (.bin or .ftz).
        texts: the training documents (one line each).
        labels: their labels (names without the ``__label__`` prefix).
        out: the new model's path.
        l2: the L2 weight of the output layer (> 0).
        device: where the hidden vectors are computed.

    Returns:
        The ``HeadFit``.

    Raises:
        ConfigError: fewer than two labels, or an ``l2`` that is not > 0.
    """
    from .fasttext import load_fasttext
    from .fasttext_format import Matrix, read_model, write_model

    if not l2 > 0:
        raise ConfigError(f"head_l2 must be > 0 (the output layer's L2 weight, e.g. {HEAD_L2}), got {l2!r}")
    counts: dict[str, int] = {}
    for lab in labels:
        counts[lab] = counts.get(lab, 0) + 1
    names = sorted(counts, key=lambda x: (-counts[x], x))  # fastText's label order: most frequent first
    if len(names) < 2:
        raise ConfigError(f"refitting an output layer needs at least two labels, got {names}")
    index = {x: i for i, x in enumerate(names)}
    hidden, _ = load_fasttext(base).hidden(texts, device=device)
    w, c, loss, gmax, it, ok = fit_head(hidden, np.array([index[x] for x in labels], np.int64), len(names), l2)
    if not ok:
        logger.warning("the output layer's fit stopped after %d iterations with a largest gradient entry of %.3g "
                       "(relative tolerance %.1g): raise head_l2 to make the problem better conditioned", it, gmax,
                       HEAD_TOL)
    mf = read_model(base)
    mf.words = mf.words[:mf.nwords] + [(LABEL_PREFIX + x).encode("utf-8") for x in names]
    mf.counts = np.concatenate([mf.counts[:mf.nwords], [counts[x] for x in names]]).astype(np.int64)
    mf.types = np.concatenate([mf.types[:mf.nwords], np.ones(len(names), np.int8)])
    mf.nlabels = len(names)
    mf.args = {**mf.args, "loss": SOFTMAX}
    mf.version = 12
    mf.output = Matrix(len(names), mf.output.n, dense=w.astype(np.float32))
    write_model(mf, out)
    return HeadFit(w, names, c, loss, gmax, it, ok)
