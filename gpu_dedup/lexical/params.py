"""Choosing LSH bands x rows for a Jaccard threshold: S-curves, error areas, recommendation (``plan_bands``;
the ``params`` command is gpu_dedup/cli/params.py).

With ``b`` bands of ``r`` rows, two documents with Jaccard similarity ``s`` share at least one band key
with probability ``P(s) = 1 - (1 - s^r)^b`` (the S-curve). For a target threshold ``theta``:

* false-positive area ``FP = integral_0^theta P(s) ds`` (pairs below theta that still become candidates),
* false-negative area ``FN = integral_theta^1 (1 - P(s)) ds`` (pairs above theta that are missed),

and the *balanced* recommendation (``recommend``) minimises ``w_fp * FP + w_fn * FN`` over all
``b * r <= num_perm`` -- the same objective and search space as datasketch's ``MinHashLSH`` (0.8 / 128 -> 9x13,
0.9 / 128 -> 5x25).

With exact-Jaccard verification (the default) the errors cost differently: a false candidate costs one exact
Jaccard computation that rejects it, a missed one leaves a duplicate in the output. ``recommend_verified``
recommends for recall at theta: among the choices with ``P(theta) >= recall`` (0.99 by default; P rises with s,
so every pair at ``J >= theta`` is a candidate with at least that probability), the smallest FP area (fewest
false candidates; ties: fewer hashes), else the highest ``P(theta)``. ``params`` uses it unless ``--no-verify``.

Integration (``sareas``): the areas of every pair at once in closed form, incomplete beta functions
(integral_0^theta (1 - s^r)^b ds = (1/r) B(theta^r; 1/r, b + 1)) by their continued fraction, so K = 9000
(83,358 pairs) takes seconds. The one-pair functions use Gauss-Legendre: ``P`` is a polynomial of degree
``b * r`` in ``s``, so an ``n``-point rule with ``2n - 1 >= b * r`` integrates it exactly (float rounding
~1e-15); the closed form agrees with it to 1e-12 over every pair of K = 256 (tested). Pure numpy.
"""
from __future__ import annotations

import logging
import math
import numbers
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from ..config import PRESETS, RunConfig, is_real
from ..constants import MAX_NUM_PERM
from ..errors import ConfigError, DependencyError
from .sareas import areas, gauss_legendre, integrate_curve, nodes_for_degree  # noqa: F401 (tests use them)

logger = logging.getLogger(__name__)

DEFAULT_SIMS: tuple[float, ...] = (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)
DEFAULT_SE_AT: tuple[float, ...] = (0.5, 0.7, 0.8, 0.9)
DEFAULT_RECALL = 0.99  # P(theta) that recommend_verified asks for
# Same ceiling as MinHashConfig.num_perm; enumerating all (b, r) costs O(K^2 log K) node evaluations.
PLOT_SUFFIXES = (".png", ".svg")


# ----------------------------------------------------------------------------------------------- validation
def _check_theta(theta: float) -> float:
    if not is_real(theta) or not 0.0 < float(theta) < 1.0:
        raise ConfigError(f"threshold (theta) must be a Jaccard similarity in the open interval (0, 1), "
                          f"got {theta!r}; use e.g. 0.8")
    return float(theta)


def _check_positive_int(name: str, v: object) -> int:
    if not isinstance(v, numbers.Integral) or isinstance(v, bool) or int(v) < 1:
        raise ConfigError(f"{name} must be a positive int, got {v!r}")
    return int(v)


def _check_num_perm(num_perm: object) -> int:
    k = _check_positive_int("num_perm", num_perm)
    if k > MAX_NUM_PERM:
        raise ConfigError(f"num_perm must be in [1, {MAX_NUM_PERM}] (MinHashConfig's range), got {num_perm!r}")
    return k


def _check_sims(sims: Sequence[float]) -> tuple[float, ...]:
    out = []
    for s in sims:
        if not is_real(s) or not 0.0 <= float(s) <= 1.0:
            raise ConfigError(f"similarities must be in [0, 1], got {s!r} in sims={tuple(sims)!r}; "
                              "use e.g. 0.5,0.7,0.8,0.9")
        out.append(float(s))
    return tuple(out)


