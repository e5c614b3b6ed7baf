"""``gpu-dedup warmup``: compile the kernels of every command (or of those named) ahead of the first run
(gpu_dedup/pipeline/warmup.py)."""
from __future__ import annotations

import argparse

from ..runtime.compiling import COMMANDS


def add_command(sub) -> None:
    """The ``gpu-dedup warmup [COMMAND...] [--device]`` subcommand (``sub``: the CLI's subparsers)."""
    p = sub.add_parser("warmup", help="compile the kernels of every command (or of those named) ahead of the "
                       "first run: for images, CI caches and the device script")
    p.add_argument("commands", nargs="*", metavar="COMMAND", help=f"only these: {', '.join(COMMANDS)} (default all)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("-q", "--quiet", action="store_true")
    p.set_defaults(func=cmd_warmup)


def cmd_warmup(args: argparse.Namespace) -> int:
    from ..pipeline.warmup import warmup

    for c, r in warmup(tuple(args.commands) or tuple(COMMANDS), device=args.device).items():
        print(f"{c}: {r['kernels_compiled']} kernels compiled, {r['seconds']:.1f} s")
    return 0
