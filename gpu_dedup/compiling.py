"""Which CPU kernels each stage compiles and which of them have no cached machine code yet: what a first run
says before its progress bar (``device.note_compiling``) and what ``gpu-dedup warmup`` compiles ahead
(``warmup``). Imports only the kernel modules, so that device.py can use it."""
from __future__ import annotations

import gzip
import importlib
import os
import time
from importlib import resources

# What each stage compiles on the CPU: (family, kernel names) with family the module kernels/<family>_cpu.py;
# read from the cache index files an empty NUMBA_CACHE_DIR holds after each warm-up step.
_NORMALIZE = ("core", ("normalize_sizes", "normalize_write"))
KERNELS: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "dedup": (("core", ("normalize_sizes", "normalize_write", "exact_hashes", "shingle_sets", "minhash_signatures",
                    "band_keys", "union_find", "_find", "representative_components")),),
    "paragraph": (("bloom", ("span_norm_sizes", "span_norm_hash", "split_count", "split_write", "cut_copy",
                             "bloom_insert", "bloom_query")),),
    "screen": (("bloom", ("word_spans", "ngram_hashes", "member_sorted")), _NORMALIZE),
    "lm-train": (("lm", ("lm_count_words", "lm_word_hashes")), _NORMALIZE),
    "lm-score": (("lm", ("lm_span_hashes", "lm_ngram_keys", "lm_score_docs", "lm_build_table", "lm_build_vocab")),
                 _NORMALIZE),
    "domain": (("domain", ("domain_stats",)),),
    "rules": (("features", ("rule_stats", "_rule_stats_doc", "_ngram_stats", "_sorted_groups_dup", "char_counts")),),
    "dsir": (("features", ("feature_ids", "feature_log_weights")), _NORMALIZE),  # DSIR reads normalized text
    "fasttext": (("fasttext", ("ft_hidden", "ft_label_prob", "ft_predict", "ft_build_vocab_table", "ft_hash_spans",
                               "ft_vocab_subwords")),),
    # the CPU's LCP array is pydivsufsort's Kasai: substring_cpu.lcp_kasai (the GPU kernel's twin, for tests) is not
    # compiled by a CPU run, and listing it made every warm substring run announce "compiling 1 kernel"
    "substring": (("bloom", ("span_norm_sizes", "span_norm_hash", "cut_copy")),),
}
# Compile CPU seconds of each kernel above from an empty cache, measured on an idle 2-core machine (AMD EPYC VM,
# load average under 1.1, 2026-12-02) by `python benchmarks/first_runs.py --table` (char_counts by `first_runs.py
# filter --table`): what a first run's "compiling N kernels (~S s)" line sums (compile_seconds). A kernel whose
# compile includes shared device functions (normalize_sizes) carries their cost; a helper dispatcher compiled
# inside its caller's compile (_find, _ngram_stats, ...) costs 0 here, its caller's figure holds it.
COMPILE_S: dict[str, float] = {
    "bloom.bloom_insert": 0.77, "bloom.bloom_query": 0.74, "bloom.cut_copy": 0.99, "bloom.member_sorted": 0.51,
    "bloom.ngram_hashes": 3.71, "bloom.span_norm_hash": 2.52, "bloom.span_norm_sizes": 5.14,
    "bloom.split_count": 2.38, "bloom.split_write": 0.88, "bloom.word_spans": 1.34, "core._find": 0.0,
    "core.band_keys": 0.75, "core.exact_hashes": 1.99, "core.minhash_signatures": 3.8, "core.normalize_sizes": 4.58,
    "core.normalize_write": 1.31, "core.representative_components": 1.79, "core.shingle_sets": 2.9,
    "core.union_find": 0.4, "domain.domain_stats": 3.08, "fasttext.ft_build_vocab_table": 0.1,
    "fasttext.ft_hash_spans": 0.18, "fasttext.ft_hidden": 4.44, "fasttext.ft_label_prob": 2.56,
    "fasttext.ft_predict": 3.82, "fasttext.ft_vocab_subwords": 2.58, "features._ngram_stats": 0.0,
    "features._rule_stats_doc": 0.0, "features._sorted_groups_dup": 0.0, "features.char_counts": 0.88,
    "features.feature_ids": 2.51, "features.feature_log_weights": 0.93, "features.rule_stats": 8.22,
    "lm.lm_build_table": 0.17, "lm.lm_build_vocab": 0.21, "lm.lm_count_words": 0.69, "lm.lm_ngram_keys": 0.58,
    "lm.lm_score_docs": 3.17, "lm.lm_span_hashes": 1.49, "lm.lm_word_hashes": 2.23,
}
# command -> the stages (KERNELS) its warm-up compiles
COMMANDS: dict[str, tuple[str, ...]] = {
    "run": ("dedup",),
    "paragraph": ("paragraph",),
    "screen": ("screen",),
    "train-lm": ("lm-train",),
    "filter": ("domain", "rules", "dsir", "lm-score", "fasttext"),
    "substring": ("substring",),
}


