"""The S-curve's false-positive and false-negative areas for many (bands, rows) pairs at once (``params``).

With u = s^r, Q = integral_0^theta (1 - s^r)^b ds = (1/r) B(theta^r; 1/r, b + 1), an incomplete beta
function: ``areas`` evaluates it in closed form (a continued fraction, ``_beta_cf``); ``_areas_quadrature``
by Gauss-Legendre quadrature (``gauss_legendre``, ``integrate_curve``), the reference it is tested against
and what the one-pair ``params.false_positive_area`` / ``false_negative_area`` use. NumPy only.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ..errors import RunError


@functools.lru_cache(maxsize=64)
def gauss_legendre(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre nodes (ascending) and weights on [-1, 1], float64 of shape (n,).

    Newton iteration on P_n from the asymptotic root guesses cos(pi (i - 1/4) / (n + 1/2)); O(n^2) per
    sweep instead of the O(n^3) eigenvalue solve of ``numpy.polynomial.legendre.leggauss`` (which takes
    seconds at the n ~ 2000 that num_perm = 4096 needs).
    """
    m = (n + 1) // 2  # non-negative roots, descending; the rest follow by symmetry
    x = np.cos(np.pi * (np.arange(1, m + 1) - 0.25) / (n + 0.5))

    def legendre_and_derivative(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p_prev, p = np.ones_like(x), x.copy()
        for k in range(2, n + 1):
            p_prev, p = p, ((2 * k - 1) * x * p - (k - 1) * p_prev) / k
        return p, n * (x * p - p_prev) / (x * x - 1.0)

    for _ in range(100):
        p, dp = legendre_and_derivative(x)
        dx = p / dp
        x = x - dx
        if np.max(np.abs(dx)) <= 1e-15:
            break
    _, dp = legendre_and_derivative(x)
    w = 2.0 / ((1.0 - x * x) * dp * dp)
    if n % 2:  # the middle root is 0: keep it once
        nodes = np.concatenate((-x, x[-2::-1]))
        weights = np.concatenate((w, w[-2::-1]))
    else:
        nodes = np.concatenate((-x, x[::-1]))
        weights = np.concatenate((w, w[::-1]))
    return nodes, weights


def nodes_for_degree(degree: int) -> int:
    # An n-point rule is exact to degree 2n - 1; 16 is a floor so small cases are not special.
    return max(16, degree // 2 + 1)


def integrate_curve(lo: float, hi: float, bands: np.ndarray, rows: np.ndarray, *, miss: bool,
                     n_nodes: int) -> np.ndarray:
    """Integral over [lo, hi] of P(s) (``miss=False``) or 1 - P(s) (``miss=True``) for each (b, r) pair.

    ``bands``, ``rows``: int64 arrays of shape (m,); returns float64 of shape (m,).
    """
    if hi <= lo:  # an empty interval (the FN area at theta = 1): nothing to integrate, and every node would be lo
        return np.zeros(len(bands), dtype=np.float64)
    x, w = gauss_legendre(n_nodes)
    ws = 0.5 * (hi - lo) * w
    log_s = node_log(lo, hi, x)
    out = np.empty(len(bands), dtype=np.float64)
    for r in np.unique(rows):
        idx = np.flatnonzero(rows == r)
        # log(1 - s^r) = log(-expm1(r log s)): r log s < 0 strictly, so 1 - s^r > 0 and the log is finite even
        # where s itself rounds to 1 (s^r would be 1 and log1p(-1) a division by zero)
        log_keep = np.log(-np.expm1(int(r) * log_s))  # shape (n,)
        for start in range(0, len(idx), 512):  # bounded memory: at most 512 x n values at once
            sel = idx[start:start + 512]
            expo = np.outer(bands[sel].astype(np.float64), log_keep)
            with np.errstate(under="ignore"):  # a probability (or its weighted term) below 1e-308 is 0
                vals = np.exp(expo) if miss else -np.expm1(expo)  # 1 - P computed directly: no cancellation
                out[sel] = vals @ ws
    return out


def node_log(lo: float, hi: float, x: np.ndarray) -> np.ndarray:
    """log s at the nodes s = lo + (hi - lo)(x + 1)/2 of ``x`` (strictly inside (-1, 1)), for 0 <= lo < hi <= 1:
    finite and < 0 at every node, also where s rounds to 0 or 1 in float64. Near 0, log s directly (x + 1 > 0
    is exact); near 1, log1p(-(1 - s)) with 1 - s = (1 - hi) + (hi - lo)(1 - x)/2, which is > 0 (1 - x is)."""
    half = 0.5 * (hi - lo)
    s = lo + half * (x + 1.0)
    out = np.empty_like(s)
    low = s < 0.5
    out[low] = np.log(s[low])
    out[~low] = np.log1p(-((1.0 - hi) + half * (1.0 - x[~low])))
    return out


def _beta_cf(x: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The continued fraction of the incomplete beta function (modified Lentz), vectorized: h with
    B(x; a, b) = x^a (1 - x)^b h / a. Converges quickly for x < (a + 1) / (a + b + 2) (the caller uses
    the symmetry B(x; a, b) = B(a, b) - B(1 - x; b, a) above it): O(sqrt(max(a, b))) terms."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = np.ones_like(x)
    d = 1.0 - qab * x / qap
    d = 1.0 / np.where(np.abs(d) < tiny, tiny, d)
    h = d.copy()
    active = np.ones(x.shape, bool)
    for m in range(1, 100_000):
        m2 = 2.0 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / np.where(np.abs(d) < tiny, tiny, d)
            c = 1.0 + aa / np.where(np.abs(c) < tiny, tiny, c)
            c = np.where(np.abs(c) < tiny, tiny, c)
            step = d * c
            h = np.where(active, h * step, h)
        active &= np.abs(step - 1.0) > 1e-16
        if not active.any():
            return h
    raise RunError("incomplete beta continued fraction did not converge")  # pragma: no cover


def areas(theta: float, bands: np.ndarray, rows: np.ndarray, n_nodes: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(FP, FN) areas for each (b, r) pair in closed form: with u = s^r,

        Q = integral_0^theta (1 - s^r)^b ds = (1/r) B(theta^r; 1/r, b + 1)    (incomplete beta)
        FP = theta - Q,   FN = (1/r) B(1/r, b + 1) - Q = (1/r) B(1 - theta^r; b + 1, 1/r)

    evaluated by the continued fraction (``_beta_cf``) on whichever side converges, so FN (and Q) keep
    their relative precision; FP below ~1e-16·theta is absolute-precision only (it cancels against theta).
    Tested against the Gauss-Legendre quadrature (``integrate_curve``). ``n_nodes`` is unused (kept for
    callers of the quadrature's signature). O(pairs x sqrt(b)) instead of O(pairs x K)."""
    b = bands.astype(np.float64) + 1.0
    a = 1.0 / rows.astype(np.float64)
    with np.errstate(under="ignore", divide="ignore"):
        x = np.power(float(theta), rows.astype(np.float64))
        log1m = np.log1p(-x)
        lower = x < (a + 1.0) / (a + b + 2.0)
        # x^a = theta exactly (a = 1/r): no underflow however large r is
        front = np.exp(b * log1m) * float(theta)
        lbeta = np.array([math.lgamma(ai) + math.lgamma(bi) - math.lgamma(ai + bi) for ai, bi in
                          zip(a.tolist(), b.tolist())], np.float64).reshape(b.shape)
        full = np.exp(lbeta) / rows  # (1/r) B(1/r, b + 1) = integral_0^1 (1 - s^r)^b ds
        q = np.empty_like(b)
        fn = np.empty_like(b)
        lo = np.flatnonzero(lower)
        hi = np.flatnonzero(~lower)
        if lo.size:
            q[lo] = front[lo] * _beta_cf(x[lo], a[lo], b[lo]) / (a[lo] * rows[lo])  # = front * h, a * r = 1
            fn[lo] = full[lo] - q[lo]
        if hi.size:
            fn[hi] = front[hi] * _beta_cf(1.0 - x[hi], b[hi], a[hi]) / (b[hi] * rows[hi])
            q[hi] = full[hi] - fn[hi]
    fp = np.maximum(float(theta) - q, 0.0)
    return fp, np.maximum(fn, 0.0)


def _areas_quadrature(theta: float, bands: np.ndarray, rows: np.ndarray, n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """The same areas by Gauss-Legendre quadrature (the reference the closed form is tested against)."""
    fp = integrate_curve(0.0, theta, bands, rows, miss=False, n_nodes=n_nodes)
    fn = integrate_curve(theta, 1.0, bands, rows, miss=True, n_nodes=n_nodes)
    return fp, fn
