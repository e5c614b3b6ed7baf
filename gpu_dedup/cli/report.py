"""The ``gpu-dedup report`` command: its options and what it runs."""
from __future__ import annotations

import argparse
import sys

from ..errors import ConfigError
from ..report.html import MAX_CLUSTERS, write_report


def add_command(sub) -> None:
    """Register ``report`` on the CLI's subparsers."""
    p = sub.add_parser("report", help="write OUT/report.html from a finished run",
                       epilog="examples:\n  gpu-dedup report out\n  gpu-dedup report out --source data/ --max-clusters 20",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    p.set_defaults(func=run)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of the ``report`` command.

    Args:
        parser: the command's parser; dests: output, max_clusters, source, no_inputs.
    """
    parser.add_argument("output", metavar="OUT", help="a run's output directory (decisions.parquet, run.json)")
    parser.add_argument("--max-clusters", type=int, default=MAX_CLUSTERS, help="largest clusters shown with excerpts")
    parser.add_argument("--source", nargs="+", metavar="INPUT", default=None,
                        help="the run's inputs, when they are not where run.json says (for excerpts)")
    parser.add_argument("--no-inputs", action="store_true",
                        help="do not read the inputs: no text excerpts or retained sizes (fast on huge runs)")


def run(args: argparse.Namespace) -> int:
    """Write the report of a dedup run, of a ``filter`` run (its run.json says "stage": "filter") or of a pipeline
    (its run.json's "program"); print its path.

    Args:
        args: the parsed ``report`` options.

    Returns:
        0, the exit status.

    Raises:
        GpuDedupError: the directory holds no finished run, or a bad value (the message names it).
    """
    import json
    import os

    stats_path = os.path.join(args.output, "run.json")
    stage = program = None
    if os.path.exists(stats_path):
        with open(stats_path, encoding="utf-8") as fh:
            try:
                stats = json.load(fh)
                stage, program = stats.get("stage"), stats.get("program")
            except (ValueError, AttributeError):
                stage = None  # write_report names the problem
    if stage == "filter":
        from ..filters.report import write_filter_report

        path = write_filter_report(args.output)
    elif program == "pipeline":  # a recipe's page (a failed one's "retry with" names this command)
        from ..pipeline.report import write_pipeline_report

        if args.max_clusters != MAX_CLUSTERS:
            raise ConfigError(f"--max-clusters {args.max_clusters}: {args.output} holds a pipeline run, whose report "
                              "shows no clusters (each step's own report in steps/NN-name/ does); leave it out")
        path = write_pipeline_report(args.output, source=args.source, read_inputs=not args.no_inputs)
    else:
        path = write_report(args.output, max_clusters=args.max_clusters, source=args.source,
                            read_inputs=not args.no_inputs)
    sys.stdout.write(f"wrote {path}\n")
    return 0
