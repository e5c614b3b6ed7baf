"""``gpu-dedup compare``: lexical vs semantic decisions of a ``run --semantic``."""
from __future__ import annotations

import argparse


def add_command(sub) -> None:
    """Register ``compare`` on the CLI's subparsers."""
    p = sub.add_parser("compare", help="lexical vs semantic decisions of a --semantic run: counts, overlap, "
                       "example pairs, Jaccard-vs-cosine plot",
                       epilog="example:\n  gpu-dedup run data/ -o out --semantic && gpu-dedup compare out",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("output", metavar="OUT", help="directory of a run made with --semantic")
    p.add_argument("--input", nargs="+", help="the run's input, when its recorded paths moved")
    p.add_argument("--examples", type=int, default=5, help="example pairs per region (default 5)")
    p.add_argument("--max-pairs", type=int, default=20000, help="pairs sampled for the plot (default 20000)")
    p.set_defaults(func=cmd_compare, api_names={"n_examples": "examples"})  # compare()'s name of --examples


def cmd_compare(args: argparse.Namespace) -> int:
    from ..semantic import compare

    res = compare(args.output, source=args.input or None, n_examples=args.examples, max_pairs=args.max_pairs)
    print(res.markdown)
    print(f"wrote {res.markdown_path} and {res.png_path}")
    return 0
