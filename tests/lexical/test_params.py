"""Tests for gpu_dedup.lexical.params: goldens computed by hand, areas checked against scipy quad and a closed form."""
from __future__ import annotations

import argparse
import math
import re

import numpy as np
import pytest

from gpu_dedup.lexical import params as P
from gpu_dedup.cli import params as params_cli

integrate = pytest.importorskip("scipy.integrate")


# ------------------------------------------------------------------------------------------ hand goldens
@pytest.mark.parametrize("b,r,expected", [
    (16, 8, math.sqrt(0.5)),      # (1/16)^(1/8) = 2^(-4/8) = 0.70711
    (32, 4, 2 ** (-5 / 4)),       # 2^(-5/4) = 0.42045
    (8, 16, 2 ** (-3 / 16)),      # 2^(-3/16) = 0.87810
])
def test_threshold_approx(b: int, r: int, expected: float) -> None:
    assert P.threshold_approx(b, r) == pytest.approx(expected, rel=1e-12)


def test_threshold_approx_four_decimals() -> None:
    assert round(P.threshold_approx(16, 8), 4) == 0.7071
    assert round(P.threshold_approx(32, 4), 4) == 0.4204
    assert round(P.threshold_approx(8, 16), 4) == 0.8781


# The seed's four band choices (000 §3): the maximum slope of the S-curve, four decimals from the issue.
@pytest.mark.parametrize("b,r,expected", [(16, 8, 4.330), (32, 4, 3.676), (8, 16, 7.168), (64, 2, 6.903)])
def test_sharpness_at_the_seed_choices(b: int, r: int, expected: float) -> None:
    assert round(P.sharpness(b, r), 3) == expected


@pytest.mark.parametrize("b,r", [(16, 8), (32, 4), (8, 16), (64, 2), (20, 5), (14, 8), (1, 7), (9, 1)])
def test_steepest_point_is_the_numeric_argmax_of_the_slope(b: int, r: int) -> None:
    # independent of the closed form: central differences of P on a fine grid, then their argmax
    s = np.linspace(0.0, 1.0, 200_001)
    p = P.candidate_probability(s, b, r)
    d = np.gradient(p, s)
    assert P.steepest_point(b, r) == pytest.approx(s[np.argmax(d)], abs=2e-5)
    assert P.sharpness(b, r) == pytest.approx(d.max(), rel=1e-4)
    inner = slice(1, -1)  # np.gradient is one-sided at the ends
    np.testing.assert_allclose(P.slope(s[inner], b, r), d[inner], rtol=1e-3, atol=1e-6)


def test_rule_of_thumb_is_not_the_inflection_point() -> None:
    assert P.threshold_approx(64, 2) == pytest.approx(0.125)
    assert P.steepest_point(64, 2) == pytest.approx(math.sqrt(1 / 127))
    assert abs(P.threshold_approx(64, 2) - P.steepest_point(64, 2)) > 0.03
    assert P.steepest_point(1, 1) == 0.0 and P.sharpness(1, 1) == 1.0  # P(s) = s
    with pytest.raises(ValueError, match="similarity s must be in"):
        P.slope(1.5, 2, 2)


def test_fineweb_14x8_probabilities() -> None:
    # By hand: 0.8^8 = 0.16777; 1 - that = 0.83223; ^14 = 0.07645 -> P = 0.924.
    assert round(P.candidate_probability(0.8, 14, 8), 3) == 0.924
    # 0.7^8 = 0.05765; (0.94235)^14 = 0.43550 -> 0.565.   0.5^8 = 1/256; (255/256)^14 = 0.94668 -> 0.053.
    assert round(P.candidate_probability(0.7, 14, 8), 3) == 0.565
    assert round(P.candidate_probability(0.5, 14, 8), 3) == 0.053


def test_candidate_probability_vectorised_and_endpoints() -> None:
    s = np.array([[0.0, 0.5], [0.8, 1.0]])
    p = P.candidate_probability(s, 14, 8)
    assert isinstance(p, np.ndarray) and p.shape == (2, 2) and p.dtype == np.float64
    assert p[0, 0] == 0.0 and p[1, 1] == 1.0
    assert p[1, 0] == pytest.approx(1 - (1 - 0.8**8) ** 14, rel=1e-14)
    assert isinstance(P.candidate_probability(0.3, 2, 3), float)
    ss, pp = P.s_curve(9, 13, n=11)
    assert ss.shape == pp.shape == (11,) and np.all(np.diff(pp) >= 0)
    # Tiny probabilities keep relative precision (naive 1 - (1 - x)^b would lose it): x = 1e-20, b = 3.
    assert P.candidate_probability(1e-4, 3, 5) == pytest.approx(3e-20, rel=1e-12)