def _check_recall(recall: object) -> float:
    if not is_real(recall) or not 0.0 < float(recall) < 1.0:
        raise ConfigError(f"recall (the P(θ) to reach) must be in the open interval (0, 1), got {recall!r}; "
                          "use e.g. 0.99")
    return float(recall)


def _check_weights(fp_weight: float, fn_weight: float) -> tuple[float, float]:
    for name, w in (("fp_weight", fp_weight), ("fn_weight", fn_weight)):
        if not is_real(w) or float(w) < 0:
            raise ConfigError(f"{name} must be a finite number >= 0, got {w!r}")
    if float(fp_weight) + float(fn_weight) <= 0:
        raise ConfigError(f"fp_weight and fn_weight cannot both be 0, got {fp_weight!r} and {fn_weight!r}; "
                          "use e.g. 0.5 and 0.5")
    return float(fp_weight), float(fn_weight)


# ------------------------------------------------------------------------------------------------ S-curve
def candidate_probability(s: float | np.ndarray, bands: int, rows: int) -> float | np.ndarray:
    """P(candidate) = 1 - (1 - s^r)^b at Jaccard similarity ``s``.

    ``s``: a float or an array of any shape with values in [0, 1]; returns a float for a scalar,
    else a float64 array of the same shape.
    """
    b = _check_positive_int("bands", bands)
    r = _check_positive_int("rows", rows)
    arr = np.asarray(s, dtype=np.float64)
    if arr.size and (np.isnan(arr).any() or arr.min() < 0.0 or arr.max() > 1.0):
        raise ConfigError(f"similarity s must be in [0, 1], got {s!r}")
    # Written as -expm1(b * log1p(-s^r)) so that tiny probabilities (small s, large r) keep full
    # relative precision instead of cancelling in 1 - (1 - tiny)^b. At s = 1 log1p(-1) = -inf -> P = 1.
    with np.errstate(divide="ignore"):
        p = -np.expm1(b * np.log1p(-(arr**r)))
    return float(p) if np.ndim(s) == 0 else p


def threshold_approx(bands: int, rows: int) -> float:
    """The usual rule-of-thumb threshold (1/b)^(1/r).

    It is not where the S-curve is steepest (its inflection point): that is ``steepest_point`` s*, and the
    two differ noticeably for few rows (64 x 2: 0.125 vs 0.089). (1/b)^(1/r) is where s^r = 1/b, i.e. where
    the expected number of colliding bands b·s^r is one.
    """
    b = _check_positive_int("bands", bands)
    r = _check_positive_int("rows", rows)
    return (1.0 / b) ** (1.0 / r)


def steepest_point(bands: int, rows: int) -> float:
    """The inflection point of the S-curve, where P'(s) is largest: s* = ((r - 1) / (b·r - 1))^(1/r).

    From P''(s) = 0 with P'(s) = b·r·s^(r-1)·(1 - s^r)^(b-1). For r = 1 (or b = r = 1) P' is largest at
    s = 0, which the formula gives too (0^1 = 0; 1 x 1: P(s) = s, any s, 0 returned).
    """
    b = _check_positive_int("bands", bands)
    r = _check_positive_int("rows", rows)
    if b * r == 1:
        return 0.0
    return ((r - 1) / (b * r - 1)) ** (1.0 / r)


def slope(s: float | np.ndarray, bands: int, rows: int) -> float | np.ndarray:
    """dP/ds = b·r·s^(r-1)·(1 - s^r)^(b-1) at Jaccard similarity ``s`` (float or array in [0, 1])."""
    b = _check_positive_int("bands", bands)
    r = _check_positive_int("rows", rows)
    arr = np.asarray(s, dtype=np.float64)
    if arr.size and (np.isnan(arr).any() or arr.min() < 0.0 or arr.max() > 1.0):
        raise ConfigError(f"similarity s must be in [0, 1], got {s!r}")
    d = b * r * arr ** (r - 1) * (1.0 - arr**r) ** (b - 1)
    return float(d) if np.ndim(s) == 0 else d


def sharpness(bands: int, rows: int) -> float:
    """The S-curve's maximum slope P'(s*) (at ``steepest_point``): how sharply b x r separates pairs just
    below s* from pairs just above it; a step function would be infinite. 16x8: 4.330, 32x4: 3.676,
    8x16: 7.168, 64x2: 6.903."""
    return float(slope(steepest_point(bands, rows), bands, rows))