def cpu_kernels(family: str) -> list:
    """The cached CPU kernels (numba dispatchers with ``cache=True``) of ``kernels/<family>_cpu.py``."""
    mod = importlib.import_module(f"{__package__}.kernels.{family}_cpu")
    return [v for v in vars(mod).values() if getattr(v, "_cache", None) is not None and hasattr(v, "py_func")
            and getattr(v, "__module__", None) == mod.__name__]


def _index_path(k) -> str | None:
    return getattr(getattr(getattr(k, "_cache", None), "_cache_file", None), "_index_path", None)


def uncached_kernels(stages: tuple[str, ...]) -> list[str]:
    """The CPU kernels of ``stages`` (``KERNELS``' names) with no cached machine code yet, as "family.kernel"
    (``COMPILE_S``' keys), each once."""
    seen: set[str] = set()
    out: list[str] = []
    for stage in stages:
        for fam, names in KERNELS[stage]:
            by_name = {k.__name__: k for k in cpu_kernels(fam)}
            for name in names:
                p = _index_path(by_name[name])
                if p and p not in seen and not os.path.exists(p):
                    seen.add(p)
                    out.append(f"{fam}.{name}")
    return out


def uncached(stages: tuple[str, ...]) -> int:
    """How many CPU kernels of ``stages`` (``KERNELS``' names) have no cached machine code yet."""
    return len(uncached_kernels(stages))


def compile_seconds(kernels: list[str]) -> float:
    """The estimated compile time of ``kernels`` ("family.kernel"): ``COMPILE_S``' measured figures, and
    ``constants.COMPILE_S_PER_KERNEL`` for a kernel the table does not list."""
    from .constants import COMPILE_S_PER_KERNEL

    return sum(COMPILE_S.get(k, COMPILE_S_PER_KERNEL) for k in kernels)


_compiled_s = 0.0  # wall seconds this process spent in top-level Numba compiles (compile_clock)
_listening = False


def compile_clock() -> float:
    """Wall seconds this process has spent compiling Numba functions so far: top-level compiles only (a device
    function compiled inside a kernel's compile is counted once, in the kernel's), from Numba's
    ``numba:compile`` events; a listener is registered on the first call. The run skeleton (``run.Steps``)
    reads it around each step, so that a first run's compilation gets its own ``timings_s.compile`` entry and
    stays out of the step timings and the throughput."""
    global _listening
    if not _listening:
        import threading

        from numba.core import event

        depth = threading.local()

        class _Clock(event.Listener):
            def on_start(self, ev) -> None:
                stack = depth.__dict__.setdefault("starts", [])
                stack.append(time.perf_counter())

            def on_end(self, ev) -> None:
                global _compiled_s
                stack = depth.__dict__.setdefault("starts", [])
                if stack:
                    t = stack.pop()
                    if not stack:
                        _compiled_s += time.perf_counter() - t

        event.register("numba:compile", _Clock())
        _listening = True
    return _compiled_s


SAMPLE_DOCS = 60  # documents of the bundled sample a warm-up (or precompile) run reads


def write_sample(path: str, n: int = SAMPLE_DOCS) -> str:
    """The first ``n`` documents of the bundled sample as a JSON Lines file at ``path``: what a warm-up or
    precompile run reads."""
    data = (resources.files(__package__) / "data" / "sample.jsonl.gz").read_bytes()
    with open(path, "wb") as fh:
        fh.write(b"\n".join(gzip.decompress(data).splitlines()[:n]) + b"\n")
    return path
