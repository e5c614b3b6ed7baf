"""``gpu-dedup warmup``: compile every command's kernels ahead of the first real run (for images, CI caches and
the device script), and what a first run says about compiling.

The kernels are Numba functions compiled on first use for the argument types they get and cached on disk
(``kernels/__pycache__``, or ``NUMBA_CACHE_DIR``). Compiling them by hand would need every signature written
twice; instead ``warmup`` runs each command family once on a few documents of the bundled sample in a
temporary directory, through the same API a real run uses, so exactly the specializations a real run needs
are compiled and cached. A later run of any command then loads them in milliseconds.

``KERNELS`` lists the CPU kernels of each stage (family ``kernels/<family>_cpu.py``),
``COMMANDS`` the stages of each command; ``uncached(stages)`` counts the kernels with no cached machine code
yet, which is what a first run says before its progress bar (``device.note_compiling``).
"""
from __future__ import annotations

import logging
import os
import tempfile
import time
from typing import Callable

from ..errors import ConfigError
from ..runtime.compiling import COMMANDS, KERNELS, SAMPLE_DOCS, cpu_kernels, uncached, write_sample  # noqa: F401 (warmup's view)

logger = logging.getLogger(__name__)



def _run(d: str, src: str, device: str) -> None:
    from .. import RunConfig, deduplicate

    deduplicate(src, RunConfig.preset("default", device=device), os.path.join(d, "run"))


def _paragraph(d: str, src: str, device: str) -> None:
    from ..paragraph.dedup import ParagraphConfig, paragraph_dedup

    paragraph_dedup(src, ParagraphConfig(), os.path.join(d, "paragraph"), device=device)


def _screen(d: str, src: str, device: str) -> None:
    from ..screen.screening import ScreenConfig, screen

    screen(src, [src], ScreenConfig(fields=("text",)), os.path.join(d, "screen"), device=device)


def _train_lm(d: str, src: str, device: str) -> str:
    from ..filters.kneser_ney import LMTrainConfig, train_lm

    out = os.path.join(d, "warm.arpa")
    if not os.path.exists(out):
        train_lm([src], out, LMTrainConfig(order=3), device=device)
    return out


def _filter(d: str, src: str, device: str) -> None:
    from ..filters.config import ClassifierSpec, DomainConfig, FilterConfig
    from ..filters.stage import filter_corpus

    classifiers = ()
    try:  # the classifier kernels need a fastText model: made with the fasttext package when it is installed
        import fasttext

        train = os.path.join(d, "labelled.txt")
        with open(src, encoding="utf-8") as fh, open(train, "w", encoding="utf-8") as out:
            for i, line in enumerate(fh):
                out.write(f"__label__{'hq' if i % 2 else 'lq'} {line[:200].strip()}\n")
        model = os.path.join(d, "warm.bin")
        fasttext.train_supervised(train, dim=4, epoch=1, bucket=1000, minn=2, maxn=3, wordNgrams=2, thread=1,
                                  verbose=0).save_model(model)
        classifiers = (ClassifierSpec("warm", model, 0.5),)
    except ImportError:
        logger.info("warmup: the fasttext package is not installed; the classifier kernels are not compiled")
    for unit in ("document", "paragraph"):
        cfg = FilterConfig(classifiers=classifiers, perplexity=_train_lm(d, src, device), max_perplexity=1e9,
                           rules="gopher,chars", dsir_target=(src,), select=0.5, unit=unit, device=device, audit=2,
                           domain=DomainConfig(script_prefilter=True, relax=True))
        filter_corpus(src, cfg, os.path.join(d, f"filter-{unit}"))


def _substring(d: str, src: str, device: str) -> None:
    from ..substring import SubstringConfig, substring_dedup

    substring_dedup(src, SubstringConfig(min_tokens=8), os.path.join(d, "substring"), device=device)


STEPS: dict[str, Callable[[str, str, str], object]] = {
    "run": _run, "paragraph": _paragraph, "screen": _screen, "train-lm": _train_lm, "filter": _filter,
    "substring": _substring}


def warmup(commands: tuple[str, ...] = tuple(COMMANDS), device: str = "cpu") -> dict[str, dict]:
    """Compile the kernels of ``commands`` (all by default) by running each once on a few sample documents in a
    temporary directory. Returns, per command, the kernels it found uncached and the seconds it took."""
    unknown = [c for c in commands if c not in STEPS]
    if unknown:
        raise ConfigError(f"warmup: unknown command {unknown[0]!r}; choose from {', '.join(STEPS)}")
    from ..lexical.dedup import no_precompile

    out: dict[str, dict] = {}
    with no_precompile(), tempfile.TemporaryDirectory(prefix="gpu-dedup-warmup-") as d:  # the runs below compile
        src = write_sample(os.path.join(d, "sample.jsonl"), SAMPLE_DOCS)
        for c in commands:
            before = uncached(COMMANDS[c])
            t = time.perf_counter()
            STEPS[c](d, src, device)
            out[c] = {"kernels_compiled": before, "seconds": round(time.perf_counter() - t, 2)}
            logger.info("warmup %s: %d kernels compiled in %.1f s", c, before, out[c]["seconds"])
    return out