def p50(bands: int, rows: int) -> float:
    """The exact similarity where P(s) = 0.5: (1 - 2^(-1/b))^(1/r)."""
    b = _check_positive_int("bands", bands)
    r = _check_positive_int("rows", rows)
    # 1 - 2^(-1/b) = -expm1(-ln 2 / b), precise for large b.
    return (-math.expm1(-math.log(2.0) / b)) ** (1.0 / r)


def s_curve(bands: int, rows: int, n: int = 201) -> tuple[np.ndarray, np.ndarray]:
    """``(s, p)``: ``n`` evenly spaced similarities in [0, 1] and P(s); both float64 of shape (n,)."""
    n = _check_positive_int("n", n)
    if n < 2:
        raise ConfigError(f"n must be >= 2 to span [0, 1], got {n!r}")
    s = np.linspace(0.0, 1.0, n)
    return s, np.asarray(candidate_probability(s, bands, rows))


def standard_error(j: float | np.ndarray, k: int) -> float | np.ndarray:
    """Standard error sqrt(J (1 - J) / K) of the MinHash Jaccard estimate from ``k`` permutations.

    ``j``: float or array in [0, 1]; returns the same kind (float64 array of the same shape).
    """
    k = _check_positive_int("k (num_perm)", k)
    arr = np.asarray(j, dtype=np.float64)
    if arr.size and (np.isnan(arr).any() or arr.min() < 0.0 or arr.max() > 1.0):
        raise ConfigError(f"Jaccard J must be in [0, 1], got {j!r}")
    se = np.sqrt(arr * (1.0 - arr) / k)
    return float(se) if np.ndim(j) == 0 else se


def false_positive_area(theta: float, bands: int, rows: int) -> float:
    """integral_0^theta P(s) ds: how much below-threshold similarity still becomes a candidate."""
    theta = _check_theta(theta)
    b, r = _check_positive_int("bands", bands), _check_positive_int("rows", rows)
    arr_b, arr_r = np.array([b], np.int64), np.array([r], np.int64)
    return float(integrate_curve(0.0, theta, arr_b, arr_r, miss=False, n_nodes=nodes_for_degree(b * r))[0])


def false_negative_area(theta: float, bands: int, rows: int) -> float:
    """integral_theta^1 (1 - P(s)) ds: how much above-threshold similarity is missed."""
    theta = _check_theta(theta)
    b, r = _check_positive_int("bands", bands), _check_positive_int("rows", rows)
    arr_b, arr_r = np.array([b], np.int64), np.array([r], np.int64)
    return float(integrate_curve(theta, 1.0, arr_b, arr_r, miss=True, n_nodes=nodes_for_degree(b * r))[0])


# ------------------------------------------------------------------------------------------------ choices
@dataclass(frozen=True)
class BandChoice:
    """One (bands, rows) choice evaluated at a threshold. ``probabilities`` maps s -> P(s)."""

    bands: int
    rows: int
    threshold_approx: float
    p50: float
    steepest: float   # s*, the inflection point
    sharpness: float  # P'(s*), the maximum slope
    fp_area: float
    fn_area: float
    weighted_error: float
    probabilities: dict[float, float]

    @property
    def hashes(self) -> int:
        """Permutations this choice uses (b * r)."""
        return self.bands * self.rows