def test_p50_16x8_by_hand() -> None:
    # 2^(-1/16) = 0.9576033; 1 - that = 0.0423967; ^(1/8) = 0.6736224.
    assert P.p50(16, 8) == pytest.approx(0.6736224, abs=1e-7)
    assert P.candidate_probability(P.p50(16, 8), 16, 8) == pytest.approx(0.5, abs=1e-13)
    assert P.candidate_probability(P.p50(500, 3), 500, 3) == pytest.approx(0.5, abs=1e-13)


def test_standard_error() -> None:
    # sqrt(0.8 * 0.2 / 128) = sqrt(0.00125) = 0.035355
    assert round(P.standard_error(0.8, 128), 5) == 0.03536
    se = P.standard_error(np.array([0.0, 0.5, 1.0]), 100)
    np.testing.assert_allclose(se, [0.0, 0.05, 0.0])


# -------------------------------------------------------------------------------------------------- areas
def _quad_fp(theta: float, b: int, r: int) -> float:
    return integrate.quad(lambda s: 1 - (1 - s**r) ** b, 0.0, theta, epsabs=1e-12, epsrel=1e-12, limit=200)[0]


def _quad_fn(theta: float, b: int, r: int) -> float:
    return integrate.quad(lambda s: (1 - s**r) ** b, theta, 1.0, epsabs=1e-12, epsrel=1e-12, limit=200)[0]


@pytest.mark.parametrize("theta,b,r", [(0.8, 9, 13), (0.8, 14, 8), (0.5, 20, 5), (0.9, 5, 25), (0.3, 64, 2),
                                       (0.7, 1, 1), (0.95, 1, 100), (0.05, 100, 1)])
def test_areas_match_quad(theta: float, b: int, r: int) -> None:
    assert P.false_positive_area(theta, b, r) == pytest.approx(_quad_fp(theta, b, r), abs=1e-9)
    assert P.false_negative_area(theta, b, r) == pytest.approx(_quad_fn(theta, b, r), abs=1e-9)


@pytest.mark.parametrize("b,r", [(1, 1), (3, 7), (64, 64), (1, 4096), (4096, 1), (163, 25)])
def test_areas_match_beta_closed_form(b: int, r: int) -> None:
    # integral_0^1 (1 - s^r)^b ds = B(1/r, b + 1) / r  (substitute u = s^r), so for any theta
    # FP(theta) + (1 - theta) - FN(theta) = integral_0^1 P = 1 - B(1/r, b + 1) / r. Covers degree up to 4096.
    log_beta = math.lgamma(1 / r) + math.lgamma(b + 1) - math.lgamma(1 / r + b + 1)
    total = 1 - math.exp(log_beta) / r
    for theta in (0.3, 0.8):
        got = P.false_positive_area(theta, b, r) + (1 - theta) - P.false_negative_area(theta, b, r)
        assert got == pytest.approx(total, abs=1e-10)


def test_gauss_legendre_rule() -> None:
    for n in (16, 41):
        x, w = P.gauss_legendre(n)
        xr, wr = np.polynomial.legendre.leggauss(n)
        np.testing.assert_allclose(x, xr, atol=1e-14)
        np.testing.assert_allclose(w, wr, atol=1e-14)
    x, w = P.gauss_legendre(1025)  # exact to degree 2049: integral_{-1}^{1} x^2048 = 2 / 2049
    assert float(w @ x**2048) == pytest.approx(2 / 2049, rel=1e-10)


