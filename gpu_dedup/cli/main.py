"""The ``gpu-dedup`` parser and entry point: one subcommand per module of this package, each mapping its flags
to the Python API (``add_command(sub)`` registers it, its ``func`` runs it); ``main`` turns the errors the tool
raises on purpose into one line that names the flags (flags.py)."""
from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import sys
import textwrap
import threading
from typing import Sequence

from .._version import __version__
from ..errors import GpuDedupError
from . import compare, demo, params, pipeline, report, run, screen, substring, train, warmup
from . import filter as filter_  # the module of `gpu-dedup filter` (not the builtin)

logger = logging.getLogger("gpu_dedup")

EPILOG_MAIN = textwrap.dedent("""\
    examples:
      gpu-dedup demo                                   # run on the bundled sample corpus
      gpu-dedup run data/*.jsonl.gz -o out             # default: word 5-grams, K=100 (20x5), verified, theta 0.8
      gpu-dedup run shards/ -o out --preset fineweb    # FineWeb semantics: 14x8, connected components
      gpu-dedup run data.parquet -o out --threshold 0.9 --keep max:quality_score
      gpu-dedup params --threshold 0.8 --num-perm 128 --plot scurves.png
      gpu-dedup report out                             # (re)write out/report.html
    """)


def build_parser() -> argparse.ArgumentParser:
    """The ``gpu-dedup`` parser with every subcommand (in the order ``--help`` lists them)."""
    parser = argparse.ArgumentParser(prog="gpu-dedup", description="Deduplicate text corpora for LLM "
                                     "pre-training (exact, MinHash/LSH with exact-Jaccard verification).",
                                     epilog=EPILOG_MAIN, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"gpu-dedup {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in (run, pipeline, demo, screen, compare, report, params, filter_, train, substring, warmup):
        command.add_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args, extras = parser.parse_known_args(argv)
    if extras:  # said by the command that was run, with the nearest flag (argparse gives the top-level usage)
        from .flags import subcommand_parser, unknown_arguments

        sp = (subcommand_parser(parser, args.command) if getattr(args, "command", None) else None) or parser
        sp.exit(2, f"{sp.prog}: error: {unknown_arguments(sp, extras)}; `{sp.prog} --help` lists its flags\n")
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    try:
        args = with_config_file(parser, argv, args)
        if args.command != "pipeline":  # a recipe may set the engine: cli/pipeline.py checks after it is read
            from .common import check_ray_settings

            check_ray_settings(args, f"config file {getattr(args, 'config', None)!r}",
                               getattr(args, "config_flag_keys", ()))
    except GpuDedupError as exc:
        print(f"gpu-dedup: error: {exc}", file=sys.stderr)
        return 1
    quiet = getattr(args, "quiet", False)
    debug = args.verbose or getattr(args, "debug", False)
    logging.basicConfig(level=logging.DEBUG if debug else (logging.WARNING if quiet else logging.INFO),
                        format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        with _terminate_as_interrupt(), _ray_started(args):
            return int(args.func(args) or 0)
    except KeyboardInterrupt:
        # Ctrl-C or SIGTERM: the owned outputs were already removed on the way out (outputs.own), as on any failure
        logger.debug("traceback", exc_info=True)
        from .common import interrupted

        term = bool(_TERMINATED)
        print(interrupted(args, "SIGTERM" if term else "Ctrl-C"), file=sys.stderr)  # and whether --resume can finish
        return 128 + signal.SIGTERM if term else 130
    except (GpuDedupError, OSError) as exc:
        # GpuDedupError: what the tool refused or could not do, on purpose. OSError too: the file system's own
        # failures (permission denied, a full disk, a path that is a file) are the user's to fix, not a bug, and
        # their message names the path. Anything else is a bug: its traceback. One line, the traceback only with -v
        logger.debug("traceback", exc_info=True)
        from .flags import cli_message, command_flags, subcommand_parser

        sp = subcommand_parser(parser, args.command)  # the API's argument names, as this command's flags
        print(f"gpu-dedup: error: {cli_message(str(exc), command_flags(sp)) if sp else exc}", file=sys.stderr)
        return 1


_TERMINATED: list[bool] = []  # set by the SIGTERM handler: the KeyboardInterrupt under way is a SIGTERM


@contextlib.contextmanager
def _terminate_as_interrupt():
    """SIGTERM (a scheduler's or `kill`'s stop) raises KeyboardInterrupt while the command runs, as Ctrl-C does:
    every ``finally`` and owner on the way out removes what the run wrote and the work directory stays for
    --resume (the default action killed the process, its lock file and half-written outputs left behind; on Ray,
    Ray's handler exited 15). The previous handler is restored after. Only in the main thread, where Python
    delivers signals."""
    _TERMINATED.clear()
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        _TERMINATED.append(True)
        raise KeyboardInterrupt()

    before = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def _ray_started(args: argparse.Namespace):
    """--engine ray without --address: the local Ray cluster starts now, in the background, while the command
    reads its inputs and plans; the engine joins it at its first task (distributed.cluster.start_local)."""
    if getattr(args, "engine", None) != "ray" or getattr(args, "address", None) is not None:
        return contextlib.nullcontext()
    from ..distributed import start_local

    return start_local(getattr(args, "workers", None))


def with_config_file(parser: argparse.ArgumentParser, argv: list[str], args: argparse.Namespace) -> argparse.Namespace:
    """``args`` with the flags of ``--config FILE`` (cli/common.py: a mapping of the command's flags by name) read
    before the command line's own, which therefore win. ``run``'s file may also hold RunConfig's sections and
    fields (its own reader: ``run.config_from_args``); those keys are left to it."""
    path = getattr(args, "config", None)
    if not path:
        return args
    from .common import config_tokens, load_mapping
    from .flags import subcommand_parser

    mapping = load_mapping(path)
    sp = subcommand_parser(parser, args.command)
    if args.command == "run":  # RunConfig's own keys, and any key that is no flag, are config_from_args' to read
        from .common import is_flag
        from .run import RUN_CONFIG_KEYS

        mapping = {k: v for k, v in mapping.items() if k not in RUN_CONFIG_KEYS and is_flag(sp, k)}
    tokens = config_tokens(mapping, sp, f"config file {path!r}", of=f"`gpu-dedup {args.command}`")
    if not tokens:
        return args
    at = argv.index(args.command) + 1
    new = parser.parse_args(argv[:at] + tokens + argv[at:])
    new.config_flag_keys = frozenset(mapping)
    return new
