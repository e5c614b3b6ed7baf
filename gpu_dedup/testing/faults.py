"""Fault injection for the resume tests: kill the process with SIGKILL at a checkpoint of a run.

    python -c "from gpu_dedup.testing.faults import run_cli_killed_at; run_cli_killed_at()" piece:2 run IN -o OUT

kills the run the 2nd time it passes checkpoint "piece" (``gpu_dedup.runtime.workdir.checkpoint``: "piece", "batch",
"decisions"), exactly like ``kill -9`` at that moment. Production code only calls the (empty) hook list.
"""
from __future__ import annotations

import os
import signal
import sys

from ..runtime.workdir import CHECKPOINT_HOOKS


def kill_at(point: str, k: int = 1) -> None:
    """Install a hook that SIGKILLs this process the ``k``-th time it passes checkpoint ``point``."""
    seen = {"n": 0}

    def hook(name: str) -> None:
        if name == point:
            seen["n"] += 1
            if seen["n"] >= k:
                os.kill(os.getpid(), signal.SIGKILL)

    CHECKPOINT_HOOKS.append(hook)


def run_cli_killed_at(argv: list[str] | None = None) -> None:
    """``gpu-dedup`` with a kill point: argv[0] is "<point>:<k>", the rest the CLI's arguments."""
    argv = sys.argv[1:] if argv is None else argv
    point, _, k = argv[0].partition(":")
    kill_at(point, int(k or 1))
    from ..cli import main

    sys.exit(main(argv[1:]))


RAY_FAULTS = "GPU_DEDUP_RAY_FAULTS"  # a directory: a file named after a checkpoint there kills one Ray worker


def ray_worker_faults() -> None:
    """A Ray ``worker_process_setup_hook`` (tests): SIGKILL the worker that first passes checkpoint NAME
    while the file $GPU_DEDUP_RAY_FAULTS/NAME exists (renamed to NAME.fired, so one worker dies per file).
    The Ray engine's tasks pass "ray-<stage>" after writing part of their outputs, before their marker."""
    folder = os.environ.get(RAY_FAULTS)
    if not folder:
        return

    def hook(name: str) -> None:
        flag = os.path.join(folder, name)
        try:
            os.rename(flag, flag + ".fired")  # atomic: only one worker claims it
        except OSError:
            return
        os.kill(os.getpid(), signal.SIGKILL)

    CHECKPOINT_HOOKS.append(hook)