# ------------------------------------------------------------------------------------------ enumeration
def _brute_force_optimum(theta: float, k: int) -> tuple[int, int]:
    """Independent: datasketch's loop (b asc, r asc, strict <) with quad areas, weights 0.5 / 0.5."""
    best, opt = float("inf"), (0, 0)
    for b in range(1, k + 1):
        for r in range(1, k // b + 1):
            err = 0.5 * _quad_fp(theta, b, r) + 0.5 * _quad_fn(theta, b, r)
            if err < best:
                best, opt = err, (b, r)
    return opt


@pytest.mark.parametrize("theta,k,documented", [(0.8, 128, (9, 13)), (0.9, 128, (5, 25))])
def test_recommend_matches_brute_force_and_datasketch(theta: float, k: int, documented: tuple[int, int]) -> None:
    best, why = P.recommend(theta, k)
    assert (best.bands, best.rows) == documented
    assert _brute_force_optimum(theta, k) == documented
    assert best.weighted_error == pytest.approx(0.5 * _quad_fp(theta, *documented) + 0.5 * _quad_fn(theta, *documented),
                                                abs=1e-9)
    used = documented[0] * documented[1]
    assert f"{used} of {k} hashes" in why
    assert f"P(J={theta:g}) = {P.candidate_probability(theta, *documented):.3f}" in why
    assert f"P(J={theta - 0.1:.1f}) = {P.candidate_probability(theta - 0.1, *documented):.3f}" in why
    assert f"{P.p50(*documented):.3f}" in why


@pytest.mark.parametrize("theta,k,fp_w,fn_w", [(0.5, 64, 0.5, 0.5), (0.7, 100, 0.3, 0.7)])
def test_recommend_matches_datasketch(theta: float, k: int, fp_w: float, fn_w: float) -> None:
    lsh = pytest.importorskip("datasketch.lsh")
    best, _ = P.recommend(theta, k, fp_weight=fp_w, fn_weight=fn_w)
    assert (best.bands, best.rows) == lsh._optimal_param(theta, k, fp_w, fn_w)


@pytest.mark.parametrize("k", range(1, 13))
def test_enumerate_count_and_order(k: int) -> None:
    expected = {(b, r) for b in range(1, k + 1) for r in range(1, k + 1) if b * r <= k}
    choices = P.enumerate_choices(0.6, k)
    assert len(choices) == len(expected)
    assert {(c.bands, c.rows) for c in choices} == expected
    errs = [c.weighted_error for c in choices]
    assert errs == sorted(errs)
    c = choices[0]
    assert c.probabilities[0.8] == pytest.approx(P.candidate_probability(0.8, c.bands, c.rows))
    assert c.weighted_error == pytest.approx(0.5 * c.fp_area + 0.5 * c.fn_area)


def test_require_full_use() -> None:
    best, why = P.recommend(0.8, 128, require_full_use=True)
    assert best.bands * best.rows == 128
    full = [c for c in P.enumerate_choices(0.8, 128) if c.hashes == 128]
    assert best.weighted_error == min(c.weighted_error for c in full)
    assert "128 of 128 hashes" in why


# ------------------------------------------------------------------------- verification-aware recommendation
def _brute_force_recall(theta: float, k: int, recall: float = 0.99) -> tuple[int, int]:
    """Independent: closed-form P(theta) and quad FP areas; smallest FP area among P(theta) >= recall, ties by
    fewer hashes; none reaching it: the highest P(theta)."""
    pairs = [(b, r) for b in range(1, k + 1) for r in range(1, k // b + 1)]
    prob = {(b, r): 1 - (1 - theta**r) ** b for b, r in pairs}
    ok = [br for br in pairs if prob[br] >= recall]
    if not ok:
        return max(pairs, key=lambda br: prob[br])
    return min(ok, key=lambda br: (round(_quad_fp(theta, *br), 12), br[0] * br[1]))


@pytest.mark.parametrize("theta,k,expected", [(0.8, 100, (16, 6)), (0.8, 112, (16, 6)), (0.9, 128, (11, 10)),
                                              (0.5, 100, (17, 2))])
def test_recommend_verified_is_recall_at_theta(theta: float, k: int, expected: tuple[int, int]) -> None:
    # By hand for 0.8 / 100: 0.8^6 = 0.262144, (1 - 0.262144)^16 = 0.00771 -> P = 0.9923 >= 0.99, and 15x6
    # gives 0.9895 < 0.99; rows 7 would need b >= 20 (140 hashes); rows 5 reaches 0.99 at 12x5, but with a
    # larger FP area (flatter curve).
    best, why = P.recommend_verified(theta, k)
    assert (best.bands, best.rows) == expected == _brute_force_recall(theta, k)
    assert P.candidate_probability(theta, *expected) >= 0.99
    assert f"P(J={theta:g}) = {P.candidate_probability(theta, *expected):.4f}" in why
    assert "verification" in why and f"{best.hashes} of {k} hashes" in why
    # far more recall at theta than the balanced objective, which weighs FP and FN equally (8x12 for 0.8 / 100)
    balanced, _ = P.recommend(theta, k)
    assert P.candidate_probability(theta, balanced.bands, balanced.rows) < 0.8


def test_recommend_verified_target_and_unreachable() -> None:
    best, _ = P.recommend_verified(0.8, 100, recall=0.999)
    assert (best.bands, best.rows) == _brute_force_recall(0.8, 100, 0.999)
    assert P.candidate_probability(0.8, best.bands, best.rows) >= 0.999
    # (1 - 0.05)^20 = 0.358: no choice of 20 hashes reaches 0.99 at theta = 0.05; the highest P(theta) is 20x1
    best, why = P.recommend_verified(0.05, 20)
    assert (best.bands, best.rows) == (20, 1) == _brute_force_recall(0.05, 20)
    assert "no choice" in why and "raise num_perm" in why
    best, _ = P.recommend_verified(0.8, 128, require_full_use=True)
    assert best.hashes == 128
    full = [c for c in P.enumerate_choices(0.8, 128) if c.hashes == 128]
    reach = [c for c in full if P.candidate_probability(0.8, c.bands, c.rows) >= 0.99]
    assert best.fp_area == min(c.fp_area for c in reach)
    for bad in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match="recall"):
            P.recommend_verified(0.8, 100, recall=bad)


def test_recall_order() -> None:
    order = P.recall_order(P.enumerate_choices(0.8, 40), 0.8)
    probs = [P.candidate_probability(0.8, c.bands, c.rows) for c in order]
    n_ok = sum(p >= 0.99 for p in probs)
    assert n_ok and all(p >= 0.99 for p in probs[:n_ok])
    assert [c.fp_area for c in order[:n_ok]] == sorted(c.fp_area for c in order[:n_ok])
    assert probs[n_ok:] == sorted(probs[n_ok:], reverse=True)


def test_preset_choices_read_from_run_config() -> None:
    from gpu_dedup.config import PRESETS, RunConfig

    rows = P.preset_choices(0.8)
    assert [r[0] for r in rows] == list(PRESETS)
    for name, b, r, k, verify, p, fp in rows:
        cfg = RunConfig.preset(name)
        assert (b, r, k, verify) == (cfg.lsh.bands, cfg.lsh.rows, cfg.minhash.num_perm, cfg.cluster.verify)
        assert p == pytest.approx(1 - (1 - 0.8**r) ** b, rel=1e-12)
        assert fp == pytest.approx(_quad_fp(0.8, b, r), abs=1e-9)


# ------------------------------------------------------------------------------------------------ errors
@pytest.mark.parametrize("bad", [0.0, 1.0, 1.5, -0.2])
def test_bad_theta_names_value(bad: float) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(bad))):
        P.enumerate_choices(bad, 128)
    with pytest.raises(ValueError, match=re.escape(repr(bad))):
        P.false_positive_area(bad, 9, 13)


