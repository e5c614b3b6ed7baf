"""``gpu-dedup warmup``: compile every command's kernels ahead of the first real run (for images, CI caches and
the device script), and what a first run says about compiling.

The kernels are Numba functions compiled on first use for the argument types they get and cached on disk
(``kernels/__pycache__``, or ``NUMBA_CACHE_DIR``). Compiling them by hand would need every signature written
twice; instead ``warmup`` runs each command family once on a few documents of the bundled sample in a
temporary directory, through the same API a real run uses, so exactly the specializations a real run needs
are compiled and cached. A later run of any command then loads them in milliseconds.

``KERNELS`` lists the CPU kernels of each stage (family ``kernels/<family>_cpu.py``, "" = ``kernels/cpu.py``),
``COMMANDS`` the stages of each command; ``uncached(stages)`` counts the kernels with no cached machine code
yet, which is what a first run says before its progress bar (``device.note_compiling``).
"""
from __future__ import annotations

import gzip
import importlib
import logging
import os
import tempfile
import time
from importlib import resources
from typing import Callable

logger = logging.getLogger(__name__)

# What each stage compiles on the CPU: (family, kernel names) with family the module kernels/<family>_cpu.py
# ("" = kernels/cpu.py); read from the cache index files an empty NUMBA_CACHE_DIR holds after each warm-up step.
_NORMALIZE = ("", ("normalize_sizes", "normalize_write"))
KERNELS: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "dedup": (("", ("normalize_sizes", "normalize_write", "exact_hashes", "shingle_sets", "minhash_signatures",
                    "band_keys", "union_find", "_find", "representative_components")),),
    "paragraph": (("bloom", ("span_norm_sizes", "span_norm_hash", "split_count", "split_write", "cut_copy",
                             "bloom_insert", "bloom_query")),),
    "screen": (("bloom", ("word_spans", "ngram_hashes", "member_sorted")), _NORMALIZE),
    "lm-train": (("lm", ("lm_count_words", "lm_word_hashes")), _NORMALIZE),
    "lm-score": (("lm", ("lm_span_hashes", "lm_ngram_keys", "lm_score_docs", "lm_build_table", "lm_build_vocab")),
                 _NORMALIZE),
    "domain": (("domain", ("domain_stats",)),),
    "rules": (("features", ("rule_stats", "_ngram_stats", "_sorted_groups_dup")),),
    "dsir": (("features", ("feature_ids", "feature_log_weights")),),
    "fasttext": (("fasttext", ("ft_hidden", "ft_label_prob", "ft_predict", "ft_build_vocab_table", "ft_hash_spans",
                               "ft_vocab_subwords")),),
}
# command -> the stages (KERNELS) its warm-up compiles
COMMANDS: dict[str, tuple[str, ...]] = {
    "run": ("dedup",),
    "paragraph": ("paragraph",),
    "screen": ("screen",),
    "train-lm": ("lm-train",),
    "filter": ("domain", "rules", "dsir", "lm-score", "fasttext"),
}
SAMPLE_DOCS = 60  # documents of the bundled sample a warm-up run reads


def cpu_kernels(family: str) -> list:
    """The cached CPU kernels (numba dispatchers with ``cache=True``) of ``kernels/<family>_cpu.py``."""
    mod = importlib.import_module(f"{__package__}.kernels.{family + '_' if family else ''}cpu")
    return [v for v in vars(mod).values() if getattr(v, "_cache", None) is not None and hasattr(v, "py_func")
            and getattr(v, "__module__", None) == mod.__name__]


def _index_path(k) -> str | None:
    return getattr(getattr(getattr(k, "_cache", None), "_cache_file", None), "_index_path", None)


def uncached(stages: tuple[str, ...]) -> int:
    """How many CPU kernels of ``stages`` (``KERNELS``' names) have no cached machine code yet."""
    seen, n = set(), 0
    for stage in stages:
        for fam, names in KERNELS[stage]:
            by_name = {k.__name__: k for k in cpu_kernels(fam)}
            for name in names:
                p = _index_path(by_name[name])
                if p and p not in seen and not os.path.exists(p):
                    seen.add(p)
                    n += 1
    return n


def _sample(path: str, n: int = SAMPLE_DOCS) -> str:
    data = (resources.files(__package__) / "data" / "sample.jsonl.gz").read_bytes()
    with open(path, "wb") as fh:
        fh.write(b"\n".join(gzip.decompress(data).splitlines()[:n]) + b"\n")
    return path


def _run(d: str, src: str, device: str) -> None:
    from . import RunConfig, deduplicate

    deduplicate(src, RunConfig.preset("default", device=device), os.path.join(d, "run"))


def _paragraph(d: str, src: str, device: str) -> None:
    from .paragraph.dedup import ParagraphConfig, paragraph_dedup

    paragraph_dedup(src, ParagraphConfig(), os.path.join(d, "paragraph"), device=device)


def _screen(d: str, src: str, device: str) -> None:
    from .screen import ScreenConfig, screen

    screen(src, [src], ScreenConfig(fields=("text",)), os.path.join(d, "screen"), device=device)


def _train_lm(d: str, src: str, device: str) -> str:
    from .filters.kneser_ney import LMTrainConfig, train_lm

    out = os.path.join(d, "warm.arpa")
    if not os.path.exists(out):
        train_lm([src], out, LMTrainConfig(order=3), device=device)
    return out


def _filter(d: str, src: str, device: str) -> None:
    from .filters.config import ClassifierSpec, DomainConfig, FilterConfig
    from .filters.stage import filter_corpus

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
                           rules="gopher", dsir_target=(src,), select=0.5, unit=unit, device=device, audit=2,
                           domain=DomainConfig(script_prefilter=True, relax=True))
        filter_corpus(src, cfg, os.path.join(d, f"filter-{unit}"))


STEPS: dict[str, Callable[[str, str, str], object]] = {
    "run": _run, "paragraph": _paragraph, "screen": _screen, "train-lm": _train_lm, "filter": _filter}


def warmup(commands: tuple[str, ...] = tuple(COMMANDS), device: str = "cpu") -> dict[str, dict]:
    """Compile the kernels of ``commands`` (all by default) by running each once on a few sample documents in a
    temporary directory. Returns, per command, the kernels it found uncached and the seconds it took."""
    unknown = [c for c in commands if c not in STEPS]
    if unknown:
        raise ValueError(f"warmup: unknown command {unknown[0]!r}; choose from {', '.join(STEPS)}")
    out: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="gpu-dedup-warmup-") as d:
        src = _sample(os.path.join(d, "sample.jsonl"))
        for c in commands:
            before = uncached(COMMANDS[c])
            t = time.perf_counter()
            STEPS[c](d, src, device)
            out[c] = {"kernels_compiled": before, "seconds": round(time.perf_counter() - t, 2)}
            logger.info("warmup %s: %d kernels compiled in %.1f s", c, before, out[c]["seconds"])
    return out
