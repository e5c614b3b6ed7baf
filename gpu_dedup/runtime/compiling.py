"""Which CPU kernels each stage compiles and which of them have no cached machine code yet: what a first run
says before its progress bar (``device.note_compiling``) and what ``gpu-dedup warmup`` compiles ahead
(``warmup``), and compiling some stages' kernels ahead in a second process (``start_ahead``) while this one
compiles others. Imports only the kernel modules, so that device.py can use it."""
from __future__ import annotations

import gzip
import importlib
import json
import logging
import os
import subprocess
import sys
import time
from importlib import resources

logger = logging.getLogger(__name__)

# What each stage compiles on the CPU: (family, kernel names) with family the module kernels/<family>_cpu.py;
# read from the cache index files an empty NUMBA_CACHE_DIR holds after each warm-up step.
_NORMALIZE = ("core", ("normalize_sizes", "normalize_write"))
KERNELS: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "dedup": (("core", ("normalize_sizes", "normalize_write", "exact_hashes", "shingle_sets", "compact_sets",
                    "sketch_signatures", "band_keys", "union_find", "_find", "representative_components")),),
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
# core.sketch_signatures (the fss family, issue 38): `first_runs.py run --table` on 2026-12-04, load average 7.
# core.compact_sets (verification's set compaction): its own compile, CPU seconds, empty cache, 2026-12-05, load ~3.
# lm.lm_score_docs (the read-ahead scorer, its per-token functions inlined): its own compile after lm_ngram_keys's,
# CPU seconds, empty NUMBA_CACHE_DIR, 2026-12-05, load ~2.5.
COMPILE_S: dict[str, float] = {
    "bloom.bloom_insert": 0.77, "bloom.bloom_query": 0.74, "bloom.cut_copy": 0.99, "bloom.member_sorted": 0.51,
    "bloom.ngram_hashes": 3.71, "bloom.span_norm_hash": 2.52, "bloom.span_norm_sizes": 5.14,
    "bloom.split_count": 2.38, "bloom.split_write": 0.88, "bloom.word_spans": 1.34, "core._find": 0.0,
    "core.band_keys": 0.75, "core.compact_sets": 0.71, "core.exact_hashes": 1.99, "core.sketch_signatures": 4.22,
    "core.normalize_sizes": 4.58, "core.normalize_write": 1.31, "core.representative_components": 1.79,
    "core.shingle_sets": 2.9, "core.union_find": 0.4, "domain.domain_stats": 3.08, "fasttext.ft_build_vocab_table": 0.1,
    "fasttext.ft_hash_spans": 0.18, "fasttext.ft_hidden": 4.44, "fasttext.ft_label_prob": 2.56,
    "fasttext.ft_predict": 3.82, "fasttext.ft_vocab_subwords": 2.58, "features._ngram_stats": 0.0,
    "features._rule_stats_doc": 0.0, "features._sorted_groups_dup": 0.0, "features.char_counts": 0.88,
    "features.feature_ids": 2.51, "features.feature_log_weights": 0.93, "features.rule_stats": 8.22,
    "lm.lm_build_table": 0.17, "lm.lm_build_vocab": 0.21, "lm.lm_count_words": 0.69, "lm.lm_ngram_keys": 0.58,
    "lm.lm_score_docs": 4.87, "lm.lm_span_hashes": 1.49, "lm.lm_word_hashes": 2.23,
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
    mod = importlib.import_module(f"{__name__.partition('.')[0]}.kernels.{family}_cpu")
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
    from ..constants import COMPILE_S_PER_KERNEL

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


# ------------------------------------------------------------------------- compiling ahead, in a second process
# Numba compiles on one core, and a filter run's kernel families are independent: on a machine with two or more
# cores a helper process compiles the families that need no model (the rules, the domain rules) into the on-disk
# cache while this process loads the models and compiles the rest. Numba's cache has no lock (two processes
# saving one function's index can pair an entry with the other's code), so no function may be compiled by both:
# the helper compiles only its stages' kernels (tests/filters/test_ahead.py checks which it compiles), and this
# process waits for the helper before it launches any of them (``await_ahead``, called by device.run_kernel),
# then loads them from the cache. "0" in this variable turns it off.
AHEAD_ENV = "GPU_DEDUP_COMPILE_AHEAD"
AHEAD_TIMEOUT_S = 600.0  # a helper still compiling after this is killed, and this process compiles itself
_awaiting: dict[str, "Ahead"] = {}  # "family.kernel" -> the helper compiling it


class Ahead:
    """A helper process compiling the kernels of ``stages`` (``kernels``: "family.kernel") ahead
    (``start_ahead``)."""

    def __init__(self, process: subprocess.Popen, stages: tuple[str, ...], kernels: tuple[str, ...]) -> None:
        self.process, self.stages, self.kernels = process, stages, kernels
        for k in kernels:
            _awaiting[k] = self

    def wait(self, quiet: bool = False) -> None:
        """Block until the helper has exited (its kernels are then in the cache), then forget it. A helper that
        failed only costs its time: this process compiles what it finds uncached, as without a helper (said in
        one line unless ``quiet``). The seconds spent waiting count as compiling (``compile_clock``)."""
        global _compiled_s
        t = time.perf_counter()
        try:
            code = self.process.wait(AHEAD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        finally:
            for k in self.kernels:
                if _awaiting.get(k) is self:
                    del _awaiting[k]
            compile_clock()  # the listener is on, so _compiled_s is this process's clock
            _compiled_s += time.perf_counter() - t
        if code != 0 and not quiet:
            logger.info("compiling ahead in a second process failed (exit code %s): compiling here instead", code)

    def kill(self) -> None:
        """Stop the helper now (this run failed or was interrupted); a cache file it was writing is replaced
        atomically or not at all."""
        if self.process.poll() is None:
            self.process.kill()
        self.wait(quiet=True)


def await_ahead(family: str | None, name: str) -> None:
    """Before a CPU kernel launch: wait for the helper compiling kernel ``family.name``, if there is one."""
    if _awaiting:
        a = _awaiting.get(f"{family}.{name}")
        if a is not None:
            a.wait()


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def start_ahead(stages: tuple[str, ...], others: tuple[str, ...], code: str, args: dict) -> Ahead | None:
    """Compile the kernels of ``stages`` (``KERNELS``' names) in a second Python process that runs ``code``
    (``python -c code JSON``, ``args`` as the JSON) while this process compiles those of ``others``.

    Returns:
        The helper, or None when it would not help: ``AHEAD_ENV`` is "0", one core, nothing of ``stages`` or
        nothing of ``others`` to compile (no overlap to gain), or the process cannot start.
    """
    if os.environ.get(AHEAD_ENV, "1") == "0" or _cores() < 2:
        return None
    if not uncached_kernels(stages) or not uncached_kernels(others):
        return None
    keys = tuple(f"{fam}.{name}" for st in stages for fam, names in KERNELS[st] for name in names)
    if any(k in _awaiting for k in keys):
        return None
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the child imports this package
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])}
    try:
        proc = subprocess.Popen([sys.executable, "-c", code, json.dumps(args)], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    except OSError as exc:
        logger.debug("compiling ahead: cannot start %s (%s)", sys.executable, exc)
        return None
    return Ahead(proc, stages, keys)


SAMPLE_DOCS = 60  # documents of the bundled sample a warm-up (or precompile) run reads


def _sample_lines(n: int) -> list[bytes]:
    """The JSON lines of the bundled sample's first ``n`` documents."""
    data = (resources.files(__name__.partition('.')[0]) / "data" / "sample.jsonl.gz").read_bytes()
    return gzip.decompress(data).splitlines()[:n]


def sample_texts(n: int = SAMPLE_DOCS) -> list[str]:
    """The text of the bundled sample's first ``n`` documents (what a compile-ahead helper scores)."""
    return [json.loads(line)["text"] for line in _sample_lines(n)]


def _repeat_pair() -> list[bytes]:
    """Two near-duplicate documents whose text repeats itself: verifying them finds repeated shingles, which
    only then go through ``compact_sets`` (ops/core.shingle_sets), a kernel the bundled sample's candidates
    never reach; without them that kernel stayed uncached and every run compiled the sample again."""
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
    text = " ".join(words * 3 + ["nu", "xi", "omicron", "pi", "rho"])
    return [json.dumps({"id": f"warm-repeat-{k}", "text": text + end}).encode()
            for k, end in enumerate((" sigma", " tau"))]


def write_sample(path: str, n: int = SAMPLE_DOCS) -> str:
    """The first ``n`` documents of the bundled sample, and ``_repeat_pair``, as a JSON Lines file at ``path``:
    what a warm-up or precompile run reads (every dedup kernel runs on it)."""
    with open(path, "wb") as fh:
        fh.write(b"\n".join(_sample_lines(n) + _repeat_pair()) + b"\n")
    return path
