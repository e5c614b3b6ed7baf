"""The ``gpu-dedup report`` command: its options and what it runs."""
from __future__ import annotations

import argparse
import sys

from .html import write_report


# ------------------------------------------------------------------------------------------------- CLI
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the ``report`` command (dests: output, max_clusters, source, no_inputs)."""
    parser.add_argument("output", metavar="OUT", help="a run's output directory (decisions.parquet, run.json)")
    parser.add_argument("--max-clusters", type=int, default=10, help="largest clusters shown with excerpts")
    parser.add_argument("--source", nargs="+", metavar="INPUT", default=None,
                        help="the run's inputs, when they are not where run.json says (for excerpts)")
    parser.add_argument("--no-inputs", action="store_true",
                        help="do not read the inputs: no text excerpts or retained sizes (fast on huge runs)")


def run(args: argparse.Namespace) -> int:
    """Write the report; print its path. Bad values raise ValueError naming them."""
    path = write_report(args.output, max_clusters=args.max_clusters, source=args.source,
                        read_inputs=not args.no_inputs)
    sys.stdout.write(f"wrote {path}\n")
    return 0