def test_other_bad_inputs() -> None:
    with pytest.raises(ValueError, match="num_perm.*0"):
        P.recommend(0.8, 0)
    with pytest.raises(ValueError, match="1.2"):
        P.enumerate_choices(0.8, 16, sims=(0.5, 1.2))
    with pytest.raises(ValueError, match="bands.*0"):
        P.threshold_approx(0, 4)
    with pytest.raises(ValueError, match="cannot both be 0"):
        P.enumerate_choices(0.8, 16, fp_weight=0, fn_weight=0)
    with pytest.raises(ValueError, match=r"s must be in \[0, 1\]"):
        P.candidate_probability(np.array([0.5, 1.5]), 2, 2)


# --------------------------------------------------------------------------------------- table, plot, CLI
def test_format_table_aligned_and_marked() -> None:
    choices = P.enumerate_choices(0.8, 128)
    text = P.format_table(choices, 0.8, (0.7, 0.8), top=4, marks={(9, 13): "*", (20, 5): ">"})
    lines = text.splitlines()
    header, rule, rows = lines[1], lines[2], lines[3:]
    assert header.split()[:3] == ["b", "r", "b·r"] and "P(0.8)" in header and header.endswith("weighted")
    assert len(header) == len(rule)  # right-aligned columns: every full row is as wide as the rule
    assert rows[0].split()[:3] == ["*", "9", "13"]
    assert rows[-2].split() == ["..."] and rows[-1].split()[:3] == [">", "20", "5"]
    assert len(rows) == 6
    assert all(len(r) == len(rule) for r in rows if r.split() != ["..."])