def _all_pairs(num_perm: int) -> tuple[np.ndarray, np.ndarray]:
    # Order b ascending, then r ascending -- datasketch's loop order, so a stable sort by error
    # breaks exact ties the same way its strict "<" scan does.
    bands = [b for b in range(1, num_perm + 1) for _ in range(num_perm // b)]
    rows = [r for b in range(1, num_perm + 1) for r in range(1, num_perm // b + 1)]
    return np.asarray(bands, np.int64), np.asarray(rows, np.int64)


def enumerate_choices(theta: float, num_perm: int, sims: Sequence[float] = DEFAULT_SIMS,
                      fp_weight: float = 0.5, fn_weight: float = 0.5) -> list[BandChoice]:
    """Every (b, r) with b, r >= 1 and b * r <= num_perm, sorted by weighted error (best first)."""
    theta = _check_theta(theta)
    k = _check_num_perm(num_perm)
    sims_t = _check_sims(sims)
    fp_weight, fn_weight = _check_weights(fp_weight, fn_weight)
    bands, rows = _all_pairs(k)
    fp, fn = areas(theta, bands, rows)
    err = fp_weight * fp + fn_weight * fn
    # analytically equal errors (1 x 3 and 3 x 1 at theta = 0.5) differ in the last bits: rounded to 1e-12 (the
    # closed form's accuracy is ~1e-13) they tie, and the stable sort keeps (b, r) order for them
    order = np.argsort(np.round(err, 12), kind="stable")
    logger.debug("evaluated %d (b, r) pairs for theta=%s num_perm=%d", len(bands), theta, k)
    # every column at once (the per-pair Python calls, not the areas, were what made K = 4096 slow);
    # the same formulas as threshold_approx, p50, steepest_point, sharpness and candidate_probability
    bf, rf = bands.astype(np.float64), rows.astype(np.float64)
    thr = (1.0 / bf) ** (1.0 / rf)
    half = (-np.expm1(-math.log(2.0) / bf)) ** (1.0 / rf)
    one = bands * rows == 1
    star = np.where(one, 0.0, ((rf - 1.0) / np.where(one, 2.0, bf * rf - 1.0)) ** (1.0 / rf))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        sharp = bf * rf * star ** (rf - 1.0) * (1.0 - star**rf) ** (bf - 1.0)
        probs = [-np.expm1(bf * np.log1p(-(sv ** rf))) for sv in sims_t]
    cols = [x.tolist() for x in (bands, rows, thr, half, star, sharp, fp, fn, err, *probs)]
    out = []
    for i in order.tolist():
        b, r, t, h, st, sh, f1, f2, e = (c[i] for c in cols[:9])
        out.append(BandChoice(bands=b, rows=r, threshold_approx=t, p50=h, steepest=st, sharpness=sh, fp_area=f1,
                              fn_area=f2, weighted_error=e,
                              probabilities={sv: cols[9 + j][i] for j, sv in enumerate(sims_t)}))
    return out


def _pick(choices: list[BandChoice], num_perm: int, require_full_use: bool) -> BandChoice:
    if require_full_use:
        full = [c for c in choices if c.hashes == num_perm]
        return full[0]  # never empty: 1 x K and K x 1 always qualify
    return choices[0]


def _explain(best: BandChoice, theta: float, num_perm: int, fp_weight: float, fn_weight: float,
             require_full_use: bool) -> str:
    b, r = best.bands, best.rows
    probs = f"P(J={theta:g}) = {float(candidate_probability(theta, b, r)):.3f}"
    lower = round(theta - 0.1, 10)  # round: 0.8 - 0.1 prints as 0.7, not 0.7000000000000001
    if lower > 0:
        probs += f" and P(J={lower:g}) = {float(candidate_probability(lower, b, r)):.3f}"
    scope = "with b·r = num_perm" if require_full_use else "with b·r ≤ num_perm"
    text = (f"{b}×{r} minimises {fp_weight:g}·FP + {fn_weight:g}·FN = {best.weighted_error:.5f} "
            f"(FP area {best.fp_area:.5f}, FN area {best.fn_area:.5f}) over all choices {scope} = {num_perm} "
            f"at θ = {theta:g}: candidate probability {probs}, 50% point at J = {best.p50:.3f}. "
            f"It uses {best.hashes} of {num_perm} hashes")
    if best.hashes < num_perm:
        unused = num_perm - best.hashes
        text += f" (set num_perm = {best.hashes} to skip computing the {unused} unused permutations)."
    else:
        text += "."
    return text


def recommend(theta: float, num_perm: int, sims: Sequence[float] = DEFAULT_SIMS, fp_weight: float = 0.5,
              fn_weight: float = 0.5, require_full_use: bool = False) -> tuple[BandChoice, str]:
    """The (b, r) minimising ``fp_weight * FP + fn_weight * FN`` and a one/two-sentence explanation.

    ``require_full_use=False`` searches all b * r <= num_perm (datasketch's rule). ``True`` restricts to
    b * r == num_perm exactly, for when num_perm is fixed (e.g. signatures already computed) and every
    permutation should feed a band; for a prime num_perm that leaves only 1 x K and K x 1, so prefer
    lowering num_perm to the unconstrained optimum's b * r instead (cheaper, and at least as good).
    """
    if not isinstance(require_full_use, bool):
        raise ConfigError(f"require_full_use must be a bool, got {require_full_use!r}")
    choices = enumerate_choices(theta, num_perm, sims, fp_weight, fn_weight)
    best = _pick(choices, int(num_perm), require_full_use)
    return best, _explain(best, float(theta), int(num_perm), float(fp_weight), float(fn_weight), require_full_use)


def recall_order(choices: Sequence[BandChoice], theta: float, recall: float = DEFAULT_RECALL) -> list[BandChoice]:
    """``choices`` in the verification-aware order: those with P(theta) >= recall first, fewest false
    candidates (smallest FP area) first, then fewer hashes; after them the rest, highest P(theta) first."""
    theta, recall = _check_theta(theta), _check_recall(recall)

    def key(c: BandChoice) -> tuple:
        p = float(candidate_probability(theta, c.bands, c.rows))
        return (0, c.fp_area, c.hashes) if p >= recall else (1, -p, c.fp_area, c.hashes)

    return sorted(choices, key=key)


def _explain_verified(best: BandChoice, theta: float, num_perm: int, recall: float, require_full_use: bool) -> str:
    b, r = best.bands, best.rows
    p = float(candidate_probability(theta, b, r))
    scope = "with b·r = num_perm" if require_full_use else "with b·r ≤ num_perm"
    if p >= recall:
        text = (f"{b}×{r} has the fewest false candidates (FP area {best.fp_area:.5f}) among the choices {scope} = "
                f"{num_perm} that make a pair at J = θ = {theta:g} a candidate with probability ≥ {recall:g}: "
                f"P(J={theta:g}) = {p:.4f}")
    else:
        text = (f"no choice {scope} = {num_perm} reaches P(J={theta:g}) ≥ {recall:g}; {b}×{r} comes closest with "
                f"P(J={theta:g}) = {p:.4f} (raise num_perm to reach it)")
    lower = round(theta - 0.1, 10)
    if lower > 0:
        text += f", P(J={lower:g}) = {float(candidate_probability(lower, b, r)):.3f}"
    text += (f", 50% point at J = {best.p50:.3f}. Objective: recall at θ, because exact-Jaccard verification "
             "rejects every false candidate at the cost of one Jaccard computation, while a missed candidate "
             f"leaves a duplicate in the output. It uses {best.hashes} of {num_perm} hashes.")
    return text


def recommend_verified(theta: float, num_perm: int, recall: float = DEFAULT_RECALL,
                       sims: Sequence[float] = DEFAULT_SIMS, require_full_use: bool = False) -> tuple[BandChoice, str]:
    """The verification-aware choice (see the module docstring): P(theta) >= ``recall`` with the smallest FP
    area (the highest P(theta) when none reaches it), and an explanation. ``require_full_use`` as in
    ``recommend``."""
    if not isinstance(require_full_use, bool):
        raise ConfigError(f"require_full_use must be a bool, got {require_full_use!r}")
    best = _pick(recall_order(enumerate_choices(theta, num_perm, sims), theta, recall), int(num_perm), require_full_use)
    return best, _explain_verified(best, float(theta), int(num_perm), float(recall), require_full_use)


def preset_choices(theta: float) -> list[tuple[str, int, int, int, bool, float, float]]:
    """(preset, bands, rows, num_perm, verify, P(theta), FP area at theta) of every ``RunConfig.preset``."""
    theta = _check_theta(theta)
    cfgs = [(name, RunConfig.preset(name)) for name in PRESETS]
    return [(name, c.lsh.bands, c.lsh.rows, c.minhash.num_perm, c.cluster.verify,
             float(candidate_probability(theta, c.lsh.bands, c.lsh.rows)),
             false_positive_area(theta, c.lsh.bands, c.lsh.rows)) for name, c in cfgs]


# -------------------------------------------------------------------------------------------- reporting
def format_table(choices: Sequence[BandChoice], theta: float, sims: Sequence[float], top: int | None = None,
                 *, marks: dict[tuple[int, int], str] | None = None) -> str:
    """Aligned plain-text table of ``choices`` in the given order.

    ``top`` keeps the first ``top`` rows, plus any marked row beyond them (after a ``...`` line).
    ``marks`` maps (b, r) -> a one-character marker; by default the row with the smallest weighted error
    is marked ``*`` (the recommendation when ``choices`` comes from ``enumerate_choices``).
    P(s) columns are computed for ``sims`` directly, so they need not match the choices' ``probabilities``.
    """
    theta = _check_theta(theta)
    sims_t = _check_sims(sims)
    if top is not None:
        top = _check_positive_int("top", top)
    if not choices:
        raise ConfigError("format_table needs at least one choice, got an empty list")
    if marks is None:
        best = min(choices, key=lambda c: c.weighted_error)
        marks = {(best.bands, best.rows): "*"}
    shown = list(choices) if top is None else list(choices[:top])
    extra = [c for c in choices[len(shown):] if (c.bands, c.rows) in marks]

    header = ["", "b", "r", "b·r", "(1/b)^(1/r)", "p50", "s*", "P'(s*)"] + [f"P({s:g})" for s in sims_t] + [
        "FP area", "FN area", "weighted"]

    def row(c: BandChoice) -> list[str]:
        probs = [f"{float(candidate_probability(s, c.bands, c.rows)):.4f}" for s in sims_t]
        return ([marks.get((c.bands, c.rows), ""), str(c.bands), str(c.rows), str(c.hashes),
                 f"{c.threshold_approx:.4f}", f"{c.p50:.4f}", f"{c.steepest:.4f}", f"{c.sharpness:.3f}"] + probs
                + [f"{c.fp_area:.5f}", f"{c.fn_area:.5f}", f"{c.weighted_error:.5f}"])

    body = [row(c) for c in shown]
    gap_at = len(body) if extra else None
    body += [row(c) for c in extra]
    widths = [max(len(x[i]) for x in [header] + body) for i in range(len(header))]

    def fmt(cells: list[str]) -> str:
        first = cells[0].ljust(widths[0])
        return " ".join([first] + [cells[i].rjust(widths[i]) for i in range(1, len(cells))]).rstrip()

    lines = [f"θ = {theta:g}; FP area = ∫₀^θ P(s) ds, FN area = ∫_θ^1 (1 − P(s)) ds; s* = ((r−1)/(b·r−1))^(1/r) is "
             "where the S-curve is steepest (its inflection point; (1/b)^(1/r) is not), P'(s*) its slope there",
             fmt(header),
             fmt([" " * widths[0]] + ["-" * w for w in widths[1:]])]
    for i, cells in enumerate(body):
        if i == gap_at:
            lines.append(fmt([""] + ["..."] + [""] * (len(header) - 2)))
        lines.append(fmt(cells))
    return "\n".join(lines)


def style_s_curve_axes(ax, theta: float) -> None:
    """Threshold line, labels, limits and grid shared by every S-curve plot (here and in the report)."""
    ax.axvline(theta, color="black", linestyle="--", linewidth=1, label=f"θ = {theta:g}")
    ax.set_xlabel("Jaccard similarity s")
    ax.set_ylabel("P(candidate) = 1 − (1 − s^r)^b")
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0.0, 1.02)
    ax.grid(True, alpha=0.3)


def plot_s_curves(choices: Sequence[tuple[int, int]], theta: float, path: str) -> None:
    """Write S-curves of the given (bands, rows) pairs with a vertical line at ``theta``.

    The format follows the suffix of ``path``: ``.png`` or ``.svg``. Needs matplotlib (the ``plot``
    extra); uses the Agg canvas directly so no global pyplot backend is changed.
    """
    theta = _check_theta(theta)
    suffix = Path(path).suffix.lower()
    if suffix not in PLOT_SUFFIXES:
        raise ConfigError(f"plot path must end in .png or .svg, got {str(path)!r}; use e.g. s_curves.png")
    pairs = [(_check_positive_int("bands", b), _check_positive_int("rows", r)) for b, r in choices]
    if not pairs:
        raise ConfigError("plot_s_curves needs at least one (bands, rows) pair, got none")
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:  # optional dependency
        raise DependencyError("plotting S-curves needs matplotlib: pip install 'gpu-dedup[plot]'") from exc

    fig = Figure(figsize=(7.0, 4.5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for b, r in pairs:
        s, p = s_curve(b, r, n=401)
        ax.plot(s, p, label=f"{b}×{r} (p50={p50(b, r):.3f})")
    style_s_curve_axes(ax, theta)
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path, format=suffix[1:])
    logger.info("wrote S-curve plot of %d choices to %s", len(pairs), path)


# ------------------------------------------------------------------------------------------------ the plan
@dataclass(frozen=True)
class BandsPlan:
    """What ``gpu-dedup params`` shows, computed (``plan_bands``): the table's choices in the recommendation's
    order, the recommended and the balanced choice with the reason, and the MinHash standard errors."""

    theta: float
    num_perm: int
    verify: bool
    recall: float
    fp_weight: float
    fn_weight: float
    sims: tuple[float, ...]  # the P(s) columns (theta added when verifying)
    choices: list[BandChoice]
    best: BandChoice
    balanced: BandChoice  # the balanced objective's choice (== best without verification)
    why: str
    requested: BandChoice | None  # the (bands, rows) asked for, with its rank in ``choices`` (1-based)
    requested_rank: int | None
    standard_errors: tuple[tuple[float, float], ...]  # (J, sqrt(J(1-J)/K))


def plan_bands(theta: float, num_perm: int, sims: Sequence[float] = DEFAULT_SIMS, fp_weight: float = 0.5,
               fn_weight: float = 0.5, *, verify: bool = True, recall: float = DEFAULT_RECALL,
               require_full_use: bool = False, requested: tuple[int, int] | None = None,
               se_at: Sequence[float] = DEFAULT_SE_AT) -> BandsPlan:
    """Every (bands, rows) choice for ``theta`` and ``num_perm``, ranked for recall at theta (``verify``, the
    default: ``recommend_verified``) or by the balanced objective (``recommend``).

    Args:
        theta: the Jaccard threshold, in (0, 1).
        num_perm: MinHash permutations K; every choice has bands x rows <= K.
        sims: similarities of the P(s) columns, in [0, 1].
        fp_weight, fn_weight: the balanced objective's weights (>= 0, not both 0).
        verify: rank for recall at theta (candidates are verified by exact Jaccard) instead of balanced.
        recall: with ``verify``, the P(theta) to reach, in (0, 1).
        require_full_use: only choices with bands x rows == K.
        requested: a (bands, rows) pair to report beside the recommendation.
        se_at: Jaccard values of the standard-error lines, in [0, 1].

    Returns:
        The ``BandsPlan``.

    Raises:
        ValueError: a value out of its range, named (e.g. "bands x rows = 20x6 = 120 exceeds num_perm 100").
    """
    theta, k = _check_theta(theta), _check_num_perm(num_perm)
    sims, se_at = _check_sims(sims), _check_sims(se_at)
    fp_w, fn_w = _check_weights(fp_weight, fn_weight)
    recall = _check_recall(recall)
    if requested is not None:
        requested = (_check_positive_int("bands", requested[0]), _check_positive_int("rows", requested[1]))
        if requested[0] * requested[1] > k:
            raise ConfigError(f"bands x rows = {requested[0]}x{requested[1]} = {requested[0] * requested[1]} "
                              f"exceeds num_perm {k}; raise num_perm or lower bands/rows")
    full = bool(require_full_use)
    choices = enumerate_choices(theta, k, sims, fp_w, fn_w)
    balanced = _pick(choices, k, full)
    if verify:  # the table in the recall order, with a P(theta) column
        choices = recall_order(choices, theta, recall)
        sims = tuple(sorted(set(sims) | {theta}))
        best = _pick(choices, k, full)
        why = _explain_verified(best, theta, k, recall, full)
    else:
        best, why = balanced, _explain(balanced, theta, k, fp_w, fn_w, full)
    rank = None if requested is None else \
        next(i for i, c in enumerate(choices, 1) if (c.bands, c.rows) == requested)
    return BandsPlan(theta, k, bool(verify), recall, fp_w, fn_w, sims, choices, best, balanced, why,
                     None if rank is None else choices[rank - 1], rank,
                     tuple((j, float(standard_error(j, k))) for j in se_at))
