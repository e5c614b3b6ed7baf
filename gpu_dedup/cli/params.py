"""``gpu-dedup params``: LSH bands x rows for a threshold and hash budget, as a table on stdout (the math and the
recommendation: ``gpu_dedup.lexical.params.plan_bands``)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import ConfigError
from ..lexical.params import (DEFAULT_RECALL, DEFAULT_SE_AT, DEFAULT_SIMS, PLOT_SUFFIXES, candidate_probability,
                      format_table, plan_bands, plot_s_curves, preset_choices, sharpness, steepest_point)


def add_command(sub) -> None:
    """Register ``params`` on the CLI's subparsers."""
    p = sub.add_parser("params", help="choose LSH bands x rows for a threshold and hash budget",
                       epilog="examples:\n  gpu-dedup params --threshold 0.8 --num-perm 112\n"
                              "  gpu-dedup params --threshold 0.8 --num-perm 112 --bands 14 --rows 8 --plot s.png",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    p.set_defaults(func=run)


def _float_list(text: str) -> tuple[float, ...]:
    """argparse type for comma lists like ``0.5,0.8,0.9`` (ranges are checked later, in ``plan_bands``)."""
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            out.append(float(part))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{part!r} is not a number; use a comma list like 0.5,0.8,0.9") from None
    if not out:
        raise argparse.ArgumentTypeError(f"empty list {text!r}; use a comma list like 0.5,0.8,0.9")
    return tuple(out)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the ``params`` command (dests: threshold, num_perm, sims, fp_weight, fn_weight, top,
    bands, rows, plot, se_at, require_full_use, no_verify, recall)."""
    parser.add_argument("--threshold", type=float, default=0.8, help="target Jaccard threshold θ in (0, 1)")
    parser.add_argument("--num-perm", type=int, default=100, help="MinHash permutations K (b·r ≤ K)")
    parser.add_argument("--sims", type=_float_list, default=DEFAULT_SIMS,
                        help="comma list of similarities for the P(s) columns")
    parser.add_argument("--fp-weight", type=float, default=0.5, help="weight of the false-positive area")
    parser.add_argument("--fn-weight", type=float, default=0.5, help="weight of the false-negative area")
    parser.add_argument("--top", type=int, default=15, help="rows of the table (best first)")
    parser.add_argument("--bands", type=int, default=None, help="also show this many bands (with --rows)")
    parser.add_argument("--rows", type=int, default=None, help="also show this many rows per band (with --bands)")
    parser.add_argument("--plot", default=None, metavar="FILE.png|svg", help="write S-curves to this file")
    parser.add_argument("--se-at", type=_float_list, default=DEFAULT_SE_AT,
                        help="comma list of Jaccard values for the MinHash standard-error lines")
    parser.add_argument("--require-full-use", action="store_true",
                        help="recommend only choices with b·r == K (use every permutation)")
    parser.add_argument("--no-verify", action="store_true", help="the run will not verify candidates: recommend "
                        "by the balanced objective (--fp-weight·FP + --fn-weight·FN) instead of recall at θ")
    parser.add_argument("--recall", type=float, default=DEFAULT_RECALL, help="with verification: the P(θ) to reach "
                        f"(default {DEFAULT_RECALL:g}); among those choices, the fewest false candidates")


def run(args: argparse.Namespace) -> int:
    """Print the table, the recommendation and standard errors to stdout; write the plot. Returns 0.

    Bad values raise ``ValueError`` naming the value (``main`` writes the API's names as flags).
    """
    if isinstance(args.top, bool) or not isinstance(args.top, int) or args.top < 1:
        raise ConfigError(f"--top must be a positive int, got {args.top!r}")
    top = args.top
    if (args.bands is None) != (args.rows is None):
        raise ConfigError(f"--bands and --rows go together, got --bands {args.bands!r} --rows {args.rows!r}; "
                          "give both, e.g. --bands 20 --rows 5")
    if args.plot is not None and Path(args.plot).suffix.lower() not in PLOT_SUFFIXES:
        raise ConfigError(f"--plot must end in .png or .svg, got {args.plot!r}")
    plan = plan_bands(args.threshold, args.num_perm, args.sims, args.fp_weight, args.fn_weight,
                      verify=not getattr(args, "no_verify", False), recall=getattr(args, "recall", DEFAULT_RECALL),
                      require_full_use=args.require_full_use, se_at=args.se_at,
                      requested=None if args.bands is None else (args.bands, args.rows))
    theta, k, choices, best, balanced = plan.theta, plan.num_perm, plan.choices, plan.best, plan.balanced
    requested = None if plan.requested is None else (plan.requested.bands, plan.requested.rows)
    marks = {(best.bands, best.rows): "*"}
    marks.setdefault((balanced.bands, balanced.rows), "+")
    if requested is not None:
        marks.setdefault(requested, ">")

    out = sys.stdout
    goal = (f"recall at θ with exact-Jaccard verification: P(θ) ≥ {plan.recall:g}, then fewest false candidates; "
            "--no-verify for the balanced objective" if plan.verify else
            f"balanced, no verification: weighted error = {plan.fp_weight:g}·FP + {plan.fn_weight:g}·FN")
    out.write(f"LSH bands × rows for θ = {theta:g}, num_perm = {k} ({goal}); top {min(top, len(choices))} of "
              f"{len(choices)}\n")
    out.write(format_table(choices, theta, plan.sims, top=top, marks=marks) + "\n")
    legend = {"+": "   + balanced objective's choice (--no-verify)", ">": "   > requested (--bands/--rows)"}
    out.write("* recommended" + "".join(v for m, v in legend.items() if m in marks.values()) + "\n\n")
    out.write(f"Recommendation: {plan.why}\n")
    if plan.verify and "+" in marks.values():
        out.write(f"The balanced objective (--no-verify) picks {balanced.bands}×{balanced.rows}: P(J={theta:g}) = "
                  f"{float(candidate_probability(theta, balanced.bands, balanced.rows)):.4f}, FP area "
                  f"{balanced.fp_area:.5f}: it would miss more duplicates to save Jaccard checks.\n")
    if plan.requested is not None:
        c, rank = plan.requested, plan.requested_rank
        out.write(f"Requested {c.bands}×{c.rows}: P(θ) = {float(candidate_probability(theta, c.bands, c.rows)):.3f}, "
                  f"p50 = {c.p50:.3f}, steepest at s* = {c.steepest:.3f} with P'(s*) = {c.sharpness:.3f}, "
                  f"FP area {c.fp_area:.5f}, FN area {c.fn_area:.5f}, weighted "
                  f"{c.weighted_error:.5f} (rank {rank} of {len(choices)})\n")
    out.write(f"\nPresets (RunConfig.preset) at θ = {theta:g}:\n")
    for name, b, r, kp, ver, p, fp in preset_choices(theta):
        out.write(f"  {name:<8} {f'{b}×{r}':>6}  K = {kp:<4} P(θ) = {p:.4f}  FP area {fp:.5f}  "
                  f"s* = {steepest_point(b, r):.3f}  P'(s*) = {sharpness(b, r):.3f}  "
                  f"{'verified' if ver else 'unverified'}\n")
    out.write(f"\nMinHash Jaccard estimate with num_perm = {k}: standard error sqrt(J(1−J)/K)\n")
    for j, se in plan.standard_errors:
        lo, hi = max(0.0, j - 2 * se), min(1.0, j + 2 * se)
        out.write(f"  J = {j:.2f}: SE = {se:.4f}  (±2·SE: {lo:.3f} – {hi:.3f})\n")
    if args.plot is not None:
        pairs = [(best.bands, best.rows)] + [(c.bands, c.rows) for c in choices[: min(top, 4)]
                                             if (c.bands, c.rows) != (best.bands, best.rows)][:3]
        if requested is not None and requested not in pairs:
            pairs.append(requested)
        plot_s_curves(pairs, theta, args.plot)
        out.write(f"\nWrote S-curves of {', '.join(f'{b}×{r}' for b, r in pairs)} to {args.plot}\n")
    out.flush()
    return 0