def test_plot_writes_png_and_svg(tmp_path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "curves.png"
    P.plot_s_curves([(9, 13), (14, 8)], 0.8, str(png))
    data = png.read_bytes()
    assert len(data) > 1000 and data[:8] == b"\x89PNG\r\n\x1a\n"
    svg = tmp_path / "curves.svg"
    P.plot_s_curves([(20, 5)], 0.8, str(svg))
    assert b"<svg" in svg.read_bytes()[:2000]
    with pytest.raises(ValueError, match="curves.pdf"):
        P.plot_s_curves([(9, 13)], 0.8, str(tmp_path / "curves.pdf"))


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    params_cli.add_arguments(parser)
    return parser.parse_args(argv)


def test_run_prints_table_and_marks_recommended(capsys, tmp_path) -> None:
    argv = ["--threshold", "0.8", "--num-perm", "128", "--top", "5", "--sims", "0.7,0.8,0.9",
            "--bands", "20", "--rows", "5", "--se-at", "0.8", "--no-verify"]
    if _has_matplotlib():
        argv += ["--plot", str(tmp_path / "s.png")]
    assert params_cli.run(_parse(argv)) == 0
    out = capsys.readouterr().out
    marked = [ln.split() for ln in out.splitlines() if ln.startswith("*") and ln.split()[1].isdigit()]
    assert [m[:4] for m in marked] == [["*", "9", "13", "117"]]
    assert any(ln.split()[:3] == [">", "20", "5"] for ln in out.splitlines())
    assert "Recommendation: 9×13" in out and "P(0.9)" in out
    assert "balanced, no verification" in out and "+ balanced" not in out
    assert "J = 0.80: SE = 0.0354" in out
    if _has_matplotlib():
        assert (tmp_path / "s.png").stat().st_size > 0


def test_run_recommends_for_recall_by_default(capsys) -> None:
    from gpu_dedup.config import PRESETS, RunConfig

    assert params_cli.run(_parse(["--threshold", "0.8", "--num-perm", "100", "--top", "3", "--sims", "0.7"])) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert "recall at θ with exact-Jaccard verification" in lines[0] and "P(0.8)" in out  # θ column added
    marked = [ln.split() for ln in lines if ln[:1] in "*+" and len(ln.split()) > 2 and ln.split()[1].isdigit()]
    assert [m[:3] for m in marked] == [["*", "16", "6"], ["+", "8", "12"]]  # recommended, then the balanced choice
    assert "Recommendation: 16×6" in out and "P(J=0.8) = 0.9923" in out
    assert "The balanced objective (--no-verify) picks 8×12: P(J=0.8) = 0.4342" in out
    presets = {ln.split()[0]: ln.split() for ln in lines[lines.index("Presets (RunConfig.preset) at θ = 0.8:") + 1:]
               [:len(PRESETS)]}
    assert list(presets) == list(PRESETS)
    for name, cells in presets.items():
        cfg = RunConfig.preset(name)
        assert cells[1] == f"{cfg.lsh.bands}×{cfg.lsh.rows}" and cells[4] == str(cfg.minhash.num_perm)
        assert cells[7] == f"{P.candidate_probability(0.8, cfg.lsh.bands, cfg.lsh.rows):.4f}"
        assert cells[-1] == ("verified" if cfg.cluster.verify else "unverified")
    with pytest.raises(ValueError, match="recall"):
        params_cli.run(_parse(["--recall", "1.0"]))


def test_run_rejects_bad_values() -> None:
    with pytest.raises(ValueError, match="1.5"):
        params_cli.run(_parse(["--threshold", "1.5"]))
    with pytest.raises(ValueError, match="exceeds num_perm 100"):  # the API's name; main() writes the flag
        params_cli.run(_parse(["--bands", "20", "--rows", "6"]))
    with pytest.raises(ValueError, match="go together"):
        params_cli.run(_parse(["--bands", "20"]))
    with pytest.raises(ValueError, match="2.0"):
        params_cli.run(_parse(["--sims", "0.5,2"]))
    with pytest.raises(SystemExit):  # not a number: argparse reports it
        _parse(["--sims", "0.5,abc"])


def _has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def test_closed_form_areas_equal_the_gauss_legendre_quadrature():
    """The incomplete-beta closed form of the FP/FN areas (sareas.areas) against the quadrature they replaced,
    every (b, r) of K = 256 at several thresholds; tolerance 1e-12 absolute (both are ~1e-14 accurate here)."""
    import numpy as np

    from gpu_dedup.lexical.params import _all_pairs
    from gpu_dedup.lexical.sareas import areas, _areas_quadrature, nodes_for_degree

    b, r = _all_pairs(256)
    for theta in (0.3, 0.5, 0.8, 0.95, 0.99, 1.0):
        fp, fn = areas(theta, b, r)
        gfp, gfn = _areas_quadrature(theta, b, r, nodes_for_degree(256))
        np.testing.assert_allclose(fp, gfp, rtol=0, atol=1e-12)
        np.testing.assert_allclose(fn, gfn, rtol=0, atol=1e-12)
        assert np.all(fp >= 0) and np.all(fn >= 0)
    # the seed's 0.99-threshold settings at K = 9000, one pair at a time against the quadrature
    for bands, rows in ((20, 450), (450, 20)):
        fp, fn = areas(0.99, np.array([bands]), np.array([rows]))
        assert abs(fp[0] - P.false_positive_area(0.99, bands, rows)) < 1e-12
        assert abs(fn[0] - P.false_negative_area(0.99, bands, rows)) < 1e-12


def test_quadrature_raises_no_float_warning():
    """Issue 36 item 14: at theta = 1 the FN area's interval [1, 1] put every node at s = 1, where log(1 - s^r)
    divided by zero (a RuntimeWarning in the tests). An empty interval is now 0, and log s is taken so that it
    is finite and < 0 at every node of a non-empty one, also one that ends at 1 a hair above its start. No float
    error of any kind; the values are the closed form's (tolerance as above)."""
    import numpy as np

    from gpu_dedup.lexical.params import _all_pairs
    from gpu_dedup.lexical.sareas import _areas_quadrature, areas, gauss_legendre, node_log, nodes_for_degree

    n = nodes_for_degree(256)
    b, r = _all_pairs(256)
    x, _ = gauss_legendre(n)
    for theta in (1.0, 1.0 - 1e-15, 0.99):
        with np.errstate(all="raise"):
            fp, fn = _areas_quadrature(theta, b, r, n)
            logs = node_log(theta, 1.0, x) if theta < 1 else np.full(1, -1.0)  # (lo < hi: a non-empty interval)
        assert np.all(np.isfinite(logs)) and np.all(logs < 0)
        cfp, cfn = areas(theta, b, r)
        np.testing.assert_allclose(fp, cfp, rtol=0, atol=1e-12)
        np.testing.assert_allclose(fn, cfn, rtol=0, atol=1e-12)
    assert np.all(_areas_quadrature(1.0, b, r, n)[1] == 0)


def test_num_perm_9000_allows_the_seeds_099_settings():
    from gpu_dedup.config import LSHConfig, MinHashConfig, RunConfig
    from gpu_dedup.constants import MAX_NUM_PERM

    assert MAX_NUM_PERM == 9000
    for bands, rows in ((20, 450), (450, 20)):
        cfg = RunConfig(minhash=MinHashConfig(9000), lsh=LSHConfig(bands, rows))
        assert cfg.lsh.bands * cfg.lsh.rows == 9000
    with pytest.raises(ValueError, match="9000"):
        MinHashConfig(9001)
    choices = P.enumerate_choices(0.99, 9000)
    assert len(choices) == sum(9000 // b for b in range(1, 9001))
    by = {(c.bands, c.rows): c for c in choices}
    assert by[(20, 450)].fp_area == pytest.approx(P.false_positive_area(0.99, 20, 450), abs=1e-12)
    # exact ties (1 x 3 and 3 x 1 at theta = 0.5: both 9/64) keep datasketch's (b, r) order
    order = [(c.bands, c.rows) for c in P.enumerate_choices(0.5, 8)]
    assert order.index((1, 3)) < order.index((3, 1))


def test_params_errors_name_the_flags_on_the_command_line(capsys) -> None:
    from gpu_dedup.cli import main

    assert main(["params", "--bands", "20", "--rows", "6"]) == 1
    assert "exceeds --num-perm 100; raise --num-perm" in capsys.readouterr().err


def test_plan_bands_is_what_the_command_prints() -> None:
    plan = P.plan_bands(0.8, 100, (0.7,), requested=(20, 5))
    assert (plan.best.bands, plan.best.rows) == (16, 6) and (plan.balanced.bands, plan.balanced.rows) == (8, 12)
    assert plan.sims == (0.7, 0.8) and plan.requested_rank == next(
        i for i, c in enumerate(plan.choices, 1) if (c.bands, c.rows) == (20, 5))
    assert plan.standard_errors[2] == (0.8, pytest.approx(math.sqrt(0.8 * 0.2 / 100)))
    with pytest.raises(ValueError, match="20x6 = 120 exceeds num_perm 100"):
        P.plan_bands(0.8, 100, requested=(20, 6))
